// LR schedules; each lambda repeats transformers/optimization.py's float64 expression in the same
// order of operations so the rounding is the same.
#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/python_float.h"

namespace zt::optim {
namespace {

constexpr double kPi = std::numbers::pi;

// 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress))
double cosine_factor(double num_cycles, double progress) {
  return 0.5 * (1.0 + std::cos(kPi * num_cycles * 2.0 * progress));
}

double linear_warmup(int64_t k, int64_t warmup) {
  return static_cast<double>(k) / static_cast<double>(std::max<int64_t>(1, warmup));
}

// The arguments each schedule function takes through scheduler_specific_kwargs.
std::vector<std::string_view> kwargs_taken(LrScheduleKind kind) {
  switch (kind) {
    case LrScheduleKind::kLinear:
      return {};
    case LrScheduleKind::kCosine:
    case LrScheduleKind::kCosineWithRestarts:
      return {"num_cycles"};
    case LrScheduleKind::kPolynomial:
      return {"lr_end", "power"};
    case LrScheduleKind::kCosineWithMinLr:
      return {"num_cycles", "min_lr", "min_lr_rate"};
    case LrScheduleKind::kCosineWarmupWithMinLr:
      return {"num_cycles", "min_lr", "min_lr_rate", "warmup_lr_rate"};
    case LrScheduleKind::kWarmupStableDecay:
      return {"num_decay_steps", "num_stable_steps", "warmup_type",
              "decay_type",      "min_lr_ratio",     "num_cycles"};
    default:
      return {};  // constant, constant_with_warmup, inverse_sqrt: get_scheduler passes none
  }
}

}  // namespace

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

std::optional<std::pair<int64_t, double>> first_invalid_lr(const LrSchedule& s) {
  // Every schedule's factor is >= 0 and finite unless one of these is negative (the others clamp
  // at 0, or mix in [0, 1]); only then is each step looked at (a billion steps take seconds).
  const bool may_go_negative = !(s.base_lr >= 0.0) || s.lr_end < 0.0 || s.power < 0.0 ||
                               s.min_lr_rate < 0.0 || s.min_lr_ratio < 0.0 ||
                               (s.warmup_lr_rate && *s.warmup_lr_rate < 0.0);
  if (!may_go_negative) return std::nullopt;
  for (int64_t k = 0; k < s.total_steps; ++k)
    if (const double lr = s.lr(k); !(lr >= 0.0) || !std::isfinite(lr)) return std::pair{k, lr};
  return std::nullopt;
}

std::string invalid_lr_reason(const LrSchedule& s, std::pair<int64_t, double> bad) {
  return fmt::format(
      "the {} schedule gives optimizer step {} (of {}) the learning rate {}; zerotune's AdamW "
      "takes a learning rate >= 0 only (torch.optim.AdamW checks that when it is built, not when a "
      "schedule sets it, so transformers would train on with it)",
      name_of(s.kind), bad.first + 1, s.total_steps, bad.second);
}

bool lr_schedule_ignores_kwargs(LrScheduleKind kind) {
  return kind == LrScheduleKind::kConstant || kind == LrScheduleKind::kConstantWithWarmup ||
         kind == LrScheduleKind::kInverseSqrt;
}

void apply_lr_scheduler_kwargs(LrSchedule* s, const Json& given) {
  const std::string_view name = lr_schedule_name(s->kind);
  if (s->kind == LrScheduleKind::kCosineWithRestarts) s->num_cycles = 1.0;
  // inverse_sqrt: `timescale = num_warmup_steps or 10_000` (get_scheduler passes no kwargs).
  if (s->kind == LrScheduleKind::kInverseSqrt)
    s->timescale = s->warmup_steps > 0 ? s->warmup_steps : 10000;
  // get_scheduler passes these schedules nothing, whatever the value.
  if (lr_schedule_ignores_kwargs(s->kind)) return;
  const Json kw = given.is_null() ? Json::object() : given;
  if (kw.is_string())
    fail(
        "{} is a string that transformers does not read as JSON (TrainingArguments parses a "
        "string only when it starts with '{{'), and get_scheduler raises TypeError on it "
        "(argument after ** must be a mapping, not str); give a mapping",
        kw.dump());
  if (!kw.is_object())
    fail("must be a mapping (e.g. {{min_lr_rate: 0.1}}), got {} (get_scheduler raises TypeError)",
         kw.dump());
  const std::vector<std::string_view> taken = kwargs_taken(s->kind);
  for (const auto& [key, value] : kw.items()) {
    if (std::find(taken.begin(), taken.end(), key) == taken.end()) {
      std::string list;
      for (auto t : taken) list += (list.empty() ? "" : ", ") + std::string(t);
      fail(
          "'{}' is not an argument of the {} schedule (transformers raises "
          "TypeError on it); {}",
          key, name, list.empty() ? "it takes none" : "it takes: " + list);
    }
  }
  // A bool is Python's 1 / 0 in the schedule's arithmetic (bool is an int subclass), as the true
  // that TrainingArguments' _convert_str_dict makes of '"true"' is: for a float and an int
  // argument alike (where the schedule refuses its value, the check below does too: lr_end).
  const auto number = [&](const char* key) -> std::optional<double> {
    if (!kw.contains(key) || kw[key].is_null()) return std::nullopt;
    if (kw[key].is_boolean()) return kw[key].get<bool>() ? 1.0 : 0.0;
    if (!kw[key].is_number() || !std::isfinite(kw[key].get<double>()))
      fail("{} must be a number, got {}", key, kw[key].dump());
    return kw[key].get<double>();
  };
  const auto steps = [&](const char* key) -> std::optional<int64_t> {
    const auto v = number(key);
    if (v && *v != std::floor(*v))
      fail("{} must be a whole number of steps, got {}", key, kw[key].dump());
    return v ? std::optional<int64_t>(static_cast<int64_t>(*v)) : std::nullopt;
  };
  if (const auto v = number("num_cycles")) s->num_cycles = *v;
  switch (s->kind) {
    case LrScheduleKind::kPolynomial: {
      if (const auto v = number("lr_end")) s->lr_end = *v;
      if (const auto v = number("power")) s->power = *v;
      if (s->power < 0)
        fail(
            "power ({}) must not be negative: transformers' polynomial schedule computes "
            "0.0 ** power after the last step, which raises ZeroDivisionError",
            s->power);
      if (s->total_steps > 0 && s->warmup_steps >= s->total_steps)  // 0: not yet known
        fail(
            "polynomial needs fewer warm-up steps ({}) than training steps ({}): transformers "
            "divides by their difference at the last step (ZeroDivisionError)",
            s->warmup_steps, s->total_steps);
      if (!(s->init_lr > s->lr_end))
        fail(
            "lr_end ({}) must be smaller than initial lr ({}), as "
            "transformers' polynomial schedule requires",
            s->lr_end, s->init_lr);
      break;
    }
    case LrScheduleKind::kCosineWithMinLr:
    case LrScheduleKind::kCosineWarmupWithMinLr: {
      const auto min_lr = number("min_lr"), rate = number("min_lr_rate");
      if (min_lr && rate) fail("only one of min_lr or min_lr_rate may be set");
      if (!min_lr && !rate)
        fail(
            "{} needs one of min_lr or min_lr_rate (transformers raises "
            "ValueError without)",
            name);
      if (min_lr && s->init_lr == 0.0)
        fail(
            "min_lr needs a learning_rate above 0 (transformers divides min_lr by it: "
            "ZeroDivisionError); give min_lr_rate instead");
      s->min_lr_rate = min_lr ? *min_lr / s->init_lr : *rate;
      s->warmup_lr_rate = number("warmup_lr_rate");
      break;
    }
    case LrScheduleKind::kWarmupStableDecay: {
      const auto decay = steps("num_decay_steps");
      if (!decay)
        fail(
            "warmup_stable_decay needs num_decay_steps (transformers' "
            "get_wsd_schedule raises TypeError without)");
      s->num_decay_steps = *decay;
      const auto stable = steps("num_stable_steps");
      s->num_stable_steps = stable ? *stable : s->total_steps - s->warmup_steps - *decay;
      for (const char* key : {"warmup_type", "decay_type"}) {
        if (!kw.contains(key) || kw[key].is_null()) continue;
        const auto shape = kw[key].is_string()
                               ? enum_from_name<WsdShape>(kw[key].get<std::string>())
                               : std::nullopt;
        if (!shape) fail("{} {} is not one of 'linear', 'cosine' or '1-sqrt'", key, kw[key].dump());
        (std::string_view(key) == "warmup_type" ? s->warmup_type : s->decay_type) = *shape;
      }
      if (const auto v = number("min_lr_ratio")) s->min_lr_ratio = *v;
      break;
    }
    default:
      break;
  }
}

double LrSchedule::lambda(int64_t k) const {
  const auto fk = static_cast<double>(k);
  const auto fw = static_cast<double>(warmup_steps);
  const auto progress = [&] {
    return static_cast<double>(k - warmup_steps) /
           static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  };
  switch (kind) {
    case LrScheduleKind::kConstant:
      return 1.0;
    case LrScheduleKind::kConstantWithWarmup:
      if (k < warmup_steps) return fk / std::max(1.0, fw);
      return 1.0;
    case LrScheduleKind::kLinear:
      if (k < warmup_steps) return linear_warmup(k, warmup_steps);
      return std::max(0.0,
                      static_cast<double>(total_steps - k) /
                          static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps)));
    case LrScheduleKind::kCosine:
      if (k < warmup_steps) return linear_warmup(k, warmup_steps);
      return std::max(0.0, cosine_factor(num_cycles, progress()));
    case LrScheduleKind::kCosineWithRestarts: {
      if (k < warmup_steps) return linear_warmup(k, warmup_steps);
      const double p = progress();
      if (p >= 1.0) return 0.0;
      // Python's %: in [0, 1) for a negative num_cycles too (std::fmod's would be negative).
      return std::max(0.0, 0.5 * (1.0 + std::cos(kPi * python_float_mod(num_cycles * p, 1.0))));
    }
    case LrScheduleKind::kPolynomial: {
      if (k < warmup_steps) return linear_warmup(k, warmup_steps);
      if (k > total_steps) return lr_end / init_lr;
      const double lr_range = init_lr - lr_end;
      const double pct_remaining = 1.0 - static_cast<double>(k - warmup_steps) /
                                             static_cast<double>(total_steps - warmup_steps);
      const double decay = lr_range * std::pow(pct_remaining, power) + lr_end;
      return decay / init_lr;
    }
    case LrScheduleKind::kInverseSqrt: {
      if (k < warmup_steps) return linear_warmup(k, warmup_steps);
      const int64_t shift = timescale - warmup_steps;
      return 1.0 / std::sqrt(static_cast<double>(k + shift) / static_cast<double>(timescale));
    }
    case LrScheduleKind::kCosineWithMinLr: {
      if (k < warmup_steps) return linear_warmup(k, warmup_steps);
      const double factor = cosine_factor(num_cycles, progress());
      return std::max(0.0, factor * (1 - min_lr_rate) + min_lr_rate);
    }
    case LrScheduleKind::kCosineWarmupWithMinLr: {
      const auto ft = static_cast<double>(total_steps);
      if (fk < fw) {
        if (!warmup_lr_rate) return (fk + 1.0) / std::max(1.0, fw);
        return *warmup_lr_rate + (1.0 - *warmup_lr_rate) * fk / std::max(1.0, fw - 1);
      }
      const double p = (fk - fw + 1.0) / std::max(1.0, ft - fw);
      const double factor = 0.5 * (1.0 + std::cos(kPi * num_cycles * 2.0 * p));
      return std::max(0.0, factor * (1 - min_lr_rate) + min_lr_rate);
    }
    case LrScheduleKind::kWarmupStableDecay: {
      const auto scaled = [&](double factor) {
        return std::max(0.0, factor * (1.0 - min_lr_ratio) + min_lr_ratio);
      };
      if (k < warmup_steps) {
        const double p = fk / static_cast<double>(std::max<int64_t>(1, warmup_steps));
        switch (warmup_type) {
          case WsdShape::kLinear:
            return scaled(p);
          case WsdShape::kCosine:
            return scaled(0.5 * (1.0 - std::cos(kPi * p)));
          case WsdShape::kOneMinusSqrt:
            return scaled(1.0 - std::sqrt(1.0 - p));
        }
      }
      if (k < warmup_steps + num_stable_steps) return 1.0;
      if (k < warmup_steps + num_stable_steps + num_decay_steps) {
        const double p = static_cast<double>(k - warmup_steps - num_stable_steps) /
                         static_cast<double>(std::max<int64_t>(1, num_decay_steps));
        switch (decay_type) {
          case WsdShape::kLinear:
            return scaled(1.0 - p);
          case WsdShape::kCosine:
            return scaled(cosine_factor(num_cycles, p));
          case WsdShape::kOneMinusSqrt:
            return scaled(1.0 - std::sqrt(p));
        }
      }
      return min_lr_ratio;
    }
  }
  return 1.0;
}

}  // namespace zt::optim
