// A self-test of a Comm: every collective on deterministic data, checked against values computed
// locally. Used by `zerotune comm-check` (to check a multi-process setup) and by the tests.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dist/comm.h"

namespace zt::dist {

// The fp32 value rank `rank` contributes at index i of the self-test's reduce-scatter buffer:
// pseudo-random, sign and magnitude (2^-20 … 2^20) varying, so that the sum depends on the order
// in which the ranks' values are added.
float selftest_value(int rank, size_t i);

// Runs reduce_scatter_sum (plain and accumulating, shard of `shard` elements per rank), all_gather
// (fp32, bf16, in place), broadcast (from the first and last rank), barrier, the small all_reduce
// (f64/f32/i64, sum/max) and sum_in_rank_order, each checked bit for bit. Throws zt::Error naming
// the first wrong collective, index, value and expected value. Returns the digest of the gathered
// reduce-scatter result: the same on every rank, and equal to selftest_expected_digest().
uint64_t run_comm_selftest(Comm& comm, size_t shard);

// The digest run_comm_selftest returns for world size `world_size`, computed without communication.
uint64_t selftest_expected_digest(int world_size, size_t shard);

}  // namespace zt::dist
