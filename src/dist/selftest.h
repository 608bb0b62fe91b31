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

// Where the self-test's bulk buffers (reduce-scatter, all-gather, broadcast) live. Without one
// (nullptr) they are host memory, as the CPU Comms want; a device Comm is tested with device
// memory (dist/nccl/device_selftest.h). The small all_reduce / sum_in_rank_order always use host
// values.
class SelftestMemory {
 public:
  virtual ~SelftestMemory() = default;
  // A buffer holding a copy of `bytes` bytes of host memory; valid while this object lives.
  virtual void* upload(const void* host, size_t bytes) = 0;
  // Waits for the collectives enqueued on stream() (throwing the Comm's failure), then copies
  // `bytes` bytes of `buffer` to host.
  virtual void download(void* host, const void* buffer, size_t bytes) = 0;
  // The stream the collectives are enqueued on.
  virtual Stream stream() const = 0;
};

// Runs reduce_scatter_sum (plain and accumulating, shard of `shard` elements per rank), all_gather
// (fp32, bf16, in place), broadcast (from the first and last rank), barrier, the small all_reduce
// (f64/f32/i64, sum/max) and sum_in_rank_order, each checked bit for bit. Throws zt::Error naming
// the first wrong collective, index, value and expected value. Returns the digest of the gathered
// reduce-scatter result: the same on every rank, and equal to selftest_expected_digest().
// `memory`: where the bulk buffers live (nullptr: host memory).
uint64_t run_comm_selftest(Comm& comm, size_t shard, SelftestMemory* memory = nullptr);

// The digest run_comm_selftest returns for world size `world_size`, computed without communication.
uint64_t selftest_expected_digest(int world_size, size_t shard);

}  // namespace zt::dist
