// Multi-process runs of `zerotune comm-check`: under mpirun with 1, 2 and 4 ranks, under
// `zerotune launch` (TCP) with 1, 2 and 4, and failure handling of both (a failing rank stops the
// job; the launcher forwards signals).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "child_process.h"
#include "dist/local_launch.h"
#include "dist/selftest.h"

namespace zt::dist {
namespace {

using test::Child;
using test::count_of;

const std::string kBin = ZT_BINARY;
constexpr double kHangGuard = 90.0;  // seconds before a run counts as hung

std::vector<std::string> mpirun(int np, std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {"mpirun", "--oversubscribe", "--allow-run-as-root", "-np",
                                std::to_string(np)};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// Env for a child: chunked reduce-scatter, and none of an outer launcher's variables.
std::vector<std::string> child_env() {
  return {"ZT_COMM_CHUNK_ELEMENTS=250",
          "RANK=",
          "WORLD_SIZE=",
          "LOCAL_RANK=",
          "MASTER_ADDR=",
          "MASTER_PORT=",
          "OMPI_COMM_WORLD_SIZE=",
          "PMIX_RANK=",
          "OMPI_MCA_orte_tmpdir_base=" + test::mpi_tmpdir_base()};
}

std::string digest_line(int rank, int world, size_t shard) {
  return fmt::format("comm-check: rank {} ok digest {:016x}", rank,
                     selftest_expected_digest(world, shard));
}

TEST(MpiComm, SelftestBitwiseUnderOneTwoAndFourRanks) {
  for (int np : {1, 2, 4}) {
    Child c(mpirun(np, {kBin, "comm-check", "--elements", "1001"}), child_env());
    ASSERT_EQ(c.wait(kHangGuard), 0) << c.output();
    EXPECT_EQ(count_of(c.output(), fmt::format("/{} local_rank", np)), static_cast<size_t>(np))
        << c.output();
    EXPECT_EQ(count_of(c.output(), "backend mpi"), static_cast<size_t>(np)) << c.output();
    for (int r = 0; r < np; ++r)
      EXPECT_NE(c.output().find(digest_line(r, np, 1001)), std::string::npos) << c.output();
  }
}

TEST(MpiComm, ResultDoesNotDependOnTheTransport) {
  // Shared memory vs TCP between the ranks: the same bits (the sum is ours, in rank order).
  Child c({"mpirun", "--oversubscribe", "--allow-run-as-root", "--mca", "btl", "self,tcp", "-np",
           "4", kBin, "comm-check", "--elements", "999"},
          child_env());
  ASSERT_EQ(c.wait(kHangGuard), 0) << c.output();
  for (int r = 0; r < 4; ++r)
    EXPECT_NE(c.output().find(digest_line(r, 4, 999)), std::string::npos) << c.output();
}

TEST(MpiComm, FailingRankEndsTheJob) {
  // Rank 1 fails right after joining while rank 0 waits in the self-test's first collective.
  Child c({"mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "2", kBin, "comm-check",
           "--fail-rank", "1"},
          child_env());
  const int st = c.wait(kHangGuard);
  EXPECT_NE(st, -1) << "mpirun hung\n" << c.output();
  EXPECT_NE(st, 0) << c.output();
  EXPECT_NE(c.output().find("rank 1 fails as asked"), std::string::npos) << c.output();
  EXPECT_EQ(c.output().find("ok digest"), std::string::npos) << c.output();
}

TEST(MpiComm, StalledRankTripsTheCollectiveTimeout) {
  // Rank 1 sleeps 300 s before the self-test; rank 0 waits in its first collective for at most
  // ZT_COMM_TIMEOUT_S = 2 s, fails naming the call, and mpirun ends the job.
  Child c({"mpirun", "--oversubscribe", "--allow-run-as-root", "-x", "ZT_COMM_TIMEOUT_S=2", "-np",
           "2", kBin, "comm-check", "--sleep-rank", "1", "--sleep-s", "300"},
          child_env());
  const int st = c.wait(kHangGuard);
  ASSERT_NE(st, -1) << "mpirun hung\n" << c.output();
  EXPECT_NE(st, 0) << c.output();
  EXPECT_NE(c.output().find("on rank 0 did not complete within 2 s (trainer.ddp_timeout / "
                            "ZT_COMM_TIMEOUT_S)"),
            std::string::npos)
      << c.output();
  EXPECT_EQ(c.output().find("woke up"), std::string::npos) << c.output();
}

TEST(Launch, TcpSelftestBitwiseUnderOneTwoAndFourRanks) {
  for (int np : {1, 2, 4}) {
    Child c(
        {kBin, "launch", "--num_processes", std::to_string(np), "comm-check", "--elements", "1001"},
        child_env());
    ASSERT_EQ(c.wait(kHangGuard), 0) << c.output();
    const std::string backend = np == 1 ? "backend single" : "backend tcp";
    EXPECT_EQ(count_of(c.output(), backend), static_cast<size_t>(np)) << c.output();
    for (int r = 0; r < np; ++r)
      EXPECT_NE(c.output().find(digest_line(r, np, 1001)), std::string::npos) << c.output();
  }
}

TEST(Launch, ChildrenGetTheTorchrunVariables) {
  Child c({kBin, "launch", "--num_processes", "2", "--main_process_port", "0", "comm-check",
           "--elements", "3"},
          child_env());
  // --main_process_port 0 is rejected (1..65535): the launcher's own option parsing works. A usage
  // error exits 2, as every command's (cli/command_line.h; argparse's status, which accelerate's
  // users know).
  EXPECT_EQ(c.wait(kHangGuard), 2) << c.output();
  EXPECT_NE(c.output().find("--main_process_port"), std::string::npos) << c.output();

  const int port = pick_free_port("127.0.0.1");
  Child d({kBin, "launch", "--num_processes", "2", "--master_port", std::to_string(port),
           "comm-check", "--elements", "3"},
          child_env());
  ASSERT_EQ(d.wait(kHangGuard), 0) << d.output();
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(
        d.output().find(fmt::format("comm-check: rank {}/2 local_rank {}/2 backend tcp", r, r)),
        std::string::npos)
        << d.output();
    EXPECT_NE(
        d.output().find(fmt::format("RANK={} WORLD_SIZE=2 LOCAL_RANK={} MASTER_ADDR=127.0.0.1 "
                                    "MASTER_PORT={} ZT_ACCELERATE_CONFIG=-",
                                    r, r, port)),
        std::string::npos)
        << d.output();
  }
}

TEST(Launch, FailingChildStopsTheOthersAndFailsTheLaunch) {
  // Rank 0 sleeps outside any collective (only the launcher can stop it); rank 1 fails.
  Child c({kBin, "launch", "--num_processes", "2", "comm-check", "--fail-rank", "1", "--sleep-rank",
           "0", "--sleep-s", "300"},
          child_env());
  const int st = c.wait(kHangGuard);
  ASSERT_NE(st, -1) << "launch did not stop the sleeping rank\n" << c.output();
  EXPECT_EQ(st, 1) << c.output();
  EXPECT_NE(c.output().find("rank 1 fails as asked"), std::string::npos) << c.output();
  EXPECT_NE(c.output().find("launch: rank 1 (pid"), std::string::npos) << c.output();
  EXPECT_NE(c.output().find("exited with status 1; stopping the other 1 process(es)"),
            std::string::npos)
      << c.output();
  EXPECT_EQ(c.output().find("woke up"), std::string::npos) << c.output();
}

TEST(Launch, ForwardsSigtermToEveryChild) {
  Child c({kBin, "launch", "--num_processes", "2", "comm-check", "--sleep-rank", "0", "--sleep-s",
           "300"},
          child_env());
  // Rank 0 sleeps; rank 1 waits for it in the self-test. Signal once both are up.
  ASSERT_TRUE(c.read_until(
      [](const std::string& o) {
        return count_of(o, "backend tcp pid") == 2 && o.find("sleeping") != std::string::npos;
      },
      kHangGuard))
      << c.output();
  // The ranks' pids, from their identity lines.
  std::vector<pid_t> pids;
  for (size_t p = c.output().find("pid "); p != std::string::npos;
       p = c.output().find("pid ", p + 4))
    pids.push_back(std::stoi(c.output().substr(p + 4)));
  ASSERT_EQ(pids.size(), 2u) << c.output();
  ASSERT_EQ(kill(c.pid(), SIGTERM), 0);
  EXPECT_EQ(c.wait(kHangGuard), 128 + SIGTERM) << c.output();
  EXPECT_NE(c.output().find("forwarding it to 2 process(es)"), std::string::npos) << c.output();
  for (pid_t p : pids) EXPECT_NE(kill(p, 0), 0) << "rank pid " << p << " still exists";
}

TEST(Launch, ConfigFileSetsProcessCountAndCommandLineWins) {
  const std::string path = testing::TempDir() + "zt_launch_accelerate.yaml";
  {
    std::ofstream f(path);
    f << "distributed_type: DEEPSPEED\nnum_processes: 2\nmixed_precision: bf16\n"
         "deepspeed_config:\n  zero_stage: 2\n  offload_optimizer_device: cpu\n";
  }
  Child a({kBin, "launch", "--config_file", path, "comm-check", "--elements", "5"}, child_env());
  ASSERT_EQ(a.wait(kHangGuard), 0) << a.output();
  EXPECT_EQ(count_of(a.output(), "/2 local_rank"), 2u) << a.output();
  const std::string abs = std::filesystem::absolute(path).string();
  EXPECT_EQ(count_of(a.output(), "ZT_ACCELERATE_CONFIG=" + abs), 2u) << a.output();

  Child b({kBin, "launch", "--num_processes", "3", "--config_file", path, "comm-check",
           "--elements", "5"},
          child_env());
  ASSERT_EQ(b.wait(kHangGuard), 0) << b.output();
  EXPECT_EQ(count_of(b.output(), "/3 local_rank"), 3u) << b.output();
  EXPECT_NE(b.output().find("--num_processes 3 overrides num_processes: 2 of " + path),
            std::string::npos)
      << b.output();
  std::filesystem::remove(path);
}

// The first CPU of this process's affinity mask, for `taskset -c` to pin a launcher to.
int first_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) return c;
  return 0;
}

// More ranks than the machine runs are refused before any starts (100000 were all started),
// naming the option or the config file's key and the range: 4 per CPU the launcher may use, here
// 1 CPU (pinned with taskset), so at most 4; --num_processes counts every node's ranks.
TEST(Launch, RefusesMoreRanksThanTheMachineRuns) {
  const std::string cpu = std::to_string(first_cpu());
  const auto pinned = [&](const std::vector<std::string>& args) {
    std::vector<std::string> a = {"taskset", "-c", cpu, kBin, "launch"};
    a.insert(a.end(), args.begin(), args.end());
    return a;
  };
  const std::string why = "4 per CPU this launcher may use, 1 CPU; --oversubscribe starts more";
  const std::pair<std::vector<std::string>, std::string> refused[] = {
      {{"--num_processes", "5", "version"},
       "--num_processes: expected a positive integer <= 4 (" + why + "), got 5"},
      {{"--num_processes", "100000", "version"},
       "--num_processes: expected a positive integer <= 4 (" + why + "), got 100000"},
      {{"--nproc_per_node", "5", "version"},
       "--nproc_per_node: expected a positive integer <= 4 (" + why + "), got 5"},
      {{"--num_processes", "10", "--nnodes", "2", "--master_port", "29999", "version"},
       "--num_processes: expected a positive integer <= 8 (4 ranks per node × 2 nodes: " + why +
           "), got 10"},
  };
  for (const auto& [args, expected] : refused) {
    Child c(pinned(args), child_env());
    EXPECT_EQ(c.wait(kHangGuard), 2) << c.output();
    EXPECT_NE(c.output().find("zerotune: error: launch: " + expected + "\n"), std::string::npos)
        << c.output();
    EXPECT_EQ(c.output().find("zerotune 0.1.0"), std::string::npos) << c.output();
  }
  const std::string path = testing::TempDir() + "zt_launch_many.yaml";
  std::ofstream(path) << "num_processes: 5\n";
  Child f(pinned({"--config_file", path, "version"}), child_env());
  EXPECT_EQ(f.wait(kHangGuard), 1) << f.output();
  EXPECT_NE(f.output().find("zerotune: error: launch: " + path +
                            ": key 'num_processes' has value '5' (expected an integer in [1, 4]: " +
                            why + ")\n"),
            std::string::npos)
      << f.output();
  std::filesystem::remove(path);
  // At the bound, every rank starts.
  Child ok(pinned({"--num_processes", "4", "version"}), child_env());
  ASSERT_EQ(ok.wait(kHangGuard), 0) << ok.output();
  EXPECT_EQ(count_of(ok.output(), "zerotune 0.1.0"), 4u) << ok.output();
}

// With --oversubscribe the cap is not applied (Slurm's --cpus-per-task=1 with 8 GPUs gives a
// launcher 1 CPU for 8 ranks): 5 ranks start on 1 CPU, from the option and from the config file.
TEST(Launch, OversubscribeStartsMoreRanksThanTheCap) {
  const std::string cpu = std::to_string(first_cpu());
  Child c(
      {"taskset", "-c", cpu, kBin, "launch", "--oversubscribe", "--num_processes", "5", "version"},
      child_env());
  ASSERT_EQ(c.wait(kHangGuard), 0) << c.output();
  EXPECT_EQ(count_of(c.output(), "zerotune 0.1.0"), 5u) << c.output();
  const std::string path = testing::TempDir() + "zt_launch_oversubscribe.yaml";
  std::ofstream(path) << "num_processes: 5\n";
  Child f(
      {"taskset", "-c", cpu, kBin, "launch", "--config_file", path, "--oversubscribe", "version"},
      child_env());
  ASSERT_EQ(f.wait(kHangGuard), 0) << f.output();
  EXPECT_EQ(count_of(f.output(), "zerotune 0.1.0"), 5u) << f.output();
  std::filesystem::remove(path);
}

TEST(Launch, RequiresACommand) {
  Child c({kBin, "launch", "--num_processes", "2"}, child_env());
  EXPECT_EQ(c.wait(kHangGuard), 1) << c.output();
  EXPECT_NE(c.output().find("launch: no command given"), std::string::npos) << c.output();
}

TEST(TcpComm, RankThatDiesMakesEveryRankExitNonZero) {
  // Three ranks started by hand (torchrun-style variables, no launcher to clean up): rank 2 fails
  // after the rendezvous; ranks 0 and 1 are in the self-test and must fail on their own.
  const int port = pick_free_port("127.0.0.1");
  std::vector<std::unique_ptr<Child>> ranks;
  for (int r = 0; r < 3; ++r) {
    std::vector<std::string> env = child_env();
    for (const std::string& e :
         {fmt::format("RANK={}", r), std::string("WORLD_SIZE=3"), fmt::format("LOCAL_RANK={}", r),
          std::string("MASTER_ADDR=127.0.0.1"), fmt::format("MASTER_PORT={}", port)})
      env.push_back(e);
    ranks.push_back(std::make_unique<Child>(
        std::vector<std::string>{kBin, "comm-check", "--fail-rank", "2", "--elements", "50000"},
        env));
  }
  for (int r = 0; r < 3; ++r) {
    Child& c = *ranks[static_cast<size_t>(r)];
    const int st = c.wait(kHangGuard);
    ASSERT_NE(st, -1) << "rank " << r << " hung\n" << c.output();
    EXPECT_EQ(st, 1) << "rank " << r << "\n" << c.output();
    // Rank 2 is gone; each survivor names the peer it lost first (2, or the other survivor).
    if (r < 2)
      EXPECT_NE(c.output().find("exited or failed"), std::string::npos) << "rank " << r << "\n"
                                                                        << c.output();
    else
      EXPECT_NE(c.output().find("rank 2 fails as asked"), std::string::npos) << c.output();
  }
}

}  // namespace
}  // namespace zt::dist
