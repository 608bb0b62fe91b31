// What `zerotune train` does with the directories a TRL user points it at (issue: bad checkpoint
// and output inputs): the final model exported into a directory that holds other things,
// `resume_from_checkpoint` given a wrong path, a renamed or hand-edited checkpoint, one with a
// rank's ZeRO state missing, or one of another model. Through the real binary, on a tiny model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "io/json.h"
#include "train_cli_util.h"

namespace fs = std::filesystem;

namespace {

using zt_test::exited;
using zt_test::run;
using zt_test::RunResult;
using zt_test::slurp;

class CheckpointInputs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string error;
    root_ = zt_test::fresh_root_with_demo("zt_ckpt_inputs_", 16, 4, 3, &error);
    ASSERT_FALSE(root_.empty()) << error;
    write_model(root_ / "model", 2);
    std::ofstream(root_ / "sft.yaml")
        << "exp_name: x\nexp_dir: " << (root_ / "runs").string() << "/${exp_name}\n"
        << "model:\n  name_or_path: " << (root_ / "model").string()
        << "\n  tokenizer_name_or_path: " << ZT_SOURCE_DIR
        << "/configs/tokenizers/qwen2.5-instruct\n"
        << "dataset:\n  train:\n    path: " << (root_ / "demo/train.parquet").string()
        << "\n  prompt_format: chat\n  cache_dir: " << (root_ / "cache").string() << "\n"
        << "compute:\n  backend: cpu\n  threads: 1\n"
           "trainer:\n  learning_rate: 1.0e-3\n  per_device_train_batch_size: 1\n"
           "  gradient_accumulation_steps: 1\n  max_steps: 2\n  max_length: 64\n"
           "  logging_steps: 1\n  save_steps: 1\n  gradient_checkpointing: false\n"
           "  bf16: false\n  report_to: none\n";
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  // A from-scratch Qwen2 config (no weights) with `layers` layers.
  static void write_model(const fs::path& dir, int layers) {
    fs::create_directories(dir);
    std::ofstream(dir / "config.json")
        << R"({"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 16,
  "intermediate_size": 32, "num_hidden_layers": )"
        << layers << R"(, "num_attention_heads": 4, "num_key_value_heads": 2,
  "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
  "hidden_act": "silu", "tie_word_embeddings": true, "torch_dtype": "float32"})";
  }
  static RunResult train(const std::string& name, const std::string& overrides) {
    return run(std::string(ZT_BINARY) + " train --config " + (root_ / "sft.yaml").string() +
               " exp_name=" + name + " " + overrides);
  }
  static fs::path exp(const std::string& name) { return root_ / "runs" / name; }
  static fs::path root_;
};
fs::path CheckpointInputs::root_;

// trainer.output_dir=${exp_dir} (transformers' layout: checkpoints and the final model in one
// directory) or a directory of the user's: the final export replaced the directory whole,
// deleting the run's checkpoints, metrics.jsonl and the user's files. Now the model files are
// written beside them.
TEST_F(CheckpointInputs, FinalModelIntoADirectoryThatHoldsOtherThingsKeepsThem) {
  RunResult r = train("same", "'trainer.output_dir=${exp_dir}'");
  ASSERT_TRUE(exited(r, 0, "saved the final model to " + exp("same").string()));
  for (const char* f : {"checkpoint-1/trainer_state.json", "checkpoint-1/zerotune_state.json",
                        "checkpoint-2/zero_state_rank00000.bin", "metrics.jsonl", "args.yaml",
                        "zerotune_run.json", "model.safetensors", "config.json", "tokenizer.json"})
    EXPECT_TRUE(fs::exists(exp("same") / f)) << f;
  // The checkpoints are still a run's: resuming from the last one works.
  r = train("same", "'trainer.output_dir=${exp_dir}' trainer.resume_from_checkpoint=true");
  EXPECT_TRUE(exited(r, 0, "resumed from " + (exp("same") / "checkpoint-2").string()));

  const fs::path mine = root_ / "mine";
  fs::create_directories(mine);
  std::ofstream(mine / "notes.txt") << "keep me";
  r = train("mine", "trainer.max_steps=1 trainer.output_dir=" + mine.string());
  ASSERT_TRUE(exited(r, 0, "holds other files ('notes.txt', …), so the model files were written"));
  EXPECT_EQ(slurp(mine / "notes.txt"), "keep me");
  EXPECT_TRUE(fs::exists(mine / "model.safetensors"));
  for (const auto& e : fs::directory_iterator(mine))  // no staging directory left behind
    EXPECT_EQ(e.path().filename().string().find(".zerotune-export"), std::string::npos);
}

// A path that is not there, or a file: said so (it was "has no trainer_state.json (not a zerotune
// checkpoint)"), with the checkpoints that are there.
TEST_F(CheckpointInputs, ResumePathThatDoesNotExistOrIsAFileIsNamed) {
  ASSERT_TRUE(exited(train("path", ""), 0));
  RunResult r =
      train("path2", "trainer.resume_from_checkpoint=" + (exp("path") / "checkpoint-3").string());
  EXPECT_TRUE(exited(r, 1,
                     "resume_from_checkpoint: '" + (exp("path") / "checkpoint-3").string() +
                         "' does not exist (the checkpoints in " + exp("path").string() +
                         ": checkpoint-1, checkpoint-2)"));
  r = train("path2", "trainer.resume_from_checkpoint=" + (exp("path") / "metrics.jsonl").string());
  EXPECT_TRUE(exited(r, 1,
                     "resume_from_checkpoint: " + (exp("path") / "metrics.jsonl").string() +
                         " is a file; expected a checkpoint directory"));
  EXPECT_FALSE(fs::exists(exp("path2")));
}

// The global_step of zerotune_state.json or of transformers' trainer_state.json edited by hand
// (in transformers it moves the resume point): zerotune resumed at the plan's step and ignored it
// silently; now an error naming both. A checkpoint directory renamed to another step resumes at
// the step it holds, with a warning.
TEST_F(CheckpointInputs, EditedGlobalStepIsRefusedAndARenamedCheckpointResumesAtItsStep) {
  ASSERT_TRUE(exited(train("gs", "trainer.max_steps=1"), 0));
  const fs::path ck = exp("gs") / "checkpoint-1", state = ck / "zerotune_state.json",
                 hf = ck / "trainer_state.json";
  zt::Json st = zt::Json::parse(slurp(state));
  ASSERT_EQ(st["global_step"], 1);
  st["global_step"] = 2;
  std::ofstream(state) << st.dump(2);
  RunResult r = train("gs2", "trainer.resume_from_checkpoint=" + ck.string());
  EXPECT_TRUE(exited(r, 1,
                     state.string() +
                         ": 'global_step' is 2, but the saved data order ('plan' next_step) is "
                         "at step 1"));
  st["global_step"] = 1;
  std::ofstream(state) << st.dump(2);
  const std::string hf_text = slurp(hf);
  zt::Json h = zt::Json::parse(hf_text);
  ASSERT_EQ(h["global_step"], 1);
  h["global_step"] = 3;
  std::ofstream(hf) << h.dump(2);
  r = train("gs2", "trainer.resume_from_checkpoint=" + ck.string());
  EXPECT_TRUE(exited(r, 1,
                     hf.string() + ": 'global_step' is 3, but " + state.string() +
                         " holds step 1 (the checkpoint's two state files disagree: edited by "
                         "hand, or copied from another checkpoint?)"));
  std::ofstream(hf) << hf_text;
  const fs::path renamed = exp("gs") / "checkpoint-7";
  fs::rename(ck, renamed);
  r = train("gs3", "trainer.resume_from_checkpoint=" + renamed.string());
  EXPECT_TRUE(exited(r, 0,
                     "resume_from_checkpoint: " + renamed.string() + " holds step 1 (" +
                         (renamed / "zerotune_state.json").string() +
                         " global_step), not step 7 as its name says"));
  EXPECT_NE(r.output.find("resumed from " + renamed.string() + " at step 1"), std::string::npos)
      << r.output;
}

// A checkpoint past the run's last step (max_steps lowered on resume): the keys to change, where
// it was "next_step 2 is outside [0, 1] (the run's optimizer steps)", naming neither key.
TEST_F(CheckpointInputs, CheckpointPastTheLastStepNamesMaxSteps) {
  ASSERT_TRUE(exited(train("past", "trainer.max_steps=2"), 0));
  const fs::path ck = exp("past") / "checkpoint-2";
  const RunResult r =
      train("past2", "trainer.max_steps=1 trainer.resume_from_checkpoint=" + ck.string());
  EXPECT_TRUE(exited(r, 1,
                     (ck / "zerotune_state.json").string() +
                         ": the checkpoint has trained 2 optimizer steps, more than this run's 1 "
                         "in all (trainer.max_steps, or num_train_epochs when max_steps is -1); to "
                         "train on, set trainer.max_steps above 2"));
  EXPECT_FALSE(fs::exists(exp("past2")));
}

// A checkpoint without its rank's ZeRO state file: the checkpoint and what is missing (it was
// "<file>: cannot open: No such file or directory").
TEST_F(CheckpointInputs, MissingZeroStateNamesTheCheckpointAndTheRank) {
  ASSERT_TRUE(exited(train("zs", "trainer.max_steps=1"), 0));
  const fs::path ck = exp("zs") / "checkpoint-1";
  fs::remove(ck / "zero_state_rank00000.bin");
  const RunResult r = train("zs2", "trainer.resume_from_checkpoint=" + ck.string());
  EXPECT_TRUE(exited(r, 1,
                     ck.string() +
                         ": the checkpoint has no zero_state_rank00000.bin (rank 0's master "
                         "weights and optimizer state); it is incomplete"));
}

// A checkpoint whose ZeRO state file comes from another save (its Adam step count is not the
// trainer state's applied_steps): refused, where it trained on with mismatched moments.
TEST_F(CheckpointInputs, StateFileOfAnotherSaveIsRefused) {
  ASSERT_TRUE(exited(train("mix", "trainer.max_steps=2 trainer.save_steps=1"), 0));
  const fs::path ck = exp("mix") / "checkpoint-1";
  fs::copy_file(exp("mix") / "checkpoint-2" / "zero_state_rank00000.bin",
                ck / "zero_state_rank00000.bin", fs::copy_options::overwrite_existing);
  const RunResult r = train("mix2", "trainer.resume_from_checkpoint=" + ck.string());
  EXPECT_TRUE(exited(r, 1,
                     "resume_from_checkpoint: " + ck.string() +
                         ": a zero_state_rank*.bin holds another Adam step count than "
                         "zerotune_state.json's applied_steps (1)"));
}

// A checkpoint of a model with another architecture: the parameter that differs and both
// config.json files (it was "ZeRO state layout hash … does not match this model's …").
TEST_F(CheckpointInputs, CheckpointOfAnotherModelNamesTheParameter) {
  ASSERT_TRUE(exited(train("other", "trainer.max_steps=1"), 0));
  write_model(root_ / "model3", 3);
  const fs::path ck = exp("other") / "checkpoint-1";
  const RunResult r = train("other2", "trainer.resume_from_checkpoint=" + ck.string() +
                                          " model.name_or_path=" + (root_ / "model3").string());
  EXPECT_TRUE(exited(r, 1,
                     "resume_from_checkpoint: " + ck.string() +
                         " is a checkpoint of another model: the run's model has a parameter "
                         "'model.layers.2."));
  EXPECT_NE(r.output.find("which the checkpoint lacks (" + (ck / "config.json").string() +
                          " against " + (root_ / "model3" / "config.json").string() + ")"),
            std::string::npos)
      << r.output;
}

}  // namespace
