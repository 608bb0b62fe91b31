// Launch-environment detection (RANK/WORLD_SIZE/…, mpirun).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>

#include "core/error.h"
#include "dist/bootstrap.h"

namespace zt::dist {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

EnvLookup fake_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(LaunchEnv, DetectsSingleTcpAndMpi) {
  EXPECT_EQ(read_launch_env(fake_env({})).launcher, Launcher::kSingle);
  EXPECT_EQ(read_launch_env(fake_env({{"WORLD_SIZE", "1"}, {"RANK", "0"}})).launcher,
            Launcher::kSingle);
  const LaunchEnv t = read_launch_env(fake_env({{"WORLD_SIZE", "4"},
                                                {"RANK", "3"},
                                                {"LOCAL_RANK", "1"},
                                                {"LOCAL_WORLD_SIZE", "2"},
                                                {"MASTER_ADDR", "10.0.0.7"},
                                                {"MASTER_PORT", "29500"},
                                                {"ZT_COMM_TIMEOUT_S", "60"}}));
  EXPECT_EQ(t.launcher, Launcher::kTcp);
  EXPECT_EQ(t.tcp.rank, 3);
  EXPECT_EQ(t.tcp.world_size, 4);
  EXPECT_EQ(t.tcp.local_rank, 1);
  EXPECT_EQ(t.tcp.local_world_size, 2);
  EXPECT_EQ(t.tcp.master_addr, "10.0.0.7");
  EXPECT_EQ(t.tcp.master_port, 29500);
  EXPECT_EQ(t.options.timeout_s, 60.0);
  EXPECT_EQ(
      read_launch_env(fake_env({{"OMPI_COMM_WORLD_SIZE", "2"}, {"WORLD_SIZE", "2"}})).launcher,
      Launcher::kMpi);
}

TEST(LaunchEnv, BadVariablesAreNamed) {
  EXPECT_EQ(error_of([] {
              read_launch_env(fake_env({{"WORLD_SIZE", "2"}, {"RANK", "2"}}));
            }),
            "environment variable RANK='2': expected an integer in [0, 1]");
  // A world of one is checked too: RANK=1 beside WORLD_SIZE=1 ran as rank 0 without a word.
  EXPECT_EQ(error_of([] {
              read_launch_env(fake_env({{"WORLD_SIZE", "1"}, {"RANK", "1"}}));
            }),
            "environment variable RANK='1': expected an integer in [0, 0]");
  EXPECT_EQ(error_of([] {
              read_launch_env(fake_env({{"SLURM_NTASKS", "1"}, {"SLURM_PROCID", "3"}}));
            }),
            "environment variable SLURM_PROCID='3': expected an integer in [0, 0]");
  EXPECT_EQ(error_of([] {
              read_launch_env(fake_env({{"WORLD_SIZE", "two"}}));
            }),
            "environment variable WORLD_SIZE='two': expected an integer in [1, 1048576]");
  EXPECT_EQ(error_of([] {
              read_launch_env(fake_env({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_PORT", "1"}}));
            }),
            "environment variable MASTER_ADDR is not set (needed with WORLD_SIZE=2: the address of "
            "rank 0's host)");
  EXPECT_EQ(error_of([] {
              read_launch_env(fake_env({{"WORLD_SIZE", "2"}}));
            }),
            "environment variable RANK is not set (WORLD_SIZE=2 is)");
}

TEST(LaunchEnv, ConfiguredTimeoutAndTheVariableOverridingIt) {
  EXPECT_EQ(read_launch_env(fake_env({})).options.timeout_s, 1800.0);  // TrainingArguments' default
  // trainer.ddp_timeout as LlamaFactory sets it: kept exactly (a double, no int overflow).
  EXPECT_EQ(read_launch_env(fake_env({}), 180000000.0).options.timeout_s, 180000000.0);
  EXPECT_EQ(read_launch_env(fake_env({}), 20.0).options.timeout_s, 20.0);
  EXPECT_EQ(read_launch_env(fake_env({{"ZT_COMM_TIMEOUT_S", "7"}}), 20.0).options.timeout_s, 7.0);
  EXPECT_EQ(read_launch_env(fake_env({{"ZT_COMM_TIMEOUT_S", ""}}), 20.0).options.timeout_s, 20.0);
}

TEST(LaunchEnv, SlurmTasksAreRanks) {
  // srun -N 3 --ntasks 5 (2 + 2 + 1 tasks), the task on node 1 with local id 1: global rank 3.
  const LaunchEnv s = read_launch_env(fake_env({{"SLURM_PROCID", "3"},
                                                {"SLURM_NTASKS", "5"},
                                                {"SLURM_LOCALID", "1"},
                                                {"SLURM_NODEID", "1"},
                                                {"SLURM_TASKS_PER_NODE", "2(x2),1"},
                                                {"MASTER_ADDR", "node-a"},
                                                {"MASTER_PORT", "29400"}}));
  EXPECT_EQ(s.launcher, Launcher::kTcp);
  const TcpRendezvous& t = s.tcp;
  EXPECT_EQ(std::make_tuple(t.rank, t.world_size, t.local_rank, t.local_world_size, t.master_addr,
                            t.master_port),
            std::make_tuple(3, 5, 1, 2, std::string("node-a"), 29400));
  // The last node holds one task.
  EXPECT_EQ(read_launch_env(fake_env({{"SLURM_PROCID", "4"},
                                      {"SLURM_NTASKS", "5"},
                                      {"SLURM_NODEID", "2"},
                                      {"SLURM_TASKS_PER_NODE", "2(x2),1"},
                                      {"MASTER_ADDR", "node-a"},
                                      {"MASTER_PORT", "29400"}}))
                .tcp.local_world_size,
            1);
  // One task: a single process. torchrun's variables (a launcher inside the Slurm step) win.
  EXPECT_EQ(read_launch_env(fake_env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}})).launcher,
            Launcher::kSingle);
  EXPECT_EQ(
      read_launch_env(
          fake_env(
              {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"WORLD_SIZE", "1"}, {"RANK", "0"}}))
          .launcher,
      Launcher::kSingle);
  EXPECT_EQ(error_of([] {
              read_launch_env(fake_env({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}}));
            }),
            "environment variable MASTER_ADDR is not set (needed with SLURM_NTASKS=2: the address "
            "of rank 0's host)");
  EXPECT_EQ(error_of([] {
              read_launch_env(fake_env({{"SLURM_PROCID", "2"},
                                        {"SLURM_NTASKS", "2"},
                                        {"MASTER_ADDR", "a"},
                                        {"MASTER_PORT", "1"}}));
            }),
            "environment variable SLURM_PROCID='2': expected an integer in [0, 1]");
}

}  // namespace
}  // namespace zt::dist
