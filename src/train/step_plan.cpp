#include "train/step_plan.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "train/sampler.h"

namespace zt::train {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

StepPlan::StepPlan(const PlanConfig& config) : cfg_(config) {
  if (cfg_.num_samples < 1)
    fail("step plan: the training set has {} samples; at least 1 is needed", cfg_.num_samples);
  if (cfg_.batch_size < 1)
    fail("step plan: per_device_train_batch_size must be >= 1, got {}", cfg_.batch_size);
  if (cfg_.world_size < 1) fail("step plan: world size must be >= 1, got {}", cfg_.world_size);
  if (cfg_.grad_accum < 1)
    fail("step plan: gradient_accumulation_steps must be >= 1, got {}", cfg_.grad_accum);
  const int64_t n = cfg_.num_samples, b = cfg_.batch_size, w = cfg_.world_size;
  // torch BatchSampler: len = ceil(n / B), or floor with drop_last.
  nb_ = cfg_.drop_last ? n / b : ceil_div(n, b);
  // accelerate BatchSamplerShard.__len__ (split_batches=False, even_batches=True).
  per_rank_ = (w == 1) ? nb_ : (cfg_.drop_last ? nb_ / w : ceil_div(nb_, w));
  if (per_rank_ == 0)
    fail(
        "step plan: with dataloader_drop_last, {} samples in micro-batches of {} on {} ranks leave "
        "no complete micro-batch per rank (need at least {} samples)",
        n, b, w, b * w);
  // Trainer.set_initial_training_values.
  steps_per_epoch_ = std::max<int64_t>(ceil_div(per_rank_, cfg_.grad_accum), 1);
  if (cfg_.max_steps > 0) {
    total_steps_ = cfg_.max_steps;
  } else {
    if (!(cfg_.num_train_epochs > 0))
      fail("step plan: max_steps is {} and num_train_epochs is {}; one of them must be > 0",
           cfg_.max_steps, cfg_.num_train_epochs);
    const double steps = std::ceil(cfg_.num_train_epochs * static_cast<double>(steps_per_epoch_));
    if (!(steps <= static_cast<double>(kMaxTotalSteps)))
      fail(
          "{}: {} epochs × {} optimizer steps per epoch is more than the {} steps zerotune counts "
          "(expected at most {} epochs, or trainer.max_steps){}",
          cfg_.epochs_ref, cfg_.num_train_epochs, steps_per_epoch_, kMaxTotalSteps,
          kMaxTotalSteps / steps_per_epoch_, cfg_.epochs_where);
    total_steps_ = static_cast<int64_t>(steps);
  }
}

int64_t StepPlan::num_epochs() const { return ceil_div(total_steps_, steps_per_epoch_); }

int64_t StepPlan::samples_per_epoch() const {
  if (cfg_.world_size == 1 && !cfg_.drop_last) return cfg_.num_samples;
  return cfg_.world_size * per_rank_ * cfg_.batch_size;
}

StepInfo StepPlan::info(int64_t k) const {
  if (k < 0 || k >= total_steps_)
    fail("step plan: step {} is outside the run's {} optimizer steps", k, total_steps_);
  StepInfo s;
  s.step = k;
  s.epoch = k / steps_per_epoch_;
  s.window = k % steps_per_epoch_;
  s.first_micro = s.window * cfg_.grad_accum;
  s.num_micro = std::min(cfg_.grad_accum, per_rank_ - s.first_micro);
  // Python: epoch + (step + 1) / steps_in_epoch, in doubles.
  s.epoch_progress =
      static_cast<double>(s.epoch) +
      static_cast<double>(s.first_micro + s.num_micro) / static_cast<double>(per_rank_);
  s.last_in_epoch = s.window == steps_per_epoch_ - 1;
  return s;
}

const std::vector<int64_t>& StepPlan::permutation(int64_t epoch) {
  if (epoch != cached_epoch_) {
    perm_ = epoch_permutation(cfg_.num_samples, cfg_.seed, epoch);
    cached_epoch_ = epoch;
  }
  return perm_;
}

std::vector<int64_t> StepPlan::micro_batch(int64_t epoch, int64_t rank, int64_t m) {
  const std::vector<int64_t>& perm = permutation(epoch);
  const int64_t n = cfg_.num_samples, b = cfg_.batch_size;
  const int64_t j = m * cfg_.world_size + rank;  // global micro-batch index in the epoch
  const int64_t begin = j * b;
  // W = 1: the torch BatchSampler's last batch may be short. W > 1: always B samples, cycling.
  const int64_t end = (cfg_.world_size == 1) ? std::min(begin + b, n) : begin + b;
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(end - begin));
  for (int64_t p = begin; p < end; ++p) out.push_back(perm[static_cast<size_t>(p % n)]);
  return out;
}

std::vector<std::vector<int64_t>> StepPlan::rank_samples(int64_t k, int64_t rank) {
  if (rank < 0 || rank >= cfg_.world_size)
    fail("step plan: rank {} is outside [0, {})", rank, cfg_.world_size);
  const StepInfo s = info(k);
  std::vector<std::vector<int64_t>> out;
  out.reserve(static_cast<size_t>(s.num_micro));
  for (int64_t m = 0; m < s.num_micro; ++m)
    out.push_back(micro_batch(s.epoch, rank, s.first_micro + m));
  return out;
}

StepSamples StepPlan::samples(int64_t k) {
  StepSamples out;
  out.info = info(k);
  out.samples.reserve(static_cast<size_t>(cfg_.world_size));
  for (int64_t r = 0; r < cfg_.world_size; ++r) out.samples.push_back(rank_samples(k, r));
  return out;
}

int64_t step_target_tokens(const StepSamples& step, std::span<const int64_t> targets) {
  return sum_over_step(step, [&](int64_t s) {
    if (s < 0 || static_cast<size_t>(s) >= targets.size())
      fail("step {}: sample index {} is outside the {} per-sample target counts", step.info.step, s,
           targets.size());
    return targets[static_cast<size_t>(s)];
  });
}

Json plan_state_to_json(const StepPlan& plan, int64_t next_step) {
  const PlanConfig& c = plan.config();
  Json j;
  j["num_samples"] = c.num_samples;
  j["batch_size"] = c.batch_size;
  j["world_size"] = c.world_size;
  j["grad_accum"] = c.grad_accum;
  j["drop_last"] = c.drop_last;
  j["seed"] = c.seed;
  j["num_train_epochs"] = c.num_train_epochs;
  j["max_steps"] = c.max_steps;
  j["total_steps"] = plan.total_steps();
  j["next_step"] = next_step;
  return j;
}

namespace {

// The saved split (B, W, G) of a plan state; zt::Error naming `source` and the key when one is not
// an integer >= 1.
struct Split {
  int64_t b = 0, w = 0, g = 0;
  int64_t global() const { return b * w * g; }
  bool operator==(const Split&) const = default;
};

Split saved_split(const Json& state, const std::string& source) {
  Split s;
  for (auto [key, dst] :
       {std::pair{"batch_size", &s.b}, {"world_size", &s.w}, {"grad_accum", &s.g}}) {
    if (!state.contains(key)) fail("{}: the saved data-order state has no key '{}'", source, key);
    if (!state[key].is_number_integer() || state[key].get<int64_t>() < 1)
      fail("{}: '{}' in the saved data-order state must be an integer >= 1, got {}", source, key,
           state[key].dump());
    *dst = state[key].get<int64_t>();
  }
  int64_t product = 0;
  if (__builtin_mul_overflow(s.b, s.w, &product) || __builtin_mul_overflow(product, s.g, &product))
    fail(
        "{}: the saved data-order state's batch_size × world_size × grad_accum ({} × {} × {}) "
        "overflows",
        source, s.b, s.w, s.g);
  return s;
}

Split split_of(const PlanConfig& c) { return {c.batch_size, c.world_size, c.grad_accum}; }

std::string describe(const Split& s) {
  return fmt::format("{} × {} × {} = {}", s.b, s.w, s.g, s.global());
}

}  // namespace

int64_t plan_state_next_step(const StepPlan& plan, const Json& state, const std::string& source) {
  const PlanConfig& c = plan.config();
  auto check = [&](const char* key, const Json& now) {
    if (!state.contains(key)) fail("{}: the saved data-order state has no key '{}'", source, key);
    if (state[key] != now)
      fail(
          "{}: '{}' is {} in the checkpoint but {} now; the data order would differ, so the run "
          "cannot resume from it",
          source, key, state[key].dump(), now.dump());
  };
  check("num_samples", c.num_samples);
  check("drop_last", c.drop_last);
  check("seed", c.seed);
  const Split then = saved_split(state, source), now = split_of(c);
  if (then != now) {
    // Another split of the same global batch: the same samples in every step (SFT_SEMANTICS §4),
    // provided the epochs hold as many steps.
    if (then.global() != now.global())
      fail(
          "{}: the global batch (per_device_train_batch_size × world size × "
          "gradient_accumulation_steps) was {} in the checkpoint and is {} now; a run resumes with "
          "another world size, micro-batch or accumulation only when the global batch stays the "
          "same, so that every step holds the same samples{}",
          source, describe(then), describe(now),
          then.global() % (now.b * now.w) == 0
              ? fmt::format(" (gradient_accumulation_steps: {} gives it here)",
                            then.global() / (now.b * now.w))
              : std::string());
    PlanConfig old = c;
    old.batch_size = then.b;
    old.world_size = then.w;
    old.grad_accum = then.g;
    old.max_steps = 1;  // only the epoch layout is compared
    const int64_t u_then = StepPlan(old).steps_per_epoch();
    if (u_then != plan.steps_per_epoch())
      fail(
          "{}: the checkpoint's split of the global batch ({}) makes {} optimizer steps an epoch, "
          "this run's ({}) {}; the epochs would not line up, so the run cannot resume from it",
          source, describe(then), u_then, describe(now), plan.steps_per_epoch());
  }
  if (!state.contains("next_step") || !state["next_step"].is_number_integer())
    fail("{}: the saved data-order state has no integer 'next_step'", source);
  const int64_t next = state["next_step"].get<int64_t>();
  if (next > plan.total_steps())
    fail(
        "{}: the checkpoint has trained {} optimizer steps, more than this run's {} in all "
        "(trainer.max_steps, or num_train_epochs when max_steps is -1); to train on, set "
        "trainer.max_steps above {}",
        source, next, plan.total_steps(), next);
  if (next < 0 || next > plan.total_steps())
    fail("{}: next_step {} is outside [0, {}] (the run's optimizer steps)", source, next,
         plan.total_steps());
  return next;
}

std::string plan_state_split_change(const StepPlan& plan, const Json& state,
                                    const std::string& source) {
  const Split then = saved_split(state, source), now = split_of(plan.config());
  if (then == now) return {};
  return fmt::format(
      "per_device_train_batch_size × world size × gradient_accumulation_steps {} in the "
      "checkpoint, {} now",
      describe(then), describe(now));
}

std::vector<std::vector<int64_t>> eval_micro_batches(int64_t num_samples, int64_t batch_size,
                                                     int64_t world_size, int64_t rank) {
  if (num_samples < 0) fail("eval plan: the eval set has {} samples", num_samples);
  if (batch_size < 1)
    fail("eval plan: per_device_eval_batch_size must be >= 1, got {}", batch_size);
  if (world_size < 1) fail("eval plan: world size must be >= 1, got {}", world_size);
  if (rank < 0 || rank >= world_size)
    fail("eval plan: rank {} is outside [0, {})", rank, world_size);
  const int64_t nb = ceil_div(num_samples, batch_size);
  const int64_t per_rank = ceil_div(nb, world_size);
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(per_rank));
  for (int64_t m = 0; m < per_rank; ++m) {
    const int64_t j = m * world_size + rank;
    for (int64_t p = j * batch_size; p < std::min((j + 1) * batch_size, num_samples); ++p)
      out[static_cast<size_t>(m)].push_back(p);
  }
  return out;
}

}  // namespace zt::train
