// TrainArgs: everything `zerotune train` needs, typed and resolved (the CLI builds it from the
// users' sft.yaml + accelerate config; tests build it directly). Field names are HF's
// (TrainingArguments / SFTConfig) where one exists; SFT_SEMANTICS §5 gives the defaults.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "data/data_options.h"
#include "io/json.h"

namespace zt::train {

struct TrainArgs {
  // ---- model
  std::filesystem::path model_dir;  // resolved HF directory (config.json, optional weights)
  bool from_scratch = false;        // no weights in model_dir: initialise (seeded) as HF does
  DType dtype = DType::kF32;        // compute weights/activations: kF32 or kBF16 (bf16-storage)

  // ---- data
  data::DataOptions train_data;
  std::optional<data::DataOptions> eval_data;

  // ---- ZeRO / compute
  std::string backend = "cpu";  // resolved compute.backend: "cpu" | "cuda" (train/device.h)
  int zero_stage = 2;
  bool offload_optimizer = false;
  // compute.balance_micro_batches: deal each micro-step's samples across the ranks by token count
  // (train/micro_batch_balance.h).
  bool balance_micro_batches = true;

  // ---- outputs
  std::filesystem::path exp_dir;      // args.yaml, metrics.jsonl, checkpoint-<step>/
  std::filesystem::path output_dir;   // the final HF model
  std::filesystem::path logging_dir;  // TensorBoard event files ("" = none)
  Json resolved_config = Json::object();  // written to exp_dir/args.yaml

  // ---- optimisation (TrainingArguments names)
  double learning_rate = 2e-5;
  std::string lr_scheduler_type = "linear";
  double warmup_steps = 0;  // >= 1: steps; (0, 1): ratio (transformers 5)
  double warmup_ratio = 0;
  double weight_decay = 0;
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_epsilon = 1e-8;
  double max_grad_norm = 1.0;
  double num_train_epochs = 3;
  int64_t max_steps = -1;
  int64_t per_device_train_batch_size = 8;
  int64_t per_device_eval_batch_size = 8;
  int64_t gradient_accumulation_steps = 1;
  uint64_t seed = 42;                 // weight init; also the data order unless data_seed
  std::optional<uint64_t> data_seed;  // the sampler's seed when set (transformers)
  bool dataloader_drop_last = false;
  bool gradient_checkpointing = true;

  // ---- logging / eval / save
  int64_t logging_steps = 10;
  std::string eval_strategy = "no";  // "no" | "steps" | "epoch"
  int64_t eval_steps = 0;            // 0 = logging_steps (HF default)
  std::string save_strategy = "steps";  // "no" | "steps" | "epoch"
  int64_t save_steps = 500;
  int64_t save_total_limit = 0;         // <= 0: keep all
  std::optional<std::string> resume_from_checkpoint;  // a path, or "true" for the latest
  std::string nan_policy = "error";     // "error": stop with the step and rows; "skip": skip the step
};

}  // namespace zt::train
