// `zerotune loss` end to end: JSONL in, one JSON object out, compared with transformers' numbers
// from the model goldens (mean loss, target count, every parameter's gradient norm).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include "core/file_util.h"
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

// A token id outside the model's vocabulary is named with its file, line and index (the message
// named only the packed micro-batch's position, "micro-batch: token id 999999 at position 4"), and
// an attention_mask / position_ids that would change transformers' result is refused (both were
// ignored without a word).
TEST(CmdLoss, RowsOutsideWhatItComputesNameFileLineAndKey) {
  const auto path = std::filesystem::path(::testing::TempDir()) / "zt_loss_vocab.jsonl";
  const std::string model = test::model_dir("qwen2_tied").string();
  const int64_t vocab = load_model_config(model).vocab_size;
  const auto run_rows = [&](const std::string& second_row) {
    std::ofstream(path) << "{\"input_ids\": [1, 2, 3], \"labels\": [1, 2, 3]}\n"
                        << second_row << "\n";
    return run("loss --model " + model + " " + path.string());
  };
  const std::string where = "zerotune: error: " + path.string() + ":2: ";
  RunResult r = run_rows("{\"input_ids\": [1, " + std::to_string(vocab) + ", 3]}");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, where + "\"input_ids\"[1] = " + std::to_string(vocab) +
                       " is outside the model's vocabulary [0, " + std::to_string(vocab) + ")\n");
  r = run_rows("{\"input_ids\": [1, 2], \"labels\": [-100, -7]}");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, where + "\"labels\"[1] = -7 is outside [0, " + std::to_string(vocab) +
                       ") and not -100\n");
  r = run_rows("{\"input_ids\": [1, 2, 3], \"attention_mask\": [1, 1, 0]}");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, where +
                       "\"attention_mask\" is not all ones; zerotune loss runs each row as one "
                       "unpadded sequence (put only its real tokens in input_ids)\n");
  r = run_rows("{\"input_ids\": [1, 2, 3], \"position_ids\": [0, 0, 1]}");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, where +
                       "\"position_ids\" is not 0, 1, … in order; zerotune loss runs each row as "
                       "one unpadded sequence (put only its real tokens in input_ids)\n");
  // Their defaults change nothing: the same result as without them.
  const RunResult plain = run_rows("{\"input_ids\": [4, 5, 6]}");
  ASSERT_EQ(plain.status, 0) << plain.out;
  r = run_rows(
      "{\"input_ids\": [4, 5, 6], \"attention_mask\": [1, 1, 1], \"position_ids\": [0, 1, 2]}");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, plain.out);
}

// rope_scaling "dynamic" (NTK): the default frequencies while every sequence fits in
// max_position_embeddings (transformers rescales only beyond it; factor 2 leaves the base exactly
// as it is), and a longer sequence is an error naming the limit rather than a silent other RoPE.
TEST(CmdLoss, DynamicRopeIsTheDefaultWithinMaxPositionsAndRefusedBeyond) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "zt_loss_dynamic";
  fs::remove_all(dir);
  fs::copy(test::model_dir("qwen2_tied"), dir, fs::copy_options::recursive);
  Json cfg = Json::parse(read_file(dir / "config.json"));
  cfg["max_position_embeddings"] = 4;
  write_file_atomic(dir / "config.json", cfg.dump(2));
  const auto rows = dir / "rows.jsonl";
  std::ofstream(rows) << "{\"input_ids\": [1, 2, 3, 4]}\n";
  const RunResult plain = run("loss --model " + dir.string() + " " + rows.string());
  ASSERT_EQ(plain.status, 0) << plain.out;
  cfg["rope_parameters"]["rope_type"] = "dynamic";  // its rope_theta (1e6) stays
  cfg["rope_parameters"]["factor"] = 2.0;
  write_file_atomic(dir / "config.json", cfg.dump(2));
  const RunResult dyn = run("loss --model " + dir.string() + " " + rows.string());
  ASSERT_EQ(dyn.status, 0) << dyn.out;
  EXPECT_EQ(dyn.out, plain.out);
  std::ofstream(rows) << "{\"input_ids\": [1, 2, 3, 4, 5]}\n";
  const RunResult longer = run("loss --model " + dir.string() + " " + rows.string());
  EXPECT_EQ(longer.status, 1);
  EXPECT_NE(longer.out.find("zerotune: error: model: a sequence of 5 positions is longer than "
                            "max_position_embeddings 4 under rope type \"dynamic\""),
            std::string::npos)
      << longer.out;
  fs::remove_all(dir);
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
