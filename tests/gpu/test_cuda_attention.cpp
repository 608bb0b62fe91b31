// CUDA attention (backend/cuda/cuda_attention.h launchers) against CpuOps on the same inputs:
// forward out and lse, backward dq/dk/dv; varlen shapes with T not a multiple of any tile,
// one-token sequences, 50 short sequences, one 1000-token sequence; GQA ratios 1, 2, 6, 7;
// D = 12, 16, 64, 128, 256; f32 and bf16 storage; both kernel families (tensor cores for bf16 with
// D = 64/128/256, the generic kernels for the rest and forced for bf16 D = 64/128); sliding windows
// W = 1, W inside a tile, W straddling tiles and packed sequences, W ≥ every length (then bitwise
// equal to W = 0). Every output is poisoned with NaN before each run and every run is repeated
// and compared bitwise.
//
// Bounds. f32: |gpu − cpu| ≤ 1e-4·max(|cpu|, 0.1·max|cpu|) per element (the two differ only in
// summation order). bf16 (inputs rounded to bf16 for both sides): max|gpu − ref| ≤ tol·max|ref|
// with tol = 1e-2 for out and 2e-2 for dq/dk/dv, against the CPU run in f32 on the rounded inputs
// and against the CPU run in bf16 storage; lse within 1e-4·max(1, |lse|). The tensor-core kernels
// round P and dS to bf16 before their products (FlashAttention does too), so they sit ~2-3× above
// the CPU bf16 run's own output rounding (≤ 2^-9 of max); a wrong tile, mask or fragment gives
// errors of order 1.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_attention.h"
#include "backend/op_test_util.h"

namespace zt {
namespace {

using test::bf16_round;
using test::randn;
using test::view;

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Device memory for one test (cudaMalloc / cudaFree).
struct DevBuf {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DevBuf(size_t n) : bytes(n) {
    cuda_ok(cudaMalloc(&p, std::max<size_t>(n, 16)), "malloc");
  }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void poison() { cuda_ok(cudaMemset(p, 0xff, bytes), "memset"); }  // NaN in f32 and bf16
};

struct Case {
  std::string name;
  std::vector<int32_t> lens;
  int Hq, Hkv, D;
  bool bf16;
  cuda::AttnKernels kernels = cuda::AttnKernels::kAuto;
  int64_t window = 0;  // sliding window (0 = none)
  int hpb = 0;         // the Hopper backward's query heads per block (0: its cost model's)
  int order = 0;       // its block order (AttnProblem::bwd_block_order; 0: the default)
};

// Host values of one tensor in storage dtype.
std::vector<uint8_t> to_storage(const std::vector<float>& x, bool bf16) {
  std::vector<uint8_t> b(x.size() * (bf16 ? 2 : 4));
  if (bf16) {
    const std::vector<uint16_t> h = test::to_bf16(x);
    std::memcpy(b.data(), h.data(), b.size());
  } else {
    std::memcpy(b.data(), x.data(), b.size());
  }
  return b;
}
std::vector<float> from_storage(const std::vector<uint8_t>& b, bool bf16) {
  std::vector<float> x(b.size() / (bf16 ? 2 : 4));
  if (bf16) {
    std::vector<uint16_t> h(x.size());
    std::memcpy(h.data(), b.data(), b.size());
    x = test::from_bf16(h);
  } else {
    std::memcpy(x.data(), b.data(), b.size());
  }
  return x;
}

struct Outputs {
  std::vector<uint8_t> out, lse, dq, dk, dv;  // raw bytes (bitwise comparisons)
};

// The CPU op's results in f32: out, lse, dq, dk, dv.
struct Reference {
  std::vector<float> out, lse, dq, dk, dv;
};

Reference cpu_reference(const Case& c, const std::vector<int32_t>& cu, bool bf16_storage,
                        const std::vector<float>& q, const std::vector<float>& k,
                        const std::vector<float>& v, const std::vector<float>& g) {
  const int64_t T = cu.back(), Hq = c.Hq, Hkv = c.Hkv, D = c.D;
  CpuOps ops;
  Varlen seqs;
  seqs.cu_host = cu;
  for (int32_t L : c.lens) seqs.max_seqlen = std::max<int64_t>(seqs.max_seqlen, L);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  Reference r;
  r.lse.assign(Hq * T, 0.0f);
  auto t_of = [&](std::vector<uint16_t>& h, std::vector<float>& f, int64_t H) {
    return bf16_storage ? view(h, {T, H, D}) : view(f, {T, H, D});
  };
  std::vector<float> fq = q, fk = k, fv = v, fg = g, fo(q.size()), fdq(q.size()), fdk(k.size()),
                     fdv(k.size());
  std::vector<uint16_t> hq = test::to_bf16(q), hk = test::to_bf16(k), hv = test::to_bf16(v),
                        hg = test::to_bf16(g), ho(q.size()), hdq(q.size()), hdk(k.size()),
                        hdv(k.size());
  const Tensor tq = t_of(hq, fq, Hq), tk = t_of(hk, fk, Hkv), tv = t_of(hv, fv, Hkv),
               tg = t_of(hg, fg, Hq), to = t_of(ho, fo, Hq), tdq = t_of(hdq, fdq, Hq),
               tdk = t_of(hdk, fdk, Hkv), tdv = t_of(hdv, fdv, Hkv);
  test::Workspace ws(ops.attention_workspace_bytes(tq, tk, seqs));
  ops.attention_fwd(to, view(r.lse, {Hq, T}), tq, tk, tv, seqs, scale, ws.tensor(), {}, c.window);
  ops.attention_bwd(tdq, tdk, tdv, tg, tq, tk, tv, to, view(r.lse, {Hq, T}), seqs, scale,
                    ws.tensor(), {}, c.window);
  if (bf16_storage) {
    r.out = test::from_bf16(ho);
    r.dq = test::from_bf16(hdq);
    r.dk = test::from_bf16(hdk);
    r.dv = test::from_bf16(hdv);
  } else {
    r.out = fo;
    r.dq = fdq;
    r.dk = fdk;
    r.dv = fdv;
  }
  return r;
}

// Uploads the inputs, runs forward then backward on the GPU with NaN-poisoned outputs, returns the
// outputs' bytes. Checks that kAuto picked the expected kernels.
Outputs gpu_run(const Case& c, const std::vector<int32_t>& cu, const std::vector<float>& q,
                const std::vector<float>& k, const std::vector<float>& v,
                const std::vector<float>& g) {
  const int64_t T = cu.back();
  const size_t es = c.bf16 ? 2 : 4, nq = q.size(), nk = k.size();
  DevBuf dq_in(nq * es), dk_in(nk * es), dv_in(nk * es), dg(nq * es), dout(nq * es),
      dlse(c.Hq * T * 4), ddq(nq * es), ddk(nk * es), ddv(nk * es), dcu(cu.size() * 4);
  cuda_ok(cudaMemcpy(dq_in.p, to_storage(q, c.bf16).data(), nq * es, cudaMemcpyHostToDevice),
          "h2d");
  cuda_ok(cudaMemcpy(dk_in.p, to_storage(k, c.bf16).data(), nk * es, cudaMemcpyHostToDevice),
          "h2d");
  cuda_ok(cudaMemcpy(dv_in.p, to_storage(v, c.bf16).data(), nk * es, cudaMemcpyHostToDevice),
          "h2d");
  cuda_ok(cudaMemcpy(dg.p, to_storage(g, c.bf16).data(), nq * es, cudaMemcpyHostToDevice), "h2d");
  cuda_ok(cudaMemcpy(dcu.p, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice), "h2d");
  cuda::AttnProblem p;
  p.T = T;
  p.Hq = c.Hq;
  p.Hkv = c.Hkv;
  p.D = c.D;
  p.bf16 = c.bf16;
  p.cu_dev = static_cast<const int32_t*>(dcu.p);
  p.cu_host = cu.data();
  p.num_seqs = static_cast<int>(cu.size()) - 1;
  p.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  p.window = c.window;
  p.bwd_heads_per_block = c.hpb;
  p.bwd_block_order = c.order;
  const bool tc = c.kernels != cuda::AttnKernels::kGeneric &&
                  cuda::attention_uses_tensor_cores(p, {dq_in.p, dk_in.p, dout.p});
  EXPECT_EQ(tc, c.bf16 && (c.D == 64 || c.D == 128 || c.D == 256) &&
                    c.kernels != cuda::AttnKernels::kGeneric);
  // Sized without sequences, as the model queries it; must equal the size with them.
  cuda::AttnProblem probe = p;
  probe.num_seqs = 0;
  EXPECT_EQ(cuda::attention_workspace_bytes(probe), cuda::attention_workspace_bytes(p));
  DevBuf ws(cuda::attention_workspace_bytes(p));
  ws.poison();
  for (DevBuf* b : {&dout, &dlse, &ddq, &ddk, &ddv}) b->poison();
  cuda::attention_fwd(p, dout.p, static_cast<float*>(dlse.p), dq_in.p, dk_in.p, dv_in.p, ws.p,
                      nullptr, c.kernels);
  cuda::attention_bwd(p, ddq.p, ddk.p, ddv.p, dg.p, dq_in.p, dk_in.p, dv_in.p, dout.p,
                      static_cast<const float*>(dlse.p), ws.p, nullptr, c.kernels);
  cuda_ok(cudaDeviceSynchronize(), "attention kernels");
  Outputs o;
  auto down = [](const DevBuf& b) {
    std::vector<uint8_t> h(b.bytes);
    cuda_ok(cudaMemcpy(h.data(), b.p, b.bytes, cudaMemcpyDeviceToHost), "d2h");
    return h;
  };
  o.out = down(dout);
  o.lse = down(dlse);
  o.dq = down(ddq);
  o.dk = down(ddk);
  o.dv = down(ddv);
  return o;
}

// max|a − b| / max|b| (NaN → infinity).
double rel_max_err(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0, s = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = std::abs(static_cast<double>(a[i]) - b[i]);
    if (!(e <= m)) m = std::isnan(e) ? INFINITY : e;
    s = std::max(s, std::abs(static_cast<double>(b[i])));
  }
  return m / s;
}

// f32 criterion: every |a − b| ≤ rtol·max(|b|, 0.1·max|b|); returns the number of violations and
// reports the first few.
int64_t count_f32_violations(const char* name, const std::vector<float>& a,
                             const std::vector<float>& b, double rtol) {
  double mx = 0;
  for (float x : b) mx = std::max(mx, std::abs(static_cast<double>(x)));
  int64_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double tol = rtol * std::max(std::abs(static_cast<double>(b[i])), 0.1 * mx);
    if (!(std::abs(static_cast<double>(a[i]) - b[i]) <= tol) && bad++ < 3)
      ADD_FAILURE() << name << "[" << i << "] = " << a[i] << ", cpu " << b[i];
  }
  return bad;
}

// Returns the GPU outputs of the first run (for comparisons between cases).
Outputs run_case(const Case& c, uint32_t seed) {
  std::vector<int32_t> cu{0};
  for (int32_t L : c.lens) cu.push_back(cu.back() + L);
  const int64_t T = cu.back();
  const size_t nq = T * c.Hq * c.D, nk = T * c.Hkv * c.D;
  std::vector<float> q = randn(nq, seed, 1.5f), k = randn(nk, seed + 1, 1.5f),
                     v = randn(nk, seed + 2), g = randn(nq, seed + 3);
  if (c.bf16) {
    q = bf16_round(q);
    k = bf16_round(k);
    v = bf16_round(v);
    g = bf16_round(g);
  }
  const Outputs o1 = gpu_run(c, cu, q, k, v, g);
  const Outputs o2 = gpu_run(c, cu, q, k, v, g);
  EXPECT_TRUE(o1.out == o2.out) << c.name << ": out differs between runs";
  EXPECT_TRUE(o1.lse == o2.lse) << c.name << ": lse differs between runs";
  EXPECT_TRUE(o1.dq == o2.dq) << c.name << ": dq differs between runs";
  EXPECT_TRUE(o1.dk == o2.dk) << c.name << ": dk differs between runs";
  EXPECT_TRUE(o1.dv == o2.dv) << c.name << ": dv differs between runs";

  const std::vector<float> out = from_storage(o1.out, c.bf16), lse = from_storage(o1.lse, false),
                           dq = from_storage(o1.dq, c.bf16), dk = from_storage(o1.dk, c.bf16),
                           dv = from_storage(o1.dv, c.bf16);
  const Reference ref = cpu_reference(c, cu, false, q, k, v, g);
  int64_t bad_lse = 0;
  for (size_t i = 0; i < lse.size(); ++i)
    if (!(std::abs(lse[i] - ref.lse[i]) <= 1e-4 * std::max(1.0f, std::abs(ref.lse[i]))) &&
        bad_lse++ < 3)
      ADD_FAILURE() << c.name << ": lse[" << i << "] = " << lse[i] << ", cpu " << ref.lse[i];
  EXPECT_EQ(bad_lse, 0) << c.name << ": lse";
  if (c.window == 1) {
    // Each query sees only its own key: P = 1, out = v, dV = dO, and dS = P·(dP − Di) = 0 up to
    // rounding (Di = dO·out = dO·v = dP), so dq and dk are rounding noise on both sides; they must
    // vanish next to dv (which is O(1)).
    double mdv = 0, mq = 0, mk = 0;
    for (float x : ref.dv) mdv = std::max(mdv, std::abs(static_cast<double>(x)));
    for (float x : dq)
      mq = std::max(mq, std::isnan(x) ? INFINITY : std::abs(static_cast<double>(x)));
    for (float x : dk)
      mk = std::max(mk, std::isnan(x) ? INFINITY : std::abs(static_cast<double>(x)));
    EXPECT_LE(mq, 1e-4 * mdv) << c.name << ": dq with W = 1";
    EXPECT_LE(mk, 1e-4 * mdv) << c.name << ": dk with W = 1";
    EXPECT_LE(rel_max_err(out, ref.out), c.bf16 ? 1e-2 : 1e-6) << c.name << ": out with W = 1";
    EXPECT_LE(rel_max_err(dv, ref.dv), c.bf16 ? 1e-2 : 1e-6) << c.name << ": dv with W = 1";
    std::printf("[attn] %-34s W = 1: max|dq| %.1e max|dk| %.1e (max|dv| %.1e)\n", c.name.c_str(),
                mq, mk, mdv);
    return o1;
  }
  if (!c.bf16) {
    EXPECT_EQ(count_f32_violations("out", out, ref.out, 1e-4), 0) << c.name;
    EXPECT_EQ(count_f32_violations("dq", dq, ref.dq, 1e-4), 0) << c.name;
    EXPECT_EQ(count_f32_violations("dk", dk, ref.dk, 1e-4), 0) << c.name;
    EXPECT_EQ(count_f32_violations("dv", dv, ref.dv, 1e-4), 0) << c.name;
    std::printf("[attn] %-34s f32: max err/max out %.1e dq %.1e dk %.1e dv %.1e\n", c.name.c_str(),
                rel_max_err(out, ref.out), rel_max_err(dq, ref.dq), rel_max_err(dk, ref.dk),
                rel_max_err(dv, ref.dv));
    return o1;
  }
  const Reference rb = cpu_reference(c, cu, true, q, k, v, g);
  const double e[4] = {rel_max_err(out, ref.out), rel_max_err(dq, ref.dq), rel_max_err(dk, ref.dk),
                       rel_max_err(dv, ref.dv)};
  const double eb[4] = {rel_max_err(out, rb.out), rel_max_err(dq, rb.dq), rel_max_err(dk, rb.dk),
                        rel_max_err(dv, rb.dv)};
  const double base[4] = {rel_max_err(rb.out, ref.out), rel_max_err(rb.dq, ref.dq),
                          rel_max_err(rb.dk, ref.dk), rel_max_err(rb.dv, ref.dv)};
  const char* names[4] = {"out", "dq", "dk", "dv"};
  for (int i = 0; i < 4; ++i) {
    const double tol = i == 0 ? 1e-2 : 2e-2;
    EXPECT_LE(e[i], tol) << c.name << ": " << names[i] << " vs the CPU in f32";
    EXPECT_LE(eb[i], tol) << c.name << ": " << names[i] << " vs the CPU in bf16 storage";
  }
  std::printf(
      "[attn] %-34s bf16 max err/max vs cpu-f32 (cpu-bf16 vs cpu-f32): out %.1e (%.1e) dq %.1e "
      "(%.1e) dk %.1e (%.1e) dv %.1e (%.1e)\n",
      c.name.c_str(), e[0], base[0], e[1], base[1], e[2], base[2], e[3], base[3]);
  return o1;
}

// 50 sequences of 1..40 tokens (seeded).
std::vector<int32_t> short_seqs(uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> d(1, 40);
  std::vector<int32_t> lens(50);
  for (auto& L : lens) L = d(gen);
  lens[7] = 1;
  lens[20] = 40;
  return lens;
}

#define SKIP_WITHOUT_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device"

TEST(CudaAttention, F32GenericKernels) {
  SKIP_WITHOUT_GPU();
  const std::vector<Case> cases = {
      {"f32 D12 rep2 {1,5,1,70,33}", {1, 5, 1, 70, 33}, 2, 1, 12, false},
      {"f32 D16 rep7 50 short", short_seqs(5), 7, 1, 16, false},
      {"f32 D64 rep6 {1000}", {1000}, 6, 1, 64, false},
      {"f32 D128 rep1 {1,130,67,200}", {1, 130, 67, 200}, 2, 2, 128, false},
      {"f32 D256 rep2 {45,70}", {45, 70}, 2, 1, 256, false},
  };
  uint32_t seed = 100;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    run_case(c, seed += 10);
  }
}

TEST(CudaAttention, Bf16TensorCoreKernels) {
  SKIP_WITHOUT_GPU();
  const std::vector<Case> cases = {
      {"bf16 tc D64 rep2 50 short", short_seqs(7), 4, 2, 64, true},
      {"bf16 tc D128 rep6 {1000,1,300,65}", {1000, 1, 300, 65}, 12, 2, 128, true},
      {"bf16 tc D64 rep7 {1000}", {1000}, 7, 1, 64, true},
      {"bf16 tc D128 rep1 {64,128,63,129,1}", {64, 128, 63, 129, 1}, 2, 2, 128, true},
      // Around the Hopper forward's 128-row tiles: a sequence of exactly one and two tiles, one
      // row short and one over, and a long one (many key tiles, both buffers reused).
      {"bf16 tc D128 rep6 {128,256,127,129,1,300}", {128, 256, 127, 129, 1, 300}, 12, 2, 128, true},
      {"bf16 tc D64 rep4 {2500,255,257}", {2500, 255, 257}, 8, 2, 64, true},
  };
  uint32_t seed = 200;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    run_case(c, seed += 10);
  }
}

TEST(CudaAttention, Bf16GenericKernels) {
  SKIP_WITHOUT_GPU();
  const auto gen = cuda::AttnKernels::kGeneric;
  const std::vector<Case> cases = {
      {"bf16 D12 rep1 {1,37,100}", {1, 37, 100}, 2, 2, 12, true},
      {"bf16 D16 rep6 50 short", short_seqs(9), 6, 1, 16, true},
      {"bf16 generic D64 rep2 {1,130,200}", {1, 130, 200}, 4, 2, 64, true, gen},
      {"bf16 generic D128 rep6 {300,65}", {300, 65}, 12, 2, 128, true, gen},
  };
  uint32_t seed = 300;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    run_case(c, seed += 10);
  }
}

}  // namespace
}  // namespace zt

namespace zt {
namespace {

TEST(CudaAttention, Bf16TensorCoreKernelsD256) {
  SKIP_WITHOUT_GPU();
  const std::vector<Case> cases = {
      {"bf16 tc D256 rep2 {1,130,67,200}", {1, 130, 67, 200}, 4, 2, 256, true},
      {"bf16 tc D256 rep1 50 short", short_seqs(11), 2, 2, 256, true},
      {"bf16 tc D256 rep8 {700}", {700}, 8, 1, 256, true},
  };
  uint32_t seed = 400;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    run_case(c, seed += 10);
  }
}

// Sliding windows against the CPU's mask (i - W < j ≤ i within each sequence) on every kernel: W =
// 1 (only the diagonal: out = v, dv = dout, dq = dk = 0 up to rounding), W inside one tile, W
// straddling tile boundaries (64 for the tensor cores, 16 and 32 for the generic kernels) and
// packed sequences shorter and longer than W, GQA.
TEST(CudaAttention, SlidingWindow) {
  SKIP_WITHOUT_GPU();
  const auto gen = cuda::AttnKernels::kGeneric;
  const auto tc = cuda::AttnKernels::kAuto;
  const std::vector<int32_t> packed = {200, 37, 129, 1, 64, 65};
  const std::vector<Case> cases = {
      {"f32 D16 rep2 W1 packed", packed, 4, 2, 16, false, gen, 1},
      {"f32 D12 rep7 W5 50 short", short_seqs(13), 7, 1, 12, false, gen, 5},
      {"f32 D64 rep6 W50 packed", packed, 6, 1, 64, false, gen, 50},
      {"f32 D128 rep1 W33 {300,45}", {300, 45}, 2, 2, 128, false, gen, 33},
      {"f32 D256 rep2 W70 {170,20}", {170, 20}, 4, 2, 256, false, gen, 70},
      {"bf16 generic D64 rep2 W17 packed", packed, 4, 2, 64, true, gen, 17},
      {"bf16 tc D64 rep1 W1 packed", packed, 2, 2, 64, true, tc, 1},
      {"bf16 tc D64 rep2 W40 packed", packed, 4, 2, 64, true, tc, 40},
      {"bf16 tc D64 rep7 W64 {1000}", {1000}, 7, 1, 64, true, tc, 64},
      {"bf16 tc D128 rep6 W100 packed", packed, 12, 2, 128, true, tc, 100},
      {"bf16 tc D128 rep2 W130 {1000,300}", {1000, 300}, 4, 2, 128, true, tc, 130},
      {"bf16 tc D128 rep1 W1 {300}", {300}, 2, 2, 128, true, tc, 1},
      {"bf16 tc D256 rep2 W65 packed", packed, 4, 2, 256, true, tc, 65},
      {"bf16 tc D256 rep4 W128 {600,70}", {600, 70}, 8, 2, 256, true, tc, 128},
  };
  uint32_t seed = 500;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    run_case(c, seed += 10);
  }
}

// A window at least as long as every sequence masks nothing more than causality: the outputs are
// bitwise those of W = 0 — W = 200 (the longest sequence, < T: through the window code paths, whose
// loop bounds and masks then change nothing) and W ≥ T (passed to the kernels as 0) — and match the
// CPU with that W.
TEST(CudaAttention, WindowAtLeastTheLengthIsCausal) {
  SKIP_WITHOUT_GPU();
  const std::vector<int32_t> lens = {1, 130, 67, 200};
  // D = 64 on the mma.sync kernels: with W = 0 an sm_90 device runs the Hopper forward, which has
  // no window and whose bits differ from the mma.sync forward's.
  for (const auto& [D, bf16, kernels] : {std::tuple{64, true, cuda::AttnKernels::kMmaSync},
                                         std::tuple{256, true, cuda::AttnKernels::kAuto},
                                         std::tuple{16, false, cuda::AttnKernels::kGeneric}}) {
    Case c{"W0", lens, 4, 2, D, bf16, kernels, 0};
    SCOPED_TRACE("D " + std::to_string(D));
    const Outputs causal = run_case(c, 600);
    for (int64_t W : {200, 398, 100000}) {
      c.window = W;
      c.name = "W" + std::to_string(W);
      const Outputs o = run_case(c, 600);
      EXPECT_TRUE(o.out == causal.out && o.lse == causal.lse && o.dq == causal.dq &&
                  o.dk == causal.dk && o.dv == causal.dv)
          << "window " << W << " differs from the causal run";
    }
  }
}

// A problem the Hopper kernels take on a compute-capability-9.0 device (bf16, D 128, no window).
cuda::AttnProblem hopper_probe() {
  cuda::AttnProblem p;
  p.T = 256;
  p.Hq = p.Hkv = 1;
  p.D = 128;
  p.bf16 = true;
  return p;
}

// The Hopper (wgmma) kernels against the mma.sync kernels on the same inputs (an sm_90 device
// only): kAuto picks them for bf16 D 64/128 without a window; out, dq, dk, dv agree to bf16
// rounding (both round P and dS to bf16 but accumulate in different orders), lse to fp32 rounding.
// Each run is bitwise repeatable and matches the CPU (run_case's checks and bounds). (Bits may
// coincide: on sequences of at most 40 tokens — one key tile — both families' results are bitwise
// equal on an H200.)
TEST(CudaAttention, HopperKernelsMatchMmaSync) {
  SKIP_WITHOUT_GPU();
  cuda::AttnProblem probe = hopper_probe();
  if (!cuda::attention_uses_sm90(probe)) GTEST_SKIP() << "not a compute capability 9.0 device";
  probe.window = 100;
  EXPECT_FALSE(cuda::attention_uses_sm90(probe)) << "a window runs the mma.sync kernels";
  probe.window = 0;
  probe.scale = -0.5f;
  EXPECT_FALSE(cuda::attention_uses_sm90(probe))
      << "a non-positive scale runs the mma.sync kernels";
  probe.scale = 0.125f;
  probe.D = 256;
  EXPECT_FALSE(cuda::attention_uses_sm90(probe)) << "D 256 runs the mma.sync kernels";
  const std::vector<Case> cases = {
      {"D128 rep6 {1000,1,300,65}", {1000, 1, 300, 65}, 12, 2, 128, true},
      {"D64 rep7 {128,129,4000}", {128, 129, 4000}, 7, 1, 64, true},
      {"D128 rep1 50 short", short_seqs(17), 2, 2, 128, true},
      // The D 64 forward's 192-row items at their edges: a last item of 1 to 192 rows, the key
      // tiles capped at the sequence's end, the first warpgroup meeting a tile past its diagonal.
      {"D64 rep7 192-row edges {191,192,193,320,1,385,64}",
       {191, 192, 193, 320, 1, 385, 64},
       14,
       2,
       64,
       true},
  };
  uint32_t seed = 700;
  for (Case c : cases) {
    SCOPED_TRACE(c.name);
    seed += 10;
    const Outputs hopper = run_case(c, seed);
    c.kernels = cuda::AttnKernels::kMmaSync;
    const Outputs mma = run_case(c, seed);
    const std::vector<float> lh = from_storage(hopper.lse, false),
                             lm = from_storage(mma.lse, false);
    double lse_err = 0;
    for (size_t i = 0; i < lh.size(); ++i)
      lse_err = std::max(lse_err, std::abs(static_cast<double>(lh[i]) - lm[i]) /
                                      std::max(1.0, std::abs(static_cast<double>(lm[i]))));
    const auto err = [](const std::vector<uint8_t>& x, const std::vector<uint8_t>& y) {
      return rel_max_err(from_storage(x, true), from_storage(y, true));
    };
    const double e[4] = {err(hopper.out, mma.out), err(hopper.dq, mma.dq), err(hopper.dk, mma.dk),
                         err(hopper.dv, mma.dv)};
    EXPECT_LE(lse_err, 1e-5) << "lse: Hopper vs mma.sync";
    EXPECT_LE(e[0], 1e-2) << "out: Hopper vs mma.sync";
    EXPECT_LE(e[1], 2e-2) << "dq: Hopper vs mma.sync";
    EXPECT_LE(e[2], 2e-2) << "dk: Hopper vs mma.sync";
    EXPECT_LE(e[3], 2e-2) << "dv: Hopper vs mma.sync";
    std::printf("[attn] Hopper vs mma.sync %-26s out %.1e dq %.1e dk %.1e dv %.1e lse %.1e\n",
                c.name.c_str(), e[0], e[1], e[2], e[3], lse_err);
  }
}

// The Hopper backward's blocks take G query heads of one KV head (AttnProblem::bwd_heads_per_block)
// and run in the plan's order: every divisor G, on packed sequences of unequal lengths (the
// tile-major order's counting sort: equal and distinct tile counts, a 1-token sequence), matches
// the CPU and repeats bitwise (run_case), the other block order (sequence by sequence against
// tile-major) gives the same bits, and the results of different G agree to bf16 rounding (dK/dV
// sum the heads in another order). A G that does not divide Hq / Hkv, or an order not 0-2, is
// refused.
TEST(CudaAttention, HopperBackwardHeadGroups) {
  SKIP_WITHOUT_GPU();
  cuda::AttnProblem probe = hopper_probe();
  if (!cuda::attention_uses_sm90(probe)) GTEST_SKIP() << "not a compute capability 9.0 device";
  const int32_t cu[2] = {0, 256};
  probe.cu_host = cu;
  probe.num_seqs = 1;
  probe.Hq = 12;
  probe.Hkv = 2;
  probe.bwd_heads_per_block = 4;
  EXPECT_THROW(cuda::attention_bwd_heads_per_block(probe), std::invalid_argument);
  probe.bwd_heads_per_block = 3;
  EXPECT_EQ(cuda::attention_bwd_heads_per_block(probe), 3);
  probe.bwd_block_order = 3;
  EXPECT_THROW(cuda::attention_bwd_heads_per_block(probe), std::invalid_argument);
  probe.bwd_block_order = 0;
  probe.bwd_heads_per_block = 0;
  const int chosen = cuda::attention_bwd_heads_per_block(probe);
  EXPECT_TRUE(chosen >= 1 && 6 % chosen == 0) << chosen;
  const std::vector<std::pair<Case, std::vector<int>>> cases = {
      {{"D128 rep6 {1000,1,300,65,300,129}", {1000, 1, 300, 65, 300, 129}, 12, 2, 128, true},
       {1, 2, 3, 6}},
      {{"D64 rep4 {700,129,2000,128,129}", {700, 129, 2000, 128, 129}, 8, 2, 64, true}, {1, 2, 4}},
  };
  uint32_t seed = 1300;
  for (const auto& [base, gs] : cases) {
    seed += 10;
    Outputs first;
    for (int G : gs) {
      Case c = base;
      c.hpb = G;
      c.name += " G" + std::to_string(G);
      SCOPED_TRACE(c.name);
      const Outputs o = run_case(c, seed);
      Case other = c;
      other.order = G > 1 ? 1 : 2;  // the default is sequence order at G = 1, tile-major above
      const Outputs oo = run_case(other, seed);
      EXPECT_TRUE(oo.dq == o.dq && oo.dk == o.dk && oo.dv == o.dv)
          << "the block order changed a bit of the backward at G " << G;
      if (G == gs.front()) {
        first = o;
        continue;
      }
      const auto err = [](const std::vector<uint8_t>& x, const std::vector<uint8_t>& y) {
        return rel_max_err(from_storage(x, true), from_storage(y, true));
      };
      EXPECT_TRUE(o.out == first.out) << "the forward does not depend on G";
      EXPECT_TRUE(o.dq == first.dq) << "dQ's order does not depend on G";
      EXPECT_LE(err(o.dk, first.dk), 1e-2) << "dk: G " << G << " vs G " << gs.front();
      EXPECT_LE(err(o.dv, first.dv), 1e-2) << "dv: G " << G << " vs G " << gs.front();
    }
  }
}

// The Hopper backward adds each query tile's dQ partials from many blocks into one fp32
// accumulator, ordered by flags between blocks: at scale (hundreds of blocks per head chain in
// flight, 1 × 16,384 tokens at D 128 and 3 × 5,000 at D 64, GQA) three runs are bitwise equal and
// finite. (The CPU reference is too slow at this size; run_case checks the values on the smaller
// cases above.)
TEST(CudaAttention, HopperBackwardIsBitwiseRepeatableAtScale) {
  SKIP_WITHOUT_GPU();
  if (!cuda::attention_uses_sm90(hopper_probe()))
    GTEST_SKIP() << "not a compute capability 9.0 device";
  const std::vector<Case> cases = {
      {"D128 rep6 {16384}", {16384}, 12, 2, 128, true},
      {"D64 rep7 {5000,5000,5000}", {5000, 5000, 5000}, 14, 2, 64, true},
  };
  uint32_t seed = 900;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<int32_t> cu{0};
    for (int32_t L : c.lens) cu.push_back(cu.back() + L);
    const size_t nq = static_cast<size_t>(cu.back()) * c.Hq * c.D,
                 nk = static_cast<size_t>(cu.back()) * c.Hkv * c.D;
    seed += 10;
    const std::vector<float> q = randn(nq, seed, 1.5f), k = randn(nk, seed + 1, 1.5f),
                             v = randn(nk, seed + 2), g = randn(nq, seed + 3);
    const Outputs first = gpu_run(c, cu, q, k, v, g);
    const std::vector<float> dq = from_storage(first.dq, true);
    size_t bad = 0;
    for (float x : dq) bad += std::isfinite(x) ? 0 : 1;
    EXPECT_EQ(bad, 0u) << "non-finite dq elements";
    for (int run = 1; run < 3; ++run) {
      const Outputs o = gpu_run(c, cu, q, k, v, g);
      EXPECT_TRUE(o.dq == first.dq) << "dq differs in run " << run;
      EXPECT_TRUE(o.dk == first.dk && o.dv == first.dv) << "dk/dv differ in run " << run;
      EXPECT_TRUE(o.out == first.out && o.lse == first.lse) << "forward differs in run " << run;
    }
  }
}

}  // namespace
}  // namespace zt
