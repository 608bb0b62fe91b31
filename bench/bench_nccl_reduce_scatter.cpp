// The device Comm's deterministic reduce-scatter (grouped ncclSend/ncclRecv all-to-all + the
// rank-order add kernel) against ncclReduceScatter, on the per-layer bucket sizes of Qwen2.5-0.5B
// and -1.5B and the 0.5B embedding. One process per GPU:
//   bench/run_nccl_reduce_scatter.sh [num_gpus] [build_dir]
// (or any launcher that sets RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT, or
// mpirun). Rank 0 prints, per bucket: the time of one call of each (median of kReps, timed on the
// caller's stream with CUDA events), NCCL's bus bandwidth (W-1)/W * bytes / time, the ratio, and
// whether the two results are bitwise equal (expected at W = 2, where a + b is b + a).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dist/bootstrap.h"
#include "dist/selftest.h"
#ifdef ZT_HAVE_NCCL
#include "dist/nccl/comm_nccl.h"
#endif

#ifndef ZT_HAVE_NCCL
int main() {
  std::printf("bench_nccl_reduce_scatter: built without CUDA/NCCL\n");
  return 0;
}
#else

namespace {

using zt::dist::NcclComm;

constexpr int kWarmup = 3;
constexpr int kReps = 20;

struct Bucket {
  const char* name;
  size_t elems;
};

// Parameters of one decoder layer (q/k/v with bias, o, gate/up/down, two RMSNorm weights): the
// ZeRO engine's per-layer bucket.
size_t layer_params(size_t hidden, size_t inter, size_t heads, size_t kv_heads) {
  const size_t head_dim = hidden / heads, kv = kv_heads * head_dim;
  return hidden * hidden + hidden + 2 * (hidden * kv + kv) + hidden * hidden + 3 * hidden * inter +
         2 * hidden;
}

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

}  // namespace

int main() {
  const zt::dist::LaunchEnv env =
      zt::dist::read_launch_env([](const char* n) { return std::getenv(n); });
  auto host = zt::dist::make_comm(env);
  const size_t w = static_cast<size_t>(host->world_size());
  const size_t pad = w * 16;  // the engine pads every tensor to a multiple of W × 16
  std::vector<Bucket> buckets = {
      {"Qwen2.5-0.5B layer", layer_params(896, 4864, 14, 2)},
      {"Qwen2.5-1.5B layer", layer_params(1536, 8960, 12, 2)},
      {"Qwen2.5-0.5B embedding", size_t{151936} * 896},
  };
  size_t max_n = 0;
  for (Bucket& b : buckets) {
    b.elems = (b.elems + pad - 1) / pad * pad;
    max_n = std::max(max_n, b.elems);
  }
  const int gpu = host->local_rank();
  auto owned = zt::dist::make_device_comm(std::move(host), gpu, max_n, env.options);
  auto& comm = dynamic_cast<NcclComm&>(*owned);
  const int r = comm.rank();

  float *send = nullptr, *out_det = nullptr, *out_nat = nullptr;
  cuda_ok(cudaMalloc(&send, max_n * sizeof(float)), "cudaMalloc send");
  cuda_ok(cudaMalloc(&out_det, max_n / w * sizeof(float)), "cudaMalloc out");
  cuda_ok(cudaMalloc(&out_nat, max_n / w * sizeof(float)), "cudaMalloc out");
  {
    std::vector<float> h(max_n);
    for (size_t i = 0; i < max_n; ++i) h[i] = zt::dist::selftest_value(r, i);
    cuda_ok(cudaMemcpy(send, h.data(), max_n * sizeof(float), cudaMemcpyHostToDevice), "upload");
  }
  cudaStream_t s = nullptr;
  cudaEvent_t t0 = nullptr, t1 = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  cuda_ok(cudaEventCreate(&t0), "event");
  cuda_ok(cudaEventCreate(&t1), "event");

  // Median seconds of one call of f(), each timed alone between two events on s.
  auto time_of = [&](const auto& f) {
    for (int i = 0; i < kWarmup; ++i) f();
    comm.synchronize({s});
    std::vector<double> ms(kReps);
    for (int i = 0; i < kReps; ++i) {
      comm.barrier();  // start together: the time is the collective's, not a late peer's
      cuda_ok(cudaEventRecord(t0, s), "record");
      f();
      cuda_ok(cudaEventRecord(t1, s), "record");
      comm.synchronize({s});
      float e = 0;
      cuda_ok(cudaEventElapsedTime(&e, t0, t1), "elapsed");
      ms[static_cast<size_t>(i)] = e;
    }
    std::sort(ms.begin(), ms.end());
    return ms[kReps / 2] / 1e3;
  };

  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  if (r == 0)
    std::printf("world %zu, %s, NCCL_NVLS_ENABLE=%s\n%-24s %12s %12s %9s %12s %9s %7s %8s\n", w,
                comm.backend().data(), nvls ? nvls : "unset", "bucket", "elements", "determ. ms",
                "bus GB/s", "native ms", "bus GB/s", "ratio", "bitwise");
  for (const Bucket& b : buckets) {
    const size_t n = b.elems, shard = n / w;
    const double det =
        time_of([&] { comm.reduce_scatter_sum(send, out_det, n, /*accumulate=*/false, {s}); });
    const double nat = time_of([&] { comm.reduce_scatter_native(send, out_nat, n, {s}); });
    std::vector<float> a(shard), c(shard);
    cuda_ok(cudaMemcpy(a.data(), out_det, shard * sizeof(float), cudaMemcpyDeviceToHost), "dl");
    cuda_ok(cudaMemcpy(c.data(), out_nat, shard * sizeof(float), cudaMemcpyDeviceToHost), "dl");
    const bool same = std::memcmp(a.data(), c.data(), shard * sizeof(float)) == 0;
    const double bus =
        static_cast<double>(n) * 4.0 * static_cast<double>(w - 1) / static_cast<double>(w) / 1e9;
    if (r == 0)
      std::printf("%-24s %12zu %12.3f %9.1f %12.3f %9.1f %7.2f %8s\n", b.name, n, det * 1e3,
                  bus / det, nat * 1e3, bus / nat, det / nat, same ? "yes" : "no");
  }
  std::fflush(stdout);
  comm.synchronize({s});
  comm.barrier();
  cudaFree(send);
  cudaFree(out_det);
  cudaFree(out_nat);
  return 0;
}

#endif
