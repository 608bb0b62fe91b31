// Trainer: the stop signals, one optimizer step and the training loop (Trainer::run). Set-up is in
// trainer_setup.cpp, evaluation and the best model in trainer_eval.cpp, checkpoints and the final
// model in trainer_checkpoint.cpp; Trainer::State in trainer_impl.h.
#include "train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>

#include "core/error.h"
#include "core/log.h"
#include "core/stop_signals.h"
#include "train/batch_builder.h"
#include "train/checkpoint_dirs.h"
#include "train/metrics.h"
#include "train/micro_batch_balance.h"
#include "train/progress.h"
#include "train/step_plan.h"
#include "train/trainer_impl.h"
#include "zero/zero_engine.h"

namespace zt::train {

namespace {

// The stop signal received (SIGINT/SIGTERM), 0: none; set by on_stop_signal only.
volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int sig) { g_stop = sig; }

// "SIGINT" / "SIGTERM" for the stop signal `sig`, "signal <sig>" for another.
std::string stop_signal_name(int sig) {
  if (sig == SIGINT) return "SIGINT";
  if (sig == SIGTERM) return "SIGTERM";
  return fmt::format("signal {}", sig);
}

// Peak resident memory of this process (VmHWM), GiB.
double peak_memory_gib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / (1024.0 * 1024.0);
  return 0.0;
}

}  // namespace

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// The stop signal (SIGINT/SIGTERM) any rank has received, 0 when none (the larger number when
// ranks got different ones). Collective: every rank calls it at the same points, so all of them
// take the same decision.
int any_rank_stopping(dist::Comm& comm) {
  int64_t stop = g_stop;
  comm.all_reduce(&stop, 1, dist::ReduceOp::kMax);
  return static_cast<int>(stop);
}

// ---------------------------------------------------------------- one optimizer step

// Optimizer step k (0-based) on this rank's micro-batches of `ss`: forward/backward of each with
// the loss scaled by 1/N (the model hands each group's gradient to the engine, which
// reduce-scatters it), the loss statistics all-reduced, then clip + AdamW (engine.finish_step) —
// or a skipped step (N = 0, or a non-finite loss / norm under nan_policy: skip). Records the step
// in `sum`.
StepStats Trainer::State::train_step(int64_t k, StepSamples& ss, TrainSummary& sum) {
  if (a.balance_micro_batches)
    balance_micro_batches(
        ss, [&](int64_t i) { return static_cast<int64_t>(train->sample_tokens(i).size()); });
  const int64_t N = step_target_tokens(ss, train_targets);
  const auto& mine = ss.samples[static_cast<size_t>(comm.rank())];
  StepStats st;
  st.target_tokens = N;
  st.learning_rate = sched.lr(applied_steps);
  for (const auto& rank : ss.samples)
    for (const auto& mb : rank)
      for (int64_t smp : mb) st.tokens += static_cast<int64_t>(train->sample_tokens(smp).size());
  if (N == 0) {
    if (rank0())
      log::warn("step {}: no target token in the global batch; the step is skipped", k + 1);
    engine->discard_step();
    st.skipped = true;
    ++sum.steps_skipped_no_target;
  } else {
    double sums[2] = {0, 0};     // Σ CE, Σ entropy over the targets
    int64_t counts[2] = {0, 0};  // correct, targets
    for (const auto& mb_samples : mine) {
      PackedBatch pb;
      append_samples(*train, mb_samples, &pb);
      BackwardOptions bo;
      bo.grad_scale = 1.0f / static_cast<float>(N);
      bo.accumulate = false;
      // Per group: engine->weights(g) (ZeRO-3: all-gather), engine->grads_ready(g)
      // (reduce-scatter).
      CeStats cs = model->forward_backward(pb.view(), bo);
      sums[0] += cs.loss_sum;
      sums[1] += cs.entropy_sum;
      counts[0] += cs.correct;
      counts[1] += cs.count;
    }
    comm.all_reduce(sums, 2, dist::ReduceOp::kSum);
    comm.all_reduce(counts, 2, dist::ReduceOp::kSum);
    st.loss = sums[0] / static_cast<double>(N);
    st.correct_tokens = counts[0];
    st.entropy_sum = sums[1];
    if (!std::isfinite(st.loss)) {
      if (a.nan_policy == NanPolicy::kError)
        fail(
            "step {}: the loss is {} (non-finite); dataset rows of the step: {}. Set "
            "trainer.nan_policy: skip to skip such steps",
            k + 1, st.loss, step_rows(ss));
      if (rank0())
        log::warn("step {}: non-finite loss {}; skipped (rows {})", k + 1, st.loss, step_rows(ss));
      engine->discard_step();
      st.skipped = true;
    } else {
      zero::StepArgs sa;
      sa.lr = st.learning_rate;
      sa.max_grad_norm = a.max_grad_norm;
      sa.adam = adam;
      sa.skip_nonfinite = a.nan_policy == NanPolicy::kSkip;
      // All-gather of the norm's partial sums; AdamW; all-gather of the new weights (stages 1/2).
      zero::StepResult r = engine->finish_step(sa);
      st.grad_norm = r.grad_norm;
      if (!r.applied) {
        if (rank0()) log::warn("step {}: non-finite gradient norm {}; skipped", k + 1, r.grad_norm);
        st.skipped = true;
      } else {
        ++applied_steps;
        train_loss_sum += st.loss;
        ++train_loss_steps;
      }
    }
  }
  num_tokens_seen += st.tokens;
  ++sum.steps_done;
  if (st.skipped) ++sum.steps_skipped;
  sum.step_losses.push_back(st.skipped ? std::nan("") : st.loss);
  sum.grad_norms.push_back(st.skipped ? std::nan("") : st.grad_norm);
  sum.learning_rates.push_back(st.learning_rate);
  return st;
}

std::string Trainer::State::step_rows(const StepSamples& ss) const {
  std::string rows;
  int listed = 0;
  for (const auto& rank : ss.samples)
    for (const auto& mb : rank)
      for (int64_t s : mb) {
        auto r = train->sample_examples(s);
        for (int64_t e = r.first; e < r.last && listed < 32; ++e, ++listed)
          rows += (rows.empty() ? "" : ", ") + std::to_string(train->source_row(e));
      }
  return rows;
}

// ---------------------------------------------------------------- the loop

Trainer::Trainer(TrainArgs args, dist::Comm& comm, const text::Tokenizer& tokenizer,
                 const text::TokenizerConfig& tokenizer_config, fs::path tokenizer_dir)
    : s_(std::make_unique<State>(std::move(args), comm, tokenizer, tokenizer_config,
                                 std::move(tokenizer_dir))) {}

Trainer::~Trainer() = default;

void Trainer::hold_run_dir_lock(RunDirLock lock) { s_->dir_lock = std::move(lock); }

void Trainer::note_output_dir_at_start(std::string fingerprint) {
  s_->output_dir_at_start = std::move(fingerprint);
}

volatile std::sig_atomic_t& Trainer::stop_requested() { return g_stop; }

void Trainer::install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

std::vector<float> Trainer::master_weights() { return s_->engine->full_master_weights(); }

TrainSummary Trainer::run() {
  State& s = *s_;
  const TrainArgs& a = s.a;

  {
    // A stop signal while the datasets are tokenised ends the process there (exit status 130, as
    // an interrupted run's) instead of after the whole tokenisation: nothing has been written to
    // exp_dir yet, and the token cache appears by rename, whole or not at all. A signal that came
    // since cmd_train's set-up guard gave way (g_stop) ends it here too. A world of one rank says
    // so, as cmd_train does after an interrupted training; with more ranks each would repeat it,
    // and the launcher reports the signal once.
    const bool say = s.comm.world_size() == 1 && log::min_level() <= log::Level::kWarn;
    const StopSignalsAtOnce during_prepare(
        say ? std::string("zerotune: warning: training was interrupted while the datasets were "
                          "tokenised: nothing was trained and no checkpoint was written; the same "
                          "command starts the run again\n")
            : std::string(),
        130, &g_stop);
    s.prepare_data();
  }
  s.build_model();
  s.build_plan();
  s.resume_or_init();
  s.open_outputs();

  // transformers' start_time of the train speed metrics: after the set-up and the resume, before
  // eval_on_start.
  const double train_start = now_seconds();
  TrainSummary sum;
  LogWindow window(s.num_tokens_seen, /*log_grad_norm=*/a.max_grad_norm > 0);
  const int64_t T = s.plan->total_steps();
  // After build_plan: logging/eval/save steps given as ratios are counts from here on.
  const int64_t eval_every = a.eval_steps > 0 ? a.eval_steps : a.logging_steps;
  if (s.rank0() && a.eval_strategy != IntervalStrategy::kNo && T > 0) {
    const double last = a.eval_strategy == IntervalStrategy::kSteps
                            ? static_cast<double>(T)
                            : s.plan->info(T - 1).epoch_progress;
    if (a.eval_delay > last)
      log::warn("trainer.eval_delay {} is past the run's last {} ({}): no evaluation will run",
                a.eval_delay, a.eval_strategy == IntervalStrategy::kSteps ? "step" : "epoch", last);
  }
  // Resumed without an eval set (dataset.eval unset, so eval_strategy is no and no best model is
  // tracked): the pending evaluation cannot run; it is skipped, saying so, and training goes on.
  if (s.eval_pending && !s.eval) {
    if (s.rank0())
      log::warn(
          "resume_from_checkpoint: {} records an evaluation at step {} that a stop signal "
          "abandoned, but dataset.eval is not set in this run: that evaluation is not run",
          s.resumed_from.string(), s.start_step);
    s.eval_pending = false;
  }
  // The evaluation a stop signal abandoned at the resumed step runs first, as it would have
  // (compared for the best model; that step's checkpoint is the one resumed from); eval_on_start
  // would evaluate the same weights, so it is not run a second time.
  if ((s.eval_pending || a.eval_on_start) && s.start_step < T) {
    const double epoch = s.start_step > 0 ? s.plan->info(s.start_step - 1).epoch_progress : 0.0;
    if (std::optional<MetricRecord> rec = s.evaluate(s.start_step, epoch)) {
      s.log_record(*rec);
      if (s.eval_pending && s.note_best(*rec, s.start_step)) {
        const fs::path ck = a.exp_dir / checkpoint_name(s.start_step);
        std::error_code ec;
        if (fs::is_directory(ck, ec)) s.best_checkpoint = ck;
      }
    }
  }
  // A stop signal before this run's first step (during the start evaluation above, which it
  // abandoned, or while the run was being set up): stop here, without training a step. Every rank
  // reaches this check, whether or not a start evaluation ran (it is collective). Nothing has
  // changed since the start, so nothing is saved: a fresh run writes no checkpoint and exports no
  // model (last_checkpoint stays empty); a resumed run's checkpoint is still the latest
  // (last_checkpoint names it for the resume hint) and is left as it was, so an abandoned pending
  // evaluation it records (eval_pending) runs first on the next resume too. The launcher's record
  // (open_outputs) already names that checkpoint, or none, as the last complete one.
  if (any_rank_stopping(s.comm)) {
    sum.interrupted = true;
    sum.last_checkpoint = s.resumed_from;
    if (s.rank0())
      s.progress->message(
          fmt::format("interrupted: stopped at step {} before training any step", s.start_step));
    return sum;
  }
  double window_start = now_seconds();

  for (int64_t k = s.start_step; k < T; ++k) {
    StepSamples ss = s.plan->samples(k);
    window.add_step(s.train_step(k, ss, sum));  // ss: this rank's micro-batches rebalanced

    const int64_t gs = k + 1;  // HF global_step after this step
    const StepInfo info = ss.info;
    if (s.rank0()) s.progress->update(gs, ProgressDisplay::now());
    // transformers' DefaultFlowCallback (on_step_end / on_epoch_end), and the run's last step.
    // zerotune also logs the run's last step off the logging_steps grid (metrics.jsonl); that
    // record is not transformers', so not in trainer_state.json's log_history (its steps count in
    // the summary's train_loss, as transformers counts them). An epoch cut short by max_steps ends
    // at the last step, where transformers' on_epoch_end logs too.
    const bool hf_log =
        a.logging_strategy != IntervalStrategy::kNo &&
        ((a.logging_strategy == IntervalStrategy::kSteps && gs % a.logging_steps == 0) ||
         (a.logging_strategy == IntervalStrategy::kEpoch && (info.last_in_epoch || gs == T)) ||
         (a.logging_first_step && gs == 1));
    const bool log_now = hf_log || (a.logging_strategy != IntervalStrategy::kNo && gs == T);
    if (log_now) {
      double t = now_seconds();
      MetricRecord rec = window.take(gs, info.epoch_progress, t - window_start);
      rec.set("peak_memory_gib", peak_memory_gib());
      if (s.dev.device_index >= 0) {
        constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
        // In use (CUDA context, cuBLAS / NCCL included) and the pools' maximum allocation (the
        // analog of torch.cuda.max_memory_allocated, which the peers report).
        rec.set("peak_gpu_memory_gib", static_cast<double>(s.dev.device_bytes_in_use()) / kGiB);
        rec.set("peak_gpu_max_allocated_gib",
                static_cast<double>(s.dev.device_max_allocated()) / kGiB);
      }
      window_start = t;
      s.log_record(rec, hf_log ? State::LogTo::kAll : State::LogTo::kNotHistory);
    }
    // "epoch": at each epoch's last step and at the run's last one — an epoch cut short by
    // max_steps (or a fractional num_train_epochs) ends there, and transformers' training loop
    // calls on_epoch_end after it too (DefaultFlowCallback: evaluate and save).
    const bool epoch_end = info.last_in_epoch || gs == T;
    // eval_delay: DefaultFlowCallback's `args.eval_delay <= state.global_step` (steps) or
    // `<= state.epoch` (epoch).
    const bool do_eval = (a.eval_strategy == IntervalStrategy::kSteps && gs % eval_every == 0 &&
                          a.eval_delay <= static_cast<double>(gs)) ||
                         (a.eval_strategy == IntervalStrategy::kEpoch && epoch_end &&
                          a.eval_delay <= info.epoch_progress);
    bool new_best = false;
    if (do_eval) {
      if (std::optional<MetricRecord> rec = s.evaluate(gs, info.epoch_progress)) {
        sum.last_eval_loss = rec->number("eval_loss");
        s.log_record(*rec);
        new_best = s.note_best(*rec, gs);
      } else {
        s.eval_abandoned_step = gs;
      }
    }
    const bool stop = any_rank_stopping(s.comm);
    const bool do_save = (a.save_strategy == SaveStrategy::kSteps &&
                          ((a.save_steps > 0 && gs % a.save_steps == 0) || gs == T)) ||
                         (a.save_strategy == SaveStrategy::kEpoch && epoch_end) ||
                         (a.save_strategy == SaveStrategy::kBest && new_best) || stop;
    if (do_save) sum.last_checkpoint = s.save_checkpoint(gs, stop);
    if (stop) {
      sum.interrupted = true;
      if (s.rank0()) s.progress->message(fmt::format("interrupted: stopped after step {}", gs));
      return sum;
    }
  }
  if (s.rank0()) s.progress->finish(ProgressDisplay::now());
  // A model that was never updated is not a trained model: no final export, a non-zero exit.
  // (applied_steps counts the updates of the resumed-from part too; every rank has the same.)
  if (s.applied_steps == 0 && sum.steps_done > 0)
    fail(
        "no optimizer step was applied: all {} step(s) of the run were skipped ({} without a "
        "target token, {} with a non-finite loss or gradient norm under trainer.nan_policy: skip); "
        "the "
        "weights are unchanged, so no final model is written to {}",
        sum.steps_done, sum.steps_skipped_no_target,
        sum.steps_skipped - sum.steps_skipped_no_target, a.output_dir.string());
  s.finish_best();
  // transformers makes its end-of-train record after loading the best model, before the script's
  // save_model / save_state.
  std::string final_state;
  if (s.rank0()) {
    const MetricRecord summary = s.train_summary(now_seconds() - train_start);
    s.log_record(summary, State::LogTo::kNoFile);  // printed and to TensorBoard, as on_log
    final_state = s.final_state_text(summary);
  }
  s.export_final(T, sum.last_checkpoint, final_state);
  // A stop signal after the last step's check (while that step's checkpoint, the best model or
  // the final model was written) let them finish — each is written under a temporary name and
  // renamed into place whole — but the run did not end on its own: it says so, never success.
  // Every rank gets here (export_final fails on all of them alike).
  if (const int sig = any_rank_stopping(s.comm)) {
    sum.stopped_at_end_by = stop_signal_name(sig);
    if (s.rank0())
      s.progress->message(
          fmt::format("interrupted: {} came after the last step's stop check, while the last "
                      "checkpoint, the best model or the final model was written",
                      sum.stopped_at_end_by));
  }
  return sum;
}

}  // namespace zt::train
