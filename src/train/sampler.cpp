#include "train/sampler.h"

#include "core/error.h"

namespace zt::train {

std::vector<int64_t> torch_randperm(int64_t n, uint64_t seed) {
  if (n < 0) fail("randperm: the number of samples must be >= 0, got {}", n);
  TorchCpuGenerator gen(seed);
  std::vector<int64_t> r(static_cast<size_t>(n));
  if (n < kRandpermLargeN) {
    for (int64_t i = 0; i < n; ++i) r[i] = i;
    for (int64_t i = 0; i + 1 < n; ++i) {
      const int64_t z = static_cast<int64_t>(gen.random() % static_cast<uint64_t>(n - i));
      std::swap(r[i], r[i + z]);
    }
    return r;
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t z = static_cast<int64_t>(gen.random64() % static_cast<uint64_t>(i + 1));
    r[i] = r[z];
    r[z] = i;
  }
  return r;
}

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  if (epoch < 0) fail("epoch_permutation: epoch must be >= 0, got {}", epoch);
  return torch_randperm(n, seed + static_cast<uint64_t>(epoch));
}

}  // namespace zt::train
