// `zerotune render --tokenizer DIR FILE`: one JSON string per row, equal to transformers'
// apply_chat_template(tokenize=False) (tests/data/chat_template/render_*.jsonl); errors name
// FILE:LINE.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/zt_test_util.h"
#include "io/json.h"

namespace zt::text {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

struct CliRun {
  int status;
  std::string out, err;
};

CliRun render(const std::string& args) {
  zt::testing::TempDir tmp;
  std::string cmd = std::string(ZT_BINARY) + " render " + args + " >" + (tmp / "out").string() +
                    " 2>" + (tmp / "err").string();
  int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp(tmp / "out"), slurp(tmp / "err")};
}

const std::string kQwen3 = std::string(ZT_SHARED_DATA) + "/tokenizers/qwen3";
const fs::path kData = fs::path(ZT_TEST_DATA) / "chat_template";

TEST(RenderCli, MatchesTransformersRowByRow) {
  CliRun r = render("--tokenizer " + kQwen3 + " " + (kData / "render_input.jsonl").string());
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<std::string> got = lines(r.out), want = lines(slurp(kData / "render_expected.jsonl"));
  ASSERT_GE(want.size(), 40u);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(Json::parse(got[i]).get<std::string>(), Json::parse(want[i]).get<std::string>())
        << "row " << i + 1;
}

// Nulls nested in tools and tool-call arguments are removed at any depth, as training removes
// them (TRL's remove_none_values): the text is what TRL trains (make_message_shape_goldens.py).
TEST(RenderCli, NestedNullsAreRemovedAsTrainingRemovesThem) {
  const std::string qwen25 = std::string(ZT_SHARED_DATA) + "/tokenizers/qwen2.5-instruct";
  CliRun r = render("--tokenizer " + qwen25 + " " + (kData / "render_nulls_input.jsonl").string());
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<std::string> got = lines(r.out),
                           want = lines(slurp(kData / "render_nulls_expected.jsonl"));
  ASSERT_EQ(want.size(), 3u);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(Json::parse(got[i]).get<std::string>(), Json::parse(want[i]).get<std::string>())
        << "row " << i + 1;
  const std::string arguments = R"("arguments": {"k": [{"b": 1}, null], "m": {}})";
  EXPECT_NE(Json::parse(want[1]).get<std::string>().find(arguments), std::string::npos);
}

TEST(RenderCli, ErrorsNameFileAndLine) {
  zt::testing::TempDir tmp;
  const std::string file = (tmp / "rows.jsonl").string();
  std::ofstream(file)
      << R"({"messages": [{"role": "user", "content": "hi"}]})"
      << "\n\n"
      << R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": 1})"
      << "\n";
  CliRun r = render("--tokenizer " + kQwen3 + " " + file);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(lines(r.out).size(), 0u);  // output is written after all rows render
  EXPECT_NE(r.err.find(file + ":3: \"add_generation_prompt\" must be true or false, got 1"),
            std::string::npos)
      << r.err;

  std::ofstream(file) << R"({"messages": [{"role": "user", "content": "hi"}]})"
                      << "\n{oops\n";
  r = render("--tokenizer " + kQwen3 + " " + file);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find(file + ":2: invalid JSON"), std::string::npos) << r.err;

  // A template failure names the row and the template.
  std::ofstream(file) << R"({"messages": [{"role": "user"}]})"
                      << "\n";
  r = render("--tokenizer " + kQwen3 + " " + file);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find(file + ":1: " + kQwen3 + "/tokenizer_config.json:chat_template:"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("'dict object' has no attribute 'content'"), std::string::npos) << r.err;

  r = render("--tokenizer " + (tmp / "nope").string() + " " + file);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("tokenizer_config.json: file not found"), std::string::npos) << r.err;
}

// A directory given as the rows file: render printed nothing and exited 0 (the stream fails at its
// first read, and no read error was checked); loss said "no rows" and tokenize "read error".
TEST(RenderCli, ADirectoryIsNotARowsFile) {
  zt::testing::TempDir tmp;
  const std::string dir = tmp.path().string();
  const CliRun r = render("--tokenizer " + kQwen3 + " " + dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "zerotune: error: " + dir + ": is a directory; expected a JSONL file\n");
  const std::string model = (fs::path(ZT_TEST_DATA) / "model" / "qwen2_tied").string();
  for (const std::string& cmd : {"loss --model " + model, "tokenize --tokenizer " + kQwen3}) {
    const std::string out = (tmp / "out").string();
    const int rc = std::system(
        (std::string(ZT_BINARY) + " " + cmd + " " + dir + " >" + out + " 2>&1").c_str());
    EXPECT_EQ(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, 1) << cmd;
    EXPECT_EQ(slurp(out), "zerotune: error: " + dir + ": is a directory; expected a JSONL file\n")
        << cmd;
  }
}

// A NUL byte ends the JSON parser's input: the row before it rendered and the rest of the line was
// dropped without a word. Refused naming file, line and column.
TEST(RenderCli, NulByteNamesFileLineAndColumn) {
  zt::testing::TempDir tmp;
  const std::string file = (tmp / "rows.jsonl").string();
  std::ofstream(file, std::ios::binary)
      << R"({"messages": [{"role": "user", "content": "hi"}]})"
      << "\n"
      << R"({"messages": [{"role": "user", "content": "a"}]})" << '\0'
      << R"({"messages": [{"role": "user", "content": "b"}]})"
      << "\n";
  const CliRun r = render("--tokenizer " + kQwen3 + " " + file);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "zerotune: error: " + file +
                       ":2:49: a NUL byte: not JSON text (a truncated or binary file?)\n");
}

}  // namespace
}  // namespace zt::text
