// CUDA matmul and fused LM-head cross-entropy timings at Qwen2.5-1.5B shapes (bf16; T = 8192,
// H = 1536, I = 8960, V = 151936), to choose the CE workspace budget (ce_budget_bytes) and to see
// what the cuBLASLt plans without split-K reach. Prints one line per case: milliseconds per call
// (median of 5 after 2 warm-up calls) and TFLOP/s (2·M·N·K per product; the fused cross-entropy
// counts its three products, 6·n·H·V for n target rows). Usage: bench_cuda_lm_head [T] (default
// 8192).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#if defined(ZT_HAVE_CUDA)
#include <cuda_runtime.h>

#include "backend/cuda/cuda_ops.h"
#include "core/dtype.h"

namespace {

using namespace zt;

void ck(cudaError_t e) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(e));
    std::exit(1);
  }
}

// A device tensor filled with N(0, scale²) values (zeros for scale 0), bf16 or f32; never freed.
Tensor dev_random(DType dt, std::initializer_list<int64_t> shape, float scale, uint32_t seed) {
  Tensor t(nullptr, dt, shape, Device::kCUDA);
  ck(cudaMalloc(&t.data, std::max<size_t>(t.nbytes(), 1)));
  if (scale == 0.0f) {
    ck(cudaMemset(t.data, 0, t.nbytes()));
    return t;
  }
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  const int64_t n = t.numel(), block = int64_t{1} << 20;
  std::vector<uint16_t> h16(static_cast<size_t>(std::min(n, block)));
  std::vector<float> h32(h16.size());
  for (auto& v : h32) v = nd(gen);
  for (size_t i = 0; i < h32.size(); ++i) h16[i] = f32_to_bf16(h32[i]);
  const size_t es = dtype_size(dt);
  for (int64_t i = 0; i < n; i += block) {
    const int64_t m = std::min(block, n - i);
    ck(cudaMemcpy(static_cast<char*>(t.data) + i * es,
                  dt == DType::kBF16 ? static_cast<const void*>(h16.data()) : h32.data(),
                  static_cast<size_t>(m) * es, cudaMemcpyHostToDevice));
  }
  return t;
}

// Median milliseconds of f over 5 runs after 2 warm-ups (f leaves the device idle or is synced).
double time_ms(const std::function<void()>& f) {
  for (int i = 0; i < 2; ++i) f();
  ck(cudaDeviceSynchronize());
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ck(cudaDeviceSynchronize());
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[2];
}

}  // namespace

int main(int argc, char** argv) {
  if (cuda_device_count() == 0) {
    std::printf("bench_cuda_lm_head: no CUDA device\n");
    return 0;
  }
  const int64_t T = argc > 1 ? std::atoll(argv[1]) : 8192, H = 1536, I = 8960, V = 151936;
  const DType bf = DType::kBF16, f32 = DType::kF32;
  CudaOps ops;
  std::printf("%s, T = %lld\n", ops.name().c_str(), static_cast<long long>(T));

  // Layer products: forward x·Wᵀ, input gradient dY·W, weight gradient dYᵀ·X into f32.
  const Tensor x_h = dev_random(bf, {T, H}, 1.0f, 1), x_i = dev_random(bf, {T, I}, 1.0f, 2);
  const Tensor y_i = dev_random(bf, {T, I}, 1.0f, 3), y_h = dev_random(bf, {T, H}, 1.0f, 4);
  const Tensor w_ih = dev_random(bf, {I, H}, 0.02f, 5), w_hi = dev_random(bf, {H, I}, 0.02f, 6);
  const Tensor g_ih = dev_random(f32, {I, H}, 0.0f, 7), g_hi = dev_random(f32, {H, I}, 0.0f, 8);
  // One workspace for all five products, sized by the largest need (the f32-accumulating weight
  // gradients need room for widened operands beside cuBLASLt's own workspace).
  size_t ws_bytes = 0;
  for (const auto& [C, A, ta, B, tb] : {std::tuple{y_i, x_h, Trans::kN, w_ih, Trans::kT},
                                        std::tuple{y_h, x_i, Trans::kN, w_hi, Trans::kT},
                                        std::tuple{y_h, y_i, Trans::kN, w_ih, Trans::kN},
                                        std::tuple{g_ih, y_i, Trans::kT, x_h, Trans::kN},
                                        std::tuple{g_hi, y_h, Trans::kT, x_i, Trans::kN}})
    ws_bytes = std::max(ws_bytes, ops.matmul_workspace_bytes(C, A, ta, B, tb));
  Tensor ws(nullptr, DType::kU8, {static_cast<int64_t>(ws_bytes)}, Device::kCUDA);
  ck(cudaMalloc(&ws.data, ws.nbytes()));
  const auto mm = [&](const char* what, const Tensor& C, const Tensor& A, Trans ta, const Tensor& B,
                      Trans tb, float beta) {
    const int64_t K = ta == Trans::kN ? A.dim(1) : A.dim(0);
    const double ms =
        time_ms([&] { ops.matmul(C, A, ta, B, tb, Tensor(), 1.0f, beta, ws, Stream{}); });
    std::printf("matmul %-34s %8.3f ms %7.1f TFLOP/s\n", what, ms,
                2.0 * C.dim(0) * C.dim(1) * K / ms * 1e-9);
  };
  mm("up    x[T,H]·W[I,H]ᵀ -> [T,I] bf16", y_i, x_h, Trans::kN, w_ih, Trans::kT, 0.0f);
  mm("down  x[T,I]·W[H,I]ᵀ -> [T,H] bf16", y_h, x_i, Trans::kN, w_hi, Trans::kT, 0.0f);
  mm("dX    dY[T,I]·W[I,H] -> [T,H] bf16", y_h, y_i, Trans::kN, w_ih, Trans::kN, 0.0f);
  mm("dW    dY[T,I]ᵀ·X[T,H] += [I,H] f32", g_ih, y_i, Trans::kT, x_h, Trans::kN, 1.0f);
  mm("dW    dY[T,H]ᵀ·X[T,I] += [H,I] f32", g_hi, y_h, Trans::kT, x_i, Trans::kN, 1.0f);

  // Fused LM head + cross-entropy, all rows with a target and 60 % of them.
  const Tensor wv = dev_random(bf, {V, H}, 0.02f, 9), dwv = dev_random(f32, {V, H}, 0.0f, 10);
  // Its two backward products as plain matmuls at chunk sizes (832 and 1600: the default 512 MiB
  // budget's chunk with fp32 and with bf16 logits): dh = G·W (K = V) and dW += Gᵀ·h.
  for (const int64_t nc : {int64_t{832}, int64_t{1600}, int64_t{3456}}) {
    const Tensor g = dev_random(bf, {nc, V}, 1e-3f, 13), hcs = dev_random(bf, {nc, H}, 1.0f, 14);
    const Tensor dhs = dev_random(f32, {nc, H}, 0.0f, 15);
    const std::string a = "dh    G[" + std::to_string(nc) + ",V]·W[V,H] -> f32";
    const std::string b = "dW    G[" + std::to_string(nc) + ",V]ᵀ·h += [V,H] f32";
    mm(a.c_str(), dhs, g, Trans::kN, wv, Trans::kN, 0.0f);
    mm(b.c_str(), dwv, g, Trans::kT, hcs, Trans::kN, 1.0f);
  }
  const Tensor dh = dev_random(bf, {T, H}, 0.0f, 11);
  std::vector<int32_t> tg_all(static_cast<size_t>(T)), tg_part(tg_all.size());
  std::mt19937 gen(12);
  for (size_t t = 0; t < tg_all.size(); ++t) {
    tg_all[t] = static_cast<int32_t>(gen() % V);
    tg_part[t] = t % 5 < 2 ? -100 : tg_all[t];
  }
  Tensor tg(nullptr, DType::kI32, {T}, Device::kCUDA);
  ck(cudaMalloc(&tg.data, tg.nbytes()));
  // The chunk is the most rows whose buffers fit the workspace budget (ce_rows_for_budget), at most
  // 4096 here: 128 / 256 / 512 MiB (the default) / 2 GiB budgets.
  for (const size_t budget_mib : {128, 256, 512, 2048}) {
    CudaOpsOptions o;
    o.ce_chunk_rows = 4096;
    o.ce_budget_bytes = budget_mib << 20;
    CudaOps ce(o);
    const int64_t chunk = ce_rows_for_budget(
        T, o.ce_chunk_rows, o.ce_budget_bytes,
        2 * static_cast<size_t>(V) + (2 + 4 * kCeDhParts) * static_cast<size_t>(H), 64);
    Tensor cws(nullptr, DType::kU8,
               {static_cast<int64_t>(ce.linear_cross_entropy_workspace_bytes(x_h, wv))},
               Device::kCUDA);
    ck(cudaMalloc(&cws.data, cws.nbytes()));
    for (const auto* tgv : {&tg_all, &tg_part}) {
      ck(cudaMemcpy(tg.data, tgv->data(), tg.nbytes(), cudaMemcpyHostToDevice));
      const int64_t n = std::count_if(tgv->begin(), tgv->end(), [](int32_t y) { return y >= 0; });
      CeStats st;
      const double fb = time_ms([&] {
        ce.linear_cross_entropy_fwd_bwd(&st, dh, dwv, 0.0f, x_h, wv, tg, 1.0f, cws, Stream{});
      });
      const double fo = time_ms([&] {
        ce.linear_cross_entropy_fwd_bwd(&st, Tensor(), Tensor(), 0.0f, x_h, wv, tg, 1.0f, cws,
                                        Stream{});
      });
      std::printf(
          "lm-head CE budget %4zu MiB (chunk %4lld), %5lld target rows: fwd+bwd %8.3f ms %6.1f "
          "TFLOP/s, fwd %8.3f ms %6.1f TFLOP/s, workspace %.3f GB\n",
          budget_mib, static_cast<long long>(chunk), static_cast<long long>(n), fb,
          6.0 * n * H * V / fb * 1e-9, fo, 2.0 * n * H * V / fo * 1e-9, cws.nbytes() * 1e-9);
    }
    ck(cudaFree(cws.data));
  }
  return 0;
}

#else
int main() {
  std::printf("bench_cuda_lm_head: built without CUDA\n");
  return 0;
}
#endif
