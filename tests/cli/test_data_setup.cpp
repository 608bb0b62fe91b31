// From config keys to data::DataOptions (cli/data_setup): the keys of SFT_SEMANTICS §2 that
// issue 7 adds — dataset.completion_mask (and dataset.assistant_mask), trainer.truncation_mode,
// trainer.chat_template_kwargs, trainer.chat_template_path — and the errors that name them.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

#include "cli/data_setup.h"
#include "data_layer/test_util.h"

namespace {

using zt::Json;
using zt::cli::data_options;
using zt::cli::RunConfig;
using zt::testing::error_of;
namespace data = zt::data;

RunConfig config(Json trainer, Json dataset = Json::object()) {
  dataset["train"] = {{"path", "train.jsonl"}};
  return RunConfig::from_json({{"dataset", dataset}, {"trainer", trainer}}, "sft.yaml");
}

TEST(DataSetup, DefaultsAreCurrentTrl) {
  const data::DataOptions o = data_options(config(Json::object()), "train");
  EXPECT_EQ(o.completion_mask, data::CompletionMask::kPrefix);
  EXPECT_EQ(o.assistant_mask, data::AssistantMask::kOverlap);
  EXPECT_EQ(o.prefix_mismatch, data::PrefixMismatch::kWarn);
  EXPECT_EQ(o.truncation_mode, data::TruncationMode::kKeepStart);
  EXPECT_EQ(o.chat_template_kwargs, Json::object());
  EXPECT_TRUE(o.chat_template_path.empty());
}

TEST(DataSetup, NewKeysReachTheDataOptions) {
  const data::DataOptions o =
      data_options(config({{"truncation_mode", "keep_end"},
                           {"chat_template_kwargs", {{"enable_thinking", false}}},
                           {"chat_template_path", "templates/chat.jinja"},
                           {"prefix_mismatch", "error"}},
                          {{"completion_mask", "positional"}, {"assistant_mask", "char_to_token"}}),
                   "train");
  EXPECT_EQ(o.completion_mask, data::CompletionMask::kPositional);
  EXPECT_EQ(o.assistant_mask, data::AssistantMask::kCharToToken);
  EXPECT_EQ(o.prefix_mismatch, data::PrefixMismatch::kError);
  EXPECT_EQ(o.truncation_mode, data::TruncationMode::kKeepEnd);
  EXPECT_EQ(o.chat_template_kwargs.dump(), R"({"enable_thinking":false})");
  EXPECT_EQ(o.chat_template_path, "templates/chat.jinja");
}

TEST(DataSetup, BadValuesNameTheKey) {
  EXPECT_EQ(error_of([] {
              data_options(config({}, {{"completion_mask", "common"}}), "train");
            }),
            "sft.yaml: dataset.completion_mask: 'common' is not valid (expected one of: prefix, "
            "positional)");
  EXPECT_EQ(error_of([] {
              data_options(config({}, {{"assistant_mask", "first_token"}}), "train");
            }),
            "sft.yaml: dataset.assistant_mask: 'first_token' is not valid (expected one of: "
            "overlap, char_to_token)");
  EXPECT_EQ(error_of([] {
              data_options(config({{"truncation_mode", "keep_middle"}}), "train");
            }),
            "sft.yaml: trainer.truncation_mode: 'keep_middle' is not valid (expected one of: "
            "keep_start, keep_end)");
  EXPECT_EQ(error_of([] {
              data_options(config({{"chat_template_kwargs", "enable_thinking"}}), "train");
            }),
            "sft.yaml: trainer.chat_template_kwargs must be a mapping of template variables (e.g. "
            "{enable_thinking: false}), got \"enable_thinking\"");
}

// trainer.dataset_kwargs as TRL 0.25.1 reads it: only skip_prepare_dataset. Older TRL's keys were
// refused ("not supported"), so a YAML TRL runs did not; now one warning names them.
TEST(DataSetup, DatasetKwargsAsTrlReadsThem) {
  std::vector<std::string> warnings;
  const auto warn = [&](const std::string& m) { warnings.push_back(m); };
  zt::cli::check_dataset_kwargs(config(Json::object()), warn);
  zt::cli::check_dataset_kwargs(config({{"dataset_kwargs", {{"skip_prepare_dataset", false}}}}),
                                warn);
  EXPECT_TRUE(warnings.empty());
  zt::cli::check_dataset_kwargs(
      config({{"dataset_kwargs", {{"add_special_tokens", false}, {"append_concat_token", false}}}}),
      warn);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0],
            "sft.yaml: trainer.dataset_kwargs: add_special_tokens, append_concat_token change "
            "nothing: TRL 0.25.1 reads only skip_prepare_dataset from dataset_kwargs (the others "
            "are older TRL's keys), and zerotune does the same");
  EXPECT_EQ(error_of([&] {
              zt::cli::check_dataset_kwargs(
                  config({{"dataset_kwargs", {{"skip_prepare_dataset", true}}}}), warn);
            }),
            "sft.yaml: trainer.dataset_kwargs.skip_prepare_dataset: true is not supported by "
            "zerotune: it always formats and tokenises the dataset itself (TRL would expect "
            "input_ids already in the rows)");
  EXPECT_EQ(error_of([&] {
              zt::cli::check_dataset_kwargs(config({{"dataset_kwargs", "{}"}}), warn);
            }),
            "sft.yaml: trainer.dataset_kwargs is \"{}\"; expected a mapping (TRL calls "
            "dataset_kwargs.get(\"skip_prepare_dataset\") and fails on anything else), or null");
}

// An empty tokenizer key was reported as "model: name_or_path is empty", naming another key than
// the one the user left empty.
TEST(DataSetup, EmptyTokenizerKeyIsNamed) {
  const RunConfig cfg = RunConfig::from_json(
      {{"model", {{"name_or_path", "org/model"}, {"tokenizer_name_or_path", ""}}}}, "sft.yaml");
  EXPECT_EQ(error_of([&] { zt::cli::load_tokenizer(cfg); }),
            "sft.yaml: model.tokenizer_name_or_path is empty; expected a local directory or a hub "
            "id Org/Name that has tokenizer.json");
  const RunConfig users = RunConfig::from_json({{"model_name", ""}}, "sft.yaml");
  EXPECT_EQ(error_of([&] { zt::cli::load_tokenizer(users); }),
            "sft.yaml: model_name is empty; expected a local directory or a hub id Org/Name that "
            "has tokenizer.json");
  zt::testing::TempDir dir;
  zt::testing::write_file(dir / "sft.yaml", "model:\n  name_or_path: org/model\n");
  const RunConfig given = RunConfig::load(dir / "sft.yaml", {"model.tokenizer_name_or_path="});
  EXPECT_EQ(error_of([&] { zt::cli::load_tokenizer(given); }),
            (dir / "sft.yaml").string() +
                ": model.tokenizer_name_or_path is empty; expected a local directory or a hub id "
                "Org/Name that has tokenizer.json (given on the command line)");
}

// Only spaces (`model.tokenizer_name_or_path=' '`) was looked up as a hub id, and the error named
// the model ("model 'org/model' is not a local directory …"), not the key the user set.
TEST(DataSetup, BlankTokenizerKeyIsNamed) {
  zt::testing::TempDir dir;
  zt::testing::write_file(dir / "sft.yaml", "model:\n  name_or_path: org/model\n");
  const RunConfig spaces = RunConfig::load(dir / "sft.yaml", {"model.tokenizer_name_or_path=' '"});
  EXPECT_EQ(spaces.value("model.tokenizer_name_or_path"), " ");
  EXPECT_EQ(error_of([&] { zt::cli::load_tokenizer(spaces); }),
            (dir / "sft.yaml").string() +
                ": model.tokenizer_name_or_path is ' ' (only whitespace); expected a local "
                "directory or a hub id Org/Name that has tokenizer.json (given on the command "
                "line)");
  const RunConfig tab = RunConfig::from_json(
      {{"model", {{"name_or_path", "org/model"}, {"tokenizer_name_or_path", " \t"}}}}, "sft.yaml");
  EXPECT_EQ(error_of([&] { zt::cli::load_tokenizer(tab); }),
            "sft.yaml: model.tokenizer_name_or_path is ' \t' (only whitespace); expected a local "
            "directory or a hub id Org/Name that has tokenizer.json");
  const RunConfig model = RunConfig::from_json({{"model", {{"name_or_path", "  "}}}}, "sft.yaml");
  EXPECT_EQ(error_of([&] { zt::cli::load_tokenizer(model); }),
            "sft.yaml: model.name_or_path is '  ' (only whitespace); expected a local directory "
            "or a hub id Org/Name that has tokenizer.json");
}

// A tokenizer path that is a file (tokenizer.json itself) or not there was reported as the model's
// ("model 'tok/tokenizer.json': … is a file"), naming neither the file nor the key.
TEST(DataSetup, TokenizerPathThatIsNoDirectoryNamesTheKey) {
  zt::testing::TempDir dir;
  zt::testing::write_file(dir / "tokenizer.json", "{}");
  zt::testing::write_file(dir / "sft.yaml", "model:\n  name_or_path: org/model\n");
  const std::string file = (dir / "tokenizer.json").string();
  const RunConfig cfg =
      RunConfig::load(dir / "sft.yaml", {"+model.tokenizer_name_or_path=" + file});
  EXPECT_EQ(error_of([&] { zt::cli::load_tokenizer(cfg); }),
            (dir / "sft.yaml").string() + ": model.tokenizer_name_or_path: tokenizer '" + file +
                "': " + file + " is a file; expected a directory (given on the command line)");
  const RunConfig missing = RunConfig::from_json(
      {{"model", {{"name_or_path", "org/model"}, {"tokenizer_name_or_path", "no_such_tok"}}}},
      "sft.yaml");
  EXPECT_EQ(error_of([&] { zt::cli::load_tokenizer(missing); }),
            "sft.yaml: model.tokenizer_name_or_path: tokenizer 'no_such_tok': no such directory "
            "(expected a local HF tokenizer directory or a hub id Org/Name)");
  const RunConfig users = RunConfig::from_json({{"model_name", "no_such_model"}}, "sft.yaml");
  EXPECT_EQ(error_of([&] { zt::cli::load_tokenizer(users); }),
            "sft.yaml: model_name: tokenizer 'no_such_model': no such directory (expected a local "
            "HF tokenizer directory or a hub id Org/Name)");
}

// A directory of shards as dataset.train.path was "DIR: read failed: Is a directory" (the token
// cache's hashing of the file), naming neither the key nor what was expected.
TEST(DataSetup, DatasetPathThatIsADirectoryNamesTheKey) {
  zt::testing::TempDir dir;
  std::filesystem::create_directories(dir / "shards.parquet");
  const RunConfig cfg = RunConfig::from_json(
      {{"dataset", {{"train", {{"path", (dir / "shards.parquet").string()}}}}}}, "sft.yaml");
  EXPECT_EQ(error_of([&] { zt::cli::check_dataset_present(cfg, "train"); }),
            "sft.yaml: dataset.train.path: " + (dir / "shards.parquet").string() +
                " is a directory; expected a .parquet, .jsonl or .json file (zerotune reads one "
                "file per split: merge the directory's shards into one file, or name one of them)");
  zt::testing::write_file(dir / "train.jsonl", "{\"text\": \"a\"}\n");
  const RunConfig ok = RunConfig::from_json(
      {{"dataset", {{"train", {{"path", (dir / "train.jsonl").string()}}}}}}, "sft.yaml");
  EXPECT_NO_THROW(zt::cli::check_dataset_present(ok, "train"));
  // A device (read without end before) names the key too.
  const RunConfig dev =
      RunConfig::from_json({{"dataset", {{"train", {{"path", "/dev/zero"}}}}}}, "sft.yaml");
  EXPECT_EQ(error_of([&] { zt::cli::check_dataset_present(dev, "train"); }),
            "sft.yaml: dataset.train.path: /dev/zero is a device, no regular file; "
            "expected a .parquet, .jsonl or .json file");
}

// The eval set of a hub dataset reads split 'test' when dataset.eval.split is not set; a snapshot
// without it said "no data file of split 'test'", a split the user's config never names.
TEST(DataSetup, MissingDefaultHubSplitNamesTheKey) {
  zt::testing::TempDir dir;
  const std::filesystem::path repo = dir / "hub" / "datasets--org--ds";
  std::filesystem::create_directories(repo / "refs");
  std::ofstream(repo / "refs" / "main") << "r1";
  const std::filesystem::path snap = repo / "snapshots" / "r1";
  std::filesystem::create_directories(snap / "data");
  zt::testing::write_file(snap / "data" / "train-00000-of-00001.parquet", "x");
  setenv("HF_HUB_CACHE", (dir / "hub").string().c_str(), 1);
  const RunConfig cfg = RunConfig::from_json(
      {{"dataset",
        {{"is_local", false}, {"train", {{"name", "org/ds"}}}, {"eval", {{"name", "org/ds"}}}}}},
      "sft.yaml");
  const std::string msg = error_of([&] { zt::cli::check_dataset_present(cfg, "eval"); });
  unsetenv("HF_HUB_CACHE");
  EXPECT_EQ(msg,
            "dataset 'org/ds': no split 'test' in " + snap.string() +
                ", by file name (README.md has no `configs`) (its splits: 'train'; files there: "
                "data/train-00000-of-00001.parquet); dataset.eval.split "
                "is not set, so the eval set reads split 'test': set dataset.eval.split to "
                "the split to read");
}

// The data pipeline's errors name the config's keys: data_options records the file, the split,
// the key naming the dataset and, per option, its config key and where its value came from —
// dataset.prompt_format: chat implied by model_name (the users' layout) says so and how to undo it.
TEST(DataSetup, ErrorNamesComeFromTheConfig) {
  const RunConfig users = RunConfig::from_json(
      {{"model_name", "m"},
       {"dataset", {{"train", {{"path", "t.jsonl"}}}, {"eval", {{"path", "e.jsonl"}}}}}},
      "sft.yaml");
  const data::DataOptions o = data_options(users, "eval");
  EXPECT_EQ(o.names.dataset(o.dataset), "e.jsonl (the eval set, dataset.eval.path)");
  EXPECT_EQ(o.names.key("prompt_format"), "sft.yaml: dataset.prompt_format");
  EXPECT_EQ(o.names.where("prompt_format"),
            " (not set in sft.yaml: chat is implied by model_name, the users' sft.py layout; set "
            "dataset.prompt_format: none for TRL's plain prompt + completion)");
  EXPECT_EQ(o.names.key("assistant_only_loss"), "sft.yaml: trainer.assistant_only_loss");
  EXPECT_EQ(o.names.where("assistant_only_loss"), "");
  EXPECT_EQ(o.names.bare_key("eos_token"), "trainer.eos_token");
  EXPECT_EQ(o.names.key("packing"), "sft.yaml: trainer.packing");
  EXPECT_EQ(o.names.key("packing_strategy"), "sft.yaml: trainer.packing_strategy");
  EXPECT_EQ(o.names.bare_key("max_length"), "trainer.max_length");
  // Set in the file or on the command line: no implication.
  const RunConfig set = RunConfig::from_json(
      {{"model_name", "m"},
       {"dataset", {{"prompt_format", "chat"}, {"train", {{"path", "t.jsonl"}}}}},
       {"trainer", {{"completion_only_loss", true}, {"packing", true}}}},
      "sft.yaml", {"trainer.completion_only_loss", "trainer.packing"});
  const data::DataOptions s = data_options(set, "train");
  EXPECT_EQ(s.names.dataset(s.dataset), "t.jsonl (the train set, dataset.train.path)");
  EXPECT_EQ(s.names.where("prompt_format"), "");
  EXPECT_EQ(s.names.where("completion_only_loss"), " (given on the command line)");
  EXPECT_EQ(s.names.where("packing"), " (given on the command line)");
}

}  // namespace
