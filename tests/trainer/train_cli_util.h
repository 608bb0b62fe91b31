// Helpers of the end-to-end tests that run the zerotune binary (tests/trainer/*.cpp).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "io/json.h"

namespace zt_test {

struct RunResult {
  int status = -1;     // exit status (128 + signal when killed)
  std::string output;  // stdout and stderr together
};

// Runs `cmd` through the shell, stderr merged into stdout.
inline RunResult run(const std::string& cmd) {
  RunResult r;
  std::string full = cmd + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

// The command exited with `status` and its output holds `text` (when given).
inline ::testing::AssertionResult exited(const RunResult& r, int status,
                                         const std::string& text = "") {
  if (r.status == status && r.output.find(text) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "exit status " << r.status << " (expected " << status
                                       << "); expected in the output: '" << text << "'\n"
                                       << r.output;
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// `event` without the fields that measure time or memory (they differ between runs).
inline zt::Json without_timing(zt::Json event) {
  for (const char* k : {"train_tokens_per_second", "peak_memory_gib", "eval_runtime",
                        "eval_samples_per_second", "eval_steps_per_second"})
    event.erase(k);
  return event;
}

// The metrics.jsonl events of a run, without the timing fields.
inline std::vector<zt::Json> train_events(const std::filesystem::path& exp) {
  std::vector<zt::Json> out;
  std::ifstream f(exp / "metrics.jsonl");
  std::string line;
  while (std::getline(f, line)) out.push_back(without_timing(zt::Json::parse(line)));
  return out;
}

// A fresh temp directory <tmp>/<tag><pid> holding `zerotune make-demo-data` output in demo/
// (train.parquet, test.parquet with the given rows and seed); returns it, or an empty path with
// `error` set to the command's output when it fails.
inline std::filesystem::path fresh_root_with_demo(const std::string& tag, int train_rows,
                                                  int test_rows, int seed, std::string* error) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / (tag + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  const RunResult r =
      run(std::string(ZT_BINARY) + " make-demo-data --out " + (root / "demo").string() +
          " --train-rows " + std::to_string(train_rows) + " --test-rows " +
          std::to_string(test_rows) + " --seed " + std::to_string(seed));
  if (r.status != 0) {
    *error = r.output;
    return {};
  }
  return root;
}

// The tiny job the CLI tests train, written into a fresh `root`: demo data (make-demo-data, 48
// train and 10 test rows, seed 7) in data/, a 2-layer Qwen2 of hidden size 32 (from scratch) with
// the real Qwen2.5 tokenizer (vocab 151936) in model/, and sft.yaml: runs/${exp_name}, chat
// prompts, the CPU backend on 1 thread, per_device_train_batch_size 2 and global_batch_size 8
// (gradient_accumulation_steps ??? → 8 / (world × 2)), 4 steps evaluated and saved every 2, bf16
// false, the trainer block last. Returns "" or make-demo-data's output when it fails.
inline std::string write_tiny_job(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  fs::remove_all(root);
  fs::create_directories(root);
  const RunResult r = run(std::string(ZT_BINARY) + " make-demo-data --out " +
                          (root / "data").string() + " --train-rows 48 --test-rows 10 --seed 7");
  if (r.status != 0) return r.output;
  fs::create_directories(root / "model");
  std::ofstream(root / "model" / "config.json") << R"({
  "model_type": "qwen2", "vocab_size": 151936, "hidden_size": 32, "intermediate_size": 64,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
  "hidden_act": "silu", "initializer_range": 0.02, "tie_word_embeddings": true,
  "use_sliding_window": false, "torch_dtype": "float32"})";
  std::ofstream(root / "sft.yaml")
      << "defaults:\n  - _self_\n"
         "exp_name: x\nexp_dir: "
      << (root / "runs").string()
      << "/${exp_name}\n"
         "model:\n  name_or_path: "
      << (root / "model").string()
      << "\n"
         "  tokenizer_name_or_path: "
      << ZT_SOURCE_DIR
      << "/configs/tokenizers/qwen2.5-instruct\n"
         "dataset:\n  train:\n    path: "
      << (root / "data/train.parquet").string()
      << "\n"
         "  eval:\n    path: "
      << (root / "data/test.parquet").string()
      << "\n"
         "  prompt_format: chat\n  cache_dir: "
      << (root / "cache").string()
      << "\n"
         "compute:\n  n_gpus: 1\n  global_batch_size: 8\n  backend: cpu\n  threads: 1\n"
         "trainer:\n  learning_rate: 1.0e-2\n  warmup_steps: 1\n  weight_decay: 0.1\n"
         "  per_device_train_batch_size: 2\n  gradient_accumulation_steps: ???\n"
         "  max_steps: 4\n  max_length: 64\n  logging_steps: 1\n  eval_strategy: steps\n"
         "  eval_steps: 2\n  per_device_eval_batch_size: 3\n  save_steps: 2\n"
         "  gradient_checkpointing: false\n  bf16: false\n  report_to: none\n";
  return "";
}

// An HF hub-cache snapshot directory for model repo `repo` ("Org/Name") under `hf_home`, laid out
// as huggingface_hub does (hub/models--Org--Name/snapshots/<rev>, refs/main = rev); returns it.
inline std::filesystem::path hf_snapshot(const std::filesystem::path& hf_home,
                                         const std::string& repo, const std::string& rev) {
  namespace fs = std::filesystem;
  std::string dir = "models--" + repo;
  for (size_t i = dir.find('/'); i != std::string::npos; i = dir.find('/')) dir.replace(i, 1, "--");
  const fs::path base = hf_home / "hub" / dir, snap = base / "snapshots" / rev;
  fs::create_directories(snap);
  fs::create_directories(base / "refs");
  std::ofstream(base / "refs" / "main") << rev;
  return snap;
}

// A working directory `w` laid out as the users': their sft.yaml and accelerate file from
// ../shared/seed_configs, unchanged, and their data paths data/UltraFeedback/{sft,test_sft}.parquet
// holding `demo`'s train/test parquet (zerotune make-demo-data). Returns w.
inline std::filesystem::path users_workdir(const std::filesystem::path& w,
                                           const std::filesystem::path& demo) {
  namespace fs = std::filesystem;
  fs::create_directories(w / "data" / "UltraFeedback");
  const fs::path seed = fs::path(ZT_SHARED_DATA).parent_path() / "seed_configs";
  fs::copy_file(seed / "sft.yaml", w / "sft.yaml");
  fs::copy_file(seed / "sft_zero1_4gpu.yaml", w / "sft_zero1_4gpu.yaml");
  fs::copy_file(demo / "train.parquet", w / "data" / "UltraFeedback" / "sft.parquet");
  fs::copy_file(demo / "test.parquet", w / "data" / "UltraFeedback" / "test_sft.parquet");
  return w;
}

// ../shared/cases beside the checkout (the shared data folder's sibling).
inline std::filesystem::path shared_cases_dir() {
  return std::filesystem::path(ZT_SHARED_DATA).parent_path() / "cases";
}

// A writable copy of ../shared/cases/<name> (the shared folder is read-only) at a fresh
// temp-dir path tagged `tag`; returns it.
inline std::filesystem::path copy_case(const std::string& name, const std::string& tag) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / (tag + std::to_string(getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::copy(shared_cases_dir() / name, dir, fs::copy_options::recursive);
  for (auto& e : fs::recursive_directory_iterator(dir))
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  fs::permissions(dir, fs::perms::owner_write, fs::perm_options::add);
  return dir;
}

}  // namespace zt_test
