// The training progress shown on stdout (rank 0). On a terminal: a bar redrawn in place, in the
// shape tqdm gives HF's ProgressCallback,
//    37%|███████▍            | 370/1000 [01:23<02:21,  4.45it/s]
// with each log event printed above it as HF prints it ({'loss': '1.234', …}, train/metrics.h
// hf_log_line). Otherwise (a file or a pipe) only the log lines, one per event, no control codes.
// Times are passed in (seconds on any monotonic clock) so the output is deterministic under test.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "train/metrics.h"

namespace zt::train {

class ProgressDisplay {
 public:
  // `out`: where to write (not owned); `tty`: draw the bar (see stream_is_tty); the run has
  // `total_steps` optimizer steps and starts after `initial_step` (> 0 on resume), at `start_time`.
  ProgressDisplay(std::FILE* out, bool tty, int64_t total_steps, int64_t initial_step,
                  double start_time);
  // Whether `f` is a terminal (isatty of its descriptor).
  static bool stream_is_tty(std::FILE* f);
  // Monotonic seconds (steady_clock), for callers that do not inject time.
  static double now();

  // `step` optimizer steps are done at `time`: redraws the bar (terminal only) when 0.1 s passed
  // since the last draw, or at the last step.
  void update(int64_t step, double time);
  // Prints one log/eval event (hf_log_line) on its own line; on a terminal the bar is redrawn
  // below.
  void log(const MetricRecord& record);
  // Prints a free-form line the same way (e.g. "saved checkpoint-500").
  void message(std::string_view line);
  // Final draw of the bar and a newline (terminal only).
  void finish(double time);

  // The bar for `step` at `time`, without control codes: percentage, a 20-cell bar (eighths with
  // U+2589…U+258F), step/total, [elapsed<remaining, rate], rate in it/s, or s/it below 1 step/s,
  // "?" before the first step of this run. Elapsed/remaining as mm:ss or h:mm:ss.
  std::string bar_text(int64_t step, double time) const;

 private:
  void draw(int64_t step, double time);
  std::FILE* out_;
  bool tty_;
  int64_t total_, initial_;
  double start_;
  int64_t last_step_ = 0;  // the latest update()
  double last_time_ = 0;
  double last_draw_ = -1;
  bool drawn_ = false;
};

// "mm:ss", or "h:mm:ss" from one hour (tqdm's format_interval); negative or non-finite → "?".
std::string format_interval(double seconds);

}  // namespace zt::train
