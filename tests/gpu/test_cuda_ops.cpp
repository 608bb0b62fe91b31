// CUDA ops against the CPU reference (CpuOps) on the same inputs: cast, add, SwiGLU and GeGLU
// (gelu_tanh), RoPE (full and partial rotary), embedding (forward, backward, scaled, out-of-
// vocabulary ids), RMSNorm (Llama, OLMo 2 and Gemma styles), bias_grad, sumsq. Outputs start as
// NaN bytes, so an element a kernel forgets shows. Bounds: ops whose per-element arithmetic is the
// CPU's exactly (cast, add, RoPE rotation, embedding, sumsq) are bitwise equal; fp32 ops with a
// reordered sum or CUDA's expf/sincosf within 1e-5 of the largest reference value; bf16 outputs
// within the stated bf16 ulps. Shapes cover the vector and scalar paths (H a multiple of 8 or not,
// misaligned views), T = 1, T not a multiple of any block size, and many short rows.
#include <gtest/gtest.h>

#include <random>
#include <utility>

#include "backend/op_test_util.h"
#include "core/error.h"
#include "gpu_test_util.h"

namespace zt::gputest {
namespace {

using test::randn;

const DType kFloats[] = {DType::kF32, DType::kBF16};

std::string label(const char* op, DType t, std::initializer_list<int64_t> dims, int64_t mis = 0) {
  std::string s = std::string(op) + " " + dtype_str(t) + " [";
  for (int64_t d : dims) s += std::to_string(d) + ",";
  return s + "] misalign " + std::to_string(mis);
}

TEST(CudaOps, NameAndDevice) {
  ZT_REQUIRE_GPU();
  EXPECT_EQ(cuda_ops().device(), Device::kCUDA);
  EXPECT_NE(cuda_ops().name().find("cuda:0 "), std::string::npos) << cuda_ops().name();
  EXPECT_NE(cuda_ops().name().find(" SMs"), std::string::npos) << cuda_ops().name();
}

TEST(CudaOps, ZeroAndHostCopies) {
  ZT_REQUIRE_GPU();
  CudaOps& ops = cuda_ops();
  const std::vector<float> v = randn(1001, 11);
  HostT h(DType::kF32, {1001}, v);
  DevT d(DType::kF32, {1001});
  ops.copy_from_host(d.view(), h.data(), test_stream());
  HostT back = HostT::empty(DType::kF32, {1001});
  ops.copy_to_host(back.data(), d.view(), test_stream());
  ops.synchronize(test_stream());
  expect_bitwise(back, h, "copy round trip");
  ops.zero(d.view(), test_stream());
  HostT z = d.download();
  for (int64_t i = 0; i < 1001; ++i) ASSERT_EQ(z.get(i), 0.0f);
  // A host tensor handed to a CUDA op is an error naming op and argument.
  EXPECT_EQ(error_of([&] { ops.zero(h.view(), test_stream()); }),
            "zero: x is not in device memory");
}

TEST(CudaOps, CastMatchesCpuBitwise) {
  ZT_REQUIRE_GPU();
  CpuOps cpu;
  uint32_t seed = 100;
  for (int64_t n : {1, 7, 8, 4099, 1000003})
    for (int64_t mis : {0, 1})
      for (DType from : kFloats)
        for (DType to : kFloats) {
          std::vector<float> v = randn(static_cast<size_t>(n), seed++, 3.0f);
          if (n > 8) {  // ties, specials
            v[0] = 1.0f + 0x1.0p-8f, v[1] = 1.0f + 3 * 0x1.0p-8f, v[2] = INFINITY;
            v[3] = -INFINITY, v[4] = NAN, v[5] = 3e38f, v[6] = -0.0f, v[7] = 1e-40f;
          }
          HostT src(from, {n}, v);
          HostT want = HostT::empty(to, {n});
          cpu.cast(want.view(), src.view(), {});
          DevT dsrc(src, mis), ddst(to, {n}, mis);
          cuda_ops().cast(ddst.view(), dsrc.view(), test_stream());
          expect_bitwise(ddst.download(), want,
                         label("cast", to, {n}, mis) + " from " + dtype_str(from));
        }
}

TEST(CudaOps, AddMatchesCpuBitwiseAndRunsInPlace) {
  ZT_REQUIRE_GPU();
  CpuOps cpu;
  uint32_t seed = 200;
  for (int64_t n : {1, 13, 65536 + 5})
    for (int64_t mis : {0, 1})
      for (DType t : kFloats) {
        HostT a(t, {n}, randn(n, seed++)), b(t, {n}, randn(n, seed++));
        HostT want = HostT::empty(t, {n});
        cpu.add(want.view(), a.view(), b.view(), {});
        DevT da(a, mis), db(b, mis), dout(t, {n}, mis);
        cuda_ops().add(dout.view(), da.view(), db.view(), test_stream());
        expect_bitwise(dout.download(), want, label("add", t, {n}, mis));
        cuda_ops().add(db.view(), da.view(), db.view(), test_stream());  // out aliases b
        expect_bitwise(db.download(), want, label("add in place", t, {n}, mis));
      }
}

TEST(CudaOps, SwigluMatchesCpu) {
  ZT_REQUIRE_GPU();
  CpuOps cpu;
  uint32_t seed = 300;
  for (int64_t n : {1, 9, 8192 * 3 + 5})
    for (int64_t mis : {0, 1})
      for (DType t : kFloats) {
        HostT gate(t, {n}, randn(n, seed++, 4.0f)), up(t, {n}, randn(n, seed++));
        HostT dout(t, {n}, randn(n, seed++));
        HostT out = HostT::empty(t, {n}), dg = HostT::empty(t, {n}), du = HostT::empty(t, {n});
        cpu.swiglu_fwd(out.view(), gate.view(), up.view(), {});
        cpu.swiglu_bwd(dg.view(), du.view(), dout.view(), gate.view(), up.view(), {});
        DevT dgate(gate, mis), dup(up, mis), ddout(dout, mis), dres(t, {n}, mis);
        cuda_ops().swiglu_fwd(dres.view(), dgate.view(), dup.view(), test_stream());
        // Backward in place: dgate over gate, dup over up (allowed by ops.h).
        cuda_ops().swiglu_bwd(dgate.view(), dup.view(), ddout.view(), dgate.view(), dup.view(),
                              test_stream());
        const std::string l = label("swiglu", t, {n}, mis);
        if (t == DType::kF32) {
          expect_close(dres.download(), out, 1e-5, l + " fwd");
          expect_close(dgate.download(), dg, 1e-5, l + " dgate");
          expect_close(dup.download(), du, 1e-5, l + " dup");
        } else {  // fp32 values within ~1e-6 relative, then one rounding each: 1 ulp
          expect_bf16_close(dres.download(), out, 1, 1e-6, l + " fwd");
          expect_bf16_close(dgate.download(), dg, 1, 1e-6, l + " dgate");
          expect_bf16_close(dup.download(), du, 1, 1e-6, l + " dup");
        }
      }
}

TEST(CudaOps, GegluMatchesCpu) {
  ZT_REQUIRE_GPU();
  CpuOps cpu;
  uint32_t seed = 350;
  const GluActivation act = GluActivation::kGeluTanh;
  for (int64_t n : {1, 9, 8192 * 3 + 5})
    for (int64_t mis : {0, 1})
      for (DType t : kFloats) {
        std::vector<float> g = randn(n, seed++, 4.0f);
        if (n > 8) g[0] = 0.0f, g[1] = 30.0f, g[2] = -30.0f, g[3] = 1e-3f;  // tanh saturated, 0
        HostT gate(t, {n}, g), up(t, {n}, randn(n, seed++));
        HostT dout(t, {n}, randn(n, seed++));
        HostT out = HostT::empty(t, {n}), dg = HostT::empty(t, {n}), du = HostT::empty(t, {n});
        cpu.swiglu_fwd(out.view(), gate.view(), up.view(), {}, act);
        cpu.swiglu_bwd(dg.view(), du.view(), dout.view(), gate.view(), up.view(), {}, act);
        DevT dgate(gate, mis), dup(up, mis), ddout(dout, mis), dres(t, {n}, mis);
        cuda_ops().swiglu_fwd(dres.view(), dgate.view(), dup.view(), test_stream(), act);
        cuda_ops().swiglu_bwd(dgate.view(), dup.view(), ddout.view(), dgate.view(), dup.view(),
                              test_stream(), act);
        const std::string l = label("geglu", t, {n}, mis);
        if (t == DType::kF32) {  // tanhf vs std::tanh and the order of the products: ~1e-7
          expect_close(dres.download(), out, 1e-5, l + " fwd");
          expect_close(dgate.download(), dg, 1e-5, l + " dgate");
          expect_close(dup.download(), du, 1e-5, l + " dup");
        } else {
          expect_bf16_close(dres.download(), out, 1, 1e-6, l + " fwd");
          expect_bf16_close(dgate.download(), dg, 1, 1e-6, l + " dgate");
          expect_bf16_close(dup.download(), du, 1, 1e-6, l + " dup");
        }
      }
}

TEST(CudaOps, RopePartialRotaryMatchesCpuBitwiseAndKeepsTheTail) {
  ZT_REQUIRE_GPU();
  CpuOps cpu;
  uint32_t seed = 450;
  // {rotated half R/2, head dim D}: Phi-3-style R = D/2 and 3D/4, the vector path (R/2 % 8 == 0
  // and D % 8 == 0), odd tails, and R = D (the full rotation through the same call).
  const std::pair<int64_t, int64_t> dims[] = {{16, 64}, {24, 64}, {8, 24},
                                              {3, 10},  {5, 11},  {32, 64}};
  for (auto [half, D] : dims)
    for (int64_t T : {1, 37, 515})
      for (DType t : kFloats)
        for (int64_t mis : {0, 1}) {
          const int64_t heads = T == 37 ? 7 : 4;
          HostT c(DType::kF32, {T, half}, randn(T * half, seed++));
          HostT s(DType::kF32, {T, half}, randn(T * half, seed++));
          HostT x(t, {T, heads, D}, randn(T * heads * D, seed++));
          HostT fwd = x, bwd = x;
          cpu.rope_fwd(fwd.view(), c.view(), s.view(), {});
          cpu.rope_bwd(bwd.view(), c.view(), s.view(), {});
          DevT dc(c), ds(s), dx(x, mis), dy(x, mis);
          cuda_ops().rope_fwd(dx.view(), dc.view(), ds.view(), test_stream());
          cuda_ops().rope_bwd(dy.view(), dc.view(), ds.view(), test_stream());
          const std::string l =
              label("rope partial", t, {T, heads, D}, mis) + " rotated " + std::to_string(2 * half);
          const HostT gf = dx.download(), gb = dy.download();
          expect_bitwise(gf, fwd, l + " fwd");
          expect_bitwise(gb, bwd, l + " bwd");
          // Elements [2·half, D) of every head pass unchanged (independent of the CPU).
          for (int64_t r = 0; r < T * heads; ++r)
            for (int64_t j = 2 * half; j < D; ++j) {
              ASSERT_EQ(gf.get(r * D + j), x.get(r * D + j)) << l << " tail row " << r;
              ASSERT_EQ(gb.get(r * D + j), x.get(r * D + j)) << l << " tail row " << r;
            }
        }
}

TEST(CudaOps, RopeTablesMatchCpuAndRotationIsBitwise) {
  ZT_REQUIRE_GPU();
  CpuOps cpu;
  uint32_t seed = 400;
  std::mt19937 gen(7);
  for (int64_t T : {1, 37, 2051})
    for (int64_t half : {64, 3, 12}) {
      std::vector<int32_t> pos(T);
      for (auto& p : pos) p = static_cast<int32_t>(gen() % 32768);
      std::vector<float> f(half);
      for (int64_t i = 0; i < half; ++i)
        f[i] = std::pow(1e6f, -static_cast<float>(i) / static_cast<float>(half));
      HostT hpos({T}, pos), hf(DType::kF32, {half}, f);
      HostT c = HostT::empty(DType::kF32, {T, half}), s = HostT::empty(DType::kF32, {T, half});
      const float scaling = half == 3 ? 0.7f : 1.0f;
      cpu.rope_tables(c.view(), s.view(), hpos.view(), hf.view(), scaling, {});
      DevT dpos(hpos), dfreq(hf), dc(DType::kF32, {T, half}), ds(DType::kF32, {T, half});
      cuda_ops().rope_tables(dc.view(), ds.view(), dpos.view(), dfreq.view(), scaling,
                             test_stream());
      expect_close(dc.download(), c, 1e-5, "rope cos T=" + std::to_string(T));
      expect_close(ds.download(), s, 1e-5, "rope sin T=" + std::to_string(T));
      // The rotation on the CPU's tables: the same fp32 operations, so the same bits.
      DevT dcc(c), dss(s);
      for (int64_t heads : {12, 2, 7})
        for (DType t : kFloats)
          for (int64_t mis : {0, 1}) {
            const int64_t D = 2 * half;
            HostT x(t, {T, heads, D}, randn(T * heads * D, seed++));
            HostT fwd = x, bwd = x;
            cpu.rope_fwd(fwd.view(), c.view(), s.view(), {});
            cpu.rope_bwd(bwd.view(), c.view(), s.view(), {});
            DevT dx(x, mis), dy(x, mis);
            cuda_ops().rope_fwd(dx.view(), dcc.view(), dss.view(), test_stream());
            cuda_ops().rope_bwd(dy.view(), dcc.view(), dss.view(), test_stream());
            expect_bitwise(dx.download(), fwd, label("rope_fwd", t, {T, heads, D}, mis));
            expect_bitwise(dy.download(), bwd, label("rope_bwd", t, {T, heads, D}, mis));
          }
    }
}

TEST(CudaOps, EmbeddingForwardMatchesCpuBitwise) {
  ZT_REQUIRE_GPU();
  CpuOps cpu;
  uint32_t seed = 500;
  std::mt19937 gen(8);
  const int64_t V = 1000;
  for (int64_t T : {1, 37, 4099})
    for (int64_t H : {1536, 70, 7})
      for (DType t : kFloats)
        for (int64_t mis : {0, 1}) {
          std::vector<int32_t> ids(T);
          for (auto& i : ids) i = static_cast<int32_t>(gen() % V);
          HostT table(t, {V, H}, randn(V * H, seed++)), hids({T}, ids);
          HostT want = HostT::empty(t, {T, H});
          cpu.embedding_fwd(want.view(), table.view(), hids.view(), {});
          DevT dtable(table, mis), dids(hids), dout(t, {T, H}, mis);
          cuda_ops().embedding_fwd(dout.view(), dtable.view(), dids.view(), test_stream());
          expect_bitwise(dout.download(), want, label("embedding_fwd", t, {T, H}, mis));
        }
}

// dtable after embedding_bwd on the CPU and the GPU, from the same start.
void check_embedding_bwd(int64_t V, int64_t H, const std::vector<int32_t>& ids, DType t, float beta,
                         uint32_t seed, int64_t mis) {
  CpuOps cpu;
  const int64_t T = static_cast<int64_t>(ids.size());
  HostT dout(t, {T, H}, randn(T * H, seed)), hids({T}, ids);
  HostT start(DType::kF32, {V, H}, randn(V * H, seed + 1));
  HostT want = start;
  cpu.embedding_bwd(want.view(), dout.view(), hids.view(), beta, {}, {});
  DevT ddout(dout, mis), dids(hids);
  // beta 0 must overwrite: start from NaN bytes then.
  DevT dtable = beta == 0.0f ? DevT(DType::kF32, {V, H}, mis) : DevT(start, mis);
  DevT ws(DType::kU8, {static_cast<int64_t>(cuda_ops().embedding_workspace_bytes(hids.view()))});
  cuda_ops().embedding_bwd(dtable.view(), ddout.view(), dids.view(), beta, ws.view(),
                           test_stream());
  expect_bitwise(dtable.download(), want,
                 label("embedding_bwd", t, {V, H, T}, mis) + " beta " + std::to_string(beta));
}

TEST(CudaOps, EmbeddingBackwardAddsRowsInTokenOrderBitwise) {
  ZT_REQUIRE_GPU();
  std::mt19937 gen(9);
  uint32_t seed = 600;
  for (int64_t V : {17, 5000})
    for (int64_t T : {1, 3001})
      for (int64_t H : {1536, 70, 5}) {
        std::vector<int32_t> ids(T);
        for (auto& i : ids) i = static_cast<int32_t>(gen() % V);  // V = 17: long runs per id
        if (T > 100)
          for (int k = 0; k < 300; ++k) ids[gen() % T] = 3;  // one id hundreds of times
        for (DType t : kFloats)
          for (float beta : {0.0f, 1.0f, 0.5f})
            check_embedding_bwd(V, H, ids, t, beta, seed++, (H == 1536 && beta == 1.0f) ? 1 : 0);
      }
}

// The Gemma embedding scale (√H rounded to the table's dtype, as HF's embed_scale): forward and
// backward are one fp32 product per element on both sides, so bitwise equal.
TEST(CudaOps, ScaledEmbeddingMatchesCpuBitwise) {
  ZT_REQUIRE_GPU();
  CpuOps cpu;
  uint32_t seed = 650;
  std::mt19937 gen(10);
  const int64_t V = 300;
  for (int64_t T : {1, 37, 2049})
    for (int64_t H : {1152, 70, 7})
      for (DType t : kFloats)
        for (int64_t mis : {0, 1}) {
          const float root = std::sqrt(static_cast<float>(H));
          const float scale = t == DType::kBF16 ? bf16_to_f32(f32_to_bf16(root)) : root;
          std::vector<int32_t> ids(T);
          for (auto& i : ids) i = static_cast<int32_t>(gen() % V);
          if (T > 100)
            for (int k = 0; k < 100; ++k) ids[gen() % T] = 5;  // a long run of one id
          HostT table(t, {V, H}, randn(V * H, seed++)), hids({T}, ids);
          HostT want = HostT::empty(t, {T, H});
          cpu.embedding_fwd(want.view(), table.view(), hids.view(), {}, scale);
          DevT dtable(table, mis), dids(hids), dout(t, {T, H}, mis);
          cuda_ops().embedding_fwd(dout.view(), dtable.view(), dids.view(), test_stream(), scale);
          const std::string l = label("embedding scaled", t, {T, H}, mis);
          expect_bitwise(dout.download(), want, l + " fwd");

          HostT g(t, {T, H}, randn(T * H, seed++));
          HostT start(DType::kF32, {V, H}, randn(V * H, seed++));
          HostT dwant = start;
          cpu.embedding_bwd(dwant.view(), g.view(), hids.view(), 1.0f, {}, {}, scale);
          DevT dg(g, mis), dtab(start, mis);
          DevT ws(DType::kU8,
                  {static_cast<int64_t>(cuda_ops().embedding_workspace_bytes(hids.view()))});
          cuda_ops().embedding_bwd(dtab.view(), dg.view(), dids.view(), 1.0f, ws.view(),
                                   test_stream(), scale);
          expect_bitwise(dtab.download(), dwant, l + " bwd");
        }
}

TEST(CudaOps, OutOfVocabularyIdIsReportedBySynchronize) {
  ZT_REQUIRE_GPU();
  CudaOps& ops = cuda_ops();
  const int64_t V = 100, H = 16, T = 12;
  std::vector<int32_t> ids(T, 4);
  ids[9] = -3, ids[5] = 100, ids[11] = 7000;  // the smallest position is reported
  HostT table(DType::kF32, {V, H}, randn(V * H, 700)), hids({T}, ids);
  DevT dtable(table), dids(hids), dout(DType::kF32, {T, H});
  ops.embedding_fwd(dout.view(), dtable.view(), dids.view(), test_stream());
  EXPECT_EQ(error_of([&] { ops.synchronize(test_stream()); }),
            "embedding_fwd: token id 100 at position 5 is outside the vocabulary [0, 100)");
  ops.synchronize(test_stream());  // the record was reset
  HostT out = dout.download();
  for (int64_t j = 0; j < H; ++j) {
    EXPECT_EQ(out.get(5 * H + j), 0.0f);  // bad rows are zeros, never a read outside the table
    EXPECT_EQ(out.get(9 * H + j), 0.0f);
    EXPECT_EQ(out.get(0 * H + j), table.get(4 * H + j));
  }
  // The backward skips and reports bad ids too; good rows are still summed.
  DevT dtab(DType::kF32, {V, H}),
      ws(DType::kU8, {int64_t(ops.embedding_workspace_bytes(hids.view()))});
  DevT g(HostT(DType::kF32, {T, H}, randn(T * H, 701)));
  ops.embedding_bwd(dtab.view(), g.view(), dids.view(), 0.0f, ws.view(), test_stream());
  EXPECT_EQ(error_of([&] { ops.synchronize(test_stream()); }),
            "embedding_bwd: token id 100 at position 5 is outside the vocabulary [0, 100)");
  ops.synchronize(test_stream());
}

TEST(CudaOps, RmsNormForwardMatchesCpu) {
  ZT_REQUIRE_GPU();
  CpuOps cpu;
  uint32_t seed = 800;
  for (int64_t T : {1, 37, 1031})
    for (int64_t H : {1536, 896, 37, 8})
      for (DType t : kFloats)
        for (int64_t mis : {0, 1}) {
          HostT x(t, {T, H}, randn(T * H, seed++, 2.0f)), w(t, {H}, randn(H, seed++));
          HostT y = HostT::empty(t, {T, H}), rstd = HostT::empty(DType::kF32, {T});
          cpu.rmsnorm_fwd(y.view(), rstd.view(), x.view(), w.view(), 1e-6f, {});
          DevT dx(x, mis), dw(w, mis), dy(t, {T, H}, mis), dr(DType::kF32, {T});
          cuda_ops().rmsnorm_fwd(dy.view(), dr.view(), dx.view(), dw.view(), 1e-6f, test_stream());
          const std::string l = label("rmsnorm_fwd", t, {T, H}, mis);
          expect_close(dr.download(), rstd, 1e-5, l + " rstd");
          if (t == DType::kF32)
            expect_close(dy.download(), y, 1e-5, l + " y");
          else  // bf16(x*r) may land one ulp apart (rstd's sum order), which |w| can make
                // 2 ulps of y, plus the final rounding of each side: 3 ulps
            expect_bf16_close(dy.download(), y, 3, 1e-6, l + " y");
        }
}

TEST(CudaOps, RmsNormBackwardMatchesCpu) {
  ZT_REQUIRE_GPU();
  CpuOps cpu;
  uint32_t seed = 900;
  for (int64_t T : {1, 37, 2053})
    for (int64_t H : {1536, 37, 24})
      for (DType t : kFloats)
        for (int variant = 0; variant < 3; ++variant) {
          // 0: overwrite dx, beta_dw 0; 1: accumulate dx, beta_dw 1; 2: dx aliases dy.
          const bool acc = variant == 1;
          const float beta = variant == 1 ? 1.0f : 0.0f;
          const int64_t mis = variant == 2 ? 1 : 0;
          HostT x(t, {T, H}, randn(T * H, seed++, 2.0f)), w(t, {H}, randn(H, seed++));
          HostT dy(t, {T, H}, randn(T * H, seed++)), dx0(t, {T, H}, randn(T * H, seed++));
          HostT dw0(DType::kF32, {H}, randn(H, seed++));
          HostT y = HostT::empty(t, {T, H}), rstd = HostT::empty(DType::kF32, {T});
          cpu.rmsnorm_fwd(y.view(), rstd.view(), x.view(), w.view(), 1e-6f, {});
          HostT dx = variant == 2 ? dy : dx0, dw = dw0;
          cpu.rmsnorm_bwd(dx.view(), acc, dw.view(), beta, variant == 2 ? dx.view() : dy.view(),
                          x.view(), w.view(), rstd.view(), {});
          DevT ddy(dy, mis), dxx(x, mis), dww(w, mis), dr(rstd);
          DevT ddx = acc ? DevT(dx0, mis) : DevT(t, {T, H}, mis);
          DevT ddw = beta == 1.0f ? DevT(dw0) : DevT(DType::kF32, {H});
          const Tensor dx_view = variant == 2 ? ddy.view() : ddx.view();
          cuda_ops().rmsnorm_bwd(dx_view, acc, ddw.view(), beta, ddy.view(), dxx.view(), dww.view(),
                                 dr.view(), test_stream());
          const std::string l =
              label("rmsnorm_bwd", t, {T, H}, mis) + " variant " + std::to_string(variant);
          const HostT got_dx = variant == 2 ? ddy.download() : ddx.download();
          // dw: the same fp32 terms (rstd is an input) summed in another fixed order.
          expect_close(ddw.download(), dw, 1e-5, l + " dw");
          if (t == DType::kF32)
            expect_close(got_dx, dx, 1e-5, l + " dx");
          else
            expect_bf16_close(got_dx, dx, 1, 1e-5, l + " dx");
        }
}

// The OLMo 2 (to_dtype(w·n)) and Gemma ((1 + w)·n) styles, forward and backward, at the bounds of
// the Llama-style tests above (the styles share the statistics and the sums; only per-element
// products differ).
TEST(CudaOps, RmsNormStylesMatchCpu) {
  ZT_REQUIRE_GPU();
  CpuOps cpu;
  uint32_t seed = 950;
  for (RmsNormStyle style : {RmsNormStyle::kOlmo2, RmsNormStyle::kGemma})
    for (int64_t T : {1, 37, 4111})
      for (int64_t H : {1536, 256, 37})
        for (DType t : kFloats)
          for (int64_t mis : {0, 1}) {
            const bool acc = mis == 1;  // accumulate dx and dw on the misaligned runs
            HostT x(t, {T, H}, randn(T * H, seed++, 2.0f)), w(t, {H}, randn(H, seed++, 0.5f));
            HostT dy(t, {T, H}, randn(T * H, seed++)), dx0(t, {T, H}, randn(T * H, seed++));
            HostT dw0(DType::kF32, {H}, randn(H, seed++));
            HostT y = HostT::empty(t, {T, H}), rstd = HostT::empty(DType::kF32, {T});
            cpu.rmsnorm_fwd(y.view(), rstd.view(), x.view(), w.view(), 1e-6f, {}, style);
            HostT dx = dx0, dw = dw0;
            cpu.rmsnorm_bwd(dx.view(), acc, dw.view(), acc ? 1.0f : 0.0f, dy.view(), x.view(),
                            w.view(), rstd.view(), {}, style);
            DevT dxx(x, mis), dww(w, mis), dyy(t, {T, H}, mis), dr(DType::kF32, {T});
            cuda_ops().rmsnorm_fwd(dyy.view(), dr.view(), dxx.view(), dww.view(), 1e-6f,
                                   test_stream(), style);
            const std::string l = label("rmsnorm style", t, {T, H}, mis) + " " +
                                  (style == RmsNormStyle::kGemma ? "gemma" : "olmo2");
            expect_close(dr.download(), rstd, 1e-5, l + " rstd");
            if (t == DType::kF32)
              expect_close(dyy.download(), y, 1e-5, l + " y");
            else
              expect_bf16_close(dyy.download(), y, 3, 1e-6, l + " y");
            // The backward on the CPU's rstd (an input), as in RmsNormBackwardMatchesCpu.
            DevT ddy(dy, mis), drr(rstd);
            DevT ddx = acc ? DevT(dx0, mis) : DevT(t, {T, H}, mis);
            DevT ddw = acc ? DevT(dw0) : DevT(DType::kF32, {H});
            cuda_ops().rmsnorm_bwd(ddx.view(), acc, ddw.view(), acc ? 1.0f : 0.0f, ddy.view(),
                                   dxx.view(), dww.view(), drr.view(), test_stream(), style);
            expect_close(ddw.download(), dw, 1e-5, l + " dw");
            if (t == DType::kF32)
              expect_close(ddx.download(), dx, 1e-5, l + " dx");
            else
              expect_bf16_close(ddx.download(), dx, 1, 1e-5, l + " dx");
          }
}

// The shapes cover cuda_colsum.cuh's mapping: M = 1 and 37 (one row range), 777, 1500, 8193 and
// 32771 (3, 5 and 8 ranges with clusters, not a multiple of anything); at M = 8193 and 32771 with
// clusters N = 1536 (64-column slices, none partial), 1544 and 520 (64- and 32-column slices, the
// last one partial); with fewer blocks (one range, or no clusters) the slices narrow to 16
// columns; 256, 24 and 8 (16-column slices), 7 and a misaligned view (the scalar path, 32 columns).
TEST(CudaOps, BiasGradMatchesCpuAndRepeatsBitwise) {
  ZT_REQUIRE_GPU();
  CpuOps cpu;
  uint32_t seed = 1000;
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int64_t M : {1, 37, 8193})
    for (int64_t N : {256, 1536, 24, 7}) shapes.emplace_back(M, N);
  shapes.insert(shapes.end(),
                {{8193, 1544}, {8193, 520}, {32771, 1536}, {777, 1536}, {1500, 520}, {1500, 8}});
  for (const auto& [M, N] : shapes)
    for (DType t : kFloats)
      for (float beta : {0.0f, 1.0f}) {
        HostT dy(t, {M, N}, randn(M * N, seed++)), db0(DType::kF32, {N}, randn(N, seed++));
        HostT want = db0;
        cpu.bias_grad(want.view(), dy.view(), beta, {});
        const int64_t mis = N == 24 && beta == 1.0f ? 1 : 0;  // N = 24, beta 0: a half slice
        DevT ddy(dy, mis);
        HostT first;
        for (int rep = 0; rep < 2; ++rep) {
          DevT db = beta == 0.0f ? DevT(DType::kF32, {N}) : DevT(db0);
          cuda_ops().bias_grad(db.view(), ddy.view(), beta, test_stream());
          HostT got = db.download();
          if (rep == 0) {
            expect_close(got, want, 1e-5, label("bias_grad", t, {M, N}, mis));
            first = got;
          } else {
            expect_bitwise(got, first, label("bias_grad repeat", t, {M, N}, mis));
          }
        }
      }
}

TEST(CudaOps, SumsqEqualsCpuBitwise) {
  ZT_REQUIRE_GPU();
  CpuOps cpu;
  uint32_t seed = 1100;
  const int64_t B = Ops::kSumsqBlock;
  for (int64_t n : {int64_t{0}, int64_t{1}, B - 1, B, B + 1, 3 * B + 77, int64_t{5000011}})
    for (DType t : kFloats)
      for (int64_t mis : {0, 1}) {
        HostT x(t, {n}, randn(static_cast<size_t>(n), seed++, 3.0f));
        test::Workspace cws(cpu.sumsq_workspace_bytes(x.view()));
        double want = -1;
        cpu.sumsq(&want, x.view(), cws.tensor(), {});
        DevT dx(x, mis);
        DevT ws(DType::kU8, {static_cast<int64_t>(cuda_ops().sumsq_workspace_bytes(dx.view()))});
        double got[2] = {-1, -1};
        for (double& g : got) {
          cuda_ops().sumsq(&g, dx.view(), ws.view(), test_stream());
          cuda_ops().synchronize(test_stream());
        }
        const std::string l = label("sumsq", t, {n}, mis);
        EXPECT_EQ(std::memcmp(&got[0], &want, 8), 0) << l << ": gpu " << got[0] << " cpu " << want;
        EXPECT_EQ(std::memcmp(&got[0], &got[1], 8), 0) << l << ": runs differ";
      }
}

TEST(CudaOps, ArgumentErrorsNameOpAndArgument) {
  ZT_REQUIRE_GPU();
  CudaOps& ops = cuda_ops();
  DevT x(DType::kF32, {4, 8}), w(DType::kBF16, {8}), y(DType::kF32, {4, 8}), r(DType::kF32, {4});
  EXPECT_EQ(error_of([&] {
              ops.rmsnorm_fwd(y.view(), r.view(), x.view(), w.view(), 1e-6f, test_stream());
            }),
            "rmsnorm_fwd: w has dtype bf16 but x has dtype f32; they must match");
  DevT small(DType::kU8, {8}), big(DType::kF32, {100000});
  double out = 0;
  const std::string e = error_of([&] { ops.sumsq(&out, big.view(), small.view(), test_stream()); });
  EXPECT_EQ(e.rfind("sumsq: workspace has 8 bytes, ", 0), 0u) << e;
  // A host tensor in a device op names the argument.
  HostT hx(DType::kF32, {4, 8}, std::vector<float>(32, 1.0f));
  EXPECT_EQ(error_of([&] {
              ops.rmsnorm_fwd(y.view(), r.view(), hx.view(), w.view(), 1e-6f, test_stream());
            }),
            "rmsnorm_fwd: x is not in device memory");
  // A negative sliding window (the CPU op's message).
  DevT q(DType::kF32, {4, 2, 8}), kv(DType::kF32, {4, 1, 8}), o(DType::kF32, {4, 2, 8}),
      lse(DType::kF32, {2, 4});
  const std::vector<int32_t> cu = {0, 4};
  DevT dcu(HostT({2}, cu));
  Varlen seqs;
  seqs.cu_seqlens = dcu.view();
  seqs.cu_host = cu;
  seqs.max_seqlen = 4;
  DevT aws(DType::kU8, {int64_t(ops.attention_workspace_bytes(q.view(), kv.view(), seqs))});
  EXPECT_EQ(error_of([&] {
              ops.attention_fwd(o.view(), lse.view(), q.view(), kv.view(), kv.view(), seqs, 1.0f,
                                aws.view(), test_stream(), -1);
            }),
            "attention_fwd: window is -1, expected 0 (none) or a positive number of keys");
}

}  // namespace
}  // namespace zt::gputest
