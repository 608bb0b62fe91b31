// `zerotune compare` through the real binary: exit status 0 (bitwise equal) / 1 (differ) / 2 (bad
// input, the file named), the reported step and differences, the TRL trainer_state.json fixture
// (tests/data/train/trl_run), and the PNG (when gnuplot is installed).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/file_util.h"
#include "core/zt_test_util.h"
#include "io/gnuplot_png.h"
#include "io/json.h"

namespace fs = std::filesystem;
using zt::Json;
using zt::testing::CommandResult;
using zt::testing::run_command;

namespace {

const fs::path kTrlRun = fs::path(ZT_TEST_DATA) / "train" / "trl_run";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The table row of `metric` (the line that starts with it), or "".
std::string row(const std::string& output, const std::string& metric) {
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(metric + " ", 0) == 0) return line;
  return "";
}

void write_lines(const fs::path& file, const std::vector<std::string>& lines) {
  fs::create_directories(file.parent_path());
  std::ofstream f(file);
  for (const auto& l : lines) f << l << "\n";
}

// A zerotune-like log of 4 steps and an eval at step 2; `loss3` and `loss4` replace two losses.
std::vector<std::string> run_lines(const std::string& loss3 = "2.5",
                                   const std::string& loss4 = "1.0") {
  return {
      R"({"loss":3.0,"grad_norm":1.25,"learning_rate":0.001,"mean_token_accuracy":0.1,"num_tokens":20.0,"epoch":0.25,"step":1})",
      R"({"loss":2.75,"grad_norm":1.5,"learning_rate":0.001,"mean_token_accuracy":0.2,"num_tokens":40.0,"epoch":0.5,"step":2})",
      R"({"eval_loss":2.6,"eval_mean_token_accuracy":0.3,"epoch":0.5,"step":2})",
      R"({"loss":)" + loss3 +
          R"(,"grad_norm":1.0,"learning_rate":0.001,"mean_token_accuracy":0.3,"num_tokens":60.0,"epoch":0.75,"step":3})",
      R"({"loss":)" + loss4 +
          R"(,"grad_norm":0.5,"learning_rate":0.001,"mean_token_accuracy":0.4,"num_tokens":80.0,"epoch":1.0,"step":4})"};
}

class CompareCli : public ::testing::Test {
 protected:
  CommandResult compare(const std::string& args) {
    return run_command("cd '" + tmp_.path().string() + "' && " + ZT_BINARY + " compare " + args);
  }
  fs::path dir(const std::string& name) const { return tmp_.path() / name; }
  zt::testing::TempDir tmp_;
};

TEST_F(CompareCli, IdenticalRunsExitZero) {
  write_lines(dir("a") / "metrics.jsonl", run_lines());
  write_lines(dir("b") / "metrics.jsonl", run_lines());
  write_lines(dir("c") / "metrics.jsonl", run_lines());
  auto r = compare("a b c --no-png");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "equal: every logged metric is bitwise equal in all 3 runs"))
      << r.output;
  EXPECT_TRUE(contains(row(r.output, "loss"), "none (bitwise equal)")) << r.output;
  EXPECT_TRUE(contains(row(r.output, "eval_loss"), "none (bitwise equal)")) << r.output;
  EXPECT_EQ(row(r.output, "entropy"), "");  // logged by no run: not listed
}

TEST_F(CompareCli, DifferenceAtStep3IsReported) {
  write_lines(dir("a") / "metrics.jsonl", run_lines());
  // One ulp at step 3, 0.5 at step 4.
  write_lines(dir("b") / "metrics.jsonl", run_lines("2.5000000000000004", "1.5"));
  auto r = compare("a b --no-png");
  EXPECT_EQ(r.status, 1) << r.output;
  const std::string loss = row(r.output, "loss");
  EXPECT_TRUE(contains(loss, "step 3: 2.5 vs 2.5000000000000004")) << loss;
  EXPECT_TRUE(contains(loss, "0.5 (step 4)")) << loss;    // max |diff|
  EXPECT_TRUE(contains(loss, "0.333 (step 4)")) << loss;  // max relative: 0.5 / 1.5
  EXPECT_TRUE(contains(row(r.output, "grad_norm"), "none (bitwise equal)")) << r.output;
  EXPECT_TRUE(contains(r.output, "differ: 1 of 6 (metric, run) comparisons differ from A"))
      << r.output;
}

// A NaN in one run where the other has a number: reported as such, and max |diff| is NaN, not 0
// (zerotune writes a NaN as null, TRL as NaN).
TEST_F(CompareCli, NanBesideANumberIsReportedAsNan) {
  write_lines(dir("a") / "metrics.jsonl", run_lines());
  write_lines(dir("b") / "metrics.jsonl", run_lines("null", "1.5"));
  auto r = compare("a b --no-png");
  EXPECT_EQ(r.status, 1) << r.output;
  const std::string loss = row(r.output, "loss");
  EXPECT_TRUE(contains(loss, "step 3: 2.5 vs NaN")) << loss;
  EXPECT_TRUE(contains(loss, "  NaN (step 3)")) << loss;  // max |diff| and max rel. diff
  EXPECT_FALSE(contains(loss, " 0 ")) << loss;
  EXPECT_FALSE(contains(loss, "0.5 (step 4)")) << loss;
}

// A log that holds a step twice (a resumed run's metrics.jsonl repeats the steps after its
// checkpoint): a note names the file, the step and how many times, and the last value is compared
// (it was, silently). Run B's first step-3 and step-4 losses differ from A's; its last ones agree.
TEST_F(CompareCli, RepeatedStepsAreNamedAndTheLastValueIsCompared) {
  write_lines(dir("a") / "metrics.jsonl", run_lines());
  std::vector<std::string> resumed = run_lines("9.0", "9.5");
  for (const auto& l : run_lines()) resumed.push_back(l);  // steps 1-4 again, eval 2 again
  const std::vector<std::string> again = run_lines();
  resumed.push_back(again[4]);  // step 4 a third time
  write_lines(dir("b") / "metrics.jsonl", resumed);
  auto r = compare("a b --no-png");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "zerotune: info: b/metrics.jsonl: step 1 is logged 2 times, step 2 2 times, "
                       "step 3 2 times, step 4 3 times; compare uses the last value of each such "
                       "step (a resumed run's log repeats the steps after its checkpoint, and its "
                       "last line is the resumed run's)\n"))
      << r.output;
  EXPECT_FALSE(contains(r.output, "a/metrics.jsonl: step")) << r.output;
  EXPECT_TRUE(contains(row(r.output, "loss"), "none (bitwise equal)")) << r.output;
  // Past ten repeated steps the rest are counted.
  std::vector<std::string> many;
  for (int pass = 0; pass < 2; ++pass)
    for (int step = 1; step <= 12; ++step)
      many.push_back(fmt::format(R"({{"loss":1.0,"step":{}}})", step));
  write_lines(dir("c") / "metrics.jsonl", many);
  r = compare("c c --no-png");
  EXPECT_TRUE(contains(r.output, "step 10 2 times and 2 more steps; compare uses")) << r.output;
}

TEST_F(CompareCli, TrlTrainerStateFixture) {
  auto r = compare(kTrlRun.string() + " " + kTrlRun.string() + " --no-png");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "checkpoint-4/trainer_state.json, 6 events")) << r.output;
  EXPECT_TRUE(contains(row(r.output, "entropy"), "none (bitwise equal)")) << r.output;
  EXPECT_TRUE(contains(row(r.output, "eval_mean_token_accuracy"), "none (bitwise equal)"))
      << r.output;
  // The same history as a zerotune metrics.jsonl: bitwise equal across the two formats, then one
  // grad_norm changed.
  const Json state = Json::parse(zt::read_file(kTrlRun / "checkpoint-4" / "trainer_state.json"));
  std::vector<std::string> lines;
  for (const Json& e : state["log_history"]) lines.push_back(e.dump());
  write_lines(dir("zt") / "metrics.jsonl", lines);
  r = compare(kTrlRun.string() + " zt --no-png");
  EXPECT_EQ(r.status, 0) << r.output;
  Json changed = state["log_history"][2];
  ASSERT_EQ(changed["step"], 2);
  changed["grad_norm"] = 1.4;
  lines[2] = changed.dump();
  write_lines(dir("zt2") / "metrics.jsonl", lines);
  r = compare(kTrlRun.string() + " zt2 --no-png");
  EXPECT_EQ(r.status, 1) << r.output;
  const std::string gn = row(r.output, "grad_norm");
  EXPECT_TRUE(contains(gn, "step 2: 1.3987523317337036 vs 1.4")) << gn;
  EXPECT_TRUE(contains(gn, "0.00125 (step 2)")) << gn;
  EXPECT_TRUE(contains(row(r.output, "loss"), "none (bitwise equal)")) << r.output;
}

TEST_F(CompareCli, BadInputsExitTwoNamingTheFile) {
  write_lines(dir("a") / "metrics.jsonl", run_lines());
  auto r = compare("a missing_run --no-png");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "missing_run: no such run directory or file")) << r.output;
  fs::create_directories(dir("empty"));
  r = compare("a empty --no-png");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "empty: no run log found")) << r.output;
  write_lines(dir("bad") / "metrics.jsonl", {run_lines()[0], "{\"loss\": 1.0, "});
  r = compare("a bad --no-png");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "bad/metrics.jsonl:2: not valid JSON")) << r.output;
  write_lines(dir("nostep") / "metrics.jsonl", {R"({"loss": 1.0})"});
  r = compare("a nostep --no-png");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(
      contains(r.output, "nostep/metrics.jsonl:1: expected a JSON object with an integer \"step\""))
      << r.output;
  write_lines(dir("text") / "metrics.jsonl", {R"({"loss": "low", "step": 1})"});
  r = compare("a text --no-png");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "text/metrics.jsonl: step 1: \"loss\" is \"low\", not a number"))
      << r.output;
  r = compare("a --no-png");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "need at least two runs")) << r.output;
  r = compare("a a --bogus");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "usage: zerotune compare")) << r.output;
}

TEST_F(CompareCli, PngOfTheCurves) {
  write_lines(dir("a") / "metrics.jsonl", run_lines());
  write_lines(dir("b") / "metrics.jsonl", run_lines("2.5000000000000004", "1.5"));
  // Without gnuplot: a warning, no file, the exit status of the comparison.
  auto r =
      run_command("cd '" + tmp_.path().string() + "' && ZT_GNUPLOT= " + ZT_BINARY + " compare a b");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "no plot written: gnuplot was not found")) << r.output;
  EXPECT_FALSE(fs::exists(dir("compare.png")));
  if (!zt::io::find_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (Debian: gnuplot-nox)";
  r = compare("a b");  // default: compare.png in the current directory
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "plot: compare.png")) << r.output;
  const std::string png = zt::read_file(dir("compare.png"));
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_GT(png.size(), 20000u);  // six panels of curves, axes and text
  fs::create_directories(dir("out"));
  r = compare("a a --png out/same.png");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(zt::testing::list_dir(dir("out")),
            std::vector<std::string>{"same.png"});  // no temp file left
  r = compare("a b --png no_such_dir/x.png");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(
      r.output,
      "no_such_dir/x.png: cannot write the plot: the directory no_such_dir does not exist"))
      << r.output;
}

}  // namespace
