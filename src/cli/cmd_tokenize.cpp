// `zerotune tokenize --tokenizer DIR FILE`: token ids of every line of a JSONL file.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/deferred_stdout.h"
#include "core/error.h"
#include "io/json.h"
#include "io/json_check.h"
#include "text/tokenizer.h"

namespace zt::cli {

namespace {

// Text of one JSONL line: a JSON string, or an object with a string "text".
std::string line_text(const std::string& line, const std::string& file, size_t lineno) {
  Json v;
  check_json_text(line, file, lineno);
  try {
    v = Json::parse(line);
  } catch (const Json::exception& e) {
    fail("{}:{}: invalid JSON: {}", file, lineno, json_error_reason(e));
  }
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) {
    auto it = v.find("text");
    if (it == v.end()) fail("{}:{}: object has no \"text\" key", file, lineno);
    if (!it->is_string())
      fail("{}:{}: \"text\" must be a string, got {}", file, lineno, it->dump());
    return it->get<std::string>();
  }
  fail("{}:{}: expected a JSON string or an object with \"text\", got {}", file, lineno,
       v.type_name());
}

// Encodes the batch `texts` (read from `linenos` of `file`) into `out`, one JSON array per text,
// and clears the batch.
void encode_into(const text::Tokenizer& tok, std::vector<std::string>& texts,
                 std::vector<size_t>& linenos, const std::string& file, int threads, bool special,
                 DeferredStdout& out) {
  std::vector<std::vector<int32_t>> ids;
  try {
    ids = tok.encode_batch(texts, threads, special);
  } catch (const Error&) {
    // Find the offending line to name it (encode_batch names only the batch index).
    for (size_t i = 0; i < texts.size(); ++i) {
      try {
        tok.encode(texts[i], special);
      } catch (const Error& e) {
        fail("{}:{}: {}", file, linenos[i], e.what());
      }
    }
    throw;
  }
  std::string text;
  for (const auto& v : ids) {
    text += '[';
    for (size_t k = 0; k < v.size(); ++k) {
      if (k) text += ',';
      text += std::to_string(v[k]);
    }
    text += "]\n";
  }
  out.append(text);
  texts.clear();
  linenos.clear();
}

}  // namespace

// Reads FILE (JSONL: each line a JSON string or {"text": ...}; blank lines are skipped) and prints
// one JSON array of token ids per text, in order. Errors name FILE:LINE; after one nothing is
// printed (the output is held back, spooled past 1 MiB, until every line encoded).
constexpr CommandUsage kUsage{"tokenize",
                              "--tokenizer PATH FILE.jsonl [--add-special-tokens] [--threads N]"};

int cmd_tokenize(const Args& args) {
  CLI::App app{"Print the token ids of every line of a JSONL file"};
  std::string tokenizer_path, file;
  bool add_special = false;
  int threads = 0;
  app.add_option("--tokenizer", tokenizer_path,
                 "directory holding tokenizer.json (or the tokenizer.json file itself)")
      ->required();
  app.add_option("file", file, "JSONL file: one JSON string or {\"text\": ...} per line")
      ->required();
  app.add_flag("--add-special-tokens", add_special,
               "add the post-processor's special tokens (e.g. Llama-3's BOS)");
  app.add_option("--threads", threads, "encoding threads (0: all cores)");
  if (auto rc = parse_command_line(app, kUsage, args)) return *rc;
  std::filesystem::path tp(tokenizer_path);
  if (std::filesystem::is_directory(tp)) tp /= "tokenizer.json";
  text::Tokenizer tok = text::Tokenizer::load(tp);

  if (std::filesystem::is_directory(file)) fail("{}: is a directory; expected a JSONL file", file);
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("cannot open '{}'", file);
  std::vector<std::string> texts;
  std::vector<size_t> linenos;
  std::string line;
  DeferredStdout out;
  size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    texts.push_back(line_text(line, file, lineno));
    linenos.push_back(lineno);
    if (texts.size() == 4096) encode_into(tok, texts, linenos, file, threads, add_special, out);
  }
  if (in.bad()) fail("{}: read error after line {}", file, lineno);
  encode_into(tok, texts, linenos, file, threads, add_special, out);
  out.commit();
  return 0;
}

}  // namespace zt::cli
