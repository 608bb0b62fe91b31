// Learning-rate schedules of transformers' get_scheduler (TrainingArguments.lr_scheduler_type and
// lr_scheduler_kwargs), as torch's LambdaLR applies them: the lr of optimizer step k (0-based) is
// base_lr * lambda(k), the lambda evaluated in Python float64 and the product rounded once.
// SFT_SEMANTICS §4; transformers 4.57.1 optimization.py.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "core/enum_names.h"
#include "io/json.h"

namespace zt::optim {

// The supported `lr_scheduler_type` values (every one of transformers 4.57's but
// reduce_lr_on_plateau).
enum class LrScheduleKind {
  kLinear,
  kCosine,
  kConstant,
  kConstantWithWarmup,
  kCosineWithRestarts,
  kPolynomial,
  kInverseSqrt,
  kCosineWithMinLr,
  kCosineWarmupWithMinLr,
  kWarmupStableDecay
};
inline constexpr EnumName<LrScheduleKind> kLrScheduleNames[] = {
    {LrScheduleKind::kLinear, "linear"},
    {LrScheduleKind::kCosine, "cosine"},
    {LrScheduleKind::kConstant, "constant"},
    {LrScheduleKind::kConstantWithWarmup, "constant_with_warmup"},
    {LrScheduleKind::kCosineWithRestarts, "cosine_with_restarts"},
    {LrScheduleKind::kPolynomial, "polynomial"},
    {LrScheduleKind::kInverseSqrt, "inverse_sqrt"},
    {LrScheduleKind::kCosineWithMinLr, "cosine_with_min_lr"},
    {LrScheduleKind::kCosineWarmupWithMinLr, "cosine_warmup_with_min_lr"},
    {LrScheduleKind::kWarmupStableDecay, "warmup_stable_decay"}};
constexpr std::span<const EnumName<LrScheduleKind>> enum_names(LrScheduleKind) {
  return kLrScheduleNames;
}

// The shape of warmup_stable_decay's warm-up or decay (its warmup_type / decay_type).
enum class WsdShape { kLinear, kCosine, kOneMinusSqrt };
inline constexpr EnumName<WsdShape> kWsdShapeNames[] = {{WsdShape::kLinear, "linear"},
                                                        {WsdShape::kCosine, "cosine"},
                                                        {WsdShape::kOneMinusSqrt, "1-sqrt"}};
constexpr std::span<const EnumName<WsdShape>> enum_names(WsdShape) { return kWsdShapeNames; }

// "linear" | "cosine" | … -> kind. Throws zt::Error naming the value and listing the accepted
// names otherwise.
LrScheduleKind parse_lr_schedule_kind(std::string_view name);

// The HF name of a kind ("linear", …).
std::string_view lr_schedule_name(LrScheduleKind kind);

// Warm-up length in optimizer steps, as TrainingArguments.get_warmup_steps: warmup_steps >= 1 is a
// step count (truncated, int(warmup_steps)); 0 < warmup_steps < 1 is a ratio of total_steps
// (transformers 5: ceil(total_steps * warmup_steps)); warmup_steps == 0 falls back to the
// transformers 4 field warmup_ratio (ceil(total_steps * warmup_ratio), 0 when it is 0). Throws
// zt::Error for negative values, a warmup_ratio > 1 or total_steps < 0.
int64_t resolve_warmup_steps(int64_t total_steps, double warmup_steps, double warmup_ratio = 0.0);

// One schedule: kind, base lr (`learning_rate`), warm-up and total optimizer steps, and the
// arguments lr_scheduler_kwargs gives (set by apply_lr_scheduler_kwargs; defaults as
// transformers 4.57's schedule functions).
struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kLinear;
  double base_lr = 2e-5;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  // optimizer.defaults["lr"]: this run's learning_rate, also on resume (where base_lr becomes the
  // checkpoint's). polynomial divides by it; cosine*_with_min_lr's min_lr is made a rate with it.
  double init_lr = 2e-5;
  double num_cycles = 0.5;   // cosine, cosine*_with_min_lr, warmup_stable_decay; restarts: 1
  double lr_end = 1e-7;      // polynomial
  double power = 1.0;        // polynomial
  int64_t timescale = 0;     // inverse_sqrt: warmup_steps, or 10000 when that is 0
  double min_lr_rate = 0.0;  // cosine*_with_min_lr
  std::optional<double> warmup_lr_rate;  // cosine_warmup_with_min_lr
  int64_t num_stable_steps = 0;          // warmup_stable_decay
  int64_t num_decay_steps = 0;           // warmup_stable_decay
  WsdShape warmup_type = WsdShape::kLinear;
  WsdShape decay_type = WsdShape::kCosine;
  double min_lr_ratio = 0.0;  // warmup_stable_decay

  // transformers' lr lambda at optimizer step k (0-based), float64, each in the order of
  // operations of optimization.py (warm-up: k / max(1, warmup) unless said otherwise):
  //   linear: max(0, (total-k) / max(1, total-warmup));
  //   cosine: max(0, 0.5 * (1 + cos(pi * num_cycles * 2 * progress))), progress = (k-warmup) /
  //           max(1, total-warmup);
  //   constant: 1 (get_scheduler ignores warm-up for it); constant_with_warmup: 1 after warm-up;
  //   cosine_with_restarts: 0 once progress >= 1, else 0.5 * (1 + cos(pi * ((cycles * progress)
  //           % 1))), Python's % (in [0, 1] for a negative num_cycles too: python_float_mod);
  //   polynomial: ((init_lr - lr_end) * (1 - (k-warmup) / (total-warmup))^power + lr_end) /
  //           init_lr, lr_end / init_lr after total;
  //   inverse_sqrt: 1 / sqrt((k + timescale - warmup) / timescale);
  //   cosine_with_min_lr: the cosine factor f, then f * (1 - min_lr_rate) + min_lr_rate;
  //   cosine_warmup_with_min_lr: warm-up (k+1) / max(1, warmup) (or warmup_lr_rate + (1 -
  //           warmup_lr_rate) * k / max(1, warmup-1)), progress (k - warmup + 1) / max(1,
  //           total-warmup), then as cosine_with_min_lr;
  //   warmup_stable_decay: warm-up and decay of their shapes scaled into [min_lr_ratio, 1], 1 in
  //           the stable steps, min_lr_ratio after.
  double lambda(int64_t step) const;
  // base_lr * lambda(step): the lr optimizer step `step` uses (HF logs it as learning_rate).
  double lr(int64_t step) const { return base_lr * lambda(step); }
};

// The first optimizer step (0-based) in [0, s.total_steps) whose learning rate s.lr(k) is negative
// or not finite, with that rate; nullopt when every step's is a number >= 0. zerotune's AdamW
// refuses such a rate (torch.optim.AdamW checks lr >= 0 only when it is built, so transformers
// trains on with what the schedule gives, e.g. polynomial with lr_end < 0).
std::optional<std::pair<int64_t, double>> first_invalid_lr(const LrSchedule& s);
// Why `bad` (from first_invalid_lr) is refused, for an error message: the schedule, the step
// (1-based, as logged) and its rate.
std::string invalid_lr_reason(const LrSchedule& s, std::pair<int64_t, double> bad);

// Whether transformers 4.57's get_scheduler builds `kind` without scheduler_specific_kwargs
// (constant, constant_with_warmup, inverse_sqrt): lr_scheduler_kwargs given to it do nothing.
bool lr_schedule_ignores_kwargs(LrScheduleKind kind);

// Applies `kwargs` (trainer.lr_scheduler_kwargs as TrainingArguments.__post_init__ leaves it: a
// mapping, null, or a string it did not parse, cli::hf_dict_field_value) to `s`, whose kind,
// init_lr, warmup_steps and total_steps are set, as transformers 4.57's get_scheduler passes
// them: constant, constant_with_warmup and inverse_sqrt ignore them (any value); linear
// takes none; cosine num_cycles; cosine_with_restarts num_cycles (an integer); polynomial lr_end
// (< learning_rate) and power; cosine_with_min_lr min_lr or min_lr_rate (exactly one) and
// num_cycles, cosine_warmup_with_min_lr also warmup_lr_rate; warmup_stable_decay num_decay_steps
// (required), num_stable_steps (default total - warmup - decay), warmup_type / decay_type
// (linear, cosine, 1-sqrt), min_lr_ratio, num_cycles. A bool given for a number is 1 / 0, as
// Python computes with it (_convert_str_dict makes "true" True). Also sets inverse_sqrt's
// timescale. Throws
// zt::Error (the caller adds file, line and key) for a value that is no mapping (a string
// included: get_scheduler's `**kwargs` raises TypeError), a key the schedule does not take, a value
// of the wrong type, or a missing required one.
void apply_lr_scheduler_kwargs(LrSchedule* s, const Json& kwargs);

}  // namespace zt::optim
