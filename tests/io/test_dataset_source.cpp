// A hub dataset id resolved from the local HF hub cache (parquet files of a snapshot), or a clear
// error naming the id and where zerotune looked; the snapshot refs/main names, for models too.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

#include "core/zt_test_util.h"
#include "io/dataset_source.h"
#include "io/model_source.h"

namespace {

namespace fs = std::filesystem;
using zt::testing::expect_error;
using zt::testing::TempDir;

void touch(const fs::path& p) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << "x";
}

class HubDataset : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("HF_HUB_CACHE", (dir_ / "hub").string().c_str(), 1);
    setenv("HF_DATASETS_CACHE", (dir_ / "datasets").string().c_str(), 1);
  }
  void TearDown() override {
    unsetenv("HF_HUB_CACHE");
    unsetenv("HF_DATASETS_CACHE");
  }
  fs::path snapshot(const std::string& repo, const std::string& rev) {
    fs::path root = dir_ / "hub" / repo;
    fs::create_directories(root / "refs");
    std::ofstream(root / "refs" / "main") << rev;
    return root / "snapshots" / rev;
  }
  TempDir dir_;
};

TEST_F(HubDataset, ParquetShardsByFileName) {
  fs::path s = snapshot("datasets--trl-lib--ultrafeedback_binarized", "0123abc");
  touch(s / "data" / "train-00000-of-00001.parquet");
  touch(s / "data" / "test-00000-of-00001.parquet");
  touch(s / "README.md");
  EXPECT_EQ(zt::resolve_hub_dataset_file("trl-lib/ultrafeedback_binarized", "train"),
            s / "data" / "train-00000-of-00001.parquet");
  EXPECT_EQ(zt::resolve_hub_dataset_file("trl-lib/ultrafeedback_binarized", "test"),
            s / "data" / "test-00000-of-00001.parquet");
  expect_error(
      [] { zt::resolve_hub_dataset_file("trl-lib/ultrafeedback_binarized", "validation"); },
      {"dataset 'trl-lib/ultrafeedback_binarized': no split 'validation' in " + s.string() +
           ", by file name (README.md has no `configs`) (its splits: 'train', 'test'; files there: "
           "data/test-00000-of-00001.parquet, data/train-00000-of-00001.parquet)",
       "data/test-00000-of-00001.parquet, data/train-00000-of-00001.parquet"});
}

TEST_F(HubDataset, SplitDirectoriesKeywordsAndSingleFile) {
  fs::path s = snapshot("datasets--org--dirs", "r1");
  touch(s / "default" / "train" / "0000.parquet");
  touch(s / "default" / "validation" / "0000.parquet");
  EXPECT_EQ(zt::resolve_hub_dataset_file("org/dirs", "train"), s / "default" / "train" / "0000.parquet");
  fs::path k = snapshot("datasets--org--kw", "r2");
  touch(k / "sft_dev.jsonl");
  touch(k / "sft_training.jsonl");
  EXPECT_EQ(zt::resolve_hub_dataset_file("org/kw", "validation"), k / "sft_dev.jsonl");
  EXPECT_EQ(zt::resolve_hub_dataset_file("org/kw", "train"), k / "sft_training.jsonl");
  fs::path one = snapshot("datasets--org--one", "r3");
  touch(one / "all.parquet");
  EXPECT_EQ(zt::resolve_hub_dataset_file("org/one", "train"), one / "all.parquet");  // no split name: "train"
}

TEST_F(HubDataset, ShardsAndMissingAreClearErrors) {
  fs::path s = snapshot("datasets--org--big", "r");
  touch(s / "data" / "train-00000-of-00002.parquet");
  touch(s / "data" / "train-00001-of-00002.parquet");
  expect_error([] { zt::resolve_hub_dataset_file("org/big", "train"); },
               {"dataset 'org/big': split 'train' has 2 files", "zerotune reads one file per split"});
  // One shard of two in the cache (a partial download) was read alone: half the split, silently.
  fs::remove(s / "data" / "train-00001-of-00002.parquet");
  expect_error(
      [] { zt::resolve_hub_dataset_file("org/big", "train"); },
      {"dataset 'org/big': split 'train' has only data/train-00000-of-00002.parquet in " +
           s.string() + ", one of 2 shards (the name says so); the others are not in the cache",
       "`hf download org/big --repo-type dataset`"});
  fs::create_directories(dir_ / "datasets" / "org___arrow_only");
  expect_error([&] { zt::resolve_hub_dataset_file("org/arrow_only", "train"); },
               {"dataset 'org/arrow_only' is not in the Hugging Face hub cache (looked in " +
                    (dir_ / "hub" / "datasets--org--arrow_only").string() + ")",
                "datasets' Arrow cache " + (dir_ / "datasets" / "org___arrow_only").string() + " has it",
                "`hf download org/arrow_only --repo-type dataset`"});
  expect_error([] { zt::resolve_hub_dataset_file("not-an-id", "train"); }, {"dataset 'not-an-id': not a hub dataset id"});
}

// refs/main names the revision: a snapshot it names that is missing is an error naming the file
// and the snapshot, never another snapshot of the cache (another revision) loaded silently.
TEST_F(HubDataset, RefsMainNamingAMissingSnapshotIsAnError) {
  const fs::path model = dir_ / "hub" / "models--Org--M";
  touch(model / "snapshots" / "old1" / "config.json");
  fs::create_directories(model / "refs");
  std::ofstream(model / "refs" / "main") << "new2";
  expect_error(
      [] { zt::resolve_model_source("Org/M"); },
      {"model 'Org/M': " + (model / "refs" / "main").string() + " names snapshot 'new2', but " +
           (model / "snapshots" / "new2").string() + " does not exist",
       "does not load another snapshot", "(`hf download Org/M`)"});
  fs::path s = snapshot("datasets--org--moved", "new2");
  touch(dir_ / "hub" / "datasets--org--moved" / "snapshots" / "old1" / "train.parquet");
  expect_error([] { zt::resolve_hub_dataset_file("org/moved", "train"); },
               {"dataset 'org/moved': " +
                    (dir_ / "hub" / "datasets--org--moved" / "refs" / "main").string() +
                    " names snapshot 'new2', but " + s.string() + " does not exist",
                "(`hf download org/moved --repo-type dataset`)"});
  // An empty refs/main names nothing: an error too.
  std::ofstream(model / "refs" / "main").flush();
  expect_error([] { zt::resolve_model_source("Org/M"); },
               {(model / "refs" / "main").string() + " is empty or unreadable"});
  // The snapshot named (a trailing newline tolerated) is the one loaded.
  std::ofstream(model / "refs" / "main") << "old1\n";
  EXPECT_EQ(zt::resolve_model_source("Org/M").dir, model / "snapshots" / "old1");
  // No refs/main: the only snapshot (documented in model_source.h); several are refused.
  fs::remove(model / "refs" / "main");
  EXPECT_EQ(zt::resolve_model_source("Org/M").dir, model / "snapshots" / "old1");
  touch(model / "snapshots" / "new2" / "config.json");
  expect_error([] { zt::resolve_model_source("Org/M"); },
               {"model 'Org/M': several snapshots in " + (model / "snapshots").string() +
                " and no refs/main"});
}

// A directory holding weights zerotune does not read is never taken as config-only (trained from
// scratch): weights_problem names the files; config.json alone, or a transformers_weights name, is
// no problem. A hub snapshot with an unfinished blob download is named as such.
TEST_F(HubDataset, WeightsZerotuneDoesNotReadAreAProblemNotAFromScratchModel) {
  const fs::path d = dir_ / "m";
  touch(d / "config.json");
  zt::ModelSource m = zt::resolve_model_source(d.string());
  EXPECT_FALSE(m.has_weights);
  EXPECT_EQ(m.weights_problem, "");
  touch(d / "pytorch_model.bin");
  m = zt::resolve_model_source(d.string());
  EXPECT_FALSE(m.has_weights);
  EXPECT_NE(
      m.weights_problem.find(d.string() + " holds pytorch_model.bin but neither model.safetensors"),
      std::string::npos)
      << m.weights_problem;
  EXPECT_NE(m.weights_problem.find("zerotune reads model.safetensors or the shards"),
            std::string::npos)
      << m.weights_problem;
  fs::remove(d / "pytorch_model.bin");
  touch(d / "model-00001-of-00002.safetensors");
  touch(d / "model-00002-of-00002.safetensors");
  m = zt::resolve_model_source(d.string());
  EXPECT_NE(m.weights_problem.find(
                "holds model-00001-of-00002.safetensors, model-00002-of-00002.safetensors but"),
            std::string::npos)
      << m.weights_problem;
  EXPECT_NE(m.weights_problem.find("through model.safetensors.index.json, which lists them"),
            std::string::npos)
      << m.weights_problem;
  // config.json naming its weights file: weights (resolve_weights_file checks the name).
  std::ofstream(d / "config.json")
      << R"({"transformers_weights": "model-00001-of-00002.safetensors"})";
  m = zt::resolve_model_source(d.string());
  EXPECT_TRUE(m.has_weights);
  EXPECT_EQ(m.weights_problem, "");
  // The hub cache: a snapshot with config.json only and a blob still downloading.
  const fs::path repo = dir_ / "hub" / "models--Org--W";
  touch(snapshot("models--Org--W", "abc") / "config.json");
  m = zt::resolve_model_source("Org/W");
  EXPECT_EQ(m.weights_problem, "");
  touch(repo / "blobs" / "0123.incomplete");
  m = zt::resolve_model_source("Org/W");
  EXPECT_NE(m.weights_problem.find("a download into it did not finish (" +
                                   (repo / "blobs" / "0123.incomplete").string()),
            std::string::npos)
      << m.weights_problem;
  EXPECT_NE(m.weights_problem.find("`hf download Org/W`"), std::string::npos) << m.weights_problem;
  // A model.safetensors link whose target is gone is named as such.
  const fs::path l = dir_ / "linked";
  touch(l / "config.json");
  fs::create_symlink(dir_ / "gone.safetensors", l / "model.safetensors");
  m = zt::resolve_model_source(l.string());
  EXPECT_FALSE(m.has_weights);
  EXPECT_EQ(m.weights_problem,
            (l / "model.safetensors").string() + " is a link to " +
                (dir_ / "gone.safetensors").string() +
                ", which does not exist (a pruned cache or a copy that kept links?)");
}

}  // namespace
