// Dataset kind detection, per-row checks (errors name rows and columns) and BFD packing against
// TRL's packing of the same lengths. No tokenizer needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "data/packing.h"
#include "data/rows.h"
#include "data/sft_rows.h"
#include "test_util.h"

namespace zt::data {
namespace {

using zt::testing::error_of;
using zt::testing::test_data;

DatasetFormat detect(const char* json, const DataOptions& o = {}) {
  return detect_format(Json::parse(json), o, "d.jsonl");
}

TEST(DatasetKind, DetectedFromFirstRowColumns) {
  EXPECT_EQ(detect(R"({"prompt": "a", "completion": "b"})").kind, DatasetKind::kPromptCompletion);
  EXPECT_EQ(detect(R"({"prompt": [{"role": "user", "content": "a"}], "completion": []})").kind,
            DatasetKind::kConversationalPromptCompletion);
  EXPECT_EQ(detect(R"({"messages": [], "x": 1})").kind,
            DatasetKind::kConversationalLanguageModeling);
  // no_robots: prompt (a string) + messages, no completion → messages.
  EXPECT_EQ(detect(R"({"prompt": "a", "prompt_id": "1", "messages": [], "category": "c"})").kind,
            DatasetKind::kConversationalLanguageModeling);
  const DatasetFormat sg = detect(R"({"conversations": [{"from": "human", "value": "hi"}]})");
  EXPECT_EQ(sg.kind, DatasetKind::kConversationalLanguageModeling);
  EXPECT_TRUE(sg.sharegpt);
  EXPECT_EQ(detect(R"({"text": "hello"})").kind, DatasetKind::kLanguageModeling);
  DataOptions o;
  o.dataset_text_field = "body";
  const DatasetFormat body = detect(R"({"id": 1, "body": "hello"})", o);
  EXPECT_EQ(body.kind, DatasetKind::kLanguageModeling);
  EXPECT_EQ(body.text_field, "body");
}

TEST(DatasetKind, MissingColumnNamesExpectedAndFound) {
  EXPECT_EQ(error_of([] { detect(R"({"question": "a", "answer": "b"})"); }),
            "d.jsonl: cannot tell the dataset kind: expected columns 'prompt' and 'completion', "
            "or 'messages', or 'conversations' (from/value), or 'text' (dataset_text_field), or "
            "'input_ids' (pre-tokenised); found columns [question, answer]");
  EXPECT_EQ(error_of([] { detect(R"({"prompt": "a", "chosen": "b"})"); }),
            "d.jsonl: missing column 'completion': a 'prompt' column needs a 'completion' column; "
            "found columns [prompt, chosen]");
  EXPECT_EQ(error_of([] { detect(R"({"prompt": 3, "completion": "b"})"); }),
            "d.jsonl: row 0: column 'prompt' is number, expected a string or a list of messages "
            "with 'role' and 'content'");
}

// An empty message list in row 0, where the kind is told, was "column 'prompt' is array, expected
// a string or a list of messages" and "cannot tell the dataset kind … found columns
// [conversations]": both columns were there and were lists.
TEST(DatasetKind, EmptyListInRowZeroIsNamed) {
  EXPECT_EQ(error_of([] {
              detect(R"({"prompt": [], "completion": [{"role": "assistant", "content": "b"}]})");
            }),
            "d.jsonl: row 0: column 'prompt' is an empty list; the dataset kind is told from row "
            "0, whose prompt must be a string or a non-empty list of messages with 'role' and "
            "'content'");
  EXPECT_EQ(error_of([] { detect(R"({"conversations": [], "id": 1})"); }),
            "d.jsonl: row 0: column 'conversations' is an empty list; the dataset kind is told "
            "from row 0, whose conversations must be a non-empty list of messages with 'from' and "
            "'value'");
  // A text column still wins over an empty conversations list, as in TRL.
  EXPECT_EQ(detect(R"({"conversations": [], "text": "a"})").kind, DatasetKind::kLanguageModeling);
}

// Pre-tokenised rows were refused; TRL trains them as they are (`is_processed`), and an
// `input_ids` column wins over every text column, as there.
TEST(DatasetKind, InputIdsMakePreTokenisedWhateverElseTheRowHas) {
  EXPECT_EQ(detect(R"({"input_ids": [1, 2], "attention_mask": [1, 1]})").kind,
            DatasetKind::kPreTokenised);
  EXPECT_EQ(detect(R"({"prompt": "a", "completion": "b", "input_ids": [1, 2]})").kind,
            DatasetKind::kPreTokenised);
  EXPECT_EQ(detect(R"({"messages": [], "text": "a", "input_ids": []})").kind,
            DatasetKind::kPreTokenised);
  EXPECT_EQ(to_string(DatasetKind::kPreTokenised), "pre-tokenised");
}

SftRow row_of(const char* json, const DatasetFormat& f, int64_t r = 0) {
  ExtractedRow v = extract_row(Json::parse(json), f, r, "d.jsonl");
  if (v.skipped) throw std::runtime_error("skipped");
  return v.row;
}

TEST(ExtractRow, PlainAndConversational) {
  const DatasetFormat pc{DatasetKind::kPromptCompletion, "text", false};
  const SftRow a = row_of(R"({"prompt": "Q?", "completion": " A.", "extra": 1})", pc);
  EXPECT_EQ(a.prompt, "Q?");
  EXPECT_EQ(a.completion, " A.");
  EXPECT_TRUE(a.tools.is_null());
  const DatasetFormat conv{DatasetKind::kConversationalPromptCompletion, "text", false};
  const SftRow b = row_of(
      R"({"prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
          "completion": [{"role": "assistant", "content": "x", "weight": 1}],
          "tools": "[{\"name\": \"f\", \"default\": null}]"})",
      conv);
  EXPECT_EQ(b.prompt_messages.size(), 2u);
  EXPECT_EQ(b.completion_messages[0]["weight"], 1);
  // Cleaned of null-valued keys as the same value given as a list is (remove_none_values).
  EXPECT_EQ(b.tools, Json::parse(R"([{"name": "f"}])"));
}

// A column of JSON held as a string (tools, chat_template_kwargs) with a NUL in it: the parser
// stopped there and the rest of the string was dropped without a word.
TEST(ExtractRow, JsonStringColumnWithNulIsRefused) {
  const DatasetFormat pc{DatasetKind::kPromptCompletion, "text", false};
  EXPECT_EQ(error_of([&] {
              row_of(R"({"prompt": "Q", "completion": "A",
                         "tools": "[{\"name\": \"f\"}]\u0000[{\"name\": \"g\"}]"})",
                     pc, 2);
            }),
            "d.jsonl: row 2: column 'tools' is a string of JSON with a NUL byte at offset 15");
}

// TRL's tool-calling rows: an assistant message with `tool_calls` and no content (absent or null)
// is kept as it is for the template; without tool_calls (or from another role) it is an error.
TEST(ExtractRow, ToolCallMessagesMayHaveNoContent) {
  const DatasetFormat msgs{DatasetKind::kConversationalLanguageModeling, "text", false};
  const SftRow r = row_of(
      R"({"messages": [{"role": "user", "content": "weather?"},
          {"role": "assistant", "tool_calls": [{"type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
          {"role": "tool", "content": "sunny"},
          {"role": "assistant", "content": null, "tool_calls": [{"type": "function",
            "function": {"name": "f", "arguments": {}}}]},
          {"role": "assistant", "content": "It is sunny."}]})",
      msgs);
  ASSERT_EQ(r.completion_messages.size(), 5u);
  EXPECT_FALSE(r.completion_messages[1].contains("content"));
  EXPECT_TRUE(r.completion_messages[3]["content"].is_null());
  EXPECT_EQ(r.completion_messages[1]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(error_of([&] { row_of(R"({"messages": [{"role": "assistant"}]})", msgs, 3); }),
            "d.jsonl: row 3: column 'messages', message 0 has no 'content'");
  EXPECT_EQ(error_of([&] {
              row_of(R"({"messages": [{"role": "user", "content": null, "tool_calls": [{}]}]})",
                     msgs, 4);
            }),
            "d.jsonl: row 4: column 'messages', message 0: 'content' is null, expected a string");
}

TEST(ExtractRow, ShareGptConvertedToRoleContent) {
  const DatasetFormat sg{DatasetKind::kConversationalLanguageModeling, "text", true};
  const SftRow r = row_of(
      R"({"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "h", "lang": "en"},
                            {"from": "gpt", "value": "g"}]})",
      sg);
  EXPECT_EQ(r.completion_messages.dump(),
            R"([{"role":"system","content":"s"},{"lang":"en","role":"user","content":"h"},)"
            R"({"role":"assistant","content":"g"}])");
  EXPECT_EQ(
      error_of([&] { row_of(R"({"conversations": [{"from": "bot", "value": "x"}]})", sg, 12); }),
      "d.jsonl: row 12: column 'conversations', message 0 has unknown 'from' value 'bot'; "
      "expected human, gpt, system (or user, assistant, tool, ipython, developer)");
}

// Skipped rows are still extracted: under packing they are formatted for their place in TRL's bins.
TEST(ExtractRow, EmptyCompletionsAndMessagesAreSkippedButExtracted) {
  const DatasetFormat pc{DatasetKind::kPromptCompletion, "text", false};
  ExtractedRow v =
      extract_row(Json::parse(R"({"prompt": "p", "completion": "", "text": "t"})"), pc, 3, "d");
  EXPECT_EQ(v.skipped, DropReason::kEmptyCompletion);
  EXPECT_EQ(v.row.prompt, "p");
  EXPECT_EQ(v.row.completion, "");
  EXPECT_EQ(v.row.text_column, "t");  // TRL's add_eos gives the EOS to it
  const DatasetFormat conv{DatasetKind::kConversationalPromptCompletion, "text", false};
  v = extract_row(
      Json::parse(R"({"prompt": [{"role": "user", "content": "p"}], "completion": []})"), conv, 3,
      "d");
  EXPECT_EQ(v.skipped, DropReason::kEmptyCompletion);
  EXPECT_EQ(v.row.prompt_messages.size(), 1u);
  EXPECT_TRUE(v.row.completion_messages.is_array() && v.row.completion_messages.empty());
  const DatasetFormat msgs{DatasetKind::kConversationalLanguageModeling, "text", false};
  v = extract_row(Json::parse(R"({"messages": []})"), msgs, 0, "d");
  EXPECT_EQ(v.skipped, DropReason::kEmptyMessages);
  const DatasetFormat text{DatasetKind::kLanguageModeling, "text", false};
  v = extract_row(Json::parse(R"({"text": ""})"), text, 0, "d");
  EXPECT_EQ(v.skipped, DropReason::kEmptyText);
  EXPECT_EQ(v.row.completion, "");
  v = extract_row(Json::parse(R"({"text": "x"})"), text, 0, "d");
  EXPECT_FALSE(v.skipped);
  EXPECT_EQ(to_string(DropReason::kNoTargetAfterTruncation), "no_target_after_truncation");
}

TEST(ExtractRow, WrongTypesAndRolesNameTheRow) {
  const DatasetFormat msgs{DatasetKind::kConversationalLanguageModeling, "text", false};
  EXPECT_EQ(error_of([&] { row_of(R"({"messages": [{"role": "user", "content": 5}]})", msgs, 7); }),
            "d.jsonl: row 7: column 'messages', message 0: 'content' is number, expected a string");
  EXPECT_EQ(error_of([&] {
              row_of(R"({"messages": [{"role": "user", "content": "a"},
                  {"role": "assistant", "content": [{"type": "text", "text": "b"}]}]})",
                     msgs, 8);
            }),
            "d.jsonl: row 8: column 'messages', message 1: 'content' is array, expected a string; "
            "a list of content parts is not supported: join the text parts into one string");
  EXPECT_EQ(
      error_of([&] {
        row_of(
            R"({"messages": [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}]})",
            msgs, 41);
      }),
      "d.jsonl: row 41: column 'messages', message 1 has unknown role 'robot'; expected "
      "system, user, assistant, tool, ipython or developer");
  // Llama 3.1's tool-result role and OpenAI's developer role are passed to the template.
  for (const char* role : {"ipython", "developer"}) {
    const std::string json =
        std::string(R"({"messages": [{"role": ")") + role + R"(", "content": "a"}]})";
    const SftRow row = row_of(json.c_str(), msgs, 3);
    EXPECT_EQ(row.completion_messages[0]["role"], role);
  }
  EXPECT_EQ(error_of([&] { row_of(R"({"messages": [{"content": "a"}]})", msgs, 2); }),
            "d.jsonl: row 2: column 'messages', message 0 has no 'role'");
  EXPECT_EQ(error_of([&] { row_of(R"({"messages": "hi"})", msgs, 2); }),
            "d.jsonl: row 2: column 'messages' is string, expected a list of messages");
  const DatasetFormat pc{DatasetKind::kPromptCompletion, "text", false};
  EXPECT_EQ(error_of([&] { row_of(R"({"prompt": "a", "completion": null})", pc, 9); }),
            "d.jsonl: row 9: column 'completion' is missing or null, expected a string (TRL fails "
            "on such a row too; in a JSON file a row that lacks a column other rows have reads as "
            "null there, as HF datasets reads it)");
  EXPECT_EQ(error_of([&] { row_of(R"({"prompt": "a"})", pc, 5); }),
            "d.jsonl: row 5: column 'completion' is missing or null, expected a string (TRL fails "
            "on such a row too; in a JSON file a row that lacks a column other rows have reads as "
            "null there, as HF datasets reads it)");
}

TEST(Packing, TrlDocstringExample) {
  // trl.pack_dataset's documented example: lengths [5, 2, 3, 1], seq_length 4, "bfd" truncates
  // the first to 4 → bins [[0], [2, 3], [1]] with seq_lengths [[4], [3, 1], [2]].
  const std::vector<int64_t> lengths{4, 2, 3, 1};
  EXPECT_EQ(pack_bfd(lengths, 4), (std::vector<std::vector<int64_t>>{{0}, {2, 3}, {1}}));
}

TEST(Packing, BestFitTiesAndErrors) {
  // 6 then 6 open two bins (space 4, 4); 4 goes to the first bin reaching space 4; 3 to the
  // second (space 4 → 1); 1 to the second (best fit: space 1), 2 opens a third bin.
  const std::vector<int64_t> lengths{6, 1, 4, 6, 3, 2};
  EXPECT_EQ(pack_bfd(lengths, 10), (std::vector<std::vector<int64_t>>{{0, 2}, {3, 4, 1}, {5}}));
  EXPECT_EQ(error_of([] {
              pack_bfd(std::vector<int64_t>{3, 11}, 10);
            }),
            "packing: example 1 has 11 tokens, outside [1, 10]");
}

TEST(Packing, EqualsTrlOnNoRobotsLengths) {
  // Lengths of TRL's no_robots messages examples (max_length 1024), cut to 512 as "bfd" does,
  // packed into 512-token bins, must give exactly TRL's packed samples (seq_lengths per bin, in
  // order).
  const Json messages = Json::parse(read_file_bytes(test_data("sft/messages.golden.json")));
  const Json packed = Json::parse(read_file_bytes(test_data("sft/packed_messages.golden.json")));
  std::vector<int64_t> lengths;
  for (const auto& e : messages["examples"]) {
    lengths.push_back(std::min<int64_t>(e[1].get<int64_t>(), 512));
  }
  ASSERT_EQ(lengths.size(), 500u);
  const auto bins = pack_bfd(lengths, 512);
  ASSERT_EQ(bins.size(), packed["samples"].size());
  std::vector<int64_t> seen;
  for (size_t b = 0; b < bins.size(); ++b) {
    std::vector<int64_t> seq;
    for (const int64_t i : bins[b]) seq.push_back(lengths[i]), seen.push_back(i);
    EXPECT_EQ(seq, packed["samples"][b][0].get<std::vector<int64_t>>()) << "bin " << b;
  }
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> all(500);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(seen, all);
}

// datasets 4.x's map(num_proc=P, batched=True): min(P, rows) contiguous shards (the first
// rows % P one row longer), each in batches of 1000 rows from its start; null/0: one shard.
TEST(Packing, GroupStartsAreDatasetsShardsAndMapBatches) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(packing_group_starts(2500, 1, 1000), (V{0, 1000, 2000}));
  EXPECT_EQ(packing_group_starts(2500, 0, 1000), (V{0, 1000, 2000}));
  EXPECT_EQ(packing_group_starts(2500, 2, 1000), (V{0, 1000, 1250, 2250}));
  EXPECT_EQ(packing_group_starts(2500, 3, 1000), (V{0, 834, 1667}));
  EXPECT_EQ(packing_group_starts(6, 8, 1000), (V{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(packing_group_starts(10, 3, 0), (V{0, 4, 7}));
  EXPECT_EQ(packing_group_starts(0, 4, 1000), (V{0}));
  EXPECT_EQ(error_of([] { packing_group_starts(10, -1, 1000); }),
            "packing groups: num_rows 10, num_proc -1, batch_size 1000 (expected >= 0)");
}

}  // namespace
}  // namespace zt::data
