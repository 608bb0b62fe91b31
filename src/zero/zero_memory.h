// What the ZeRO engine's mechanisms hold, pool by pool, for the start-up log and tests.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/arena.h"

namespace zt::zero {

// Bytes of one memory pool.
struct PoolBytes {
  std::string name;  // "gradient shard", "master weights", …
  size_t bytes = 0;
  bool host = false;  // true: host memory (offload); false: device memory
  std::string arena;  // the allocation it is carved from: "zero weights (device)", …
};

// Memory the engine holds, per pool: every device and host buffer, the compute weights included
// (stages 0–2: "compute weights", the one full copy the model reads; stage 3: "compute weight
// shard" and the "weights: …" group buffers).
struct ZeroMemory {
  std::vector<PoolBytes> pools;  // arena views, padding included, in engine order
  size_t device_bytes() const;   // device pools
  size_t host_bytes() const;     // host pools
  // "device 1.2 MiB (gradient shard 64.0 KiB, …, compute weights …); host …", for logs.
  std::string describe() const;
};

// The name of the engine's arena of compute weights (full copy, shard, slots, gather buffers).
inline constexpr char kWeightArena[] = "zero weights (device)";

// Appends every non-empty view of `arena` to `out` (host: whether it is host memory).
void append_pools(const Arena& arena, bool host, std::vector<PoolBytes>& out);

}  // namespace zt::zero
