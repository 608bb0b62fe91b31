#include "core/stop_signals.h"

#include <unistd.h>

#include <utility>

namespace zt {
namespace {

// What on_stop_signal_at_once does: set only while a StopSignalsAtOnce lives (one at a time).
const std::string* volatile g_line = nullptr;
volatile std::sig_atomic_t g_exit_status = 0;

// The first stop signal recorded since the process began (record_stop_signals_until_guarded).
volatile std::sig_atomic_t g_early = 0;

extern "C" void on_early_stop_signal(int sig) {
  if (g_early == 0) g_early = sig;
}

extern "C" void on_stop_signal_at_once(int sig) {
  if (const std::string* line = g_line; line != nullptr && !line->empty()) {
    ssize_t ignored = ::write(STDERR_FILENO, line->data(), line->size());
    (void)ignored;
  }
  ::_exit(g_exit_status != 0 ? static_cast<int>(g_exit_status) : 128 + sig);
}

}  // namespace

void record_stop_signals_until_guarded() {
  struct sigaction sa {};
  sa.sa_handler = on_early_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

StopSignalsAtOnce::StopSignalsAtOnce(std::string line, int exit_status,
                                     const volatile std::sig_atomic_t* pending)
    : line_(std::move(line)) {
  g_line = &line_;
  g_exit_status = exit_status;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal_at_once;
  sigemptyset(&sa.sa_mask);
  for (int sig : kSignals) sigaddset(&sa.sa_mask, sig);
  for (int i = 0; i < 2; ++i) sigaction(kSignals[i], &sa, &saved_[i]);
  if (g_early != 0) on_stop_signal_at_once(g_early);
  if (pending != nullptr && *pending != 0) on_stop_signal_at_once(*pending);
}

StopSignalsAtOnce::~StopSignalsAtOnce() {
  for (int i = 0; i < 2; ++i) sigaction(kSignals[i], &saved_[i], nullptr);
  g_line = nullptr;
}

}  // namespace zt
