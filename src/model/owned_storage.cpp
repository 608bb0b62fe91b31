#include "model/owned_storage.h"

namespace zt {

OwnedStorage::OwnedStorage(const ParamLayout& layout, DType dtype, Ops& ops, MemoryResource& memory,
                           Stream stream)
    : layout_(layout), dtype_(dtype), params_("parameters", memory), grads_("gradients", memory) {
  const auto n = static_cast<size_t>(layout.total_elems());
  params_.reserve("weights", n * dtype_size(dtype));
  grads_.reserve("grads", n * 4);
  params_.allocate();
  grads_.allocate();
  for (const Arena* a : {&params_, &grads_})
    ops.zero(Tensor(a->base(), DType::kU8, {static_cast<int64_t>(a->planned_bytes())}, a->device()),
             stream);
}

void* OwnedStorage::weight_base(int g) const {
  return static_cast<char*>(params_.base()) +
         static_cast<size_t>(layout_.group_begin(g)) * dtype_size(dtype_);
}

float* OwnedStorage::grad_base(int g) const {
  return static_cast<float*>(grads_.base()) + layout_.group_begin(g);
}

Tensor OwnedStorage::all_weights() const {
  return Tensor(params_.base(), dtype_, {layout_.total_elems()}, params_.device());
}

Tensor OwnedStorage::all_grads() const {
  return Tensor(grads_.base(), DType::kF32, {layout_.total_elems()}, grads_.device());
}

}  // namespace zt
