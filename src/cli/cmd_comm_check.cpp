// `zerotune comm-check [--elements N] [--fail-rank R] [--sleep-rank R --sleep-s S]`: joins the job
// described by the environment (mpirun, torchrun-style variables, `zerotune launch`, or alone),
// prints each rank's identity and runs the collective self-test (dist/selftest.h). A quick check
// of a multi-process setup; --fail-rank / --sleep-rank make one rank fail or stall, to see that the
// others stop (what the launch tests use).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "cli/commands.h"
#include "core/error.h"
#include "dist/bootstrap.h"
#include "dist/selftest.h"

namespace zt::cli {

namespace {

const char* env_or_dash(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "-";
}

}  // namespace

int cmd_comm_check(const Args& args) {
  CLI::App app{"zerotune comm-check: check the collectives of a multi-process job", "comm-check"};
  size_t elements = 4099;
  int fail_rank = -1, sleep_rank = -1;
  double sleep_s = 0;
  app.add_option("--elements", elements, "reduce-scatter shard size per rank")
      ->check(CLI::Range(1, 1 << 26));
  app.add_option("--fail-rank", fail_rank, "this rank fails right after joining");
  app.add_option("--sleep-rank", sleep_rank, "this rank sleeps --sleep-s seconds before the test");
  app.add_option("--sleep-s", sleep_s, "seconds --sleep-rank sleeps");
  std::vector<std::string> argv(args.rbegin(), args.rend());
  try {
    app.parse(argv);
  } catch (const CLI::CallForHelp&) {
    fmt::print("{}", app.help());
    return 0;
  } catch (const CLI::ParseError& e) {
    fail("comm-check: {}", e.what());
  }
  const auto comm = dist::make_comm_from_environment();
  const int r = comm->rank();
  fmt::print(
      "comm-check: rank {}/{} local_rank {}/{} backend {} pid {} RANK={} WORLD_SIZE={} "
      "LOCAL_RANK={} MASTER_ADDR={} MASTER_PORT={} ZT_ACCELERATE_CONFIG={}\n",
      r, comm->world_size(), comm->local_rank(), comm->local_world_size(), comm->backend(),
      getpid(), env_or_dash("RANK"), env_or_dash("WORLD_SIZE"), env_or_dash("LOCAL_RANK"),
      env_or_dash("MASTER_ADDR"), env_or_dash("MASTER_PORT"), env_or_dash("ZT_ACCELERATE_CONFIG"));
  std::fflush(stdout);
  if (r == fail_rank) fail("comm-check: rank {} fails as asked (--fail-rank)", r);
  if (r == sleep_rank) {
    fmt::print("comm-check: rank {} sleeping {} s\n", r, sleep_s);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
    fmt::print("comm-check: rank {} woke up\n", r);
    std::fflush(stdout);
  }
  const uint64_t digest = dist::run_comm_selftest(*comm, elements);
  fmt::print("comm-check: rank {} ok digest {:016x}\n", r, digest);
  std::fflush(stdout);
  return 0;
}

}  // namespace zt::cli
