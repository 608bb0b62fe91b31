// The memory-bound CUDA ops at the Qwen2.5-1.5B shapes of issue 8 (T = 8192 tokens, H = 1536,
// I = 8960, 12 query / 2 KV heads of 128, vocabulary 151,936; bf16 activations): time per call
// (CUDA events, median of 20 after 3 warm-ups) and the effective bandwidth of the bytes each op
// must move at least, against the device's peak (H200: 4.8 TB/s). Also sumsq and adamw_cuda over
// N fp32 elements. Usage: bench_cuda_ops [N = 268435456]
#include <cstdio>
#include <cstdlib>

#if defined(ZT_HAVE_CUDA)
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "optim/adamw.h"

namespace {

using zt::DType;
using zt::Tensor;

// One device allocation per tensor, filled with small values (bf16 / f32 0x3c00… patterns).
struct Buf {
  void* p = nullptr;
  explicit Buf(size_t bytes) {
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      std::fprintf(stderr, "cudaMalloc of %zu bytes failed\n", bytes);
      std::exit(1);
    }
    cudaMemset(p, 0x3c, bytes);
  }
  ~Buf() { cudaFree(p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
};

Tensor dev(const Buf& b, DType t, std::initializer_list<int64_t> shape) {
  return Tensor(b.p, t, shape, zt::Device::kCUDA);
}

// Median seconds of f over 20 timed calls on `stream`.
double time_of(const std::function<void()>& f, cudaStream_t stream) {
  for (int i = 0; i < 3; ++i) f();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> t;
  for (int i = 0; i < 20; ++i) {
    cudaEventRecord(a, stream);
    f();
    cudaEventRecord(b, stream);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms * 1e-3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void row(const char* name, double sec, double bytes, double peak) {
  std::printf("%-44s %10.1f us %8.0f GB/s %5.0f %% of peak\n", name, sec * 1e6, bytes / sec * 1e-9,
              100.0 * bytes / sec / peak);
}

}  // namespace

int main(int argc, char** argv) {
  if (zt::cuda_device_count() == 0) {
    std::printf("no CUDA device\n");
    return 0;
  }
  const int64_t N = argc > 1 ? std::strtoll(argv[1], nullptr, 10) : (int64_t{1} << 28);
  zt::CudaOps ops;
  cudaStream_t st;
  cudaStreamCreate(&st);
  const zt::Stream s{st};
  int bus = 0, clk = 0;
  cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, 0);
  cudaDeviceGetAttribute(&clk, cudaDevAttrMemoryClockRate, 0);  // kHz
  const double peak = bus > 0 && clk > 0 ? 2.0 * clk * 1e3 * bus / 8 : 4.8e12;
  std::printf("%s, peak %.0f GB/s\n", ops.name().c_str(), peak * 1e-9);

  const int64_t T = 8192, H = 1536, I = 8960, Hq = 12, Hkv = 2, D = 128, V = 151936;
  const DType bf = DType::kBF16, f32 = DType::kF32;
  Buf x(T * H * 2), y(T * H * 2), dy(T * H * 2), w(H * 2), rstd(T * 4), dw(H * 4);
  Buf gate(T * I * 2), up(T * I * 2), act(T * I * 2);
  Buf q(T * Hq * D * 2), k(T * Hkv * D * 2), cs(T * D / 2 * 4), sn(T * D / 2 * 4);
  Buf pos(T * 4), freq(D / 2 * 4), ids(T * 4), table(V * H * 2), dtable(V * H * 4);
  Buf db(H * 4);
  // Spread ids, with one id (an end-of-turn token, say) at every 16th position: a run of 512.
  std::vector<int32_t> hids(T);
  for (int64_t t = 0; t < T; ++t)
    hids[t] = t % 16 == 0 ? 151645 : static_cast<int32_t>(t * 7919 % V);
  cudaMemcpy(ids.p, hids.data(), T * 4, cudaMemcpyHostToDevice);
  cudaMemset(pos.p, 0, T * 4);

  const Tensor tx = dev(x, bf, {T, H}), ty = dev(y, bf, {T, H}), tdy = dev(dy, bf, {T, H});
  const Tensor tw = dev(w, bf, {H}), tr = dev(rstd, f32, {T}), tdw = dev(dw, f32, {H});
  const double TH = static_cast<double>(T * H) * 2, TI = static_cast<double>(T * I) * 2;
  row("rmsnorm_fwd [8192,1536] bf16",
      time_of([&] { ops.rmsnorm_fwd(ty, tr, tx, tw, 1e-6f, s); }, st), 2 * TH, peak);
  row("rmsnorm_bwd accumulate [8192,1536] bf16",
      time_of([&] { ops.rmsnorm_bwd(ty, true, tdw, 1.0f, tdy, tx, tw, tr, s); }, st), 4 * TH, peak);
  row("add [8192,1536] bf16", time_of([&] { ops.add(ty, tx, tdy, s); }, st), 3 * TH, peak);
  row("bias_grad [8192,1536] bf16", time_of([&] { ops.bias_grad(tdw, tdy, 1.0f, s); }, st), TH,
      peak);
  row("bias_grad [8192,256] bf16",
      time_of(
          [&] {
            ops.bias_grad(dev(db, f32, {256}), dev(dy, bf, {T, 256}), 1.0f, s);
          },
          st),
      static_cast<double>(T) * 256 * 2, peak);
  row("bias_grad [32768,1536] bf16",  // in the gate buffer (T·I ≥ 4T·H elements)
      time_of(
          [&] {
            ops.bias_grad(tdw, dev(gate, bf, {4 * T, H}), 1.0f, s);
          },
          st),
      4 * TH, peak);
  const Tensor tg = dev(gate, bf, {T, I}), tu = dev(up, bf, {T, I}), ta = dev(act, bf, {T, I});
  row("swiglu_fwd [8192,8960] bf16", time_of([&] { ops.swiglu_fwd(ta, tg, tu, s); }, st), 3 * TI,
      peak);
  row("swiglu_bwd in place [8192,8960] bf16",
      time_of([&] { ops.swiglu_bwd(tg, tu, ta, tg, tu, s); }, st), 5 * TI, peak);
  const Tensor tc = dev(cs, f32, {T, D / 2}), ts = dev(sn, f32, {T, D / 2});
  row("rope_tables [8192,64]",
      time_of(
          [&] {
            ops.rope_tables(tc, ts, dev(pos, DType::kI32, {T}), dev(freq, f32, {D / 2}), 1.0f, s);
          },
          st),
      static_cast<double>(T) * D * 4, peak);
  row("rope_fwd q [8192,12,128] bf16",
      time_of(
          [&] {
            ops.rope_fwd(dev(q, bf, {T, Hq, D}), tc, ts, s);
          },
          st),
      2.0 * T * Hq * D * 2 + T * D * 4, peak);
  row("rope_bwd k [8192,2,128] bf16",
      time_of(
          [&] {
            ops.rope_bwd(dev(k, bf, {T, Hkv, D}), tc, ts, s);
          },
          st),
      2.0 * T * Hkv * D * 2 + T * D * 4, peak);
  const Tensor tids = dev(ids, DType::kI32, {T});
  row("embedding_fwd [8192,1536] bf16",
      time_of(
          [&] {
            ops.embedding_fwd(ty, dev(table, bf, {V, H}), tids, s);
          },
          st),
      2 * TH, peak);
  Buf ews(ops.embedding_workspace_bytes(tids));
  const Tensor tews =
      dev(ews, DType::kU8, {static_cast<int64_t>(ops.embedding_workspace_bytes(tids))});
  const Tensor tdt = dev(dtable, f32, {V, H});
  row("embedding_bwd beta 1 (a run of 512)",
      time_of([&] { ops.embedding_bwd(tdt, tdy, tids, 1.0f, tews, s); }, st), TH + H * 8, peak);
  row("embedding_bwd beta 0 (+ zero [151936,1536] f32)",
      time_of([&] { ops.embedding_bwd(tdt, tdy, tids, 0.0f, tews, s); }, st),
      TH + static_cast<double>(V) * H * 4, peak);

  // Whole-shard ops over N fp32 elements.
  Buf p(N * 4), m(N * 4), v(N * 4), g(N * 4), pb(N * 2);
  cudaMemset(v.p, 0, N * 4);
  const Tensor tgr = dev(g, f32, {N});
  Buf sws(ops.sumsq_workspace_bytes(tgr));
  const Tensor tsws = dev(sws, DType::kU8, {static_cast<int64_t>(ops.sumsq_workspace_bytes(tgr))});
  double* host = nullptr;
  cudaMallocHost(&host, sizeof(double));
  row(("sumsq f32 N=" + std::to_string(N)).c_str(),
      time_of([&] { ops.sumsq(host, tgr, tsws, s); }, st), N * 4.0, peak);
  row(("cast f32->bf16 N=" + std::to_string(N)).c_str(),
      time_of([&] { ops.cast(dev(pb, bf, {N}), tgr, s); }, st), N * 6.0, peak);
  const zt::optim::AdamWStep a = zt::optim::adamw_step({0.9, 0.999, 1e-8, 0.01}, 2e-5, 10, 0.9f);
  row(("adamw_cuda + bf16 copy N=" + std::to_string(N)).c_str(),
      time_of(
          [&] {
            zt::optim::adamw_cuda(a, static_cast<float*>(p.p), static_cast<float*>(m.p),
                                  static_cast<float*>(v.p), static_cast<const float*>(g.p),
                                  static_cast<size_t>(N), static_cast<uint16_t*>(pb.p), st);
          },
          st),
      N * 30.0, peak);
  ops.synchronize(s);
  cudaFreeHost(host);
  return 0;
}

#else
int main() {
  std::printf("bench_cuda_ops: built without CUDA\n");
  return 0;
}
#endif
