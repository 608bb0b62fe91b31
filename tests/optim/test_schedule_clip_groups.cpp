// LR schedules, warm-up resolution, clip coefficient, gradient norm and HF's weight-decay rule,
// against transformers / torch goldens (tools/make_optim_goldens.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/json.h"
#include "optim/clip.h"
#include "optim/lr_schedule.h"
#include "optim/param_groups.h"

namespace zt::optim {
namespace {

Json load(const std::string& name) {
  std::ifstream in(std::string(ZT_TEST_DATA) + "/optim/" + name);
  EXPECT_TRUE(in.good()) << name;
  return Json::parse(in);
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(LrSchedule, EqualsTransformersGetSchedulerForEveryKind) {
  const Json doc = load("schedules.json");
  size_t checked = 0;
  std::set<std::string> kinds;
  for (const Json& s : doc.at("schedules")) {
    const std::string kind = s.at("kind");
    kinds.insert(kind);
    const LrSchedule sch{parse_lr_schedule_kind(kind), s.at("base_lr"), s.at("warmup"),
                         s.at("total")};
    const auto want = s.at("lr").get<std::vector<double>>();
    ASSERT_EQ(want.size(), static_cast<size_t>(sch.total_steps));
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_EQ(sch.lr(static_cast<int64_t>(k)), want[k])
          << kind << " base " << sch.base_lr << " warmup " << sch.warmup_steps << " total "
          << sch.total_steps << " step " << k;
      ++checked;
    }
  }
  EXPECT_EQ(kinds.size(), 4u);
  EXPECT_GT(checked, 1000u);
}

TEST(LrSchedule, KnownShapes) {
  const LrSchedule lin{LrScheduleKind::kLinear, 1.0, 2, 10};
  EXPECT_EQ(lin.lr(0), 0.0);  // with warm-up the first step uses lr 0
  EXPECT_EQ(lin.lr(1), 0.5);
  EXPECT_EQ(lin.lr(9), 1.0 / 8.0);  // last step: lr / (T - W)
  const LrSchedule cos{LrScheduleKind::kCosine, 1.0, 0, 4};
  EXPECT_EQ(cos.lr(0), 1.0);
  EXPECT_EQ(cos.lr(2), 0.5 * (1.0 + std::cos(M_PI * 0.5)));
  const LrSchedule cst{LrScheduleKind::kConstant, 3e-4, 5, 10};
  EXPECT_EQ(cst.lr(0), 3e-4);  // get_scheduler ignores warm-up for "constant"
  EXPECT_EQ(lr_schedule_name(parse_lr_schedule_kind("constant_with_warmup")),
            "constant_with_warmup");
  try {
    parse_lr_schedule_kind("reduce_lr_on_plateau");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'reduce_lr_on_plateau' is not supported"),
              std::string::npos);
  }
}

// A golden case's schedule ({"kind", "base_lr", "warmup", "total"}), before its kwargs.
LrSchedule golden_schedule(const Json& c) {
  LrSchedule s;
  s.kind = parse_lr_schedule_kind(c.at("kind").get<std::string>());
  s.base_lr = s.init_lr = c.at("base_lr").get<double>();
  s.warmup_steps = c.at("warmup").get<int64_t>();
  s.total_steps = c.at("total").get<int64_t>();
  return s;
}

// Every other lr_scheduler_type with the lr_scheduler_kwargs users pass, bitwise equal to
// transformers 4.57.1's get_scheduler(..., scheduler_specific_kwargs=kwargs)
// (tools/make_lr_kwargs_goldens.py): cosine_with_restarts, polynomial, inverse_sqrt,
// cosine_with_min_lr (min_lr and min_lr_rate), cosine_warmup_with_min_lr, warmup_stable_decay,
// cosine's num_cycles (cosine_with_restarts' negative too), and the kwargs get_scheduler does not
// pass (inverse_sqrt, constant_with_warmup).
TEST(LrSchedule, KwargsSchedulesEqualTransformers457) {
  const Json doc = load("schedules_kwargs.json");
  std::set<std::string> kinds;
  size_t checked = 0;
  for (const Json& c : doc.at("cases")) {
    LrSchedule s = golden_schedule(c);
    apply_lr_scheduler_kwargs(&s, c.at("kwargs"));
    kinds.insert(c.at("kind").get<std::string>());
    const auto want = c.at("lr").get<std::vector<double>>();
    for (size_t k = 0; k < want.size(); ++k, ++checked)
      ASSERT_EQ(s.lr(static_cast<int64_t>(k)), want[k])
          << c.at("kind") << " " << c.at("kwargs").dump() << " warmup " << s.warmup_steps
          << " total " << s.total_steps << " base " << s.base_lr << " step " << k;
  }
  EXPECT_EQ(kinds.size(), 8u);
  EXPECT_GT(checked, 2000u);
  // cosine_with_restarts with a negative num_cycles is among them: Python's % keeps the phase in
  // [0, 1), where C's fmod would make it negative (its first decayed step: lr ~0, not ~lr).
  size_t negative = 0, bools = 0;
  for (const Json& c : doc.at("cases")) {
    const Json& kw = c.at("kwargs");
    negative += kw.contains("num_cycles") && kw.at("num_cycles").is_number() &&
                kw.at("num_cycles").get<double>() < 0;
    for (const auto& [k, v] : kw.items()) bools += v.is_boolean();
  }
  EXPECT_EQ(negative, 12u);
  // A bool where a schedule takes a number is Python's 1 / 0 (TrainingArguments makes '"true"'
  // True): float arguments (cosine's num_cycles, polynomial's lr_end / power, min_lr /
  // min_lr_rate / warmup_lr_rate) and int ones (cosine_with_restarts' num_cycles,
  // warmup_stable_decay's num_decay_steps / num_stable_steps) are among the cases above.
  EXPECT_GE(bools, 60u);
  // Where the schedule refuses the bool, zerotune refuses it too.
  ASSERT_EQ(doc.at("errors").size(), 2u);
  std::vector<std::string> refused;
  for (const Json& c : doc.at("errors")) {
    LrSchedule s = golden_schedule(c);
    try {
      apply_lr_scheduler_kwargs(&s, c.at("kwargs"));
      refused.push_back("<no error> for " + c.at("error").get<std::string>());
    } catch (const Error& e) {
      refused.push_back(e.what());
    }
  }
  EXPECT_EQ(doc.at("errors")[0].at("error"),
            "ValueError: lr_end (True) must be smaller than initial lr (2e-05)");
  EXPECT_EQ(refused[0],
            "lr_end (1) must be smaller than initial lr (2e-05), as transformers' polynomial "
            "schedule requires");
  EXPECT_EQ(doc.at("errors")[1].at("error"),
            "ValueError: Unknown warmup type: True, expected 'linear', 'cosine' or '1-sqrt'");
  EXPECT_EQ(refused[1], "warmup_type true is not one of 'linear', 'cosine' or '1-sqrt'");
}

// What transformers refuses is refused, with the reason; what it ignores is ignored.
TEST(LrSchedule, KwargsErrors) {
  const auto err = [](const char* kind, const Json& kw, double lr = 1e-4) {
    LrSchedule s;
    s.kind = parse_lr_schedule_kind(kind);
    s.base_lr = s.init_lr = lr;
    s.total_steps = 20;
    try {
      apply_lr_scheduler_kwargs(&s, kw);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_EQ(err("linear", {{"num_cycles", 1}}),
            "'num_cycles' is not an argument of the linear schedule (transformers raises "
            "TypeError on it); it takes none");
  EXPECT_EQ(err("cosine", {{"min_lr_rate", 0.1}}),
            "'min_lr_rate' is not an argument of the cosine schedule (transformers raises "
            "TypeError on it); it takes: num_cycles");
  EXPECT_EQ(err("cosine_with_min_lr", Json::object()),
            "cosine_with_min_lr needs one of min_lr or min_lr_rate (transformers raises ValueError "
            "without)");
  EXPECT_EQ(err("cosine_with_min_lr", {{"min_lr", 1e-6}, {"min_lr_rate", 0.1}}),
            "only one of min_lr or min_lr_rate may be set");
  EXPECT_EQ(err("polynomial", {{"lr_end", 1e-3}}),
            "lr_end (0.001) must be smaller than initial lr (0.0001), as transformers' polynomial "
            "schedule requires");
  EXPECT_EQ(err("warmup_stable_decay", Json::object()),
            "warmup_stable_decay needs num_decay_steps (transformers' get_wsd_schedule raises "
            "TypeError without)");
  // transformers divides by zero on these: refused up front.
  EXPECT_EQ(err("cosine_with_min_lr", {{"min_lr", 1e-6}}, 0.0),
            "min_lr needs a learning_rate above 0 (transformers divides min_lr by it: "
            "ZeroDivisionError); give min_lr_rate instead");
  {
    LrSchedule s;
    s.kind = parse_lr_schedule_kind("polynomial");
    s.base_lr = s.init_lr = 1e-4;
    s.total_steps = s.warmup_steps = 20;
    std::string msg = "<no error>";
    try {
      apply_lr_scheduler_kwargs(&s, Json::object());
    } catch (const Error& e) {
      msg = e.what();
    }
    EXPECT_EQ(msg,
              "polynomial needs fewer warm-up steps (20) than training steps (20): transformers "
              "divides by their difference at the last step (ZeroDivisionError)");
  }
  // A negative power: transformers computes 0.0 ** power after the last step (ZeroDivisionError,
  // checked with its get_scheduler): refused up front.
  EXPECT_EQ(err("polynomial", {{"power", -1.0}}),
            "power (-1) must not be negative: transformers' polynomial schedule computes 0.0 ** "
            "power after the last step, which raises ZeroDivisionError");
  // A negative lr_end passes transformers' checks and gives the last steps a negative learning
  // rate (its get_scheduler: -1e-12 after 5 steps at power 10), which zerotune's AdamW refuses:
  // first_invalid_lr finds the step before training (attack finding 2).
  {
    LrSchedule s;
    s.kind = parse_lr_schedule_kind("polynomial");
    s.base_lr = s.init_lr = 2e-5;
    s.total_steps = 10;
    apply_lr_scheduler_kwargs(&s, {{"lr_end", -1e-12}, {"power", 10}});
    const auto bad = first_invalid_lr(s);
    ASSERT_TRUE(bad.has_value());
    EXPECT_EQ(bad->first, 9);
    EXPECT_LT(bad->second, -9e-13);
    EXPECT_GT(bad->second, -1e-12);
    EXPECT_EQ(s.lr(9), bad->second);
    EXPECT_GT(s.lr(8), 0.0);
    EXPECT_EQ(
        invalid_lr_reason(s, *bad).rfind(
            "the polynomial schedule gives optimizer step 10 (of 10) the learning rate -9.9", 0),
        0u)
        << invalid_lr_reason(s, *bad);
    s.total_steps = 9;  // its last step is then k = 8
    apply_lr_scheduler_kwargs(&s, {{"lr_end", 0.0}, {"power", 10}});
    EXPECT_FALSE(first_invalid_lr(s).has_value());
  }
  EXPECT_EQ(err("warmup_stable_decay", {{"num_decay_steps", 5}, {"decay_type", "exp"}}),
            "decay_type \"exp\" is not one of 'linear', 'cosine' or '1-sqrt'");
  EXPECT_EQ(err("cosine", {{"num_cycles", "two"}}), "num_cycles must be a number, got \"two\"");
  EXPECT_EQ(err("cosine", Json::array({1})),
            "must be a mapping (e.g. {min_lr_rate: 0.1}), got [1] (get_scheduler raises "
            "TypeError)");
  // A string reaches the schedule only where TrainingArguments did not parse it (one that does
  // not start with '{': cli::hf_dict_field_value); get_scheduler's ** raises on it.
  EXPECT_EQ(err("cosine_with_min_lr", R"( {"min_lr_rate": 0.1})"),
            R"(" {\"min_lr_rate\": 0.1}" is a string that transformers does not read as JSON )"
            "(TrainingArguments parses a string only when it starts with '{'), and get_scheduler "
            "raises TypeError on it (argument after ** must be a mapping, not str); give a "
            "mapping");
  // null and {} are fine; constant ignores its kwargs, whatever they are, as get_scheduler never
  // passes them.
  EXPECT_EQ(err("linear", nullptr), "<no error>");
  EXPECT_EQ(err("linear", Json::object()), "<no error>");
  EXPECT_EQ(err("constant", {{"whatever", 1}}), "<no error>");
  EXPECT_EQ(err("constant_with_warmup", "not json"), "<no error>");
  EXPECT_EQ(err("inverse_sqrt", Json::array({1})), "<no error>");
}

TEST(LrSchedule, WarmupStepsLikeTrainingArguments) {
  const Json doc = load("schedules.json");
  ASSERT_GE(doc.at("warmup_steps").size(), 8u);
  for (const Json& w : doc.at("warmup_steps"))
    EXPECT_EQ(resolve_warmup_steps(w.at("total"), w.at("warmup_steps")),
              w.at("result").get<int64_t>())
        << "total " << w.at("total") << " warmup_steps " << w.at("warmup_steps");
  // transformers 4's warmup_ratio, used when warmup_steps is 0.
  EXPECT_EQ(resolve_warmup_steps(7, 0, 0.1), 1);
  EXPECT_EQ(resolve_warmup_steps(100, 5, 0.5), 5);
  EXPECT_THROW(resolve_warmup_steps(10, -1), Error);
  EXPECT_THROW(resolve_warmup_steps(10, 0, 1.5), Error);
}

TEST(Clip, CoefficientEqualsTorchClipGradNorm) {
  const Json doc = load("clip.json");
  int clipped = 0;
  for (const Json& c : doc.at("cases")) {
    const float got = clip_coefficient(c.at("total_norm_f32").get<double>(), c.at("max_norm"));
    const float want = c.at("coef_f32");
    EXPECT_EQ(bits(got), bits(want))
        << "norm " << c.at("total_norm_f32") << " max " << c.at("max_norm");
    clipped += want < 1.0f;
  }
  EXPECT_GT(clipped, 10);
  EXPECT_EQ(clip_coefficient(123.0, 0.0), 1.0f);  // max_grad_norm 0: no clipping
  EXPECT_TRUE(std::isnan(clip_coefficient(std::nan(""), 1.0)));
  EXPECT_EQ(clip_coefficient(INFINITY, 1.0), 0.0f);
}

TEST(Clip, SumOfSquaresIsFixedOrderAndAccurate) {
  std::vector<float> x(300007);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * (1.0f + (i % 7));
  // Reference: the documented order, written out.
  double want = 0.0;
  for (size_t lo = 0; lo < x.size(); lo += 4096) {
    const size_t len = std::min<size_t>(4096, x.size() - lo);
    double lane[8] = {};
    for (size_t i = 0; i < len; ++i) lane[i % 8] += static_cast<double>(x[lo + i]) * x[lo + i];
    double s = lane[0];
    for (int j = 1; j < 8; ++j) s += lane[j];
    want += s;
  }
  EXPECT_EQ(sumsq_f64(x.data(), x.size()), want);
  EXPECT_EQ(sumsq_f64(x.data(), 5),
            static_cast<double>(x[0]) * x[0] + static_cast<double>(x[1]) * x[1] +
                static_cast<double>(x[2]) * x[2] + static_cast<double>(x[3]) * x[3] +
                static_cast<double>(x[4]) * x[4]);
  EXPECT_EQ(sumsq_f64(x.data(), 0), 0.0);
  const double parts[] = {want, 2.0, 0.25};
  EXPECT_EQ(global_norm_from_partials(parts), std::sqrt((want + 2.0) + 0.25));
  EXPECT_THROW(global_norm_from_partials({}), Error);
}

TEST(WeightDecay, EqualsTrainerGetDecayParameterNames) {
  const Json doc = load("decay_names.json");
  size_t n = 0, no_decay = 0;
  for (const Json& m : doc.at("models")) {
    for (const Json& p : m.at("params")) {
      const std::string name = p.at("name");
      EXPECT_EQ(hf_weight_decay_applies(name), p.at("decay").get<bool>())
          << m.at("model") << ": " << name;
      ++n;
      no_decay += !p.at("decay").get<bool>();
    }
  }
  EXPECT_GT(n, 80u);
  EXPECT_GT(no_decay, 30u);
  EXPECT_FALSE(hf_weight_decay_applies("model.layers.3.self_attn.k_proj.bias"));
  EXPECT_TRUE(hf_weight_decay_applies("lm_head.weight"));
}

}  // namespace
}  // namespace zt::optim
