// bench/gpu_trace_summary.py (the GPU's busy and idle time per training step from a CUPTI trace,
// `gpu_check.sh timeline`) on hand-made traces whose numbers are worked out below: the union of
// overlapping work on two streams, gaps caused by a late host launch and by waiting, the step a gap
// belongs to, the skipped first and uncounted last step, and the exit status on unusable input.
#include <gtest/gtest.h>

#include <string>

#include "bench/bench_script.h"

namespace {

using Result = zt::testing::ScriptResult;

Result summarise(const std::string& trace, const std::string& args) {
  return zt::testing::run_bench_script("gpu_trace_summary.py", "trace.tsv", trace, args);
}

// kind start end stream correlation name (times in ns), one record per line.
std::string rec(const char* kind, long long start, long long end, int stream, int corr,
                const std::string& name) {
  return std::string(kind) + "\t" + std::to_string(start) + "\t" + std::to_string(end) + "\t" +
         std::to_string(stream) + "\t" + std::to_string(corr) + "\t" + name + "\n";
}

const std::string kEmb = "void zt::cuda::(anonymous namespace)::embedding_fwd_kernel<int>(int*)";

// Step 0 (skipped): 0-0.5 ms. Step 1: 2.0-3.0 ms —
//   embedding 2.00-2.10; A 2.15-2.40 (its launch call began at 2.13: 30 µs of the 50 µs gap are
//   the host's); B on another stream 2.30-2.60 (busy grows by 0.20 only); a memset 2.70-2.71
//   (launched long before: a 100 µs wait); then 290 µs idle up to step 2's embedding, whose launch
//   began at 2.89 (180 µs of it the host's), a gap that is step 1's. A stream synchronisation
//   2.50-2.65 on the host. busy 0.10 + 0.25 + 0.20 + 0.01 = 0.56 ms, idle 0.05 + 0.10 + 0.29 =
//   0.44, host-late 0.03 + 0.18 = 0.21.
// Step 2 (the last: not counted): 3.0-3.5.
std::string two_stream_trace() {
  std::string t;
  t += rec("kernel", 0, 100000, 7, 1, kEmb);
  t += rec("kernel", 100000, 500000, 7, 2, "nvjet_sm90_tst_256x128");
  t += rec("api", 1990000, 1995000, 1, 11, "cudaLaunchKernel");
  t += rec("kernel", 2000000, 2100000, 7, 11, kEmb);
  t += rec("api", 2130000, 2140000, 1, 12, "cudaLaunchKernel");
  t += rec("kernel", 2150000, 2400000, 7, 12, "void zt::cuda::map_kernel<3>(float*)");
  t += rec("api", 1999000, 2000000, 1, 13, "cudaLaunchKernel");
  t += rec("kernel", 2300000, 2600000, 9, 13, "nvjet_sm90_tss_128x256");
  t += rec("api", 1899000, 1900000, 1, 14, "cudaMemsetAsync");
  t += rec("memset", 2700000, 2710000, 7, 14, "memset 4 B");
  t += rec("api", 2500000, 2650000, 1, 99, "cudaStreamSynchronize");
  t += rec("api", 2890000, 2900000, 1, 21, "cudaLaunchKernel");
  t += rec("kernel", 3000000, 3100000, 7, 21, kEmb);
  t += rec("kernel", 3100000, 3500000, 7, 22, "nvjet_sm90_tst_256x128");
  return t;
}

TEST(GpuTraceSummary, BusyIdleAndHostLateTimeOfAStep) {
  const Result r = summarise(two_stream_trace(), "--skip 1");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("   1     1.00     0.56     0.44          0.21     0.15       4\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("(skipped)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(last: not counted)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mean over 1 steps: span 1.00 ms, busy 0.56 ms (56.0 %), idle 0.44 ms, of "
                       "it host-late 0.21 ms; host in synchronising calls 0.15 ms"),
            std::string::npos)
      << r.out;
  // The largest idle source first: the memset, then step 2's embedding gather.
  const size_t top = r.out.find("largest idle sources");
  ASSERT_NE(top, std::string::npos) << r.out;
  const std::string first = r.out.substr(r.out.find('\n', top) + 1);
  EXPECT_EQ(first.substr(0, first.find('\n')),
            "    0.290 ms  host  0.180  x   1.0  memset 4 B -> embedding_fwd_kernel");
  EXPECT_NE(r.out.find("    0.100 ms  host  0.000  x   1.0  nvjet_sm90_tss_128x256 -> memset 4 B"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("    0.050 ms  host  0.030  x   1.0  embedding_fwd_kernel -> map_kernel"),
            std::string::npos)
      << r.out;
}

// Work on a second stream that runs past the next step's first kernel counts in each step for its
// own part (a step's busy time never exceeds its span): step 1 is 1.0-2.0 ms, its side-stream
// kernel 1.95-3.0, so step 1 is busy 0.10 + 0.80 + 0.05 and idle 0.05 (1.90-1.95).
TEST(GpuTraceSummary, WorkAcrossAStepBoundaryIsSplit) {
  std::string t;
  t += rec("kernel", 0, 100000, 7, 1, kEmb);
  t += rec("kernel", 1000000, 1100000, 7, 2, kEmb);
  t += rec("kernel", 1100000, 1900000, 7, 3, "K");
  t += rec("kernel", 1950000, 3000000, 9, 4, "sideK");
  t += rec("kernel", 2000000, 2100000, 7, 5, kEmb);
  t += rec("kernel", 2100000, 2900000, 7, 6, "K");
  const Result r = summarise(t, "--skip 1");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("   1     1.00     0.95     0.05          0.00     0.00       3\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("   2     1.00     1.00     0.00          0.00     0.00       2  (last"),
            std::string::npos)
      << r.out;
}

TEST(GpuTraceSummary, FailsWithoutStepsOrOnAMalformedLine) {
  // Only the first and the last step would be left: nothing to count.
  const Result few = summarise(two_stream_trace(), "--skip 2");
  EXPECT_EQ(few.status, 1);
  EXPECT_NE(few.err.find("3 steps found"), std::string::npos) << few.err;
  const Result none = summarise(two_stream_trace(), "--marker no_such_kernel");
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.err.find("0 steps found"), std::string::npos) << none.err;
  const Result bad = summarise("kernel\t1\t2\t7\n", "");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("trace.tsv:1: expected 6 tab-separated fields, got 4"), std::string::npos)
      << bad.err;
  const Result empty = summarise(rec("api", 1, 2, 1, 1, "cudaMalloc"), "");
  EXPECT_EQ(empty.status, 1);
  EXPECT_NE(empty.err.find("no device records"), std::string::npos) << empty.err;
}

}  // namespace
