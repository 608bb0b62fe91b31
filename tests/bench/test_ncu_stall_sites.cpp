// bench/ncu_stall_sites.py (a kernel's PC-sampling stall sites by SASS instruction, from ncu's
// source page; gpu_check.sh attnprofile) on a hand-made source-page CSV in ncu's layout: the
// samples by reason, the top instructions in order with their three largest reasons, ncu's
// thousands separators, and the exit status on input without the instruction table.
#include <gtest/gtest.h>

#include <string>

#include "bench/bench_script.h"

namespace {

using Result = zt::testing::ScriptResult;

Result sites(const std::string& csv, const std::string& args) {
  return zt::testing::run_bench_script("ncu_stall_sites.py", "source.csv", csv, args);
}

// Four instructions, 2,000 samples: the BAR.SYNC's 1,200 (barrier 1,000, wait 200), the FFMA's
// 500 (short_sb 450, selected 50), the HGMMA's 300 (selected 300), the LDS's none. By reason:
// barrier 50 %, selected 17.5 %, short_sb 22.5 %, wait 10 %. The "(Not Issued)" columns are
// ignored.
const char* kCsv =
    "\"Kernel Name\",\"void zt::cuda::attn::attn_bwd_sm90<(int)128>(KArgs)\",\n"
    "\"Address\",\"Source\",\"Warp Stall Sampling (All Samples)\",\"stall_barrier\","
    "\"stall_selected\",\"stall_short_sb\",\"stall_wait\",\"stall_barrier (Not Issued)\"\n"
    "\"0x10\",\"      LDS R2, [R3]\",\"0\",\"0\",\"0\",\"0\",\"0\",\"0\"\n"
    "\"0x20\",\"      FFMA R4, R2, UR13, -R5\",\"500\",\"0\",\"50\",\"450\",\"0\",\"0\"\n"
    "\"0x30\",\"      BAR.SYNC.DEFER_BLOCKING 0x1, 0x100\",\"1,200\",\"1,000\",\"0\",\"0\","
    "\"200\",\"9,999\"\n"
    "\"0x40\",\"      HGMMA.64x64x16.F32.BF16 R152, gdesc[UR20], RZ\",\"300\",\"0\",\"300\",\"0\","
    "\"0\",\"0\"\n";

TEST(NcuStallSites, ReasonsAndTopInstructionsInOrder) {
  const Result r = sites(kCsv, "2");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("instructions: 4, samples: 2000\n"), std::string::npos) << r.out;
  EXPECT_NE(
      r.out.find(
          "samples by reason: barrier 50.0 %, short_sb 22.5 %, selected 17.5 %, wait 10.0 %\n"),
      std::string::npos)
      << r.out;
  const size_t bar = r.out.find("    2  60.00 %  barrier:1000 wait:200");
  const size_t ffma = r.out.find("    1  25.00 %  short_sb:450 selected:50");
  ASSERT_NE(bar, std::string::npos) << r.out;
  ASSERT_NE(ffma, std::string::npos) << r.out;
  EXPECT_LT(bar, ffma);
  EXPECT_NE(r.out.find("BAR.SYNC.DEFER_BLOCKING 0x1, 0x100\n"), std::string::npos) << r.out;
  // TOP 2: the HGMMA (third) is left out.
  EXPECT_EQ(r.out.find("HGMMA"), std::string::npos) << r.out;
}

TEST(NcuStallSites, FailsWithoutTheInstructionTable) {
  const Result details = sites("\"ID\",\"Kernel Name\",\"Metric Name\"\n\"0\",\"k\",\"x\"\n", "");
  EXPECT_EQ(details.status, 1);
  EXPECT_NE(details.err.find("no instruction table"), std::string::npos) << details.err;
  const Result no_samples = sites("\"Address\",\"Source\"\n\"0x10\",\"NOP\"\n", "");
  EXPECT_EQ(no_samples.status, 1);
  EXPECT_NE(no_samples.err.find("Warp Stall Sampling"), std::string::npos) << no_samples.err;
}

}  // namespace
