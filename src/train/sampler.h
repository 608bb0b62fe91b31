// The training data order of HF `Trainer` (SFT_SEMANTICS §4): epoch e visits the samples in the
// order `torch.randperm(n, generator=torch.Generator().manual_seed(seed + e))`.
//
// Where the seed comes from (read in transformers 5.x `Trainer._get_train_sampler` /
// `_get_dataloader` and accelerate 1.x `prepare_data_loader` / `SeedableRandomSampler`):
//   - the Trainer builds a plain `RandomSampler(train_dataset)` (no generator);
//   - `accelerator.prepare` (use_seedable_sampler defaults to true in `AcceleratorConfig`) replaces
//   it
//     by a `SeedableRandomSampler` whose `initial_seed` is `data_seed` when set, else
//     `torch.random.initial_seed()`, which is `seed` because `Trainer.__init__` called
//     `set_seed(args.seed)` (torch.manual_seed) before;
//   - `Trainer._run_epoch` calls `set_epoch(e)` on it, and its `__iter__` re-seeds a fresh CPU
//     `torch.Generator` with `initial_seed + e`, then `RandomSampler.__iter__` yields
//     `torch.randperm(n, generator=g)` (num_samples = n, no replacement: exactly one randperm).
//   So the order of epoch e is `randperm(n, manual_seed((data_seed or seed) + e))` on every rank.
//
// torch's CPU randperm (aten `randperm_cpu`, int64), checked bit for bit against torch 2.x for
// n = 0…70, 100, 1000, 4095…4097, 65536, 100003, 2^20, 2^24±1 (tests/data/train/randperm.json):
//   - the generator is a 32-bit MT19937 initialised with the low 32 bits of the 64-bit seed (the
//     standard `init_genrand`; a negative Python seed is taken modulo 2^64 first);
//   - n < 2^32/20 (= 214748364): r = [0, 1, …, n−1]; for i = 0 … n−2: z = mt() % (n−i),
//     swap(r[i], r[i+z]);
//   - larger n: the "inside-out" variant with 64-bit draws (hi = mt(), lo = mt(),
//     x = hi·2^32 + lo): for i = 0 … n−1: z = x % (i+1); r[i] = r[z]; r[z] = i.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace zt::train {

// torch's CPU generator after `torch.Generator().manual_seed(seed)`: a 32-bit Mersenne twister
// seeded with `seed mod 2^32` (at::mt19937 equals std::mt19937 with that seed).
class TorchCpuGenerator {
 public:
  explicit TorchCpuGenerator(uint64_t seed) : mt_(static_cast<uint32_t>(seed & 0xffffffffu)) {}
  // One 32-bit output (at::CPUGeneratorImpl::random).
  uint32_t random() { return static_cast<uint32_t>(mt_()); }
  // Two outputs joined, the first one high (at::CPUGeneratorImpl::random64).
  uint64_t random64() {
    uint64_t hi = random();
    uint64_t lo = random();
    return (hi << 32) | lo;
  }

 private:
  std::mt19937 mt_;
};

// n at or above which torch's randperm switches to the 64-bit inside-out shuffle.
inline constexpr int64_t kRandpermLargeN = 0xffffffffLL / 20;

// `torch.randperm(n, generator=torch.Generator().manual_seed(seed))` on the CPU, as int64 values in
// [0, n). `seed` is the Python int modulo 2^64. Throws zt::Error when n < 0.
std::vector<int64_t> torch_randperm(int64_t n, uint64_t seed);

// The sample order of epoch `epoch` (0-based): torch_randperm(n, seed + epoch), `seed` being
// TrainingArguments `data_seed` when set, else `seed`. Throws zt::Error when n < 0 or epoch < 0.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

}  // namespace zt::train
