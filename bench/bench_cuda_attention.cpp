// CUDA attention forward/backward timings (backend/cuda/cuda_attention.h) on packed equal-length
// sequences; default: the Qwen2.5-1.5B layer at a micro-batch of 8,192 tokens (4 × 2,048, 12 query
// / 2 KV heads, D = 128, bf16). Prints ms per call and TFLOP/s of causal attention FLOPs: forward
// 4·Σ s²/2·Hq·D, backward 2.5× that (the conventional FlashAttention count; our backward recomputes
// P in both of its passes, so it executes 7/5 of the counted backward FLOPs). With a sliding
// window W the counted FLOPs use the visible (query, key) pairs Σ_i min(i + 1, W) per sequence in
// place of s²/2, so TFLOP/s stay comparable while the time should fall to O(s·W).
//
// usage: bench_cuda_attention [seq_len=2048] [num_seqs=4] [Hq=12] [Hkv=2] [D=128] [f32|bf16=bf16]
//                             [auto|generic|mmasync=auto] [--window W]
//   auto: what the model runs (on an sm_90 device the Hopper forward where it applies);
//   mmasync: the mma.sync tensor-core kernels; generic: the fp32-arithmetic kernels.
//   e.g. Gemma 3 1B's local layers: bench_cuda_attention 8192 1 4 1 256 bf16 auto --window 512
//   --random: Q, K, V, dO uniform in [−√3, √3) (unit variance; seeded, the same every run) instead
//   of one constant, so that the running softmax maximum changes as it does on real scores (with
//   equal scores it never does, which a kernel that skips work on an unchanged maximum would
//   exploit). Prints a hash (FNV-1a over the bytes) of the forward's output and lse and of the
//   backward's dQ, dK, dV, for bitwise comparisons of kernel variants.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <utility>

#ifdef ZT_HAVE_CUDA
#include <cuda_runtime.h>

#include <vector>

#include "backend/cuda/cuda_attention.h"

namespace {

void ok(cudaError_t e) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(e));
    std::exit(1);
  }
}

}  // namespace

int main(int argc_in, char** argv_in) {
  // --window W (or --window=W) and --hpb G (the Hopper backward's query heads per block; default
  // the cost model's choice) and --order seq|tile (its block order; default sequence by sequence
  // at G = 1, tile-major above) anywhere; the rest are positional.
  int64_t window = 0;
  int hpb = 0, order = 0;
  bool random = false;
  std::vector<char*> pos{argv_in[0]};
  for (int i = 1; i < argc_in; ++i) {
    if (std::strcmp(argv_in[i], "--window") == 0 && i + 1 < argc_in) {
      window = std::atoll(argv_in[++i]);
    } else if ((std::strcmp(argv_in[i], "--hpb") == 0 && i + 1 < argc_in) ||
               std::strncmp(argv_in[i], "--hpb=", 6) == 0) {
      const char* g = argv_in[i][5] == '=' ? argv_in[i] + 6 : argv_in[++i];
      char* end = nullptr;
      const long v = std::strtol(g, &end, 10);
      if (end == g || *end != '\0' || v < 1 || v > 1024) {
        std::fprintf(stderr, "bench_cuda_attention: --hpb '%s': expected a positive integer\n", g);
        return 2;
      }
      hpb = static_cast<int>(v);
    } else if ((std::strcmp(argv_in[i], "--order") == 0 && i + 1 < argc_in) ||
               std::strncmp(argv_in[i], "--order=", 8) == 0) {
      const char* o = argv_in[i][7] == '=' ? argv_in[i] + 8 : argv_in[++i];
      if (std::strcmp(o, "seq") == 0) {
        order = 1;
      } else if (std::strcmp(o, "tile") == 0) {
        order = 2;
      } else {
        std::fprintf(stderr, "bench_cuda_attention: --order '%s': expected seq or tile\n", o);
        return 2;
      }
    } else if (std::strcmp(argv_in[i], "--random") == 0) {
      random = true;
    } else if (std::strncmp(argv_in[i], "--window=", 9) == 0) {
      window = std::atoll(argv_in[i] + 9);
    } else {
      pos.push_back(argv_in[i]);
    }
  }
  const int argc = static_cast<int>(pos.size());
  char** argv = pos.data();
  const int S = argc > 1 ? std::atoi(argv[1]) : 2048, n = argc > 2 ? std::atoi(argv[2]) : 4;
  const int Hq = argc > 3 ? std::atoi(argv[3]) : 12, Hkv = argc > 4 ? std::atoi(argv[4]) : 2;
  const int D = argc > 5 ? std::atoi(argv[5]) : 128;
  const bool bf16 = !(argc > 6 && std::strcmp(argv[6], "f32") == 0);
  const char* kind = argc > 7 ? argv[7] : "auto";
  const auto which = std::strcmp(kind, "generic") == 0   ? zt::cuda::AttnKernels::kGeneric
                     : std::strcmp(kind, "mmasync") == 0 ? zt::cuda::AttnKernels::kMmaSync
                                                         : zt::cuda::AttnKernels::kAuto;
  if (std::strcmp(kind, "auto") != 0 && std::strcmp(kind, "generic") != 0 &&
      std::strcmp(kind, "mmasync") != 0) {
    std::fprintf(stderr, "bench_cuda_attention: kernels '%s': expected auto, generic or mmasync\n",
                 kind);
    return 2;
  }
  const int64_t T = static_cast<int64_t>(S) * n;
  std::vector<int32_t> cu(n + 1);
  for (int i = 0; i <= n; ++i) cu[i] = i * S;
  const size_t es = bf16 ? 2 : 4, nq = T * Hq * D, nk = T * Hkv * D;
  void *q, *k, *v, *o, *g, *dq, *dk, *dv, *lse, *dcu, *ws;
  zt::cuda::AttnProblem p;
  p.T = T;
  p.Hq = Hq;
  p.Hkv = Hkv;
  p.D = D;
  p.bf16 = bf16;
  p.cu_host = cu.data();
  p.num_seqs = n;
  p.scale = 1.0f / std::sqrt(static_cast<float>(D));
  p.window = window;
  p.bwd_heads_per_block = hpb;
  p.bwd_block_order = order;
  for (auto [ptr, bytes] : {std::pair{&q, nq * es},
                            {&k, nk * es},
                            {&v, nk * es},
                            {&o, nq * es},
                            {&g, nq * es},
                            {&dq, nq * es},
                            {&dk, nk * es},
                            {&dv, nk * es},
                            {&lse, static_cast<size_t>(Hq) * T * 4},
                            {&dcu, cu.size() * 4},
                            {&ws, zt::cuda::attention_workspace_bytes(p)}}) {
    ok(cudaMalloc(ptr, bytes));
    ok(cudaMemset(*ptr, 0, bytes));
  }
  // Every element ≈ 0.0115 (bytes 0x3c / 0x3b / 0x3a in bf16 or f32): finite; timing does not
  // depend on the values.
  if (random) {
    uint64_t state = 0x9E3779B97F4A7C15ull;
    const auto fill = [&](void* dst, size_t count) {
      std::vector<float> x(count);
      for (float& e : x) {  // splitmix64 → uniform [−√3, √3)
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        e = static_cast<float>((static_cast<double>(z >> 11) * 0x1.0p-53 * 2.0 - 1.0) * 1.7320508);
      }
      if (bf16) {
        std::vector<uint16_t> h(count);
        for (size_t i = 0; i < count; ++i) {  // round to nearest even (finite values)
          uint32_t b;
          std::memcpy(&b, &x[i], 4);
          h[i] = static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
        }
        ok(cudaMemcpy(dst, h.data(), count * 2, cudaMemcpyHostToDevice));
      } else {
        ok(cudaMemcpy(dst, x.data(), count * 4, cudaMemcpyHostToDevice));
      }
    };
    fill(q, nq);
    fill(k, nk);
    fill(v, nk);
    fill(g, nq);
  } else {
    ok(cudaMemset(q, 0x3c, nq * es));
    ok(cudaMemset(k, 0x3b, nk * es));
    ok(cudaMemset(v, 0x3c, nk * es));
    ok(cudaMemset(g, 0x3a, nq * es));
  }
  ok(cudaMemcpy(dcu, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice));
  p.cu_dev = static_cast<const int32_t*>(dcu);
  const bool tc = which != zt::cuda::AttnKernels::kGeneric &&
                  zt::cuda::attention_uses_tensor_cores(p, {q, k, v, o, g, dq, dk, dv});
  const bool sm90 = tc && which == zt::cuda::AttnKernels::kAuto && zt::cuda::attention_uses_sm90(p);
  cudaEvent_t e0, e1;
  ok(cudaEventCreate(&e0));
  ok(cudaEventCreate(&e1));
  auto fwd = [&] {
    zt::cuda::attention_fwd(p, o, static_cast<float*>(lse), q, k, v, ws, nullptr, which);
  };
  auto bwd = [&] {
    zt::cuda::attention_bwd(p, dq, dk, dv, g, q, k, v, o, static_cast<const float*>(lse), ws,
                            nullptr, which);
  };
  auto time_ms = [&](auto&& f, int iters) {
    for (int i = 0; i < 3; ++i) f();
    ok(cudaEventRecord(e0));
    for (int i = 0; i < iters; ++i) f();
    ok(cudaEventRecord(e1));
    ok(cudaEventSynchronize(e1));
    float ms = 0;
    ok(cudaEventElapsedTime(&ms, e0, e1));
    return ms / iters;
  };
  double pairs = static_cast<double>(S) * S / 2;  // visible (query, key) pairs per sequence
  if (window > 0 && window < S)
    pairs =
        static_cast<double>(window) * (window + 1) / 2 + static_cast<double>(S - window) * window;
  const double ffwd = 4.0 * n * pairs * Hq * D;
  const double tf = time_ms(fwd, 20), tb = time_ms(bwd, 20);
  std::printf(
      "attention %s %s: %d x %d tokens, Hq %d, Hkv %d, D %d, window %lld, workspace %.1f MiB\n",
      bf16 ? "bf16" : "f32",
      sm90 ? "tensor cores (Hopper wgmma forward)"
      : tc ? "tensor cores (mma.sync)"
           : "generic",
      n, S, Hq, Hkv, D, static_cast<long long>(window),
      zt::cuda::attention_workspace_bytes(p) / 1048576.0);
  if (sm90) {
    const int G = zt::cuda::attention_bwd_heads_per_block(p);
    const bool tile = zt::cuda::attention_bwd_tile_major(p, G);
    std::printf("  backward query heads per block %d (%s), block order %s (%s)\n", G,
                hpb ? "--hpb" : "cost model", tile ? "tile" : "seq", order ? "--order" : "default");
  }
  std::printf("  forward  %8.3f ms  %6.1f TFLOP/s\n", tf, ffwd / tf / 1e9);
  std::printf("  backward %8.3f ms  %6.1f TFLOP/s (counted 2.5x forward)\n", tb,
              2.5 * ffwd / tb / 1e9);
  std::printf("  total    %8.3f ms\n", tf + tb);
  // The outputs of the last calls (forward, then backward from that output): FNV-1a 64 of bytes.
  const auto hash = [&](std::initializer_list<std::pair<const void*, size_t>> bufs) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (auto [ptr, bytes] : bufs) {
      std::vector<unsigned char> b(bytes);
      ok(cudaMemcpy(b.data(), ptr, bytes, cudaMemcpyDeviceToHost));
      for (unsigned char c : b) h = (h ^ c) * 0x100000001b3ull;
    }
    return static_cast<unsigned long long>(h);
  };
  fwd();
  const unsigned long long hf = hash({{o, nq * es}, {lse, static_cast<size_t>(Hq) * T * 4}});
  bwd();
  const unsigned long long hb = hash({{dq, nq * es}, {dk, nk * es}, {dv, nk * es}});
  std::printf("  hash     forward %016llx backward %016llx%s\n", hf, hb,
              random ? " (random inputs)" : " (constant inputs: any variant agrees, see --random)");
  return 0;
}
#else
int main() {
  std::puts("bench_cuda_attention: built without CUDA");
  return 0;
}
#endif
