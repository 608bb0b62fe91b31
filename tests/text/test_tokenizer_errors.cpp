// Bad tokenizer.json files and bad input give zt::Error messages naming the file, the field and
// the value; a minimal hand-written tokenizer.json loads and encodes.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/zt_test_util.h"
#include "test_tokenizer_util.h"

namespace zt::text::test {
namespace {

// A minimal byte-level BPE: "a", "b", "ab" and the merge "a b"; `patch` replaces parts of it.
Json minimal() {
  return Json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false,
                      "use_regex": true},
    "post_processor": null,
    "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false,
                "use_regex": true},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "vocab": {"a": 0, "b": 1, "ab": 2},
              "merges": ["a b"]}})");
}

// Loading `text` fails with a message containing the file name and `what`.
void expect_load_error(const std::string& text, const std::string& what) {
  TempFile f(text);
  try {
    Tokenizer::load(f.path());
    ADD_FAILURE() << "no error; expected: " << what;
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
    EXPECT_NE(msg.find(f.path().string()), std::string::npos) << msg;
  }
}

TEST(TokenizerErrors, MinimalFileLoadsAndEncodes) {
  TempFile f(minimal().dump());
  Tokenizer tok = Tokenizer::load(f.path());
  EXPECT_EQ(tok.vocab_size(), 3);
  EXPECT_EQ(tok.encode("ab"), std::vector<int32_t>({2}));
  EXPECT_EQ(tok.encode("ba"), std::vector<int32_t>({1, 0}));
  // Bytes outside the vocabulary without unk_token are dropped, as HF's BPE::merge_word does.
  EXPECT_EQ(tok.encode("abc"), std::vector<int32_t>({2}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{2, 0, 99, -1}), "aba");  // unknown ids are skipped
  EXPECT_EQ(tok.id_to_token(2), "ab");
}

TEST(TokenizerErrors, MalformedJson) {
  expect_load_error(R"({"model": {"type": "BPE", "vocab": {"a": 0,}})",
                    "invalid JSON at byte 44: parse error at line 1, column 44");
  expect_load_error("", "invalid JSON at byte");
  expect_load_error("[1, 2]", "expected a JSON object at the top level");
}

TEST(TokenizerErrors, UnsupportedModelTypes) {
  Json j = minimal();
  j["model"] = Json::parse(R"({"type": "WordPiece", "unk_token": "[UNK]",
                              "continuing_subword_prefix": "##", "vocab": {"[UNK]": 0, "a": 1}})");
  expect_load_error(j.dump(), "model.type 'WordPiece' is not supported (only BPE)");
  j["model"] = Json::parse(R"({"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0]]})");
  expect_load_error(j.dump(), "model.type 'Unigram' is not supported (only BPE)");
  j["model"] = Json::parse(R"({"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"})");
  expect_load_error(j.dump(), "model.type 'WordLevel' is not supported (only BPE)");
}

TEST(TokenizerErrors, UnsupportedComponentsNameTheirField) {
  Json j = minimal();
  j["normalizer"] = Json::parse(R"({"type": "Lowercase"})");
  expect_load_error(
      j.dump(),
      "normalizer.type 'Lowercase' is not supported (supported: NFC, Prepend, Replace, Sequence)");
  j["normalizer"] = Json::parse(R"({"type": "Sequence", "normalizers": [{"type": "NFC"},
                                   {"type": "NFKD"}]})");
  expect_load_error(j.dump(), "normalizer.normalizers[1].type 'NFKD' is not supported");
  j = minimal();
  j["pre_tokenizer"] =
      Json::parse(R"({"type": "Sequence", "pretokenizers": [{"type": "Whitespace"}]})");
  expect_load_error(j.dump(), "pre_tokenizer.pretokenizers[0].type 'Whitespace' is not supported");
  j = minimal();
  j["post_processor"] = Json::parse(R"({"type": "RobertaProcessing"})");
  expect_load_error(j.dump(), "post_processor.type 'RobertaProcessing' is not supported");
  j = minimal();
  j["decoder"] = Json::parse(R"({"type": "WordPiece", "prefix": "##"})");
  expect_load_error(j.dump(), "decoder.type 'WordPiece' is not supported");
  j = minimal();
  j["pre_tokenizer"] = Json::parse(R"({"pretokenizers": []})");
  expect_load_error(j.dump(), "pre_tokenizer.type is missing");
  j = minimal();
  j["model"]["dropout"] = 0.1;
  expect_load_error(j.dump(), "model.dropout 0.1 is not supported");
  j = minimal();
  j["model"]["continuing_subword_prefix"] = "##";
  expect_load_error(j.dump(), "model.continuing_subword_prefix '##' is not supported");
}

TEST(TokenizerErrors, BadVocabMergesAndRegex) {
  Json j = minimal();
  j["model"]["merges"] = Json::parse(R"(["a b", "a c"])");
  expect_load_error(j.dump(), "model.merges[1] 'a c': token 'c' is not in model.vocab");
  j["model"]["merges"] = Json::parse(R"(["b a"])");
  expect_load_error(j.dump(), "model.merges[0] 'b a': merged token 'ba' is not in model.vocab");
  j["model"]["merges"] = Json::parse(R"([["a", "b"], ["a"]])");
  expect_load_error(j.dump(), "model.merges[1]: expected \"a b\" or [\"a\", \"b\"]");
  j["model"]["merges"] = Json::parse(R"(["ab"])");
  expect_load_error(j.dump(), "model.merges[0]: expected");
  j = minimal();
  j["model"]["vocab"]["c"] = "3";
  expect_load_error(j.dump(), "model.vocab['c']: expected an integer id, got a string");
  j = minimal();
  j["model"].erase("merges");
  expect_load_error(j.dump(), "model.merges must be an array");
  j = minimal();
  j["pre_tokenizer"] = Json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})");
  expect_load_error(j.dump(), "pre_tokenizer.pretokenizers[0].pattern: cannot compile regex '(a'");
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "a";
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways";
  expect_load_error(j.dump(), "behavior 'Sideways' is not one of");
  std::swap(j["pre_tokenizer"]["pretokenizers"][0], j["pre_tokenizer"]["pretokenizers"][1]);
  j["pre_tokenizer"]["pretokenizers"][1]["behavior"] = "Isolated";
  expect_load_error(j.dump(), "a Split pre-tokenizer after ByteLevel is not supported");
  j = minimal();
  j["added_tokens"] = Json::parse(R"([{"content": "<s>", "special": true}])");
  expect_load_error(j.dump(), "added_tokens[0].id must be a non-negative integer");
}

// Two added_tokens entries with one id and different contents were both read as that id (the
// later one's string decoded for both); HF `tokenizers` keeps the id for the first only and gives
// the second a new one. Refused, naming the file, both entries, their contents and the id. The same
// token listed twice (one id, one content) is one token, as in HF.
TEST(TokenizerErrors, AddedTokensSharingAnIdAreRefused) {
  Json j = minimal();
  j["added_tokens"] = Json::parse(R"([{"id": 3, "content": "<x>", "special": true},
                                      {"id": 4, "content": "<z>", "special": true},
                                      {"id": 3, "content": "<y>", "special": true}])");
  {
    TempFile f(j.dump());
    EXPECT_EQ(testing::error_of([&] { Tokenizer::load(f.path()); }),
              f.path().string() +
                  ": added_tokens[2] '<y>' has id 3, the id of added_tokens[0] '<x>'; each added "
                  "token needs an id of its own");
  }
  j["added_tokens"][2]["content"] = "<x>";
  TempFile f(j.dump());
  Tokenizer tok = Tokenizer::load(f.path());
  EXPECT_EQ(tok.vocab_size(), 5);
  EXPECT_EQ(tok.encode("a<x>b<z>"), std::vector<int32_t>({0, 3, 1, 4}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{3, 2}), "<x>ab");
}

// HF `tokenizers` (0.23.3) reads no id from added_tokens: a token of model.vocab keeps its
// vocabulary id, one listed before keeps its first id, any other takes the next id. zerotune read
// the file's ids, so an added token whose id differs from HF's was trained on an id HF does not
// encode to. Refused, naming the file, the entry, its content, its id and HF's (the ids below are
// the ones HF gives on these files, their AddedToken fields filled in with zerotune's defaults).
TEST(TokenizerErrors, AddedTokenIdsHfWouldNotGiveAreRefused) {
  // {added_tokens, the error after "<file>: "}; model.vocab is "a" 0, "b" 1, "ab" 2.
  const std::pair<const char*, std::string> refused[] = {
      // Content in the vocabulary with another id: HF encodes it as its vocabulary id (2).
      {R"([{"id": 3, "content": "ab", "special": true}])",
       "added_tokens[0] 'ab' has id 3, but model.vocab has 'ab' as id 2 (the id HF `tokenizers` "
       "gives it); an added token in the vocabulary needs its vocabulary id"},
      // Content of an earlier added token with another id: HF keeps the first id (3).
      {R"([{"id": 3, "content": "<x>", "special": true}, {"id": 4, "content": "<x>"}])",
       "added_tokens[1] '<x>' has id 4, but added_tokens[0] '<x>' has id 3 (the id HF "
       "`tokenizers` gives it); a token listed twice needs one id"},
      // An id a vocabulary token has: HF gives the added token the next id (3).
      {R"([{"id": 1, "content": "<x>", "special": true}])",
       "added_tokens[0] '<x>' has id 1, the id of model.vocab token 'b' (HF `tokenizers` gives "
       "'<x>' id 3); each added token needs an id of its own"},
      // A gap after the last id: HF gives the next id (4), not the file's.
      {R"([{"id": 3, "content": "<x>", "special": true}, {"id": 5, "content": "<z>"}])",
       "added_tokens[1] '<z>' has id 5, but HF `tokenizers` gives it id 4: it numbers the added "
       "tokens outside model.vocab in file order, on from the vocabulary's 3 tokens"},
  };
  for (const auto& [added_tokens, expected] : refused) {
    Json j = minimal();
    j["added_tokens"] = Json::parse(added_tokens);
    TempFile f(j.dump());
    EXPECT_EQ(testing::error_of([&] { Tokenizer::load(f.path()); }),
              f.path().string() + ": " + expected);
  }
  // The ids HF gives load: a vocabulary token at its id, then the next ids.
  Json j = minimal();
  j["added_tokens"] = Json::parse(R"([{"id": 2, "content": "ab", "special": true},
                                      {"id": 3, "content": "<x>", "special": true},
                                      {"id": 4, "content": "<z>", "special": true}])");
  TempFile f(j.dump());
  Tokenizer tok = Tokenizer::load(f.path());
  EXPECT_EQ(tok.vocab_size(), 5);
  EXPECT_EQ(tok.encode("a<x>ab<z>"), std::vector<int32_t>({0, 3, 2, 4}));
}

// SentencePiece-style components: malformed fields and unsupported combinations are named.
TEST(TokenizerErrors, SentencePieceComponents) {
  Json j = minimal();
  j["pre_tokenizer"] = Json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": true},
      {"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated", "invert": false}]})");
  expect_load_error(j.dump(),
                    "pre_tokenizer.pretokenizers[1]: a pre-tokenizer combined with Metaspace is "
                    "not supported");
  j["pre_tokenizer"] = Json::parse(R"({"type": "Metaspace", "replacement": "\u2581",
                                       "prepend_scheme": "sometimes"})");
  expect_load_error(j.dump(),
                    "pre_tokenizer.prepend_scheme 'sometimes' is not one of always, never, first");
  j["pre_tokenizer"] = Json::parse(R"({"type": "Metaspace", "replacement": "ab"})");
  expect_load_error(j.dump(), "pre_tokenizer.replacement must be one character, got 'ab'");
  j = minimal();
  j["normalizer"] = Json::parse(R"({"type": "Replace", "content": "x"})");
  expect_load_error(j.dump(), "normalizer.pattern must be {\"Regex\": ...} or {\"String\": ...}");
  j["normalizer"] = Json::parse(R"({"type": "Sequence", "normalizers": [{"type": "Prepend"}]})");
  expect_load_error(j.dump(), "normalizer.normalizers[0].prepend must be a string");
  j = minimal();
  j["decoder"] = Json::parse(R"({"type": "Sequence", "decoders": [{"type": "ByteFallback"},
                                 {"type": "Strip", "content": " ", "start": 1}]})");
  expect_load_error(j.dump(), "decoder.decoders[1].stop must be a non-negative integer");
  j["decoder"] = Json::parse(R"({"type": "CTC"})");
  expect_load_error(j.dump(),
                    "decoder.type 'CTC' is not supported (supported: ByteLevel, Replace, "
                    "ByteFallback, Fuse, Strip, Metaspace, Sequence)");
}

TEST(TokenizerErrors, MissingFileAndBadText) {
  try {
    Tokenizer::load("/nonexistent/dir/tokenizer.json");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("cannot open tokenizer file '/nonexistent/dir/tokenizer.json'"),
        std::string::npos)
        << e.what();
  }
  const Tokenizer& tok = tokenizer("qwen2.5");
  try {
    tok.encode("a\xC3(b");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "tokenizer: text is not valid UTF-8 (byte 1 of 4)");
  }
  std::vector<std::string> texts = {"fine", "also fine", "bad \xED\xA0\x80 surrogate"};
  try {
    tok.encode_batch(texts, 2);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "texts[2]: tokenizer: text is not valid UTF-8 (byte 4 of 17)");
  }
  EXPECT_THROW(tok.id_to_token(-1), Error);
  EXPECT_THROW(tok.id_to_token(tok.vocab_size()), Error);
  EXPECT_EQ(tok.id_to_token(tok.vocab_size() - 1), "<|file_sep|>");
  // A directory stands for its tokenizer.json.
  Tokenizer from_dir = Tokenizer::load(golden_dir() / "llama3_style");
  EXPECT_EQ(from_dir.encode("Hello"), tokenizer("llama3_style").encode("Hello"));
}

}  // namespace
}  // namespace zt::text::test
