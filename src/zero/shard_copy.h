// ShardCopy: the element copies between a group's storage (the model's layout: ParamLayout offsets
// from the group's first element) and rank-major shard buffers (ShardLayout: rank r's shard-buffer
// element j at data + r·stride + j − shift), one Ops::cast per tensor segment on a given stream.
// Used by the gradient reducer (pack a group's gradient into a bucket), the weight gatherer
// (unpack gathered shards into a group's storage) and the engine (shard the initial weights).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/ops.h"
#include "zero/shard_layout.h"

namespace zt::zero {

// A rank-major buffer: rank r's shard-buffer element j is at data + r*stride + j - shift.
struct RankMajor {
  void* data;
  DType dtype;
  int64_t stride;
  int64_t shift;
};

// Group g's storage: model element (ParamLayout offset) e of group g is at base + (e −
// group_model_begin(g)) elements.
struct GroupPtr {
  void* base;
  DType dtype;
};

// base + elem elements of es bytes.
inline void* elem_at(void* base, int64_t elem, size_t es) {
  return static_cast<char*>(base) + static_cast<size_t>(elem) * es;
}

class ShardCopy {
 public:
  ShardCopy(const ShardLayout& layout, Ops& ops) : layout_(layout), ops_(ops) {}

  // Group storage → rank-major buffer, group g, ranks [r0, r1) (rank r0 at dst.data's row 0),
  // shard columns [lo, hi) (positions in a rank's shard buffer; default: the whole group): every
  // shard segment is converted (Ops::cast: a copy for equal dtypes) and its padding zeroed.
  void pack(int g, GroupPtr src, const RankMajor& dst, int r0, int r1, Stream s, int64_t lo = 0,
            int64_t hi = INT64_MAX) const;
  // One rank (W = 1): the shard buffer's group g columns += the group storage's elements (fp32
  // Ops::add per tensor segment, data elements only: the padding keeps its value). Bitwise pack
  // into a zeroed buffer followed by Ops::add(dst, dst, buffer), without the buffer.
  void pack_add(int g, GroupPtr src, const RankMajor& dst, Stream s) const;
  // Rank-major buffer → group storage, group g, ranks [r0, r1) (data elements only).
  void unpack(int g, const RankMajor& src, GroupPtr dst, int r0, int r1, Stream s) const;
  // A 1-D view [n] of `p` on the Ops device.
  Tensor dev(void* p, DType dt, int64_t n) const { return Tensor(p, dt, {n}, ops_.device()); }

 private:
  const ShardLayout& layout_;
  Ops& ops_;
};

}  // namespace zt::zero
