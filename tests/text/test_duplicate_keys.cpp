// tokenizer.json (a SAX parse, vocab included) and tokenizer_config.json refuse a key given twice,
// naming file, line and key, and nesting deeper than kMaxJsonDepth (100,000 and 200,000 levels),
// naming file and line.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/zt_test_util.h"
#include "test_tokenizer_util.h"
#include "text/chat_template.h"

namespace zt::text::test {
namespace {

using zt::testing::error_of;

const char* kTokenizer = R"({
  "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
  "post_processor": null,
  "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
  "model": {"type": "BPE", "dropout": null, "unk_token": null,
            "vocab": {"a": 0, "b": 1,
                      "ab": 2VOCAB},
            "merges": ["a b"]}TOP})";

std::string tokenizer(const std::string& vocab_extra, const std::string& top_extra) {
  std::string s = kTokenizer;
  s.replace(s.find("VOCAB"), 5, vocab_extra);
  s.replace(s.find("TOP"), 3, top_extra);
  return s;
}

TEST(DuplicateKeys, TokenizerJsonVocabAndDom) {
  {
    TempFile ok(tokenizer("", ""));
    EXPECT_EQ(Tokenizer::load(ok.path()).vocab_size(), 3);
  }
  TempFile dup_vocab(tokenizer(",\n  \"a\": 7", ""));
  EXPECT_EQ(
      error_of([&] { Tokenizer::load(dup_vocab.path()); }),
      dup_vocab.path().string() + ":10: duplicate key 'model.vocab.a' (first given at line 8)");
  TempFile dup_top(tokenizer("", ",\n \"normalizer\": null"));
  EXPECT_EQ(error_of([&] { Tokenizer::load(dup_top.path()); }),
            dup_top.path().string() + ":11: duplicate key 'normalizer' (first given at line 3)");
}

TEST(DuplicateKeys, TokenizerConfigJson) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("zt_dupcfg_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json")
      << "{\"eos_token\": \"<a>\",\n\"eos_token\": \"<b>\"}";
  EXPECT_EQ(error_of([&] { load_tokenizer_config(dir); }),
            (dir / "tokenizer_config.json").string() +
                ":2: duplicate key 'eos_token' (first given at line 1)");
  std::filesystem::remove_all(dir);
}

TEST(DuplicateKeys, DeepNestingIsRefusedNamingFileAndLine) {
  for (size_t depth : {100000u, 200000u}) {
    const std::string deep = std::string(depth, '[') + std::string(depth, ']');
    TempFile t(tokenizer("", ",\n \"extra\": " + deep));
    EXPECT_EQ(error_of([&] { Tokenizer::load(t.path()); }),
              t.path().string() + ":11: JSON nesting depth exceeds 1000");
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("zt_deepcfg_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "tokenizer_config.json")
        << "{\"eos_token\": \"<a>\",\n\"x\": " << deep << "}";
    EXPECT_EQ(error_of([&] { load_tokenizer_config(dir); }),
              (dir / "tokenizer_config.json").string() + ":2: JSON nesting depth exceeds 1000");
    std::filesystem::remove_all(dir);
  }
}

// A NUL byte ends nlohmann's input: what follows it was dropped in silence (a tokenizer.json with
// a second, different object after a NUL loaded as the first). Refused with file, line and column.
TEST(DuplicateKeys, NulByteIsRefusedNamingFileLineAndColumn) {
  TempFile t(tokenizer("", "") + "\n  " + std::string(1, '\0') + "{\"model\": null}");
  EXPECT_EQ(error_of([&] { Tokenizer::load(t.path()); }),
            t.path().string() + ":11:3: a NUL byte: not JSON text (a truncated or binary file?)");
  zt::testing::TempDir dir;
  std::ofstream(dir / "tokenizer_config.json", std::ios::binary)
      << "{\"eos_token\": \"<a>\"}" << '\0' << "{\"eos_token\": \"<b>\"}";
  EXPECT_EQ(error_of([&] { load_tokenizer_config(dir.path()); }),
            (dir / "tokenizer_config.json").string() +
                ":1:21: a NUL byte: not JSON text (a truncated or binary file?)");
}

}  // namespace
}  // namespace zt::text::test
