// Runs that are too small, reused or hopeless (issue 7 §3), through the real binary on the inputs
// of ../shared/cases: `fewer-samples-than-global-batch` and `rotation-deletes-new-checkpoints`.
// Each case folder is copied into a temporary directory (the shared one is read-only) and run from
// there, as its run.sh does.
#include <gtest/gtest.h>

#include <fstream>

#include "core/file_util.h"
#include "core/zt_test_util.h"
#include "io/json.h"
#include "train/sampler.h"

namespace fs = std::filesystem;
using zt::Json;
using zt::testing::CommandResult;
using zt::testing::run_command;

namespace {

const fs::path kCases = fs::path(ZT_SHARED_DATA) / ".." / "cases";
const fs::path kTokenizer = fs::path(ZT_SHARED_DATA) / "tokenizers" / "qwen2.5-instruct";

std::vector<Json> events(const fs::path& exp) {
  std::vector<Json> out;
  std::ifstream f(exp / "metrics.jsonl");
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) out.push_back(Json::parse(line));
  return out;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class Cases : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::is_directory(kCases)) << kCases << " (../shared/cases beside the checkout)";
  }

  // A writable copy of case `name` under the test's temporary directory.
  fs::path copy_case(const std::string& name) {
    const fs::path dst = tmp_.path() / name;
    fs::copy(kCases / name, dst, fs::copy_options::recursive);
    for (const auto& e : fs::recursive_directory_iterator(dst))
      fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
    fs::permissions(dst, fs::perms::owner_write, fs::perm_options::add);
    return dst;
  }

  // `zerotune train --config sft.yaml model.tokenizer_name_or_path=TOK <overrides>` run in `dir`
  // (through `zerotune launch` for ranks > 1).
  static CommandResult train(const fs::path& dir, const std::string& overrides, int ranks = 1) {
    std::string cmd = "cd '" + dir.string() + "' && " + ZT_BINARY;
    if (ranks > 1) cmd += " launch --num_processes " + std::to_string(ranks);
    return run_command(cmd + " train --config sft.yaml model.tokenizer_name_or_path=" +
                       kTokenizer.string() + " " + overrides);
  }

  zt::testing::TempDir tmp_;
};

// --------------------------------------------------------------- fewer samples than a global batch

// Target tokens of the case's rows: " first answer" / " second answer here" / " third", each + EOS.
const std::vector<int64_t> kRowTargets = {3, 4, 2};

TEST_F(Cases, FewerSamplesThanGlobalBatchTrainsOneStepNormalisedByItsOwnTargets) {
  const fs::path dir = copy_case("fewer-samples-than-global-batch");
  // 3 rows, micro-batch 1, accumulation 4: one step of 3 micro-batches (HF: steps_in_epoch 3,
  // one update of the 3 there are).
  auto g4 =
      train(dir, "exp_name=g4 trainer.gradient_accumulation_steps=4 trainer.save_strategy=steps");
  ASSERT_EQ(g4.status, 0) << g4.output;
  EXPECT_FALSE(contains(g4.output, "fewer than one global batch")) << g4.output;
  auto e4 = events(dir / "runs" / "g4");
  ASSERT_EQ(e4.size(), 1u);
  EXPECT_EQ(e4[0]["step"], 1);
  EXPECT_EQ(e4[0]["target_tokens"], 9);
  EXPECT_EQ(e4[0]["epoch"], 1.0);
  const Json st =
      Json::parse(zt::read_file(dir / "runs" / "g4" / "checkpoint-1" / "zerotune_state.json"));
  EXPECT_EQ(st["global_step"], 1);
  EXPECT_EQ(st["applied_steps"], 1);
  EXPECT_TRUE(fs::exists(dir / "runs" / "g4" / "final" / "model.safetensors"));
  // micro-batch 8: one micro-batch of the 3 samples; the same step up to summation order.
  auto b8 = train(dir, "exp_name=b8 trainer.per_device_train_batch_size=8");
  ASSERT_EQ(b8.status, 0) << b8.output;
  auto e8 = events(dir / "runs" / "b8");
  ASSERT_EQ(e8.size(), 1u);
  EXPECT_EQ(e8[0]["step"], 1);
  EXPECT_EQ(e8[0]["target_tokens"], 9);
  const double l4 = e4[0]["loss"].get<double>(), l8 = e8[0]["loss"].get<double>();
  EXPECT_GT(l4, 11.0);  // ~ ln(151936) for an untrained model
  EXPECT_NEAR(l4, l8, 1e-6 * l4);
  const double n4 = e4[0]["grad_norm"].get<double>(), n8 = e8[0]["grad_norm"].get<double>();
  EXPECT_NEAR(n4, n8, 1e-5 * n4);  // the gradient is divided by N = 9 in both
}

TEST_F(Cases, FewerSamplesThanGlobalBatchOnTwoRanksCyclesAsAccelerate) {
  const fs::path dir = copy_case("fewer-samples-than-global-batch");
  // accelerate even_batches: the epoch's stream is perm[p mod 3]; micro-batch j on rank j mod 2.
  const std::vector<int64_t> perm = zt::train::torch_randperm(3, 42);
  // B = 1, G = 4: 3 micro-batches → 2 per rank, the 4th repeats perm[0]: N = 9 + t(perm[0]).
  auto g4 = train(dir, "exp_name=w2g4 trainer.gradient_accumulation_steps=4", 2);
  ASSERT_EQ(g4.status, 0) << g4.output;
  auto e4 = events(dir / "runs" / "w2g4");
  ASSERT_EQ(e4.size(), 1u);
  EXPECT_EQ(e4[0]["step"], 1);
  EXPECT_EQ(e4[0]["epoch"], 1.0);
  EXPECT_EQ(e4[0]["target_tokens"], 9 + kRowTargets[perm[0]]);
  // B = 8: one micro-batch per rank, 16 positions = 5 passes over the 3 samples + perm[0].
  auto b8 = train(dir, "exp_name=w2b8 trainer.per_device_train_batch_size=8", 2);
  ASSERT_EQ(b8.status, 0) << b8.output;
  auto e8 = events(dir / "runs" / "w2b8");
  ASSERT_EQ(e8.size(), 1u);
  EXPECT_EQ(e8[0]["step"], 1);
  EXPECT_EQ(e8[0]["target_tokens"], 5 * 9 + kRowTargets[perm[0]]);
}

// --------------------------------------------------------------- a reused exp_dir

TEST_F(Cases, RotationNeverDeletesTheNewCheckpointAndResumeTakesThisRunsOwn) {
  const fs::path dir = copy_case("rotation-deletes-new-checkpoints");
  const fs::path exp = dir / "runs" / "reused";
  fs::create_directories(exp / "checkpoint-1000");  // an older, longer run's
  const std::string save =
      "trainer.max_steps=4 trainer.save_strategy=steps trainer.save_steps=2 "
      "trainer.save_total_limit=1";
  auto r = train(dir, save);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "runs/reused holds 1 checkpoint(s) of another run: checkpoint-1000 (no "
                       "trainer_state.json: not written by zerotune)"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "deleted runs/reused/checkpoint-2")) << r.output;
  EXPECT_FALSE(contains(r.output, "deleted runs/reused/checkpoint-4")) << r.output;
  EXPECT_FALSE(contains(r.output, "deleted runs/reused/checkpoint-1000")) << r.output;
  EXPECT_TRUE(fs::exists(exp / "checkpoint-4" / "model.safetensors"));
  EXPECT_FALSE(fs::exists(exp / "checkpoint-2"));
  EXPECT_TRUE(fs::exists(exp / "checkpoint-1000"));
  const std::string run_id =
      Json::parse(zt::read_file(exp / "zerotune_run.json"))["run_id"].get<std::string>();
  EXPECT_EQ(run_id.size(), 32u);
  EXPECT_EQ(Json::parse(zt::read_file(exp / "checkpoint-4" / "zerotune_state.json"))["run_id"],
            run_id);

  // resume_from_checkpoint: true resumes this run's newest, not checkpoint-1000.
  r = train(dir, save + " trainer.resume_from_checkpoint=true");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "resumed from runs/reused/checkpoint-4 at step 4")) << r.output;
  EXPECT_TRUE(fs::exists(exp / "checkpoint-1000"));

  // Another run (fresh, saving nothing; replacing the earlier run's outputs needs
  // overwrite_output_dir) in the same directory is told about both; resuming after it says plainly
  // that the last run has no checkpoint and which ones are there.
  r = train(dir, "trainer.max_steps=1 trainer.save_strategy=no trainer.overwrite_output_dir=true");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(
      contains(r.output, "holds 2 checkpoint(s) of another run: checkpoint-4 (run " + run_id + ")"))
      << r.output;
  r = train(dir, save + " trainer.resume_from_checkpoint=true");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(
      r.output,
      "saved no checkpoint; those there belong to other runs: checkpoint-4 (run " + run_id))
      << r.output;
  EXPECT_TRUE(contains(r.output, "trainer.resume_from_checkpoint=<checkpoint directory>"))
      << r.output;
  EXPECT_TRUE(fs::exists(exp / "checkpoint-4" / "model.safetensors"));
}

// --------------------------------------------------------------- hopeless runs

TEST_F(Cases, EveryStepSkippedExitsNonZeroWithoutFinalModel) {
  const fs::path dir = copy_case("rotation-deletes-new-checkpoints");
  // Weights drawn with a standard deviation past fp32's range: every loss is NaN.
  std::string cfg = zt::read_file(dir / "model" / "config.json");
  const std::string key = "\"initializer_range\": 0.02";
  ASSERT_NE(cfg.find(key), std::string::npos);
  cfg.replace(cfg.find(key), key.size(), "\"initializer_range\": 1e39");
  fs::create_directories(dir / "nan_model");
  std::ofstream(dir / "nan_model" / "config.json") << cfg;
  auto r = train(
      dir,
      "exp_name=allskip model.name_or_path=nan_model trainer.max_steps=3 trainer.nan_policy=skip");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(
      contains(r.output,
               "no optimizer step was applied: all 3 step(s) of the run were skipped (0 without "
               "a target token, 3 with a non-finite loss or gradient norm under "
               "trainer.nan_policy: skip)"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "no final model is written to runs/allskip/final")) << r.output;
  EXPECT_FALSE(fs::exists(dir / "runs" / "allskip" / "final"));
  const auto ev = events(dir / "runs" / "allskip");
  ASSERT_EQ(ev.size(), 3u);
  for (const auto& e : ev) {
    EXPECT_EQ(e["skipped_steps"], 1) << e.dump();
    EXPECT_FALSE(e.contains("loss")) << e.dump();
  }
}

TEST_F(Cases, NoTargetTokenAnywhereFailsBeforeTraining) {
  const fs::path dir = copy_case("rotation-deletes-new-checkpoints");
  std::ofstream(dir / "long.jsonl")
      << R"({"prompt": "a prompt longer than four tokens ->", "completion": " x"})"
      << "\n";
  auto r = train(
      dir,
      "exp_name=notarget dataset.train.path=long.jsonl trainer.max_length=4 trainer.max_steps=2");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(
      contains(r.output,
               "long.jsonl: no example left out of 1 rows (dropped: 1 no_target_after_truncation)"))
      << r.output;
  EXPECT_FALSE(fs::exists(dir / "runs" / "notarget" / "final"));
}

// --------------------------------------------------------------- compare on real runs

TEST_F(Cases, CompareZero1AndZero3RunsAreBitwiseEqual) {
  const fs::path dir = copy_case("rotation-deletes-new-checkpoints");
  for (std::string stage : {"1", "3"}) {
    auto r =
        train(dir, "exp_name=z" + stage + " compute.zero_stage=" + stage + " trainer.max_steps=4");
    ASSERT_EQ(r.status, 0) << r.output;
  }
  auto r = run_command("cd '" + dir.string() + "' && " + ZT_BINARY +
                       " compare runs/z1 runs/z3 --no-png");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "equal: every logged metric is bitwise equal in all 2 runs"))
      << r.output;
  r = run_command("cd '" + dir.string() + "' && " + ZT_BINARY +
                  " train --config sft.yaml model.tokenizer_name_or_path=" + kTokenizer.string() +
                  " exp_name=lr2 trainer.max_steps=4 trainer.learning_rate=2e-3 && " + ZT_BINARY +
                  " compare runs/z1 runs/lr2 --no-png");
  EXPECT_EQ(r.status, 1) << r.output;
  // The learning rate differs from step 1, the loss from step 2 (step 1 runs on the same weights).
  EXPECT_TRUE(contains(r.output, "step 1: 0.001 vs 0.002")) << r.output;
  EXPECT_TRUE(contains(r.output, "differ: ")) << r.output;
}

}  // namespace
