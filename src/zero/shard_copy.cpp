#include "zero/shard_copy.h"

#include <algorithm>

#include "core/error.h"

namespace zt::zero {

void ShardCopy::pack(int g, GroupPtr src, const RankMajor& dst, int r0, int r1, Stream s,
                     int64_t lo, int64_t hi) const {
  const size_t des = dtype_size(dst.dtype), ses = dtype_size(src.dtype);
  const int64_t gb = layout_.group_model_begin(g);
  lo = std::max(lo, layout_.group_shard_begin(g));
  hi = std::min(hi, layout_.group_shard_end(g));
  for (int r = r0; r < r1; ++r)
    for (int i = layout_.tensor_begin(g); i < layout_.tensor_end(g); ++i) {
      const ShardTensor& t = layout_.tensor(i);
      // This tensor's columns inside the window, relative to its shard start.
      const int64_t u0 = std::max(lo, t.shard_offset) - t.shard_offset;
      const int64_t u1 = std::min(hi, t.shard_offset + t.shard_elems) - t.shard_offset;
      if (u0 >= u1) continue;
      const int64_t valid = t.valid(r), d0 = std::min(u1, valid);
      const int64_t d = static_cast<int64_t>(r - r0) * dst.stride + t.shard_offset - dst.shift;
      if (u0 < d0)
        ops_.cast(dev(elem_at(dst.data, d + u0, des), dst.dtype, d0 - u0),
                  dev(elem_at(src.base, t.model_offset - gb + r * t.shard_elems + u0, ses),
                      src.dtype, d0 - u0),
                  s);
      const int64_t z0 = std::max(u0, valid);
      if (z0 < u1) ops_.zero(dev(elem_at(dst.data, d + z0, des), dst.dtype, u1 - z0), s);
    }
}

void ShardCopy::pack_add(int g, GroupPtr src, const RankMajor& dst, Stream s) const {
  if (layout_.world_size() != 1)
    fail("ShardCopy::pack_add: world size {} (expected 1)", layout_.world_size());
  if (src.dtype != dst.dtype) fail("ShardCopy::pack_add: source and shard dtypes differ");
  const size_t es = dtype_size(dst.dtype);
  const int64_t gb = layout_.group_model_begin(g);
  for (int i = layout_.tensor_begin(g); i < layout_.tensor_end(g); ++i) {
    const ShardTensor& t = layout_.tensor(i);
    const int64_t n = t.valid(0);
    if (n == 0) continue;
    const Tensor d = dev(elem_at(dst.data, t.shard_offset - dst.shift, es), dst.dtype, n);
    ops_.add(d, d, dev(elem_at(src.base, t.model_offset - gb, es), src.dtype, n), s);
  }
}

void ShardCopy::unpack(int g, const RankMajor& src, GroupPtr dst, int r0, int r1, Stream s) const {
  const size_t ses = dtype_size(src.dtype), des = dtype_size(dst.dtype);
  const int64_t gb = layout_.group_model_begin(g);
  for (int r = r0; r < r1; ++r)
    for (int i = layout_.tensor_begin(g); i < layout_.tensor_end(g); ++i) {
      const ShardTensor& t = layout_.tensor(i);
      const int64_t valid = t.valid(r);
      if (valid == 0) continue;
      const int64_t o = static_cast<int64_t>(r - r0) * src.stride + t.shard_offset - src.shift;
      ops_.cast(
          dev(elem_at(dst.base, t.model_offset - gb + r * t.shard_elems, des), dst.dtype, valid),
          dev(elem_at(src.data, o, ses), src.dtype, valid), s);
    }
}

}  // namespace zt::zero
