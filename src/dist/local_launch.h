// Starts the N local processes of a job and watches them (what `zerotune launch` does, like
// torchrun / `accelerate launch` on one machine).
//
// Each child gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT (the
// TCP Comm's variables, bootstrap.h); MPI / PMIx variables inherited from an outer launcher are
// removed so the children do not mistake themselves for MPI ranks. SIGINT / SIGTERM / SIGHUP sent
// to the launcher are forwarded to every child (a second one kills them). When a child fails
// (non-zero status or killed by a signal) the others get SIGTERM, then SIGKILL after
// `kill_grace_s`. Children also get SIGKILL if the launcher itself dies (PR_SET_PDEATHSIG).
// ZT_LAUNCH_ERRORS names a fresh directory (removed at the end) through which the children print
// an error all of them hit only once (cli/error_report.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace zt::dist {

struct LocalLaunch {
  std::string exe;                // program to run (e.g. /proc/self/exe)
  std::vector<std::string> args;  // its arguments (argv[1…])
  int num_processes = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;                                         // 0: a free port is picked
  std::vector<std::pair<std::string, std::string>> extra_env;  // set in every child
  double kill_grace_s = 5.0;  // SIGTERM -> SIGKILL delay when stopping children
};

// Runs the job to completion. Returns 0 when every child exited 0; otherwise the first failing
// child's exit status (128 + signal number when it was killed), or 128 + the signal that stopped
// the launcher. Throws zt::Error if a child cannot be started.
int run_local_launch(const LocalLaunch& spec);

// A TCP port that was free on `addr` a moment ago (bind to port 0, read it back, close).
int pick_free_port(const std::string& addr);

}  // namespace zt::dist
