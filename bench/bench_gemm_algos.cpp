// cuBLASLt algorithm choices for the GEMMs of a training step: for each product of a Qwen2.5-1.5B
// and a Llama-3.2-1B layer at 4 × 2,048 tokens (forward x·Wᵀ, input gradient dY·W, weight gradient
// dYᵀ·X accumulated into fp32) and of the fused LM-head CE at its default chunk, every candidate
// cublasLtMatmulAlgoGetHeuristic returns under zerotune's preferences (no split-K reduction,
// 16-byte alignment, 32 MiB workspace — what CudaOps::matmul asks, cuda_matmul.cpp) is run on the
// same inputs, timed, and its output compared bit for bit with the first candidate's (the one
// CudaOps::matmul uses). Prints per product: the first candidate's time, the fastest candidate's,
// and the fastest among those whose output is bitwise the first's — the gain a deterministic
// choice among them could take. Times: median of 9 event-timed calls after 3 warm-ups.
// Usage: bench_gemm_algos [T] (default 8192).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#if defined(ZT_HAVE_CUDA)
#include <cublasLt.h>
#include <cuda_runtime.h>

namespace {

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "bench_gemm_algos: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
void ck(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "bench_gemm_algos: %s: cuBLAS status %d\n", what, static_cast<int>(s));
    std::exit(1);
  }
}

// One row-major product C[M, N] (= or +=) op(A)[M, K]·op(B)[K, N]; A and B bf16, C bf16 or f32.
struct Case {
  std::string name;
  int64_t M, N, K;
  bool ta, tb;   // A stored [K, M] / B stored [N, K]
  bool c_f32;    // C fp32 (accumulated into: beta 1) or bf16 (beta 0)
  int per_step;  // launches of this shape per step (for the weighted total)
};

void* dev_fill(size_t bytes, bool bf16, float scale, uint32_t seed) {
  void* p = nullptr;
  ck(cudaMalloc(&p, std::max<size_t>(bytes, 16)), "cudaMalloc");
  // A block of 2^22 N(0, scale²) values (a prime-length stretch of it repeated, so rows differ).
  const size_t es = bf16 ? 2 : 4, n = bytes / es, blk = std::min<size_t>(n, size_t{1} << 22);
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<char> h(blk * es);
  for (size_t i = 0; i < blk; ++i) {
    const float f = nd(gen);
    if (bf16) {
      uint32_t u;
      std::memcpy(&u, &f, 4);
      const auto v = static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
      std::memcpy(h.data() + i * 2, &v, 2);
    } else {
      std::memcpy(h.data() + i * 4, &f, 4);
    }
  }
  const size_t step = blk > 4099 ? blk - 4099 : blk;
  for (size_t i = 0; i < n; i += step) {
    const size_t m = std::min(blk, n - i);
    ck(cudaMemcpy(static_cast<char*>(p) + i * es, h.data(), m * es, cudaMemcpyHostToDevice),
       "cudaMemcpy");
  }
  return p;
}

// The candidate's configuration: tile, stages, cluster shape (cublasLtMatmulAlgoConfigGetAttribute).
std::string algo_config(const cublasLtMatmulAlgo_t& a) {
  const auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attr) {
    uint64_t v = 0;
    size_t w = 0;
    uint32_t v32 = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v32, sizeof(v32), &w) == CUBLAS_STATUS_SUCCESS)
      return static_cast<long long>(v32);
    if (cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v, sizeof(v), &w) == CUBLAS_STATUS_SUCCESS)
      return static_cast<long long>(v);
    return -1LL;
  };
  char buf[160];
  std::snprintf(buf, sizeof(buf), "id %lld tile %lld stages %lld cluster %lld inner %lld swz %lld opt %lld",
                get(CUBLASLT_ALGO_CONFIG_ID), get(CUBLASLT_ALGO_CONFIG_TILE_ID),
                get(CUBLASLT_ALGO_CONFIG_STAGES_ID), get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID),
                get(CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID), get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                get(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION));
  return buf;
}

struct Result {
  int found = 0, equal = 0;
  double first = 0, best = 0, best_equal = 0;
  int best_i = 0, best_equal_i = 0;
};

Result run_case(cublasLtHandle_t lt, const Case& c, void* ws, size_t ws_bytes, cudaStream_t st) {
  const size_t a_bytes = static_cast<size_t>(c.M * c.K) * 2, b_bytes = static_cast<size_t>(c.K * c.N) * 2;
  const size_t c_bytes = static_cast<size_t>(c.M * c.N) * (c.c_f32 ? 4 : 2);
  void* A = dev_fill(a_bytes, true, 1.0f, 1);
  void* B = dev_fill(b_bytes, true, 0.02f, 2);
  void* C0 = dev_fill(c_bytes, !c.c_f32, c.c_f32 ? 0.01f : 0.0f, 3);
  void* C = nullptr;
  ck(cudaMalloc(&C, c_bytes), "cudaMalloc");
  // Column-major view (cuda_matmul.cpp): Cᵀ[N, M] = op(B)ᵀ·op(A)ᵀ; cuBLAS's A is our B.
  const cudaDataType_t ct = c.c_f32 ? CUDA_R_32F : CUDA_R_16BF;
  cublasLtMatmulDesc_t desc = nullptr;
  ck(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  const cublasOperation_t oa = c.tb ? CUBLAS_OP_T : CUBLAS_OP_N, ob = c.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  ck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &oa, sizeof(oa)), "transa");
  ck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &ob, sizeof(ob)), "transb");
  // Our B stored [K, N] (tb false) is column-major [N, K] ld N; stored [N, K] is [K, N] ld K.
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  ck(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, c.tb ? c.K : c.N, c.tb ? c.N : c.K,
                                c.tb ? c.K : c.N), "layout a");
  ck(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, c.ta ? c.M : c.K, c.ta ? c.K : c.M,
                                c.ta ? c.M : c.K), "layout b");
  ck(cublasLtMatrixLayoutCreate(&lc, ct, c.N, c.M, c.N), "layout c");
  cublasLtMatmulPreference_t pref = nullptr;
  ck(cublasLtMatmulPreferenceCreate(&pref), "pref");
  const uint64_t wsb = ws_bytes;
  const uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE, al = 16;
  ck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                          sizeof(wsb)), "pref ws");
  ck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &scheme,
                                          sizeof(scheme)), "pref scheme");
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    ck(cublasLtMatmulPreferenceSetAttribute(pref, attr, &al, sizeof(al)), "pref align");
  std::vector<cublasLtMatmulHeuristicResult_t> res(32);
  int found = 0;
  ck(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, static_cast<int>(res.size()),
                                    res.data(), &found), "heuristic");
  const float alpha = 1.0f, beta = c.c_f32 ? 1.0f : 0.0f;
  std::vector<char> ref(c_bytes), got(c_bytes);
  cudaEvent_t e0, e1;
  ck(cudaEventCreate(&e0), "event");
  ck(cudaEventCreate(&e1), "event");
  Result r;
  const double flop = 2.0 * c.M * c.N * c.K;
  for (int i = 0; i < found; ++i) {
    if (res[i].state != CUBLAS_STATUS_SUCCESS || res[i].workspaceSize > ws_bytes) continue;
    const auto run = [&] {
      ck(cublasLtMatmul(lt, desc, &alpha, B, la, A, lb, &beta, C, lc, C, lc, &res[i].algo, ws,
                        ws_bytes, st), "matmul");
    };
    ck(cudaMemcpy(C, C0, c_bytes, cudaMemcpyDeviceToDevice), "restore C");
    run();
    ck(cudaMemcpy(i == 0 ? ref.data() : got.data(), C, c_bytes, cudaMemcpyDeviceToHost), "C back");
    const bool equal = i == 0 || std::memcmp(ref.data(), got.data(), c_bytes) == 0;
    for (int w = 0; w < 3; ++w) run();
    std::vector<float> ms;
    for (int it = 0; it < 9; ++it) {
      ck(cudaEventRecord(e0, st), "record");
      run();
      ck(cudaEventRecord(e1, st), "record");
      ck(cudaEventSynchronize(e1), "sync");
      float m = 0;
      ck(cudaEventElapsedTime(&m, e0, e1), "elapsed");
      ms.push_back(m);
    }
    std::sort(ms.begin(), ms.end());
    const double t = ms[4];
    ++r.found;
    r.equal += equal ? 1 : 0;
    if (i == 0) r.first = r.best = r.best_equal = t;
    if (t < r.best) r.best = t, r.best_i = i;
    if (equal && t < r.best_equal) r.best_equal = t, r.best_equal_i = i;
    std::printf("    cand %2d %8.3f ms %6.1f TFLOP/s %s  %s\n", i, t, flop / t * 1e-9,
                equal ? "bitwise = cand 0" : "DIFFERENT bits", algo_config(res[i].algo).c_str());
  }
  std::printf("  %-44s cands %2d (=%2d)  first %7.3f ms %6.1f  best %7.3f (#%d)  best-equal %7.3f (#%d) %+.1f%%\n",
              c.name.c_str(), r.found, r.equal, r.first, flop / r.first * 1e-9, r.best, r.best_i,
              r.best_equal, r.best_equal_i, 100.0 * (r.best_equal - r.first) / r.first);
  std::fflush(stdout);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(desc);
  cudaFree(A);
  cudaFree(B);
  cudaFree(C0);
  cudaFree(C);
  return r;
}

// The layer products of a decoder layer (q/k/v fused, gate/up fused) and the CE's at chunk rows.
std::vector<Case> model_cases(const char* tag, int64_t T, int64_t H, int64_t QKV, int64_t I,
                              int64_t V, int64_t ce_rows, int layers) {
  std::vector<Case> v;
  const struct { const char* n; int64_t in, out; } lin[] = {
      {"qkv", H, QKV}, {"o", H, H}, {"gate_up", H, 2 * I}, {"down", I, H}};
  for (const auto& l : lin) {
    const std::string p = std::string(tag) + " " + l.n;
    v.push_back({p + " fwd", T, l.out, l.in, false, true, false, layers});
    v.push_back({p + " dX", T, l.in, l.out, false, false, false, layers});
    v.push_back({p + " dW", l.out, l.in, T, true, false, true, layers});
  }
  const std::string p = std::string(tag) + " CE";
  const int chunks = static_cast<int>((T + ce_rows - 1) / ce_rows);
  v.push_back({p + " logits", ce_rows, V, H, false, true, false, chunks});
  v.push_back({p + " dh slice", ce_rows, H, (V + 3) / 4, false, false, true, 4 * chunks});
  v.push_back({p + " dW", V, H, ce_rows, true, false, true, chunks});
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("bench_gemm_algos: no CUDA device\n");
    return 0;
  }
  const int64_t T = argc > 1 ? std::atoll(argv[1]) : 8192;
  cublasLtHandle_t lt = nullptr;
  ck(cublasLtCreate(&lt), "cublasLtCreate");
  const size_t ws_bytes = size_t{32} << 20;
  void* ws = nullptr;
  ck(cudaMalloc(&ws, ws_bytes), "cudaMalloc");
  cudaStream_t st = nullptr;
  ck(cudaStreamCreate(&st), "stream");
  std::vector<Case> cases = model_cases("1.5B", T, 1536, 2048, 8960, 151936, 1366, 28);
  for (auto& c : model_cases("Llama1B", T, 2048, 3072, 8192, 128256, 1366, 16)) cases.push_back(c);
  double first = 0, best = 0, best_equal = 0;
  std::string model;
  const auto total = [&] {
    if (!model.empty())
      std::printf("TOTAL %s per step: first %.2f ms, best %.2f ms, best-equal %.2f ms\n",
                  model.c_str(), first, best, best_equal);
    first = best = best_equal = 0;
  };
  for (const Case& c : cases) {
    const std::string m = c.name.substr(0, c.name.find(' '));
    if (m != model) total(), model = m;
    const Result r = run_case(lt, c, ws, ws_bytes, st);
    first += r.first * c.per_step;
    best += r.best * c.per_step;
    best_equal += r.best_equal * c.per_step;
  }
  total();
  return 0;
}

#else
int main() {
  std::printf("bench_gemm_algos: built without CUDA\n");
  return 0;
}
#endif
