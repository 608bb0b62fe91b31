// Gradient-norm clipping helpers (DESIGN §6 "Gradient norm", SFT_SEMANTICS §4 "Clipping").
//
// The global norm is assembled from fp64 sums of squares: each rank sums its canonical shards
// (sumsq_f64, fixed order), the W partial sums are all-gathered (dist::Comm::all_gather_f64) and
// added in rank order (global_norm_from_partials) — the same bits on every rank and every ZeRO
// stage.
#pragma once

#include <cstddef>
#include <span>

namespace zt::optim {

// Sum of squares of x[0..n) in fp64, summed in a fixed order that does not depend on the thread
// count: blocks of 4096 elements, each block summed over 8 interleaved lanes (lane j takes elements
// i ≡ j mod 8, in index order) whose totals are added lane 0..7, then block totals added in block
// order. Each square is (double)x * (double)x, exact. OpenMP-parallel for large n.
double sumsq_f64(const float* x, size_t n);

// sqrt(((p[0] + p[1]) + p[2]) + …) of the per-rank fp64 sums of squares, in rank order.
// Throws zt::Error if `partials` is empty.
double global_norm_from_partials(std::span<const double> partials);

// torch.nn.utils.clip_grad_norm_'s coefficient, as the fp32 value it multiplies the gradients by:
//   clip_coef = max_norm / (total_norm + 1e-6)  ->  reciprocal(fp32(norm) + 1e-6f) * fp32(max_norm)
//   (Tensor.__rtruediv__ is reciprocal() * other), then clamp(max=1.0).
// total_norm is rounded to fp32 first (torch's norm of fp32 gradients is an fp32 tensor).
// max_norm <= 0 means no clipping (HF Trainer skips clip_grad_norm_): returns 1. A NaN or inf norm
// gives NaN or 0, as torch's does (the caller decides whether to skip the step).
float clip_coefficient(double total_norm, double max_norm);

}  // namespace zt::optim
