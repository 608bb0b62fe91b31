// The flat buffers of a CausalLM as the ZeroEngine takes them. Header-only on purpose: the zt_zero
// library keeps no link dependency on zt_model (whoever includes this links the model anyway).
#pragma once

#include "core/error.h"
#include "model/causal_lm.h"
#include "zero/zero_engine.h"

namespace zt::zero {

// ModelBuffers of `model`: its parameter buffer as one flat [layout().total_elems()] tensor of the
// compute dtype (ParamLayout offsets count from its start) and all_grads(). The views stay valid
// while the model lives.
inline ModelBuffers model_buffers(const CausalLM& model) {
  const ParamLayout& L = model.layout();
  const Tensor first = model.param(0);
  char* base = static_cast<char*>(first.data) -
               static_cast<size_t>(L.param(0).offset) * dtype_size(first.dtype);
  return {Tensor(base, first.dtype, {L.total_elems()}, first.device), model.all_grads()};
}

}  // namespace zt::zero
