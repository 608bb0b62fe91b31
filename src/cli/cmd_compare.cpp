// `zerotune compare RUN_A RUN_B [RUN …] [--png PATH] [--no-png]`: do these runs agree? Reads each
// run's log (train/run_log.h: zerotune's metrics.jsonl, or a TRL / transformers trainer_state.json
// log_history), compares every run with the first on each logged metric (train/log_compare.h),
// prints per metric and run the first step where they differ and the largest absolute and
// relative differences, and draws the curves overlaid, one panel per metric, into a PNG with
// gnuplot (io/gnuplot_png.h; default `compare.png` in the current directory).
// Exit status: 0 when every metric is bitwise equal in every run, 1 when they differ, 2 on a usage
// or input error (the message names the file) or when the plot cannot be drawn.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "io/gnuplot_png.h"
#include "train/log_compare.h"

namespace zt::cli {
namespace fs = std::filesystem;

namespace {

std::string run_label(size_t i) {
  return i < 26 ? std::string(1, static_cast<char>('A' + i)) : fmt::format("R{}", i + 1);
}

// "0", "1.19e-07 (step 7)", or "NaN (step 7)" (a NaN beside a number), "inf (step 7)".
std::string at_step(double v, int64_t step) {
  if (step < 0) return "-";
  if (v == 0) return "0";
  if (!std::isfinite(v)) return fmt::format("{} (step {})", train::show_value(v), step);
  return fmt::format("{:.3g} (step {})", v, step);
}

// The table of differences, one row per (metric, run ≠ A).
void print_table(const train::CompareResult& res) {
  fmt::print("\n{:<26} {:<4} {:>6}  {:<20} {:<20} {}\n", "metric", "run", "steps", "max |diff|",
             "max rel. diff", "first difference");
  for (const auto& d : res.diffs) {
    const std::string who = run_label(d.run);
    std::string first;
    if (d.missing_here)
      first = fmt::format("not logged by {}", who);
    else if (d.missing_in_first)
      first = "not logged by A";
    else if (d.first_diff_step)
      first = fmt::format("step {}: {}", *d.first_diff_step, d.first_diff);
    else
      first = "none (bitwise equal)";
    const bool both = !d.missing_here && !d.missing_in_first;
    fmt::print("{:<26} {:<4} {:>6}  {:<20} {:<20} {}\n", d.metric, who, d.common_steps,
               both ? at_step(d.max_abs, d.max_abs_step) : "-",
               both ? at_step(d.max_rel, d.max_rel_step) : "-", first);
  }
}

// One panel per compared metric, each run a curve; the title says whether and where they differ.
std::vector<io::PlotPanel> panels_of(const std::vector<train::RunLog>& runs,
                                     const train::CompareResult& res) {
  std::vector<io::PlotPanel> panels;
  for (const auto& m : train::default_compare_metrics()) {
    if (std::find(res.metrics.begin(), res.metrics.end(), m.key) == res.metrics.end()) continue;
    io::PlotPanel p;
    std::optional<int64_t> first;
    double max_abs = 0;
    bool equal = true;
    for (const auto& d : res.diffs) {
      if (d.metric != m.key) continue;
      equal = equal && d.equal();
      if (d.first_diff_step && (!first || *d.first_diff_step < *first)) first = d.first_diff_step;
      if (train::larger_diff(d.max_abs, max_abs)) max_abs = d.max_abs;
    }
    const std::string max_text =
        std::isfinite(max_abs) ? fmt::format("{:.3g}", max_abs) : train::show_value(max_abs);
    p.title = equal   ? m.key + ": bitwise equal"
              : first ? fmt::format("{}: first difference at step {}, max |diff| {}", m.key, *first,
                                    max_text)
                      : m.key + ": not logged by every run";
    for (size_t i = 0; i < runs.size(); ++i) {
      io::PlotCurve c;
      c.label = run_label(i) + ": " + runs[i].run.string();
      for (const auto& [step, v] : train::metric_series(runs[i], m.key, m.alias))
        c.points.emplace_back(static_cast<double>(step), v);
      p.curves.push_back(std::move(c));
    }
    panels.push_back(std::move(p));
  }
  return panels;
}

// The note on a run whose log repeats steps: "<file>: step 3 is logged 2 times, step 4 3 times;
// …" (the first kListed steps, then how many more), or "" when it repeats none.
std::string repeated_steps_note(const train::RunLog& run) {
  constexpr size_t kListed = 10;
  const std::vector<train::RepeatedStep> rep = train::repeated_steps(run);
  if (rep.empty()) return "";
  std::string steps;
  for (size_t i = 0; i < rep.size() && i < kListed; ++i)
    steps += i == 0 ? fmt::format("step {} is logged {} times", rep[i].step, rep[i].times)
                    : fmt::format(", step {} {} times", rep[i].step, rep[i].times);
  if (rep.size() > kListed) steps += fmt::format(" and {} more steps", rep.size() - kListed);
  return fmt::format(
      "{}: {}; compare uses the last value of each such step (a resumed run's log repeats the "
      "steps after its checkpoint, and its last line is the resumed run's)",
      run.source.string(), steps);
}

int compare(const std::vector<std::string>& run_args, const std::string& png, bool no_png) {
  std::vector<train::RunLog> runs;
  for (const auto& r : run_args) runs.push_back(train::read_run_log(r));
  const train::CompareResult res = train::compare_run_logs(runs);
  fmt::print("runs:\n");
  for (size_t i = 0; i < runs.size(); ++i)
    fmt::print("  {}  {}  ({}, {} events)\n", run_label(i), runs[i].run.string(),
               runs[i].source.string(), runs[i].events.size());
  std::fflush(stdout);  // the notes (stderr) after the runs they are about
  for (const auto& r : runs)
    if (const std::string note = repeated_steps_note(r); !note.empty()) log::info("{}", note);
  if (res.metrics.empty())
    fail("compare: no run logged any of the compared metrics (loss, grad_norm, …)");
  print_table(res);
  const bool equal = res.all_equal();
  size_t differing = 0;
  for (const auto& d : res.diffs) differing += d.equal() ? 0 : 1;
  if (equal)
    fmt::print("\nequal: every logged metric is bitwise equal in all {} runs\n", runs.size());
  else
    fmt::print("\ndiffer: {} of {} (metric, run) comparisons differ from A\n", differing,
               res.diffs.size());
  std::fflush(stdout);
  if (!no_png) {
    const auto gnuplot = io::find_gnuplot();
    if (!gnuplot) {
      fmt::print(stderr,
                 "zerotune: warning: no plot written: gnuplot was not found on PATH (Debian: "
                 "apt-get install gnuplot-nox)\n");
    } else {
      std::string title = fmt::format("zerotune compare: {}",
                                      equal ? "all metrics bitwise equal" : "the runs differ");
      io::plot_png(panels_of(runs, res), png, title, *gnuplot);
      fmt::print("plot: {}\n", png);
    }
  }
  return equal ? 0 : 1;
}

}  // namespace

constexpr CommandUsage kUsage{"compare", "RUN_A RUN_B [RUN …] [--png PATH] [--no-png]"};

int cmd_compare(const Args& args) {
  CLI::App app{
      "Compare the logged metrics of two or more runs (zerotune metrics.jsonl or a TRL / "
      "transformers "
      "trainer_state.json); exit 0 when all are bitwise equal, 1 when they differ, 2 on bad input",
      "compare"};
  std::vector<std::string> runs;
  std::string png = "compare.png";
  bool no_png = false;
  app.add_option("runs", runs,
                 "run directories (or metrics.jsonl / trainer_state.json files); the first is the "
                 "reference")
      ->required();
  app.add_option(
      "--png", png,
      "where to write the plot of the curves (default: compare.png in the current directory)");
  app.add_flag("--no-png", no_png, "do not draw the plot");
  if (auto rc = parse_command_line(app, kUsage, args)) return *rc;
  if (runs.size() < 2)
    return usage_error(kUsage, fmt::format("need at least two runs, got {}", runs.size()));
  try {
    return compare(runs, png, no_png);
  } catch (const Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "zerotune: error: {}\n", e.what());
    return 2;
  }
}

}  // namespace zt::cli
