// The per-step sample assignment against HF Trainer + accelerate (tests/data/train/step_plan.json,
// tools/make_train_goldens.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/file_util.h"
#include "core/zt_test_util.h"
#include "io/json.h"
#include "train/sampler.h"
#include "train/step_plan.h"

namespace zt::train {
namespace {

using Batches = std::vector<std::vector<std::vector<int64_t>>>;

Json load_golden() {
  return Json::parse(read_file(std::string(ZT_TEST_DATA) + "/train/step_plan.json"));
}

PlanConfig config_of(const Json& c) {
  PlanConfig cfg;
  cfg.num_samples = c["num_samples"].get<int64_t>();
  cfg.batch_size = c["batch_size"].get<int64_t>();
  cfg.world_size = c["world_size"].get<int64_t>();
  cfg.grad_accum = c["grad_accum"].get<int64_t>();
  cfg.num_train_epochs = c["num_train_epochs"].get<double>();
  cfg.max_steps = c["max_steps"].get<int64_t>();
  cfg.drop_last = c["drop_last"].get<bool>();
  cfg.seed = c["data_seed"].is_null() ? c["seed"].get<uint64_t>() : c["data_seed"].get<uint64_t>();
  return cfg;
}

std::string describe(const PlanConfig& c) {
  return "n=" + std::to_string(c.num_samples) + " B=" + std::to_string(c.batch_size) +
         " W=" + std::to_string(c.world_size) + " G=" + std::to_string(c.grad_accum) +
         " epochs=" + std::to_string(c.num_train_epochs) +
         " max_steps=" + std::to_string(c.max_steps) + " drop_last=" + std::to_string(c.drop_last);
}

TEST(StepPlan, EqualsHfTrainerAndAccelerate) {
  const Json g = load_golden();
  ASSERT_EQ(g.size(), 32u);
  int64_t steps_checked = 0;
  for (const Json& c : g) {
    const PlanConfig cfg = config_of(c);
    SCOPED_TRACE(describe(cfg));
    StepPlan plan(cfg);
    EXPECT_EQ(plan.micro_batches_per_rank(), c["steps_in_epoch"].get<int64_t>());
    EXPECT_EQ(plan.steps_per_epoch(), c["num_update_steps_per_epoch"].get<int64_t>());
    EXPECT_EQ(plan.total_steps(), c["max_steps_total"].get<int64_t>());
    EXPECT_EQ(plan.num_epochs(), c["num_epochs"].get<int64_t>());
    const Json& steps = c["steps"];
    ASSERT_EQ(static_cast<int64_t>(steps.size()), plan.total_steps());
    for (int64_t k = 0; k < plan.total_steps(); ++k) {
      const StepSamples s = plan.samples(k);
      EXPECT_EQ(s.info.epoch_progress, steps[k]["epoch"].get<double>()) << "step " << k;
      EXPECT_EQ(s.samples, steps[k]["ranks"].get<Batches>()) << "step " << k;
      for (int64_t r = 0; r < cfg.world_size; ++r)
        EXPECT_EQ(plan.rank_samples(k, r), s.samples[r]) << "step " << k << " rank " << r;
      ++steps_checked;
    }
  }
  EXPECT_EQ(steps_checked, 228);
}

TEST(StepPlan, StepTargetTokensSumsEverySampleOfEveryRank) {
  const Json g = load_golden();
  for (const Json& c : g) {
    const PlanConfig cfg = config_of(c);
    SCOPED_TRACE(describe(cfg));
    std::vector<int64_t> targets(cfg.num_samples);
    for (int64_t i = 0; i < cfg.num_samples; ++i) targets[i] = (i * 7) % 11 + 100 * (i % 3);
    StepPlan plan(cfg);
    for (int64_t k = 0; k < plan.total_steps(); ++k) {
      int64_t expect = 0;
      for (const auto& rank : c["steps"][k]["ranks"].get<Batches>())
        for (const auto& mb : rank)
          for (int64_t s : mb) expect += targets[s];
      EXPECT_EQ(step_target_tokens(plan.samples(k), targets), expect) << "step " << k;
    }
  }
}

TEST(StepPlan, LayoutOfOneConfiguration) {
  // n = 29, B = 3, W = 2, G = 4: nb = 10, L = 5, U = 2 (windows of 4 and 1), T = 2 epochs * 2.
  PlanConfig cfg{.num_samples = 29,
                 .batch_size = 3,
                 .world_size = 2,
                 .grad_accum = 4,
                 .num_train_epochs = 2.0,
                 .max_steps = -1,
                 .drop_last = false,
                 .seed = 42};
  StepPlan plan(cfg);
  EXPECT_EQ(plan.micro_batches_per_epoch(), 10);
  EXPECT_EQ(plan.micro_batches_per_rank(), 5);
  EXPECT_EQ(plan.steps_per_epoch(), 2);
  EXPECT_EQ(plan.total_steps(), 4);
  EXPECT_EQ(plan.samples_per_epoch(), 30);
  const StepInfo i1 = plan.info(1);
  EXPECT_EQ(i1.epoch, 0);
  EXPECT_EQ(i1.window, 1);
  EXPECT_EQ(i1.first_micro, 4);
  EXPECT_EQ(i1.num_micro, 1);
  EXPECT_TRUE(i1.last_in_epoch);
  EXPECT_EQ(i1.epoch_progress, 1.0);
  const StepInfo i2 = plan.info(2);
  EXPECT_EQ(i2.epoch, 1);
  EXPECT_EQ(i2.num_micro, 4);
  EXPECT_EQ(i2.epoch_progress, 1.8);
  // The last micro-batch of rank 1 in epoch 0 is perm[27], perm[28], then perm[0] (cycled).
  const std::vector<int64_t> perm = torch_randperm(29, 42);
  EXPECT_EQ(plan.rank_samples(1, 1),
            (std::vector<std::vector<int64_t>>{{perm[27], perm[28], perm[0]}}));
  EXPECT_EQ(plan.permutation(1), torch_randperm(29, 43));
}

TEST(StepPlan, EpochsAreMultipliedInDoubles) {
  // HF: max_steps = math.ceil(2.2 * 25) = ceil(55.00000000000001) = 56 (also in the goldens).
  PlanConfig cfg{.num_samples = 25,
                 .batch_size = 1,
                 .world_size = 1,
                 .grad_accum = 1,
                 .num_train_epochs = 2.2,
                 .max_steps = -1,
                 .drop_last = false,
                 .seed = 1};
  StepPlan plan(cfg);
  EXPECT_EQ(plan.steps_per_epoch(), 25);
  EXPECT_EQ(plan.total_steps(), 56);
  EXPECT_EQ(plan.num_epochs(), 3);
  EXPECT_EQ(plan.info(55).epoch, 2);
  EXPECT_EQ(plan.info(55).epoch_progress, 2.24);
}

// num_train_epochs whose step count passes 2^53 is an error naming the key, its file and the most
// epochs that fit; it overflowed into "total optimizer steps -9223372036854775808".
TEST(StepPlan, EpochsBeyondTheStepBoundNameTheKey) {
  PlanConfig cfg{.num_samples = 25, .batch_size = 1, .num_train_epochs = 5e18, .max_steps = -1};
  cfg.epochs_ref = "sft.yaml:7: trainer.num_train_epochs";
  cfg.epochs_where = " (given on the command line)";
  EXPECT_EQ(testing::error_of([&] { StepPlan p(cfg); }),
            "sft.yaml:7: trainer.num_train_epochs: 5e+18 epochs × 25 optimizer steps per epoch is "
            "more than the 9007199254740992 steps zerotune counts (expected at most "
            "360287970189639 epochs, or trainer.max_steps) (given on the command line)");
  cfg.num_train_epochs = 360287970189639.0;
  EXPECT_EQ(StepPlan(cfg).total_steps(), 9007199254740975);
}

TEST(StepPlan, FewerSamplesThanOneGlobalBatch) {
  // ../shared/cases/fewer-samples-than-global-batch: 3 samples. Layouts from accelerate 1.x
  // BatchSamplerShard._iter_with_no_split (even_batches): the last round is filled from the start
  // of the epoch's batches, repeated while shorter than W·B; the same branches as the goldens'
  // n = 13, B = 3, W = 2, G = 4 and n = 7, B = 8, W = 4 configurations.
  const std::vector<int64_t> p = torch_randperm(3, 42);
  using MB = std::vector<std::vector<int64_t>>;
  PlanConfig c{
      .num_samples = 3, .batch_size = 1, .world_size = 1, .grad_accum = 4, .num_train_epochs = 1.0};
  StepPlan g4(c);  // W = 1, B = 1, G = 4: one step of the 3 micro-batches there are
  EXPECT_EQ(g4.total_steps(), 1);
  EXPECT_EQ(g4.samples(0).samples, (std::vector<MB>{{{p[0]}, {p[1]}, {p[2]}}}));
  c.grad_accum = 1;
  c.batch_size = 8;
  StepPlan b8(c);  // W = 1, B = 8: one short micro-batch
  EXPECT_EQ(b8.samples(0).samples, (std::vector<MB>{{{p[0], p[1], p[2]}}}));
  c.world_size = 2;
  StepPlan w2b8(c);  // W = 2, B = 8: every rank a full micro-batch cycling over the 3
  EXPECT_EQ(w2b8.total_steps(), 1);
  EXPECT_EQ(w2b8.samples(0).samples,
            (std::vector<MB>{{{p[0], p[1], p[2], p[0], p[1], p[2], p[0], p[1]}},
                             {{p[2], p[0], p[1], p[2], p[0], p[1], p[2], p[0]}}}));
  c.batch_size = 1;
  c.grad_accum = 4;
  StepPlan w2g4(c);  // W = 2, B = 1, G = 4: 2 micro-batches per rank, the 4th repeats p[0]
  EXPECT_EQ(w2g4.micro_batches_per_rank(), 2);
  EXPECT_EQ(w2g4.total_steps(), 1);
  EXPECT_EQ(w2g4.info(0).epoch_progress, 1.0);
  EXPECT_EQ(w2g4.samples(0).samples, (std::vector<MB>{{{p[0]}, {p[2]}}, {{p[1]}, {p[0]}}}));
}

TEST(StepPlan, Errors) {
  using testing::expect_error;
  PlanConfig ok{.num_samples = 10, .batch_size = 2};
  expect_error(
      [&] {
        PlanConfig c = ok;
        c.num_samples = 0;
        StepPlan p(c);
      },
      {"0 samples"});
  expect_error(
      [&] {
        PlanConfig c = ok;
        c.batch_size = 0;
        StepPlan p(c);
      },
      {"per_device_train_batch_size", "0"});
  expect_error(
      [&] {
        PlanConfig c = ok;
        c.world_size = 0;
        StepPlan p(c);
      },
      {"world size"});
  expect_error(
      [&] {
        PlanConfig c = ok;
        c.grad_accum = -1;
        StepPlan p(c);
      },
      {"gradient_accumulation_steps", "-1"});
  expect_error(
      [&] {
        PlanConfig c = ok;
        c.num_train_epochs = 0;
        StepPlan p(c);
      },
      {"max_steps is -1", "num_train_epochs is 0"});
  expect_error(
      [&] {
        PlanConfig c = ok;
        c.drop_last = true;
        c.batch_size = 4;
        c.world_size = 3;
        StepPlan p(c);
      },
      {"dataloader_drop_last", "10 samples", "micro-batches of 4 on 3 ranks", "12"});
  StepPlan p(ok);
  expect_error([&] { p.info(p.total_steps()); }, {"step 15", "15 optimizer steps"});
  expect_error([&] { p.rank_samples(0, 1); }, {"rank 1", "[0, 1)"});
  const StepSamples s = p.samples(0);
  expect_error([&] { step_target_tokens(s, std::vector<int64_t>(3, 1)); },
               {"sample index", "outside the 3 per-sample target counts"});
}

TEST(StepPlan, ResumeStateRoundTripAndMismatch) {
  PlanConfig cfg{.num_samples = 29, .batch_size = 3, .world_size = 2, .grad_accum = 4, .seed = 7};
  StepPlan plan(cfg);
  const Json state = plan_state_to_json(plan, 3);
  EXPECT_EQ(state.dump(),
            R"({"num_samples":29,"batch_size":3,"world_size":2,"grad_accum":4,"drop_last":false,)"
            R"("seed":7,"num_train_epochs":3.0,"max_steps":-1,"total_steps":6,"next_step":3})");
  EXPECT_EQ(plan_state_next_step(plan, state, "ckpt"), 3);
  // More epochs on resume: allowed, same order for the steps already planned.
  PlanConfig longer = cfg;
  longer.num_train_epochs = 5;
  StepPlan plan2(longer);
  EXPECT_EQ(plan_state_next_step(plan2, state, "ckpt"), 3);
  EXPECT_EQ(plan2.samples(3).samples, plan.samples(3).samples);
  EXPECT_EQ(plan_state_split_change(plan2, state, "ckpt"), "");
  // Another world size with another global batch: refused, naming the accumulation that keeps it.
  PlanConfig other = cfg;
  other.world_size = 4;
  StepPlan plan3(other);
  testing::expect_error(
      [&] { plan_state_next_step(plan3, state, "out/checkpoint-3"); },
      {"out/checkpoint-3: the global batch", "was 3 × 2 × 4 = 24 in the checkpoint",
       "is 3 × 4 × 4 = 48 now", "(gradient_accumulation_steps: 2 gives it here)"});
  PlanConfig seeded = cfg;
  seeded.seed = 8;
  testing::expect_error([&] { plan_state_next_step(StepPlan(seeded), state, "ckpt"); },
                        {"'seed' is 7 in the checkpoint but 8 now"});
}

// Resuming on another split of the same global batch (4 ranks with accumulation 2 for 2 ranks with
// 4): accepted, and every step but an epoch's last (which the 29 samples do not fill) holds the
// same samples under both.
TEST(StepPlan, ResumeOnAnotherSplitOfTheSameGlobalBatch) {
  PlanConfig cfg{.num_samples = 29, .batch_size = 3, .world_size = 2, .grad_accum = 4, .seed = 7};
  StepPlan plan(cfg);
  const Json state = plan_state_to_json(plan, 2);
  PlanConfig wide = cfg;
  wide.world_size = 4;
  wide.grad_accum = 2;
  StepPlan plan4(wide);
  ASSERT_EQ(plan4.steps_per_epoch(), plan.steps_per_epoch());
  EXPECT_EQ(plan_state_next_step(plan4, state, "ckpt"), 2);
  EXPECT_EQ(plan_state_split_change(plan4, state, "ckpt"),
            "per_device_train_batch_size × world size × gradient_accumulation_steps 3 × 2 × 4 = "
            "24 in the checkpoint, 3 × 4 × 2 = 24 now");
  const auto flat = [](const StepSamples& s) {
    std::vector<int64_t> v;
    for (const auto& rank : s.samples)
      for (const auto& mb : rank) v.insert(v.end(), mb.begin(), mb.end());
    std::sort(v.begin(), v.end());
    return v;
  };
  for (int64_t k = 0; k < plan.total_steps(); ++k) {
    if (plan.info(k).last_in_epoch) continue;
    EXPECT_EQ(flat(plan4.samples(k)), flat(plan.samples(k))) << "step " << k;
    EXPECT_EQ(flat(plan.samples(k)).size(), 24u);
  }
  // One rank, micro-batch 6, accumulation 4: the same global batch too.
  PlanConfig one = cfg;
  one.world_size = 1;
  one.batch_size = 6;
  EXPECT_EQ(plan_state_next_step(StepPlan(one), state, "ckpt"), 2);
  // The same global batch cut into epochs of another length: refused (7 samples, drop_last:
  // micro-batches of 1 × accumulation 6 make 2 steps an epoch, one micro-batch of 6 makes 1).
  PlanConfig d{.num_samples = 7,
               .batch_size = 1,
               .world_size = 1,
               .grad_accum = 6,
               .drop_last = true,
               .seed = 7};
  const Json dstate = plan_state_to_json(StepPlan(d), 1);
  PlanConfig d6 = d;
  d6.batch_size = 6;
  d6.grad_accum = 1;
  testing::expect_error([&] { plan_state_next_step(StepPlan(d6), dstate, "ckpt"); },
                        {"ckpt: the checkpoint's split of the global batch (1 × 1 × 6 = 6) makes 2 "
                         "optimizer steps an epoch, this run's (6 × 1 × 1 = 6) 1"});
  Json bad_w = state;
  bad_w["world_size"] = 0;
  testing::expect_error(
      [&] { plan_state_next_step(plan4, bad_w, "ckpt"); },
      {"'world_size' in the saved data-order state must be an integer >= 1, got 0"});
  Json bad = state;
  bad["next_step"] = 99;
  testing::expect_error([&] { plan_state_next_step(plan, bad, "ckpt"); },
                        {"ckpt: the checkpoint has trained 99 optimizer steps, more than this "
                         "run's 6 in all",
                         "set trainer.max_steps above 99"});
  bad["next_step"] = -1;
  testing::expect_error([&] { plan_state_next_step(plan, bad, "ckpt"); },
                        {"next_step -1", "[0, 6]"});
}

TEST(StepPlan, EvalMicroBatchesAreSequentialWithoutPadding) {
  // 7 eval samples, B = 2, W = 2: micro-batches [0,1] [2,3] [4,5] [6]; rank 0 gets 0 and 2, rank 1
  // gets 1 and 3.
  EXPECT_EQ(eval_micro_batches(7, 2, 2, 0), (std::vector<std::vector<int64_t>>{{0, 1}, {4, 5}}));
  EXPECT_EQ(eval_micro_batches(7, 2, 2, 1), (std::vector<std::vector<int64_t>>{{2, 3}, {6}}));
  // 3 samples, B = 2, W = 4: ranks 2 and 3 run one empty micro-batch.
  EXPECT_EQ(eval_micro_batches(3, 2, 4, 1), (std::vector<std::vector<int64_t>>{{2}}));
  EXPECT_EQ(eval_micro_batches(3, 2, 4, 3), (std::vector<std::vector<int64_t>>{{}}));
  testing::expect_error([] { eval_micro_batches(3, 2, 4, 4); }, {"rank 4", "[0, 4)"});
}

}  // namespace
}  // namespace zt::train
