// Launch-environment detection (RANK/WORLD_SIZE/…, mpirun).
#include <gtest/gtest.h>

#include <map>
#include <string>

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
  EXPECT_EQ(error_of([] {
              read_launch_env(fake_env({{"WORLD_SIZE", "two"}}));
            }),
            "environment variable WORLD_SIZE='two': expected an integer in [1, 1048576]");
  EXPECT_EQ(error_of([] {
              read_launch_env(fake_env({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_PORT", "1"}}));
            }),
            "environment variable MASTER_ADDR is not set (needed with WORLD_SIZE=2)");
  EXPECT_EQ(error_of([] {
              read_launch_env(fake_env({{"WORLD_SIZE", "2"}}));
            }),
            "environment variable RANK is not set (WORLD_SIZE=2 is)");
}

}  // namespace
}  // namespace zt::dist
