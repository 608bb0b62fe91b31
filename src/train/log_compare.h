// Metric-by-metric comparison of run logs (run_log.h) for `zerotune compare`: "do my ZeRO-1 and
// ZeRO-2 runs agree?" Each run is compared with the first; two values agree only when they are
// bitwise equal as doubles (both NaN also agree: JSON cannot tell NaNs apart); a NaN beside a
// number is a difference, reported as such ("NaN vs 1.23", max |diff| NaN), never as 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "train/run_log.h"

namespace zt::train {

// A compared metric: its key and the key older logs use for the same thing ("" = none).
struct CompareMetric {
  std::string key;
  std::string alias;
};

// loss, grad_norm, learning_rate, mean_token_accuracy (alias accuracy), entropy, eval_loss,
// eval_mean_token_accuracy (alias eval_accuracy), eval_entropy — HF / TRL names.
const std::vector<CompareMetric>& default_compare_metrics();

// One metric of run `run` against run 0.
struct MetricDiff {
  std::string metric;
  size_t run = 0;                 // index into the runs, >= 1
  int64_t common_steps = 0;       // steps where both runs logged the metric
  bool missing_here = false;      // run 0 logged the metric, this run never did
  bool missing_in_first = false;  // this run logged it, run 0 never did
  std::optional<int64_t>
      first_diff_step;     // smallest step whose values differ or is logged by one only
  std::string first_diff;  // e.g. "2.3456 vs 2.3457", "NaN vs 1.23", "logged by run 0 only"
  // The largest |a − b| over the common steps, ordered as larger_diff() orders them: NaN when
  // some step's values differ with a NaN on one side (NaN vs 1.23: not a number of any size, and
  // not 0), else inf when one is infinite (inf vs 1, inf vs -inf), else the finite maximum.
  // Bitwise-equal values (NaN and NaN included) differ by 0.
  double max_abs = 0;
  int64_t max_abs_step = -1;  // the first step where max_abs is reached (-1: no common step)
  // The largest |a − b| / max(|a|, |b|) (0 when both are 0), same steps and order; a step with a
  // non-finite difference gives that difference (NaN or inf).
  double max_rel = 0;
  int64_t max_rel_step = -1;
  bool equal() const { return !first_diff_step && !missing_here && !missing_in_first; }
};

struct CompareResult {
  std::vector<std::string> metrics;  // the metrics some run logged, in default order
  std::vector<MetricDiff> diffs;     // for each metric, for each run 1..n−1
  bool all_equal() const;
};

// Bitwise equality of two doubles, NaN equal to NaN.
bool same_bits(double a, double b);

// The order of differences for max_abs / max_rel: every finite value < inf < NaN (a difference
// with a NaN on one side is larger than any number: the values are not comparable at all).
bool larger_diff(double x, double y);

// A logged value as compare prints it: "NaN", "inf", "-inf", else the shortest text that reads
// back to the same double ("2.5000000000000004").
std::string show_value(double v);

// A step that a run's log holds more than once (a resumed run's log can repeat the steps logged
// after the checkpoint it resumed from).
struct RepeatedStep {
  int64_t step = 0;
  int times = 0;  // the most events at the step holding one metric (>= 2)
};

// The steps of `log` at which some metric of `metrics` (its key, or its alias when no event holds
// the key, as metric_series reads it) is logged more than once, step ascending. An eval event
// beside a log event at one step is no repeat (they hold other metrics). metric_series keeps the
// last value of such a step.
std::vector<RepeatedStep> repeated_steps(
    const RunLog& log, const std::vector<CompareMetric>& metrics = default_compare_metrics());

// Compares every run with runs[0] on each metric that at least one run logged. Needs >= 2 runs
// (zt::Error otherwise); errors of metric_series (a non-numeric value) propagate.
CompareResult compare_run_logs(
    const std::vector<RunLog>& runs,
    const std::vector<CompareMetric>& metrics = default_compare_metrics());

}  // namespace zt::train
