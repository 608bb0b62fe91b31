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
};

// Memory the engine holds, per pool, plus the full compute weights the stage keeps.
struct ZeroMemory {
  std::vector<PoolBytes> pools;  // arena views, padding included, in engine order
  // Device bytes of the full compute-weight buffer (stages 0–2: the whole padded model); 0 under
  // stage 3, whose windowed weight storage is in `pools`.
  size_t model_weights = 0;
  size_t device_bytes() const;  // device pools + model_weights
  size_t host_bytes() const;    // host pools
  // "device 1.2 MiB (gradient shard 64.0 KiB, …, model weights …); host …", for logs.
  std::string describe() const;
};

// Appends every non-empty view of `arena` to `out` (host: whether it is host memory).
void append_pools(const Arena& arena, bool host, std::vector<PoolBytes>& out);

}  // namespace zt::zero
