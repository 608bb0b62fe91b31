// `zerotune loss` end to end: JSONL in, one JSON object out, compared with transformers' numbers
// from the model goldens (mean loss, target count, every parameter's gradient norm).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include "model_test_util.h"

namespace zt {
namespace {

struct RunResult {
  int status = -1;
  std::string out;
};

RunResult run(const std::string& args) {
  const std::string cmd = std::string(ZT_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  RunResult r;
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  r.status = WEXITSTATUS(pclose(p));
  return r;
}

std::string write_rows(const test::Golden& g, const std::string& name) {
  const auto path = std::filesystem::path(::testing::TempDir()) / name;
  std::ofstream f(path);
  for (const auto& ex : g.json["examples"]) {
    Json row = Json::object();
    row["input_ids"] = ex["input_ids"];
    row["labels"] = ex["labels"];
    f << row.dump() << "\n";
  }
  return path.string();
}

TEST(CmdLoss, MatchesTransformersLossAndGradientNorms) {
  const test::Golden g("llama3");
  const std::string file = write_rows(g, "zt_loss_rows.jsonl");
  const RunResult r =
      run("loss --model " + test::model_dir("llama3").string() + " " + file + " --grad-norms");
  ASSERT_EQ(r.status, 0) << r.out;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["examples"].get<int64_t>(), 7);
  EXPECT_EQ(j["tokens"].get<int64_t>(), 295);
  EXPECT_EQ(j["targets"].get<int64_t>(), g.targets());
  const double mean_ref = g.json["mean_loss"].get<double>();
  EXPECT_NEAR(j["mean_loss"].get<double>(), mean_ref, 2e-6 * mean_ref);
  ASSERT_EQ(j["grad_norms"].size(), g.json["grad_norms"].size());
  for (const auto& [name, ref] : g.json["grad_norms"].items())
    EXPECT_NEAR(j["grad_norms"][name].get<double>(), ref.get<double>(), 1e-5 * ref.get<double>())
        << name;
  const double total_ref = g.json["total_grad_norm"].get<double>();
  EXPECT_NEAR(j["total_grad_norm"].get<double>(), total_ref, 1e-5 * total_ref);

  // bf16 storage with checkpointing: same targets, loss within bf16 tolerance.
  const RunResult b = run("loss --model " + test::model_dir("llama3").string() + " " + file +
                          " --dtype bf16 --checkpointing");
  ASSERT_EQ(b.status, 0) << b.out;
  const Json jb = Json::parse(b.out);
  EXPECT_EQ(jb["targets"].get<int64_t>(), g.targets());
  EXPECT_NEAR(jb["mean_loss"].get<double>(), mean_ref, 1e-2 * mean_ref);
  EXPECT_FALSE(jb.contains("grad_norms"));
}

TEST(CmdLoss, BadRowNamesFileAndLine) {
  const auto path = std::filesystem::path(::testing::TempDir()) / "zt_loss_bad.jsonl";
  {
    std::ofstream f(path);
    f << "{\"input_ids\": [1, 2, 3]}\n{\"input_ids\": [1, 2], \"labels\": [1]}\n";
  }
  const RunResult r =
      run("loss --model " + test::model_dir("qwen2_tied").string() + " " + path.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "zerotune: error: " + path.string() + ":2: 2 input_ids but 1 labels\n");
}

// A label of 2^64 - 100 was read as -100 (not trained) through a wrap to int64: out of the 32-bit
// range, it is an error naming the file, line and key, as 2^31 is.
TEST(CmdLoss, LabelOutOfRangeIsAnErrorNotAWrap) {
  const auto path = std::filesystem::path(::testing::TempDir()) / "zt_loss_wrap.jsonl";
  {
    std::ofstream f(path);
    f << "{\"input_ids\": [1, 2, 3], \"labels\": [1, 2, 3]}\n"
      << "{\"input_ids\": [1, 2, 3], \"labels\": [1, 18446744073709551516, 3]}\n";
  }
  const std::string model = test::model_dir("qwen2_tied").string();
  RunResult r = run("loss --model " + model + " " + path.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "zerotune: error: " + path.string() +
                       ":2: \"labels\"[1] = 18446744073709551516 does not fit in 32 bits\n");
  {
    std::ofstream f(path);
    f << "{\"input_ids\": [1, 2, 3], \"labels\": [1, 2147483648, 3]}\n";
  }
  r = run("loss --model " + model + " " + path.string());
  EXPECT_EQ(r.out, "zerotune: error: " + path.string() +
                       ":1: \"labels\"[1] = 2147483648 does not fit in 32 bits\n");
}

// A NUL byte ends the JSON parser's input: the row before it was trained on and the rest of the
// line dropped without a word. Refused naming file, line and column.
TEST(CmdLoss, NulByteNamesFileLineAndColumn) {
  const auto path = std::filesystem::path(::testing::TempDir()) / "zt_loss_nul.jsonl";
  {
    std::ofstream f(path, std::ios::binary);
    f << "{\"input_ids\": [1, 2, 3]}" << '\0' << "{\"input_ids\": [4, 5]}\n";
  }
  const RunResult r =
      run("loss --model " + test::model_dir("qwen2_tied").string() + " " + path.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "zerotune: error: " + path.string() +
                       ":1:25: a NUL byte: not JSON text (a truncated or binary file?)\n");
}

}  // namespace
}  // namespace zt
