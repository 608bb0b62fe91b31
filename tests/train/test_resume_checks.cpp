// What a resume is told about its checkpoint (train/resume_checks.h): here the token pipeline
// version trainer_state.json records ("data_pipeline"), against the one this zerotune tokenises
// with (data::kPipelineVersion).
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <string>
#include <tuple>

#include "core/zt_test_util.h"
#include "data/prepare.h"
#include "io/json.h"
#include "train/resume_checks.h"

namespace zt::train {
namespace {

const std::string kState = "runs/x/checkpoint-2/trainer_state.json";

std::string what_follows(const std::string& then) {
  return "resume_from_checkpoint: " + kState + " " + then +
         ", and this zerotune tokenises with 'zerotune-sft-data-10': the resumed steps see samples "
         "tokenised under the new rule, so their tokens (where the EOS goes, for one) may not be "
         "what the checkpoint's run would have trained on, and where the rule keeps or drops other "
         "rows (a file with 'input_ids' beside text columns trains the ids since pipeline 6) or "
         "packs them (bins by TRL's map batches of rows since pipeline 8; rows skipped for an "
         "empty completion or text hold their place in TRL's bins since pipeline 9; a CSV file's "
         "rows as datasets 4.8.5 and pandas read them since pipeline 10) the samples "
         "each step takes may differ too. Resume with the zerotune that wrote the checkpoint to "
         "keep its tokens";
}

TEST(ResumeChecks, SamePipelineVersionGivesNoWarning) {
  ASSERT_EQ(data::kPipelineVersion, "zerotune-sft-data-10");
  const Json st = {{"data_pipeline", "zerotune-sft-data-10"}, {"global_step", 2}};
  EXPECT_EQ(pipeline_change_warning(st, kState, data::kPipelineVersion), std::nullopt);
}

// A checkpoint of an older pipeline, or of a zerotune that did not record it: a warning naming the
// file, both versions (or that none was recorded) and what it means for the resumed steps.
TEST(ResumeChecks, OtherOrUnrecordedPipelineVersionIsWarnedAbout) {
  EXPECT_EQ(pipeline_change_warning({{"data_pipeline", "zerotune-sft-data-3"}}, kState,
                                    data::kPipelineVersion),
            what_follows("records the token pipeline 'zerotune-sft-data-3'"));
  EXPECT_EQ(pipeline_change_warning({{"global_step", 2}}, kState, data::kPipelineVersion),
            what_follows("records no token pipeline version (written before zerotune recorded "
                         "it)"));
}

TEST(ResumeChecks, PipelineVersionThatIsNoStringIsRefused) {
  EXPECT_EQ(zt::testing::error_of([] {
              pipeline_change_warning({{"data_pipeline", 4}}, kState, data::kPipelineVersion);
            }),
            kState + ": 'data_pipeline' must be a string (the token pipeline version), got 4");
}

// trainer_state.json's "optimizer", checked before use: each of the four values a number in its
// range, named with the file when not; absent or null: the run's own values.
TEST(ResumeChecks, OptimizerValuesAreCheckedAndAbsentMeansTheRunsOwn) {
  const optim::AdamWParams now{0.9, 0.95, 1e-6, 0.01};
  const TrainArgs a;
  const auto resumed = [&](const Json& st) {
    return resumed_adamw(st, kState, now, a, "runs/x/checkpoint-2", /*log=*/false);
  };
  EXPECT_EQ(resumed({{"global_step", 2}}).beta2, 0.95);
  EXPECT_EQ(resumed({{"optimizer", nullptr}}).weight_decay, 0.01);
  const optim::AdamWParams used = resumed({{"optimizer", adamw_to_json({0.8, 0.99, 1e-8, 0.1})}});
  EXPECT_EQ(used.beta1, 0.8);
  EXPECT_EQ(used.beta2, 0.99);
  EXPECT_EQ(used.eps, 1e-8);
  EXPECT_EQ(used.weight_decay, 0.1);
  Json bad = {{"optimizer", adamw_to_json(now)}};
  bad["optimizer"]["adam_beta2"] = 1.0;
  EXPECT_EQ(zt::testing::error_of([&] { resumed(bad); }),
            kState + ": 'optimizer.adam_beta2' must be a number in [0, 1), got 1.0");
  bad["optimizer"] = adamw_to_json(now);
  bad["optimizer"].erase("weight_decay");
  EXPECT_EQ(zt::testing::error_of([&] { resumed(bad); }),
            kState + ": 'optimizer.weight_decay' must be a number >= 0, got nothing");
  EXPECT_EQ(zt::testing::error_of([&] {
              resumed({{"optimizer", "adamw"}});
            }),
            kState +
                ": 'optimizer' must be an object (adam_beta1, adam_beta2, adam_epsilon, "
                "weight_decay) or null, got \"adamw\"");
}

// A checkpoint from before trainer_state.json recorded "optimizer": its args.yaml (the saving
// run's resolved config) gives the values; without the file, or without the four numbers, none.
TEST(ResumeChecks, OptimizerValuesOfAnOlderCheckpointComeFromItsArgsYaml) {
  zt::testing::TempDir d;
  EXPECT_FALSE(adamw_from_args_yaml(d.path()).has_value());
  std::ofstream(d / "args.yaml") << "trainer:\n  weight_decay: 0.1\n  adam_beta1: 0.9\n"
                                    "  adam_beta2: 0.95\n  adam_epsilon: 1.0e-06\n";
  const std::optional<Json> o = adamw_from_args_yaml(d.path());
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(*o, adamw_to_json({0.9, 0.95, 1e-6, 0.1}));
  std::ofstream(d / "args.yaml") << "trainer:\n  weight_decay: 0.1\n  adam_beta1: 0.9\n";
  EXPECT_FALSE(adamw_from_args_yaml(d.path()).has_value());
  std::ofstream(d / "args.yaml") << "trainer: [\n";
  EXPECT_FALSE(adamw_from_args_yaml(d.path()).has_value());
}

// A resumed run takes the checkpoint's logging / eval / save steps as trainer_state.json writes
// them (a 10.0 written under eval_strategy epoch stays 10.0 in its own files), and refuses an
// eval_steps of 0 (written under eval_strategy epoch / no) where its eval_strategy is steps, on
// which transformers' DefaultFlowCallback would divide by zero.
TEST(ResumeChecks, IntervalStepsAreTheCheckpointsAsWritten) {
  HfTrainerStateRead saved;
  saved.logging_steps = 10;
  saved.eval_steps = 10;
  saved.save_steps = 0;
  saved.logging_steps_value = 10;
  saved.eval_steps_value = 10.0;
  saved.save_steps_value = 0;
  TrainArgs a;
  a.logging_steps = 10;
  a.eval_strategy = IntervalStrategy::kEpoch;
  a.save_strategy = SaveStrategy::kNo;
  set_hf_state_steps(&a, 100);
  EXPECT_EQ(a.state_eval_steps.dump(), "500");
  resume_interval_steps(saved, kState, 100, &a, /*log=*/false);
  EXPECT_EQ(a.state_logging_steps.dump() + " " + a.state_eval_steps.dump() + " " +
                a.state_save_steps.dump(),
            "10 10.0 0");
  EXPECT_EQ(std::tuple(a.logging_steps, a.eval_steps, a.save_steps), std::tuple(10, 10, 0));

  saved.eval_steps = 0;
  saved.eval_steps_value = 0;
  TrainArgs b;
  b.logging_steps = 10;
  b.eval_strategy = IntervalStrategy::kSteps;
  set_hf_state_steps(&b, 100);
  EXPECT_EQ(b.state_eval_steps.dump(), "10");
  try {
    resume_interval_steps(saved, kState, 100, &b, false);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              kState +
                  ": 'eval_steps' is 0, and this run's trainer.eval_strategy is steps: "
                  "transformers' resumed Trainer would divide the step by it "
                  "(ZeroDivisionError); resume with the trainer.eval_strategy the checkpoint was "
                  "saved under, or start a new run");
  }
  b.eval_strategy = IntervalStrategy::kEpoch;  // never divided by: taken
  resume_interval_steps(saved, kState, 100, &b, false);
  EXPECT_EQ(b.eval_steps, 0);
}

}  // namespace
}  // namespace zt::train
