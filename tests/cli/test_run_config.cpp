#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/run_config.h"
#include "core/zt_test_util.h"

namespace {
using zt::testing::error_of;
}  // namespace

TEST(RunConfig, DefaultsAreTrlSftConfigs) {
  auto c = zt::cli::RunConfig::from_json({{"model", {{"name_or_path", "m"}}}}, "x.yaml");
  EXPECT_EQ(c.get<double>("trainer.learning_rate"), 2e-5);
  EXPECT_EQ(c.get<std::string>("trainer.lr_scheduler_type"), "linear");
  EXPECT_EQ(c.get<int64_t>("trainer.max_length"), 1024);
  EXPECT_EQ(c.get<int64_t>("trainer.per_device_train_batch_size"), 8);
  EXPECT_EQ(c.get<int64_t>("trainer.seed"), 42);
  EXPECT_EQ(c.get<bool>("trainer.packing"), false);
  EXPECT_EQ(c.get<double>("trainer.max_grad_norm"), 1.0);
  EXPECT_FALSE(c.get_optional<bool>("trainer.completion_only_loss").has_value());
}

TEST(RunConfig, UnknownKeyNamesPathAndFile) {
  EXPECT_EQ(error_of([] { zt::cli::RunConfig::from_json({{"trainer", {{"lerning_rate", 1}}}}, "sft.yaml"); }),
            "sft.yaml: unknown config key 'trainer.lerning_rate' (not a zerotune/TRL SFTConfig key) (did you "
            "mean 'trainer.learning_rate'?)");
  EXPECT_EQ(error_of([] { zt::cli::RunConfig::from_json({{"model", {{"zzz", "x"}}}}, "sft.yaml"); }),
            "sft.yaml: unknown config key 'model.zzz' (not a zerotune/TRL SFTConfig key)");
  // An empty key (`"": 2` in the YAML file) is refused too: at the top level it was dropped.
  EXPECT_EQ(error_of([] {
              zt::cli::RunConfig::from_json({{"", 2}}, "sft.yaml");
            }),
            "sft.yaml: an empty config key at the top level (not a zerotune/TRL SFTConfig key)");
  EXPECT_EQ(error_of([] {
              zt::cli::RunConfig::from_json({{"", {{"trainer", {{"max_steps", 3}}}}}}, "sft.yaml");
            }),
            "sft.yaml: an empty config key at the top level (not a zerotune/TRL SFTConfig key)");
  EXPECT_EQ(error_of([] {
              zt::cli::RunConfig::from_json({{"trainer", {{"", 1}}}}, "sft.yaml");
            }),
            "sft.yaml: an empty config key in 'trainer' (not a zerotune/TRL SFTConfig key)");
}

TEST(RunConfig, NotedKeysGetOneLineAndTopLevelSeedFlowsDown) {
  auto c = zt::cli::RunConfig::from_json({{"use_ms", true}, {"seed", 7}, {"trainer", {{"report_to", "wandb"}}}},
                                         "sft.yaml");
  ASSERT_EQ(c.notes().size(), 1u);
  EXPECT_EQ(c.notes()[0],
            "sft.yaml: use_ms: true changes nothing in zerotune: it switches the users' hub mirror (ModelScope); "
            "zerotune reads local directories and the local HF cache only");
  EXPECT_EQ(c.get<int64_t>("trainer.seed"), 7);
  // At their defaults, noted keys say nothing.
  auto d = zt::cli::RunConfig::from_json({{"trainer", {{"activation_offloading", false}, {"dataloader_num_workers", 0}}}},
                                         "sft.yaml");
  EXPECT_TRUE(d.notes().empty());
}

TEST(RunConfig, MissingAndTypeErrors) {
  auto c = zt::cli::RunConfig::from_json({{"trainer", {{"gradient_accumulation_steps", "???"}}}}, "sft.yaml");
  EXPECT_TRUE(c.is_missing("trainer.gradient_accumulation_steps"));
  EXPECT_EQ(error_of([&] { c.get<int64_t>("trainer.gradient_accumulation_steps"); }),
            "sft.yaml: config key 'trainer.gradient_accumulation_steps' is ??? (mandatory) and was not set");
  EXPECT_EQ(error_of([&] { c.get<std::string>("trainer.max_length"); }),
            "sft.yaml: config key 'trainer.max_length' must be a string, got 1024");
  c.set("trainer.gradient_accumulation_steps", 4);
  EXPECT_EQ(c.get<int64_t>("trainer.gradient_accumulation_steps"), 4);
}

TEST(RunConfig, OverridesOfSchemaKeysNeedNoPlus) {
  auto dir = std::filesystem::temp_directory_path() / "zt_test_run_config";
  std::filesystem::create_directories(dir);
  auto p = dir / "sft.yaml";
  std::ofstream(p) << "trainer:\n  learning_rate: 1.0e-4\n";
  auto c = zt::cli::RunConfig::load(p, {"trainer.max_steps=7"});
  EXPECT_EQ(c.get<int64_t>("trainer.max_steps"), 7);
  EXPECT_EQ(c.get<double>("trainer.learning_rate"), 1e-4);
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {"trainer.max_stepz=7"}); }),
            "override 'trainer.max_stepz=7': key 'trainer.max_stepz' is not in " + p.string() +
                " (use +trainer.max_stepz to add a new key)");
}
