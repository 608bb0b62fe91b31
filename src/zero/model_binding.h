// The flat buffers of a CausalLM as the ZeroEngine takes them. Header-only on purpose: the zt_zero
// library keeps no link dependency on zt_model (whoever includes this links the model anyway).
#pragma once

#include "core/error.h"
#include "model/causal_lm.h"
#include "zero/zero_engine.h"

namespace zt::zero {

// ModelBuffers of `model`: its own parameter buffer as one flat [layout().total_elems()] tensor of
// the compute dtype and its own gradient buffer (ParamLayout offsets count from their starts) —
// or, for a model built with own_weights / own_grads = false, an empty tensor of that dtype and
// device plus the binding callback (CausalLM::bind_group_weights / bind_group_grads), so the
// engine provides the storage. The views and callbacks stay valid while the model lives.
inline ModelBuffers model_buffers(CausalLM& model) {
  ModelBuffers b;
  const Device dev = model.ops().device();
  if (model.options().own_weights) {
    b.weights = model.all_weights();
  } else {
    b.weights = Tensor(nullptr, model.options().dtype, {0}, dev);
    b.bind_weights = [&model](int g, void* base) { model.bind_group_weights(g, base); };
  }
  if (model.options().own_grads) {
    b.grads = model.all_grads();
  } else {
    b.grads = Tensor(nullptr, DType::kF32, {0}, dev);
    b.bind_grads = [&model](int g, float* base) { model.bind_group_grads(g, base); };
  }
  return b;
}

}  // namespace zt::zero
