// The stdout progress display: the bar text, in-place redraws on a terminal, plain lines elsewhere.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "core/zt_test_util.h"
#include "train/progress.h"

namespace zt::train {
namespace {

// Everything written to a tmpfile.
std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  return s;
}

MetricRecord loss_record(double loss, int64_t step) {
  MetricRecord r;
  r.set("loss", loss);
  r.set("epoch", 0.5);
  r.set("step", step);
  return r;
}

TEST(Progress, FormatInterval) {
  EXPECT_EQ(format_interval(0), "00:00");
  EXPECT_EQ(format_interval(83.9), "01:23");
  EXPECT_EQ(format_interval(3599), "59:59");
  EXPECT_EQ(format_interval(3600), "1:00:00");
  EXPECT_EQ(format_interval(100000), "27:46:40");
  EXPECT_EQ(format_interval(-1), "?");
}

TEST(Progress, BarText) {
  ProgressDisplay p(stdout, false, 1000, 0, 100.0);
  EXPECT_EQ(p.bar_text(0, 100.0), "  0%|                    | 0/1000 [00:00<?, ?it/s]");
  // 370 steps in 83.2 s: 4.447 it/s, 630 left -> 141.7 s.
  EXPECT_EQ(p.bar_text(370, 183.2),
            " 37%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u258d            | 370/1000 "
            "[01:23<02:21,  4.45it/s]");
  EXPECT_EQ(p.bar_text(1000, 300.0),
            "100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588"
            "\u2588\u2588\u2588\u2588\u2588\u2588\u2588| 1000/1000 [03:20<00:00,  5.00it/s]");
  // Slower than a step per second: s/it. Resumed at 500: the rate counts this run's steps only.
  ProgressDisplay q(stdout, false, 1000, 500, 0.0);
  EXPECT_EQ(q.bar_text(502, 5.0),
            " 50%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588"
            "          | 502/1000 [00:05<20:45,  2.50s/it]");
}

TEST(Progress, TerminalRedrawsInPlaceAndPrintsLogsAboveTheBar) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  ProgressDisplay p(f, true, 4, 0, 0.0);
  p.update(1, 1.0);
  p.update(2, 1.05);  // < 0.1 s after the last draw: not redrawn
  p.log(loss_record(1.25, 2));
  p.update(4, 2.0);  // last step: always drawn
  p.finish(2.0);
  const std::string bar1 =
      "\r 25%|\u2588\u2588\u2588\u2588\u2588               | 1/4 [00:01<00:03,  1.00it/s]\x1b[K";
  const std::string bar2 =
      "\r 50%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588          | 2/4 "
      "[00:01<00:01,  1.90it/s]\x1b[K";
  const std::string full = "\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588";
  const std::string bar4 = "\r100%|" + full + full + "| 4/4 [00:02<00:00,  2.00it/s]\x1b[K";
  // The log redraws the bar of the latest update (step 2 at 1.05 s).
  EXPECT_EQ(contents(f),
            bar1 + "\r\x1b[K{'loss': '1.25', 'epoch': '0.5'}\n" + bar2 + bar4 + bar4 + "\n");
  std::fclose(f);
}

TEST(Progress, PlainStreamGetsOnlyLines) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  ProgressDisplay p(f, false, 4, 0, 0.0);
  p.update(1, 1.0);
  p.log(loss_record(2.0, 1));
  p.update(2, 2.0);
  p.message("saved checkpoint-2");
  p.finish(3.0);
  EXPECT_EQ(contents(f), "{'loss': '2', 'epoch': '0.5'}\nsaved checkpoint-2\n");
  std::fclose(f);
  EXPECT_FALSE(ProgressDisplay::stream_is_tty(nullptr));
}

TEST(Progress, Errors) {
  testing::expect_error([] { ProgressDisplay(stdout, false, 0, 0, 0.0); }, {"total_steps", "0"});
  testing::expect_error([] { ProgressDisplay(stdout, false, 5, 6, 0.0); }, {"initial step 6"});
}

}  // namespace
}  // namespace zt::train
