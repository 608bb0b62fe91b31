// bench/sweep_table.py (the context-length sweep's table, `gpu_check.sh bench`) on hand-made
// records: zerotune's full-GC, selective-GC (--keep-attention) and GC-off runs land in their own
// columns, each ratio is to the fastest peer of its row, and a planned run without a record fails
// the table (a sweep whose run aborted must not read as complete).
#include <gtest/gtest.h>

#include <string>

#include "bench/bench_script.h"

namespace {

using Result = zt::testing::ScriptResult;

Result table(const std::string& records, const std::string& args) {
  return zt::testing::run_bench_script("sweep_table.py", "bench.jsonl", records, args);
}

std::string zt_run(int seq, bool gc, bool keep, double tps, double gib) {
  return "{\"config\": \"q\", \"seqs\": 1, \"seq\": " + std::to_string(seq) +
         ", \"system\": \"zerotune\", \"gc\": " + (gc ? "true" : "false") +
         ", \"keep_attention\": " + (keep ? "true" : "false") +
         ", \"offload\": false, \"tokens_per_s\": " + std::to_string(tps) +
         ", \"peak_gib\": " + std::to_string(gib) + ", \"max_allocated_gib\": 20.0}\n";
}

std::string peer_run(const char* variant, const char* system, int seq, double tps) {
  return std::string("{\"config\": \"q\", \"seqs\": 1, \"seq\": ") + std::to_string(seq) +
         ", \"system\": \"" + system + "\", \"variant\": \"" + variant +
         "\", \"gc\": true, \"tokens_per_s\": " + std::to_string(tps) + ", \"peak_gib\": 12.0}\n";
}

const char kArgs[] =
    "--configs q --shapes 1x8192 --gc-off-shapes '' --offload 0 "
    "--peer-variants liger:1,liger32:1 --selective-shapes 1x8192";

TEST(SweepTable, SelectiveCheckpointingHasItsOwnColumnsAndRatio) {
  // Full GC 30,000, selective 33,000; the peers 25,000 (Liger) and 20,000 (fp32 master): both
  // ratios are to Liger, the faster: 1.20x and 1.32x.
  const std::string recs = zt_run(8192, true, false, 30000, 24.0) +
                           zt_run(8192, true, true, 33000, 24.7) +
                           peer_run("liger", "transformers+liger", 8192, 25000) +
                           peer_run("liger32", "transformers+liger fp32-master", 8192, 20000);
  const Result r = table(recs, kArgs);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("    zt sel sel/best sel GiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 x 8192     on      30000         -     25000     20000    1.20x   24.00"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("    33000    1.32x   24.70\n"), std::string::npos) << r.out;
}

TEST(SweepTable, APlannedSelectiveRunWithoutARecordFailsTheTable) {
  const std::string recs = zt_run(8192, true, false, 30000, 24.0) +
                           peer_run("liger", "transformers+liger", 8192, 25000) +
                           peer_run("liger32", "transformers+liger fp32-master", 8192, 20000);
  const Result r = table(recs, kArgs);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.err.find("q 1 x 8192 GC on zt_sel: no record"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("  MISSING        - MISSING\n"), std::string::npos) << r.out;
  // Without --selective-shapes the same records make a complete table with no selective columns.
  const Result plain = table(recs,
                             "--configs q --shapes 1x8192 --gc-off-shapes '' --offload 0 "
                             "--peer-variants liger:1,liger32:1");
  EXPECT_EQ(plain.status, 0) << plain.out << plain.err;
  EXPECT_EQ(plain.out.find("zt sel"), std::string::npos) << plain.out;
}

}  // namespace
