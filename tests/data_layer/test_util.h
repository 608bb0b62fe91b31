// Helpers shared by the data-layer tests: a self-deleting temporary directory and file writers.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace zt::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its content on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "zt_data_XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Writes `bytes` to `file` verbatim.
inline void write_file(const std::filesystem::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + file.string());
}

// The message of the zt::Error (or other exception) `fn` throws; fails the test if none is thrown.
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

inline std::filesystem::path shared_data(const std::string& rel) {
  return std::filesystem::path(ZT_SHARED_DATA) / rel;
}
inline std::filesystem::path test_data(const std::string& rel) {
  return std::filesystem::path(ZT_TEST_DATA) / rel;
}

// The shared Qwen2.5-Instruct tokenizer and its tokenizer_config, loaded once per test binary.
struct QwenTokenizer {
  text::Tokenizer tok;
  text::TokenizerConfig cfg;
};
inline const QwenTokenizer& qwen_tokenizer() {
  static const QwenTokenizer q = [] {
    const auto dir = shared_data("tokenizers/qwen2.5-instruct");
    return QwenTokenizer{text::Tokenizer::load(dir / "tokenizer.json"), text::load_tokenizer_config(dir)};
  }();
  return q;
}
// The shared Qwen3 tokenizer (its template knows `enable_thinking`), loaded once per test binary.
inline const QwenTokenizer& qwen3_tokenizer() {
  static const QwenTokenizer q = [] {
    const auto dir = shared_data("tokenizers/qwen3");
    return QwenTokenizer{text::Tokenizer::load(dir / "tokenizer.json"), text::load_tokenizer_config(dir)};
  }();
  return q;
}

// A file of ../shared/cases (CI has ../shared beside the checkout, as for shared_data).
inline std::filesystem::path shared_case(const std::string& rel) {
  return std::filesystem::path(ZT_SHARED_DATA) / ".." / "cases" / rel;
}

}  // namespace zt::testing
