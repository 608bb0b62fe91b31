// Stop signals (SIGINT, SIGTERM) in the phases of a command that check no stop flag: set-up
// (reading the config, a rendezvous, loading the tokenizer) and the data preparation, each of
// which may block or run for minutes and writes nothing that a stop could leave half-written.
#pragma once

#include <csignal>
#include <string>

namespace zt {

// While alive, SIGINT and SIGTERM end the process at once: `line` (one whole line ending in '\n';
// empty: nothing) is written to stderr, then the process exits with `exit_status` (0: 128 + the
// signal, as a shell reports a process killed by it). Both signals are blocked while the handler
// runs, so one line is written for two signals. The dispositions in force before are restored on
// destruction (with no window in which the default action applies). `pending`: the flag a
// handler installed before sets (the signal's number, 0 when none), read once these handlers are
// in place: a stop signal received before ends the process at construction, as if it came then
// (so does one record_stop_signals_until_guarded recorded). Everything the handler uses is prepared
// before it is installed (it calls write(2) and _exit(2) only, which are async-signal-safe). For
// the commands whose set-up a StopSignalsAtOnce guards (train, launch), called from the
// executable's preinit (cli/main.cpp: before any library initialises, about 0.1 s with CUDA, NCCL,
// MPI and Arrow): until a StopSignalsAtOnce is constructed, SIGINT and SIGTERM only record their
// number, and that first StopSignalsAtOnce ends the process at construction as if the signal came
// then. Without it, a signal in that time killed the process silently by the default action.
void record_stop_signals_until_guarded();

class StopSignalsAtOnce {
 public:
  StopSignalsAtOnce(std::string line, int exit_status,
                    const volatile std::sig_atomic_t* pending = nullptr);
  ~StopSignalsAtOnce();
  StopSignalsAtOnce(const StopSignalsAtOnce&) = delete;
  StopSignalsAtOnce& operator=(const StopSignalsAtOnce&) = delete;

 private:
  static constexpr int kSignals[2] = {SIGINT, SIGTERM};
  std::string line_;
  struct sigaction saved_[2];
};

}  // namespace zt
