// metrics.jsonl records, HF's console line, TensorBoard tags, the logging window and eval
// accumulator.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "core/file_util.h"
#include "core/zt_test_util.h"
#include "train/metrics.h"

namespace zt::train {
namespace {

TEST(Metrics, FormatG4MatchesPython) {
  // Right-hand sides: Python's f"{v:.4g}".
  const std::vector<std::pair<double, std::string>> cases = {{1.2345678, "1.235"},
                                                             {2e-5, "2e-05"},
                                                             {0.5, "0.5"},
                                                             {12345.0, "1.234e+04"},
                                                             {1234.5, "1234"},
                                                             {0.0001, "0.0001"},
                                                             {1.234e-05, "1.234e-05"},
                                                             {1e16, "1e+16"},
                                                             {-3.14159, "-3.142"},
                                                             {0.0, "0"},
                                                             {100.0, "100"},
                                                             {1.0 / 3, "0.3333"},
                                                             {2.4975e-05, "2.498e-05"}};
  for (const auto& [v, s] : cases) EXPECT_EQ(format_g4(v), s) << v;
  EXPECT_EQ(format_g4(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(format_g4(-std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(format_g4(-std::numeric_limits<double>::infinity()), "-inf");
}

TEST(Metrics, RecordJsonAndHfLine) {
  MetricRecord r;
  r.set("loss", 1.2345678);
  r.set("grad_norm", 0.5);
  r.set("learning_rate", 2e-5);
  r.set("num_tokens", 12345.0);
  r.set("epoch", 0.25);
  r.set("step", int64_t{10});
  r.set("loss", 1.5);  // replaced in place
  EXPECT_EQ(
      r.to_json().dump(),
      R"({"loss":1.5,"grad_norm":0.5,"learning_rate":2e-05,"num_tokens":12345.0,"epoch":0.25,)"
      R"("step":10})");
  EXPECT_EQ(hf_log_line(r),
            "{'loss': '1.5', 'grad_norm': '0.5', 'learning_rate': '2e-05', 'num_tokens': "
            "'1.234e+04', 'epoch': '0.25'}");
  EXPECT_EQ(r.number("step"), 10.0);
  EXPECT_EQ(r.find("missing"), nullptr);
  testing::expect_error([&] { r.number("eval_loss"); }, {"no key 'eval_loss'"});
  MetricRecord nan;
  nan.set("loss", std::nan(""));
  EXPECT_EQ(nan.to_json().dump(), R"({"loss":null})");
}

TEST(Metrics, TensorBoardTagsFollowHfRewriteLogs) {
  EXPECT_EQ(hf_tensorboard_tag("loss"), "train/loss");
  EXPECT_EQ(hf_tensorboard_tag("eval_loss"), "eval/loss");
  EXPECT_EQ(hf_tensorboard_tag("eval_mean_token_accuracy"), "eval/mean_token_accuracy");
  EXPECT_EQ(hf_tensorboard_tag("test_x"), "test/x");
  EXPECT_EQ(hf_tensorboard_tag("evaluation"), "train/evaluation");
  MetricRecord r;
  r.set("loss", 2.0);
  r.set("epoch", 1.0);
  r.set("step", int64_t{4});
  const auto s = tensorboard_scalars(r);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0], (std::pair<std::string, double>{"train/loss", 2.0}));
  EXPECT_EQ(s[1], (std::pair<std::string, double>{"train/epoch", 1.0}));
}

TEST(Metrics, LogWindowMeansAndTokenWeightedAccuracy) {
  LogWindow w(1000);
  w.add_step({.loss = 2.0,
              .grad_norm = 3.0,
              .learning_rate = 1e-5,
              .target_tokens = 10,
              .correct_tokens = 5,
              .entropy_sum = 30.0,
              .tokens = 40});
  w.add_step({.loss = 1.0,
              .grad_norm = 1.5,
              .learning_rate = 2e-5,
              .target_tokens = 30,
              .correct_tokens = 27,
              .entropy_sum = 30.0,
              .tokens = 60});
  EXPECT_EQ(w.steps(), 2);
  const MetricRecord r = w.take(20, 0.5, 4.0);
  // loss = (2 + 1) / 2; entropy = 60 / 40 (not (3 + 1) / 2); accuracy = 32 / 40 (not
  // (0.5 + 0.9) / 2); tokens 1000 + 100; 100 tok / 4 s. Keys in TRL 1.16's order.
  EXPECT_EQ(r.to_json().dump(),
            R"({"loss":1.5,"grad_norm":1.5,"learning_rate":2e-05,"entropy":1.5,)"
            R"("mean_token_accuracy":0.8,"num_tokens":1100.0,"target_tokens":40,"epoch":0.5,)"
            R"("train_tokens_per_second":25.0,"step":20})");
  EXPECT_EQ(hf_log_line(r),
            "{'loss': '1.5', 'grad_norm': '1.5', 'learning_rate': '2e-05', 'entropy': '1.5', "
            "'mean_token_accuracy': '0.8', 'num_tokens': '1100', 'target_tokens': 40, 'epoch': '0.5', "
            "'train_tokens_per_second': '25'}");
  const auto tb = tensorboard_scalars(r);
  ASSERT_GE(tb.size(), 4u);
  EXPECT_EQ(tb[3].first, "train/entropy");
  EXPECT_EQ(tb[3].second, 1.5);
  EXPECT_EQ(w.steps(), 0);
  EXPECT_EQ(w.num_tokens_seen(), 1100);
  testing::expect_error([&] { w.take(21, 0.6, 1.0); }, {"step 21", "no optimizer step"});
}

TEST(Metrics, LogWindowSkippedSteps) {
  LogWindow w;
  w.add_step({.loss = 3.0,
              .grad_norm = 2.0,
              .learning_rate = 1e-5,
              .target_tokens = 4,
              .correct_tokens = 1,
              .entropy_sum = 2.0,
              .tokens = 10});
  w.add_step({.learning_rate = 3e-5, .tokens = 7, .skipped = true});
  MetricRecord r = w.take(2, 1.0, 0.0);
  EXPECT_EQ(r.to_json().dump(),
            R"({"loss":3.0,"grad_norm":2.0,"learning_rate":3e-05,"entropy":0.5,)"
            R"("mean_token_accuracy":0.25,)"
            R"("num_tokens":17.0,"target_tokens":4,"epoch":1.0,"skipped_steps":1,"step":2})");
  w.add_step({.learning_rate = 3e-5, .tokens = 5, .skipped = true});
  r = w.take(3, 1.5, 1.0);
  EXPECT_EQ(r.to_json().dump(),
            R"({"learning_rate":3e-05,"num_tokens":22.0,"epoch":1.5,"train_tokens_per_second":5.0,)"
            R"("skipped_steps":1,"step":3})");
}

// A run that does not clip (max_grad_norm <= 0) logs no grad_norm, in every window.
TEST(Metrics, LogWindowWithoutClippingLogsNoGradNorm) {
  LogWindow w(0, /*log_grad_norm=*/false);
  for (int64_t step = 1; step <= 2; ++step) {
    w.add_step({.loss = 2.0,
                .grad_norm = 3.0,
                .learning_rate = 1e-5,
                .target_tokens = 2,
                .correct_tokens = 1,
                .entropy_sum = 1.0,
                .tokens = 4});
    EXPECT_EQ(w.take(step, 0.5 * static_cast<double>(step), 0.0).to_json().dump(),
              fmt::format(R"({{"loss":2.0,"learning_rate":1e-05,"entropy":0.5,)"
                          R"("mean_token_accuracy":0.5,"num_tokens":{}.0,"target_tokens":2,)"
                          R"("epoch":{},"step":{}}})",
                          4 * step, step == 1 ? "0.5" : "1.0", step));
  }
}

TEST(Metrics, EvalAccumulatorIsTokenWeighted) {
  EvalAccumulator e;
  e.add(10.0, 4, 2, 4.0);  // batch mean 2.5, entropy 1
  e.add(2.0, 4, 4, 2.0);   // batch mean 0.5, entropy 0.5
  e.add(6.0, 2, 0, 6.0);   // batch mean 3.0 -> HF's unweighted mean would be 2.0; entropy 3
  EvalRunInfo run;
  run.runtime_seconds = 2.0;
  run.num_samples = 5;
  run.num_steps = 3;
  run.num_tokens = 1650;
  const MetricRecord r = e.take(30, 1.25, run);
  EXPECT_EQ(r.to_json().dump(),
            R"({"eval_loss":1.8,"eval_runtime":2.0,"eval_samples_per_second":2.5,)"
            R"("eval_steps_per_second":1.5,"eval_entropy":1.2,"eval_mean_token_accuracy":0.6,)"
            R"("eval_num_tokens":1650.0,"epoch":1.25,"step":30})");
  EXPECT_EQ(hf_log_line(r),
            "{'eval_loss': '1.8', 'eval_runtime': '2', 'eval_samples_per_second': '2.5', "
            "'eval_steps_per_second': '1.5', 'eval_entropy': '1.2', 'eval_mean_token_accuracy': "
            "'0.6', 'eval_num_tokens': '1650', 'epoch': '1.25'}");
  EXPECT_EQ(tensorboard_scalars(r)[1].first, "eval/runtime");
  EXPECT_EQ(tensorboard_scalars(r)[4].first, "eval/entropy");
  testing::expect_error([] { EvalAccumulator().take(5, 0.0, EvalRunInfo{}); },
                        {"step 5", "no target token"});
}

TEST(Metrics, PythonRoundMatchesPython) {
  // Right-hand sides: Python 3's round(x, n).
  const std::vector<std::tuple<double, int, double>> cases = {
      {1.03125, 4, 1.0312},  // an exact tie: to even
      {2.675, 2, 2.67},      // 2.67499999…: below the tie
      {5e-05, 4, 0.0001},    // 5.0000000000000004e-05: above it
      {11.93214, 4, 11.9321}, {11.92545, 4, 11.9254}, {0.123456789, 4, 0.1235},
      {46.66355, 3, 46.664},  {9.3325, 3, 9.332},     {1234567.89012345, 4, 1234567.8901},
      {1e20, 4, 1e20},        {0.5, 0, 0.0},          {1.5, 0, 2.0},
      {2.5, 0, 2.0}};
  for (const auto& [x, n, want] : cases) EXPECT_EQ(python_round(x, n), want) << x << " " << n;
  const double neg = python_round(-1e-05, 4);  // Python: -0.0
  EXPECT_EQ(neg, 0.0);
  EXPECT_TRUE(std::signbit(neg));
  EXPECT_TRUE(std::isnan(python_round(std::nan(""), 4)));
  EXPECT_EQ(python_round(-std::numeric_limits<double>::infinity(), 4),
            -std::numeric_limits<double>::infinity());
  testing::expect_error([] { python_round(1.0, -1); }, {"ndigits", "[0, 17]", "-1"});
}

TEST(Metrics, SpeedMetricsAreTransformers) {
  // Python: round(0.21434999, 4), round(10 / 0.21434999, 3), round(2 / 0.21434999, 3).
  MetricRecord r;
  add_speed_metrics(r, "eval", 0.21434999, 10, 2);
  EXPECT_EQ(
      r.to_json().dump(),
      R"({"eval_runtime":0.2143,"eval_samples_per_second":46.653,"eval_steps_per_second":9.331})");
  MetricRecord zero;  // transformers returns the runtime alone when it is 0
  add_speed_metrics(zero, "train", 0.0, 10, 2);
  EXPECT_EQ(zero.to_json().dump(), R"({"train_runtime":0.0})");
  testing::expect_error(
      [] {
        MetricRecord x;
        add_speed_metrics(x, "eval", -1.0, 1, 1);
      },
      {"eval_runtime", ">= 0", "-1"});
  testing::expect_error(
      [] {
        MetricRecord x;
        add_speed_metrics(x, "train", 1.0, -2, 1);
      },
      {"train speed metrics", "-2"});
}

TEST(Metrics, WriterAppendsFlushedLinesAndTruncatesOnResume) {
  testing::TempDir dir;
  const auto path = dir / "exp" / "metrics.jsonl";
  auto rec = [](int64_t step, double loss) {
    MetricRecord r;
    r.set("loss", loss);
    r.set("step", step);
    return r;
  };
  {
    MetricsWriter w(path);
    w.write(rec(10, 2.5));
    w.write(rec(20, 2.0));
    // Flushed: visible before the writer closes.
    EXPECT_EQ(read_file(path), "{\"loss\":2.5,\"step\":10}\n{\"loss\":2.0,\"step\":20}\n");
    w.write(rec(30, 1.5));
  }
  {
    MetricsWriter w(path);  // plain append
    w.write(rec(40, 1.25));
  }
  EXPECT_EQ(read_file(path),
            "{\"loss\":2.5,\"step\":10}\n{\"loss\":2.0,\"step\":20}\n{\"loss\":1.5,\"step\":30}\n"
            "{\"loss\":1.25,\"step\":40}\n");
  {
    MetricsWriter w(path, int64_t{20});  // resumed from checkpoint-20
    w.write(rec(30, 1.75));
  }
  EXPECT_EQ(
      read_file(path),
      "{\"loss\":2.5,\"step\":10}\n{\"loss\":2.0,\"step\":20}\n{\"loss\":1.75,\"step\":30}\n");
  write_file_atomic(path, "{\"loss\":2.5,\"step\":10}\nnot json\n");
  testing::expect_error([&] { MetricsWriter w(path, int64_t{5}); },
                        {"metrics.jsonl:2", "integer \"step\"", "not json"});
}

}  // namespace
}  // namespace zt::train
