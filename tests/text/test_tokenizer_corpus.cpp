// Token ids of every text of the shared datasets equal HF `tokenizers` (golden corpus.tsv: count
// and FNV hash of the ids per text, corpus_ids.jsonl: full ids of a subset).
#include <gtest/gtest.h>

#include "test_tokenizer_util.h"

namespace zt::text::test {
namespace {

struct GoldenRow {
  std::string source;
  int row;
  uint64_t text_hash;
  std::vector<std::pair<size_t, uint64_t>> cols;  // (count, ids hash) per tokenizer column
};

struct Golden {
  std::vector<std::string> columns;
  std::vector<GoldenRow> rows;
};

const Golden& golden() {
  static const Golden g = [] {
    Golden g;
    std::ifstream in(golden_dir() / "corpus.tsv");
    std::string line;
    auto split = [](const std::string& s) {
      std::vector<std::string> out;
      std::stringstream ss(s);
      std::string f;
      while (std::getline(ss, f, '\t')) out.push_back(f);
      return out;
    };
    std::getline(in, line);
    auto header = split(line);
    g.columns.assign(header.begin() + 3, header.end());
    while (std::getline(in, line)) {
      auto f = split(line);
      GoldenRow r{f[0], std::stoi(f[1]), std::stoull(f[2], nullptr, 16), {}};
      for (size_t k = 3; k < f.size(); ++k) {
        auto colon = f[k].find(':');
        r.cols.emplace_back(std::stoull(f[k].substr(0, colon)),
                            std::stoull(f[k].substr(colon + 1), nullptr, 16));
      }
      g.rows.push_back(std::move(r));
    }
    return g;
  }();
  return g;
}

std::vector<std::string> texts_only() {
  std::vector<std::string> t;
  for (const auto& c : corpus_texts()) t.push_back(c.text);
  return t;
}

TEST(TokenizerCorpus, TextsMatchTheGoldenOrder) {
  const auto& g = golden();
  const auto& texts = corpus_texts();
  ASSERT_EQ(g.rows.size(), texts.size());
  ASSERT_EQ(texts.size(), 4584u);  // 3 x 1000 UltraFeedback + 1284 no_robots + 300 C4
  for (size_t i = 0; i < texts.size(); ++i) {
    ASSERT_EQ(g.rows[i].source, texts[i].source) << i;
    ASSERT_EQ(g.rows[i].row, texts[i].row) << i;
    ASSERT_EQ(g.rows[i].text_hash, fnv1a64(texts[i].text)) << i;
  }
}

// Encodes the whole corpus with `name` and compares every text with golden column `column`.
void check_column(const std::string& name, const std::string& column, bool add_special) {
  const auto& g = golden();
  auto col = std::find(g.columns.begin(), g.columns.end(), column) - g.columns.begin();
  ASSERT_LT(size_t(col), g.columns.size()) << column;
  const auto texts = texts_only();
  auto ids = tokenizer(name).encode_batch(texts, 2, add_special);
  ASSERT_EQ(ids.size(), texts.size());
  size_t total = 0, bad = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    total += ids[i].size();
    auto [n, h] = g.rows[i].cols[size_t(col)];
    if (ids[i].size() != n || ids_hash(ids[i]) != h) {
      if (++bad <= 5) {
        ADD_FAILURE() << column << ": text " << i << " (" << g.rows[i].source << " row "
                      << g.rows[i].row << "): " << ids[i].size() << " ids, HF has " << n;
      }
    }
  }
  EXPECT_EQ(bad, 0u) << column << ": texts whose ids differ from HF";
  EXPECT_GT(total, 900000u);  // the corpus is about a million tokens
}

TEST(TokenizerCorpus, Qwen25MatchesHF) { check_column("qwen2.5", "qwen2.5", false); }
TEST(TokenizerCorpus, Qwen3MatchesHF) { check_column("qwen3", "qwen3", false); }
TEST(TokenizerCorpus, Llama3StyleMatchesHF) { check_column("llama3_style", "llama3_style", false); }
TEST(TokenizerCorpus, Llama3StyleWithSpecialTokensMatchesHF) {
  check_column("llama3_style", "llama3_style+special", true);
}
TEST(TokenizerCorpus, Gpt2StyleMatchesHF) { check_column("gpt2_style", "gpt2_style", false); }

TEST(TokenizerCorpus, FullIdsOfASubsetMatchHF) {
  const auto& texts = corpus_texts();
  std::ifstream in(golden_dir() / "corpus_ids.jsonl");
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    Json rec = Json::parse(line);
    size_t i = rec["index"];
    for (const char* name : {"qwen2.5", "llama3_style"}) {
      auto want = rec[name].get<std::vector<int32_t>>();
      auto got = tokenizer(name).encode(texts[i].text);
      ASSERT_EQ(got, want) << name << " text " << i;
    }
    ++n;
  }
  EXPECT_EQ(n, 48u);
}

TEST(TokenizerCorpus, BatchEqualsSingleAndDoesNotDependOnThreads) {
  const auto all = texts_only();
  std::vector<std::string> texts(all.begin(), all.begin() + 300);
  const Tokenizer& tok = tokenizer("qwen2.5");
  auto one = tok.encode_batch(texts, 1);
  auto three = tok.encode_batch(texts, 3);
  ASSERT_EQ(one, three);
  for (size_t i = 0; i < texts.size(); i += 37) EXPECT_EQ(tok.encode(texts[i]), one[i]) << i;
  // The golden says qwen2.5 text 0 is 9 ids; encode_batch on an empty span is empty.
  EXPECT_EQ(one[0].size(), golden().rows[0].cols[0].first);
  EXPECT_TRUE(tok.encode_batch(std::span<const std::string>{}, 2).empty());
}

}  // namespace
}  // namespace zt::text::test
