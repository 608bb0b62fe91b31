// OwnedStorage: the GroupStorage of a model that keeps all its parameters itself — one flat
// compute-dtype weight buffer and one flat fp32 gradient buffer, [layout.total_elems()] each at
// ParamLayout offsets, zeroed at construction (so the padding between parameters stays 0). Every
// call is a pointer into them; nothing is gathered or reduced. Used by `zerotune loss`, the
// model's tests and the CPU reference (CausalLM built without a storage of its own choosing).
#pragma once

#include "backend/ops.h"
#include "core/arena.h"
#include "param/group_storage.h"
#include "param/param_layout.h"

namespace zt {

class OwnedStorage final : public GroupStorage {
 public:
  // Allocates both buffers on `memory` (which must outlive this) and zeroes them on `stream`.
  // Throws zt::Error on an out-of-memory (naming the pool).
  OwnedStorage(const ParamLayout& layout, DType dtype, Ops& ops, MemoryResource& memory,
               Stream stream);

  const void* weights(int g) override { return weight_base(g); }
  void release(int) override {}
  float* grads(int g) override { return grad_base(g); }
  void grads_ready(int) override {}

  // Group g's first element in the flat buffers.
  void* weight_base(int g) const;
  float* grad_base(int g) const;
  // The flat buffers: compute dtype / fp32 [layout.total_elems()].
  Tensor all_weights() const;
  Tensor all_grads() const;
  size_t weight_bytes() const { return params_.planned_bytes(); }
  size_t grad_bytes() const { return grads_.planned_bytes(); }

 private:
  const ParamLayout& layout_;
  DType dtype_;
  Arena params_, grads_;
};

}  // namespace zt
