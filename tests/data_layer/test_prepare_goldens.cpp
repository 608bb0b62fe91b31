// prepare / build_token_data against TRL: input_ids and target flags (labels != -100) equal
// TRL SFTTrainer's preprocessing, example for example, for every dataset kind
// (tests/data/sft/*.golden.json, made by tools/make_sft_goldens.py).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>

#include "data/prepare.h"
#include "data/rows.h"
#include "data/sft_rows.h"
#include "test_util.h"

namespace zt::data {
namespace {

using zt::testing::shared_case;
using zt::testing::shared_data;
using zt::testing::TempDir;
using zt::testing::test_data;
using zt::testing::write_file;

template <typename T>
std::string xxh(std::span<const T> v) {
  return fmt::format("{:016x}", XXH3_64bits(v.data(), v.size() * sizeof(T)));
}

class PrepareGolden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tok_ = &zt::testing::qwen_tokenizer().tok;
    cfg_ = &zt::testing::qwen_tokenizer().cfg;
  }
  static void TearDownTestSuite() {  // also run for FamilyGolden: leave nothing dangling
    delete bos_tok_;
    delete bos_cfg_;
    delete bos_dir_;
    bos_tok_ = nullptr;
    bos_cfg_ = nullptr;
    bos_dir_ = nullptr;
  }

  // The Qwen2.5 tokenizer with a Llama-3-style BOS post-processor (<|box_start|> as BOS), the
  // same files tools/make_sft_goldens.py builds (make_bos_tokenizer).
  static void load_bos_tokenizer() {
    if (bos_tok_ != nullptr) return;
    const auto src = shared_data("tokenizers/qwen2.5-instruct");
    bos_dir_ = new TempDir();
    // nlohmann::json, not the ordered Json: 151k vocab keys would take ordered_map ~1 min.
    nlohmann::json tj = nlohmann::json::parse(read_file_bytes(src / "tokenizer.json"));
    tj["post_processor"] = nlohmann::json::parse(R"({"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<|box_start|>", "type_id": 0}},
                    {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [{"SpecialToken": {"id": "<|box_start|>", "type_id": 0}},
                  {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": "<|box_start|>", "type_id": 1}},
                  {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {"<|box_start|>": {"id": "<|box_start|>", "ids": [151648],
                                              "tokens": ["<|box_start|>"]}}}]})");
    write_file(*bos_dir_ / "tokenizer.json", tj.dump());
    Json tc = Json::parse(read_file_bytes(src / "tokenizer_config.json"));
    tc["bos_token"] = "<|box_start|>";
    write_file(*bos_dir_ / "tokenizer_config.json", tc.dump());
    bos_tok_ = new text::Tokenizer(text::Tokenizer::load(*bos_dir_ / "tokenizer.json"));
    bos_cfg_ = new text::TokenizerConfig(text::load_tokenizer_config(bos_dir_->path()));
  }

  static DataOptions options(const std::filesystem::path& dataset) {
    DataOptions o;
    o.dataset = dataset;
    o.num_threads = 2;
    return o;
  }

  // Writes derived no_robots rows (one JSON object per row) for the derived cases.
  std::filesystem::path derived(const std::string& name,
                                const std::function<Json(const Json&)>& f) {
    std::string text;
    for (const Json& r : read_rows(shared_data("datasets/no_robots/test.parquet"))) {
      text += f(r).dump() + "\n";
    }
    const auto path = dir_ / (name + ".jsonl");
    write_file(path, text);
    return path;
  }

  // Builds in memory and compares with the golden file example by example (tokenizer: `tq`, by
  // default the Qwen2.5 one).
  void check(const std::string& name, const DataOptions& opts, bool bos = false,
             const zt::testing::QwenTokenizer* tq = nullptr) {
    SCOPED_TRACE(name);
    const Json g = Json::parse(read_file_bytes(test_data("sft/" + name + ".golden.json")));
    PrepareReport rep;
    const TokenData d = bos  ? build_token_data(opts, *bos_tok_, *bos_cfg_, &rep)
                        : tq ? build_token_data(opts, tq->tok, tq->cfg, &rep)
                             : build_token_data(opts, *tok_, *cfg_, &rep);
    EXPECT_EQ(rep.rows_read, g["rows_read"].get<int64_t>());
    const auto n = static_cast<int64_t>(d.example_rows.size());
    const auto ids = [&](int64_t e) {
      return std::span<const int32_t>(d.ids).subspan(
          d.example_offsets[e], d.example_offsets[e + 1] - d.example_offsets[e]);
    };
    const auto targets = [&](int64_t e) {
      return std::span<const uint8_t>(d.targets).subspan(
          d.example_offsets[e], d.example_offsets[e + 1] - d.example_offsets[e]);
    };
    if (g.contains("samples")) {  // packed: compare bins
      const Json& samples = g["samples"];
      ASSERT_EQ(static_cast<size_t>(d.sample_offsets.size() - 1), samples.size());
      for (size_t s = 0; s < samples.size(); ++s) {
        std::vector<int64_t> seq;
        for (int64_t e = d.sample_offsets[s]; e < d.sample_offsets[s + 1]; ++e) {
          seq.push_back(d.example_offsets[e + 1] - d.example_offsets[e]);
        }
        const int64_t b = d.example_offsets[d.sample_offsets[s]];
        const int64_t end = d.example_offsets[d.sample_offsets[s + 1]];
        EXPECT_EQ(seq, samples[s][0].get<std::vector<int64_t>>()) << "sample " << s;
        EXPECT_EQ(xxh(std::span<const int32_t>(d.ids).subspan(b, end - b)), samples[s][1]) << s;
        EXPECT_EQ(xxh(std::span<const uint8_t>(d.targets).subspan(b, end - b)), samples[s][2]) << s;
      }
      const Json& full = g["full"][0];
      const std::vector<int32_t> first(d.ids.begin(),
                                       d.ids.begin() + d.example_offsets[d.sample_offsets[1]]);
      EXPECT_EQ(first, full["ids"].get<std::vector<int32_t>>());
      EXPECT_EQ(rep.num_samples, static_cast<int64_t>(samples.size()));
      return;
    }
    // Examples TRL keeps without a target at t >= 1 (TRL 0.25 keeps those emptied by truncation)
    // are the ones zerotune drops (SFT_SEMANTICS §2).
    std::vector<const Json*> ex;
    for (const auto& e : g["examples"])
      if (e.size() < 5 || e[4].get<int64_t>() > 0) ex.push_back(&e);
    std::vector<int64_t> golden_rows, our_rows(d.example_rows.begin(), d.example_rows.end());
    for (const Json* e : ex) golden_rows.push_back((*e)[0].get<int64_t>());
    ASSERT_EQ(our_rows, golden_rows);
    for (int64_t e = 0; e < n; ++e) {
      const Json& ge = *ex[e];
      const std::string row = std::to_string(ge[0].get<int64_t>());
      ASSERT_EQ(ids(e).size(), ge[1].get<size_t>()) << "row " << row;
      EXPECT_EQ(xxh(ids(e)), ge[2]) << "ids of row " << row;
      EXPECT_EQ(xxh(targets(e)), ge[3]) << "targets of row " << row;
    }
    for (const auto& f : g["full"]) {
      const auto it = std::find(our_rows.begin(), our_rows.end(), f["row"].get<int64_t>());
      if (it == our_rows.end()) continue;  // dropped (no target), checked above
      const int64_t e = it - our_rows.begin();
      EXPECT_EQ(std::vector<int32_t>(ids(e).begin(), ids(e).end()),
                f["ids"].get<std::vector<int32_t>>());
      EXPECT_EQ(std::vector<uint8_t>(targets(e).begin(), targets(e).end()),
                f["targets"].get<std::vector<uint8_t>>());
    }
    EXPECT_EQ(rep.prefix_mismatch_rows, g["prefix_mismatch_rows"].get<std::vector<int64_t>>());
    EXPECT_EQ(rep.examples_kept, n);
    EXPECT_EQ(rep.completion_mask, g["options"]["completion_mask"].get<std::string>());
  }

  static const text::Tokenizer* tok_;
  static const text::TokenizerConfig* cfg_;
  static text::Tokenizer* bos_tok_;
  static text::TokenizerConfig* bos_cfg_;
  static TempDir* bos_dir_;
  TempDir dir_;
};
const text::Tokenizer* PrepareGolden::tok_ = nullptr;
const text::TokenizerConfig* PrepareGolden::cfg_ = nullptr;
text::Tokenizer* PrepareGolden::bos_tok_ = nullptr;
text::TokenizerConfig* PrepareGolden::bos_cfg_ = nullptr;
TempDir* PrepareGolden::bos_dir_ = nullptr;

std::string generation_template() {
  return read_file_bytes(test_data("sft/qwen2.5_generation.jinja"));
}

TEST_F(PrepareGolden, PlainPromptCompletion) {
  check("plain_pc", options(shared_data("datasets/ultrafeedback/seed_format/sft.parquet")));
}

// TRL <= 1.9's positional completion mask (dataset.completion_mask: positional), against TRL
// 0.25.1 itself: 68 rows of sft.parquet have a token merging the prompt's end with the
// completion's start, which TRL 0.25 leaves out of the targets and TRL 1.16 trains.
TEST_F(PrepareGolden, PlainPromptCompletionPositional) {
  DataOptions o = options(shared_data("datasets/ultrafeedback/seed_format/sft.parquet"));
  o.completion_mask = CompletionMask::kPositional;
  check("plain_pc.positional", o);
}

TEST_F(PrepareGolden, PromptFormatChatPositional) {
  DataOptions o = options(shared_data("datasets/ultrafeedback/seed_format/sft.parquet"));
  o.prompt_format = PromptFormat::kChat;
  o.completion_mask = CompletionMask::kPositional;
  check("chat_pc.positional", o);
}

TEST_F(PrepareGolden, PromptFormatChat) {
  DataOptions o = options(shared_data("datasets/ultrafeedback/seed_format/sft.parquet"));
  o.prompt_format = PromptFormat::kChat;
  check("chat_pc", o);
}

TEST_F(PrepareGolden, ConversationalMessages) {
  check("messages", options(shared_data("datasets/no_robots/test.parquet")));
}

TEST_F(PrepareGolden, ConversationalMessagesAssistantOnly) {
  DataOptions o = options(shared_data("datasets/no_robots/test.parquet"));
  o.assistant_only_loss = true;
  o.chat_template = generation_template();
  check("messages_assistant_only", o);
}

TEST_F(PrepareGolden, ConversationalMessagesTruncated) {
  DataOptions o = options(shared_data("datasets/no_robots/test.parquet"));
  o.max_length = 256;
  check("messages_max256", o);
}

TEST_F(PrepareGolden, ShareGptEqualsMessages) {
  const auto path = derived("sharegpt", [](const Json& r) {
    Json conv = Json::array();
    for (const auto& m : r["messages"]) {
      const std::string role = m["role"];
      conv.push_back({{"from", role == "user"        ? "human"
                               : role == "assistant" ? "gpt"
                                                     : role},
                      {"value", m["content"]}});
    }
    return Json{{"conversations", conv}};
  });
  check("messages", options(path));
}

Json conv_pc_row(const Json& r) {
  Json prompt = r["messages"];
  prompt.erase(prompt.size() - 1);
  return Json{{"prompt", prompt}, {"completion", Json::array({r["messages"].back()})}};
}

TEST_F(PrepareGolden, ConversationalPromptCompletion) {
  check("conv_pc", options(derived("conv_pc", conv_pc_row)));
}

TEST_F(PrepareGolden, ConversationalPromptCompletionPositional) {
  DataOptions o = options(derived("conv_pc", conv_pc_row));
  o.completion_mask = CompletionMask::kPositional;
  check("conv_pc.positional", o);
}

// truncation_mode: keep_end keeps the last 128 tokens of ids and labels (TRL 1.16); examples whose
// completion alone is longer lose their prompt entirely.
TEST_F(PrepareGolden, ConversationalPromptCompletionKeepEnd) {
  DataOptions o = options(derived("conv_pc", conv_pc_row));
  o.max_length = 128;
  o.truncation_mode = TruncationMode::kKeepEnd;
  check("conv_pc_keep_end", o);
}

// The rows of ../shared/cases/chat-template-kwargs-ignored carry chat_template_kwargs
// {"enable_thinking": false}: the Qwen3 template then puts the empty <think> block in the
// generation prompt, so the targets are the answer, <|im_end|> and "\n" — as TRL renders them.
TEST_F(PrepareGolden, ChatTemplateKwargsColumn) {
  DataOptions o = options(shared_case("chat-template-kwargs-ignored/data.jsonl"));
  o.max_length = 64;
  check("ctk_qwen3", o, false, &zt::testing::qwen3_tokenizer());
  o.completion_mask = CompletionMask::kPositional;
  check("ctk_qwen3.positional", o, false, &zt::testing::qwen3_tokenizer());
}

// TRL cleans every row with remove_none_values before formatting: a null-valued key inside a
// column value (a tool call's arguments, a tools schema — what parquet writes for the struct fields
// a row lacks) is removed at any depth. zerotune rendered them: `{"city": "Paris", "query": null}`
// in the trained tool call. The rows with nulls tokenise exactly as the rows without those keys.
TEST_F(PrepareGolden, NestedNullsAreRemovedAsTrlDoes) {
  const auto rows = [](bool nulls) {
    const std::string n = nulls ? R"(, "query": null)" : "";
    const std::string n2 = nulls ? R"("city": null, )" : "";
    return R"({"messages": [{"role": "user", "content": "Weather in Paris?"},)"
           R"( {"role": "assistant", "content": "", "tool_calls": [{"type": "function",)"
           R"( "function": {"name": "get_weather", "arguments": {"city": "Paris")" +
           n +
           R"(}}}]},)"
           R"( {"role": "tool", "content": "sunny"}, {"role": "assistant", "content": "Sunny."}],)"
           R"( "tools": [{"type": "function", "function": {"name": "get_weather",)"
           R"( "parameters": {"type": "object", "properties": {"city": {"type": "string"})" +
           n +
           R"(}}}}]})"
           "\n"
           R"({"messages": [{"role": "user", "content": "Search cats"},)"
           R"( {"role": "assistant", "content": "", "tool_calls": [{"type": "function",)"
           R"( "function": {"name": "search", "arguments": {)" +
           n2 +
           R"("query": "cats"}}}]},)"
           R"( {"role": "tool", "content": "many"}, {"role": "assistant", "content": "Many."}],)"
           R"( "tools": null})"
           "\n";
  };
  write_file(dir_ / "nulls.jsonl", rows(true));
  write_file(dir_ / "clean.jsonl", rows(false));
  const TokenData with_nulls = build_token_data(options(dir_ / "nulls.jsonl"), *tok_, *cfg_);
  const TokenData clean = build_token_data(options(dir_ / "clean.jsonl"), *tok_, *cfg_);
  ASSERT_EQ(with_nulls.example_rows.size(), 2u);
  EXPECT_EQ(with_nulls.ids, clean.ids);
  EXPECT_EQ(with_nulls.targets, clean.targets);
  EXPECT_EQ(tok_->decode(clean.ids, false).find("null"), std::string::npos);
}

// remove_none_values itself: keys with null values go inside column values at any depth; a null
// column and null list elements stay (TRL's transform sees a batch: each column is a list).
TEST(RemoveNoneValues, InsideColumnValuesOnly) {
  Json row = Json::parse(R"({"a": null, "b": {"x": null, "y": [null, {"z": null, "w": 1}]},
                             "c": [{"k": null}], "d": "s"})");
  remove_none_values(row);
  EXPECT_EQ(row, Json::parse(R"({"a": null, "b": {"y": [null, {"w": 1}]}, "c": [{}], "d": "s"})"));
}

TEST_F(PrepareGolden, ConversationalPromptCompletionAssistantOnly) {
  DataOptions o = options(derived("conv_pc", conv_pc_row));
  o.assistant_only_loss = true;
  o.chat_template = generation_template();
  check("conv_pc_assistant_only", o);
}

// chat_template_path naming a .jinja file replaces the tokenizer's template (TRL's own run used
// chat_template_path too).
TEST_F(PrepareGolden, ChatTemplatePathJinjaFile) {
  DataOptions o = options(shared_data("datasets/no_robots/test.parquet"));
  o.assistant_only_loss = true;
  o.chat_template_path = test_data("sft/qwen2.5_generation.jinja").string();
  check("messages_assistant_only", o);
}

// chat_template_path naming a tokenizer directory: its template and its EOS (<|endoftext|> here)
// replace the tokenizer's, as TRL's clone_chat_template does; plain completions then end with
// <|endoftext|>. The directory is built as tools/make_sft_goldens.py builds it.
TEST_F(PrepareGolden, ChatTemplatePathTokenizerDirectory) {
  const auto src = shared_data("tokenizers/qwen2.5-instruct");
  const auto clone = dir_ / "clone";
  std::filesystem::create_directories(clone);
  std::filesystem::copy_file(src / "tokenizer.json", clone / "tokenizer.json");
  Json tc = Json::parse(read_file_bytes(src / "tokenizer_config.json"));
  tc["eos_token"] = "<|endoftext|>";
  tc["chat_template"] = generation_template();
  write_file(clone / "tokenizer_config.json", tc.dump());
  // The first 40 rows of sft.parquet, as the golden.
  std::string text;
  const std::vector<Json> rows =
      read_rows(shared_data("datasets/ultrafeedback/seed_format/sft.parquet"));
  for (size_t r = 0; r < 40; ++r) text += rows[r].dump() + "\n";
  write_file(dir_ / "sft40.jsonl", text);
  DataOptions o = options(dir_ / "sft40.jsonl");
  o.chat_template_path = clone.string();
  check("plain_pc_clone", o);
  const TokenData d = build_token_data(o, *tok_, *cfg_);
  EXPECT_EQ(d.ids[d.example_offsets[1] - 1], 151643);  // <|endoftext|> ends example 0
}

TEST_F(PrepareGolden, PlainText) {
  check("text", options(shared_data("datasets/text/c4_demo.jsonl")));
}

TEST_F(PrepareGolden, JsonArrayMessages) {
  check("kto_messages", options(shared_data("datasets/messages/kto_en_demo.json")));
}

TEST_F(PrepareGolden, PackedBestFitDecreasing) {
  DataOptions o = options(shared_data("datasets/no_robots/test.parquet"));
  o.packing = true;
  o.max_length = 512;
  check("packed_messages", o);
}

// TRL tokenises plain text with add_special_tokens=True (a BOS per call) and chat-template output
// without; a tokenizer whose post-processor adds a BOS shows both.
TEST_F(PrepareGolden, BosPostProcessorPlainPromptCompletion) {
  load_bos_tokenizer();
  check("bos_plain_pc", options(shared_data("datasets/ultrafeedback/seed_format/sft.parquet")),
        true);
}

TEST_F(PrepareGolden, BosPostProcessorPlainPromptCompletionPositional) {
  load_bos_tokenizer();
  DataOptions o = options(shared_data("datasets/ultrafeedback/seed_format/sft.parquet"));
  o.completion_mask = CompletionMask::kPositional;
  check("bos_plain_pc.positional", o, true);
}

TEST_F(PrepareGolden, BosPostProcessorText) {
  load_bos_tokenizer();
  check("bos_text", options(shared_data("datasets/text/c4_demo.jsonl")), true);
}

TEST_F(PrepareGolden, BosPostProcessorMessages) {
  load_bos_tokenizer();
  check("bos_messages", options(shared_data("datasets/no_robots/test.parquet")), true);
}

// ---- model families (tools/make_family_sft_goldens.py): each family's chat template and
// tokenizer through the whole pipeline, equal to TRL 1.16, on the first 8 rows of each dataset.
// Families without a tokenizer file here use another family's (tools/family_chat_cases.py).

// The tokenizer `tok` (tests/data/families/<tok>) with the family's tokenizer_config.json and
// chat_template.jinja (tests/data/families/chat/<family>), loaded once per test binary.
const zt::testing::QwenTokenizer& family_tokenizer(const std::string& family,
                                                   const std::string& tok) {
  static std::map<std::string, std::unique_ptr<zt::testing::QwenTokenizer>> cache;
  auto& slot = cache[family + "|" + tok];
  if (!slot) {
    slot = std::make_unique<zt::testing::QwenTokenizer>(zt::testing::QwenTokenizer{
        text::Tokenizer::load(test_data("families/" + tok + "/tokenizer.json")),
        text::load_tokenizer_config(test_data("families/chat/" + family))});
  }
  return *slot;
}

class FamilyGolden : public PrepareGolden {
 protected:
  // Llama 3.x and SmolLM3 print today's date: pinned to 26 Jul 2024 as in the goldens.
  void SetUp() override { ::setenv("SOURCE_DATE_EPOCH", "1721952000", 1); }
  void TearDown() override { ::unsetenv("SOURCE_DATE_EPOCH"); }

  // The first 8 rows of the case's dataset as a JSONL file, shaped as the golden script shapes
  // them.
  std::filesystem::path case_rows(const std::string& c) {
    const bool plain = c == "plain_pc";
    const std::vector<Json> rows =
        read_rows(plain ? shared_data("datasets/ultrafeedback/seed_format/sft.parquet")
                        : shared_data("datasets/no_robots/test.parquet"));
    std::string text;
    for (size_t r = 0; r < 8; ++r) {
      if (plain) {
        text += rows[r].dump() + "\n";
      } else if (c == "conv_pc") {
        text += conv_pc_row(rows[r]).dump() + "\n";
      } else {
        text += Json{{"messages", rows[r]["messages"]}}.dump() + "\n";
      }
    }
    const auto path = dir_ / (c + ".jsonl");
    write_file(path, text);
    return path;
  }

  // `chat`: the directory of the family's template (default: the family's own).
  void check_family(const std::string& family, const std::string& tok,
                    const std::vector<std::string>& cases, const std::string& chat = "") {
    const std::string dir = chat.empty() ? family : chat;
    const auto& t = tok == "qwen3" ? zt::testing::qwen3_tokenizer() : family_tokenizer(dir, tok);
    for (const std::string& c : cases) {
      DataOptions o = options(case_rows(c));
      if (c == "messages_assistant_only") {
        o = options(case_rows("messages"));
        o.assistant_only_loss = true;
        const auto training = test_data("families/chat/" + dir + "/training.jinja");
        if (std::filesystem::exists(training)) o.chat_template = read_file_bytes(training);
      }
      check("fam_" + family + "_" + c, o, false, &t);
    }
  }
};

TEST_F(FamilyGolden, Qwen3) { check_family("qwen3", "qwen3", {"messages", "conv_pc"}); }
TEST_F(FamilyGolden, Llama32) {
  check_family("llama3_2", "llama3.2", {"messages", "conv_pc", "plain_pc"});
}
TEST_F(FamilyGolden, Llama31) { check_family("llama3_1", "llama3.2", {"messages"}); }
// Mistral v0.3's template on its SentencePiece tokenizer, Metaspace (v0.3's file) and legacy
// Prepend/Replace layouts: plain prompt/completion shows the BOS and the "▁" prefix rules.
TEST_F(FamilyGolden, Mistral) {
  check_family("mistral", "mistral_v3", {"messages", "conv_pc", "plain_pc"});
}
TEST_F(FamilyGolden, MistralLegacyTokenizer) {
  check_family("mistral_legacy", "mistral_v3_legacy", {"messages", "plain_pc"}, "mistral");
}
// Gemma 3's template (raise_exception role checks, system text folded into the first turn) on the
// Mistral vocabulary in Gemma's tokenizer layout; assistant-only with TRL's gemma3 training
// template.
TEST_F(FamilyGolden, Gemma3) {
  check_family("gemma3", "gemma_style",
               {"messages", "conv_pc", "plain_pc", "messages_assistant_only"});
}
TEST_F(FamilyGolden, Olmo2) { check_family("olmo2", "llama3.2", {"messages", "conv_pc"}); }
// SmolLM3's template (/think and /no_think system handling, today's date, {% generation %}).
TEST_F(FamilyGolden, SmolLM3) {
  check_family("smollm3", "llama3.2", {"messages", "messages_assistant_only"});
}
TEST_F(FamilyGolden, Phi3) {
  check_family("phi3", "phi3_style", {"messages", "conv_pc", "plain_pc"});
}
TEST_F(FamilyGolden, Phi4Mini) { check_family("phi4_mini", "llama3.2", {"messages", "conv_pc"}); }

// ---- message shapes TRL 0.25.1 passes to the chat template as they are
// (tools/make_message_shape_goldens.py, tests/data/sft/shapes/): content given as a list of text
// parts, roles of any name, a later message without content — the ids and targets of every row
// equal TRL's — and the files TRL fails on, which zerotune refuses naming the row.
class ShapeGolden : public FamilyGolden {
 protected:
  // Builds the case's JSONL file with the golden's tokenizer and options: the error, or "" after
  // comparing every example with TRL's.
  std::string check_shape(const std::string& name) {
    SCOPED_TRACE(name);
    const Json g = Json::parse(read_file_bytes(test_data("sft/shapes/" + name + ".golden.json")));
    const std::string tok = g["tokenizer"].get<std::string>();
    const auto& t = tok == "qwen2.5-instruct" ? zt::testing::qwen_tokenizer()
                    : tok == "gemma3"         ? family_tokenizer("gemma3", "gemma_style")
                                              : family_tokenizer("llama3_2", "llama3.2");
    DataOptions o = options(test_data("sft/shapes/" + name + ".jsonl"));
    o.max_length = std::nullopt;  // as the golden's SFTConfig(max_length=None)
    if (g["options"].value("assistant_only_loss", false)) {
      o.assistant_only_loss = true;
      o.chat_template = read_file_bytes(test_data("families/chat/gemma3/training.jinja"));
    }
    PrepareReport rep;
    TokenData d;
    try {
      d = build_token_data(o, t.tok, t.cfg, &rep);
    } catch (const std::exception& e) {
      EXPECT_TRUE(g.contains("trl_error")) << e.what();
      return e.what();
    }
    EXPECT_FALSE(g.contains("trl_error")) << g.value("trl_error", "");
    const Json& ex = g["examples"];
    EXPECT_EQ(rep.examples_kept, static_cast<int64_t>(ex.size()));
    if (d.example_rows.size() != ex.size()) {
      ADD_FAILURE() << "examples: " << d.example_rows.size() << ", TRL: " << ex.size();
      return "";
    }
    for (size_t e = 0; e < ex.size(); ++e) {
      EXPECT_EQ(d.example_rows[e], ex[e]["row"].get<int64_t>());
      const auto b = d.example_offsets[e], end = d.example_offsets[e + 1];
      EXPECT_EQ(std::vector<int32_t>(d.ids.begin() + b, d.ids.begin() + end),
                ex[e]["ids"].get<std::vector<int32_t>>())
          << "row " << e;
      EXPECT_EQ(std::vector<uint8_t>(d.targets.begin() + b, d.targets.begin() + end),
                ex[e]["targets"].get<std::vector<uint8_t>>())
          << "row " << e;
    }
    return "";
  }
  // The golden's TRL error, without its exception type ("TypeError: …" → "…").
  static std::string trl_message(const std::string& name) {
    const Json g = Json::parse(read_file_bytes(test_data("sft/shapes/" + name + ".golden.json")));
    const std::string e = g["trl_error"].get<std::string>();
    return e.substr(e.find(": ") + 2);
  }
  static std::string file(const std::string& name) {
    return test_data("sft/shapes/" + name + ".jsonl").string();
  }
};

TEST_F(ShapeGolden, ContentPartsAreRenderedByTheTemplate) {
  for (const char* c : {"gemma3_parts_messages", "gemma3_parts_assistant_only",
                        "gemma3_parts_conv_pc", "gemma3_parts_sharegpt"})
    EXPECT_EQ(check_shape(c), "");
}

TEST_F(ShapeGolden, AnyRoleIsRendered) {
  EXPECT_EQ(check_shape("llama3_2_roles"), "");
  EXPECT_EQ(check_shape("llama3_2_sharegpt_roles"), "");
}

// A template that cannot render the shape raises its own error (the one transformers raises),
// naming the row; a first message without content is refused, as TRL fails on it (KeyError).
TEST_F(ShapeGolden, TemplateErrorsAndTrlFailuresNameTheRow) {
  const std::string tpl = shared_data("tokenizers/qwen2.5-instruct").string() +
                          "/tokenizer_config.json:chat_template:23: ";
  EXPECT_EQ(trl_message("qwen_parts_template_error"),
            "can only concatenate str (not \"list\") to str");
  EXPECT_EQ(check_shape("qwen_parts_template_error"), file("qwen_parts_template_error") +
                                                          ":2: row 1: " + tpl +
                                                          trl_message("qwen_parts_template_error"));
  EXPECT_EQ(check_shape("qwen_missing_content_template_error"),
            file("qwen_missing_content_template_error") + ":2: row 1: " + tpl +
                trl_message("qwen_missing_content_template_error"));
  EXPECT_EQ(trl_message("qwen_first_message_null_content"), "'text'");
  EXPECT_EQ(check_shape("qwen_first_message_null_content"),
            file("qwen_first_message_null_content") +
                ":2: row 1: column 'messages', message 0 has no 'content' (absent or null): TRL "
                "0.25.1 reads a row as a conversation only when its first message has 'role' and "
                "'content' (is_conversational), and fails on this one");
}

TEST_F(PrepareGolden, OutputIndependentOfThreadCount) {
  DataOptions o = options(shared_data("datasets/ultrafeedback/seed_format/sft.parquet"));
  o.num_threads = 1;
  const TokenData one = build_token_data(o, *tok_, *cfg_);
  o.num_threads = 3;
  const TokenData three = build_token_data(o, *tok_, *cfg_);
  EXPECT_EQ(one.ids, three.ids);
  EXPECT_EQ(one.targets, three.targets);
  EXPECT_EQ(one.example_offsets, three.example_offsets);
  EXPECT_EQ(one.example_rows, three.example_rows);
}

}  // namespace
}  // namespace zt::data
