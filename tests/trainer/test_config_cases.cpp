// The configuration cases of ../shared/cases (README there: expected vs observed), each run as its
// run.sh does, on a copy of the case's own inputs (the shared folder is read-only):
//   negative-learning-rate-checked-late  exit non-zero at start-up naming sft.yaml, key and value;
//                                        nothing written
//   yaml-duplicate-key-accepted          an error naming file, line and key
//   accelerate-config-unknown-key-warns  an error before any process starts, naming file, line, key
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "train_cli_util.h"

namespace fs = std::filesystem;

namespace {

using zt_test::run;
using zt_test::RunResult;

class ConfigCase : public ::testing::Test {
 protected:
  // A writable copy of case `name`; the command runs there (as run.sh's `cd "$(dirname "$0")"`).
  fs::path copy_case(const std::string& name) { return dir_ = zt_test::copy_case(name, "zt_case_"); }
  RunResult zerotune(const std::string& args) {
    const std::string tok = (fs::path(ZT_SHARED_DATA) / "tokenizers" / "qwen2.5-instruct").string();
    return run("cd " + dir_.string() + " && ZEROTUNE_CACHE_DIR=" + (dir_ / "zt_cache").string() + " " + ZT_BINARY +
               " " + args + " model.tokenizer_name_or_path=" + tok);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ConfigCase, NegativeLearningRateIsRefusedAtStartUpAndNothingIsWritten) {
  copy_case("negative-learning-rate-checked-late");
  for (const char* extra : {"", " trainer.warmup_steps=0"}) {
    const RunResult r = zerotune(std::string("train --config sft.yaml trainer.max_steps=6") + extra);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("zerotune: error: sft.yaml: trainer.learning_rate: -0.001 is not valid (expected a "
                            "number >= 0)"),
              std::string::npos)
        << r.output;
    EXPECT_FALSE(fs::exists(dir_ / "runs")) << "the run wrote outputs or its token cache";
    EXPECT_FALSE(fs::exists(dir_ / "zt_cache"));
  }
}

TEST_F(ConfigCase, YamlDuplicateKeyNamesFileLineAndKey) {
  copy_case("yaml-duplicate-key-accepted");
  const RunResult r = zerotune("train --config sft.yaml trainer.max_steps=1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("zerotune: error: sft.yaml:17: duplicate key 'trainer.learning_rate' (first given at "
                          "line 16)"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "runs" / "dupkey" / "args.yaml"));
}

TEST_F(ConfigCase, AccelerateUnknownKeyIsAnErrorBeforeAnyProcessStarts) {
  copy_case("accelerate-config-unknown-key-warns");
  const RunResult r = zerotune("launch --config_file accelerate_zero3.yaml train --config sft.yaml trainer.max_steps=1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("zerotune: error: accelerate_zero3.yaml:8: unknown key 'num_procesess': not an accelerate "
                          "config key (did you mean 'num_processes'?)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("starting"), std::string::npos) << r.output;  // no process was started
  EXPECT_EQ(r.output.find("rank 0 of"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "runs"));
}

}  // namespace
