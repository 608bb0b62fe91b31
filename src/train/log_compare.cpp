#include "train/log_compare.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>

#include "core/error.h"

namespace zt::train {

const std::vector<CompareMetric>& default_compare_metrics() {
  static const std::vector<CompareMetric> m = {
      {"loss", ""},
      {"grad_norm", ""},
      {"learning_rate", ""},
      {"mean_token_accuracy", "accuracy"},
      {"entropy", ""},
      {"eval_loss", ""},
      {"eval_mean_token_accuracy", "eval_accuracy"},
      {"eval_entropy", ""},
  };
  return m;
}

bool CompareResult::all_equal() const {
  for (const auto& d : diffs)
    if (!d.equal()) return false;
  return true;
}

bool same_bits(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

bool larger_diff(double x, double y) {
  auto rank = [](double v) { return std::isnan(v) ? 2 : std::isinf(v) ? 1 : 0; };
  if (rank(x) != rank(y)) return rank(x) > rank(y);
  return rank(x) == 0 && x > y;
}

std::string show_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);
}

namespace {

using Series = std::vector<std::pair<int64_t, double>>;

MetricDiff diff_series(const std::string& metric, size_t run, const Series& first,
                       const Series& here) {
  MetricDiff d;
  d.metric = metric;
  d.run = run;
  d.missing_here = here.empty() && !first.empty();
  d.missing_in_first = first.empty() && !here.empty();
  std::map<int64_t, std::pair<std::optional<double>, std::optional<double>>> by_step;
  for (const auto& [s, v] : first) by_step[s].first = v;
  for (const auto& [s, v] : here) by_step[s].second = v;
  for (const auto& [step, ab] : by_step) {
    const auto& [a, b] = ab;
    if (!a || !b) {
      if (!d.first_diff_step && !d.missing_here && !d.missing_in_first) {
        d.first_diff_step = step;
        d.first_diff = a ? "logged by the first run only" : "not logged by the first run";
      }
      continue;
    }
    ++d.common_steps;
    const bool same = same_bits(*a, *b);
    if (!same && !d.first_diff_step) {
      d.first_diff_step = step;
      d.first_diff = fmt::format("{} vs {}", show_value(*a), show_value(*b));
    }
    // NaN when one side is NaN, inf when one is infinite (inf − inf cannot occur: equal infinities
    // are the same bits), else finite.
    const double abs = same ? 0.0 : std::fabs(*a - *b);
    const double scale = std::max(std::fabs(*a), std::fabs(*b));
    const double rel = !std::isfinite(abs) ? abs : scale > 0 ? abs / scale : 0.0;
    if (larger_diff(abs, d.max_abs) || d.max_abs_step < 0) {
      d.max_abs = abs;
      d.max_abs_step = step;
    }
    if (larger_diff(rel, d.max_rel) || d.max_rel_step < 0) {
      d.max_rel = rel;
      d.max_rel_step = step;
    }
  }
  return d;
}

// The field `m` is read from in `log`: its key, or its alias when no event holds the key.
std::string logged_key(const RunLog& log, const CompareMetric& m) {
  for (const Json& e : log.events)
    if (e.contains(m.key)) return m.key;
  return m.alias.empty() ? m.key : m.alias;
}

}  // namespace

std::vector<RepeatedStep> repeated_steps(const RunLog& log,
                                         const std::vector<CompareMetric>& metrics) {
  std::map<int64_t, int> most;  // step -> the most events holding one metric there
  for (const auto& m : metrics) {
    const std::string key = logged_key(log, m);
    std::map<int64_t, int> times;
    for (const Json& e : log.events)
      if (e.contains(key)) ++times[e["step"].get<int64_t>()];
    for (const auto& [step, n] : times)
      if (n > 1) most[step] = std::max(most[step], n);
  }
  std::vector<RepeatedStep> out;
  for (const auto& [step, n] : most) out.push_back({step, n});
  return out;
}

CompareResult compare_run_logs(const std::vector<RunLog>& runs,
                               const std::vector<CompareMetric>& metrics) {
  if (runs.size() < 2) fail("compare: need at least two runs, got {}", runs.size());
  CompareResult out;
  for (const auto& m : metrics) {
    std::vector<Series> series;
    bool any = false;
    for (const auto& r : runs) {
      series.push_back(metric_series(r, m.key, m.alias));
      any = any || !series.back().empty();
    }
    if (!any) continue;
    out.metrics.push_back(m.key);
    for (size_t i = 1; i < runs.size(); ++i)
      out.diffs.push_back(diff_series(m.key, i, series[0], series[i]));
  }
  return out;
}

}  // namespace zt::train
