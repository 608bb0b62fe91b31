// The model families' tokenizers equal HF `tokenizers` (goldens
// tests/data/families/<name>.tokens.json from tools/make_family_tokenizers.py): Llama 3.2's
// byte-level BPE and Mistral's SentencePiece BPE models (byte_fallback, unk) converted four ways —
// Prepend/Replace normalizers (Llama 2 / Phi-3 layout), Metaspace "first" without split (Mistral
// v0.3), Metaspace "always" with split and the Metaspace decoder, Gemma's Replace normalizer +
// Split — on adversarial strings (spaces, newlines, byte-fallback characters, the replacement
// character, added tokens) and C4 text: ids without and with the post-processor's BOS, byte
// offsets, decode with and without special tokens.
#include <gtest/gtest.h>

#include "core/error.h"
#include "test_tokenizer_util.h"

namespace zt::text::test {
namespace {

std::filesystem::path families_dir() { return std::filesystem::path(ZT_TEST_DATA) / "families"; }

// Checks every golden case of `name`; returns the number of cases.
size_t check_family(const std::string& name) {
  Json g = read_json(families_dir() / (name + ".tokens.json"));
  Tokenizer tok = Tokenizer::load(families_dir() / name / "tokenizer.json");
  size_t n = 0;
  for (const auto& c : g["cases"]) {
    const std::string text = c["text"];
    SCOPED_TRACE(name + " text: " + Json(text).dump());
    expect_golden_case(tok, c);
    const auto special = tok.encode(text, true);
    EXPECT_EQ(special, c["ids_special"].get<std::vector<int32_t>>());
    EXPECT_EQ(tok.decode(special), c["decoded"].get<std::string>());
    EXPECT_EQ(tok.decode(special, true), c["decoded_skip"].get<std::string>());
    ++n;
  }
  return n;
}

TEST(TokenizerFamilies, Llama32ByteLevel) { EXPECT_GE(check_family("llama3.2"), 40u); }
TEST(TokenizerFamilies, MistralPrependReplaceNormalizer) {
  EXPECT_GE(check_family("mistral_v3_legacy"), 40u);
}
TEST(TokenizerFamilies, MistralMetaspaceFirst) { EXPECT_GE(check_family("mistral_v3"), 40u); }
TEST(TokenizerFamilies, MetaspaceAlwaysSplitWithMetaspaceDecoder) {
  EXPECT_GE(check_family("mistral_v3_split"), 40u);
}
TEST(TokenizerFamilies, GemmaStyleReplaceNormalizerAndSplit) {
  EXPECT_GE(check_family("gemma_style"), 40u);
}
TEST(TokenizerFamilies, Phi3StyleLegacyWithAddedTokens) {
  EXPECT_GE(check_family("phi3_style"), 40u);
}

// The legacy conversion equals SentencePiece itself on the texts without control tokens
// (recorded by the golden script), so the converted files are the real models.
TEST(TokenizerFamilies, LegacyConversionEqualsSentencePiece) {
  for (const char* name : {"mistral_v3_legacy", "phi3_style"}) {
    Json g = read_json(families_dir() / (std::string(name) + ".tokens.json"));
    size_t equal = 0, plain = 0;
    for (const auto& c : g["cases"]) {
      const std::string text = c["text"];
      if (text.find('<') != std::string::npos || text.find('[') != std::string::npos) continue;
      ++plain;
      equal += c["sentencepiece_equal"].get<bool>();
    }
    EXPECT_GT(plain, 25u) << name;
    EXPECT_EQ(equal, plain) << name;
  }
}

// Byte fallback and spaces on the Mistral v3 vocabulary, spelled out (texts of the golden, whose
// tokens the pruned file has).
TEST(TokenizerFamilies, ByteFallbackAndSpacesSpelledOut) {
  Tokenizer tok = Tokenizer::load(families_dir() / "mistral_v3" / "tokenizer.json");
  auto pieces = [&](std::string_view text) {
    std::vector<std::string> out;
    for (int32_t id : tok.encode(text)) out.push_back(tok.id_to_token(id));
    return out;
  };
  // "ꙮ" (U+A66E) is not in the vocabulary: its three UTF-8 bytes become <0xEA><0x99><0xAE>.
  EXPECT_EQ(pieces("rare: ꙮ ᚠᛇᚻ"),
            (std::vector<std::string>{"\u2581rare", ":", "\u2581", "<0xEA>", "<0x99>", "<0xAE>",
                                      "\u2581", "<0xE1>", "<0x9A>", "<0xA0>", "<0xE1>", "<0x9B>",
                                      "<0x87>", "<0xE1>", "<0x9A>", "<0xBB>"}));
  // Metaspace "first": the start of the input gets the prefix, a piece after an added token not
  // ("[INST] What": the space itself becomes the "▁" of "▁What", no "▁▁").
  auto inst = pieces("[INST] What is 2+2? [/INST] 4</s>");
  ASSERT_GE(inst.size(), 3u);
  EXPECT_EQ(inst[0], "[INST]");
  EXPECT_EQ(inst[1], "\u2581What");
  EXPECT_EQ(pieces("Hello world"), (std::vector<std::string>{"\u2581Hello", "\u2581world"}));
  EXPECT_EQ(tok.decode(tok.encode("rare: ꙮ ᚠᛇᚻ", true), true), "rare: ꙮ ᚠᛇᚻ");
  // A lone invalid fallback run decodes to one U+FFFD per byte token.
  const auto a = tok.token_to_id("<0xEA>"), b = tok.token_to_id("<0x99>");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(tok.decode(std::vector<int32_t>{*a, *b}), "\uFFFD\uFFFD");
}

}  // namespace
}  // namespace zt::text::test
