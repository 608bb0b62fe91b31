// Metric-by-metric comparison of run logs (run_log.h) for `zerotune compare`: "do my ZeRO-1 and
// ZeRO-2 runs agree?" Each run is compared with the first; two values agree only when they are
// bitwise equal as doubles (both NaN also agree: JSON cannot tell NaNs apart).
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
  std::string first_diff;  // e.g. "2.3456 vs 2.3457", "logged by run 0 only"
  double max_abs = 0;      // max |a − b| over common steps where both are finite
  int64_t max_abs_step = -1;
  double max_rel = 0;  // max |a − b| / max(|a|, |b|) (0 when both are 0), same steps
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

// Compares every run with runs[0] on each metric that at least one run logged. Needs >= 2 runs
// (zt::Error otherwise); errors of metric_series (a non-numeric value) propagate.
CompareResult compare_run_logs(
    const std::vector<RunLog>& runs,
    const std::vector<CompareMetric>& metrics = default_compare_metrics());

}  // namespace zt::train
