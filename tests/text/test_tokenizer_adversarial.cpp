// Hand-written hard strings (whitespace runs, CRLF, digits, CJK, NFC-changing text, emoji ZWJ
// sequences, added-token text inside ordinary text, contractions, Unicode spaces, odd but valid
// UTF-8): ids, byte offsets and decodes equal HF `tokenizers` (golden adversarial.json).
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>

#include "core/error.h"
#include "test_tokenizer_util.h"

namespace zt::text::test {
namespace {

const Json& doc() {
  static const Json d = read_json(golden_dir() / "adversarial.json");
  return d;
}

std::vector<std::pair<uint32_t, uint32_t>> offsets_of(const Json& j) {
  std::vector<std::pair<uint32_t, uint32_t>> v;
  for (const auto& o : j) v.emplace_back(o[0].get<uint32_t>(), o[1].get<uint32_t>());
  return v;
}

bool is_nfc(const std::string& s) {
  auto* n = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(s.c_str()));
  bool same = n && s == reinterpret_cast<const char*>(n);
  std::free(n);
  return same;
}

class Adversarial : public ::testing::TestWithParam<std::string> {};

TEST_P(Adversarial, IdsOffsetsAndDecodeMatchHF) {
  const std::string name = GetParam();
  const Tokenizer& tok = tokenizer(name);
  size_t n = 0;
  for (const auto& c : doc()["cases"]) {
    const std::string text = c["text"];
    const Json& want = c[name];
    SCOPED_TRACE(name + " text: " + Json(text).dump());
    auto ids = want["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(text), ids);
    EXPECT_EQ(tok.encode(text, true), want["ids_special"].get<std::vector<int32_t>>());
    Encoding e = tok.encode_with_offsets(text);
    EXPECT_EQ(e.ids, ids);
    EXPECT_EQ(e.offsets, offsets_of(want["offsets"]));
    Encoding es = tok.encode_with_offsets(text, true);
    EXPECT_EQ(es.offsets, offsets_of(want["offsets_special"]));
    EXPECT_EQ(tok.decode(ids), want["decoded"].get<std::string>());
    EXPECT_EQ(tok.decode(want["ids_special"].get<std::vector<int32_t>>(), true),
              want["decoded_skip"].get<std::string>());
    ++n;
  }
  EXPECT_EQ(n, 148u);
}

TEST_P(Adversarial, VocabularyAndInvalidUtf8DecodeMatchHF) {
  const std::string name = GetParam();
  const Tokenizer& tok = tokenizer(name);
  const Json& info = doc()["info"][name];
  EXPECT_EQ(tok.vocab_size(), info["vocab_size"].get<int32_t>());
  for (const auto& [token, id] : info["token_to_id"].items()) {
    if (id.is_null()) {
      EXPECT_FALSE(tok.token_to_id(token).has_value()) << token;
    } else {
      EXPECT_EQ(tok.token_to_id(token), id.get<int32_t>()) << token;
    }
  }
  for (const auto& [id, token] : info["id_to_token"].items()) {
    EXPECT_EQ(tok.id_to_token(std::stoi(id)), token.get<std::string>()) << id;
  }
  size_t n = 0;
  for (const auto& dc : info["decode_cases"]) {
    auto ids = dc["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.decode(ids), dc["decoded"].get<std::string>()) << dc.dump();
    ++n;
  }
  EXPECT_GE(n, 25u);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, Adversarial,
                         ::testing::Values("qwen2.5", "qwen3", "llama3_style", "gpt2_style"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (ch == '.') ch = '_';
                           return s;
                         });

TEST(TokenizerRoundTrip, DecodeOfEncodeIsTheTextForNfcStableStrings) {
  size_t checked = 0;
  for (const char* name : {"qwen2.5", "qwen3"}) {
    const Tokenizer& tok = tokenizer(name);
    for (const auto& c : doc()["cases"]) {
      const std::string text = c["text"];
      if (!is_nfc(text)) continue;
      EXPECT_EQ(tok.decode(tok.encode(text)), text) << name << " " << Json(text).dump();
      ++checked;
    }
  }
  EXPECT_GE(checked, 2 * 120u);
  for (const auto& t : corpus_texts()) {
    if (t.row % 50 != 0 || !is_nfc(t.text)) continue;
    EXPECT_EQ(tokenizer("qwen2.5").decode(tokenizer("qwen2.5").encode(t.text)), t.text);
  }
}

TEST(TokenizerSpecialTokens, ChatMarkersAreSingleIdsOnlyWhenWhole) {
  const Tokenizer& tok = tokenizer("qwen2.5");
  EXPECT_EQ(tok.token_to_id("<|im_start|>"), 151644);
  EXPECT_EQ(tok.token_to_id("<|im_end|>"), 151645);
  auto ids = tok.encode("<|im_start|>user\nHi<|im_end|>\n");
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 151644);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 151645), 1);
  EXPECT_EQ(tok.decode(ids, true), "user\nHi\n");
  for (int32_t id : tok.encode("<|im_start|")) EXPECT_LT(id, 151643);
  // Qwen3's added <think> is one token; in Qwen2.5 it is ordinary text.
  EXPECT_EQ(tokenizer("qwen3").encode("<think>").size(), 1u);
  EXPECT_GT(tok.encode("<think>").size(), 1u);
}

TEST(TokenizerSpecialTokens, Llama3StyleAddsBosOnlyWithAddSpecialTokens) {
  const Tokenizer& tok = tokenizer("llama3_style");
  int32_t bos = *tok.token_to_id("<|begin_of_text|>");
  auto plain = tok.encode("Hello world");
  auto with = tok.encode("Hello world", true);
  ASSERT_EQ(with.size(), plain.size() + 1);
  EXPECT_EQ(with[0], bos);
  EXPECT_TRUE(std::equal(plain.begin(), plain.end(), with.begin() + 1));
  EXPECT_EQ(tok.encode("", true), std::vector<int32_t>{bos});
  EXPECT_TRUE(tok.encode("").empty());
  EXPECT_EQ(tok.encode_with_offsets("Hi", true).offsets.front(),
            (std::pair<uint32_t, uint32_t>{0, 0}));
  // ignore_merges: the vocabulary's "Ġzerotune", reachable by no merge, is one token.
  EXPECT_EQ(tok.encode(" zerotune"), std::vector<int32_t>{*tok.token_to_id("Ġzerotune")});
  EXPECT_GT(tokenizer("gpt2_style").encode(" zerotune").size(), 1u);
}

}  // namespace
}  // namespace zt::text::test
