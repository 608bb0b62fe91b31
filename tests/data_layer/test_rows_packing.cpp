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

// TRL passes every message but the first to the template as it is: an assistant message with
// `tool_calls` and no content (absent or null) is kept, and so is any later message without
// content (the template decides). The first message needs 'role' and 'content' (absent or null
// alike: TRL's remove_none_values drops a null), which TRL's is_conversational reads.
TEST(ExtractRow, LaterMessagesMayHaveNoContent) {
  const DatasetFormat msgs{DatasetKind::kConversationalLanguageModeling, "text", false};
  const SftRow r = row_of(
      R"({"messages": [{"role": "user", "content": "weather?"},
          {"role": "assistant", "tool_calls": [{"type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
          {"role": "tool", "content": "sunny"},
          {"role": "assistant", "content": null, "tool_calls": [{"type": "function",
            "function": {"name": "f", "arguments": {}}}]},
          {"role": "narrator"},
          {"role": "assistant", "content": "It is sunny."}]})",
      msgs);
  ASSERT_EQ(r.completion_messages.size(), 6u);
  EXPECT_FALSE(r.completion_messages[1].contains("content"));
  EXPECT_TRUE(r.completion_messages[3]["content"].is_null());
  EXPECT_EQ(r.completion_messages[4].dump(), R"({"role":"narrator"})");
  EXPECT_EQ(r.completion_messages[1]["tool_calls"][0]["function"]["name"], "get_weather");
  const std::string why =
      ": TRL 0.25.1 reads a row as a conversation only when its first message has 'role' and "
      "'content' (is_conversational), and fails on this one";
  EXPECT_EQ(error_of([&] { row_of(R"({"messages": [{"role": "assistant"}]})", msgs, 3); }),
            "d.jsonl: row 3: column 'messages', message 0 has no 'content' (absent or null)" + why);
  EXPECT_EQ(error_of([&] {
              row_of(R"({"messages": [{"role": "user", "content": null, "tool_calls": [{}]}]})",
                     msgs, 4);
            }),
            "d.jsonl: row 4: column 'messages', message 0 has no 'content' (absent or null)" + why);
  const DatasetFormat conv{DatasetKind::kConversationalPromptCompletion, "text", false};
  EXPECT_EQ(
      error_of([&] {
        row_of(
            R"({"prompt": [{"role": "user", "content": "p"}], "completion": [{"content": "c"}]})",
            conv, 5);
      }),
      "d.jsonl: row 5: column 'completion', message 0 has no 'role' (absent or null): TRL 0.25.1 "
      "reads a row as a conversation only when its first message has 'role' and 'content' "
      "(is_conversational), and fails on this one (or, since it checks 'prompt' or 'completion' "
      "as Python's string hash orders them, renders it as it is)");
}

// ShareGPT: `from` becomes `role` and `value` `content`, after the message's other keys (TRL's
// maybe_convert_to_chatml); human/gpt are mapped to user/assistant (a chosen difference: TRL keeps
// them), any other `from` value is kept as the role, and a value that is a list of parts as it is.
TEST(ExtractRow, ShareGptConvertedToRoleContent) {
  const DatasetFormat sg{DatasetKind::kConversationalLanguageModeling, "text", true};
  const SftRow r = row_of(
      R"({"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "h", "lang": "en"},
                            {"from": "gpt", "value": "g"}, {"from": "bot", "value": [{"type": "text", "text": "b"}]},
                            {"from": "tool"}]})",
      sg);
  EXPECT_EQ(
      r.completion_messages.dump(),
      R"([{"role":"system","content":"s"},{"lang":"en","role":"user","content":"h"},)"
      R"({"role":"assistant","content":"g"},{"role":"bot","content":[{"type":"text","text":"b"}]},)"
      R"({"role":"tool"}])");
  EXPECT_EQ(
      error_of([&] { row_of(R"({"conversations": [{"from": "bot"}]})", sg, 12); }),
      "d.jsonl: row 12: column 'conversations', message 0 has no 'value' (absent or null): TRL "
      "0.25.1 reads a row as a conversation only when its first message has 'from' and 'value' "
      "(is_conversational), and fails on this one");
  // A row of a ShareGPT file already in role/content form is left so and trained, as TRL does.
  EXPECT_EQ(row_of(R"({"conversations": [{"role": "user", "content": "u"}]})", sg)
                .completion_messages.dump(),
            R"([{"role":"user","content":"u"}])");
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

// Content of any type and any string role go to the template as they are (TRL checks neither);
// a message that is no object, or a role that is no string, is refused.
TEST(ExtractRow, WrongTypesAndRolesNameTheRow) {
  const DatasetFormat msgs{DatasetKind::kConversationalLanguageModeling, "text", false};
  const SftRow parts = row_of(R"({"messages": [{"role": "user", "content": 5},
      {"role": "assistant", "content": [{"type": "text", "text": "b"}]},
      {"role": "robot", "content": {"text": "c"}}]})",
                              msgs, 8);
  EXPECT_EQ(parts.completion_messages.dump(),
            R"([{"role":"user","content":5},)"
            R"({"role":"assistant","content":[{"type":"text","text":"b"}]},)"
            R"({"role":"robot","content":{"text":"c"}}])");
  EXPECT_EQ(
      error_of([&] {
        row_of(R"({"messages": [{"role": "user", "content": "a"}, {"role": 7, "content": "b"}]})",
               msgs, 41);
      }),
      "d.jsonl: row 41: column 'messages', message 1: 'role' is number, expected a string");
  EXPECT_EQ(error_of([&] {
              row_of(R"({"messages": [{"role": "user", "content": "a"}, "b"]})", msgs, 42);
            }),
            "d.jsonl: row 42: column 'messages', message 1 is string, expected an object with "
            "'role' and 'content'");
  EXPECT_EQ(error_of([&] { row_of(R"({"messages": [{"content": "a"}]})", msgs, 2); }),
            "d.jsonl: row 2: column 'messages', message 0 has no 'role' (absent or null): TRL "
            "0.25.1 reads a row as a conversation only when its first message has 'role' and "
            "'content' (is_conversational), and fails on this one");
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
