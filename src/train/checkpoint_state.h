// The two state files of a checkpoint-<step>/ directory:
//   - `trainer_state.json`: transformers' TrainerState (trainer_callback.py, 4.57.1), as
//     `TrainerState.save_to_json` writes it, so that `TrainerState.load_from_json` loads it and the
//     tools that read its `log_history` (plots, model cards, `zerotune compare`) find the run's
//     log;
//   - `zerotune_state.json`: zerotune's own resume state (the data order, the LR schedule and
//     AdamW values, the run id, the token pipeline version, the best model's metric, …), which
//     transformers' dataclass would refuse (`__init__() got an unexpected keyword argument`).
// Checkpoints written before zerotune_state.json existed hold zerotune's keys in
// trainer_state.json (and no log_history); they are still read (zerotune_state_path).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "io/json.h"
#include "param/param_layout.h"
#include "train/train_args.h"

namespace zt::train {

inline constexpr const char* kTrainerStateName = "trainer_state.json";
inline constexpr const char* kZerotuneStateName = "zerotune_state.json";

// The file holding zerotune's resume state of checkpoint `ckpt`: <ckpt>/zerotune_state.json when
// it exists (any file type: reading it reports what is wrong), else <ckpt>/trainer_state.json (a
// checkpoint of a zerotune from before zerotune_state.json, or not zerotune's at all: the reader
// checks its keys). No I/O error is thrown here: an unreadable directory gives the
// trainer_state.json path, whose reading then fails naming it.
std::filesystem::path zerotune_state_path(const std::filesystem::path& ckpt);

// The values of transformers' TrainerState that a zerotune checkpoint records (the other fields
// are constants: is_local_process_zero / is_world_process_zero true, since rank 0 writes the file,
// is_hyper_param_search false, trial_name / trial_params null).
struct HfTrainerState {
  double epoch = 0;              // fractional epoch after global_step (HF `state.epoch`)
  int64_t global_step = 0;       // optimizer steps done
  int64_t max_steps = 0;         // the run's total steps
  int64_t num_train_epochs = 0;  // HF: ceil(max_steps / steps per epoch), or ceil(epochs)
  // HF compute_steps (hf_state_steps): an integer, or a whole float transformers leaves a float
  Json logging_steps = 500, eval_steps = 500, save_steps = 500;
  int64_t train_batch_size = 0;       // per device
  int64_t num_input_tokens_seen = 0;  // input tokens of every rank so far
  double total_flos = 0;              // hf_total_flos
  Json log_history = Json::array();   // the logged records through global_step, in order
  std::optional<double> best_metric;
  std::optional<int64_t> best_global_step;
  std::optional<std::string> best_model_checkpoint;
  // TrainerControl's state at the save (stateful_callbacks): should_save true, should_log and
  // should_evaluate false (reset by the log / evaluation before the save), should_epoch_stop
  // false, should_training_stop true at the last step (DefaultFlowCallback: global_step >=
  // max_steps). transformers updates stateful_callbacks only in _save_checkpoint, so the final
  // state (Trainer.save_state) holds the last checkpoint's, or all false when none was saved.
  bool should_save = true;
  bool should_training_stop = false;
};

// A log_history record as transformers 4.57.1 holds it, from zerotune's (metrics.jsonl's, full
// precision): "loss" rounded as `_maybe_log_save_evaluate` rounds it, round(loss, 4) (a null loss
// stays null). Nothing else is rounded there: transformers logs grad_norm, learning_rate, epoch,
// eval_loss and TRL's metrics as computed; the speed metrics are rounded when made
// (add_speed_metrics). Throws zt::Error when `record` is not an object.
Json hf_log_record(const Json& record);

// transformers' best_model_checkpoint for checkpoint directory `checkpoint`: its path as
// `os.path.join(output_dir, "checkpoint-N")` gives it — zerotune's exp_dir as the run was given
// it (a relative exp_dir stays relative, to the run's working directory), not made absolute;
// nullopt when `checkpoint` is empty (no best checkpoint yet).
std::optional<std::string> hf_best_model_checkpoint(const std::filesystem::path& checkpoint);

// trainer_state.json's text: `TrainerState.save_to_json`'s json.dumps(dataclasses.asdict(state),
// indent=2, sort_keys=True) + "\n" — every field of transformers 4.57.1's dataclass, keys sorted
// at every depth (log_history's records too), non-ASCII escaped as Python's ensure_ascii. A
// non-finite float of a record is null (as metrics.jsonl writes it; Python writes NaN).
std::string hf_trainer_state_text(const HfTrainerState& s);

// Parameters transformers counts for its FLOP estimate: `num_parameters(exclude_embeddings=True)`,
// every parameter except the token embedding (a tied LM head is the embedding, so not counted; an
// untied one is).
int64_t non_embedding_parameters(const ParamLayout& layout);
// transformers' `floating_point_ops`: 6 · tokens · non-embedding parameters, summed over the
// steps and ranks (`store_flos`). transformers counts the tokens of input_ids with their padding;
// zerotune's micro-batches have none, so `tokens` are the non-pad input tokens.
double hf_total_flos(int64_t tokens, int64_t non_embedding_params);

// The logging_steps / eval_steps / save_steps value transformers 4.57.1's TrainerState holds (and
// trainer_state.json writes) for a TrainingArguments value `given` (null, an integer or a float, as
// the config gives it) whose strategy is or is not "steps", in a run of `max_steps` steps:
// TrainingArguments.__post_init__ makes a value > 1 under strategy steps int(value), then
// TrainerState.compute_steps makes a value < 1 math.ceil(max_steps * value) (an integer: 0 stays
// 0) and leaves null as the dataclass default 500. So 10.0 is 10 under steps and 10.0 otherwise,
// 1.0 stays 1.0, 0.25 of 37 steps is 10. (eval_steps null or 0 under eval_strategy steps is
// logging_steps' given value first: set_hf_state_steps.)
Json hf_state_steps(const Json& given, bool steps_strategy, int64_t max_steps);
// The steps between the events DefaultFlowCallback triggers with `global_step % steps == 0` for a
// TrainerState value `steps` (>= 0, below 2^63): a whole value itself; a fraction (2.5, which
// trainer_state.json holds where the strategy was not steps) its least whole multiple (5; 0.5: 1),
// as Python's exact float remainder gives 0 there first.
int64_t hf_steps_period(double steps);
// Sets a's state_logging_steps / state_eval_steps / state_save_steps from its *_given values and
// strategies (hf_state_steps; an eval_steps null or 0 under eval_strategy steps takes
// logging_steps' given value, as TrainingArguments.__post_init__ copies it).
void set_hf_state_steps(TrainArgs* a, int64_t max_steps);

// What a resume reads of a checkpoint's transformers trainer_state.json.
struct HfTrainerStateRead {
  int64_t global_step = 0;
  Json log_history;  // the records, in order
  // The optimizer steps between logs / evaluations / saves (TrainerState.compute_steps' counts),
  // which a resumed transformers run keeps (the loaded TrainerState replaces the computed one);
  // absent from the file: the dataclass default 500, as `TrainerState(**json)` gives. 0: none.
  int64_t logging_steps = 500, eval_steps = 500, save_steps = 500;
  // The same as the file writes them (an integer, or a float: 10.0, or 2.5 where the strategy
  // was not steps; the counts above are hf_steps_period of a float), which the resumed run's
  // trainer_state.json writes again, as the loaded TrainerState holds them.
  Json logging_steps_value = 500, eval_steps_value = 500, save_steps_value = 500;
};
// Reads `file` (for a resume to continue its log and keep its steps). Throws zt::Error naming the
// file (and the key) when it cannot be read, is not valid JSON, has no integer "global_step" >= 0,
// no list "log_history" of objects each with an integer "step", or a "logging_steps" /
// "eval_steps" / "save_steps" that is not a number >= 0 below 2^63 (an integer, or a float such as
// 10.0 or 2.5, which transformers writes where the strategy is not steps; 0: none, which
// resume_interval_steps refuses where transformers would divide by it).
HfTrainerStateRead read_hf_trainer_state(const std::filesystem::path& file);

}  // namespace zt::train
