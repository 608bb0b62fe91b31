// RoPE inverse frequencies (io/model_config.h rope_inv_freq), op by op in fp32 as transformers'
// `modeling_rope_utils` computes them.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"
#include "io/model_config.h"

namespace zt {

namespace {

// transformers 4.57 `_compute_yarn_parameters` from pw = base ** (arange(0, dim, 2) / dim) (fp32):
// the correction range in Python floats (`find_correction_range`, floor / ceil when truncate,
// clipped to [0, dim - 1]), the ramp `clamp((arange(dim / 2) - low) / (high - low), 0, 1)` in fp32
// (high + 0.001 when the two are equal), and `interp * (1 - e) + extrap * e` with e = 1 - ramp,
// interp = 1 / (factor * pw), extrap = 1 / pw, each op an fp32 rounding.
std::vector<float> yarn_inv_freq(const RopeConfig& rope, int64_t dim,
                                 const std::vector<float>& pw) {
  const double d = static_cast<double>(dim);
  const double orig = static_cast<double>(rope.original_max_position_embeddings);
  const auto correction_dim = [&](double rotations) {
    return (d * std::log(orig / (rotations * 2.0 * std::numbers::pi))) /
           (2.0 * std::log(rope.theta));
  };
  double low = correction_dim(rope.beta_fast);
  double high = correction_dim(rope.beta_slow);
  if (rope.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, d - 1.0);
  if (low == high) high += 0.001;
  const float lo = static_cast<float>(low);
  const float span = static_cast<float>(high - low);
  const float factor = static_cast<float>(rope.factor);
  std::vector<float> inv(pw.size());
  for (size_t i = 0; i < pw.size(); ++i) {
    const float ramp = std::clamp((static_cast<float>(i) - lo) / span, 0.0f, 1.0f);
    const float extrap_w = 1.0f - ramp;
    const float interp = 1.0f / (factor * pw[i]);
    const float extrap = 1.0f / pw[i];
    const float a = interp * (1.0f - extrap_w);
    const float b = extrap * extrap_w;
    inv[i] = a + b;
  }
  return inv;
}

}  // namespace

std::vector<float> rope_inv_freq(const ModelConfig& cfg) {
  return rope_inv_freq(cfg.rope, cfg.rotary_dim > 0 ? cfg.rotary_dim : cfg.head_dim, false);
}

std::vector<float> rope_inv_freq(const RopeConfig& rope, int64_t rotary_dim, bool long_factors) {
  const int64_t dim = rotary_dim;
  if (dim <= 0 || dim % 2 != 0) fail("rope_inv_freq: rotary_dim {} is not positive and even", dim);
  const size_t half = static_cast<size_t>(dim / 2);
  double theta = rope.theta;
  if (rope.type == RopeType::kDynamic) {
    // `base * ((factor * seq_len / max_position_embeddings) - (factor - 1)) ** (dim / (dim - 2))`
    // in Python floats, seq_len = max_position_embeddings (its value until a longer sequence).
    const double L = static_cast<double>(rope.original_max_position_embeddings);
    const double d = static_cast<double>(dim);
    theta = theta * std::pow((rope.factor * L / L) - (rope.factor - 1.0), d / (d - 2.0));
  }
  const float base = static_cast<float>(theta);
  // base ** (arange(0, dim, 2).float() / dim): the exponent an fp32 division, the power fp32
  // (correctly rounded from the double power).
  std::vector<float> pw(half);
  for (size_t i = 0; i < half; ++i) {
    const float e = static_cast<float>(2 * static_cast<int64_t>(i)) / static_cast<float>(dim);
    pw[i] = static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(e)));
  }
  std::vector<float> inv(half);
  if (rope.type == RopeType::kLongrope) {
    // `1.0 / (ext_factors * base**inv_freq_shape)`, ext_factors = tensor(list, float32).
    const std::vector<double>& ext = long_factors ? rope.long_factor : rope.short_factor;
    if (ext.size() != half)
      fail("rope_inv_freq: longrope {} has {} values, expected rotary_dim / 2 = {}",
           long_factors ? "long_factor" : "short_factor", ext.size(), half);
    for (size_t i = 0; i < half; ++i) inv[i] = 1.0f / (static_cast<float>(ext[i]) * pw[i]);
    return inv;
  }
  if (rope.type == RopeType::kYarn) return yarn_inv_freq(rope, dim, pw);
  for (size_t i = 0; i < half; ++i) inv[i] = 1.0f / pw[i];
  if (rope.type == RopeType::kDefault || rope.type == RopeType::kDynamic) return inv;
  if (rope.type == RopeType::kLinear) {
    // `inv_freq /= factor` (fp32 tensor by a Python float: fp32 division).
    const float factor = static_cast<float>(rope.factor);
    for (float& f : inv) f = f / factor;
    return inv;
  }

  // kLlama3: transformers `_compute_llama3_parameters`, op by op in fp32. Python scalars meet fp32
  // tensors as fp32 (wrapped numbers do not promote); `s / t` is `t.reciprocal() * s`.
  const float factor = static_cast<float>(rope.factor);
  const float low = static_cast<float>(rope.low_freq_factor);
  const double old_ctx = static_cast<double>(rope.original_max_position_embeddings);
  const float low_freq_wavelen = static_cast<float>(old_ctx / rope.low_freq_factor);
  const float high_freq_wavelen = static_cast<float>(old_ctx / rope.high_freq_factor);
  const float two_pi = static_cast<float>(2.0 * std::numbers::pi);
  const float old_ctx_f = static_cast<float>(old_ctx);
  const float denom = static_cast<float>(rope.high_freq_factor - rope.low_freq_factor);
  for (float& f : inv) {
    const float wavelen = (1.0f / f) * two_pi;
    const float llama = wavelen > low_freq_wavelen ? f / factor : f;
    const float smooth = ((1.0f / wavelen) * old_ctx_f - low) / denom;
    const float smoothed = ((1.0f - smooth) * llama) / factor + smooth * llama;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    f = medium ? smoothed : llama;
  }
  return inv;
}

}  // namespace zt
