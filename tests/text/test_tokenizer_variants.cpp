// Less common tokenizer.json components equal HF `tokenizers` (golden variants.json, made with tiny
// trained tokenizers): Split behaviours Removed / MergedWithPrevious / MergedWithNext / Contiguous,
// invert, String patterns, ByteLevel with add_prefix_space + its own regex + offset trimming,
// character-level BPE with unk_token, fuse_unk, byte_fallback, no pre-tokenizer, no decoder.
#include <gtest/gtest.h>

#include "test_tokenizer_util.h"

namespace zt::text::test {
namespace {

TEST(TokenizerVariants, IdsOffsetsAndDecodeMatchHF) {
  Json variants = read_json(golden_dir() / "variants.json");
  ASSERT_EQ(variants.size(), 10u);
  size_t cases = 0;
  for (const auto& v : variants) {
    const std::string name = v["name"];
    TempFile file(v["tokenizer"].dump());
    Tokenizer tok = Tokenizer::load(file.path());
    for (const auto& c : v["cases"]) {
      const std::string text = c["text"];
      SCOPED_TRACE(name + " text: " + Json(text).dump());
      Encoding e = expect_golden_case(tok, c);
      EXPECT_EQ(tok.decode(e.ids), c["decoded"].get<std::string>());
      ++cases;
    }
  }
  EXPECT_EQ(cases, 70u);
}

}  // namespace
}  // namespace zt::text::test
