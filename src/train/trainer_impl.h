// Trainer::State, one training run's state, shared by the trainer's sources: trainer.cpp (stop
// signals, the optimizer step and the loop), trainer_setup.cpp (data, model, plan, resume,
// outputs), trainer_eval.cpp (evaluation and the best model) and trainer_checkpoint.cpp
// (checkpoints and the final model). Internal to src/train.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/prepare.h"
#include "dist/comm.h"
#include "io/hf_export.h"
#include "io/json.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "io/tensorboard.h"
#include "model/causal_lm.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"
#include "train/checkpoint_state.h"
#include "train/device.h"
#include "train/metrics.h"
#include "train/progress.h"
#include "train/run_dir_lock.h"
#include "train/step_plan.h"
#include "train/trainer.h"
#include "zero/zero_engine.h"

namespace zt::train {
namespace fs = std::filesystem;

// The stop signal (SIGINT/SIGTERM) any rank has received, 0 when none; collective (trainer.cpp).
int any_rank_stopping(dist::Comm& comm);
// Seconds of a monotonic clock (steady_clock), for wall-time differences (trainer.cpp).
double now_seconds();

struct Trainer::State {
  State(TrainArgs args, dist::Comm& c, const text::Tokenizer& t, const text::TokenizerConfig& tc,
        fs::path td)
      : a(std::move(args)), comm(c), tok(t), tok_cfg(tc), tok_dir(std::move(td)) {}

  TrainArgs a;
  dist::Comm& comm;
  const text::Tokenizer& tok;
  const text::TokenizerConfig& tok_cfg;
  fs::path tok_dir;
  bool rank0() const { return comm.rank() == 0; }

  std::optional<data::PreparedDataset> train, eval;
  // The lengths of TRL 0.25.1's train / eval datasets (data::PrepareReport::trl_num_samples), by
  // which transformers rates train_samples_per_second / eval_samples_per_second.
  int64_t train_trl_samples = 0, eval_trl_samples = 0;
  std::vector<int64_t> train_targets;
  ModelConfig mcfg;
  HfExportOptions export_opts;  // checkpoint-<step>/ and output_dir (train/run_export.h)
  DeviceContext dev;            // Ops + device/host memory of compute.backend (train/device.h)
  std::unique_ptr<zero::ZeroEngine> engine;  // the model's GroupStorage: declared first, dies last
  std::unique_ptr<CausalLM> model;
  // The initial weights (compute dtype, flat, host) for the engine to shard, then dropped.
  std::vector<std::byte> init_weights;
  std::unique_ptr<StepPlan> plan;
  optim::LrSchedule sched;
  optim::AdamWParams adam;
  int64_t start_step = 0;     // first step this run executes
  int64_t applied_steps = 0;  // optimizer updates so far (the LR schedule's position)
  int64_t num_tokens_seen = 0;
  // Σ of the applied steps' losses (train_loss of the summary record) and how many steps it holds:
  // the whole run's (kept in zerotune_state.json), or this process's when resumed from a checkpoint
  // that did not record it.
  double train_loss_sum = 0;
  int64_t train_loss_steps = 0;
  // The step of the last TrainerState saved (a checkpoint this run wrote, or the one it resumed
  // from); 0: none. The final state's stateful_callbacks are that save's.
  int64_t last_saved_step = 0;
  int64_t owner_pid = 0;  // rank 0's pid: names the shared checkpoint staging directory
  std::string run_id;     // ties checkpoints to this run (train/run_checkpoints.h)
  fs::path resumed_from;  // the checkpoint this run resumed from, empty for a fresh start
  // The best model (metric_for_best_model; transformers' TrainerState best_metric,
  // best_global_step, best_model_checkpoint): kept in each checkpoint's trainer_state.json and
  // zerotune_state.json across resumes.
  std::optional<double> best_metric;
  int64_t best_global_step = 0;  // 0: none yet
  fs::path best_checkpoint;      // empty until a checkpoint of best_global_step is saved
  bool best_loaded = false;      // load_best_model_at_end has put its weights into the engine
  // An evaluation due at a step was abandoned by a stop signal: the checkpoint of that step
  // records it (eval_pending) and the resumed run evaluates first.
  int64_t eval_abandoned_step = -1;
  bool eval_pending = false;  // read from the resumed checkpoint
  // rank 0: every record logged so far, in order (transformers' `state.log_history`), written into
  // each checkpoint's trainer_state.json; a resumed run starts from its checkpoint's.
  Json log_history = Json::array();
  // rank 0: the resumed checkpoint's log_history (train/checkpoint_state.h); nullopt for a fresh
  // run, or a checkpoint from before zerotune wrote one (then metrics.jsonl's records through
  // the checkpoint's step are taken, open_outputs).
  std::optional<Json> resumed_log_history;
  std::unique_ptr<MetricsWriter> metrics;
  std::unique_ptr<io::TensorBoardWriter> tb;
  std::unique_ptr<ProgressDisplay> progress;
  RunDirLock dir_lock;  // rank 0: one run at a time in exp_dir (run_dir_lock.h)
  // rank 0: output_dir as the run found it (model_files_fingerprint), so that the final export does
  // not replace a model another run wrote there meanwhile (exp_dir's lock does not cover it). Given
  // by the caller (note_output_dir_at_start: taken at the start-up check of output_dir, before the
  // data is prepared), else taken by open_outputs.
  std::optional<std::string> output_dir_at_start;

  void prepare_data();
  void build_model();
  void build_plan();
  // Logs (rank 0) "plan: …": samples, batch sizes, steps and the LR schedule `sched` in use, so
  // after resume_or_init's decision on the checkpoint's learning rate.
  void log_plan() const;
  void resume_or_init();
  void open_outputs();
  // Where log_record sends a record besides the console and TensorBoard (transformers' on_log).
  enum class LogTo {
    kAll,         // metrics.jsonl and the log_history of the trainer_state.json files
    kNotHistory,  // metrics.jsonl only: a record transformers would not log, the run's last
                  // step off the logging_steps grid
    kNoFile,      // neither: the end-of-train summary, which output_dir/trainer_state.json gets
                  // from final_state_text (metrics.jsonl keeps one record per step event)
  };
  // Logs `rec` (rank 0): console (transformers' printed dict), TensorBoard (train/ and eval/
  // tags) and the files `to` names.
  void log_record(const MetricRecord& rec, LogTo to = LogTo::kAll);
  // rank 0, after training: transformers' end-of-train record (the `self.log(metrics)` closing
  // `_inner_training_loop`): train_runtime (`runtime_seconds`, since the training loop began),
  // train_samples_per_second, train_steps_per_second, total_flos, train_loss, epoch, step.
  MetricRecord train_summary(double runtime_seconds) const;
  // rank 0: the text of output_dir/trainer_state.json — the final TrainerState, log_history ending
  // with `summary`, as `trainer.save_state()` after `trainer.train()` writes it. export_final
  // writes it with the model (HfExportOptions::extra_files).
  std::string final_state_text(const MetricRecord& summary) const;
  StepStats train_step(int64_t k, StepSamples& ss, TrainSummary& sum);
  std::optional<MetricRecord> evaluate(int64_t global_step, double epoch);
  // Whether the evaluation `rec` of step `global_step` is a new best metric_for_best_model
  // (strictly better; a NaN never is); records it. False without a metric_for_best_model.
  bool note_best(const MetricRecord& rec, int64_t global_step);
  // The best state saved with a checkpoint's zerotune_state.json / read back on resume (keys as
  // transformers', and the metric and direction they were measured with).
  void best_to_json(Json& st) const;
  void best_from_json(const Json& st, const fs::path& state_file);
  // After training, as transformers: load_best_model_at_end puts the best checkpoint's weights
  // into the engine (exactly; a best checkpoint removed during the run: a warning, the last model
  // stays), and with save_total_limit 1 this run's checkpoints other than the best are deleted.
  void finish_best();
  // transformers' TrainerState at step `global_step` (rank 0: log_history holds the records).
  HfTrainerState hf_state(int64_t global_step) const;
  // interrupt: the checkpoint written after a stop signal (recorded as such for the launcher).
  fs::path save_checkpoint(int64_t global_step, bool interrupt);
  // Writes the final model to output_dir. When that fails (a full disk, output_dir removed or made
  // read-only during the run: start-up checks it is writable), every rank throws zt::Error with
  // the export's message and where the trained weights are kept: the best checkpoint when
  // load_best_model_at_end loaded it, `last_checkpoint` when it holds step `global_step`, else a
  // checkpoint written now into exp_dir (an HF model directory with the optimizer state: loadable
  // and resumable), else (that failed too) both messages.
  // `final_state` (rank 0; "" = none): output_dir/trainer_state.json's text, written with the
  // model.
  void export_final(int64_t global_step, const fs::path& last_checkpoint,
                    const std::string& final_state);
  std::vector<NamedTensor> named(const std::vector<float>& flat) const;
  std::string step_rows(const StepSamples& ss) const;
};

}  // namespace zt::train
