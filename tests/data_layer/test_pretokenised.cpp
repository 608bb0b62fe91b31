// Pre-tokenised datasets (an `input_ids` column): trained as TRL 0.25.1 trains its "processed"
// datasets — ids, labels, masks, truncation and packing equal to TRL's own _prepare_dataset and
// collator rule (tests/data/pretok/*.golden.json, made by tools/make_pretok_goldens.py) — and the
// errors for bad rows name file, row, column and what was expected.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/prepare.h"
#include "data/rows.h"
#include "test_util.h"

namespace zt::data {
namespace {

using zt::testing::error_of;
using zt::testing::TempDir;
using zt::testing::test_data;
using zt::testing::write_file;

const std::string kTokDir = zt::testing::shared_data("tokenizers/qwen2.5-instruct").string();

class Pretokenised : public ::testing::Test {
 protected:
  DataOptions options(const std::filesystem::path& dataset) const {
    DataOptions o;
    o.dataset = dataset;
    o.num_threads = 2;
    o.cache_dir = dir_ / "cache";
    return o;
  }
  TokenData build(const DataOptions& o, PrepareReport* rep = nullptr) const {
    const auto& q = zt::testing::qwen_tokenizer();
    return build_token_data(o, q.tok, q.cfg, rep);
  }
  // Writes `jsonl` to d.jsonl and returns the error building it gives.
  std::string error(const std::string& jsonl) {
    const auto f = dir_ / "d.jsonl";
    write_file(f, jsonl);
    return error_of([&] { build(options(f)); });
  }
  std::string file() const { return (dir_ / "d.jsonl").string(); }
  // Builds `jsonl` (d.jsonl) and returns zerotune's stderr.
  std::string warnings(const std::string& jsonl, DataOptions o) {
    const auto f = dir_ / "d.jsonl";
    write_file(f, jsonl);
    o.dataset = f;
    ::testing::internal::CaptureStderr();
    try {
      build(o);
    } catch (...) {
      ::testing::internal::GetCapturedStderr();
      throw;
    }
    return ::testing::internal::GetCapturedStderr();
  }

  TempDir dir_;
};

// Every golden case: the samples' ids, their examples' lengths (packed: TRL's seq_lengths) and
// the targets, TRL's labels != -100. Position 0 of each example is not compared: its label is
// never a loss target (padding-free TRL sets it to -100, padded TRL shifts it out; zerotune's
// targets count from t = 1).
void check_golden(const std::string& name, const TokenData& d) {
  SCOPED_TRACE(name);
  const Json g = Json::parse(read_file_bytes(test_data("pretok/" + name + ".golden.json")));
  const Json& samples = g["samples"];
  ASSERT_EQ(d.sample_offsets.size() - 1, samples.size());
  for (size_t s = 0; s < samples.size(); ++s) {
    const int64_t e0 = d.sample_offsets[s], e1 = d.sample_offsets[s + 1];
    const int64_t b = d.example_offsets[e0], end = d.example_offsets[e1];
    const std::vector<int32_t> ids(d.ids.begin() + b, d.ids.begin() + end);
    EXPECT_EQ(ids, samples[s]["ids"].get<std::vector<int32_t>>()) << "sample " << s;
    std::vector<int64_t> lengths;
    for (int64_t e = e0; e < e1; ++e)
      lengths.push_back(d.example_offsets[e + 1] - d.example_offsets[e]);
    if (samples[s].contains("seq_lengths")) {
      EXPECT_EQ(lengths, samples[s]["seq_lengths"].get<std::vector<int64_t>>()) << "sample " << s;
    } else {
      EXPECT_EQ(lengths.size(), 1u) << "sample " << s;
    }
    const auto labels = samples[s]["labels"].get<std::vector<int64_t>>();
    ASSERT_EQ(labels.size(), ids.size());
    for (int64_t e = e0; e < e1; ++e) {
      for (int64_t t = d.example_offsets[e] + 1; t < d.example_offsets[e + 1]; ++t) {
        EXPECT_EQ(d.targets[t], labels[t - b] != -100 ? 1 : 0)
            << "sample " << s << " token " << t - b;
      }
    }
  }
}

TEST_F(Pretokenised, MatchesTrl0251) {
  for (const char* name :
       {"ids", "ids_nomax", "ids_packed", "masks_auto", "masks_col", "masks_packed", "labels",
        "labels_col", "labels_packed", "processed_pc"}) {
    const Json g =
        Json::parse(read_file_bytes(test_data(std::string("pretok/") + name + ".golden.json")));
    ASSERT_EQ(g["trl"], "0.25.1");
    DataOptions o = options(test_data("pretok/" + g["dataset"].get<std::string>()));
    const Json& opt = g["options"];
    if (opt.contains("max_length"))
      o.max_length = opt["max_length"].is_null() ? std::nullopt
                                                 : std::optional(opt["max_length"].get<int64_t>());
    if (opt.contains("packing")) o.packing = opt["packing"].get<bool>();
    if (opt.contains("completion_only_loss"))
      o.completion_only_loss = opt["completion_only_loss"].get<bool>();
    PrepareReport rep;
    check_golden(name, build(o, &rep));
    EXPECT_EQ(rep.dataset_kind, "pre-tokenised");
  }
}

// The same rows from parquet and from jsonl give the same tokens (ids.parquet is ids.jsonl).
TEST_F(Pretokenised, ParquetAndJsonlAgree) {
  DataOptions o = options(test_data("pretok/ids.parquet"));
  o.max_length = 16;
  check_golden("ids", build(o));
}

// Spot values, written out: row 1 of masks.parquet, truncated to 12, completion_only_loss on:
// completion_mask [0,0,1,…] and assistant_masks [1,1,0,1,1,0,…] (booleans in the file) both apply.
TEST_F(Pretokenised, MasksGiveTheseTargets) {
  DataOptions o = options(test_data("pretok/masks.parquet"));
  o.max_length = 12;
  o.completion_only_loss = true;
  PrepareReport rep;
  const TokenData d = build(o, &rep);
  const std::vector<Json> rows = read_rows(test_data("pretok/masks.parquet"));
  const auto cm = rows[1]["completion_mask"].get<std::vector<int>>();
  const auto am = rows[1]["assistant_masks"].get<std::vector<bool>>();
  ASSERT_EQ(cm.size(), 11u);
  const std::vector<uint8_t> targets(d.targets.begin() + d.example_offsets[1],
                                     d.targets.begin() + d.example_offsets[2]);
  EXPECT_EQ(targets, (std::vector<uint8_t>{0, 0, 0, 1, 1, 0, 1, 1, 0, 1, 1}));
  for (size_t t = 0; t < targets.size(); ++t) EXPECT_EQ(targets[t], cm[t] && am[t]) << t;
  EXPECT_EQ(rep.rows_read, 8);
  EXPECT_EQ(rep.examples_kept, 8);
  EXPECT_EQ(rep.truncated, 1);  // the row of 14 tokens
  EXPECT_EQ(rep.total_tokens, 6 + 11 + 4 + 12 + 9 + 3 + 10 + 7);
}

// An input_ids column wins over text columns (TRL's is_processed): the text is not tokenised,
// no EOS is added, and the prompt/completion columns only make completion_only_loss default on.
TEST_F(Pretokenised, IdsWinOverTextColumns) {
  const auto f = dir_ / "d.jsonl";
  write_file(f,
             "{\"text\": \"hello\", \"input_ids\": [9707, 1879, 0]}\n"
             "{\"text\": \"world\", \"input_ids\": [14615, 7]}\n");
  PrepareReport rep;
  const TokenData d = build(options(f), &rep);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{9707, 1879, 0, 14615, 7}));
  EXPECT_EQ(d.targets, (std::vector<uint8_t>{1, 1, 1, 1, 1}));
  EXPECT_EQ(rep.dataset_kind, "pre-tokenised");
}

// zerotune's own rules as for text rows: examples without a target at t >= 1 are dropped and
// counted (TRL 0.25.1 keeps them, SFT_SEMANTICS §2); keep_end keeps the last max_length tokens.
TEST_F(Pretokenised, DropsAndKeepEnd) {
  const auto f = dir_ / "d.jsonl";
  write_file(f,
             "{\"input_ids\": [5], \"labels\": [5]}\n"
             "{\"input_ids\": [1, 2, 3, 4, 5, 6], \"labels\": [1, 2, 3, -100, -100, -100]}\n"
             "{\"input_ids\": [7, 8], \"labels\": [7, -100]}\n"
             "{\"input_ids\": [10, 11, 12, 13], \"labels\": [10, 11, 12, 13]}\n");
  DataOptions o = options(f);
  o.max_length = 3;
  o.truncation_mode = TruncationMode::kKeepEnd;
  PrepareReport rep;
  const TokenData d = build(o, &rep);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{11, 12, 13}));
  EXPECT_EQ(d.example_rows, (std::vector<int64_t>{3}));
  EXPECT_EQ(rep.dropped["no_target"], 2);                   // rows 0 and 2
  EXPECT_EQ(rep.dropped["no_target_after_truncation"], 1);  // row 1: its targets were the first
}

TEST_F(Pretokenised, CachedLikeAnyDataset) {
  DataOptions o = options(test_data("pretok/labels.jsonl"));
  PrepareReport first, second;
  const auto& q = zt::testing::qwen_tokenizer();
  const TokenData d = build(o);
  {
    const PreparedDataset ds = prepare_dataset(o, q.tok, q.cfg, &first);
    EXPECT_FALSE(first.from_cache);
  }
  const PreparedDataset ds = prepare_dataset(o, q.tok, q.cfg, &second);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(std::vector<int32_t>(ds.all_tokens().begin(), ds.all_tokens().end()), d.ids);
  EXPECT_EQ(second.dataset_kind, "pre-tokenised");
}

TEST_F(Pretokenised, BadIdsAreNamed) {
  const std::string f = file();
  EXPECT_EQ(error("{\"input_ids\": [1, 2]}\n{\"input_ids\": [1, 2, 151665]}\n"),
            f +
                ":2: row 1: column 'input_ids', element 2 is 151665, outside the vocabulary [0, "
                "151665) of the tokenizer in " +
                kTokDir);
  EXPECT_EQ(error("{\"input_ids\": [-1, 2]}\n"),
            f +
                ":1: row 0: column 'input_ids', element 0 is -1, outside the vocabulary [0, "
                "151665) of the tokenizer in " +
                kTokDir);
  EXPECT_EQ(error("{\"input_ids\": [1, 18446744073709551615]}\n"),
            f +
                ":1: row 0: column 'input_ids', element 1 is 18446744073709551615, outside the "
                "vocabulary [0, 151665) of the tokenizer in " +
                kTokDir);
  EXPECT_EQ(error("{\"input_ids\": [1, 2.0]}\n"),
            f + ":1: row 0: column 'input_ids', element 1 is 2.0 (a float), expected an integer "
                "token id");
  EXPECT_EQ(error("{\"input_ids\": [true]}\n"),
            f + ":1: row 0: column 'input_ids', element 0 is true (a boolean), expected an integer "
                "token id");
  EXPECT_EQ(error("{\"input_ids\": [1, null]}\n"),
            f + ":1: row 0: column 'input_ids', element 1 is null, expected an integer token id");
  EXPECT_EQ(
      error("{\"input_ids\": [\"12\"]}\n"),
      f + ":1: row 0: column 'input_ids', element 0 is \"12\" (a string), expected an integer "
          "token id");
  EXPECT_EQ(
      error("{\"input_ids\": \"1 2 3\"}\n"),
      f + ":1: row 0: column 'input_ids' is \"1 2 3\" (a string), expected a list of token ids");
  const std::string why =
      " (TRL fails on such a row too; in a JSON file a row that lacks a column other rows have "
      "reads as null there, as HF datasets reads it)";
  EXPECT_EQ(
      error("{\"input_ids\": [1]}\n{\"input_ids\": null}\n"),
      f + ":2: row 1: column 'input_ids' is missing or null, expected a list of token ids" + why);
  EXPECT_EQ(
      error("{\"input_ids\": [1]}\n{\"input_ids\": []}\n"),
      f + ":2: row 1: column 'input_ids' is an empty list; a pre-tokenised row needs at least "
          "one token id");
  EXPECT_EQ(
      error("{\"input_ids\": [1]}\n{\"input_ids\": [2]}\n{\"text\": \"a\"}\n"),
      f + ":3: row 2: column 'input_ids' is missing or null, expected a list of token ids" + why);
  // An input_ids column first given in row 1 makes the dataset pre-tokenised (TRL's
  // is_processed: "input_ids" in the column names); row 0 has null ids.
  EXPECT_EQ(
      error("{\"text\": \"a\"}\n{\"text\": \"b\", \"input_ids\": [1]}\n"),
      f + ":1: row 0: column 'input_ids' is missing or null, expected a list of token ids" + why);
  const auto pq = test_data("pretok/float_ids.parquet");
  EXPECT_EQ(error_of([&] { build(options(pq)); }),
            pq.string() +
                ": row 0: column 'input_ids', element 0 is 1.0 (a float), expected an "
                "integer token id");
}

TEST_F(Pretokenised, BadMasksAndLabelsAreNamed) {
  const std::string f = file();
  // completion_mask is read with completion_only_loss (here: the prompt/completion columns).
  const std::string pc = R"("prompt": "p", "completion": "c", )";
  EXPECT_EQ(error("{" + pc + R"("input_ids": [1, 2, 3], "completion_mask": [0, 1]})" + "\n"),
            f + ":1: row 0: column 'completion_mask' has 2 values but 'input_ids' has 3; expected "
                "one per token");
  EXPECT_EQ(error("{" + pc + R"("input_ids": [1, 2, 3], "completion_mask": [0, 1, 2]})" + "\n"),
            f + ":1: row 0: column 'completion_mask', element 2 is 2, expected 0 or 1");
  EXPECT_EQ(error("{" + pc + R"("input_ids": [1, 2], "completion_mask": [0, 0.5]})" + "\n"),
            f + ":1: row 0: column 'completion_mask', element 1 is 0.5 (a float), expected 0 or 1");
  const std::string why =
      " (TRL fails on such a row too; in a JSON file a row that lacks a column other rows have "
      "reads as null there, as HF datasets reads it)";
  EXPECT_EQ(error("{" + pc + R"("input_ids": [1], "completion_mask": [1]})" + "\n{" + pc +
                  R"("input_ids": [1]})" + "\n"),
            f +
                ":2: row 1: column 'completion_mask' is missing or null, expected a list of 0/1 "
                "flags, one per token" +
                why);
  EXPECT_EQ(error(R"({"input_ids": [1, 2], "assistant_masks": "11"})" + std::string("\n")),
            f + ":1: row 0: column 'assistant_masks' is \"11\" (a string), expected a list of 0/1 "
                "flags, one per token");
  EXPECT_EQ(error(R"({"input_ids": [1, 2], "assistant_masks": [1, 1, 1]})" + std::string("\n")),
            f + ":1: row 0: column 'assistant_masks' has 3 values but 'input_ids' has 2; expected "
                "one per token");
  EXPECT_EQ(error(R"({"input_ids": [1, 2, 3], "labels": [-100, 2, 4]})" + std::string("\n")),
            f + ":1: row 0: column 'labels', element 2 is 4, expected -100 or 3, the input id at "
                "that position: zerotune trains the input ids (the loss shifts them by one), so a "
                "label can mask a token but not replace it");
  EXPECT_EQ(error(R"({"input_ids": [1, 2], "labels": [-100, 2.0]})" + std::string("\n")),
            f + ":1: row 0: column 'labels', element 1 is 2.0 (a float), expected -100 or 2, the "
                "input id at that position: zerotune trains the input ids (the loss shifts them by "
                "one), so a label can mask a token but not replace it");
  EXPECT_EQ(error(R"({"input_ids": [1, 2], "labels": [1]})" + std::string("\n")),
            f + ":1: row 0: column 'labels' has 1 values but 'input_ids' has 2; expected one per "
                "token");
  // Labels first given in row 1 are read (TRL's collator: "labels" in examples[0], which has the
  // column, null), and row 0 has none: torch.tensor(None) fails in TRL.
  EXPECT_EQ(error("{\"input_ids\": [1, 2]}\n{\"input_ids\": [1, 2], \"labels\": [1, 2]}\n"),
            f +
                ":1: row 0: column 'labels' is missing or null, expected a list of labels, one "
                "per token" +
                why);
  // A column that is not read is not checked (TRL's collator never looks at it).
  EXPECT_EQ(
      error(R"({"input_ids": [1, 2], "completion_mask": [7], "attention_mask": "x"})" +
            std::string("\n{\"input_ids\": [3]}\n{\"input_ids\": []}\n")),
      f + ":3: row 2: column 'input_ids' is an empty list; a pre-tokenised row needs at least "
          "one token id");
}

TEST_F(Pretokenised, OptionsActAsInTrl) {
  DataOptions o = options(dir_ / "d.jsonl");
  // assistant_only_loss: TRL 0.25.1 refuses it on data that is not conversational.
  o.assistant_only_loss = true;
  EXPECT_EQ(error_of([&] { warnings("{\"input_ids\": [1, 2]}\n", o); }),
            "assistant_only_loss: true needs conversational data (messages), but " + file() +
                " is pre-tokenised data ('input_ids') without a column of messages, which TRL "
                "0.25.1 refuses too; pre-tokenised rows carry their assistant mask in an "
                "'assistant_masks' column, applied whatever assistant_only_loss says");
  // An eval set is not checked (TRL checks the train set alone).
  o.train_set = false;
  EXPECT_NO_THROW(warnings("{\"input_ids\": [1, 2]}\n", o));
  o.train_set = true;
  // … and takes it beside a messages column, where the assistant_masks column is what applies.
  const std::string msgs = R"("messages": [{"role": "user", "content": "hi"}], )";
  std::string err = warnings("{" + msgs +
                                 R"("input_ids": [1, 2, 3], "assistant_masks": [0, 0, 1]})"
                                 "\n",
                             o);
  EXPECT_NE(err.find("pre-tokenised rows: targets from input_ids, assistant_masks; columns not "
                     "read (as TRL 0.25.1's collator): messages"),
            std::string::npos)
      << err;
  err = warnings("{" + msgs +
                     R"("input_ids": [1, 2, 3]})"
                     "\n",
                 o);
  EXPECT_NE(err.find(file() + " (pre-tokenised): assistant_only_loss: true has no effect without "
                              "an 'assistant_masks' column: every token is trained"),
            std::string::npos)
      << err;
  o.assistant_only_loss = false;

  // A completion_mask without prompt/completion columns is not applied unless asked for.
  const std::string masked = R"({"input_ids": [1, 2, 3], "completion_mask": [0, 0, 1]})"
                             "\n";
  err = warnings(masked, o);
  EXPECT_NE(err.find(file() + " (pre-tokenised): the 'completion_mask' column is not applied: "
                              "completion_only_loss is unset and the rows have no 'prompt' and "
                              "'completion' columns, so every token (of the labels) is trained"),
            std::string::npos)
      << err;
  o.completion_only_loss = true;
  EXPECT_EQ(build(o).targets, (std::vector<uint8_t>{0, 0, 1}));
  err = warnings(R"({"input_ids": [1, 2, 3]})"
                 "\n",
                 o);
  EXPECT_NE(err.find(file() + " (pre-tokenised): completion_only_loss: true has no effect without "
                              "a 'completion_mask' column"),
            std::string::npos)
      << err;
  o.completion_only_loss.reset();
  EXPECT_EQ(build(o).targets, (std::vector<uint8_t>{1, 1, 1}));

  // Packing drops the labels column, as TRL's select_columns does.
  o.packing = true;
  err = warnings(R"({"input_ids": [1, 2, 3], "labels": [-100, -100, 3]})"
                 "\n",
                 o);
  EXPECT_NE(err.find("the 'labels' column is not read under packing"), std::string::npos) << err;
  EXPECT_EQ(build(o).targets, (std::vector<uint8_t>{1, 1, 1}));
  o.packing = false;
  EXPECT_EQ(build(o).targets, (std::vector<uint8_t>{0, 0, 1}));

  // Padding in the rows is trained, as TRL (which never reads attention_mask) trains it.
  err = warnings(
      "{\"input_ids\": [1, 2], \"attention_mask\": [1, 1]}\n"
      "{\"input_ids\": [0, 2], \"attention_mask\": [0, 1], \"position_ids\": [0, 0]}\n",
      o);
  EXPECT_NE(err.find(file() + ": 1 pre-tokenised row(s) have an 'attention_mask' with zeros (rows "
                              "1): TRL 0.25.1's collator does not read attention_mask"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("columns not read (as TRL 0.25.1's collator): attention_mask"),
            std::string::npos)
      << err;
  err = warnings(R"({"input_ids": [1, 2, 3], "seq_lengths": [2, 1]})"
                 "\n",
                 o);
  EXPECT_NE(err.find("the 'seq_lengths' column is not read: each row is one sequence"),
            std::string::npos)
      << err;

  // prompt_format: chat formats text: nothing to do here.
  o.prompt_format = PromptFormat::kChat;
  err = warnings(R"({"input_ids": [1, 2, 3]})"
                 "\n",
                 o);
  EXPECT_NE(err.find("prompt_format: chat has no effect"), std::string::npos) << err;
  o.prompt_format = PromptFormat::kNone;

  // eos_token is checked against the vocabulary for any data, as TRL does.
  o.eos_token = "<|not_a_token|>";
  EXPECT_EQ(error_of([&] {
              warnings(R"({"input_ids": [1, 2, 3]})"
                       "\n",
                       o);
            }),
            "eos_token: '<|not_a_token|>' is not a token of the tokenizer in " + kTokDir);
}

}  // namespace
}  // namespace zt::data

namespace zt::data {
namespace {

// TRL decides an unset completion_only_loss once, on the train set's row 0, and uses it for the
// eval set too: a pre-tokenised eval file's completion_mask is applied after a prompt/completion
// train set, and a prompt/completion eval file trains its prompt too after a messages train set.
TEST_F(Pretokenised, AnEvalSetTakesTheTrainSetsCompletionOnlyLossDecision) {
  const auto pretok = dir_ / "eval_ids.jsonl";
  write_file(pretok, R"({"input_ids": [10, 11, 12, 13], "completion_mask": [0, 0, 1, 1]})"
                     "\n");
  const auto text = dir_ / "eval_text.jsonl";
  write_file(text, R"({"prompt": "Hi there", "completion": " friend"})"
                   "\n");
  PrepareReport train_pc, train_msgs;
  train_pc.prompt_and_completion_in_row_0 = true;
  train_msgs.prompt_and_completion_in_row_0 = false;
  PrepareReport own, pc, msgs;
  build(options(pretok), &own);  // its own row 0: no prompt/completion, the mask not applied
  build(eval_options(options(pretok), train_pc), &pc);
  EXPECT_EQ(own.target_tokens, 3);
  EXPECT_EQ(pc.target_tokens, 2);
  PrepareReport text_own, text_msgs;
  build(options(text), &text_own);
  build(eval_options(options(text), train_msgs), &text_msgs);
  EXPECT_GT(text_msgs.target_tokens, text_own.target_tokens);
  EXPECT_EQ(text_msgs.target_tokens, text_msgs.total_tokens - 1);  // every position after 0
  // Set in the config, the eval set's own value is kept; a train report without the record
  // (a cache written before it) leaves the eval set to its own row 0.
  DataOptions set = options(pretok);
  set.completion_only_loss = false;
  EXPECT_FALSE(eval_options(set, train_pc).completion_only_loss_from_train);
  EXPECT_FALSE(eval_options(options(pretok), PrepareReport{}).completion_only_loss_from_train);
  // The train set's report records its row 0.
  PrepareReport train_rep;
  build(options(text), &train_rep);
  EXPECT_EQ(train_rep.prompt_and_completion_in_row_0, std::optional<bool>(true));
  EXPECT_EQ(PrepareReport::from_json(train_rep.to_json()).prompt_and_completion_in_row_0,
            std::optional<bool>(true));
}

// completion_only_loss unset is "prompt" and "completion" in TRL's first row, which has every
// column of a JSON file (null where row 0 lacks it): prompt/completion columns first given in
// row 1 apply the completion_mask of every row, as TRL 0.25.1's collator does on this file
// (checked: completion_only_loss True, rows [0,1,1] and [0,0,1]); they were not applied.
TEST_F(Pretokenised, PromptAndCompletionAfterRowZeroDecideCompletionOnlyLoss) {
  const auto f = dir_ / "late_pc.jsonl";
  write_file(f,
             "{\"input_ids\": [1, 2, 3], \"completion_mask\": [0, 1, 1]}\n\n"
             "{\"input_ids\": [4, 5, 6], \"completion_mask\": [0, 0, 1], \"prompt\": \"p\", "
             "\"completion\": \"c\"}\n");
  PrepareReport rep;
  const TokenData d = build(options(f), &rep);
  EXPECT_EQ(rep.dataset_kind, "pre-tokenised");
  EXPECT_EQ(rep.prompt_and_completion_in_row_0, std::optional<bool>(true));
  EXPECT_EQ(d.targets, (std::vector<uint8_t>{0, 1, 1, 0, 0, 1}));
  EXPECT_EQ(rep.target_tokens, 3);  // t >= 1: 2 + 1 (every token would be 4)
  // Set to false, every token is trained.
  DataOptions off = options(f);
  off.completion_only_loss = false;
  PrepareReport all;
  build(off, &all);
  EXPECT_EQ(all.target_tokens, 4);
}

// TRL packs every row; a row zerotune drops for having no target still takes its tokens in the
// bin packing, so the kept rows land where TRL puts them. Lengths 9, 7 (no target), 7, 6 at
// max_length 16: TRL's bfd (trl.data_utils._pack_bfd, longest first, best fit) makes [0, 1] and
// [2, 3]; less row 1 that is [0] and [2, 3]. Packing 9, 7, 6 alone would give [0, 2] and [3].
TEST_F(Pretokenised, RowsWithoutATargetKeepTheirPlaceInTrlsBins) {
  const auto f = dir_ / "bins.jsonl";
  const auto row = [](int len, bool target) {
    std::string ids, mask;
    for (int i = 0; i < len; ++i) {
      ids += (i ? ", " : "") + std::to_string(100 + i);
      mask += (i ? ", " : "") + std::string(target && i == len - 1 ? "1" : "0");
    }
    return "{\"input_ids\": [" + ids + "], \"completion_mask\": [" + mask + "]}\n";
  };
  write_file(f, row(9, true) + row(7, false) + row(7, true) + row(6, true));
  DataOptions o = options(f);
  o.packing = true;
  o.max_length = 16;
  o.completion_only_loss = true;
  PrepareReport rep;
  const TokenData d = build(o, &rep);
  EXPECT_EQ(rep.dropped.at("no_target"), 1);
  std::vector<std::vector<int64_t>> got;
  for (size_t s = 0; s + 1 < d.sample_offsets.size(); ++s)
    got.emplace_back(d.example_rows.begin() + d.sample_offsets[s],
                     d.example_rows.begin() + d.sample_offsets[s + 1]);
  EXPECT_EQ(got, (std::vector<std::vector<int64_t>>{{0}, {2, 3}}));
}

// TRL 0.25.1 packs inside each datasets.map batch of 1000 rows of each of its dataset_num_proc
// contiguous shards (tests/data/pretok/pack_groups.golden.json: trl.data_utils.pack_dataset run by
// tools/make_packing_group_goldens.py). Row 3 has one id and no target: TRL packs it last into its
// group (the only 1-token example), zerotune drops it, so TRL's bins without row 3 must be
// zerotune's exactly — the rows after it in their groups, and the groups after it unmoved.
TEST_F(Pretokenised, PackingGroupsAreTrlsMapBatchesOfDatasetNumProcShards) {
  const Json g = Json::parse(read_file_bytes(test_data("pretok/pack_groups.golden.json")));
  const std::string all = read_file_bytes(test_data("pretok/pack_groups.jsonl"));
  const auto six = dir_ / "six.jsonl";
  size_t cut = 0;
  for (int i = 0; i < 6; ++i) cut = all.find('\n', cut) + 1;
  write_file(six, all.substr(0, cut));
  const std::pair<const char*, int64_t> cases[] = {
      {"2100:null", 1}, {"2100:0", 0}, {"2100:2", 2}, {"2100:3", 3}, {"6:8", 8}};
  for (const auto& [name, num_proc] : cases) {
    SCOPED_TRACE(name);
    DataOptions o = options(std::string(name).starts_with("6:")
                                ? six
                                : std::filesystem::path(test_data("pretok/pack_groups.jsonl")));
    o.packing = true;
    o.max_length = g["max_length"].get<int64_t>();
    o.dataset_num_proc = num_proc;
    PrepareReport rep;
    const TokenData d = build(o, &rep);
    EXPECT_EQ(rep.dropped.at("no_target"), 1);
    std::vector<std::vector<int64_t>> want;
    for (const auto& bin : g["cases"][name]) {
      std::vector<int64_t> rows;
      for (const auto& r : bin)
        if (r.get<int64_t>() != 3) rows.push_back(r.get<int64_t>());
      if (!rows.empty()) want.push_back(rows);
    }
    std::vector<std::vector<int64_t>> got;
    for (size_t s = 0; s + 1 < d.sample_offsets.size(); ++s)
      got.emplace_back(d.example_rows.begin() + d.sample_offsets[s],
                       d.example_rows.begin() + d.sample_offsets[s + 1]);
    EXPECT_EQ(got, want);
  }
  // Each num_proc is its own cache entry.
  DataOptions a = options(test_data("pretok/pack_groups.jsonl")), b = a;
  a.packing = b.packing = true;
  a.max_length = b.max_length = 16;
  b.dataset_num_proc = 2;
  EXPECT_NE(dataset_cache_key(a, zt::testing::qwen_tokenizer().cfg).hex(),
            dataset_cache_key(b, zt::testing::qwen_tokenizer().cfg).hex());
  // Under assistant_only_loss an eval set's entry is never a train set's (the eval set may be
  // tokenised without the option where the train set is refused); without it the keys agree.
  DataOptions train = options(test_data("pretok/pack_groups.jsonl")), eval = train;
  train.completion_only_loss = eval.completion_only_loss = false;
  eval.train_set = false;
  const auto key = [](const DataOptions& o) {
    return dataset_cache_key(o, zt::testing::qwen_tokenizer().cfg).hex();
  };
  EXPECT_EQ(key(train), key(eval));
  train.assistant_only_loss = eval.assistant_only_loss = true;
  EXPECT_NE(key(train), key(eval));
}

}  // namespace
}  // namespace zt::data
