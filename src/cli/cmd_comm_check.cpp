// `zerotune comm-check [--elements N] [--device cpu|cuda] [--rounds K] [--fail-rank R]
// [--die-rank R] [--sleep-rank R --sleep-s S]`: joins the job described by the environment
// (mpirun, torchrun-style variables, `zerotune launch`, or alone), prints each rank's identity and
// runs the collective self-test (dist/selftest.h) K times. --device cuda runs it on the device
// Comm (NCCL, GPU LOCAL_RANK) with device buffers. A quick check of a multi-process setup;
// --fail-rank / --die-rank / --sleep-rank make one rank fail, die (SIGKILL after the first round)
// or stall, to see that the others stop (what the launch and GPU tests use).
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "core/error.h"
#include "dist/bootstrap.h"
#include "dist/selftest.h"
#ifdef ZT_HAVE_NCCL
#include "dist/nccl/device_selftest.h"
#endif

namespace zt::cli {

namespace {

const char* env_or_dash(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "-";
}

}  // namespace

constexpr CommandUsage kUsage{"comm-check", "[--device cpu|cuda] [--elements N] [--rounds N]"};

int cmd_comm_check(const Args& args) {
  CLI::App app{"zerotune comm-check: check the collectives of a multi-process job"};
  size_t elements = 4099;
  int fail_rank = -1, sleep_rank = -1, die_rank = -1, rounds = 1;
  double sleep_s = 0;
  std::string device = "cpu";
  app.add_option("--elements", elements, "reduce-scatter shard size per rank")
      ->transform(integer_in(1, 1 << 26));
  app.add_option("--device", device, "where the collectives run: cpu (host Comm) or cuda (NCCL)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--rounds", rounds, "times the self-test runs")->transform(integer_in(1, 1 << 30));
  app.add_option("--fail-rank", fail_rank, "this rank fails right after joining");
  app.add_option("--die-rank", die_rank,
                 "this rank kills itself (SIGKILL) after the first round; the others go on");
  app.add_option("--sleep-rank", sleep_rank, "this rank sleeps --sleep-s seconds before the test");
  app.add_option("--sleep-s", sleep_s, "seconds --sleep-rank sleeps");
  if (auto rc = parse_command_line(app, kUsage, args)) return *rc;
  const bool on_device = device == "cuda";
  const dist::LaunchEnv env = dist::read_launch_env([](const char* n) { return std::getenv(n); });
  std::unique_ptr<dist::Comm> comm = dist::make_comm(env);
  if (on_device) {
    const int gpu = comm->local_rank();
    const size_t bucket = elements * static_cast<size_t>(comm->world_size());
    comm = dist::make_device_comm(std::move(comm), gpu, bucket, env.options);
  }
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
  std::unique_ptr<dist::SelftestMemory> memory;
#ifdef ZT_HAVE_NCCL
  if (on_device) memory = dist::make_device_selftest_memory(*comm);
#endif
  uint64_t digest = 0;
  for (int k = 0; k < rounds; ++k) {
    digest = dist::run_comm_selftest(*comm, elements, memory.get());
    if (r == die_rank) {
      fmt::print("comm-check: rank {} dies (SIGKILL) as asked (--die-rank)\n", r);
      std::fflush(stdout);
      raise(SIGKILL);
    }
  }
  fmt::print("comm-check: rank {} ok digest {:016x}\n", r, digest);
  std::fflush(stdout);
  return 0;
}

}  // namespace zt::cli
