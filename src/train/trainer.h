// The SFT training loop, written out top to bottom (DESIGN §2, SFT_SEMANTICS §3–6): token caches →
// model → ZeRO engine → for each optimizer step: the step's samples (StepPlan, HF order), N = the
// global target count, G micro-batches forward/backward with the loss scaled by 1/N, gradients
// reduce-scattered per layer group, clip + AdamW, metrics; eval, checkpoints, resume, final export.
//
// Every rank runs the same Trainer; all collectives are inside the ZeRO engine and the few
// all-reduces here (loss/accuracy statistics, the stop flag, eval statistics), in the same order
// on every rank.
#pragma once

#include <csignal>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "train/run_dir_lock.h"
#include "train/train_args.h"

namespace zt::train {

// What a finished (or interrupted) run reports; also what tests compare across stages/splits.
struct TrainSummary {
  int64_t steps_done = 0;            // optimizer steps completed (skipped ones included)
  int64_t steps_skipped = 0;         // steps with N = 0 (or non-finite, nan_policy: skip)
  int64_t steps_skipped_no_target = 0;  // of those, the steps with N = 0
  std::vector<double> step_losses;   // global token-mean loss of each step of this run (NaN: skipped)
  std::vector<double> grad_norms;    // pre-clip global gradient norm of each step (NaN: skipped)
  std::vector<double> learning_rates;
  std::optional<double> last_eval_loss;
  // Stopped by SIGINT/SIGTERM: after writing the checkpoint of the last completed step, or, when
  // the signal came before this run's first step (e.g. during eval_on_start's evaluation), with no
  // step trained and no checkpoint or model written.
  bool interrupted = false;
  // "SIGTERM" / "SIGINT": that signal came after the last step's stop check, while its checkpoint,
  // the best model or the final model was written. They were finished (each written whole under a
  // temporary name, then renamed) and every step is trained, but the run was stopped, not ended on
  // its own: cmd_train exits 130, as for an interrupted run. Empty: no such signal.
  std::string stopped_at_end_by;
  // The last checkpoint this run wrote (empty: none); interrupted before its first step, the one
  // it resumed from, still the newest (empty for a fresh run).
  std::filesystem::path last_checkpoint;
};

class Trainer {
 public:
  // `tokenizer_dir` holds the tokenizer files copied into checkpoints and the final model.
  Trainer(TrainArgs args, dist::Comm& comm, const text::Tokenizer& tokenizer,
          const text::TokenizerConfig& tokenizer_config, std::filesystem::path tokenizer_dir);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Runs the whole job. Throws zt::Error for bad input (non-finite loss under nan_policy: error,
  // an unusable checkpoint, `resume_from_checkpoint: true` without a checkpoint of the last run, …)
  // and when no step of the run updated the weights (all skipped: nothing is exported then).
  TrainSummary run();

  // Rank 0: the exp_dir lock (run_dir_lock.h) its caller took before writing in an existing
  // exp_dir; kept until the trainer is destroyed. Without one, run() takes it (rank 0) once it has
  // created exp_dir, before writing anything there.
  void hold_run_dir_lock(RunDirLock lock);

  // Rank 0: the model files output_dir held when its caller first checked it at start-up
  // (model_files_fingerprint, after clean_stale_export_dirs), before the data was prepared. The
  // final export refuses to replace model files that differ from these (another run with another
  // exp_dir exported there meanwhile, during this run's set-up or training). Without it, run()
  // takes the fingerprint when it opens its outputs, after the set-up.
  void note_output_dir_at_start(std::string fingerprint);

  // The fp32 master weights in the model's flat ParamLayout order, on rank 0 (empty elsewhere);
  // valid after run(). Collective.
  std::vector<float> master_weights();

  // Installs SIGINT/SIGTERM handlers that ask running trainers to stop at the next step boundary,
  // or during an evaluation at its next batch (the evaluation is dropped); every rank agrees, the
  // checkpoint of the last completed step is written, run() returns with interrupted = true. A
  // signal before the run's first step (during set-up or the start evaluation) stops it there: no
  // step is trained and no checkpoint or model is written. While run() prepares the datasets
  // (tokenisation), a signal ends the process at once with status 130 (core/stop_signals.h),
  // having written nothing to exp_dir (a world of one rank first prints "training was interrupted
  // while the datasets were tokenised …" to stderr); so does one that came before. A signal after
  // the last step's check lets the writing of the last checkpoint and the final model finish, and
  // run() returns with stopped_at_end_by naming it. The flag is process-wide.
  static void install_signal_handlers();
  // The flag the handlers set: the signal's number, 0 when none (exposed for tests).
  static volatile std::sig_atomic_t& stop_requested();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace zt::train
