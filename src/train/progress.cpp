#include "train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"

namespace zt::train {

namespace {

constexpr int kBarCells = 20;
constexpr double kMinRedrawSeconds = 0.1;
// Eighth blocks: index i (1…7) is i/8 of a cell; 8 is a full cell (U+2588).
constexpr const char* kEighths[] = {"",       "\u258f", "\u258e", "\u258d", "\u258c",
                                    "\u258b", "\u258a", "\u2589", "\u2588"};

}  // namespace

std::string format_interval(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(seconds);
  const int64_t h = s / 3600, m = (s / 60) % 60, sec = s % 60;
  if (h > 0) return fmt::format("{}:{:02d}:{:02d}", h, m, sec);
  return fmt::format("{:02d}:{:02d}", m, sec);
}

ProgressDisplay::ProgressDisplay(std::FILE* out, bool tty, int64_t total_steps,
                                 int64_t initial_step, double start_time)
    : out_(out), tty_(tty), total_(total_steps), initial_(initial_step), start_(start_time) {
  if (total_steps < 1) fail("progress: total_steps must be >= 1, got {}", total_steps);
  if (initial_step < 0 || initial_step > total_steps)
    fail("progress: initial step {} is outside [0, {}]", initial_step, total_steps);
  last_step_ = initial_step;
  last_time_ = start_time;
}

bool ProgressDisplay::stream_is_tty(std::FILE* f) { return f && isatty(fileno(f)) == 1; }

double ProgressDisplay::now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string ProgressDisplay::bar_text(int64_t step, double time) const {
  const double frac = std::clamp(static_cast<double>(step) / static_cast<double>(total_), 0.0, 1.0);
  const int64_t eighths = static_cast<int64_t>(frac * kBarCells * 8);
  std::string bar;
  for (int64_t c = 0; c < kBarCells; ++c) {
    const int64_t fill = std::clamp<int64_t>(eighths - c * 8, 0, 8);
    bar += fill == 0 ? " " : kEighths[fill];
  }
  const double elapsed = time - start_;
  const int64_t done = step - initial_;
  std::string rate = "?it/s", remaining = "?";
  if (done > 0 && elapsed > 0) {
    const double r = static_cast<double>(done) / elapsed;
    rate = r >= 1.0 ? fmt::format("{:5.2f}it/s", r) : fmt::format("{:5.2f}s/it", 1.0 / r);
    remaining = format_interval(static_cast<double>(total_ - step) / r);
  }
  return fmt::format("{:3.0f}%|{}| {}/{} [{}<{}, {}]", frac * 100.0, bar, step, total_,
                     format_interval(elapsed), remaining, rate);
}

void ProgressDisplay::draw(int64_t step, double time) {
  fmt::print(out_, "\r{}\x1b[K", bar_text(step, time));
  std::fflush(out_);
  drawn_ = true;
  last_draw_ = time;
}

void ProgressDisplay::update(int64_t step, double time) {
  last_step_ = step;
  last_time_ = time;
  if (!tty_) return;
  if (!drawn_ || step >= total_ || time - last_draw_ >= kMinRedrawSeconds) draw(step, time);
}

void ProgressDisplay::message(std::string_view line) {
  if (tty_ && drawn_) {
    fmt::print(out_, "\r\x1b[K{}\n", line);
    draw(last_step_, last_time_);
  } else {
    fmt::print(out_, "{}\n", line);
    std::fflush(out_);
  }
}

void ProgressDisplay::log(const MetricRecord& record) { message(hf_log_line(record)); }

void ProgressDisplay::finish(double time) {
  if (!tty_) return;
  draw(last_step_, time);
  fmt::print(out_, "\n");
  std::fflush(out_);
}

}  // namespace zt::train
