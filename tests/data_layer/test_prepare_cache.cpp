// prepare_dataset end to end: the token cache is reused, rebuilt when an option or an input
// changes, and left absent on bad input; the report's counts; every bad-input error of the data
// pipeline (issue "SFT data pipeline" items 3–5).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "data/prepare.h"
#include "data/rows.h"
#include "test_util.h"

namespace zt::data {
namespace {

using zt::testing::error_of;
using zt::testing::shared_data;
using zt::testing::TempDir;
using zt::testing::test_data;
using zt::testing::write_file;

class Prepare : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tok_ = &zt::testing::qwen_tokenizer().tok;
    cfg_ = &zt::testing::qwen_tokenizer().cfg;
  }
  DataOptions options(const std::filesystem::path& dataset) const {
    DataOptions o;
    o.dataset = dataset;
    o.cache_dir = dir_ / "cache";
    o.num_threads = 2;
    return o;
  }
  std::vector<std::string> cache_files() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_ / "cache", ec)) {
      const std::string n = e.path().filename().string();
      if (n.size() < 5 || n.substr(n.size() - 5) != ".lock") out.push_back(n);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string prepare_error(const DataOptions& o) const {
    return error_of([&] { prepare_dataset(o, *tok_, *cfg_); });
  }

  static const text::Tokenizer* tok_;
  static const text::TokenizerConfig* cfg_;
  TempDir dir_;
};
const text::Tokenizer* Prepare::tok_ = nullptr;
const text::TokenizerConfig* Prepare::cfg_ = nullptr;

// Nearest-rank percentile, computed here from TRL's golden lengths.
int64_t nearest_rank(std::vector<int64_t> v, double p) {
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::max<size_t>(rank, 1) - 1];
}

TEST_F(Prepare, CacheReusedAndRebuiltOnOptionChange) {
  const auto sft = shared_data("datasets/ultrafeedback/seed_format/sft.parquet");
  DataOptions o = options(sft);
  PrepareReport r1, r2, r3;
  const PreparedDataset a = prepare_dataset(o, *tok_, *cfg_, &r1);
  EXPECT_FALSE(r1.from_cache);
  const PreparedDataset b = prepare_dataset(o, *tok_, *cfg_, &r2);
  EXPECT_TRUE(r2.from_cache);
  EXPECT_EQ(a.path(), b.path());
  EXPECT_EQ(b.num_tokens(), a.num_tokens());
  EXPECT_EQ(r2.examples_kept, r1.examples_kept);
  EXPECT_EQ(r2.target_tokens, r1.target_tokens);
  EXPECT_EQ(cache_files().size(), 1u);

  // The report agrees with TRL's golden output for this dataset.
  const Json g = Json::parse(read_file_bytes(test_data("sft/plain_pc.golden.json")));
  std::vector<int64_t> lengths;
  int64_t tokens = 0;
  for (const auto& e : g["examples"]) lengths.push_back(e[1]), tokens += e[1].get<int64_t>();
  EXPECT_EQ(r1.dataset_kind, "prompt/completion");
  EXPECT_EQ(r1.rows_read, 199);
  EXPECT_EQ(r1.examples_kept, 196);
  EXPECT_EQ(r1.dropped.at("no_target_after_truncation"), 3);
  EXPECT_EQ(r1.dropped.at("empty_completion"), 0);
  EXPECT_EQ(r1.total_tokens, tokens);
  EXPECT_EQ(r1.length_p50, nearest_rank(lengths, 50));
  EXPECT_EQ(r1.length_p90, nearest_rank(lengths, 90));
  EXPECT_EQ(r1.length_p99, nearest_rank(lengths, 99));
  EXPECT_EQ(r1.length_max, 1024);
  EXPECT_EQ(r1.num_samples, 196);
  EXPECT_EQ(r1.prefix_mismatches, static_cast<int64_t>(g["prefix_mismatch_rows"].size()));
  int64_t targets = 0;
  for (int64_t e = 0; e < a.num_examples(); ++e) {
    const auto t = a.targets(e);
    targets += std::count(t.begin() + 1, t.end(), uint8_t{1});
  }
  EXPECT_EQ(r1.target_tokens, targets);

  // Another max_length: another key, a second cache file, built afresh.
  o.max_length = 512;
  const PreparedDataset c = prepare_dataset(o, *tok_, *cfg_, &r3);
  EXPECT_FALSE(r3.from_cache);
  EXPECT_NE(c.path(), a.path());
  EXPECT_EQ(cache_files().size(), 2u);
  EXPECT_LT(c.num_tokens(), a.num_tokens());
  // Options that do not change the output share the cache.
  o.num_threads = 1;
  o.prefix_mismatch = PrefixMismatch::kError;  // acts only with the positional mask
  PrepareReport r4;
  prepare_dataset(o, *tok_, *cfg_, &r4);
  EXPECT_TRUE(r4.from_cache);
  // Every option that changes the masks or the tokens gets its own file.
  o.prefix_mismatch = PrefixMismatch::kWarn;
  o.completion_mask = CompletionMask::kPositional;
  PrepareReport r5;
  const PreparedDataset e = prepare_dataset(o, *tok_, *cfg_, &r5);
  EXPECT_FALSE(r5.from_cache);
  EXPECT_EQ(r5.completion_mask, "positional");
  EXPECT_EQ(cache_files().size(), 3u);
  EXPECT_EQ(e.num_tokens(), c.num_tokens());  // same ids, other targets
  // Of the 68 rows with a merge token, 62 keep it within 512 tokens and have one target fewer;
  // the prompts of the other 6 are cut before it (tok(prompt) has >= 512 tokens).
  EXPECT_EQ(r3.target_tokens - r5.target_tokens, 62);
  o.truncation_mode = TruncationMode::kKeepEnd;
  prepare_dataset(o, *tok_, *cfg_);
  EXPECT_EQ(cache_files().size(), 4u);
  o.chat_template_kwargs = Json{{"enable_thinking", false}};
  prepare_dataset(o, *tok_, *cfg_);
  EXPECT_EQ(cache_files().size(), 5u);
}

// The example of ../shared/cases/README.md: prompt "Answer:", completion "Certainly" with the
// Qwen2.5 tokenizer. tok(prompt) = [16141, 25] ("Answer", ":"); tok(prompt + completion + EOS) =
// [16141, 55992 (":C"), 7615, 398, 151645]. Current TRL's labels are [-100, 55992, 7615, 398,
// 151645] (4 targets, ":C" included); TRL <= 1.9 masks the first len(tok(prompt)) = 2 tokens.
TEST_F(Prepare, CompletionMaskOfAMergeToken) {
  const auto f = dir_ / "answer.jsonl";
  write_file(f, "{\"prompt\": \"Answer:\", \"completion\": \"Certainly\"}\n");
  DataOptions o = options(f);
  PrepareReport rep;
  TokenData d = build_token_data(o, *tok_, *cfg_, &rep);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{16141, 55992, 7615, 398, 151645}));
  EXPECT_EQ(d.targets, (std::vector<uint8_t>{0, 1, 1, 1, 1}));
  EXPECT_EQ(rep.target_tokens, 4);
  EXPECT_EQ(rep.prefix_mismatch_rows, std::vector<int64_t>{0});  // reported, not an error
  EXPECT_EQ(rep.completion_mask, "prefix");
  o.prefix_mismatch = PrefixMismatch::kError;  // only acts on the positional mask
  EXPECT_EQ(build_token_data(o, *tok_, *cfg_).targets, d.targets);

  o.completion_mask = CompletionMask::kPositional;
  o.prefix_mismatch = PrefixMismatch::kWarn;
  d = build_token_data(o, *tok_, *cfg_, &rep);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{16141, 55992, 7615, 398, 151645}));
  EXPECT_EQ(d.targets, (std::vector<uint8_t>{0, 0, 1, 1, 1}));
  EXPECT_EQ(rep.target_tokens, 3);
  EXPECT_EQ(rep.prefix_mismatch_rows, std::vector<int64_t>{0});
  o.prefix_mismatch = PrefixMismatch::kError;
  EXPECT_EQ(prepare_error(o),
            f.string() +
                ": 1 example(s): the tokenized prompt is not a prefix of the tokenized "
                "prompt+completion (rows 0); the completion mask stays positional "
                "(prefix_mismatch: error)");
}

// truncation_mode: keep_end keeps the last max_length tokens and their target flags.
TEST_F(Prepare, KeepEndTruncation) {
  const auto f = dir_ / "answer.jsonl";
  write_file(f, "{\"prompt\": \"Answer:\", \"completion\": \"Certainly\"}\n");
  DataOptions o = options(f);
  o.max_length = 3;
  EXPECT_EQ(build_token_data(o, *tok_, *cfg_).ids, (std::vector<int32_t>{16141, 55992, 7615}));
  o.truncation_mode = TruncationMode::kKeepEnd;
  PrepareReport rep;
  const TokenData d = build_token_data(o, *tok_, *cfg_, &rep);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{7615, 398, 151645}));
  EXPECT_EQ(d.targets, (std::vector<uint8_t>{1, 1, 1}));
  EXPECT_EQ(rep.truncated, 1);
  EXPECT_EQ(rep.target_tokens, 2);  // position 0 predicts nothing
  // With packing TRL keeps the start whatever the mode (bfd truncates each sequence).
  o.packing = true;
  EXPECT_EQ(build_token_data(o, *tok_, *cfg_).ids, (std::vector<int32_t>{16141, 55992, 7615}));
}

// TRL's add_eos (0.25.1 and current) appends the EOS to a column named "text", else to
// "completion": a dataset_text_field other than "text" gets none, and a prompt/completion row that
// also has a string "text" column gets it on that column (which is not trained), not on the
// completion.
TEST_F(Prepare, EosGoesWhereTrlAddEosPutsIt) {
  const std::vector<int32_t> answer{16141, 55992, 7615, 398};  // "Answer:Certainly"
  std::vector<int32_t> with_eos = answer;
  with_eos.push_back(151645);
  const auto lm = dir_ / "lm.jsonl";
  write_file(lm, "{\"body\": \"Answer:Certainly\", \"text\": \"unused\"}\n");
  DataOptions o = options(lm);
  o.dataset_text_field = "body";
  EXPECT_EQ(build_token_data(o, *tok_, *cfg_).ids, answer);
  write_file(lm, "{\"text\": \"Answer:Certainly\"}\n");
  EXPECT_EQ(build_token_data(options(lm), *tok_, *cfg_).ids, with_eos);

  const auto pc = dir_ / "pc.jsonl";
  write_file(pc,
             "{\"prompt\": \"Answer:\", \"completion\": \"Certainly\", \"text\": \"Answer: "
             "Certainly\"}\n"
             "{\"prompt\": \"Answer:\", \"completion\": \"Certainly\", \"text\": null}\n"
             "{\"prompt\": \"Answer:\", \"completion\": \"Certainly\"}\n"
             // A `text` that already ends with the EOS: add_eos's elif gives the completion one.
             "{\"prompt\": \"Answer:\", \"completion\": \"Certainly\", \"text\": "
             "\"Answer: Certainly<|im_end|>\"}\n");
  const TokenData d = build_token_data(options(pc), *tok_, *cfg_);
  ASSERT_EQ(d.example_offsets, (std::vector<int64_t>{0, 4, 9, 14, 19}));
  EXPECT_EQ(std::vector<int32_t>(d.ids.begin(), d.ids.begin() + 4), answer);
  EXPECT_EQ(std::vector<int32_t>(d.ids.begin() + 4, d.ids.begin() + 9), with_eos);
  EXPECT_EQ(std::vector<int32_t>(d.ids.begin() + 9, d.ids.begin() + 14), with_eos);
  EXPECT_EQ(std::vector<int32_t>(d.ids.begin() + 14, d.ids.end()), with_eos);
}

// TRL trains language-modelling data read from another dataset_text_field without an eos_token
// (add_eos touches only a "text" column, so none is appended); zerotune refused it when the
// tokenizer named no eos_token. Data that does get an EOS still needs one.
TEST_F(Prepare, NoEosTokenIsNeededWhereNoneIsAppended) {
  text::TokenizerConfig no_eos = *cfg_;
  no_eos.eos_token.reset();
  const auto lm = dir_ / "lm.jsonl";
  write_file(lm, "{\"body\": \"Answer:Certainly\"}\n");
  DataOptions o = options(lm);
  o.dataset_text_field = "body";
  ::testing::internal::CaptureStderr();
  const TokenData d = build_token_data(o, *tok_, no_eos);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(d.ids, (std::vector<int32_t>{16141, 55992, 7615, 398}));
  EXPECT_EQ(d.example_offsets, (std::vector<int64_t>{0, 4}));
  EXPECT_NE(err.find("no EOS is appended to the 'body' column (dataset_text_field): TRL's add_eos "
                     "appends the EOS only to a column named 'text', as zerotune does; end the "
                     "texts with one (the tokenizer names no eos_token) to train it"),
            std::string::npos)
      << err;
  write_file(lm, "{\"text\": \"Answer:Certainly\"}\n");
  EXPECT_EQ(error_of([&] {
              build_token_data(options(lm), *tok_, no_eos);
            }).find("/tokenizer_config.json has no eos_token, which "),
            no_eos.dir.string().size())
      << error_of([&] { build_token_data(options(lm), *tok_, no_eos); });
}

// The case ../shared/cases/chat-template-kwargs-ignored: 3 targets per row, [19, 151645, 198]
// ("4", <|im_end|>, "\n") and [21, 151645, 198], with the kwargs from the rows' column or from
// the config (trainer.chat_template_kwargs); a row's own value wins over the config's. Without
// them, the empty <think> block is trained (7 targets).
TEST_F(Prepare, ChatTemplateKwargsCase) {
  const auto& q3 = zt::testing::qwen3_tokenizer();
  const auto targets_of = [&](const DataOptions& o) {
    const TokenData d = build_token_data(o, q3.tok, q3.cfg);
    std::vector<std::vector<int32_t>> out;
    for (size_t e = 0; e + 1 < d.example_offsets.size(); ++e) {
      std::vector<int32_t> t;
      for (int64_t i = d.example_offsets[e]; i < d.example_offsets[e + 1]; ++i)
        if (d.targets[i]) t.push_back(d.ids[i]);
      out.push_back(t);
    }
    return out;
  };
  const std::vector<std::vector<int32_t>> want = {{19, 151645, 198}, {21, 151645, 198}};
  const auto data = zt::testing::shared_case("chat-template-kwargs-ignored/data.jsonl");
  DataOptions o = options(data);
  o.max_length = 64;
  EXPECT_EQ(targets_of(o), want);
  o.chat_template_kwargs = Json{{"enable_thinking", true}};  // the rows' false wins
  EXPECT_EQ(targets_of(o), want);

  std::string plain;  // the same rows without the column
  for (Json r : read_rows(data)) {
    r.erase("chat_template_kwargs");
    plain += r.dump() + "\n";
  }
  write_file(dir_ / "plain.jsonl", plain);
  o.dataset = dir_ / "plain.jsonl";
  o.chat_template_kwargs = Json::object();
  const auto without = targets_of(o);
  ASSERT_EQ(without.size(), 2u);
  EXPECT_EQ(without[0], (std::vector<int32_t>{151667, 271, 151668, 271, 19, 151645, 198}));
  o.chat_template_kwargs = Json{{"enable_thinking", false}};
  EXPECT_EQ(targets_of(o), want);
}

TEST_F(Prepare, ChatTemplateKwargsAndPathErrors) {
  const auto f = dir_ / "bad.jsonl";
  write_file(f,
             "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], "
             "\"chat_template_kwargs\": [1]}\n");
  EXPECT_EQ(prepare_error(options(f)),
            f.string() +
                ":1: row 0: column 'chat_template_kwargs' is array, expected an object of template "
                "variables such as {\"enable_thinking\": false}");
  DataOptions o = options(shared_data("datasets/no_robots/test.parquet"));
  o.chat_template_path = (dir_ / "nowhere").string();
  EXPECT_NE(prepare_error(o).find("chat_template_path: '" + o.chat_template_path +
                                  "' is neither a .jinja/.j2 file nor a tokenizer: "),
            std::string::npos);
  write_file(dir_ / "t.txt", "{{ messages }}");
  o.chat_template_path = (dir_ / "t.txt").string();
  EXPECT_EQ(prepare_error(o), "chat_template_path: '" + o.chat_template_path +
                                  "' is a file but not a Jinja template (.jinja or .j2); expected "
                                  "a template file or a tokenizer directory");
  // An empty or whitespace-only template file is refused, not rendered as "" for every row.
  for (const char* text : {"", " \n\t\r\n"}) {
    write_file(dir_ / "empty.jinja", text);
    o.chat_template_path = (dir_ / "empty.jinja").string();
    EXPECT_EQ(prepare_error(o),
              "chat_template_path: the chat template file '" + o.chat_template_path +
                  "' is empty or only whitespace; expected a Jinja chat template");
  }
  // Qwen3's tokenizer has <think>, </think>, … that Qwen2.5's lacks: TRL would add them and
  // resize the embeddings; zerotune refuses.
  o.chat_template_path = shared_data("tokenizers/qwen3").string();
  const std::string msg = prepare_error(o);
  EXPECT_NE(msg.find("chat_template_path: the tokenizer in " + o.chat_template_path +
                     " has tokens the model's tokenizer lacks ("),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("<think>, </think>"), std::string::npos) << msg;
  EXPECT_TRUE(cache_files().empty());
}

TEST_F(Prepare, CacheRebuiltWhenDatasetChangesOrIsCorrupt) {
  const auto f = dir_ / "d.jsonl";
  write_file(f, "{\"prompt\": \"Hi\", \"completion\": \" there\"}\n");
  PrepareReport r;
  const PreparedDataset a = prepare_dataset(options(f), *tok_, *cfg_, &r);
  EXPECT_FALSE(r.from_cache);
  EXPECT_EQ(a.num_examples(), 1);
  write_file(f,
             "{\"prompt\": \"Hi\", \"completion\": \" there\"}\n"
             "{\"prompt\": \"Yo\", \"completion\": \" you\"}\n");
  const PreparedDataset b = prepare_dataset(options(f), *tok_, *cfg_, &r);
  EXPECT_FALSE(r.from_cache);
  EXPECT_EQ(b.num_examples(), 2);
  // Corrupt the header of the current cache: rejected, rebuilt, same content.
  std::string bytes = read_file_bytes(b.path());
  bytes[50] ^= 0x10;
  write_file(b.path(), bytes);
  EXPECT_NE(error_of([&] { PreparedDataset::open(b.path()); }).find("checksum mismatch"),
            std::string::npos);
  const PreparedDataset c = prepare_dataset(options(f), *tok_, *cfg_, &r);
  EXPECT_FALSE(r.from_cache);
  EXPECT_EQ(c.num_examples(), 2);
  // "Hi" " there" <|im_end|>: the prompt's one token is masked, the rest are targets.
  const auto t = c.targets(0);
  EXPECT_EQ(std::vector<uint8_t>(t.begin(), t.end()), (std::vector<uint8_t>{0, 1, 1}));
  EXPECT_EQ(c.tokens(0).back(), 151645);
}

// A dataset file name of 246 bytes (a legal name) made a cache file name of 283 bytes: the run
// failed with ENAMETOOLONG. The cache name keeps a readable prefix, cut at a character boundary,
// and a hash of the whole name; two such names sharing that prefix get two cache files.
TEST_F(Prepare, LongDatasetNameGetsABoundedCacheName) {
  std::string stem;
  for (int i = 0; i < 120; ++i) stem += "\xC3\xA9";  // é: 240 bytes
  const std::string rows = "{\"prompt\": \"a\", \"completion\": \" b\"}\n";
  write_file(dir_ / (stem + ".jsonl"), rows);
  PrepareReport r1, r2;
  prepare_dataset(options(dir_ / (stem + ".jsonl")), *tok_, *cfg_, &r1);
  prepare_dataset(options(dir_ / (stem + ".jsonl")), *tok_, *cfg_, &r2);
  EXPECT_FALSE(r1.from_cache);
  EXPECT_TRUE(r2.from_cache);
  std::vector<std::string> names = cache_files();
  ASSERT_EQ(names.size(), 1u);
  // 71 whole characters (142 bytes), '~', 16 hex digits, '-', the 32-digit key, ".ztc".
  EXPECT_EQ(names[0].size(), 142u + 1 + 16 + 1 + 32 + 4);
  EXPECT_EQ(names[0].substr(0, 143), stem.substr(0, 142) + "~");
  EXPECT_EQ(names[0], r1.cache_file.filename().string());
  // Another long name with the same first 142 bytes and the same rows: its own cache file.
  const std::string other = stem.substr(0, 200) + "xyz";
  write_file(dir_ / (other + ".jsonl"), rows);
  prepare_dataset(options(dir_ / (other + ".jsonl")), *tok_, *cfg_);
  names = cache_files();
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0].substr(0, 143), names[1].substr(0, 143));
  EXPECT_NE(names[0], names[1]);
}

// The fix for a tokenizer without a chat template is named by its config key.
TEST_F(Prepare, NoChatTemplateNamesTheConfigKey) {
  text::TokenizerConfig bare = *cfg_;
  bare.chat_template.reset();
  bare.named_templates.clear();
  const auto f = dir_ / "m.jsonl";
  write_file(f, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n");
  EXPECT_EQ(error_of([&] { prepare_dataset(options(f), *tok_, bare); }),
            bare.dir.string() +
                ": the tokenizer has no chat template, which conversational data needs (" +
                f.string() +
                "); set trainer.chat_template_path (a .jinja file, or a tokenizer directory "
                "whose chat template to use)");
  const auto p = dir_ / "p.jsonl";
  write_file(p, "{\"prompt\": \"a\", \"completion\": \" b\"}\n");
  DataOptions o = options(p);
  o.prompt_format = PromptFormat::kChat;
  EXPECT_NE(error_of([&] { prepare_dataset(o, *tok_, bare); })
                .find("which prompt_format: chat needs (" + p.string() +
                      "); set trainer.chat_template_path"),
            std::string::npos);
}

TEST_F(Prepare, EmptyCompletionsSkippedAndCounted) {
  const auto f = dir_ / "e.jsonl";
  write_file(f,
             "{\"prompt\": \"a\", \"completion\": \"\"}\n"
             "{\"prompt\": \"b\", \"completion\": \" yes\"}\n"
             "{\"prompt\": \"c\", \"completion\": \"\"}\n"
             "{\"prompt\": \"d\", \"completion\": \" no<|im_end|>\"}\n");
  PrepareReport r;
  const PreparedDataset ds = prepare_dataset(options(f), *tok_, *cfg_, &r);
  EXPECT_EQ(r.rows_read, 4);
  EXPECT_EQ(r.examples_kept, 2);
  EXPECT_EQ(r.dropped.at("empty_completion"), 2);
  EXPECT_EQ(ds.source_row(0), 1);
  EXPECT_EQ(ds.source_row(1), 3);
  // The EOS string is not appended twice.
  const auto ids = ds.tokens(1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 151645), 1);
  EXPECT_NE(r.summary().find("2 empty_completion"), std::string::npos) << r.summary();
}

TEST_F(Prepare, MalformedJsonLineFailsAndLeavesNoCache) {
  const auto f = dir_ / "bad.jsonl";
  write_file(f, "{\"text\": \"ok\"}\n{\"text\": \"broken\"\n");
  const std::string msg = prepare_error(options(f));
  EXPECT_EQ(msg.rfind(f.string() + ":2:", 0), 0u) << msg;
  EXPECT_TRUE(cache_files().empty());
}

TEST_F(Prepare, MissingColumnNamesExpectedAndFound) {
  const auto f = dir_ / "cols.jsonl";
  write_file(f, "{\"instruction\": \"a\", \"output\": \"b\"}\n");
  EXPECT_EQ(prepare_error(options(f)),
            f.string() +
                ":1: cannot tell the dataset kind: expected columns 'prompt' and 'completion', or "
                "'messages', or 'conversations' (from/value), or 'text' (dataset_text_field), "
                "or 'input_ids' (pre-tokenised); found columns [instruction, output]");
  EXPECT_TRUE(cache_files().empty());
}

// A JSON file's columns are the union of its rows' keys (HF datasets' json loader), so TRL decides
// the kind and completion_only_loss on a first row that has every column, null where row 0 lacks
// it; the rows TRL fails on (None.endswith, text=None, torch.tensor(None)) are errors naming
// FILE:LINE, the row and the column. (Checked with datasets 4 + TRL 0.25.1's _prepare_dataset.)
TEST_F(Prepare, ColumnsFirstGivenAfterRowZeroDecideAsInTrl) {
  const auto f = dir_ / "mixed.jsonl";
  const std::string file = f.string();
  const std::string msgs =
      R"("messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])";
  const std::string why =
      " (TRL fails on such a row too; in a JSON file a row that lacks a column other rows have "
      "reads as null there, as HF datasets reads it)";
  // A prompt and a completion in a later row make every row a prompt/completion row (TRL's
  // tokenize_fn tests "prompt" in example); row 0's prompt is null. It was read as messages.
  write_file(f, "{" + msgs + "}\n" + R"({"prompt": "p", "completion": " c"})" + "\n");
  EXPECT_EQ(prepare_error(options(f)),
            file +
                ":1: row 0: column 'prompt' is missing or null, expected a string or a list of "
                "messages: the file has 'prompt' and 'completion' columns, so every row is a "
                "prompt/completion row, and the kind (plain or conversational) is told from row "
                "0's prompt" +
                why);
  // A later row without its prompt (a blank line between: the line is the file's, not row + 1).
  write_file(f, R"({"prompt": "p", "completion": " c"})"
                "\n\n"
                R"({"completion": " d"})"
                "\n");
  EXPECT_EQ(prepare_error(options(f)),
            file + ":3: row 1: column 'prompt' is missing or null, expected a string" + why);
  // A column that is null in every row still counts (TRL: "prompt" in the first row).
  write_file(f, R"({"text": "a", "prompt": null})"
                "\n"
                R"({"text": "b", "completion": "c"})"
                "\n");
  const std::string row0_prompt = prepare_error(options(f));
  EXPECT_EQ(row0_prompt.substr(0, row0_prompt.find(" or a list")),
            file + ":1: row 0: column 'prompt' is missing or null, expected a string");
  // A null messages column is not conversational (TRL's is_conversational): row 0 is a text row,
  // and row 1 has no text.
  write_file(f, R"({"text": "hello"})"
                "\n{" +
                    msgs + "}\n");
  EXPECT_EQ(prepare_error(options(f)),
            file + ":2: row 1: column 'text' is missing or null, expected a string" + why);
  // Messages in row 1 only, no text column: row 0 has no value to tell the kind from.
  write_file(f, R"({"id": 1})"
                "\n"
                R"({"id": 2, )" +
                    msgs + "}\n");
  EXPECT_EQ(prepare_error(options(f)),
            file +
                ":1: row 0: column 'messages' is missing or null, expected a list of messages: "
                "the dataset kind is told from row 0, as TRL tells it from the first row (no text "
                "column 'text' either)" +
                why);
  // A later messages row without its messages.
  write_file(f, "{" + msgs +
                    "}\n"
                    R"({"id": 2})"
                    "\n");
  EXPECT_EQ(
      prepare_error(options(f)),
      file + ":2: row 1: column 'messages' is missing or null, expected a list of messages" + why);
  // A JSON array names the line of the row's '{'; brackets inside strings are not counted.
  const auto a = dir_ / "mixed.json";
  write_file(a,
             "[\n  "
             R"({"prompt": "p", "completion": " c"},)"
             "\n  "
             R"({"prompt": "{[\""})"
             "\n]\n");
  EXPECT_EQ(
      prepare_error(options(a)),
      a.string() + ":3: row 1: column 'completion' is missing or null, expected a string" + why);
  EXPECT_TRUE(cache_files().empty());

  // Columns that are optional for the kind may first appear later: a messages dataset whose
  // `tools` (and an id) start at row 1 trains both rows, as TRL does (example.get("tools")).
  write_file(f, "{" + msgs + "}\n{" + msgs + R"(, "id": 7, "tools": [{"type": "function", )" +
                    R"("function": {"name": "f", "description": "d", "parameters": {"type": )" +
                    R"("object", "properties": {}}}}]})" + "\n");
  PrepareReport r;
  const PreparedDataset ds = prepare_dataset(options(f), *tok_, *cfg_, &r);
  EXPECT_EQ(r.dataset_kind, "conversational language modeling");
  EXPECT_EQ(r.examples_kept, 2);
  EXPECT_EQ(r.prompt_and_completion_in_row_0, false);
  EXPECT_GT(ds.tokens(1).size(), ds.tokens(0).size());  // the tool's schema is rendered in row 1
}

// Any role and content of any type go to the template (as TRL passes them); a row whose first
// message has a null content is refused naming its line (TRL fails on it: KeyError 'text').
TEST_F(Prepare, RolesAndContentGoToTheTemplate) {
  const auto f = dir_ / "roles.jsonl";
  std::string text;
  for (int i = 0; i < 40; ++i) {
    const char* role = i == 33 ? "narrator" : "assistant";
    text += fmt::format(
        "{{\"messages\": [{{\"role\": \"user\", \"content\": \"q{}\"}}, {{\"role\": \"{}\", "
        "\"content\": \"a\"}}]}}\n",
        i, role);
  }
  write_file(f, text);
  PrepareReport r;
  prepare_dataset(options(f), *tok_, *cfg_, &r);
  EXPECT_EQ(r.examples_kept,
            40);  // Qwen2.5's template skips the narrator turn: row 33 trains "q33"
  write_file(f,
             "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}]}\n"
             "{\"messages\": [{\"role\": \"user\", \"content\": null}]}\n");
  EXPECT_EQ(prepare_error(options(f)),
            f.string() +
                ":2: row 1: column 'messages', message 0 has no 'content' (absent or null): TRL "
                "0.25.1 reads a row as a conversation only when its first message has 'role' and "
                "'content' (is_conversational), and fails on this one");
}

TEST_F(Prepare, InvalidUtf8GivesRowAndByteOffset) {
  const auto f = dir_ / "u.jsonl";
  write_file(f, "{\"text\": \"fine\"}\n{\"text\": \"caf\xE9!\"}\n");
  EXPECT_EQ(prepare_error(options(f)),
            f.string() +
                ":2: row 1: invalid UTF-8 at byte offset 13 of the line (byte 30 of "
                "the file)");
  EXPECT_EQ(prepare_error(options(test_data("sft/bad_utf8.parquet"))),
            test_data("sft/bad_utf8.parquet").string() +
                ": row 3, column 'text': invalid UTF-8 at byte offset 4 of the string");
}

TEST_F(Prepare, TruncatedParquetFails) {
  const std::string bytes = read_file_bytes(shared_data("datasets/no_robots/test.parquet"));
  const auto f = dir_ / "cut.parquet";
  write_file(f, bytes.substr(0, bytes.size() - 100));
  const std::string msg = prepare_error(options(f));
  EXPECT_EQ(msg.rfind(f.string() + ": not a readable parquet file: ", 0), 0u) << msg;
  EXPECT_TRUE(cache_files().empty());
}

TEST_F(Prepare, OptionErrors) {
  const auto msgs = shared_data("datasets/no_robots/test.parquet");
  DataOptions o = options(msgs);
  o.assistant_only_loss = true;  // Qwen2.5's own template has no generation blocks
  EXPECT_EQ(prepare_error(o),
            "assistant_only_loss: the chat template (" +
                shared_data("tokenizers/qwen2.5-instruct/tokenizer_config.json").string() +
                ":chat_template) has no {% generation %} … {% endgeneration %} blocks, so "
                "assistant tokens cannot be found in " +
                msgs.string() + "; use a template that marks them");
  o = options(msgs);
  o.prompt_format = PromptFormat::kChat;
  EXPECT_EQ(prepare_error(o),
            "prompt_format: chat needs plain-string 'prompt' and 'completion' columns, but " +
                msgs.string() + " is conversational language modeling data");
  // completion_only_loss: true on data without a prompt: TRL ignores it (no completion mask),
  // so a warning, and every token trained — the same tokens as without it.
  o = options(msgs);
  o.max_length = 64;
  o.completion_only_loss = true;
  ::testing::internal::CaptureStderr();
  const TokenData with_flag = build_token_data(o, *tok_, *cfg_);
  const std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warned.find("completion_only_loss: true has no effect on " + msgs.string() +
                        " (conversational language modeling data): it masks the prompt of "
                        "prompt/completion rows only, and TRL ignores it on this data too, so "
                        "every token is trained"),
            std::string::npos)
      << warned;
  o.completion_only_loss.reset();
  const TokenData without = build_token_data(o, *tok_, *cfg_);
  EXPECT_EQ(with_flag.ids, without.ids);
  EXPECT_EQ(with_flag.targets, without.targets);
  o = options(shared_data("datasets/text/c4_demo.jsonl"));
  o.assistant_only_loss = true;
  EXPECT_EQ(prepare_error(o),
            "assistant_only_loss: true needs conversational data (messages), but " +
                shared_data("datasets/text/c4_demo.jsonl").string() + " is language modeling data");
  // An eval set is not checked (TRL 0.25.1 checks the train set's row 0 alone and runs): it is
  // scored as without the option, with a line that says so.
  o.train_set = false;
  o.max_length = 64;
  ::testing::internal::CaptureStderr();
  const TokenData eval_aol = build_token_data(o, *tok_, *cfg_);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("assistant_only_loss: true does not apply to " +
                      shared_data("datasets/text/c4_demo.jsonl").string() +
                      " (language modeling data, not conversational): TRL checks the train set "
                      "alone and scores this set without assistant masks"),
            std::string::npos)
      << said;
  o.assistant_only_loss = false;
  const TokenData eval_plain = build_token_data(o, *tok_, *cfg_);
  EXPECT_EQ(eval_aol.ids, eval_plain.ids);
  EXPECT_EQ(eval_aol.targets, eval_plain.targets);
  EXPECT_GT(eval_aol.ids.size(), 1000u);
  o = options(msgs);
  o.packing = true;
  o.max_length = std::nullopt;
  EXPECT_EQ(prepare_error(o), "packing: true needs max_length (the bin size), got none");
  o.max_length = 512;
  o.packing_strategy = "wrapped";
  EXPECT_EQ(prepare_error(o),
            "packing_strategy: 'wrapped' is not supported; zerotune implements 'bfd'");
  o = options(shared_data("datasets/text/c4_demo.jsonl"));
  o.eos_token = "<|not a token|>";
  EXPECT_EQ(prepare_error(o), "eos_token: '<|not a token|>' is not a token of the tokenizer in " +
                                  shared_data("tokenizers/qwen2.5-instruct").string());
  EXPECT_TRUE(cache_files().empty());
}

// With the run config's names (cli/data_setup fills them) the option errors name the config file
// and key, the dataset file with its split and key, and where the value came from — the eval set's
// conversational file under an implied prompt_format: chat said none of it.
TEST_F(Prepare, OptionErrorsNameConfigKeyFileAndSplit) {
  const auto msgs = shared_data("datasets/no_robots/test.parquet");
  DataOptions o = options(msgs);
  o.names.source = "sft.yaml";
  o.names.split = "eval";
  o.names.dataset_key = "dataset.eval.path";
  o.names.options["prompt_format"] = {"dataset.prompt_format",
                                      " (not set in sft.yaml: chat is implied by model_name)"};
  o.names.options["completion_only_loss"] = {"trainer.completion_only_loss",
                                             " (given on the command line)"};
  o.names.options["assistant_only_loss"] = {"trainer.assistant_only_loss", ""};
  o.names.options["eos_token"] = {"trainer.eos_token", ""};
  const std::string file = msgs.string() + " (the eval set, dataset.eval.path)";
  DataOptions p = o;
  p.prompt_format = PromptFormat::kChat;
  EXPECT_EQ(prepare_error(p),
            "sft.yaml: dataset.prompt_format: chat needs plain-string 'prompt' and 'completion' "
            "columns, but " +
                file +
                " is conversational language modeling data (not set in sft.yaml: chat is "
                "implied by model_name)");
  p = o;
  p.completion_only_loss = true;
  p.max_length = 64;
  ::testing::internal::CaptureStderr();
  build_token_data(p, *tok_, *cfg_);
  const std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warned.find("sft.yaml: trainer.completion_only_loss: true has no effect on " + file +
                        " (conversational language modeling data): it masks the prompt of "
                        "prompt/completion rows only, and TRL ignores it on this data too, so "
                        "every token is trained (given on the command line)"),
            std::string::npos)
      << warned;
  p = o;
  p.dataset = shared_data("datasets/text/c4_demo.jsonl");
  p.assistant_only_loss = true;
  EXPECT_EQ(prepare_error(p),
            "sft.yaml: trainer.assistant_only_loss: true needs conversational "
            "data (messages), but " +
                p.dataset.string() +
                " (the eval set, dataset.eval.path) is language modeling data");
  p.assistant_only_loss = false;
  p.eos_token = "<|not a token|>";
  EXPECT_EQ(prepare_error(p),
            "sft.yaml: trainer.eos_token: '<|not a token|>' is not a token of "
            "the tokenizer in " +
                shared_data("tokenizers/qwen2.5-instruct").string());
  // The packing errors: each value with its key and where it came from.
  p = o;
  p.names.options["packing"] = {"trainer.packing", " (given on the command line)"};
  p.names.options["max_length"] = {"trainer.max_length", ""};
  p.names.options["packing_strategy"] = {"trainer.packing_strategy", ""};
  p.packing = true;
  p.max_length = std::nullopt;
  EXPECT_EQ(prepare_error(p),
            "sft.yaml: trainer.packing: true (given on the command line) needs trainer.max_length "
            "(the bin size), got none");
  p.max_length = 512;
  p.packing_strategy = "wrapped";
  EXPECT_EQ(prepare_error(p),
            "sft.yaml: trainer.packing_strategy: 'wrapped' is not supported; zerotune implements "
            "'bfd'");
  EXPECT_TRUE(cache_files().empty());
}

TEST_F(Prepare, PrefixMismatchErrorListsRows) {
  DataOptions o = options(shared_data("datasets/ultrafeedback/seed_format/sft.parquet"));
  o.completion_mask = CompletionMask::kPositional;
  o.prefix_mismatch = PrefixMismatch::kError;
  const Json g = Json::parse(read_file_bytes(test_data("sft/plain_pc.golden.json")));
  const auto rows = g["prefix_mismatch_rows"].get<std::vector<int64_t>>();
  ASSERT_GE(rows.size(), 3u);
  const std::string msg = prepare_error(o);
  EXPECT_NE(msg.find(fmt::format("{} example(s): the tokenized prompt is not a prefix of the "
                                 "tokenized prompt+completion (rows {}, {}, {},",
                                 rows.size(), rows[0], rows[1], rows[2])),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("(prefix_mismatch: error)"), std::string::npos) << msg;
}

TEST_F(Prepare, NoExampleLeftIsAnError) {
  const auto f = dir_ / "short.jsonl";
  write_file(f, "{\"prompt\": \"A long prompt of several tokens\", \"completion\": \" x\"}\n");
  DataOptions o = options(f);
  o.max_length = 3;
  EXPECT_EQ(prepare_error(o), f.string() +
                                  ": no example left out of 1 rows (dropped: 1 "
                                  "no_target_after_truncation)");
}

}  // namespace
}  // namespace zt::data
