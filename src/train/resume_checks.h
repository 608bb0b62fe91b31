// What `trainer.resume_from_checkpoint` reads, checked before it is used, so that a wrong path, a
// renamed or hand-edited checkpoint, or a checkpoint of another model gets an error naming the
// file and what was expected rather than a misleading one (or none) further on.
//
// The state these read is a checkpoint's zerotune_state.json, or the trainer_state.json of a
// checkpoint written before zerotune_state.json existed (train/checkpoint_state.h); `state_file`
// names whichever it was.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "io/json.h"
#include "io/model_config.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"
#include "train/checkpoint_state.h"
#include "train/train_args.h"

namespace zt::train {

// `resume_from_checkpoint: <path>`: throws zt::Error when `ckpt` does not exist (listing the
// checkpoint-<step> directories of its parent, where there are some) or is not a directory.
void check_resume_path(const std::filesystem::path& ckpt);

// The step the run resumes at: zerotune_state.json's "plan" next_step (`next_step`, already
// checked against the run's plan). Its "global_step", when present, must be the same integer
// (zt::Error naming `state_file` and both values otherwise: the file was edited by hand or is
// not consistent). A directory named checkpoint-<N> with N != global_step (renamed) resumes at
// global_step, as transformers does, with a warning (when `log`).
int64_t checked_resume_step(const Json& state, const std::string& state_file, int64_t next_step,
                            const std::filesystem::path& ckpt, bool log);

// The checkpoint's config.json (when it has one) describes the same parameters as `model`, the
// run's model.name_or_path config: else zt::Error naming both files and the first parameter whose
// name or shape differs ("checkpoint of another model"). A checkpoint whose config.json cannot be
// read is left to the ZeRO state's own layout check.
void check_checkpoint_model(const std::filesystem::path& ckpt, const ModelConfig& model);

// zerotune_state.json's "lr_schedule" (zerotune's): {"learning_rate", "lr_scheduler_type",
// "warmup_steps" (resolved, in optimizer steps)} of the schedule `s` the saving run used, and
// "lr_scheduler_kwargs": `kwargs`, trainer.lr_scheduler_kwargs as the run read it
// (TrainArgs::lr_scheduler_kwargs; null as {}, TrainingArguments' default).
Json lr_schedule_to_json(const optim::LrSchedule& s, const Json& kwargs);

// The LR schedule a run resumed from `ckpt` uses, as transformers' Trainer does on resume: it
// restores the LR scheduler's state (torch LambdaLR: base_lrs and the step), so the checkpoint's
// learning rate continues, while the schedule's shape (lr_scheduler_type, warm-up, total steps) is
// the lambda rebuilt from this run's arguments. So: `now` (this run's schedule) with the base lr
// of `state`'s "lr_schedule". Where learning_rate, lr_scheduler_type or the warm-up differ from
// what the checkpoint records, a start-up note (when `log`) names the key, its file
// (a.key_origins), the checkpoint's value and the value now used; so does a change of
// lr_scheduler_kwargs (a.lr_scheduler_kwargs against the recorded ones, null as {}) for a
// schedule that takes them (transformers' LambdaLR.load_state_dict keeps the rebuilt lambda's
// arguments: its functools.partial saves none). A state without "lr_schedule" (saved before
// zerotune recorded it), or one without "lr_scheduler_kwargs", notes nothing of what it lacks and
// gives `now` unchanged. Throws zt::Error naming `state_file`
// and the key for an "lr_schedule" that is not an object of a number >= 0, a known scheduler name
// and an integer >= 0.
optim::LrSchedule resumed_lr_schedule(const Json& state, const std::string& state_file,
                                      const optim::LrSchedule& now, const TrainArgs& a,
                                      int64_t start_step, const std::filesystem::path& ckpt,
                                      bool log);

// The logging / eval / save steps of a run resumed from a checkpoint whose transformers
// trainer_state.json (`hf_file`) records `saved`, as transformers 4.57.1 does: its
// Trainer._inner_training_loop computes them for this run (TrainerState.compute_steps, a ratio
// as ceil(max_steps × ratio)) and then replaces that state by the checkpoint's
// (TrainerState.load_from_json), whose logging_steps / eval_steps / save_steps DefaultFlowCallback
// reads from then on. So `a`'s logging_steps, eval_steps and save_steps become `saved`'s. Where
// one differs from what `a` (ratios resolved for this run's `total_steps`) gives and its strategy
// is steps, a start-up note (when `log`) names the key, its file (a.key_origins), this config's
// value and the checkpoint's, which is used.
void resume_interval_steps(const HfTrainerStateRead& saved, const std::string& hf_file,
                           int64_t total_steps, TrainArgs* a, bool log);

// zerotune_state.json's "optimizer" (zerotune's): the AdamW hyperparameters `p` the saving run
// used, under their trainer key names {"adam_beta1", "adam_beta2", "adam_epsilon", "weight_decay"}.
Json adamw_to_json(const optim::AdamWParams& p);

// The AdamW hyperparameters a run resumed from `ckpt` uses, as transformers' Trainer does on
// resume: it loads the optimizer's state_dict, and torch's Optimizer.load_state_dict restores the
// saved param groups' betas, eps and weight_decay with the moments (DeepSpeed's ZeRO checkpoints
// alike). So: `state`'s "optimizer" values; where one differs from `now` (this run's arguments) a
// start-up warning (when `log`) names the key, its file (a.key_origins), the checkpoint's value
// and how to train with the new one. A state without "optimizer" (saved before zerotune recorded
// it) gives `now` unchanged — callers first try adamw_from_args_yaml. Throws zt::Error naming
// `state_file` and the key for an "optimizer" that is not an object of the four numbers (betas in
// [0, 1), eps and weight_decay >= 0).
optim::AdamWParams resumed_adamw(const Json& state, const std::string& state_file,
                                 const optim::AdamWParams& now, const TrainArgs& a,
                                 const std::filesystem::path& ckpt, bool log);

// For a checkpoint whose zerotune state has no "optimizer" (written before zerotune recorded
// it): the AdamW values its run trained with, from the checkpoint's args.yaml (the saving run's
// resolved config, which holds every trainer key), as an "optimizer" object for resumed_adamw.
// nullopt when `ckpt`/args.yaml is missing, not valid YAML, or does not hold the four keys as
// numbers under `trainer` (the run's own values are used then, as before).
std::optional<Json> adamw_from_args_yaml(const std::filesystem::path& ckpt);

// zerotune_state.json's "data_pipeline": the token pipeline version (data::kPipelineVersion) of the
// run that saved it. The start-up warning of a run resumed under pipeline `now` from a checkpoint
// that records another version, or none (saved before zerotune recorded it): it names
// `state_file`, both versions and what it means (the resumed steps' samples are tokenised under
// the new rule; positions in the data line up). nullopt when the versions are equal. Throws
// zt::Error naming `state_file` and the key for a "data_pipeline" that is not a string.
std::optional<std::string> pipeline_change_warning(const Json& state, const std::string& state_file,
                                                   std::string_view now);

}  // namespace zt::train
