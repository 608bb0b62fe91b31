// Comm self-test (see selftest.h). The expected values are computed here with plain loops, never
// with the Comm's own reduction code.
#include "dist/selftest.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace zt::dist {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ULL) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Rank-order reference sum of the W contributions at global index i.
float reference_sum(int w, size_t i) {
  float s = selftest_value(0, i);
  for (int q = 1; q < w; ++q) s = s + selftest_value(q, i);
  return s;
}

void expect_equal(const char* what, size_t i, float got, float want) {
  if (bits(got) != bits(want))
    fail(
        "comm self-test: {} wrong at index {}: got {:.9g} (bits {:#010x}), expected {:.9g} "
        "(bits {:#010x})",
        what, i, got, bits(got), want, bits(want));
}

}  // namespace

float selftest_value(int rank, size_t i) {
  const uint64_t h = mix((static_cast<uint64_t>(rank) << 40) ^ i ^ 0x5eedULL);
  const float mant = 1.0f + static_cast<float>(h & 0xffffff) / 16777216.0f;  // [1, 2)
  const int exp = static_cast<int>((h >> 24) % 41) - 20;                     // -20 … 20
  const float v = std::ldexp(mant, exp);
  return (h >> 63) ? -v : v;
}

uint64_t selftest_expected_digest(int world_size, size_t shard) {
  const size_t n = static_cast<size_t>(world_size) * shard;
  std::vector<float> full(n);
  for (size_t i = 0; i < n; ++i) full[i] = reference_sum(world_size, i);
  return fnv1a(full.data(), n * sizeof(float));
}

namespace {

// Host memory: the buffers are copies kept here; the collectives complete before returning.
class HostMemory final : public SelftestMemory {
 public:
  void* upload(const void* host, size_t bytes) override {
    auto& b = buffers_.emplace_back(bytes);
    if (bytes) std::memcpy(b.data(), host, bytes);
    return b.data();
  }
  void download(void* host, const void* buffer, size_t bytes) override {
    if (bytes) std::memcpy(host, buffer, bytes);
  }
  Stream stream() const override { return {}; }

 private:
  std::vector<std::vector<char>> buffers_;
};

// A buffer in `mem` with the contents of host vector v.
template <typename T>
T* upload(SelftestMemory& mem, const std::vector<T>& v) {
  return static_cast<T*>(mem.upload(v.data(), v.size() * sizeof(T)));
}

template <typename T>
void download(SelftestMemory& mem, std::vector<T>& v, const T* buffer) {
  mem.download(v.data(), buffer, v.size() * sizeof(T));
}

}  // namespace

uint64_t run_comm_selftest(Comm& comm, size_t shard, SelftestMemory* memory) {
  HostMemory host_memory;
  SelftestMemory& mem = memory ? *memory : host_memory;
  const Stream st = mem.stream();
  const int w = comm.world_size(), r = comm.rank();
  const auto uw = static_cast<size_t>(w);
  const size_t n = uw * shard;
  const size_t base = static_cast<size_t>(r) * shard;

  // reduce_scatter_sum, then accumulating on top of a known shard.
  std::vector<float> send(n);
  for (size_t i = 0; i < n; ++i) send[i] = selftest_value(r, i);
  const float* d_send = upload(mem, send);
  std::vector<float> out(shard, -1.0f);
  float* d_out = upload(mem, out);
  comm.reduce_scatter_sum(d_send, d_out, n, false, st);
  download(mem, out, d_out);
  for (size_t i = 0; i < shard; ++i)
    expect_equal("reduce_scatter_sum", i, out[i], reference_sum(w, base + i));
  std::vector<float> acc(shard);
  for (size_t i = 0; i < shard; ++i) acc[i] = selftest_value(w + 7, base + i);
  float* d_acc = upload(mem, acc);
  comm.reduce_scatter_sum(d_send, d_acc, n, /*accumulate=*/true, st);
  download(mem, acc, d_acc);
  for (size_t i = 0; i < shard; ++i)
    expect_equal("reduce_scatter_sum(accumulate)", i, acc[i],
                 selftest_value(w + 7, base + i) + reference_sum(w, base + i));

  // all_gather of the reduced shards (out of place) -> the digest; then in place.
  std::vector<float> full(n, 0.0f);
  float* d_full = upload(mem, full);
  comm.all_gather(d_out, d_full, shard, st);
  download(mem, full, d_full);
  for (size_t i = 0; i < n; ++i) expect_equal("all_gather", i, full[i], reference_sum(w, i));
  const uint64_t digest = fnv1a(full.data(), n * sizeof(float));
  std::vector<float> inplace(n, 0.0f);
  for (size_t i = 0; i < shard; ++i) inplace[base + i] = selftest_value(r, i);
  float* d_inplace = upload(mem, inplace);
  comm.all_gather(d_inplace + base, d_inplace, shard, st);
  download(mem, inplace, d_inplace);
  for (size_t i = 0; i < n; ++i)
    expect_equal("all_gather(in place)", i, inplace[i],
                 selftest_value(static_cast<int>(i / shard), i % shard));
  std::vector<uint16_t> b16(shard), b16_all(n);
  for (size_t i = 0; i < shard; ++i) b16[i] = static_cast<uint16_t>(mix(r * 131 + i) & 0xffff);
  const uint16_t* d_b16 = upload(mem, b16);
  uint16_t* d_b16_all = upload(mem, b16_all);
  comm.all_gather_bf16(d_b16, d_b16_all, shard, st);
  download(mem, b16_all, d_b16_all);
  for (size_t i = 0; i < n; ++i) {
    const auto want = static_cast<uint16_t>(mix((i / shard) * 131 + i % shard) & 0xffff);
    if (b16_all[i] != want)
      fail("comm self-test: all_gather_bf16 wrong at index {}: got {:#06x}, expected {:#06x}", i,
           b16_all[i], want);
  }

  // broadcast from the first and the last rank.
  for (int root : {0, w - 1}) {
    std::vector<float> b(shard);
    for (size_t i = 0; i < shard; ++i) b[i] = r == root ? selftest_value(root + 100, i) : 0.0f;
    float* d_b = upload(mem, b);
    comm.broadcast(d_b, shard * sizeof(float), root, st);
    download(mem, b, d_b);
    for (size_t i = 0; i < shard; ++i)
      expect_equal("broadcast", i, b[i], selftest_value(root + 100, i));
  }
  comm.barrier();

  // Small all_reduce and the rank-order scalar sum.
  double d[2] = {static_cast<double>(selftest_value(r, 1)) * 1e10, static_cast<double>(r) - 0.5};
  comm.all_reduce(d, 2, ReduceOp::kSum);
  double want_d0 = static_cast<double>(selftest_value(0, 1)) * 1e10, want_d1 = -0.5;
  for (int q = 1; q < w; ++q) {
    want_d0 += static_cast<double>(selftest_value(q, 1)) * 1e10;
    want_d1 += static_cast<double>(q) - 0.5;
  }
  if (d[0] != want_d0 || d[1] != want_d1)
    fail("comm self-test: all_reduce(f64, sum) gave {}, {}; expected {}, {}", d[0], d[1], want_d0,
         want_d1);
  float f = selftest_value(r, 2);
  comm.all_reduce(&f, 1, ReduceOp::kSum);
  expect_equal("all_reduce(f32, sum)", 0, f, reference_sum(w, 2));
  int64_t k[2] = {r + 1, 1000 - 3 * r};
  comm.all_reduce(k, 2, ReduceOp::kMax);
  if (k[0] != w || k[1] != 1000)
    fail("comm self-test: all_reduce(i64, max) gave {}, {}; expected {}, 1000", k[0], k[1], w);
  int64_t ks = r + 1;
  comm.all_reduce(&ks, 1, ReduceOp::kSum);
  if (ks != static_cast<int64_t>(w) * (w + 1) / 2)
    fail("comm self-test: all_reduce(i64, sum) gave {}, expected {}", ks, w * (w + 1) / 2);
  double m = r == w - 1 ? std::nan("") : static_cast<double>(r);
  comm.all_reduce(&m, 1, ReduceOp::kMax);
  if (!std::isnan(m)) fail("comm self-test: all_reduce(f64, max) lost a NaN (got {})", m);
  const double part = static_cast<double>(selftest_value(r, 3)) * 3.0e-7;
  const double total = comm.sum_in_rank_order(part);
  double want_total = static_cast<double>(selftest_value(0, 3)) * 3.0e-7;
  for (int q = 1; q < w; ++q) want_total += static_cast<double>(selftest_value(q, 3)) * 3.0e-7;
  if (total != want_total)
    fail("comm self-test: sum_in_rank_order gave {:.17g}, expected {:.17g}", total, want_total);
  comm.barrier();
  return digest;
}

}  // namespace zt::dist
