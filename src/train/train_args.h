// TrainArgs: everything `zerotune train` needs, typed and resolved (the CLI builds it from the
// users' sft.yaml + accelerate config). Field names are HF's (TrainingArguments / SFTConfig) where
// one exists; SFT_SEMANTICS §5 gives the defaults.
//
// The defaults and allowed values of the fields below are NOT here: each option is declared once,
// with its key, default and allowed values, in the config schema (cli/trainer_keys.cpp,
// cli/config_schema.cpp; `zerotune options` lists them), and cli::make_train_args fills every field
// from the checked config. A TrainArgs built any other way must set every field itself.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/enum_names.h"
#include "data/data_options.h"
#include "io/json.h"
#include "optim/lr_schedule.h"
#include "train/device.h"

namespace zt::train {

// transformers' IntervalStrategy: when to evaluate / save / log (trainer.eval_strategy,
// trainer.save_strategy, trainer.logging_strategy). kSteps: every *_steps optimizer steps;
// kEpoch: at the end of each epoch.
enum class IntervalStrategy { kNo, kSteps, kEpoch };
inline constexpr EnumName<IntervalStrategy> kIntervalStrategyNames[] = {
    {IntervalStrategy::kNo, "no"},
    {IntervalStrategy::kSteps, "steps"},
    {IntervalStrategy::kEpoch, "epoch"}};
constexpr std::span<const EnumName<IntervalStrategy>> enum_names(IntervalStrategy) {
  return kIntervalStrategyNames;
}

// transformers' SaveStrategy (trainer.save_strategy): IntervalStrategy's values, plus kBest: save
// after each evaluation that finds a new best metric_for_best_model.
enum class SaveStrategy { kNo, kSteps, kEpoch, kBest };
inline constexpr EnumName<SaveStrategy> kSaveStrategyNames[] = {{SaveStrategy::kNo, "no"},
                                                                {SaveStrategy::kSteps, "steps"},
                                                                {SaveStrategy::kEpoch, "epoch"},
                                                                {SaveStrategy::kBest, "best"}};
constexpr std::span<const EnumName<SaveStrategy>> enum_names(SaveStrategy) {
  return kSaveStrategyNames;
}

// trainer.nan_policy (zerotune's): a step whose loss or gradient norm is not finite stops the run
// naming the step and its rows (kError), or is skipped without an update (kSkip).
enum class NanPolicy { kError, kSkip };
inline constexpr EnumName<NanPolicy> kNanPolicyNames[] = {{NanPolicy::kError, "error"},
                                                          {NanPolicy::kSkip, "skip"}};
constexpr std::span<const EnumName<NanPolicy>> enum_names(NanPolicy) { return kNanPolicyNames; }

// trainer.optim: the transformers 4.57 names of torch.optim.AdamW that zerotune implements; both
// are the same arithmetic (optim/adamw.h), the fused variant differs only in speed there.
// "adamw_hf" (transformers' own AdamW, removed in 4.50: eps outside the bias correction, decay
// after the update) is no name of 4.57, which raises on it; zerotune refuses it as not valid.
enum class Optimizer { kAdamWTorch, kAdamWTorchFused };
inline constexpr EnumName<Optimizer> kOptimizerNames[] = {
    {Optimizer::kAdamWTorch, "adamw_torch"}, {Optimizer::kAdamWTorchFused, "adamw_torch_fused"}};
constexpr std::span<const EnumName<Optimizer>> enum_names(Optimizer) { return kOptimizerNames; }

struct TrainArgs {
  // ---- model
  std::filesystem::path model_dir;  // resolved HF directory (config.json, optional weights)
  bool from_scratch = false;        // no weights in model_dir: initialise (seeded) as HF does
  DType dtype = DType::kF32;        // compute weights/activations: kF32 or kBF16 (bf16-storage)
  // Weights of final/ and checkpoint-N/ (the fp32 master weights stored as): kBF16 under DeepSpeed
  // with bf16 or model_init_kwargs dtype bfloat16, else kF32 — as TRL saves its model.
  DType export_dtype = DType::kF32;

  // ---- data
  data::DataOptions train_data;
  std::optional<data::DataOptions> eval_data;

  // ---- ZeRO / compute
  Backend backend{};  // compute.backend, resolved (auto → cpu or cuda; train/device.h)
  int zero_stage{};   // compute.zero_stage, else the accelerate config's, else 0 (cmd_train.cpp)
  bool offload_optimizer{};
  // compute.balance_micro_batches: deal each micro-step's samples across the ranks by token count
  // (train/micro_batch_balance.h).
  bool balance_micro_batches{};

  // ---- outputs
  std::filesystem::path exp_dir;          // args.yaml, metrics.jsonl, checkpoint-<step>/
  std::filesystem::path output_dir;       // the final HF model
  std::filesystem::path logging_dir;      // TensorBoard event files ("" = none)
  Json resolved_config = Json::object();  // written to exp_dir/args.yaml

  // ---- optimisation (TrainingArguments names)
  double learning_rate{};
  optim::LrScheduleKind lr_scheduler_type{};
  Json lr_scheduler_kwargs;  // trainer.lr_scheduler_kwargs as given (null: none)
  double warmup_steps{};  // >= 1: steps; (0, 1): ratio (transformers 5)
  double warmup_ratio{};
  double weight_decay{};
  double adam_beta1{}, adam_beta2{}, adam_epsilon{};
  double max_grad_norm{};  // 0: no clipping (null in the config)
  Optimizer optim{};
  double num_train_epochs{};
  int64_t max_steps{};
  int64_t per_device_train_batch_size{};
  int64_t per_device_eval_batch_size{};
  int64_t gradient_accumulation_steps{};
  uint64_t seed{};                    // weight init; also the data order unless data_seed
  std::optional<uint64_t> data_seed;  // the sampler's seed when set (transformers)
  bool dataloader_drop_last{};
  bool gradient_checkpointing{};
  // compute.selective_checkpointing: under gradient checkpointing keep every layer's attention
  // output and lse (ModelOptions::keep_attention); the results do not change.
  bool selective_checkpointing{};
  // compute.cross_entropy_workspace_mib: the fused LM-head cross-entropy's chunk budget
  // (CudaOpsOptions / CpuOpsOptions ce_budget_bytes, in MiB): more rows per chunk, faster, for
  // that much more device memory. It changes the order of the LM head's gradient sums, so bits
  // differ between values (each value is deterministic).
  int64_t cross_entropy_workspace_mib{};

  // ---- logging / eval / save
  int64_t logging_steps{};
  // transformers' DefaultFlowCallback: log every logging_steps (kSteps), at each epoch's end
  // (kEpoch) or never (kNo); logging_first_step adds step 1. zerotune also logs the run's last
  // step unless the strategy is kNo (transformers logs only its train_loss summary there).
  IntervalStrategy logging_strategy{};
  bool logging_first_step{};
  IntervalStrategy eval_strategy{};
  int64_t eval_steps{};  // 0 = logging_steps (HF default; null in the config)
  // Evaluations wait until global_step (eval_strategy steps) or the epoch (epoch) reaches this:
  // transformers' DefaultFlowCallback `args.eval_delay <= state.global_step / state.epoch`.
  double eval_delay{};
  // An evaluation before the first step of the run (a resumed run's too), logged at that step and
  // not compared for the best model (transformers' `args.eval_on_start` → `_evaluate`).
  bool eval_on_start{};
  SaveStrategy save_strategy{};
  int64_t save_steps{};
  // transformers' ratio form of logging_steps / eval_steps / save_steps, a value in (0, 1): once
  // the total steps T are known (TrainerState.compute_steps) each becomes ceil(T * ratio) in its
  // field above (Trainer::State plans it, resolve_step_ratios). 0: the field is a count as given.
  double logging_steps_ratio{}, eval_steps_ratio{}, save_steps_ratio{};
  // Applies the ratios above to T total optimizer steps (math.ceil(max_steps * ratio), as
  // transformers 4.57's TrainerState.compute_steps).
  void resolve_step_ratios(int64_t total_steps) {
    const auto at = [&](double ratio, int64_t* field) {
      if (ratio > 0.0)
        *field = static_cast<int64_t>(std::ceil(static_cast<double>(total_steps) * ratio));
    };
    at(logging_steps_ratio, &logging_steps);
    at(eval_steps_ratio, &eval_steps);
    at(save_steps_ratio, &save_steps);
  }
  // The config's logging_steps / eval_steps / save_steps as given (null, an integer or a float):
  // what transformers' TrainerState holds of them depends on the form (train::hf_state_steps).
  Json logging_steps_given, eval_steps_given, save_steps_given;
  // transformers' TrainerState.logging_steps / eval_steps / save_steps, as trainer_state.json
  // writes them (an integer, or a whole float transformers leaves a float): set once the total
  // steps are known (train::set_hf_state_steps); a resumed run's are its checkpoint's.
  Json state_logging_steps = 500, state_eval_steps = 500, state_save_steps = 500;
  // The best model (transformers' Trainer._determine_best_metric): the eval metric compared after
  // each evaluation ("eval_"-prefixed; empty: none), higher or lower better, and whether the model
  // of the best evaluation's checkpoint becomes the final model.
  std::string metric_for_best_model;
  bool greater_is_better{};
  bool load_best_model_at_end{};
  int64_t save_total_limit{};                         // <= 0: keep all (null in the config)
  std::optional<std::string> resume_from_checkpoint;  // a path, or "true" for the latest
  NanPolicy nan_policy{};

  // ---- where the config keys were set, for the trainer's messages that name a key
  // key → the key's file (and line) as cli::RunConfig::key_at gives it ("sft.yaml:16") and
  // RunConfig::where's suffix (" (given on the command line)", or empty). A key not here (a
  // TrainArgs built in code) is named without a file: see key_origin.
  struct KeyOrigin {
    std::string at, where;
  };
  std::map<std::string, KeyOrigin, std::less<>> key_origins;
  // key_origins' entry for `key`, or {"", ""}.
  KeyOrigin key_origin(std::string_view key) const {
    const auto it = key_origins.find(key);
    return it != key_origins.end() ? it->second : KeyOrigin{};
  }
};

}  // namespace zt::train
