// trainer.report_to resolved as transformers resolves it, and recorded in args.yaml as what the run
// used (cli/report_to.h): deleting the key (`~trainer.report_to`) left TensorBoard on (the default
// "all") while args.yaml had no report_to at all.
#include <gtest/gtest.h>

#include <fstream>

#include "cli/report_to.h"
#include "cli/run_config.h"
#include "core/error.h"
#include "core/zt_test_util.h"
#include "io/yaml_writer.h"

namespace {

using zt::Json;
using zt::cli::RunConfig;

zt::cli::ReportTo resolve(Json trainer) {
  return zt::cli::resolve_report_to(
      RunConfig::from_json({{"trainer", std::move(trainer)}}, "sft.yaml"));
}

TEST(ReportTo, ResolvedAsTransformersDoes) {
  const Json tb = Json::array({"tensorboard"});
  for (const Json& given :
       {Json(nullptr), Json("all"), Json("tensorboard"), tb, Json::array({"all"})}) {
    const auto r = resolve({{"report_to", given}});
    EXPECT_TRUE(r.tensorboard) << given.dump();
    EXPECT_EQ(r.effective, tb) << given.dump();
    EXPECT_EQ(r.warning, "") << given.dump();
  }
  const auto absent = resolve(Json::object());
  EXPECT_TRUE(absent.tensorboard);
  EXPECT_EQ(absent.effective, tb);
  for (const Json& given : {Json("none"), Json::array({"none"}), Json::array()}) {
    const auto r = resolve({{"report_to", given}});
    EXPECT_FALSE(r.tensorboard) << given.dump();
    EXPECT_EQ(r.effective, Json::array()) << given.dump();
  }
  // An integration zerotune lacks: TensorBoard instead, as the warning has always said (it said
  // so while writing none).
  const auto wandb = resolve({{"report_to", "wandb"}});
  EXPECT_TRUE(wandb.tensorboard);
  EXPECT_EQ(wandb.effective, tb);
  EXPECT_EQ(wandb.warning,
            "sft.yaml: trainer.report_to wandb is not supported; TensorBoard and metrics.jsonl are "
            "written instead");
  const auto both = resolve({{"report_to", Json::array({"tensorboard", "wandb", "mlflow"})}});
  EXPECT_TRUE(both.tensorboard);
  EXPECT_EQ(both.unsupported, (std::vector<std::string>{"wandb", "mlflow"}));
  EXPECT_EQ(both.warning,
            "sft.yaml: trainer.report_to wandb, mlflow is not supported; TensorBoard and "
            "metrics.jsonl are written");
}

// What transformers' Trainer raises on ("<name> is not supported") is refused, naming the value,
// where it was read as an integration zerotune lacks (a warning, and TensorBoard written).
TEST(ReportTo, KeywordsInAListOrAnotherCaseAreRefused) {
  const auto error = [](const Json& given) {
    try {
      resolve({{"report_to", given}});
    } catch (const zt::Error& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_EQ(error(Json("None")),
            "sft.yaml: trainer.report_to: 'None' is not an integration (transformers raises on "
            "it); did you mean 'none'?");
  EXPECT_EQ(error(Json::array({"TensorBoard"})),
            "sft.yaml: trainer.report_to: 'TensorBoard' is not an integration (transformers "
            "raises on it); did you mean 'tensorboard'?");
  EXPECT_EQ(error(Json::array({"none", "tensorboard"})),
            "sft.yaml: trainer.report_to: 'none' stands alone, not in a list with other "
            "integrations (transformers raises on it); got [\"none\",\"tensorboard\"]");
  EXPECT_EQ(error(Json::array({"tensorboard", "all"})).find("'all' stands alone"), 29u);
  EXPECT_EQ(error(Json::array({"wandb"})), "<no error>");  // an integration zerotune lacks: warned
  EXPECT_EQ(error(Json::array({"trackio", "swanlab"})), "<no error>");
  // A name that is no transformers integration (a typo, two names in one string) was warned about
  // as an integration zerotune lacks, and TensorBoard written; transformers raises on it.
  const std::string integrations =
      "its integrations are azure_ml, clearml, codecarbon, comet_ml, dagshub, dvclive, flyte, "
      "mlflow, neptune, swanlab, tensorboard, trackio, wandb";
  EXPECT_EQ(error(Json::array({"tensorboard", "wandbb"})),
            "sft.yaml: trainer.report_to: 'wandbb' is not an integration (transformers raises on "
            "it); " +
                integrations);
  EXPECT_EQ(error(Json("tensorboard,wandb")),
            "sft.yaml: trainer.report_to: 'tensorboard,wandb' is not an integration (transformers "
            "raises on it); several integrations are a list, e.g. [tensorboard, wandb]; " +
                integrations);
  // The empty string was warned about as "trainer.report_to  is not supported"; transformers
  // raises on it.
  for (const Json& given : {Json(""), Json::array({"tensorboard", ""})})
    EXPECT_EQ(error(given),
              "sft.yaml: trainer.report_to: the empty string is not an integration (transformers "
              "raises on it); use none for no integration, or leave the key out for "
              "transformers' default (all)")
        << given.dump();
}

// Only whitespace (`trainer.report_to=' '`) was warned about unquoted ("trainer.report_to   is not
// supported; TensorBoard and metrics.jsonl are written instead") and TensorBoard written;
// transformers raises on it as on any name that is no integration. Refused as "" is, the value
// quoted and the command line named.
TEST(ReportTo, BlankNameIsRefusedQuoted) {
  zt::testing::TempDir d;
  const auto file = d / "sft.yaml";
  std::ofstream(file) << "trainer:\n  report_to: tensorboard\n";
  const auto error = [&](const std::string& override) {
    try {
      zt::cli::resolve_report_to(RunConfig::load(file, {override}));
    } catch (const zt::Error& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_EQ(error("trainer.report_to=' '"),
            file.string() +
                ": trainer.report_to: ' ' (only whitespace) is not an integration (transformers "
                "raises on it); use none for no integration, or leave the key out for "
                "transformers' default (all) (given on the command line)");
  EXPECT_EQ(error("trainer.report_to=[tensorboard,'\t ']"),
            file.string() +
                ": trainer.report_to: '\t ' (only whitespace) is not an integration (transformers "
                "raises on it); use none for no integration, or leave the key out for "
                "transformers' default (all) (given on the command line)");
  EXPECT_EQ(error("trainer.report_to="),
            file.string() +
                ": trainer.report_to: the empty string is not an integration (transformers raises "
                "on it); use none for no integration, or leave the key out for transformers' "
                "default (all) (given on the command line)");
}

// The users' file with their `report_to: ["tensorboard"]` deleted on the command line: the run
// writes TensorBoard events (the default), and the config written to args.yaml says so.
TEST(ReportTo, DeletedKeyIsRecordedAsTheValueTheRunUsed) {
  zt::testing::TempDir d;
  const auto file = d / "sft.yaml";
  std::ofstream(file) << "exp_dir: runs/x\ntrainer:\n  report_to: [\"tensorboard\"]\n";
  for (const char* override : {"~trainer.report_to", "trainer.report_to=null"}) {
    RunConfig cfg = RunConfig::load(file, {override});
    EXPECT_TRUE(cfg.value("trainer.report_to").is_null()) << override;
    const auto r = zt::cli::resolve_report_to(cfg);
    ASSERT_TRUE(r.tensorboard) << override;
    zt::cli::record_report_to(cfg, r, "runs/x/tensorboard");
    const std::string yaml = zt::json_to_yaml(cfg.tree());
    EXPECT_NE(yaml.find("  report_to:\n    - tensorboard\n"), std::string::npos) << yaml;
    EXPECT_NE(yaml.find("  logging_dir: runs/x/tensorboard\n"), std::string::npos) << yaml;
  }
  RunConfig none = RunConfig::load(file, {"trainer.report_to=none"});
  const auto r = zt::cli::resolve_report_to(none);
  EXPECT_FALSE(r.tensorboard);
  zt::cli::record_report_to(none, r, "");
  const std::string yaml = zt::json_to_yaml(none.tree());
  EXPECT_NE(yaml.find("  report_to:\n    []\n"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("logging_dir"), std::string::npos) << yaml;
}

}  // namespace
