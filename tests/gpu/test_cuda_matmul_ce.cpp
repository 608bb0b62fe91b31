// CudaOps::matmul and linear_cross_entropy_fwd_bwd against the CPU reference (CpuOps) on the same
// inputs. Outputs are poisoned with NaN (all bytes 0xFF) before each GPU call.
//
// Bounds: fp32 operands and bf16 operands with an f32 C: 1e-4 of the reference's largest
// magnitude (the products of bf16 values are exact in fp32; only the summation order differs).
// bf16 C: additionally one bf16 rounding step, |got - want| <= 2^-7·|want| + 1e-4·max|want|.
// Cross-entropy fp32: loss and entropy within 1e-5 relative; dweight within 1e-5 of each row's
// largest magnitude (of the whole tensor when dweight accumulates into old values); dhidden, a
// product summed over the whole vocabulary (K = V = 151,936, terms of both signs), within the
// matmul bound 1e-4 of the tensor's largest magnitude (per row it measured up to 1.3e-4 of the
// row's own max on an H200 — summation order alone — so the per-row measure is too strict here);
// argmax hits and target counts exact (on data where no hit is decided by less than 1e-4 in a
// logit). bf16: both backends round the logits to bf16 (HF's bf16 lm_head); loss and entropy
// 1e-5 relative; dhidden / dweight 2e-2 in the same measures: the GPU rounds G = grad_scale·
// (softmax - onehot) to bf16 for the backward products (2^-9 relative per element), and a logit
// whose fp32 sum lands on the other side of a bf16 rounding boundary on one backend moves its
// softmax value by 2^-8 relative — where the target's p ≈ 1, G = p - 1 is a small difference and
// moves by far more (measured 1.27e-2 of a row's max at the Qwen vocabulary on an H200). The
// argmax hit count is compared exactly; against the data's own argmax (fp32) only a third of the
// rows less the bf16 ties (two logits rounded to one value: the lower index wins).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/op_test_util.h"
#include "core/error.h"
#include "gpu/gpu_test_util.h"

namespace zt {
namespace {

using test::randn;
using test::rel_err;

using gputest::make_view;

// Host data in f32 or bf16 storage; values() gives the exact fp32 values.
struct HostTensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<uint16_t> b16;

  static HostTensor random(DType dt, std::vector<int64_t> shape, uint32_t seed, float scale) {
    HostTensor h;
    h.dtype = dt;
    h.shape = std::move(shape);
    int64_t n = 1;
    for (const int64_t d : h.shape) n *= d;
    h.set(randn(static_cast<size_t>(n), seed, scale));
    return h;
  }
  void set(const std::vector<float>& v) {
    if (dtype == DType::kBF16)
      b16 = test::to_bf16(v);
    else
      f32 = v;
  }
  std::vector<float> values() const { return dtype == DType::kBF16 ? test::from_bf16(b16) : f32; }
  void* data() { return dtype == DType::kBF16 ? static_cast<void*>(b16.data()) : f32.data(); }
  size_t bytes() const { return dtype == DType::kBF16 ? b16.size() * 2 : f32.size() * 4; }
  Tensor view() { return make_view(data(), dtype, shape, Device::kCPU); }
};

// A cudaMalloc'd buffer (tests may allocate); `offset` bytes into it is where the tensor starts.
struct DevBuf {
  void* p = nullptr;
  size_t n = 0, offset = 0;
  explicit DevBuf(size_t bytes, size_t off = 0) : n(bytes), offset(off) {
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(bytes + off, 1)), cudaSuccess);
  }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  char* ptr() const { return static_cast<char*>(p) + offset; }
  void poison() { ASSERT_EQ(cudaMemset(ptr(), 0xFF, n), cudaSuccess); }
  void upload(const void* src, size_t bytes) {
    ASSERT_EQ(cudaMemcpy(ptr(), src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  void download(void* dst, size_t bytes) const {
    ASSERT_EQ(cudaMemcpy(dst, ptr(), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  Tensor tensor(DType dt, const std::vector<int64_t>& shape) const {
    return make_view(ptr(), dt, shape, Device::kCUDA);
  }
  Tensor workspace() const {
    return make_view(ptr(), DType::kU8, {static_cast<int64_t>(n)}, Device::kCUDA);
  }
};

// The device copy of a host tensor (optionally `offset` bytes off a 256-byte boundary).
struct DevTensor {
  DevBuf buf;
  Tensor t;
  explicit DevTensor(HostTensor& h, size_t offset = 0) : buf(h.bytes(), offset) {
    buf.upload(h.data(), h.bytes());
    t = buf.tensor(h.dtype, h.shape);
  }
  std::vector<float> values(DType dt) const {
    HostTensor h;
    h.dtype = dt;
    if (dt == DType::kBF16) {
      h.b16.resize(buf.n / 2);
      buf.download(h.b16.data(), buf.n);
    } else {
      h.f32.resize(buf.n / 4);
      buf.download(h.f32.data(), buf.n);
    }
    return h.values();
  }
};

void sync() { ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess); }

// got vs want (see the file comment for the bounds); every value must be finite.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                  bool bf16_out, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_TRUE(std::isfinite(got[i])) << what << ": element " << i << " is " << got[i];
  if (!bf16_out) {
    EXPECT_LE(rel_err(got, want), tol) << what;
    return;
  }
  double scale = 0;
  for (const float w : want) scale = std::max(scale, std::abs(static_cast<double>(w)));
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(static_cast<double>(got[i]) - want[i]);
    ASSERT_LE(d, std::ldexp(std::abs(static_cast<double>(want[i])), -7) + tol * scale)
        << what << ": element " << i << " got " << got[i] << " want " << want[i];
  }
}

// Row by row: max_j |got - want| <= tol·max_j |want| for each row of a [rows, cols] matrix (a row
// whose reference is all zero must be all zero) — sensitive to errors in small rows too.
void expect_close_rows(const std::vector<float>& got, const std::vector<float>& want, int64_t rows,
                       int64_t cols, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_EQ(static_cast<int64_t>(want.size()), rows * cols) << what;
  for (int64_t r = 0; r < rows; ++r) {
    double scale = 0, err = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const double g = got[r * cols + j], w = want[r * cols + j];
      ASSERT_TRUE(std::isfinite(g)) << what << ": row " << r << " column " << j << " is " << g;
      scale = std::max(scale, std::abs(w));
      err = std::max(err, std::abs(g - w));
    }
    ASSERT_LE(err, tol * scale) << what << ": row " << r << " (row max " << scale << ")";
  }
}

// ---- matmul

constexpr Trans kN = Trans::kN, kT = Trans::kT;
constexpr DType kF32 = DType::kF32, kBF16 = DType::kBF16;
const int kNoBias = -1, kF32Bias = static_cast<int>(DType::kF32),
          kBf16Bias = static_cast<int>(DType::kBF16);

struct MmCase {
  int64_t M, N, K;
  Trans ta, tb;
  DType a, b, c;
  int bias;  // -1: none, else a DType
  float alpha, beta;
};

std::string describe(const MmCase& c) {
  return "M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
         " ta=" + (c.ta == Trans::kT ? "T" : "N") + " tb=" + (c.tb == Trans::kT ? "T" : "N") +
         " A " + std::string(dtype_name(c.a)) + " B " + std::string(dtype_name(c.b)) + " C " +
         std::string(dtype_name(c.c)) +
         (c.bias < 0 ? "" : " bias " + std::string(dtype_name(static_cast<DType>(c.bias)))) +
         " alpha=" + std::to_string(c.alpha) + " beta=" + std::to_string(c.beta);
}

// Runs one case on both backends and compares; `misalign` puts A and C 1 element off 16 bytes.
void check_matmul(CudaOps& gpu, const MmCase& c, uint32_t seed, bool misalign = false) {
  SCOPED_TRACE(describe(c) + (misalign ? " (unaligned A, C)" : ""));
  HostTensor A = HostTensor::random(
      c.a, c.ta == Trans::kN ? std::vector<int64_t>{c.M, c.K} : std::vector<int64_t>{c.K, c.M},
      seed, 1.0f);
  HostTensor B = HostTensor::random(
      c.b, c.tb == Trans::kN ? std::vector<int64_t>{c.K, c.N} : std::vector<int64_t>{c.N, c.K},
      seed + 1, 1.0f);
  HostTensor C = HostTensor::random(c.c, {c.M, c.N}, seed + 2, 1.0f);
  HostTensor bias = HostTensor::random(c.bias < 0 ? DType::kF32 : static_cast<DType>(c.bias), {c.N},
                                       seed + 3, 1.0f);
  // An f32 bias beside a bf16 C is rounded to bf16 on the GPU (cuda_matmul.cpp): give it
  // bf16-exact values so the result can be held to the same bound.
  if (c.bias == kF32Bias && c.c == DType::kBF16) bias.set(test::bf16_round(bias.values()));
  HostTensor Ccpu = C;
  CpuOps cpu;
  test::Workspace cws(cpu.matmul_workspace_bytes(Ccpu.view(), A.view(), c.ta, B.view(), c.tb));
  cpu.matmul(Ccpu.view(), A.view(), c.ta, B.view(), c.tb, c.bias < 0 ? Tensor() : bias.view(),
             c.alpha, c.beta, cws.tensor(), {});

  DevTensor dA(A, misalign ? dtype_size(c.a) : 0), dB(B), dC(C, misalign ? dtype_size(c.c) : 0),
      dbias(bias);
  if (c.beta == 0.0f) dC.buf.poison();
  DevBuf ws(gpu.matmul_workspace_bytes(dC.t, dA.t, c.ta, dB.t, c.tb));
  ws.poison();
  gpu.matmul(dC.t, dA.t, c.ta, dB.t, c.tb, c.bias < 0 ? Tensor() : dbias.t, c.alpha, c.beta,
             ws.workspace(), {});
  sync();
  expect_close(dC.values(c.c), Ccpu.values(), 1e-4, c.c == DType::kBF16, "C");
}

const int64_t kShapes[][3] = {{37, 1, 129},  {1, 37, 129},  {129, 37, 1},
                              {37, 129, 17}, {64, 96, 128}, {200, 300, 520}};

TEST(CudaMatmul, F32MatchesCpuForEveryLayout) {
  ZT_REQUIRE_GPU();
  CudaOps gpu;
  uint32_t seed = 100;
  for (const auto& s : kShapes)
    for (const Trans ta : {kN, kT})
      for (const Trans tb : {kN, kT}) {
        check_matmul(gpu, {s[0], s[1], s[2], ta, tb, kF32, kF32, kF32, kNoBias, 1.0f, 0.0f},
                     seed += 4);
        check_matmul(gpu, {s[0], s[1], s[2], ta, tb, kF32, kF32, kF32, kF32Bias, 0.5f, 0.75f},
                     seed += 4);
      }
}

TEST(CudaMatmul, Bf16OperandsMatchCpuWithF32AndBf16Outputs) {
  ZT_REQUIRE_GPU();
  CudaOps gpu;
  uint32_t seed = 300;
  for (const auto& s : kShapes)
    for (const Trans ta : {kN, kT})
      for (const Trans tb : {kN, kT}) {
        // x·Wᵀ with a bias (bf16 out), dY·W (bf16 out), dYᵀ·X accumulated into f32.
        check_matmul(gpu, {s[0], s[1], s[2], ta, tb, kBF16, kBF16, kBF16, kBf16Bias, 1.0f, 0.0f},
                     seed += 4);
        check_matmul(gpu, {s[0], s[1], s[2], ta, tb, kBF16, kBF16, kBF16, kNoBias, 1.0f, 1.0f},
                     seed += 4);
        check_matmul(gpu, {s[0], s[1], s[2], ta, tb, kBF16, kBF16, kF32, kNoBias, 1.0f, 1.0f},
                     seed += 4);
        check_matmul(gpu, {s[0], s[1], s[2], ta, tb, kBF16, kBF16, kF32, kF32Bias, 2.0f, 0.5f},
                     seed += 4);
      }
}

TEST(CudaMatmul, UnalignedPointersAndConvertedOperands) {
  ZT_REQUIRE_GPU();
  CudaOps gpu;
  // Pointers one element off a 16-byte boundary use a plan made for that alignment.
  check_matmul(gpu, {37, 129, 17, kN, kT, kF32, kF32, kF32, kF32Bias, 1.0f, 0.0f}, 500, true);
  check_matmul(gpu, {64, 96, 128, kN, kT, kBF16, kBF16, kBF16, kBf16Bias, 1.0f, 0.0f}, 510, true);
  check_matmul(gpu, {64, 96, 128, kT, kN, kBF16, kBF16, kF32, kNoBias, 1.0f, 1.0f}, 520, true);
  // The same shapes aligned again (the cached aligned plan is separate).
  check_matmul(gpu, {64, 96, 128, kN, kT, kBF16, kBF16, kBF16, kBf16Bias, 1.0f, 0.0f}, 530);
  // Combinations cuBLASLt does not run natively go through workspace copies (exact widening).
  check_matmul(gpu, {37, 129, 17, kN, kT, kBF16, kF32, kF32, kNoBias, 1.0f, 0.0f}, 540);
  check_matmul(gpu, {37, 129, 17, kN, kN, kF32, kBF16, kF32, kF32Bias, 1.0f, 0.5f}, 550);
  check_matmul(gpu, {37, 129, 17, kT, kN, kF32, kF32, kBF16, kBf16Bias, 1.0f, 0.5f}, 560);
  check_matmul(gpu, {37, 129, 17, kN, kT, kBF16, kBF16, kF32, kBf16Bias, 1.0f, 0.0f}, 570);
  check_matmul(gpu, {37, 129, 17, kN, kT, kBF16, kBF16, kBF16, kF32Bias, 1.0f, 0.0f}, 580);
}

TEST(CudaMatmul, SameCallTwiceGivesSameBits) {
  ZT_REQUIRE_GPU();
  CudaOps gpu;
  const int64_t M = 1000, N = 1536, K = 1536;
  for (const DType dt : {kF32, kBF16}) {
    SCOPED_TRACE(dtype_name(dt));
    HostTensor x = HostTensor::random(dt, {M, K}, 600, 1.0f),
               w = HostTensor::random(dt, {N, K}, 601, 1.0f),
               dw0 = HostTensor::random(kF32, {N, K}, 602, 1.0f);
    HostTensor dy = HostTensor::random(dt, {M, N}, 603, 1.0f);
    DevTensor dx(x), dwt(w), ddy(dy), g1(dw0), g2(dw0);
    HostTensor y = HostTensor::random(dt, {M, N}, 604, 1.0f);
    DevTensor y1(y), y2(y);
    y1.buf.poison();
    y2.buf.poison();
    DevBuf ws(std::max(gpu.matmul_workspace_bytes(y1.t, dx.t, kN, dwt.t, kT),
                       gpu.matmul_workspace_bytes(g1.t, ddy.t, kT, dx.t, kN)));
    for (DevTensor* y_ : {&y1, &y2})
      gpu.matmul(y_->t, dx.t, kN, dwt.t, kT, Tensor(), 1.0f, 0.0f, ws.workspace(), {});
    // The weight-gradient product, accumulated (beta 1) into two equal fp32 buffers.
    for (DevTensor* g : {&g1, &g2})
      gpu.matmul(g->t, ddy.t, kT, dx.t, kN, Tensor(), 1.0f, 1.0f, ws.workspace(), {});
    sync();
    const std::vector<float> a = y1.values(dt), b = y2.values(dt);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
    const std::vector<float> ga = g1.values(kF32), gb = g2.values(kF32);
    EXPECT_EQ(0, std::memcmp(ga.data(), gb.data(), ga.size() * 4));
    EXPECT_TRUE(std::all_of(ga.begin(), ga.end(), [](float v) { return std::isfinite(v); }));
  }
}

TEST(CudaMatmul, EmptyKAndBadShapes) {
  ZT_REQUIRE_GPU();
  CudaOps gpu;
  HostTensor a = HostTensor::random(kF32, {5, 0}, 700, 1.0f),
             b = HostTensor::random(kF32, {0, 3}, 701, 1.0f),
             c = HostTensor::random(kF32, {5, 3}, 702, 1.0f);
  DevBuf da(4), db(4);
  DevTensor dc(c);
  dc.buf.poison();
  DevBuf ws(gpu.matmul_workspace_bytes(dc.t, a.view(), kN, b.view(), kN));
  gpu.matmul(dc.t, da.tensor(kF32, {5, 0}), kN, db.tensor(kF32, {0, 3}), kN, Tensor(), 1.0f, 0.0f,
             ws.workspace(), {});
  sync();
  for (const float v : dc.values(kF32)) EXPECT_EQ(v, 0.0f);
  HostTensor bad = HostTensor::random(kF32, {4, 3}, 703, 1.0f);
  DevTensor dbad(bad);
  EXPECT_THROW(gpu.matmul(dc.t, dbad.t, kN, dbad.t, kN, Tensor(), 1.0f, 0.0f, ws.workspace(), {}),
               Error);
}

// ---- fused LM head + cross-entropy

struct CeData {
  int64_t T, H, V;
  HostTensor hidden, weight;
  std::vector<int32_t> targets;
  // Σ over target rows of H(softmax(logits)), in double from CPU logits (rounded to bf16 for
  // bf16 data, as both backends round them)
  double entropy_sum = 0;
};

// hidden [T, H] ~ N(0, 1), weight [V, H] ~ N(0, 4/H) (logits of standard deviation ~2); every
// `ignore_every`-th row (from row 1) has no target, every third row's target is its argmax, the
// others random. Checks that no target row is within 1e-4 of a tie that decides its argmax hit
// (so the hit count cannot depend on summation order).
CeData make_ce_data(int64_t T, int64_t H, int64_t V, DType dt, uint32_t seed, int ignore_every) {
  CeData d{T,
           H,
           V,
           HostTensor::random(dt, {T, H}, seed, 1.0f),
           HostTensor::random(dt, {V, H}, seed + 1, 2.0f / std::sqrt(static_cast<float>(H))),
           std::vector<int32_t>(static_cast<size_t>(T))};
  std::vector<float> h = d.hidden.values(), w = d.weight.values(), logits(T * V);
  CpuOps cpu;
  const Tensor lt = test::view(logits, {T, V}), ht = test::view(h, {T, H}),
               wt = test::view(w, {V, H});
  test::Workspace ws(cpu.matmul_workspace_bytes(lt, ht, kN, wt, kT));
  cpu.matmul(lt, ht, kN, wt, kT, Tensor(), 1.0f, 0.0f, ws.tensor(), {});
  std::mt19937 gen(seed + 2);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V - 1));
  for (int64_t t = 0; t < T; ++t) {
    const float* row = logits.data() + t * V;
    const int64_t am = std::max_element(row, row + V) - row;
    int32_t y = pick(gen);
    if (ignore_every > 0 && t % ignore_every == 1) {
      d.targets[t] = -100;
      continue;
    }
    d.targets[t] = t % 3 == 0 ? static_cast<int32_t>(am) : y;
    const int32_t tgt = d.targets[t];
    // Whether the target is the argmax must not hinge on rounding: the runner-up (to the argmax
    // when the target is the argmax, else the argmax to the target) is at least 1e-4 away.
    float runner_up = -std::numeric_limits<float>::infinity();
    const auto logit = [&](int64_t j) {
      return dt == kBF16 ? static_cast<double>(bf16_to_f32(f32_to_bf16(row[j]))) : static_cast<double>(row[j]);
    };
    double m = -std::numeric_limits<double>::infinity(), s = 0, sx = 0;
    for (int64_t j = 0; j < V; ++j) m = std::max(m, logit(j));
    for (int64_t j = 0; j < V; ++j) {
      if (j != am) runner_up = std::max(runner_up, row[j]);
      const double e = std::exp(logit(j) - m);
      s += e;
      sx += e * logit(j);
    }
    const float gap = tgt == am ? row[am] - runner_up : row[am] - row[tgt];
    EXPECT_GE(gap, 1e-4f) << "test data: row " << t << " has a near tie";
    d.entropy_sum += m + std::log(s) - sx / s;
  }
  return d;
}

struct CeResult {
  CeStats st;
  std::vector<float> dh, dw;
};

CeResult run_cpu(CeData& d, const std::vector<float>& dw0, float beta_dw, float scale) {
  CpuOpsOptions o;
  o.ce_chunk_rows = 64;
  CpuOps cpu(o);
  CeResult r;
  HostTensor dh;
  dh.dtype = d.hidden.dtype;
  dh.shape = {d.T, d.H};
  dh.set(std::vector<float>(d.T * d.H));
  r.dw = dw0;
  std::vector<int32_t> tg = d.targets;
  test::Workspace ws(cpu.linear_cross_entropy_workspace_bytes(d.hidden.view(), d.weight.view()));
  cpu.linear_cross_entropy_fwd_bwd(&r.st, dh.view(), test::view(r.dw, {d.V, d.H}), beta_dw,
                                   d.hidden.view(), d.weight.view(), test::view(tg, {d.T}), scale,
                                   ws.tensor(), {});
  r.dh = dh.values();
  return r;
}

// GPU run; grad = false: forward only (dh, dw stay empty).
CeResult run_gpu(CudaOps& gpu, CeData& d, const std::vector<int32_t>& targets,
                 const std::vector<float>& dw0, float beta_dw, float scale, bool grad = true) {
  DevTensor hid(d.hidden), wt(d.weight);
  DevBuf tg(targets.size() * 4), dh(d.T * d.H * dtype_size(d.hidden.dtype)), dw(dw0.size() * 4);
  tg.upload(targets.data(), targets.size() * 4);
  dh.poison();
  if (beta_dw == 0.0f)
    dw.poison();
  else
    dw.upload(dw0.data(), dw0.size() * 4);
  DevBuf ws(gpu.linear_cross_entropy_workspace_bytes(hid.t, wt.t));
  ws.poison();
  CeResult r;
  r.st.loss_sum = std::numeric_limits<double>::quiet_NaN();
  const Tensor tdh = grad ? dh.tensor(d.hidden.dtype, {d.T, d.H}) : Tensor();
  const Tensor tdw = grad ? dw.tensor(kF32, {d.V, d.H}) : Tensor();
  gpu.linear_cross_entropy_fwd_bwd(&r.st, tdh, tdw, beta_dw, hid.t, wt.t,
                                   tg.tensor(DType::kI32, {d.T}), scale, ws.workspace(), {});
  sync();
  if (!grad) return r;
  HostTensor h;
  h.dtype = d.hidden.dtype;
  if (h.dtype == kBF16) {
    h.b16.resize(d.T * d.H);
    dh.download(h.b16.data(), h.b16.size() * 2);
  } else {
    h.f32.resize(d.T * d.H);
    dh.download(h.f32.data(), h.f32.size() * 4);
  }
  r.dh = h.values();
  r.dw.resize(dw0.size());
  dw.download(r.dw.data(), r.dw.size() * 4);
  return r;
}

// Compares a GPU run with the CPU reference on the same data (bounds: file comment).
void check_ce(int64_t T, int64_t H, int64_t V, DType dt, int64_t chunk, float beta_dw,
              int ignore_every, uint32_t seed) {
  SCOPED_TRACE("T=" + std::to_string(T) + " H=" + std::to_string(H) + " V=" + std::to_string(V) +
               " " + std::string(dtype_name(dt)) + " chunk=" + std::to_string(chunk) +
               " beta_dw=" + std::to_string(beta_dw));
  CeData d = make_ce_data(T, H, V, dt, seed, ignore_every);
  const float scale = 0.37f;
  const std::vector<float> dw0 = randn(V * H, seed + 5, 0.1f);
  const CeResult want = run_cpu(d, dw0, beta_dw, scale);
  CudaOpsOptions o;
  o.ce_chunk_rows = chunk;
  CudaOps gpu(o);
  const CeResult got = run_gpu(gpu, d, d.targets, dw0, beta_dw, scale);
  EXPECT_EQ(got.st.count, want.st.count);
  EXPECT_EQ(got.st.correct, want.st.correct);
  // The argmax targets are hit (a third of the rows; in bf16 some tie with a lower index).
  EXPECT_GE(want.st.correct, dt == kBF16 ? want.st.count / 4 : want.st.count / 3);
  EXPECT_NEAR(got.st.loss_sum, want.st.loss_sum, 1e-5 * want.st.loss_sum);
  EXPECT_NEAR(got.st.entropy_sum, d.entropy_sum, 1e-5 * d.entropy_sum);
  EXPECT_NEAR(got.st.entropy_sum, want.st.entropy_sum, 1e-5 * d.entropy_sum);  // CpuOps' own
  const double tol = dt == kBF16 ? 2e-2 : 1e-5;
  if (dt == kBF16)
    expect_close_rows(got.dh, want.dh, T, H, tol, "dhidden");
  else  // K = V terms of both signs: a row's max can be far below its terms' scale
    expect_close(got.dh, want.dh, 1e-4, false, "dhidden");
  // Accumulated into dw0 (beta 1), a small row gradient is below dw0's rounding: compare against
  // the largest value then; alone (beta 0), every vocabulary row is checked at its own scale.
  if (beta_dw == 0.0f)
    expect_close_rows(got.dw, want.dw, V, H, tol, "dweight");
  else
    expect_close(got.dw, want.dw, tol, false, "dweight");
  for (int64_t t = 0; t < T; ++t) {
    if (d.targets[t] != -100) continue;
    for (int64_t j = 0; j < H; ++j) ASSERT_EQ(got.dh[t * H + j], 0.0f) << "row " << t;
  }
}

TEST(CudaCrossEntropy, F32SmallVocabChunksAndIgnoredRows) {
  ZT_REQUIRE_GPU();
  // 37 rows, every 4th without a target: 28 targets in chunks of 8 (8, 8, 8, 4).
  check_ce(37, 48, 1000, kF32, 8, 1.0f, 4, 800);
  check_ce(37, 48, 1000, kF32, 8, 0.0f, 4, 810);
  check_ce(37, 48, 1000, kF32, 2048, 0.0f, 4, 820);
  check_ce(1, 48, 1000, kF32, 8, 1.0f, 0, 830);  // T = 1
  check_ce(20, 40, 999, kF32, 7, 1.0f, 3, 840);  // V not a multiple of 4: the scalar row path
}

TEST(CudaCrossEntropy, Bf16SmallVocab) {
  ZT_REQUIRE_GPU();
  check_ce(37, 64, 1000, kBF16, 8, 1.0f, 4, 900);
  check_ce(37, 64, 1000, kBF16, 2048, 0.0f, 4, 910);
  check_ce(20, 40, 999, kBF16, 7, 0.0f, 3, 920);
}

TEST(CudaCrossEntropy, QwenVocab) {
  ZT_REQUIRE_GPU();
  const int64_t V = 151936;
  check_ce(300, 64, V, kF32, 2048, 0.0f, 5, 1000);  // one chunk
  check_ce(300, 64, V, kF32, 128, 1.0f, 5, 1010);   // 240 targets: chunks of 128 and 112
  check_ce(300, 64, V, kBF16, 128, 0.0f, 5, 1020);
}

// Gemma 3's vocabulary (262,144: 512 KiB a bf16 row, 1 MiB an f32 one), in bf16 with one chunk and
// in f32 accumulated over chunks of 16 rows, against the CPU reference.
TEST(CudaCrossEntropy, GemmaVocab) {
  ZT_REQUIRE_GPU();
  const int64_t V = 262144;
  check_ce(40, 32, V, kBF16, 2048, 0.0f, 5, 1030);
  check_ce(40, 32, V, kF32, 16, 1.0f, 5, 1040);
}

// The workspace budget (ce_budget_bytes): a budget above what the 2048-row cap needs and one of
// 704 rows' bytes (T = 700 rounded up to the 64-row quantum: the budget's rows are rounded down to
// the quantum, ce_rows_for_budget) give the same chunk, workspace and bits; a budget of 200 rows
// gives chunks of 192 (a multiple of 64), a smaller workspace, the same counts and values within
// the CPU-comparison bounds of the file comment (only the chunking differs).
TEST(CudaCrossEntropy, WorkspaceBudget) {
  ZT_REQUIRE_GPU();
  const int64_t T = 700, H = 64, V = 151936;
  for (const DType dt : {kF32, kBF16}) {
    SCOPED_TRACE(dtype_name(dt));
    CeData d = make_ce_data(T, H, V, dt, 1150, 5);  // 560 targets
    const std::vector<float> dw0 = randn(V * H, 1151, 0.1f);
    // Per row: the logits and the gathered hidden row (compute dtype) and the kCeDhParts fp32
    // input-gradient partials.
    const size_t row = dtype_size(dt) * static_cast<size_t>(V) +
                       static_cast<size_t>(H) * (dtype_size(dt) + 4 * kCeDhParts);
    const auto run = [&](size_t budget, size_t* ws) {
      CudaOpsOptions o;
      o.ce_budget_bytes = budget;
      CudaOps gpu(o);
      *ws = gpu.linear_cross_entropy_workspace_bytes(d.hidden.view(), d.weight.view());
      return run_gpu(gpu, d, d.targets, dw0, 1.0f, 0.5f);
    };
    size_t ws_big = 0, ws_exact = 0, ws_small = 0;
    const CeResult big = run(size_t{64} << 30, &ws_big);
    const CeResult exact = run(704 * row, &ws_exact);  // all 700 rows fit
    const CeResult small = run(200 * row, &ws_small);
    EXPECT_EQ(ws_big, ws_exact);
    // Every region stays a multiple of 256 bytes here (V, H multiples of 64): exact difference.
    EXPECT_EQ(ws_big - ws_small, (700 - 192) * row);
    EXPECT_EQ(big.st.count, 560);
    EXPECT_EQ(0, std::memcmp(&big.st.loss_sum, &exact.st.loss_sum, 8));
    EXPECT_EQ(0, std::memcmp(&big.st.entropy_sum, &exact.st.entropy_sum, 8));
    EXPECT_EQ(big.st.correct, exact.st.correct);
    EXPECT_EQ(0, std::memcmp(big.dh.data(), exact.dh.data(), big.dh.size() * 4));
    EXPECT_EQ(0, std::memcmp(big.dw.data(), exact.dw.data(), big.dw.size() * 4));
    EXPECT_EQ(small.st.count, big.st.count);
    EXPECT_EQ(small.st.correct, big.st.correct);
    EXPECT_NEAR(small.st.loss_sum, big.st.loss_sum, 1e-5 * big.st.loss_sum);
    EXPECT_NEAR(small.st.entropy_sum, big.st.entropy_sum, 1e-5 * big.st.entropy_sum);
    const double tol = dt == kBF16 ? 1e-2 : 1e-4;
    expect_close(small.dh, big.dh, tol, false, "dhidden");
    expect_close(small.dw, big.dw, tol, false, "dweight");
  }
}

TEST(CudaCrossEntropy, RowsWithoutTargets) {
  ZT_REQUIRE_GPU();
  const int64_t T = 9, H = 32, V = 100;
  CeData d = make_ce_data(T, H, V, kF32, 1100, 0);
  const std::vector<int32_t> none(T, -100);
  const std::vector<float> dw0 = randn(V * H, 1101);
  CudaOps gpu;
  for (const float beta : {0.0f, 0.5f, 1.0f}) {
    SCOPED_TRACE(beta);
    const CeResult r = run_gpu(gpu, d, none, dw0, beta, 1.0f);
    EXPECT_EQ(r.st.count, 0);
    EXPECT_EQ(r.st.correct, 0);
    EXPECT_EQ(r.st.loss_sum, 0.0);
    EXPECT_EQ(r.st.entropy_sum, 0.0);
    for (const float v : r.dh) ASSERT_EQ(v, 0.0f);
    for (size_t i = 0; i < dw0.size(); ++i) ASSERT_EQ(r.dw[i], beta * dw0[i]);
  }
}

TEST(CudaCrossEntropy, ForwardOnlyAndRepeatability) {
  ZT_REQUIRE_GPU();
  const int64_t T = 77, H = 64, V = 5000;
  for (const DType dt : {kF32, kBF16}) {
    SCOPED_TRACE(dtype_name(dt));
    CeData d = make_ce_data(T, H, V, dt, 1200, 4);
    const std::vector<float> dw0 = randn(V * H, 1201);
    CudaOpsOptions o;
    o.ce_chunk_rows = 16;
    CudaOps gpu(o);
    const CeResult a = run_gpu(gpu, d, d.targets, dw0, 1.0f, 0.5f);
    const CeResult b = run_gpu(gpu, d, d.targets, dw0, 1.0f, 0.5f);
    const CeResult f = run_gpu(gpu, d, d.targets, dw0, 1.0f, 0.5f, false);
    EXPECT_EQ(a.st.loss_sum, b.st.loss_sum);
    EXPECT_EQ(a.st.entropy_sum, b.st.entropy_sum);
    EXPECT_EQ(a.st.correct, b.st.correct);
    EXPECT_EQ(0, std::memcmp(a.dh.data(), b.dh.data(), a.dh.size() * 4));
    EXPECT_EQ(0, std::memcmp(a.dw.data(), b.dw.data(), a.dw.size() * 4));
    // The statistics do not depend on whether gradients are asked for.
    EXPECT_EQ(f.st.loss_sum, a.st.loss_sum);
    EXPECT_EQ(f.st.entropy_sum, a.st.entropy_sum);
    EXPECT_EQ(f.st.correct, a.st.correct);
    EXPECT_EQ(f.st.count, a.st.count);
  }
}

TEST(CudaCrossEntropy, OutOfRangeTargetThrows) {
  ZT_REQUIRE_GPU();
  const int64_t T = 10, H = 16, V = 37;
  CeData d = make_ce_data(T, H, V, kF32, 1300, 0);
  const std::vector<float> dw0(V * H);
  CudaOps gpu;
  for (const auto& [pos, value] : {std::pair<int, int32_t>{3, 37}, {7, -5}}) {
    std::vector<int32_t> bad = d.targets;
    bad[pos] = value;
    bad[8] = 99;  // a later bad one: the first is named
    try {
      run_gpu(gpu, d, bad, dw0, 0.0f, 1.0f);
      ADD_FAILURE() << "no error for target " << value;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "linear_cross_entropy: target " + std::to_string(value) +
                                           " at position " + std::to_string(pos) +
                                           " is outside [0, 37) and not -100");
    }
  }
  // The op stays usable afterwards.
  const CeResult r = run_gpu(gpu, d, d.targets, dw0, 0.0f, 1.0f);
  EXPECT_EQ(r.st.count, T);
}

}  // namespace
}  // namespace zt
