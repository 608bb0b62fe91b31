// LR schedules; each lambda repeats transformers/optimization.py's float64 expression in the same
// order of operations so the rounding is the same.
#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "core/error.h"

namespace zt::optim {

LrScheduleKind parse_lr_schedule_kind(std::string_view name) {
  if (const auto k = enum_from_name<LrScheduleKind>(name)) return *k;
  std::string names;
  for (auto n : enum_name_list<LrScheduleKind>())
    names += (names.empty() ? "" : ", ") + std::string(n);
  fail("lr_scheduler_type '{}' is not supported (expected one of: {})", name, names);
}

std::string_view lr_schedule_name(LrScheduleKind kind) { return name_of(kind); }

int64_t resolve_warmup_steps(int64_t total_steps, double warmup_steps, double warmup_ratio) {
  if (total_steps < 0) fail("total optimizer steps {} (expected >= 0)", total_steps);
  if (!(warmup_steps >= 0.0)) fail("warmup_steps {} (expected >= 0)", warmup_steps);
  // [0, 1], as transformers' TrainingArguments checks it (1: warm up over the whole run).
  if (!(warmup_ratio >= 0.0 && warmup_ratio <= 1.0))
    fail("warmup_ratio {} (expected 0 <= warmup_ratio <= 1)", warmup_ratio);
  if (warmup_steps >= 1.0) return static_cast<int64_t>(warmup_steps);
  const double ratio = warmup_steps > 0.0 ? warmup_steps : warmup_ratio;
  return static_cast<int64_t>(std::ceil(static_cast<double>(total_steps) * ratio));
}

double LrSchedule::lambda(int64_t k) const {
  const auto fk = static_cast<double>(k);
  const auto fw = static_cast<double>(warmup_steps);
  switch (kind) {
    case LrScheduleKind::kConstant:
      return 1.0;
    case LrScheduleKind::kConstantWithWarmup:
      if (k < warmup_steps) return fk / std::max(1.0, fw);
      return 1.0;
    case LrScheduleKind::kLinear:
      if (k < warmup_steps) return fk / static_cast<double>(std::max<int64_t>(1, warmup_steps));
      return std::max(0.0,
                      static_cast<double>(total_steps - k) /
                          static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps)));
    case LrScheduleKind::kCosine: {
      if (k < warmup_steps) return fk / static_cast<double>(std::max<int64_t>(1, warmup_steps));
      const double progress = static_cast<double>(k - warmup_steps) /
                              static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
      // math.pi * float(num_cycles) * 2.0 * progress, num_cycles = 0.5, left to right.
      const double angle = std::numbers::pi * 0.5 * 2.0 * progress;
      return std::max(0.0, 0.5 * (1.0 + std::cos(angle)));
    }
  }
  return 1.0;
}

}  // namespace zt::optim
