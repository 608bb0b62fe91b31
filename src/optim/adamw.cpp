// AdamW step scalars: the Python float64 maths of torch's `_single_tensor_adam`, rounded to fp32 as
// torch's kernels round a Scalar. The CPU loop is in adamw_cpu.cpp.
#include "optim/adamw.h"

#include <cmath>

#include "core/error.h"

namespace zt::optim {

AdamWStep adamw_step(const AdamWParams& params, double lr, int64_t step, float grad_scale) {
  // torch.optim.AdamW's constructor checks, same conditions.
  if (!(lr >= 0.0)) fail("AdamW: invalid learning rate {} (expected >= 0)", lr);
  if (!(params.eps >= 0.0)) fail("AdamW: invalid epsilon {} (expected >= 0)", params.eps);
  if (!(params.beta1 >= 0.0 && params.beta1 < 1.0))
    fail("AdamW: invalid beta1 {} (expected 0 <= beta1 < 1)", params.beta1);
  if (!(params.beta2 >= 0.0 && params.beta2 < 1.0))
    fail("AdamW: invalid beta2 {} (expected 0 <= beta2 < 1)", params.beta2);
  if (!(params.weight_decay >= 0.0))
    fail("AdamW: invalid weight_decay {} (expected >= 0)", params.weight_decay);
  if (step < 1) fail("AdamW: step {} (expected the 1-based number of this update, >= 1)", step);

  AdamWStep s;
  s.grad_scale = grad_scale;
  s.decay = params.weight_decay != 0.0;
  s.decay_factor = s.decay ? static_cast<float>(1.0 - lr * params.weight_decay) : 1.0f;
  const float w = static_cast<float>(1.0 - params.beta1);
  s.lerp_from_m = std::fabs(w) < 0.5f;  // torch's is_lerp_weight_small, on the fp32 weight
  s.lerp_coef = s.lerp_from_m ? w : w - 1.0f;
  s.beta2 = static_cast<float>(params.beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - params.beta2);
  // torch: step = state_steps[i].item() (an fp32 tensor's value, as a Python float).
  const double t = static_cast<double>(static_cast<float>(step));
  const double bias_correction1 = 1.0 - std::pow(params.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(params.beta2, t);
  const double step_size = lr / bias_correction1;
  s.bias_correction2_sqrt = static_cast<float>(std::pow(bias_correction2, 0.5));
  s.eps = static_cast<float>(params.eps);
  s.neg_step_size = static_cast<float>(-step_size);
  return s;
}

}  // namespace zt::optim
