// Run logs read back (train/run_log.h) and compared (train/log_compare.h) for `zerotune compare`.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "core/zt_test_util.h"
#include "io/json.h"
#include "train/log_compare.h"
#include "train/run_log.h"

namespace zt::train {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const fs::path kTrlRun = fs::path(ZT_TEST_DATA) / "train" / "trl_run";

void write_lines(const fs::path& file, const std::vector<std::string>& lines) {
  fs::create_directories(file.parent_path());
  std::ofstream f(file);
  for (const auto& l : lines) f << l << "\n";
}

TEST(RunLog, PythonJsonNanAndInfinityOutsideStrings) {
  const Json j = parse_python_json(
      R"({"a": NaN, "b": [Infinity, -Infinity, 1.5], "s": "NaN Infinity \" NaN"})");
  EXPECT_EQ(j["a"], "NaN");
  EXPECT_EQ(j["b"][0], "Infinity");
  EXPECT_EQ(j["b"][1], "-Infinity");
  EXPECT_EQ(j["s"], "NaN Infinity \" NaN");  // strings untouched
  EXPECT_TRUE(std::isnan(*metric_value(j["a"])));
  EXPECT_EQ(*metric_value(j["b"][0]), std::numeric_limits<double>::infinity());
  EXPECT_EQ(*metric_value(j["b"][1]), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(*metric_value(j["b"][2]), 1.5);
  EXPECT_TRUE(std::isnan(*metric_value(Json(nullptr))));  // zerotune writes NaN as null
  EXPECT_EQ(metric_value(j["s"]), std::nullopt);
  // Shortest round-trip text gives back the same bits.
  EXPECT_EQ(*metric_value(parse_python_json("0.30000000000000004")), 0.1 + 0.2);
  EXPECT_THROW(parse_python_json("{\"a\": nan}"), Json::exception);
}

TEST(RunLog, TrainerStateOfTheNewestCheckpoint) {
  const RunLog log = read_run_log(kTrlRun);
  EXPECT_EQ(log.source, kTrlRun / "checkpoint-4" / "trainer_state.json");
  ASSERT_EQ(log.events.size(), 6u);  // 4 train logs + 2 evals
  const auto loss = metric_series(log, "loss");
  ASSERT_EQ(loss.size(), 4u);
  EXPECT_EQ(loss[2], (std::pair<int64_t, double>{3, 11.9187}));
  const auto eval = metric_series(log, "eval_loss");
  ASSERT_EQ(eval.size(), 2u);
  EXPECT_EQ(eval[1], (std::pair<int64_t, double>{4, 11.91812515258789}));
  // The file itself can be named.
  EXPECT_EQ(read_run_log(kTrlRun / "checkpoint-2" / "trainer_state.json").events.size(), 3u);
}

TEST(RunLog, MetricsJsonlWinsAndAliasesAndLastValuePerStep) {
  TempDir d;
  write_lines(d / "run" / "metrics.jsonl",
              {R"({"loss": 2.0, "accuracy": 0.5, "step": 2})", "",
               R"({"loss": 3.0, "accuracy": 0.25, "step": 1})", R"({"loss": 1.0, "step": 2})"});
  fs::create_directories(d / "run" / "checkpoint-9");
  std::ofstream(d / "run" / "checkpoint-9" / "trainer_state.json")
      << R"({"global_step": 9, "run_id": "x"})";
  const RunLog log = read_run_log(d / "run");
  EXPECT_EQ(log.source, d / "run" / "metrics.jsonl");
  EXPECT_EQ(metric_series(log, "loss"),
            (std::vector<std::pair<int64_t, double>>{{1, 3.0}, {2, 1.0}}));
  EXPECT_EQ(metric_series(log, "mean_token_accuracy", "accuracy"),
            (std::vector<std::pair<int64_t, double>>{{1, 0.25}, {2, 0.5}}));
  EXPECT_TRUE(metric_series(log, "eval_loss").empty());
}

// The steps a log holds more than once for a compared metric, with the most times one metric is
// there; an eval event beside a log event at one step is no repeat, an alias counts as its metric.
TEST(LogCompare, RepeatedStepsOfAResumedLog) {
  RunLog log;
  for (const char* e :
       {R"({"loss": 2.0, "accuracy": 0.5, "step": 1})", R"({"eval_loss": 2.0, "step": 1})",
        R"({"loss": 2.0, "step": 2})", R"({"loss": 1.5, "accuracy": 0.5, "step": 1})",
        R"({"accuracy": 1, "step": 1})", R"({"loss": 1.0, "step": 2})",
        R"({"grad_norm": 1.0, "step": 3})"})
    log.events.push_back(Json::parse(e));
  const auto rep = repeated_steps(log);
  ASSERT_EQ(rep.size(), 2u);
  EXPECT_EQ(rep[0].step, 1);
  EXPECT_EQ(rep[0].times, 3);  // accuracy (mean_token_accuracy's alias) three times
  EXPECT_EQ(rep[1].step, 2);
  EXPECT_EQ(rep[1].times, 2);
  EXPECT_EQ(metric_series(log, "loss"),
            (std::vector<std::pair<int64_t, double>>{{1, 1.5}, {2, 1.0}}));  // the last values
  log.events.erase(log.events.begin() + 3, log.events.end());
  EXPECT_TRUE(repeated_steps(log).empty());
}

TEST(RunLog, ErrorsNameTheFile) {
  TempDir d;
  testing::expect_error([&] { read_run_log(d / "missing"); },
                        {"missing", "no such run directory or file"});
  fs::create_directories(d / "empty" / "checkpoint-3");
  std::ofstream(d / "empty" / "checkpoint-3" / "trainer_state.json") << R"({"global_step": 3})";
  testing::expect_error([&] { read_run_log(d / "empty"); }, {"empty", "no run log found"});
  write_lines(d / "bad" / "metrics.jsonl", {R"({"loss": 1, "step": 1})", "{oops"});
  testing::expect_error([&] { read_run_log(d / "bad"); },
                        {"metrics.jsonl:2: not valid JSON: parse error at line 1, column 2: "});
  EXPECT_EQ(testing::error_of([&] { read_run_log(d / "bad"); }).find("json.exception"),
            std::string::npos);
  write_lines(d / "nostep" / "metrics.jsonl", {R"({"loss": 1})"});
  testing::expect_error([&] { read_run_log(d / "nostep"); },
                        {"metrics.jsonl:1: expected a JSON object with an integer \"step\""});
  write_lines(d / "str" / "metrics.jsonl", {R"({"loss": "low", "step": 5})"});
  testing::expect_error([&] { metric_series(read_run_log(d / "str"), "loss"); },
                        {"metrics.jsonl: step 5: \"loss\" is \"low\", not a number"});
  write_lines(d / "state.json", {R"({"global_step": 3})"});
  testing::expect_error([&] { read_run_log(d / "state.json"); },
                        {"state.json", "no \"log_history\""});
}

TEST(LogCompare, SameBits) {
  EXPECT_TRUE(same_bits(1.5, 1.5));
  EXPECT_FALSE(same_bits(0.0, -0.0));
  EXPECT_FALSE(same_bits(2.5, std::nextafter(2.5, 3.0)));
  EXPECT_TRUE(same_bits(std::nan(""), -std::nan("")));
  EXPECT_FALSE(same_bits(std::nan(""), 1.0));
}

TEST(LogCompare, FirstDifferenceAndLargestDifferences) {
  TempDir d;
  write_lines(d / "a" / "metrics.jsonl", {R"({"loss": 3.0, "grad_norm": 1.0, "step": 1})",
                                          R"({"loss": 2.5, "grad_norm": 1.0, "step": 2})",
                                          R"({"loss": 2.0, "grad_norm": 1.0, "step": 3})",
                                          R"({"loss": 1.0, "grad_norm": 1.0, "step": 4})",
                                          R"({"eval_loss": 2.2, "step": 4})"});
  write_lines(
      d / "b" / "metrics.jsonl",
      {R"({"loss": 3.0, "grad_norm": 1.0, "step": 1})",
       R"({"loss": 2.5, "grad_norm": 1.0, "step": 2})",
       R"({"loss": 2.0000000000000004, "grad_norm": 1.0, "step": 3})",
       R"({"loss": 1.5, "grad_norm": 1.0, "step": 4})", R"({"grad_norm": 1.0, "step": 5})"});
  const CompareResult r = compare_run_logs({read_run_log(d / "a"), read_run_log(d / "b")});
  EXPECT_EQ(r.metrics, (std::vector<std::string>{"loss", "grad_norm", "eval_loss"}));
  ASSERT_EQ(r.diffs.size(), 3u);
  const MetricDiff& loss = r.diffs[0];
  EXPECT_EQ(loss.common_steps, 4);
  EXPECT_EQ(loss.first_diff_step, 3);
  EXPECT_EQ(loss.first_diff, "2 vs 2.0000000000000004");
  EXPECT_EQ(loss.max_abs, 0.5);
  EXPECT_EQ(loss.max_abs_step, 4);
  EXPECT_EQ(loss.max_rel, 0.5 / 1.5);
  EXPECT_EQ(loss.max_rel_step, 4);
  const MetricDiff& gn = r.diffs[1];  // equal on the common steps, but step 5 only in b
  EXPECT_EQ(gn.common_steps, 4);
  EXPECT_EQ(gn.first_diff_step, 5);
  EXPECT_EQ(gn.first_diff, "not logged by the first run");
  EXPECT_EQ(gn.max_abs, 0.0);
  EXPECT_TRUE(r.diffs[2].missing_here);
  EXPECT_FALSE(r.all_equal());
  const CompareResult same = compare_run_logs({read_run_log(d / "a"), read_run_log(d / "a")});
  EXPECT_TRUE(same.all_equal());
  testing::expect_error([&] { compare_run_logs({read_run_log(d / "a")}); }, {"at least two runs"});
}

// A NaN beside a number differs, and by more than any number: the first difference names the NaN
// and max |diff| is NaN at that step (it said "nan vs 1.23" beside a max |diff| of 0).
TEST(LogCompare, NanBesideANumberIsNeverADifferenceOfZero) {
  TempDir d;
  write_lines(d / "a" / "metrics.jsonl", {R"({"loss": 3.0, "grad_norm": 1.0, "step": 1})",
                                          R"({"loss": 1.23, "grad_norm": 2.0, "step": 2})",
                                          R"({"loss": 1.0, "grad_norm": null, "step": 3})",
                                          R"({"loss": 0.5, "grad_norm": 1.0, "step": 4})"});
  write_lines(d / "b" / "metrics.jsonl", {R"({"loss": 3.0, "grad_norm": 1.0, "step": 1})",
                                          R"({"loss": NaN, "grad_norm": Infinity, "step": 2})",
                                          R"({"loss": 1.5, "grad_norm": null, "step": 3})",
                                          R"({"loss": 0.5, "grad_norm": 1.5, "step": 4})"});
  const CompareResult r = compare_run_logs({read_run_log(d / "a"), read_run_log(d / "b")});
  ASSERT_EQ(r.diffs.size(), 2u);
  const MetricDiff& loss = r.diffs[0];
  EXPECT_FALSE(loss.equal());
  EXPECT_EQ(loss.first_diff_step, 2);
  EXPECT_EQ(loss.first_diff, "1.23 vs NaN");
  EXPECT_TRUE(std::isnan(loss.max_abs));  // not the 0.5 of step 3: NaN ranks above any number
  EXPECT_EQ(loss.max_abs_step, 2);
  EXPECT_TRUE(std::isnan(loss.max_rel));
  EXPECT_EQ(loss.max_rel_step, 2);
  const MetricDiff& gn = r.diffs[1];  // null and null (NaN, NaN) agree; 2 vs inf is infinite
  EXPECT_EQ(gn.first_diff, "2 vs inf");
  EXPECT_EQ(gn.max_abs, std::numeric_limits<double>::infinity());
  EXPECT_EQ(gn.max_abs_step, 2);
  EXPECT_EQ(gn.max_rel, std::numeric_limits<double>::infinity());
  // The order and the text.
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(larger_diff(nan, inf));
  EXPECT_TRUE(larger_diff(inf, 1e300));
  EXPECT_TRUE(larger_diff(2.0, 1.0));
  EXPECT_FALSE(larger_diff(nan, nan));
  EXPECT_FALSE(larger_diff(1.0, nan));
  EXPECT_EQ(show_value(nan), "NaN");
  EXPECT_EQ(show_value(-inf), "-inf");
  EXPECT_EQ(show_value(0.1 + 0.2), "0.30000000000000004");
}

}  // namespace
}  // namespace zt::train
