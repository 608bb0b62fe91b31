// `zerotune tokenize`: one JSON array of ids per input line, equal to the library's ids (which the
// other tests hold to HF); --add-special-tokens; errors name FILE:LINE.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>

#include "test_tokenizer_util.h"

namespace zt::text::test {
namespace {

struct CliResult {
  int status;
  std::string out, err;
};

CliResult run_tokenize(const std::string& args) {
  TempFile out("", ".out"), err("", ".err");
  std::string cmd = std::string(ZT_BINARY) + " tokenize " + args + " >" + out.path().string() +
                    " 2>" + err.path().string();
  int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp(out.path()), slurp(err.path())};
}

TEST(TokenizeCli, PrintsIdsOfStringAndTextLines) {
  std::vector<std::string> texts = {"Hello world", "<|begin_of_text|>x <mask> y", "",
                                    "naïve\n\tcafé"};
  std::string jsonl;
  for (size_t i = 0; i < texts.size(); ++i) {
    jsonl += i % 2 ? Json(texts[i]).dump() : Json{{"text", texts[i]}, {"id", i}}.dump();
    jsonl += "\n";
    if (i == 1) jsonl += "\n";  // blank lines are skipped
  }
  TempFile in(jsonl, ".jsonl");
  const std::string dir = (golden_dir() / "llama3_style").string();
  const Tokenizer& tok = tokenizer("llama3_style");
  for (bool special : {false, true}) {
    CliResult r = run_tokenize("--tokenizer " + dir + " " + in.path().string() +
                               (special ? " --add-special-tokens" : ""));
    ASSERT_EQ(r.status, 0) << r.err;
    std::string want;
    for (const auto& t : texts) want += Json(tok.encode(t, special)).dump() + "\n";
    EXPECT_EQ(r.out, want);
  }
  // Special tokens come from the post-processor only with the flag: the first line's BOS.
  CliResult r = run_tokenize("--add-special-tokens --tokenizer " + dir + "/tokenizer.json " +
                             in.path().string());
  ASSERT_EQ(r.status, 0) << r.err;
  int32_t bos = *tok.token_to_id("<|begin_of_text|>");
  EXPECT_EQ(r.out.substr(0, r.out.find(',')), fmt::format("[{}", bos));
}

TEST(TokenizeCli, ErrorsNameFileAndLine) {
  const std::string dir = (shared_data() / "tokenizers/qwen2.5-instruct").string();
  TempFile bad_json("\"ok\"\n{\"text\": \"fine\"}\n{\"text\": 3}\n", ".jsonl");
  CliResult r = run_tokenize("--tokenizer " + dir + " " + bad_json.path().string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find(bad_json.path().string() + ":3: \"text\" must be a string, got 3"),
            std::string::npos)
      << r.err;
  TempFile not_json("\"ok\"\n[1, 2\n", ".jsonl");
  r = run_tokenize("--tokenizer " + dir + " " + not_json.path().string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(
      r.err.find(not_json.path().string() + ":2: invalid JSON: parse error at line 1, column 6"),
      std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << r.err;
  TempFile no_text("{\"prompt\": \"x\"}\n", ".jsonl");
  r = run_tokenize("--tokenizer " + dir + " " + no_text.path().string());
  EXPECT_NE(r.err.find(no_text.path().string() + ":1: object has no \"text\" key"),
            std::string::npos)
      << r.err;
  TempFile bad_utf8("\"ok\"\n\"a\xff\"\n", ".jsonl");
  r = run_tokenize("--tokenizer " + dir + " " + bad_utf8.path().string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find(bad_utf8.path().string() + ":2:"), std::string::npos) << r.err;
  r = run_tokenize("--tokenizer /nonexistent " + bad_json.path().string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot open tokenizer file"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace zt::text::test
