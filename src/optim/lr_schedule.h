// Learning-rate schedules of transformers' get_scheduler (TrainingArguments.lr_scheduler_type), as
// torch's LambdaLR applies them: the lr of optimizer step k (0-based) is base_lr * lambda(k), the
// lambda evaluated in Python float64 and the product rounded once. SFT_SEMANTICS §4.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "core/enum_names.h"

namespace zt::optim {

// The supported `lr_scheduler_type` values.
enum class LrScheduleKind { kLinear, kCosine, kConstant, kConstantWithWarmup };
inline constexpr EnumName<LrScheduleKind> kLrScheduleNames[] = {
    {LrScheduleKind::kLinear, "linear"},
    {LrScheduleKind::kCosine, "cosine"},
    {LrScheduleKind::kConstant, "constant"},
    {LrScheduleKind::kConstantWithWarmup, "constant_with_warmup"}};
constexpr std::span<const EnumName<LrScheduleKind>> enum_names(LrScheduleKind) {
  return kLrScheduleNames;
}

// "linear" | "cosine" | "constant" | "constant_with_warmup" -> kind. Throws zt::Error naming the
// value and listing the accepted names otherwise.
LrScheduleKind parse_lr_schedule_kind(std::string_view name);

// The HF name of a kind ("linear", …).
std::string_view lr_schedule_name(LrScheduleKind kind);

// Warm-up length in optimizer steps, as TrainingArguments.get_warmup_steps: warmup_steps >= 1 is a
// step count (truncated, int(warmup_steps)); 0 < warmup_steps < 1 is a ratio of total_steps
// (transformers 5: ceil(total_steps * warmup_steps)); warmup_steps == 0 falls back to the
// transformers 4 field warmup_ratio (ceil(total_steps * warmup_ratio), 0 when it is 0). Throws
// zt::Error for negative values, a warmup_ratio > 1 or total_steps < 0.
int64_t resolve_warmup_steps(int64_t total_steps, double warmup_steps, double warmup_ratio = 0.0);

// One schedule: kind, base lr (`learning_rate`), warm-up and total optimizer steps.
struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kLinear;
  double base_lr = 2e-5;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;

  // transformers' lr lambda at optimizer step k (0-based), float64:
  //   warm-up (all but constant): k / max(1, warmup) for k < warmup;
  //   linear: max(0, (total-k) / max(1, total-warmup));
  //   cosine: max(0, 0.5 * (1 + cos(pi * 0.5 * 2 * progress))), progress = (k-warmup) /
  //           max(1, total-warmup);
  //   constant: 1 (get_scheduler ignores warm-up for it); constant_with_warmup: 1 after warm-up.
  double lambda(int64_t step) const;
  // base_lr * lambda(step): the lr optimizer step `step` uses (HF logs it as learning_rate).
  double lr(int64_t step) const { return base_lr * lambda(step); }
};

}  // namespace zt::optim
