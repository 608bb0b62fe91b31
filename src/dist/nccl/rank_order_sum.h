// The device half of the deterministic reduce-scatter (DESIGN §6): after the all-to-all has put
// every rank's block of this rank's shard side by side, add the W blocks in rank order.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace zt::dist::nccl {

// out[i] = accumulate ? out[i] + s : s, with s = ((part_0[i] + part_1[i]) + …) + part_{W-1}[i],
// fp32 round-to-nearest adds, no FMA — bitwise fold_rank_order (dist/comm.h) on the host.
// part_q = own for q == own_rank (this rank's own block, read where it lies in the send buffer),
// else recv + q * shard (recv: [W][shard] fp32, the all-to-all's receive buffer; block own_rank
// unused). out: [shard] fp32, must not overlap recv or own. world >= 1; world == 1 reads own only
// (recv may be null). Enqueued on `stream`; throws zt::Error on a launch error.
void rank_order_sum(float* out, const float* recv, const float* own, int own_rank, int world,
                    size_t shard, bool accumulate, cudaStream_t stream);

}  // namespace zt::dist::nccl
