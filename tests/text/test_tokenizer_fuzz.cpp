// 800 seeded random strings (ASCII, Unicode spaces, many scripts, combining marks, emoji,
// added-token text, contractions, random code points): ids and byte offsets equal HF `tokenizers`
// for every tokenizer, with and without special tokens (golden fuzz.jsonl: counts and hashes).
#include <gtest/gtest.h>

#include "test_tokenizer_util.h"

namespace zt::text::test {
namespace {

class Fuzz : public ::testing::TestWithParam<std::string> {};

TEST_P(Fuzz, IdsAndOffsetsMatchHF) {
  const std::string name = GetParam();
  const Tokenizer& tok = tokenizer(name);
  std::ifstream in(golden_dir() / "fuzz.jsonl");
  std::string line;
  size_t n = 0, bad = 0;
  while (std::getline(in, line)) {
    Json row = Json::parse(line);
    const std::string text = row["text"];
    for (bool special : {false, true}) {
      const Json& want = row[name + (special ? "+special" : "")];
      Encoding e = tok.encode_with_offsets(text, special);
      std::vector<int32_t> flat;
      for (auto [a, b] : e.offsets) {
        flat.push_back(int32_t(a));
        flat.push_back(int32_t(b));
      }
      bool ok = e.ids.size() == want[0].get<size_t>() &&
                ids_hash(e.ids) == std::stoull(want[1].get<std::string>(), nullptr, 16) &&
                ids_hash(flat) == std::stoull(want[2].get<std::string>(), nullptr, 16) &&
                tok.encode(text, special) == e.ids;
      if (!ok && ++bad <= 5) {
        ADD_FAILURE() << name << (special ? "+special" : "") << " line " << n + 1 << ": "
                      << Json(text).dump();
      }
    }
    ++n;
  }
  EXPECT_EQ(n, 800u);
  EXPECT_EQ(bad, 0u);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, Fuzz,
                         ::testing::Values("qwen2.5", "qwen3", "llama3_style", "gpt2_style"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (ch == '.') ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace zt::text::test
