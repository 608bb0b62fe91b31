// assistant_only_loss masks against transformers' own `apply_chat_template(return_dict=True,
// return_assistant_tokens_mask=True)` (tests/data/sft/assistant_mask.<rule>.golden.json, made by
// tools/make_assistant_mask_goldens.py): dataset.assistant_mask: char_to_token against
// transformers 4.57.1 (TRL 0.25.1's), overlap against transformers 5.24.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "data/prepare.h"
#include "data/rows.h"
#include "data/sft_rows.h"
#include "data/sft_tokenize.h"
#include "io/json.h"
#include "test_util.h"

namespace zt::data {
namespace {

using zt::testing::QwenTokenizer;
using zt::testing::shared_data;
using zt::testing::TempDir;
using zt::testing::test_data;
using zt::testing::write_file;

class AssistantMaskGolden : public ::testing::Test {
 protected:
  // The Qwen2.5 tokenizer with trim_offsets: true in its ByteLevel post-processor, the same files
  // tools/make_assistant_mask_goldens.py builds ("qwen2.5_trim").
  static void SetUpTestSuite() {
    const auto src = shared_data("tokenizers/qwen2.5-instruct");
    trim_dir_ = new TempDir();
    // nlohmann::json, not the ordered Json: 151k vocab keys would take ordered_map ~1 min.
    nlohmann::json tj = nlohmann::json::parse(read_file_bytes(src / "tokenizer.json"));
    ASSERT_EQ(tj["post_processor"]["type"], "ByteLevel");
    tj["post_processor"]["trim_offsets"] = true;
    write_file(*trim_dir_ / "tokenizer.json", tj.dump());
    write_file(*trim_dir_ / "tokenizer_config.json",
               read_file_bytes(src / "tokenizer_config.json"));
    trim_ = new QwenTokenizer{text::Tokenizer::load(*trim_dir_ / "tokenizer.json"),
                              text::load_tokenizer_config(trim_dir_->path())};
  }
  static void TearDownTestSuite() {
    delete trim_;
    delete trim_dir_;
    trim_ = nullptr;
    trim_dir_ = nullptr;
  }

  static Json golden(const std::string& rule) {
    return Json::parse(read_file_bytes(test_data("sft/assistant_mask." + rule + ".golden.json")));
  }

  // Formats golden case `c` (its template, messages and tokenizer) with assistant_only_loss and
  // `rule`: the ids and the targets (= the assistant mask, for messages rows).
  static TokenizedExample format(const Json& c, AssistantMask rule) {
    const QwenTokenizer& t =
        c["tokenizer"] == "qwen2.5_trim" ? *trim_ : zt::testing::qwen_tokenizer();
    DataOptions o;
    o.assistant_only_loss = true;
    o.assistant_mask = rule;
    o.chat_template = c["template"].get<std::string>();
    const Json row = {{"messages", c["messages"]}};
    const DatasetFormat f = detect_format(row, o, "golden");
    EXPECT_EQ(f.kind, DatasetKind::kConversationalLanguageModeling);
    const SftFormatter formatter(o, f, t.tok, t.cfg);
    return formatter.format(extract_row(row, f, 0, "golden").row);
  }

  // Every case of the golden of `rule`: zerotune's ids and targets are transformers'.
  static void check(const std::string& rule, AssistantMask r, const std::string& version) {
    const Json g = golden(rule);
    EXPECT_EQ(g["rule"], rule);
    EXPECT_EQ(g["transformers"], version);
    ASSERT_EQ(g["cases"].size(), 13u);
    for (const Json& c : g["cases"]) {
      SCOPED_TRACE(c["name"].get<std::string>());
      const TokenizedExample ex = format(c, r);
      EXPECT_EQ(ex.ids, c["ids"].get<std::vector<int32_t>>());
      EXPECT_EQ(ex.targets, c["assistant_masks"].get<std::vector<uint8_t>>());
    }
  }

  static TempDir* trim_dir_;
  static QwenTokenizer* trim_;
};
TempDir* AssistantMaskGolden::trim_dir_ = nullptr;
QwenTokenizer* AssistantMaskGolden::trim_ = nullptr;

TEST_F(AssistantMaskGolden, CharToTokenIsTransformers4571) {
  check("char_to_token", AssistantMask::kCharToToken, "4.57.1");
}

TEST_F(AssistantMaskGolden, OverlapIsTransformers524) {
  check("overlap", AssistantMask::kOverlap, "5.24.0");
}

// The tester's row: "ok 𝜉" (U+1D709, four UTF-8 bytes) ends the span; its last character is split
// over 81250 (" " and two bytes), 250 and 231. transformers 4.57.1 (TRL 0.25.1) stops at the first
// token holding it; transformers 5.24 takes every token overlapping the span.
TEST_F(AssistantMaskGolden, ALastCharacterSplitIntoByteTokens) {
  const Json c = golden("char_to_token")["cases"][0];
  ASSERT_EQ(c["name"], "split_last_char");
  const auto tail = []<typename T>(const std::vector<T>& v) {
    return std::vector<T>(v.end() - 6, v.end() - 2);  // before <|im_end|> "\n"
  };
  const TokenizedExample a = format(c, AssistantMask::kCharToToken);
  EXPECT_EQ(tail(a.ids), (std::vector<int32_t>{562, 81250, 250, 231}));
  EXPECT_EQ(tail(a.targets), (std::vector<uint8_t>{1, 1, 0, 0}));
  const TokenizedExample b = format(c, AssistantMask::kOverlap);
  EXPECT_EQ(b.ids, a.ids);
  EXPECT_EQ(tail(b.targets), (std::vector<uint8_t>{1, 1, 1, 1}));
  EXPECT_EQ(std::count(a.targets.begin(), a.targets.end(), 1), 2);
  EXPECT_EQ(std::count(b.targets.begin(), b.targets.end(), 1), 4);
}

// Where the two rules part, case by case (the goldens of both transformers versions): the split
// last characters, 4.57.1's quirks (a last token 0 or a last character no token holds marks to
// the end; a first character no token holds stops the marking; a first block rendered before any
// output is no span), and nowhere else.
TEST_F(AssistantMaskGolden, WhereTheRulesDiffer) {
  const Json a = golden("char_to_token")["cases"];
  const Json b = golden("overlap")["cases"];
  ASSERT_EQ(a.size(), b.size());
  std::vector<std::string> differ;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["name"], b[i]["name"]);
    EXPECT_EQ(a[i]["ids"], b[i]["ids"]);
    if (a[i]["assistant_masks"] != b[i]["assistant_masks"]) differ.push_back(a[i]["name"]);
  }
  EXPECT_EQ(differ, (std::vector<std::string>{"split_last_char", "split_last_emoji", "two_spans",
                                              "span_is_token_0", "first_block_before_output",
                                              "macro_renders_all", "ends_on_trimmed_space",
                                              "starts_on_trimmed_space", "split_last_char_trim"}));
  // span_is_token_0: the assistant's "A" is token 0; 4.57.1's `end_token + 1 if end_token else
  // len(input_ids)` marks all 9 tokens, the user turn after it included.
  EXPECT_EQ(a[6]["assistant_masks"], Json(std::vector<int>(9, 1)));
  // first_block_before_output: the first span is rendered before anything else; 4.57.1's tracker
  // does not record it, so only the second reply ("ok", token 10) is marked.
  std::vector<int> second_only(13, 0);
  second_only[10] = 1;
  EXPECT_EQ(a[7]["assistant_masks"], Json(second_only));
  // macro_renders_all: every span is recorded while the macro's output is buffered, before the
  // template outputs anything: 4.57.1 records none (5.24 starts each at the output's start, 0).
  EXPECT_EQ(a[8]["name"], "macro_renders_all");
  EXPECT_EQ(a[8]["assistant_masks"], Json(std::vector<int>(24, 0)));
  std::vector<int> first_token(24, 0);
  first_token[0] = 1;
  EXPECT_EQ(b[8]["assistant_masks"], Json(first_token));
  // starts_on_trimmed_space: no token holds the first span's first character (a space): 4.57.1
  // breaks there, so neither span is marked.
  EXPECT_EQ(a[10]["assistant_masks"], Json(std::vector<int>(24, 0)));
  // macro_per_turn_multibyte: a block inside a macro is recorded at the top-level output's end
  // and covers the block's characters from there (8 for "好的, ok 𝜉", 16 bytes): both versions
  // mark the <|im_start|> token (12 characters) of each assistant turn alone. Byte counts would
  // reach into "assistant" as well.
  EXPECT_EQ(a[12]["name"], "macro_per_turn_multibyte");
  for (const Json& g : {a[12], b[12]}) {
    std::vector<int32_t> marked;
    for (size_t t = 0; t < g["ids"].size(); ++t)
      if (g["assistant_masks"][t] == 1) marked.push_back(g["ids"][t].get<int32_t>());
    EXPECT_EQ(marked, (std::vector<int32_t>{151644, 151644}));
  }
}

// The rule is part of the token cache key with assistant_only_loss (a cache built with the other
// rule is not reused), and not without it (it changes nothing there).
TEST_F(AssistantMaskGolden, TheRuleIsInTheCacheKeyWithAssistantOnlyLoss) {
  TempDir dir;
  const auto f = dir / "m.jsonl";
  write_file(
      f,
      R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]})"
      "\n");
  const auto& cfg = zt::testing::qwen_tokenizer().cfg;
  DataOptions o;
  o.dataset = f;
  const auto key = [&](AssistantMask r) {
    o.assistant_mask = r;
    return dataset_cache_key(o, cfg).hex();
  };
  EXPECT_EQ(key(AssistantMask::kOverlap), key(AssistantMask::kCharToToken));
  o.assistant_only_loss = true;
  EXPECT_NE(key(AssistantMask::kOverlap), key(AssistantMask::kCharToToken));
}

}  // namespace
}  // namespace zt::data
