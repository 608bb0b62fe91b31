// A hub dataset snapshot's split files chosen as HF `datasets` chooses them: the dataset card's
// `configs` (README.md front matter, .huggingface.yaml), its default config, data_dir, data_files
// patterns; without configs the file-name rules. Golden: tests/data/io/hub_dataset_layouts.json
// (tools/make_hub_dataset_goldens.py runs `datasets.load_dataset(<snapshot>, split=…)`).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

#include "core/zt_test_util.h"
#include "data/rows.h"
#include "io/data_files_pattern.h"
#include "io/dataset_source.h"
#include "io/json.h"

namespace {

namespace fs = std::filesystem;
using zt::Json;
using zt::testing::error_of;
using zt::testing::expect_error;
using zt::testing::TempDir;

Json read_json(const fs::path& p) {
  std::ifstream f(p);
  return Json::parse(f);
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// A file of `rows` JSON Lines rows; a .parquet name gets placeholder bytes (resolution reads no
// file; its rows are not checked).
void write_data(const fs::path& p, int64_t rows) {
  std::string text;
  for (int64_t i = 0; i < rows; ++i) text += "{\"text\": \"row " + std::to_string(i) + "\"}\n";
  write(p, p.extension() == ".parquet" ? std::string("x") : text);
}

class HubCard : public ::testing::Test {
 protected:
  void SetUp() override { setenv("HF_HUB_CACHE", (dir_ / "hub").string().c_str(), 1); }
  void TearDown() override { unsetenv("HF_HUB_CACHE"); }
  // The snapshot directory of hub dataset org/NAME (refs/main names it).
  fs::path snapshot(const std::string& name) {
    const fs::path root = dir_ / "hub" / ("datasets--org--" + name);
    fs::create_directories(root / "refs");
    std::ofstream(root / "refs" / "main") << "rev";
    fs::create_directories(root / "snapshots" / "rev");
    return root / "snapshots" / "rev";
  }
  TempDir dir_;
};

// What zerotune's message says for each error `datasets` raises on the golden layouts.
std::string expected_part(const std::string& datasets_message, const std::string& split) {
  const std::vector<std::pair<std::string, std::string>> table = {
      {"Unknown split", "no split '" + split + "'"},
      {"Config name is missing", "none is the default"},
      {"Dataset has several default configs", "both make a default config"},
      {"Expected data_files in YAML", "configs[0].data_files"},
      {"Each config must include `config_name`", "configs[0] has no `config_name`"},
      {"Unable to find", "which is not in"},
      {"Invalid pattern: '**'", "'**' can only be a whole path component"},
  };
  for (const auto& [theirs, ours] : table)
    if (datasets_message.starts_with(theirs)) return ours;
  return "<no message known for: " + datasets_message + ">";
}

TEST_F(HubCard, SplitFilesAreThoseDatasetsReads) {
  const Json golden = read_json(fs::path(ZT_TEST_DATA) / "io" / "hub_dataset_layouts.json");
  ASSERT_GE(golden.at("cases").size(), 20u);
  int resolved = 0, refused = 0;
  for (const Json& c : golden.at("cases")) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    const fs::path snap = snapshot(name);
    for (const Json& f : c.at("files"))
      write_data(snap / f.at("path").get<std::string>(), f.at("rows"));
    if (!c.at("readme").is_null()) write(snap / "README.md", c.at("readme"));
    if (!c.at("huggingface_yaml").is_null())
      write(snap / ".huggingface.yaml", c.at("huggingface_yaml"));
    for (const auto& [split, want] : c.at("splits").items()) {
      SCOPED_TRACE(split);
      const std::string id = "org/" + name;
      if (want.contains("error")) {
        expect_error([&] { zt::resolve_hub_dataset_file(id, split); },
                     {"dataset '" + id + "'", expected_part(want.at("message"), split)});
        ++refused;
        continue;
      }
      const auto& files = want.at("files");
      if (files.size() > 1) {  // zerotune reads one file per split: refused, naming them
        expect_error([&] { zt::resolve_hub_dataset_file(id, split); },
                     {fmt::format("split '{}' has {} files", split, files.size()),
                      files[0].get<std::string>()});
        ++refused;
        continue;
      }
      const fs::path got = zt::resolve_hub_dataset_file(id, split);
      EXPECT_EQ(got, snap / files[0].get<std::string>());
      if (got.extension() == ".jsonl") {
        EXPECT_EQ(static_cast<int64_t>(zt::data::read_rows(got).size()), want.at("rows"));
      }
      ++resolved;
    }
  }
  EXPECT_GE(resolved, 25);  // both kinds of outcome are exercised
  EXPECT_GE(refused, 30);
}

// The tester's case: configs' data_files name mydata/sft.parquet, the sharded name
// data/train-00000-of-00001.parquet is not read.
TEST_F(HubCard, ConfigsDataFilesWinOverFileNames) {
  const fs::path s = snapshot("ds3");
  write_data(s / "data" / "train-00000-of-00001.parquet", 1);
  write_data(s / "mydata" / "sft.parquet", 1);
  write(s / "README.md",
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: "
        "mydata/sft.parquet\n---\n");
  EXPECT_EQ(zt::resolve_hub_dataset_file("org/ds3", "train"), s / "mydata" / "sft.parquet");
  expect_error(
      [] { zt::resolve_hub_dataset_file("org/ds3", "test", "; dataset.eval.split is not set"); },
      {"no split 'test' in " + s.string() + ", config 'default' of " + (s / "README.md").string() +
           ":3",
       "(its splits: 'train'", "; dataset.eval.split is not set"});
}

// Malformed front matter: the file, its line and the key.
TEST_F(HubCard, MalformedCardsNameFileLineAndKey) {
  const fs::path s = snapshot("bad");
  write_data(s / "a.jsonl", 2);
  const fs::path readme = s / "README.md";
  const auto with = [&](const std::string& yaml) { write(readme, "---\n" + yaml + "---\ntext\n"); };
  with("configs:\n- config_name: default\n  data_files:\n    train: a.jsonl\n");
  expect_error([] { zt::resolve_hub_dataset_file("org/bad", "train"); },
               {readme.string() + ":5: configs[0].data_files is a mapping",
                "a list of {split: NAME, path:"});
  with("configs:\n- config_name: default\n  data_files:\n  - split: my-train\n    path: a.jsonl\n");
  expect_error(
      [] { zt::resolve_hub_dataset_file("org/bad", "train"); },
      {readme.string() + ":5: configs[0].data_files: split 'my-train' is not a valid split name"});
  with(
      "configs:\n- config_name: default\n  data_files:\n  - split: train\n    path: a.jsonl\n  - "
      "split: train\n"
      "    path: a.jsonl\n");
  expect_error([] { zt::resolve_hub_dataset_file("org/bad", "train"); },
               {readme.string() + ":7: configs[0].data_files: split 'train' is given twice"});
  with("configs:\n- config_name: default\n  data_files:\n  - a.jsonl\n  - 12\n");
  expect_error([] { zt::resolve_hub_dataset_file("org/bad", "train"); },
               {readme.string() + ":6: configs[0].data_files holds '12', no string"});
  with("configs:\n  config_name: default\n");
  expect_error([] { zt::resolve_hub_dataset_file("org/bad", "train"); },
               {readme.string() + ":3: configs is a mapping; expected a list of configs"});
  with(
      "configs:\n- config_name: a\n  data_files: a.jsonl\n- config_name: a\n  data_files: "
      "a.jsonl\n");
  expect_error([] { zt::resolve_hub_dataset_file("org/bad", "train"); },
               {readme.string() + ":5: config_name 'a' is given twice (first at " +
                readme.string() + ":3)"});
  with("configs:\n- config_name: default\n  data_dir: ../other\n");
  expect_error(
      [] { zt::resolve_hub_dataset_file("org/bad", "train"); },
      {readme.string() +
       ":4: configs[0].data_dir '../other': expected a directory of the dataset repository"});
  with("configs:\n- config_name: default\n  data_files: a.jsonl\n  columns: [text]\n");
  expect_error([] { zt::resolve_hub_dataset_file("org/bad", "train"); },
               {"config 'default' of " + readme.string() +
                ":3 sets 'columns', which zerotune does not apply"});
  with("configs:\n- config_name: default\n  data_files: [a.jsonl\n");
  expect_error([] { zt::resolve_hub_dataset_file("org/bad", "train"); },
               {readme.string() + ":", "YAML syntax error in the dataset card's metadata"});
  with("configs:\n- config_name: default\n  data_files: a.jsonl\n  data_files: b.jsonl\n");
  expect_error([] { zt::resolve_hub_dataset_file("org/bad", "train"); },
               {readme.string() + ":5: duplicate key"});
  with("- a\n- b\n");
  expect_error([] { zt::resolve_hub_dataset_file("org/bad", "train"); },
               {readme.string() + ":2: the dataset card's metadata is no mapping"});
  // Metadata zerotune does not read is read as huggingface_hub reads it (yaml.safe_load): a
  // repeated key or a U+2028 there is no error. `configs` itself must be given once.
  with(
      "license: mit\nlicense: apache-2.0\npretty_name: \"a\u2028b\"\nconfigs:\n- config_name: "
      "default\n  data_files: a.jsonl\n");
  EXPECT_EQ(zt::resolve_hub_dataset_file("org/bad", "train"), s / "a.jsonl");
  with("configs:\n- config_name: default\n  data_files: a.jsonl\nconfigs: []\n");
  expect_error([] { zt::resolve_hub_dataset_file("org/bad", "train"); },
               {readme.string() + ":5: key 'configs' given twice"});
  // A front matter without `configs` (or with an empty one) leaves the file-name rules.
  with("license: mit\nconfigs: []\n");
  EXPECT_EQ(zt::resolve_hub_dataset_file("org/bad", "train"), s / "a.jsonl");
}

// Formats zerotune does not read are named as such, not skipped in favour of another file.
TEST_F(HubCard, FilesOfOtherFormatsAreNamed) {
  const fs::path s = snapshot("gz");
  write(s / "data" / "train.jsonl.gz", "x");
  write(s / "README.md", "---\nconfigs:\n- config_name: default\n  data_files: data/*\n---\n");
  expect_error([] { zt::resolve_hub_dataset_file("org/gz", "train"); },
               {"split 'train' (config 'default' of " + (s / "README.md").string() +
                ":3) is data/train.jsonl.gz, "
                "which zerotune does not read"});
}

}  // namespace
