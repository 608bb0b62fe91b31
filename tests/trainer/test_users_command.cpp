// The users' own files and command line (../shared/seed_configs: sft.yaml, sft_zero1_4gpu.yaml,
// copied unchanged) run under `zerotune launch … train` on 1 and 2 CPU ranks. What stands in for
// their GPUs and data: `model_name=Qwen/Qwen2.5-1.5B` resolves through a local HF cache (HF_HOME)
// whose snapshot holds a 2-layer, hidden-16 Qwen2 config.json and the Qwen2.5 tokenizer; their
// relative data paths (data/UltraFeedback/*.parquet) hold 64 + 8 rows of the demo data; and
// compute.global_batch_size=16 (their 256 needs more rows than a test can train on). Everything
// else is their command line as they type it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "io/json.h"
#include "io/safetensors.h"
#include "train_cli_util.h"

namespace fs = std::filesystem;

namespace {

using zt_test::run;
using zt_test::RunResult;
using zt_test::slurp;
using zt_test::train_events;

class UsersCommand : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string error;
    root_ = zt_test::fresh_root_with_demo("zt_users_cmd_", 64, 8, 11, &error);
    ASSERT_FALSE(root_.empty()) << error;
    const fs::path snap = zt_test::hf_snapshot(root_ / "hf", "Qwen/Qwen2.5-1.5B", "5fee7c4");
    std::ofstream(snap / "config.json") << R"({
  "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 151936, "hidden_size": 16,
  "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "max_position_embeddings": 4096, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "hidden_act": "silu",
  "initializer_range": 0.02, "tie_word_embeddings": true, "use_sliding_window": false,
  "bos_token_id": 151643, "eos_token_id": 151643, "torch_dtype": "bfloat16"})";
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      fs::copy_file(fs::path(ZT_SOURCE_DIR) / "configs/tokenizers/qwen2.5-instruct" / f, snap / f);
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  // A fresh working directory holding the users' files unchanged and their data layout.
  static fs::path workdir(const std::string& name) {
    return zt_test::users_workdir(root_ / name, root_ / "demo");
  }

  // The users' command line with N ranks, run in `w`.
  static RunResult users_command(const fs::path& w, int n, const std::string& extra = "") {
    const std::string ns = std::to_string(n);
    return run("cd " + w.string() + " && HF_HOME=" + (root_ / "hf").string() + " ZEROTUNE_CACHE_DIR=" +
               (root_ / "cache").string() + " " + ZT_BINARY + " launch --num_processes " + ns +
               " --config_file sft_zero1_4gpu.yaml train --config sft.yaml model_name=Qwen/Qwen2.5-1.5B "
               "trainer.per_device_train_batch_size=4 trainer.eval_steps=10 trainer.seed=42 "
               "trainer.full_determinism=true compute.n_gpus=" +
               ns + " compute.global_batch_size=16 compute.threads=1 " + extra);
  }

  static fs::path root_;
};
fs::path UsersCommand::root_;

TEST_F(UsersCommand, RunsUnchangedOnOneAndTwoRanks) {
  const fs::path w1 = workdir("w1"), w2 = workdir("w2");
  const RunResult a = users_command(w1, 1);
  ASSERT_EQ(a.status, 0) << a.output;
  const RunResult b = users_command(w2, 2);
  ASSERT_EQ(b.status, 0) << b.output;
  // Start-up notes: the no-op keys of their file and the formatting choice; ZeRO-1 + offload.
  for (const char* s : {"sft.yaml:14: use_ms: true changes nothing in zerotune",
                        "sft.yaml:42: trainer.use_liger_kernel: true changes nothing in zerotune",
                        "sft.yaml: trainer.full_determinism: true changes nothing in zerotune",
                        "dataset.prompt_format is chat", "rank 0 of 2 (tcp comm)",
                        "ZeRO stage 1 + optimizer offload",
                        "accumulation 2 → global batch 16; 4 steps/epoch, 12 steps in all"})
    EXPECT_NE(b.output.find(s), std::string::npos) << s << "\n" << b.output;
  EXPECT_EQ(b.output.find("error"), std::string::npos) << b.output;
  // Their layout of outputs: exp_dir logs/sft, output_dir ${exp_dir}/ckpts, TensorBoard in
  // ${exp_dir}/tensorboard, save_strategy "no" (no checkpoints).
  for (const fs::path& w : {w1, w2}) {
    const fs::path exp = w / "logs" / "sft";
    EXPECT_TRUE(fs::exists(exp / "ckpts" / "model.safetensors")) << w;
    EXPECT_TRUE(fs::exists(exp / "ckpts" / "tokenizer.json")) << w;
    // Their DeepSpeed config with bf16 casts TRL's module to bf16: the model is saved in bf16.
    const zt::SafetensorsReader saved(exp / "ckpts");
    EXPECT_EQ(saved.info("model.embed_tokens.weight").dtype_str, "BF16") << w;
    EXPECT_FALSE(fs::is_empty(exp / "tensorboard")) << w;
    EXPECT_FALSE(fs::exists(exp / "checkpoint-10")) << w;
    const std::string args = slurp(exp / "args.yaml");
    EXPECT_NE(args.find("prompt_format: chat"), std::string::npos) << args;
    EXPECT_NE(args.find("gradient_accumulation_steps: " + std::string(w == w1 ? "4" : "2")), std::string::npos)
        << args;
  }
  // 12 steps (64 rows / 16 per step × 3 epochs), logged every 10 (and the last), eval at 10.
  const auto e1 = train_events(w1 / "logs" / "sft"), e2 = train_events(w2 / "logs" / "sft");
  ASSERT_EQ(e1.size(), 3u);
  ASSERT_EQ(e2.size(), e1.size());
  EXPECT_EQ(e1[0]["step"], 10);
  EXPECT_TRUE(e1[1].contains("eval_loss"));
  EXPECT_EQ(e1[2]["step"], 12);
  // The same samples per step on 1 and 2 ranks: equal up to reassociation.
  for (size_t i = 0; i < e1.size(); ++i) {
    const char* key = e1[i].contains("loss") ? "loss" : "eval_loss";
    const double x = e1[i][key].get<double>(), y = e2[i][key].get<double>();
    EXPECT_NEAR(x, y, 1e-5 * std::abs(x)) << "event " << i;
    EXPECT_GT(x, 5.0);  // a random 151936-way model
  }
  // Re-running the same command never overwrites the earlier run.
  const RunResult again = users_command(w2, 2);
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.output.find("exp_dir logs/sft already holds an earlier run (logs/sft/args.yaml, "
                              "logs/sft/metrics.jsonl, logs/sft/ckpts/model.safetensors); zerotune does not "
                              "overwrite a run's outputs"),
            std::string::npos)
      << again.output;
  EXPECT_EQ(again.output.find("plan:"), std::string::npos) << again.output;  // refused before any data
  // Resuming is suggested exactly when the earlier run left a checkpoint.
  bool ckpt = false;
  for (const fs::path& d : {w2 / "logs" / "sft", w2 / "logs" / "sft" / "ckpts"})
    if (fs::is_directory(d))
      for (const auto& e : fs::directory_iterator(d))
        ckpt = ckpt || e.path().filename().string().rfind("checkpoint-", 0) == 0;
  EXPECT_EQ(again.output.find("resume_from_checkpoint=true") != std::string::npos, ckpt) << again.output;
  EXPECT_EQ(train_events(w2 / "logs" / "sft"), e2);
}

TEST_F(UsersCommand, OverwriteOrAnotherExpDirRunsAgain) {
  const fs::path w = workdir("w3");
  ASSERT_EQ(users_command(w, 1, "trainer.num_train_epochs=1").status, 0);
  const RunResult other = users_command(w, 1, "trainer.num_train_epochs=1 exp_dir=logs/sft_2");
  ASSERT_EQ(other.status, 0) << other.output;
  EXPECT_TRUE(fs::exists(w / "logs" / "sft_2" / "ckpts" / "model.safetensors"));
  const RunResult over = users_command(w, 1, "trainer.num_train_epochs=1 trainer.overwrite_output_dir=true");
  ASSERT_EQ(over.status, 0) << over.output;
  EXPECT_EQ(train_events(w / "logs" / "sft"), train_events(w / "logs" / "sft_2"));  // same job, same bits
}

TEST_F(UsersCommand, HubDatasetNameFromTheLocalCache) {
  // dataset.is_local: false → dataset.*.name, read from the hub cache's parquet files.
  const fs::path w = workdir("w4");
  const fs::path snap = root_ / "hf" / "hub" / "datasets--org--uf" / "snapshots" / "r1" / "data";
  fs::create_directories(snap);
  fs::create_directories(root_ / "hf" / "hub" / "datasets--org--uf" / "refs");
  std::ofstream(root_ / "hf" / "hub" / "datasets--org--uf" / "refs" / "main") << "r1";
  fs::copy_file(root_ / "demo" / "train.parquet", snap / "train-00000-of-00001.parquet", fs::copy_options::skip_existing);
  fs::copy_file(root_ / "demo" / "test.parquet", snap / "test-00000-of-00001.parquet", fs::copy_options::skip_existing);
  fs::remove_all(w / "data");
  const RunResult r = users_command(w, 1,
                                    "trainer.num_train_epochs=1 dataset.is_local=false dataset.train.name=org/uf "
                                    "dataset.eval.name=org/uf dataset.eval.split=test");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("datasets--org--uf/snapshots/r1/data/train-00000-of-00001.parquet"), std::string::npos)
      << r.output;
  const RunResult missing = users_command(w, 1, "dataset.is_local=false dataset.train.name=org/absent exp_dir=x");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.output.find("dataset 'org/absent' is not in the Hugging Face hub cache (looked in " +
                                (root_ / "hf" / "hub" / "datasets--org--absent").string() + ")"),
            std::string::npos)
      << missing.output;
}

TEST_F(UsersCommand, ConfigGroupsComposeAndArgsYamlShowsTheComposedConfig) {
  // A config group beside their sft.yaml, as a Hydra user would add one.
  const fs::path w = workdir("w5");
  fs::create_directories(w / "trainer");
  std::ofstream(w / "trainer" / "short.yaml") << "num_train_epochs: 1\nlearning_rate: 1.0e-4\n";
  // Their file unchanged has only override entries: adding a group from the command line is
  // refused (Hydra 1.3 would drop the file's own keys), with the fix.
  const RunResult added = users_command(w, 1, "+trainer=short");
  EXPECT_EQ(added.status, 1);
  EXPECT_NE(added.output.find(
                "sft.yaml: defaults: the list has only override entries and no _self_, so with "
                "'+trainer=short' Hydra 1.3 would compose the added group alone"),
            std::string::npos)
      << added.output;
  // With `_self_` first and the group in the list, the group's keys win over the file's (3 epochs →
  // 1), the command line wins over both, and args.yaml is the composed config.
  std::string text = slurp(w / "sft.yaml");
  const std::string old_defaults = text.substr(0, text.find("hydra:"));
  text.replace(
      0, old_defaults.size(),
      "defaults:\n  - _self_\n  - trainer: short\n  - override hydra/hydra_logging: disabled\n"
      "  - override hydra/job_logging: disabled\n\n");
  std::ofstream(w / "sft.yaml") << text;
  const RunResult r = users_command(w, 1, "trainer.learning_rate=2.0e-4");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("4 steps/epoch, 4 steps in all"), std::string::npos) << r.output;
  const std::string args = slurp(w / "logs" / "sft" / "args.yaml");
  for (const char* s : {"num_train_epochs: 1\n", "learning_rate: 0.0002\n", "max_length: 4096\n"})
    EXPECT_NE(args.find(s), std::string::npos) << s << "\n" << args;
  EXPECT_EQ(args.find("defaults"), std::string::npos) << args;
}

}  // namespace
