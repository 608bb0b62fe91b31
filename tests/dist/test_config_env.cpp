// accelerate config parsing and launch-environment detection.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "core/error.h"
#include "dist/accelerate_config.h"
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

TEST(AccelerateConfig, DeepSpeedZero2WithOffload) {
  // The shape `accelerate config` writes for DeepSpeed.
  const AccelerateConfig c = parse_accelerate_config_text(R"(compute_environment: LOCAL_MACHINE
debug: false
deepspeed_config:
  gradient_accumulation_steps: 4
  gradient_clipping: 1.0
  offload_optimizer_device: cpu
  offload_param_device: none
  zero3_init_flag: false
  zero_stage: 2
distributed_type: DEEPSPEED
downcast_bf16: 'no'
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 4
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
)",
                                                          "ds.yaml");
  EXPECT_EQ(c.distributed_type, "DEEPSPEED");
  EXPECT_EQ(c.num_processes, 4);
  EXPECT_EQ(c.zero_stage, 2);
  EXPECT_EQ(c.offload_optimizer_device, "cpu");
  EXPECT_EQ(c.mixed_precision, "bf16");
  EXPECT_EQ(c.gradient_accumulation_steps, 4);
  EXPECT_EQ(c.gradient_clipping, 1.0);
  EXPECT_TRUE(c.warnings.empty()) << c.warnings.front();
}

TEST(AccelerateConfig, UnknownKeysAreWarnings) {
  const AccelerateConfig c = parse_accelerate_config_text(
      "distributed_type: MULTI_GPU\nnum_processes: 2\nmy_knob: 3\ndeepspeed_config: {}\n",
      "a.yaml");
  EXPECT_EQ(c.zero_stage, 0);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_EQ(c.warnings[0], "a.yaml:3: unknown key 'my_knob' ignored");
  const AccelerateConfig d = parse_accelerate_config_text(
      "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n  zero_magic: 1\n",
      "b.yaml");
  EXPECT_EQ(d.zero_stage, 3);
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_EQ(d.warnings[0], "b.yaml:4: unknown key 'deepspeed_config.zero_magic' ignored");
}

TEST(AccelerateConfig, FsdpStrategiesMapToZeroStages) {
  const std::pair<std::string, int> cases[] = {
      {"FULL_SHARD", 3}, {"SHARD_GRAD_OP", 2}, {"NO_SHARD", 0}, {"1", 3}, {"2", 2}, {"3", 0}};
  for (const auto& [strategy, stage] : cases) {
    const AccelerateConfig c = parse_accelerate_config_text(
        "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: " + strategy +
            "\n  fsdp_offload_params: false\n",
        "f.yaml");
    EXPECT_EQ(c.zero_stage, stage) << strategy;
    EXPECT_EQ(c.offload_optimizer_device, "none");
  }
  const AccelerateConfig v2 = parse_accelerate_config_text(
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: "
      "false\n"
      "  fsdp_offload_params: true\n",
      "f2.yaml");
  EXPECT_EQ(v2.zero_stage, 2);
  EXPECT_EQ(v2.offload_optimizer_device, "cpu");
  ASSERT_EQ(v2.warnings.size(), 1u);
  EXPECT_NE(v2.warnings[0].find("fsdp_offload_params: true is run as optimizer offload"),
            std::string::npos);
}

TEST(AccelerateConfig, DeepSpeedJsonFile) {
  const auto dir = std::filesystem::path(testing::TempDir()) / "zt_ds_json";
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "ds.json") << R"({"zero_optimization": {"stage": 1, "offload_optimizer":
      {"device": "cpu"}}, "bf16": {"enabled": true}, "gradient_accumulation_steps": "auto",
      "gradient_clipping": "auto", "train_micro_batch_size_per_gpu": "auto"})";
    std::ofstream(dir / "acc.yaml") << "distributed_type: DEEPSPEED\nnum_processes: 8\n"
                                       "deepspeed_config:\n  deepspeed_config_file: ds.json\n";
  }
  const AccelerateConfig c = parse_accelerate_config((dir / "acc.yaml").string());
  EXPECT_EQ(c.zero_stage, 1);
  EXPECT_EQ(c.offload_optimizer_device, "cpu");
  EXPECT_EQ(c.mixed_precision, "bf16");
  EXPECT_FALSE(c.gradient_accumulation_steps.has_value());
  EXPECT_EQ(c.num_processes, 8);
  std::filesystem::remove_all(dir);
}

TEST(AccelerateConfig, BadValuesNameFileLineKeyAndValue) {
  EXPECT_EQ(error_of([] { parse_accelerate_config_text("num_processes: four\n", "x.yaml"); }),
            "x.yaml:1: key 'num_processes' has value 'four' (expected an integer in [1, 1048576])");
  EXPECT_EQ(
      error_of([] {
        parse_accelerate_config_text(
            "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 4\n", "x.yaml");
      }),
      "x.yaml:3: key 'deepspeed_config.zero_stage' has value '4' (expected an integer in [0, 3])");
  EXPECT_EQ(
      error_of([] {
        parse_accelerate_config_text(
            "distributed_type: DEEPSPEED\ndeepspeed_config:\n  offload_optimizer_device: nvme\n",
            "x.yaml");
      }),
      "x.yaml:3: key 'deepspeed_config.offload_optimizer_device' has value 'nvme' (expected none "
      "or cpu (zerotune does not offload to nvme))");
  EXPECT_EQ(error_of([] { parse_accelerate_config_text("distributed_type: XLA\n", "x.yaml"); }),
            "x.yaml:1: key 'distributed_type' has value 'XLA' (expected NO, MULTI_CPU, MULTI_GPU, "
            "DEEPSPEED or FSDP)");
  EXPECT_EQ(error_of([] { parse_accelerate_config("/nonexistent/acc.yaml"); }),
            "accelerate config '/nonexistent/acc.yaml' cannot be opened");
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
