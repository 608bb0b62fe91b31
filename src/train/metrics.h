// Training metrics (SFT_SEMANTICS §6, DESIGN §9): the record of one log/eval event with HF's field
// names, the `metrics.jsonl` writer, HF's console line and TensorBoard tags, and the accumulators
// of a logging window and of an evaluation.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "io/json.h"

namespace zt::train {

// A metric value: an integer (step) or a float (everything HF logs as a Python float).
using MetricValue = std::variant<int64_t, double>;

// One log or eval event: (key, value) pairs in the order HF builds its `logs` dict, `step` last
// (as in `state.log_history`).
class MetricRecord {
 public:
  // Replaces the value of `key` in place, or appends it.
  void set(std::string_view key, MetricValue value);
  // The value of `key`, or nullptr.
  const MetricValue* find(std::string_view key) const;
  // The value of `key` as a double. Throws zt::Error naming the key when it is absent.
  double number(std::string_view key) const;
  const std::vector<std::pair<std::string, MetricValue>>& fields() const { return fields_; }
  // {"loss": 1.5, …, "step": 10}; a non-finite float becomes null (JSON has no NaN).
  Json to_json() const;

 private:
  std::vector<std::pair<std::string, MetricValue>> fields_;
};

// The line HF's ProgressCallback prints for a log event: Python `str(dict)` with every float
// formatted as the string f"{v:.4g}" and integers bare, `step` and `total_flos` left out, e.g.
// {'loss': '1.234', 'grad_norm': '0.5', 'learning_rate': '2e-05', 'epoch': '0.5'}
std::string hf_log_line(const MetricRecord& record);
// Python's f"{v:.4g}" for a double ('nan', 'inf', '-inf', '1e-05', '1.234e+04', '0.5').
std::string format_g4(double v);
// Python's round(x, ndigits) for a float: the double nearest the decimal with `ndigits` digits
// after the point that is nearest x (ties to even on x's exact binary value), e.g. 1.03125
// → 1.0312, 2.675 (2.67499…) at 2 → 2.67; NaN and ±inf unchanged. Throws zt::Error for ndigits
// outside [0, 17].
double python_round(double x, int ndigits);

// transformers' `speed_metrics(split, start_time, num_samples, num_steps)` (trainer_utils.py,
// 4.57.1) for a run of `runtime_seconds` of wall time, appended to `r`: {split}_runtime
// round(runtime, 4), then — unless the runtime is 0 — {split}_samples_per_second
// round(num_samples / runtime, 3) and {split}_steps_per_second round(num_steps / runtime, 3), the
// rates from the unrounded runtime. Throws zt::Error naming the split when the runtime is negative
// or not finite, or a count is negative.
void add_speed_metrics(MetricRecord& r, std::string_view split, double runtime_seconds,
                       double num_samples, double num_steps);

// HF TensorBoardCallback tag of a log key (`rewrite_logs`): "eval_x" → "eval/x",
// "test_x" → "test/x", anything else → "train/x".
std::string hf_tensorboard_tag(std::string_view key);
// The record's (tag, value) pairs for TensorBoard, `step` left out, integers as doubles.
std::vector<std::pair<std::string, double>> tensorboard_scalars(const MetricRecord& record);

// Appends one JSON object per line to `metrics.jsonl`, flushed after each (rank 0 only).
class MetricsWriter {
 public:
  // Opens `path` for appending (creating parents). With `keep_through_step` (a resume from
  // checkpoint-k) the existing file is first rewritten atomically without the events whose "step"
  // is > k (logged after the checkpoint by the interrupted run); lines that are not JSON objects
  // with an integer "step" are an error naming the file and line. Throws zt::Error naming the path
  // and errno text when it cannot be opened.
  explicit MetricsWriter(const std::filesystem::path& path,
                         std::optional<int64_t> keep_through_step = std::nullopt);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // Writes record.to_json() as one line and flushes. Throws zt::Error on a write failure.
  void write(const MetricRecord& record);
  const std::filesystem::path& path() const { return path_; }
  // With `keep_through_step`: the events the file kept (step <= k), in file order; else empty.
  const Json& kept_records() const { return kept_; }

 private:
  std::filesystem::path path_;
  Json kept_ = Json::array();
  std::FILE* file_ = nullptr;
};

// What one optimizer step contributes to the log (all ranks together).
struct StepStats {
  double loss = 0;             // the step's global token-mean loss, sum CE / N
  double grad_norm = 0;        // global gradient norm before clipping
  double learning_rate = 0;    // the learning rate this step used
  int64_t target_tokens = 0;   // N, target tokens of the step
  int64_t correct_tokens = 0;  // targets whose argmax logit equals the label
  double entropy_sum = 0;      // Σ over the targets of the entropy of softmax(logits_t), nats
  int64_t tokens = 0;          // non-pad input tokens of the step (TRL `num_tokens`)
  bool skipped = false;        // N = 0: no update (SFT_SEMANTICS §3)
};

// The steps since the last log event (`logging_steps`). `loss` is the mean of the steps' losses
// (HF: tr_loss / (global_step − last_logged)); `grad_norm` and `learning_rate` are the last
// step's (grad_norm: the last trained step's); `entropy` is Σentropy / Σtargets and
// `mean_token_accuracy` Σcorrect / Σtargets over the window, all ranks (zerotune: token-weighted;
// TRL 1.16 averages per-micro-batch ratios over the window; TRL 0.25's `entropy` averages over
// every non-pad position, prompt tokens included, not over targets); `num_tokens` is cumulative
// over the run; `target_tokens` (zerotune's) is Σ N over the window's trained steps, the counts its
// losses were normalised by. Skipped steps count in no mean and are reported as `skipped_steps`.
class LogWindow {
 public:
  // `num_tokens_seen`: the cumulative token count at the start (restored on resume).
  // `log_grad_norm` false (a run that does not clip, max_grad_norm <= 0): no `grad_norm` key, as
  // transformers' Trainer computes and logs the norm only inside its clipping branch.
  explicit LogWindow(int64_t num_tokens_seen = 0, bool log_grad_norm = true)
      : num_tokens_(num_tokens_seen), log_grad_norm_(log_grad_norm) {}

  void add_step(const StepStats& s);
  int64_t steps() const { return steps_; }  // steps in the window, skipped ones included
  int64_t num_tokens_seen() const { return num_tokens_; }

  // The log event after step `global_step` (1-based count of steps done), `epoch` = HF's
  // fractional epoch, `elapsed_seconds` = wall time of the window (for train_tokens_per_second;
  // left out when <= 0). Keys in order (TRL 1.16's): loss, grad_norm, learning_rate, entropy,
  // mean_token_accuracy, num_tokens, target_tokens, epoch, train_tokens_per_second, skipped_steps
  // (only when > 0), step; loss, grad_norm and target_tokens are left out when every step of the
  // window was skipped (grad_norm also when log_grad_norm is false), entropy and
  // mean_token_accuracy when the window had no target token. Starts a new window. Throws zt::Error
  // when the window is empty.
  MetricRecord take(int64_t global_step, double epoch, double elapsed_seconds);

 private:
  int64_t steps_ = 0, skipped_ = 0, trained_ = 0;
  double loss_sum_ = 0;
  int64_t targets_ = 0, correct_ = 0, window_tokens_ = 0, num_tokens_ = 0;
  double entropy_sum_ = 0;
  double last_grad_norm_ = 0, last_lr_ = 0;
  bool log_grad_norm_ = true;
};

// The metrics of an evaluation record (EvalAccumulator::take), which metric_for_best_model may
// name.
inline constexpr std::string_view kEvalMetricNames[] = {"eval_loss", "eval_entropy",
                                                        "eval_mean_token_accuracy"};

// What an evaluation record says beside its metrics.
struct EvalRunInfo {
  double runtime_seconds = 0;  // wall time of the evaluation (transformers' eval_runtime)
  int64_t num_samples = 0;     // len(eval_dataset) of TRL (transformers' output.num_samples)
  int64_t num_steps = 0;       // eval batches of all ranks: ceil(num_samples / (B_eval · W))
  int64_t num_tokens = 0;      // input tokens trained on so far (TRL 0.25's eval_num_tokens)
};

// An evaluation over the whole eval set, token-weighted (zerotune: HF averages per batch).
class EvalAccumulator {
 public:
  // One micro-batch's summed cross-entropy over its `targets` target tokens, `correct` of which
  // the argmax predicted, and the summed entropy of the predicted distributions at those targets.
  void add(double sum_ce, int64_t targets, int64_t correct, double sum_entropy);
  int64_t targets() const { return targets_; }
  // {eval_loss: Σce/Σtargets, eval_runtime, eval_samples_per_second, eval_steps_per_second
  // (add_speed_metrics of `run`), eval_entropy: Σentropy/Σtargets, eval_mean_token_accuracy:
  // Σcorrect/Σtargets, eval_num_tokens: run.num_tokens (a float, as TRL logs it), epoch, step} —
  // the keys of a TRL 0.25.1 SFTTrainer eval record: transformers' evaluate() puts the speed
  // metrics after eval_loss, TRL's log() adds its metrics. Throws zt::Error when no target token
  // was seen (an eval set without targets).
  MetricRecord take(int64_t global_step, double epoch, const EvalRunInfo& run) const;

 private:
  double sum_ce_ = 0, sum_entropy_ = 0;
  int64_t targets_ = 0, correct_ = 0;
};

}  // namespace zt::train
