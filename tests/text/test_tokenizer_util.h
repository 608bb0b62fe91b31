// Shared helpers of the tokenizer tests: the tokenizers under test (loaded once), the golden
// files of tools/make_tokenizer_goldens.py, and the corpus texts in the order that script uses.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "io/json.h"
#include "text/tokenizer.h"

namespace zt::text::test {

inline std::filesystem::path shared_data() { return ZT_SHARED_DATA; }
inline std::filesystem::path golden_dir() {
  return std::filesystem::path(ZT_TEST_DATA) / "tokenizer";
}

// Path of the tokenizer.json of "qwen2.5", "qwen3", "llama3_style" or "gpt2_style".
inline std::filesystem::path tokenizer_path(const std::string& name) {
  if (name == "qwen2.5") return shared_data() / "tokenizers/qwen2.5-instruct/tokenizer.json";
  if (name == "qwen3") return shared_data() / "tokenizers/qwen3/tokenizer.json";
  return golden_dir() / name / "tokenizer.json";
}

// The named tokenizer, loaded on first use and kept for the whole test binary.
inline const Tokenizer& tokenizer(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[name];
  if (!slot) slot = std::make_unique<Tokenizer>(Tokenizer::load(tokenizer_path(name)));
  return *slot;
}

inline Json read_json(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + p.string());
  return Json::parse(in);
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// FNV-1a-64 over bytes, and over ids as whole 32-bit units (as the golden script).
inline uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}
inline uint64_t ids_hash(const std::vector<int32_t>& ids) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (int32_t i : ids) h = (h ^ uint64_t(uint32_t(i))) * 0x100000001B3ull;
  return h;
}

struct CorpusText {
  std::string source;
  int row;
  std::string text;
};

// UltraFeedback prompt/chosen/rejected, no_robots message contents, C4 text: the golden order.
inline const std::vector<CorpusText>& corpus_texts() {
  static const std::vector<CorpusText> texts = [] {
    std::vector<CorpusText> out;
    auto each_line = [](const std::filesystem::path& p, auto&& f) {
      std::ifstream in(p, std::ios::binary);
      if (!in) throw std::runtime_error("cannot open " + p.string());
      std::string line;
      int n = 0;
      while (std::getline(in, line)) f(n++, Json::parse(line));
    };
    each_line(shared_data() / "datasets/ultrafeedback/train_prefs_1000.jsonl",
              [&](int n, const Json& row) {
                for (const char* key : {"prompt", "chosen", "rejected"}) {
                  out.push_back({std::string("ultrafeedback.") + key, n, row[key]});
                }
              });
    each_line(shared_data() / "datasets/no_robots/test.expected_rows.jsonl",
              [&](int n, const Json& row) {
                for (const auto& m : row["messages"]) {
                  out.push_back({"no_robots.messages", n, m["content"]});
                }
              });
    each_line(shared_data() / "datasets/text/c4_demo.jsonl", [&](int n, const Json& row) {
      out.push_back({"c4.text", n, row["text"]});
    });
    return out;
  }();
  return texts;
}

// A temporary file holding `content`, removed with the object.
class TempFile {
 public:
  explicit TempFile(const std::string& content, const std::string& suffix = ".json") {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() / ("zt_tok_test_" + std::to_string(::getpid()) +
                                                      "_" + std::to_string(counter++) + suffix);
    std::ofstream(path_, std::ios::binary) << content;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Checks one golden case {"text", "ids", "offsets": [[begin, end], ...]} (byte offsets):
// encode_with_offsets and encode against it; returns the encoding.
inline Encoding expect_golden_case(const Tokenizer& tok, const Json& c) {
  const std::string text = c["text"];
  Encoding e = tok.encode_with_offsets(text);
  EXPECT_EQ(e.ids, c["ids"].get<std::vector<int32_t>>());
  std::vector<std::pair<uint32_t, uint32_t>> want;
  for (const auto& o : c["offsets"]) want.emplace_back(o[0], o[1]);
  EXPECT_EQ(e.offsets, want);
  EXPECT_EQ(tok.encode(text), e.ids);
  return e;
}

}  // namespace zt::text::test
