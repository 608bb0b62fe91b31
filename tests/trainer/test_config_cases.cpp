// The configuration cases of ../shared/cases (README there: expected vs observed), each run as its
// run.sh does, on a copy of the case's own inputs (the shared folder is read-only):
//   negative-learning-rate-checked-late  exit non-zero at start-up naming sft.yaml, key and value;
//                                        nothing written
//   yaml-duplicate-key-accepted          an error naming file, line and key
//   accelerate-config-unknown-key-warns  an error before any process starts, naming file, line, key
//   yaml-second-document-ignored         an error naming the file and the line of the '---'
//   yaml-merge-key-refused               the merge key resolved as OmegaConf does; the job runs
//   yaml-alias-bomb-hangs                an error naming the file and line at once
//   deep-json-row-segfault               100,000 and 200,000 levels: an error naming file, line,
//   row parquet-duplicate-column-silent      an error naming the file and the column
//   unwritable-exp-dir-internal-error    a user error naming key, path and reason, exit 1, nothing
//                                        written (also output_dir, logging_dir, dataset.cache_dir)
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
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
  bool has(const RunResult& r, const std::string& text) {
    return r.output.find(text) != std::string::npos;
  }
  fs::path dir_;
};

TEST_F(ConfigCase, NegativeLearningRateIsRefusedAtStartUpAndNothingIsWritten) {
  copy_case("negative-learning-rate-checked-late");
  for (const char* extra : {"", " trainer.warmup_steps=0"}) {
    const RunResult r = zerotune(std::string("train --config sft.yaml trainer.max_steps=6") + extra);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(
        r.output.find(
            "zerotune: error: sft.yaml:16: trainer.learning_rate: -0.001 is not valid (expected a "
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

TEST_F(ConfigCase, YamlSecondDocumentIsAnErrorNamingItsLine) {
  copy_case("yaml-second-document-ignored");
  const RunResult r = zerotune("train --config sft.yaml");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(has(r,
                  "zerotune: error: sft.yaml:21: a second YAML document starts here; zerotune "
                  "reads one document "
                  "per file"))
      << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "runs")) << r.output;
}

TEST_F(ConfigCase, YamlMergeKeyIsResolvedAndTheJobRuns) {
  copy_case("yaml-merge-key-refused");
  const RunResult r = zerotune("train --config sft.yaml");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r, "eval_loss")) << r.output;
  // args.yaml records the merged split as OmegaConf would resolve it.
  const std::string args = zt_test::slurp(dir_ / "runs" / "merge" / "args.yaml");
  EXPECT_NE(args.find("  eval:\n    path: data.jsonl\n"), std::string::npos) << args;
}

TEST_F(ConfigCase, YamlAliasBombIsAnErrorNamingFileAndLine) {
  copy_case("yaml-alias-bomb-hangs");
  // make_yaml.py 10: the job + z_a0 … z_a9, each a list of 9 aliases of the one before.
  const std::string base = zt_test::slurp(dir_ / "sft.yaml");
  std::string bomb = "z_a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    bomb += "z_a" + std::to_string(i) + ": &a" + std::to_string(i) + " [*a" + std::to_string(i - 1);
    for (int k = 1; k < 9; ++k) bomb += ", *a" + std::to_string(i - 1);
    bomb += "]\n";
  }
  std::ofstream(dir_ / "sft_10.yaml") << base << bomb;
  const int line = static_cast<int>(std::count(base.begin(), base.end(), '\n')) + 5;  // z_a4
  const RunResult r = zerotune("train --config sft_10.yaml");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(has(r, "zerotune: error: sft_10.yaml:" + std::to_string(line) +
                         ": YAML aliases expand to more than 10000 nodes"))
      << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "runs"));
}

TEST_F(ConfigCase, DeepJsonRowIsAnErrorNamingFileLineAndRow) {
  copy_case("deep-json-row-segfault");
  std::ifstream in(dir_ / "data.jsonl");
  std::vector<std::string> rows;
  for (std::string l; std::getline(in, l);) rows.push_back(l);
  ASSERT_EQ(rows.size(), 4u);
  for (size_t depth : {100000u, 200000u}) {
    std::ofstream(dir_ / "deep.jsonl") << rows[0] << "\n"
                                       << rows[1] << "\n"
                                       << rows[2] << "\n{\"prompt\": " << std::string(depth, '[')
                                       << std::string(depth, ']') << ", \"completion\": \" x\"}\n"
                                       << rows[3] << "\n";
    for (const char* cmd : {"prepare", "train"}) {
      const RunResult r = zerotune(std::string(cmd) + " --config sft.yaml");
      EXPECT_EQ(r.status, 1) << depth << " " << cmd << "\n" << r.output;
      EXPECT_TRUE(has(r, "zerotune: error: deep.jsonl:4: row 3: JSON nesting depth exceeds 1000"))
          << r.output;
    }
  }
}

TEST_F(ConfigCase, ParquetDuplicateColumnIsAnErrorNamingFileAndColumn) {
  copy_case("parquet-duplicate-column-silent");
  const RunResult r = zerotune("prepare --config sft.yaml --json");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(has(r, "zerotune: error: data.parquet: column 'prompt' occurs 2 times")) << r.output;
  EXPECT_FALSE(has(r, "cache_file")) << r.output;
}

TEST_F(ConfigCase, UnwritableOutputDirectoriesAreUserErrorsBeforeAnythingIsWritten) {
  copy_case("unwritable-exp-dir-internal-error");
  fs::create_directories(dir_ / "runs");
  std::ofstream(dir_ / "runs" / "afile") << "";
  const std::string prefix = "zerotune: error: sft.yaml: ";
  const struct {
    std::string override_, message;
  } cases[] = {
      {"exp_dir=runs/afile",
       "exp_dir: cannot create runs/afile: Not a directory (runs/afile is a file)"},
      {"exp_dir=runs/afile/x/y",
       "exp_dir: cannot create runs/afile/x/y: Not a directory (runs/afile is a file)"},
      {"trainer.output_dir=runs/afile/final",
       "trainer.output_dir: cannot create runs/afile/final: Not a directory (runs/afile is a "
       "file)"},
      {"trainer.logging_dir=runs/afile/tb trainer.report_to=tensorboard",
       "trainer.logging_dir: cannot create runs/afile/tb: Not a directory (runs/afile is a file)"},
      {"dataset.cache_dir=runs/afile/cache",
       "dataset.cache_dir: cannot create runs/afile/cache: Not a directory (runs/afile is a file)"},
      // Empty (an `${oc.env:OUT}` set to nothing): it was taken for ".", and the run trained and
      // then failed to export its model.
      {"trainer.output_dir=", "trainer.output_dir is empty (expected a directory)"},
      // A name longer than NAME_MAX: it passed, trained every step, and failed at the export
      // (output_dir), or failed naming runs/<name>/metrics.jsonl but not the key (exp_dir).
      {"trainer.output_dir=runs/" + std::string(300, 'o'),
       "trainer.output_dir: cannot create runs/" + std::string(300, 'o') + ": File name too long"},
      {"exp_dir=runs/" + std::string(300, 'o'),
       "exp_dir: cannot create runs/" + std::string(300, 'o') + ": File name too long"},
  };
  for (const auto& c : cases) {
    const RunResult r = zerotune("train --config sft.yaml " + c.override_);
    EXPECT_EQ(r.status, 1) << c.override_ << "\n" << r.output;
    EXPECT_TRUE(has(r, prefix + c.message)) << r.output;
    EXPECT_FALSE(has(r, "internal error")) << r.output;
    EXPECT_FALSE(has(r, "rank 0 of")) << r.output;  // nothing started
    EXPECT_FALSE(fs::exists(dir_ / "cache")) << c.override_;
    EXPECT_FALSE(fs::exists(dir_ / "runs" / "ro")) << c.override_;
  }
  const RunResult p = zerotune("prepare --config sft.yaml dataset.cache_dir=runs/afile/cache");
  EXPECT_EQ(p.status, 1) << p.output;
  EXPECT_TRUE(has(p, prefix + "dataset.cache_dir: cannot create runs/afile/cache: Not a directory"))
      << p.output;
  // A read-only file system (needs root to mount; skipped otherwise).
  if (::geteuid() != 0) GTEST_SKIP() << "the read-only mount needs root";
  fs::create_directories(dir_ / "runs" / "rofs");
  if (::mount("tmpfs", (dir_ / "runs" / "rofs").c_str(), "tmpfs", MS_RDONLY, "size=1m") != 0)
    GTEST_SKIP() << "cannot mount a read-only tmpfs here";
  const RunResult ro = zerotune("train --config sft.yaml exp_dir=runs/rofs/run");
  const RunResult ro_self = zerotune("train --config sft.yaml exp_dir=runs/rofs");
  ::umount((dir_ / "runs" / "rofs").c_str());
  EXPECT_EQ(ro.status, 1) << ro.output;
  EXPECT_TRUE(has(
      ro, prefix + "exp_dir: cannot create runs/rofs/run: Read-only file system (in runs/rofs)"))
      << ro.output;
  EXPECT_EQ(ro_self.status, 1) << ro_self.output;
  EXPECT_TRUE(has(ro_self, prefix + "exp_dir: cannot write in runs/rofs: Read-only file system"))
      << ro_self.output;
  EXPECT_FALSE(fs::exists(dir_ / "cache"));
}

}  // namespace

// Hydra's way of naming the config (the users' `python sft.py --config-path configs --config-name
// sft`): --config-path / -cp and --config-name / -cn, also as --opt=value, name with or without
// .yaml; the usage errors when the options contradict or are missing.
TEST_F(ConfigCase, HydraConfigPathAndNameNameTheConfigFile) {
  copy_case("yaml-merge-key-refused");
  fs::create_directories(dir_ / "configs");
  fs::rename(dir_ / "sft.yaml", dir_ / "configs" / "sft.yaml");
  for (const char* form : {"--config-path configs --config-name sft", "-cp configs -cn sft.yaml",
                           "--config-path=configs --config-name=sft", "-cn configs/sft"}) {
    const RunResult r = zerotune(std::string("prepare --json ") + form);
    EXPECT_EQ(r.status, 0) << form << "\n" << r.output;
    EXPECT_TRUE(has(r, "\"split\":\"train\"")) << form << "\n" << r.output;
  }
  const struct {
    std::string args, message;
  } bad[] = {
      {"prepare", "zerotune: error: prepare: --config is required (or Hydra's --config-name)"},
      {"train -cp configs",
       "zerotune: error: train: --config-path needs --config-name (the config's name)"},
      {"prepare --config configs/sft.yaml -cn sft",
       "zerotune: error: prepare: give --config FILE or --config-name NAME (Hydra's form), not "
       "both"},
      {"train --config configs/sft.yaml -cp configs",
       "zerotune: error: train: --config-path goes with --config-name, not with --config"},
  };
  for (const auto& b : bad) {
    const RunResult r = zerotune(b.args);
    EXPECT_EQ(r.status, 2) << b.args << "\n" << r.output;
    EXPECT_TRUE(has(r, b.message)) << b.args << "\n" << r.output;
  }
  const RunResult missing = zerotune("prepare -cp configs -cn nope");
  EXPECT_EQ(missing.status, 1) << missing.output;
  EXPECT_TRUE(has(missing, "config file configs/nope.yaml does not exist")) << missing.output;
}

// A dataset file that is not there is named by its key (the reader's "cannot open" named only the
// file); a model directory without a tokenizer is named by the key the user wrote (model_name in
// the users' layout, not the model.name_or_path it sets).
TEST_F(ConfigCase, MissingDatasetAndTokenizerAreNamedByTheirKeys) {
  copy_case("yaml-merge-key-refused");
  const RunResult d = zerotune("prepare --config sft.yaml dataset.train.path=nope.jsonl");
  EXPECT_EQ(d.status, 1) << d.output;
  EXPECT_TRUE(has(d,
                  "zerotune: error: sft.yaml: dataset.train.path: nope.jsonl does not exist (a "
                  "relative path is from the current directory, "))
      << d.output;
  EXPECT_TRUE(has(d, "(given on the command line)")) << d.output;
  const RunResult t =
      run("cd " + dir_.string() + " && " + ZT_BINARY +
          " prepare --config sft.yaml model_name=model model.tokenizer_name_or_path=null");
  EXPECT_EQ(t.status, 1) << t.output;
  EXPECT_TRUE(has(t,
                  "zerotune: error: sft.yaml: model_name = 'model' resolves to model, which has no "
                  "tokenizer.json (set model.tokenizer_name_or_path to a directory or hub id"))
      << t.output;
}
