// The tokenizer's Unicode pieces against independent references: NFC against utf8proc_NFC on
// random strings of combining marks, Hangul jamo, singletons and exclusions; the quick check never
// calls a changing string stable; UTF-8 validation and lossy decoding on hand-made byte strings;
// the byte-level alphabet; and concurrent encode() calls.
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <random>
#include <thread>

#include "test_tokenizer_util.h"
#include "text/normalize.h"
#include "text/unicode.h"

namespace zt::text::test {
namespace {

std::string utf8proc_nfc(const std::string& s) {
  auto* n = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(s.c_str()));
  std::string out(reinterpret_cast<const char*>(n));
  std::free(n);
  return out;
}

TEST(TokenizerUnicode, NfcMatchesUtf8procOnRandomStrings) {
  // Starters, combining marks of several classes, precomposed letters, Hangul L/V/T jamo and
  // syllables, a singleton (U+212B), composition exclusions (U+0958, U+0344), Tamil/Tibetan.
  const char32_t alphabet[] = {'a',    'e',    'o',    'A',    ' ',    0x00E9, 0x00C5, 0x0300,
                               0x0301, 0x0308, 0x0323, 0x0327, 0x0345, 0x031B, 0x0344, 0x1100,
                               0x1161, 0x11A8, 0xAC00, 0xAC01, 0x212B, 0x0958, 0x093C, 0x0915,
                               0x0BC6, 0x0BBE, 0x0F71, 0x0F72, 0x0F73, 0x1E0B, 0x0307, 0x4E2D};
  std::mt19937 rng(1234);
  std::uniform_int_distribution<size_t> pick(0, std::size(alphabet) - 1), len(0, 12);
  NfcNormalizer nfc;
  std::string out;
  std::vector<ByteSpan> align;
  int changed = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s;
    for (size_t n = len(rng); n > 0; --n) unicode::append_utf8(s, alphabet[pick(rng)]);
    std::string want = utf8proc_nfc(s);
    nfc.normalize(s, 7, out, align);
    ASSERT_EQ(out, want) << Json(s).dump();
    ASSERT_EQ(align.size(), out.size());
    for (auto [b, e] : align) {
      ASSERT_LE(7u, b);
      ASSERT_LE(b, e);
      ASSERT_LE(e, 7 + s.size());
    }
    if (nfc.is_stable(s)) {
      ASSERT_EQ(want, s) << "quick check called a changing string stable: " << Json(s).dump();
    }
    changed += want != s;
  }
  EXPECT_GT(changed, 5000);
  EXPECT_TRUE(nfc.is_stable("plain ASCII, Amélie, 中文, 😀"));
  EXPECT_FALSE(nfc.is_stable("e\xCC\x81"));  // e + U+0301
}

TEST(TokenizerUnicode, NfcAlignmentsFollowHF) {
  // HF: a composed character aligns with its first original character ("e\u0301" -> "é" at
  // [0,1)); the composition's removed characters are not covered.
  NfcNormalizer nfc;
  std::string out;
  std::vector<ByteSpan> align;
  nfc.normalize("xe\xCC\x81y", 10, out, align);
  EXPECT_EQ(out, "x\xC3\xA9y");
  std::vector<ByteSpan> want = {{10, 11}, {11, 12}, {11, 12}, {14, 15}};
  EXPECT_EQ(align, want);
  // U+0344 decomposes to two marks (U+0308 U+0301): the inserted one shares the alignment.
  nfc.normalize("\xCD\x84", 0, out, align);
  EXPECT_EQ(out, "\xCC\x88\xCC\x81");
  EXPECT_EQ(align, std::vector<ByteSpan>(4, ByteSpan{0, 2}));
}

TEST(TokenizerUnicode, Utf8ValidationAndLossyDecoding) {
  using unicode::find_invalid_utf8;
  EXPECT_EQ(find_invalid_utf8("plain ascii text, long enough for the 8-byte path"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("\xF4\x8F\xBF\xBF \xEF\xBF\xBD"), std::nullopt);  // U+10FFFF, U+FFFD
  EXPECT_EQ(find_invalid_utf8("abcdefgh\x80"), 8u);
  EXPECT_EQ(find_invalid_utf8("a\xC0\xAF"), 1u);         // overlong
  EXPECT_EQ(find_invalid_utf8("ab\xED\xA0\x80"), 2u);    // surrogate
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("ok\xE4\xBD"), 2u);        // truncated
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(unicode::utf8_lossy("a\xE4\xBD\xE5\xA5\xBD"), "a" + r + "\xE5\xA5\xBD");
  EXPECT_EQ(unicode::utf8_lossy("\xED\xA0\x80"), r + r + r);
  EXPECT_EQ(unicode::utf8_lossy("\xF0\x9F\x98"), r);
  EXPECT_EQ(unicode::utf8_lossy("\xC0\xAF!"), r + r + "!");
}

TEST(TokenizerUnicode, ByteLevelAlphabetIsGpt2s) {
  unicode::ByteLevelAlphabet a;
  EXPECT_EQ(a.byte_to_char[' '], char32_t(0x120));   // 'Ġ'
  EXPECT_EQ(a.byte_to_char['\n'], char32_t(0x10A));  // 'Ċ'
  EXPECT_EQ(a.byte_to_char['A'], char32_t('A'));
  EXPECT_EQ(a.byte_to_char[0xAD], char32_t(0x143));  // the last of the 68 remapped bytes
  for (int b = 0; b < 256; ++b) EXPECT_EQ(a.char_to_byte(a.byte_to_char[b]), uint8_t(b));
  EXPECT_EQ(a.char_to_byte(0x144), std::nullopt);
  EXPECT_EQ(a.char_to_byte(' '), std::nullopt);
}

TEST(TokenizerUnicode, ConcurrentEncodeCallsAgreeWithBatch) {
  const Tokenizer& tok = tokenizer("qwen2.5");
  std::vector<std::string> texts;
  for (size_t i = 0; i < corpus_texts().size(); i += 23) texts.push_back(corpus_texts()[i].text);
  auto want = tok.encode_batch(texts, 1);
  std::vector<std::vector<std::vector<int32_t>>> got(
      4, std::vector<std::vector<int32_t>>(texts.size()));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < texts.size(); ++i) {
        size_t k = (i * 7 + size_t(t) * 13) % texts.size();
        got[size_t(t)][k] = tok.encode(texts[k]);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(got[size_t(t)], want) << "thread " << t;
}

}  // namespace
}  // namespace zt::text::test
