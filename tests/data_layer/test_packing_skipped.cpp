// Rows zerotune skips before tokenising (empty completion, text or messages) under packing: TRL
// 0.25.1 tokenises and packs them, so zerotune puts stand-ins of their length in the bin packing
// and removes them after; each kept row lands in TRL's bin. Goldens from TRL's own SFTTrainer
// (tests/data/sft/skipped_<case>.golden.json, tools/make_packing_skipped_goldens.py): per bin, its
// source rows, seq_lengths and ids, and TRL's dataset lengths packed and unpacked (transformers'
// len(eval_dataset) / len(train_dataset), which zerotune's speed metrics count). For rows TRL fails
// on, the golden holds TRL's error and its bins and lengths of the file without them.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "data/packing.h"
#include "data/prepare.h"
#include "data/rows.h"
#include "test_util.h"

namespace zt::data {
namespace {

using zt::testing::test_data;

struct Built {
  TokenData data;
  PrepareReport report;
  std::string warnings;  // what the build wrote to stderr
};

Built build(const Json& g, const std::string& name, bool packing) {
  DataOptions o;
  o.dataset = test_data("sft/skipped_" + name + ".jsonl");
  o.num_threads = 2;
  o.packing = packing;
  o.max_length = g["max_length"].get<int64_t>();
  o.dataset_text_field = g["dataset_text_field"].get<std::string>();
  o.dataset_num_proc = g.value("dataset_num_proc", int64_t{1});
  const auto& q = zt::testing::qwen_tokenizer();
  Built b;
  ::testing::internal::CaptureStderr();
  b.data = build_token_data(o, q.tok, q.cfg, &b.report);
  b.warnings = ::testing::internal::GetCapturedStderr();
  return b;
}

// The rows of each sample, and each sample's ids.
std::vector<std::vector<int64_t>> sample_rows(const TokenData& d) {
  std::vector<std::vector<int64_t>> out;
  for (size_t s = 0; s + 1 < d.sample_offsets.size(); ++s)
    out.emplace_back(d.example_rows.begin() + d.sample_offsets[s],
                     d.example_rows.begin() + d.sample_offsets[s + 1]);
  return out;
}
std::vector<int32_t> sample_ids(const TokenData& d, size_t s) {
  return {d.ids.begin() + d.example_offsets[d.sample_offsets[s]],
          d.ids.begin() + d.example_offsets[d.sample_offsets[s + 1]]};
}

// TRL's dataset length (the golden's "trl_lengths", packed or unpacked) is the report's
// trl_num_samples, for the eval set and the train set alike; transformers' num_train_samples of
// num_train_epochs 2.5 is that length × 2.5 (the train summary's rule).
void check_trl_length(const Json& g, const Built& b, const char* mode) {
  SCOPED_TRACE(mode);
  const Json& want = g["trl_lengths"][mode];
  EXPECT_EQ(b.report.trl_num_samples, want["eval_dataset"].get<int64_t>());
  EXPECT_EQ(b.report.trl_num_samples, want["train_dataset"].get<int64_t>());
  EXPECT_EQ(static_cast<double>(b.report.trl_num_samples) * 2.5,
            want["num_train_samples"].get<double>());
  // The stored report (the token cache's) keeps it.
  EXPECT_EQ(PrepareReport::from_json(b.data.report).trl_num_samples, b.report.trl_num_samples);
}

// TRL's bins less the skipped rows (their ids cut out), empty bins left out: zerotune's samples.
// The skipped rows are dropped for `reason`, but for `other_drops` (reason → rows).
void check_bins(const std::string& name, const std::string& reason,
                const std::map<std::string, int64_t>& other_drops = {}) {
  SCOPED_TRACE(name);
  const Json g = Json::parse(read_file_bytes(test_data("sft/skipped_" + name + ".golden.json")));
  const auto skipped = g["skipped"].get<std::vector<int64_t>>();
  const std::set<int64_t> skip(skipped.begin(), skipped.end());
  std::vector<std::vector<int64_t>> want_rows;
  std::vector<std::vector<int32_t>> want_ids;
  for (const auto& bin : g["bins"]) {
    std::vector<int64_t> rows;
    std::vector<int32_t> ids;
    size_t o = 0;
    for (size_t i = 0; i < bin["rows"].size(); ++i) {
      const auto r = bin["rows"][i].get<int64_t>();
      const auto n = bin["seq_lengths"][i].get<size_t>();
      if (!skip.contains(r)) {
        rows.push_back(r);
        for (size_t t = o; t < o + n; ++t) ids.push_back(bin["ids"][t].get<int32_t>());
      }
      o += n;
    }
    if (!rows.empty()) want_rows.push_back(rows), want_ids.push_back(ids);
  }

  int64_t others = 0;
  for (const auto& [r, count] : other_drops) others += count;
  const Built b = build(g, name, /*packing=*/true);
  EXPECT_EQ(b.report.rows_read, g["rows"].get<int64_t>());
  EXPECT_EQ(b.report.dropped.at(reason), static_cast<int64_t>(skipped.size()) - others);
  for (const auto& [r, count] : other_drops) EXPECT_EQ(b.report.dropped.at(r), count) << r;
  if (!other_drops.contains("no_target")) EXPECT_EQ(b.report.dropped.at("no_target"), 0);
  EXPECT_EQ(b.report.examples_kept, g["rows"].get<int64_t>() - static_cast<int64_t>(skip.size()));
  ASSERT_EQ(sample_rows(b.data), want_rows);
  for (size_t s = 0; s < want_ids.size(); ++s)
    EXPECT_EQ(sample_ids(b.data, s), want_ids[s]) << "sample " << s;
  EXPECT_EQ(b.report.num_samples, static_cast<int64_t>(want_rows.size()));
  EXPECT_EQ(g["trl_lengths"]["packed"]["eval_dataset"].get<size_t>(), g["bins"].size());
  check_trl_length(g, b, "packed");

  // Unpacked, the rows are skipped as before: one sample per kept row, nothing said of bins (a
  // row TRL's tokenize_fn fails on is still named: it fails there packed or not).
  const Built u = build(g, name, /*packing=*/false);
  EXPECT_EQ(u.report.dropped.at(reason), static_cast<int64_t>(skipped.size()) - others);
  EXPECT_EQ(u.report.num_samples, u.report.examples_kept);
  check_trl_length(g, u, "unpacked");
  EXPECT_EQ(u.warnings.find("bin"), std::string::npos) << u.warnings;
  EXPECT_EQ(u.warnings.find("TRL 0.25.1 fails on such a row (IndexError") != std::string::npos,
            reason == "empty_messages")
      << u.warnings;
}

// TRL's bins hold a skipped row beside kept ones (so its stand-in is packed and removed).
void check_skipped_rows_share_bins(const std::string& name) {
  const Json g = Json::parse(read_file_bytes(test_data("sft/skipped_" + name + ".golden.json")));
  const auto skipped = g["skipped"].get<std::vector<int64_t>>();
  int shared = 0;
  for (const auto& bin : g["bins"]) {
    const auto rows = bin["rows"].get<std::vector<int64_t>>();
    const auto n_skipped = std::count_if(rows.begin(), rows.end(), [&](int64_t r) {
      return std::find(skipped.begin(), skipped.end(), r) != skipped.end();
    });
    if (n_skipped > 0 && n_skipped < static_cast<int64_t>(rows.size())) ++shared;
  }
  EXPECT_GT(shared, 0) << name;
}

// The fixture tells the rules apart: packing the kept rows alone (the rule before stand-ins for
// skipped rows, lengths from the golden) gives other bins than TRL's less the skipped rows.
void check_leaving_skipped_rows_out_differs(const std::string& name) {
  const Json g = Json::parse(read_file_bytes(test_data("sft/skipped_" + name + ".golden.json")));
  const auto skipped = g["skipped"].get<std::vector<int64_t>>();
  std::map<int64_t, int64_t> length;
  for (const auto& bin : g["bins"])
    for (size_t i = 0; i < bin["rows"].size(); ++i)
      length[bin["rows"][i].get<int64_t>()] = bin["seq_lengths"][i].get<int64_t>();
  std::vector<int64_t> kept, lengths;
  for (const auto& [r, n] : length)
    if (std::find(skipped.begin(), skipped.end(), r) == skipped.end())
      kept.push_back(r), lengths.push_back(n);
  std::vector<std::vector<int64_t>> alone;
  for (const auto& bin : pack_bfd(lengths, g["max_length"].get<int64_t>())) {
    alone.emplace_back();
    for (const int64_t i : bin) alone.back().push_back(kept[static_cast<size_t>(i)]);
  }
  const Built b = build(g, name, /*packing=*/true);
  EXPECT_NE(sample_rows(b.data), alone) << name;
}

// Plain prompt/completion: an empty completion is tok(prompt + EOS) in TRL (add_eos), truncated to
// max_length (row 13 is longer), even when the prompt ends with the EOS (row 22).
TEST(PackingSkippedRows, EmptyPlainCompletionsTakeTheirPlaceInTrlsBins) {
  check_bins("plain_pc", "empty_completion");
  check_skipped_rows_share_bins("plain_pc");
  check_leaving_skipped_rows_out_differs("plain_pc");
}

// Text: an empty text is tok(EOS) in TRL. With the Qwen tokenizer (no BOS) that is one token, which
// bfd places after every kept row (each has >= 2 tokens), so these bins are also those of leaving
// the row out; the case checks the stand-in breaks nothing (a BOS tokenizer makes it 2 tokens).
TEST(PackingSkippedRows, EmptyTextsTakeTheirPlaceInTrlsBins) {
  check_bins("text", "empty_text");
  check_skipped_rows_share_bins("text");
}

// Conversational prompt/completion: `completion: []` is the prompt rendered alone in TRL (when its
// is_conversational reads "prompt"; it fails on "completion"); zerotune warns.
TEST(PackingSkippedRows, EmptyConversationalCompletionsTakeTheirPlaceInTrlsBins) {
  check_bins("conv_pc", "empty_completion");
  check_skipped_rows_share_bins("conv_pc");
  check_leaving_skipped_rows_out_differs("conv_pc");
  const Json g = Json::parse(read_file_bytes(test_data("sft/skipped_conv_pc.golden.json")));
  const Built b = build(g, "conv_pc", true);
  EXPECT_NE(b.warnings.find("skipped_conv_pc.jsonl: 4 conversational row(s) have an empty "
                            "'completion' list (rows 5, 6, 17, 28): TRL 0.25.1 fails on such a "
                            "row when Python's string hash"),
            std::string::npos)
      << b.warnings;
}

// Rows TRL fails on (empty messages: IndexError; no tokens: AssertionError) have no place in its
// bins: zerotune leaves them out, says so, and its bins are TRL's bins of the file without them.
TEST(PackingSkippedRows, RowsTrlFailsOnAreLeftOutAndNamed) {
  const Json m = Json::parse(read_file_bytes(test_data("sft/skipped_messages.golden.json")));
  EXPECT_EQ(m["trl_error"], "IndexError: list index out of range");
  // Its lengths are TRL's of the file without those rows, packed and not (tokenize_fn fails).
  EXPECT_EQ(m["trl_lengths"]["unpacked"]["trl_fails"], true);
  EXPECT_EQ(m["trl_lengths"]["unpacked"]["eval_dataset"], 27);
  check_bins("messages", "empty_messages");
  Built b = build(m, "messages", true);
  EXPECT_NE(b.warnings.find("skipped_messages.jsonl: 3 row(s) have an empty 'messages' list (rows "
                            "4, 11, 12): TRL 0.25.1 fails on such a row (IndexError in "
                            "trl.data_utils.is_conversational"),
            std::string::npos)
      << b.warnings;

  const Json c = Json::parse(read_file_bytes(test_data("sft/skipped_content_field.golden.json")));
  EXPECT_EQ(c["trl_error"].get<std::string>().rfind("AssertionError", 0), 0u) << c["trl_error"];
  check_bins("content_field", "empty_text");
  b = build(c, "content_field", true);
  EXPECT_NE(b.warnings.find("skipped_content_field.jsonl: 2 row(s) tokenise to no tokens (rows 2, "
                            "15): TRL 0.25.1's bfd packing fails on an empty sequence"),
            std::string::npos)
      << b.warnings;
}

// Rows dropped for no target token after truncation (prompts longer than max_length) and for an
// empty completion, some alone in TRL's bins, and a map shard (dataset_num_proc 3: rows 10-19) of
// dropped rows only: TRL keeps them all, so its dataset has 17 bins where zerotune has 7 samples,
// and 30 rows where zerotune has 17 examples. transformers rates the speed metrics by TRL's.
TEST(PackingSkippedRows, BinsOfDroppedRowsAloneCountInTrlsLength) {
  const Json g = Json::parse(read_file_bytes(test_data("sft/skipped_dropped_bins.golden.json")));
  EXPECT_EQ(g["dataset_num_proc"], 3);
  check_bins("dropped_bins", "empty_completion", {{"no_target_after_truncation", 6}});
  check_skipped_rows_share_bins("dropped_bins");
  const Built b = build(g, "dropped_bins", true);
  EXPECT_EQ(b.report.num_samples, 7);
  EXPECT_EQ(b.report.trl_num_samples, 17);
  EXPECT_NE(b.report.summary().find("samples: 7 (TRL 0.25.1's dataset length: 17)"),
            std::string::npos)
      << b.report.summary();
  const Built u = build(g, "dropped_bins", false);
  EXPECT_EQ(u.report.num_samples, 17);
  EXPECT_EQ(u.report.trl_num_samples, 30);
}

// A conversational row whose prompt and completion are both empty: TRL 0.25.1's is_conversational
// reads `[][0]` whichever key it takes (IndexError under every hash seed), so it is left out and
// named; the row with only an empty completion stands in with its prompt rendered alone.
TEST(PackingSkippedRows, ConversationalRowWithEmptyPromptAndCompletionIsLeftOut) {
  zt::testing::TempDir dir;
  const auto f = dir / "both.jsonl";
  zt::testing::write_file(
      f,
      R"({"prompt": [{"role": "user", "content": "hi"}], "completion": [{"role": "assistant", "content": "yo"}]}
{"prompt": [], "completion": []}
{"prompt": [{"role": "user", "content": "bye"}], "completion": []}
)");
  DataOptions o;
  o.dataset = f;
  o.num_threads = 2;
  o.packing = true;
  o.max_length = 64;
  const auto& q = zt::testing::qwen_tokenizer();
  PrepareReport rep;
  ::testing::internal::CaptureStderr();
  const TokenData d = build_token_data(o, q.tok, q.cfg, &rep);
  const std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(rep.dropped.at("empty_completion"), 2);
  EXPECT_EQ(d.example_rows, (std::vector<int64_t>{0}));
  EXPECT_NE(warned.find(f.string() +
                        ": 1 row(s) have an empty 'prompt' and an empty 'completion' list (rows "
                        "1): TRL 0.25.1 fails on such a row (IndexError"),
            std::string::npos)
      << warned;
  EXPECT_NE(warned.find(f.string() +
                        ": 1 conversational row(s) have an empty 'completion' list (rows 2)"),
            std::string::npos)
      << warned;

  // Unpacked, TRL's tokenize_fn calls is_conversational on the row all the same: the warning
  // stays, with what TRL does then.
  o.packing = false;
  ::testing::internal::CaptureStderr();
  rep = PrepareReport{};
  const TokenData u = build_token_data(o, q.tok, q.cfg, &rep);
  const std::string unpacked = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(rep.dropped.at("empty_completion"), 2);
  EXPECT_EQ(u.example_rows, (std::vector<int64_t>{0}));
  EXPECT_NE(unpacked.find(f.string() +
                          ": 1 conversational row(s) have an empty 'completion' list (rows 2): "
                          "TRL 0.25.1 fails on such a row when Python's string hash makes "
                          "is_conversational read 'completion' (IndexError; random per process), "
                          "else it keeps the prompt rendered alone as an example with no target "
                          "token"),
            std::string::npos)
      << unpacked;
  EXPECT_NE(unpacked.find("zerotune skips the row (dropped and counted)"), std::string::npos)
      << unpacked;
}

}  // namespace
}  // namespace zt::data
