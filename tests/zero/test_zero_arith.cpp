// The engine's arithmetic on hand-made buffers (world size 1): the gradient norm, the clip
// coefficient, AdamW with per-tensor decay against optim::adamw_element, bf16 rounding, skip and
// non-finite handling, every stage and offload.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "optim/clip.h"
#include "optim/master_split.h"
#include "param/param_layout.h"
#include "zero/zero_engine.h"
#include "zero_test_util.h"

namespace zt::zero {
namespace {

// A "model" made of plain host vectors in ParamLayout offsets: its weights initialise the engine
// and are read back from it (engine.weights(g), as the model reads them); its gradients are
// written into the engine's gradient window group by group and handed back, as the model does.
struct FakeModel {
  ParamLayout layout{test::tiny_config(false)};
  DType dtype;
  std::vector<float> w32, grads;
  std::vector<uint16_t> w16;

  explicit FakeModel(DType dt) : dtype(dt) {
    const auto n = static_cast<size_t>(layout.total_elems());
    w32.assign(n, 0.0f);
    w16.assign(n, 0);
    grads.assign(n, 0.0f);
    std::mt19937 rng(7);
    for (const ParamSpec& p : layout.params())
      for (int64_t e = 0; e < p.numel; ++e) {
        const float x = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 997.0f;
        w32[static_cast<size_t>(p.offset + e)] = x;
        w16[static_cast<size_t>(p.offset + e)] = f32_to_bf16(x);
      }
  }
  Tensor flat() {
    void* w = dtype == DType::kBF16 ? static_cast<void*>(w16.data()) : w32.data();
    return Tensor(w, dtype, {layout.total_elems()});
  }
  // w32 / w16 ← the engine's current compute weights.
  void read(ZeroEngine& z) {
    const std::vector<uint8_t> b = test::read_weights(z, dtype);
    std::memcpy(dtype == DType::kBF16 ? static_cast<void*>(w16.data()) : w32.data(), b.data(),
                b.size());
  }
  // The weight the engine's master starts from (fp32 of the compute weight).
  float weight(size_t i) const { return dtype == DType::kBF16 ? bf16_to_f32(w16[i]) : w32[i]; }
  void set_grads(uint32_t seed, float scale) {
    std::mt19937 rng(seed);
    for (const ParamSpec& p : layout.params())
      for (int64_t e = 0; e < p.numel; ++e)
        grads[static_cast<size_t>(p.offset + e)] =
            scale * static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 1000.0f;
  }
  void reduce_all(ZeroEngine& z) {
    for (int g = layout.num_groups() - 1; g >= 0; --g) {
      const int64_t b = layout.group_begin(g), e = layout.group_end(g);
      std::memcpy(z.grads(g), grads.data() + b, static_cast<size_t>(e - b) * 4);
      z.grads_ready(g);
    }
  }
};

struct Config {
  int stage;
  bool offload;
  DType dtype;
};

std::vector<Config> all_configs() {
  std::vector<Config> out;
  for (DType dt : {DType::kF32, DType::kBF16})
    for (int stage = 0; stage <= 3; ++stage)
      for (bool off : {false, true}) out.push_back({stage, off, dt});
  return out;
}

std::string name(const Config& c) {
  return fmt::format("stage {} offload {} {}", c.stage, c.offload, dtype_name(c.dtype));
}

// Two AdamW steps (with clipping on the first, none on the second) against adamw_element.
TEST(ZeroArith, TwoStepsMatchAdamwElementForEveryStageAndOffload) {
  for (const Config& c : all_configs()) {
    SCOPED_TRACE(name(c));
    CpuOps ops;
    HostMemory mem;
    dist::SingleComm comm;
    FakeModel fm(c.dtype);
    ZeroEngine z(fm.layout, c.dtype, ops, comm, mem, mem, {c.stage, c.offload});
    const size_t n = static_cast<size_t>(fm.layout.total_elems());
    std::vector<float> p(n), m(n, 0.0f), v(n, 0.0f);
    for (size_t i = 0; i < n; ++i) p[i] = fm.weight(i);
    z.init_from_flat(fm.flat());
    for (int step = 1; step <= 2; ++step) {
      fm.set_grads(100 + static_cast<uint32_t>(step), step == 1 ? 1.0f : 1e-3f);
      // Micro-step 1 gets the gradient, micro-step 2 zero: the accumulated gradient is the first.
      fm.reduce_all(z);
      const std::vector<float> g = fm.grads;
      std::fill(fm.grads.begin(), fm.grads.end(), 0.0f);
      fm.reduce_all(z);
      double ss = 0.0;
      for (float x : g) ss += static_cast<double>(x) * x;
      StepArgs args;
      args.lr = 1e-2 / step;
      args.max_grad_norm = 1.0;
      args.adam.weight_decay = 0.1;
      const StepResult r = z.finish_step(args);
      EXPECT_TRUE(r.applied);
      EXPECT_EQ(r.adam_step, step);
      EXPECT_NEAR(r.grad_norm, std::sqrt(ss), 1e-12 * std::sqrt(ss));
      EXPECT_EQ(r.clip_coef, optim::clip_coefficient(r.grad_norm, 1.0));
      if (step == 1) {
        EXPECT_LT(r.clip_coef, 0.1f);  // ‖g‖ ≈ 100: clipped
      } else {
        EXPECT_EQ(r.clip_coef, 1.0f);  // ‖g‖ ≈ 0.1: not clipped
      }
      optim::AdamWParams nd = args.adam;
      nd.weight_decay = 0.0;
      const optim::AdamWStep sd = optim::adamw_step(args.adam, args.lr, step, r.clip_coef);
      const optim::AdamWStep sn = optim::adamw_step(nd, args.lr, step, r.clip_coef);
      for (const ParamSpec& ps : fm.layout.params())
        for (int64_t e = 0; e < ps.numel; ++e) {
          const auto i = static_cast<size_t>(ps.offset + e);
          optim::adamw_element(ps.no_decay ? sn : sd, p[i], m[i], v[i], g[i]);
        }
      fm.read(z);
      const std::vector<float> master = z.full_master_weights();
      size_t bad = 0;
      for (const ParamSpec& ps : fm.layout.params())
        for (int64_t e = 0; e < ps.numel; ++e) {
          const auto i = static_cast<size_t>(ps.offset + e);
          uint32_t a, b;
          std::memcpy(&a, &master[i], 4);
          std::memcpy(&b, &p[i], 4);
          const bool weight_ok = c.dtype == DType::kBF16 ? fm.w16[i] == optim::master_hi(p[i])
                                                         : std::memcmp(&fm.w32[i], &p[i], 4) == 0;
          if ((a != b || !weight_ok) && bad++ < 3)
            ADD_FAILURE() << ps.name << "[" << e << "] step " << step << ": master " << master[i]
                          << " model " << fm.weight(i) << " expected " << p[i];
        }
      EXPECT_EQ(bad, 0u);
    }
  }
}

TEST(ZeroArith, WeightDecayOnlyWhereHfAppliesIt) {
  CpuOps ops;
  HostMemory mem;
  dist::SingleComm comm;
  FakeModel fm(DType::kF32);
  std::fill(fm.w32.begin(), fm.w32.end(), 2.0f);
  ZeroEngine z(fm.layout, DType::kF32, ops, comm, mem, mem, {1, false});
  z.init_from_flat(fm.flat());
  fm.reduce_all(z);  // zero gradient: Adam moves nothing, only the decay acts
  StepArgs args;
  args.lr = 0.1;
  args.adam.weight_decay = 0.5;
  const StepResult r = z.finish_step(args);
  fm.read(z);
  EXPECT_EQ(r.grad_norm, 0.0);
  const float decayed = 2.0f * static_cast<float>(1.0 - 0.1 * 0.5);  // p · fp32(1 − lr·wd) = 1.9
  const auto at = [&](const char* nm) {
    return fm.w32[static_cast<size_t>(fm.layout.param(fm.layout.find(nm)).offset)];
  };
  EXPECT_EQ(at("model.embed_tokens.weight"), decayed);
  EXPECT_EQ(at("model.layers.0.self_attn.q_proj.weight"), decayed);
  EXPECT_EQ(at("lm_head.weight"), decayed);
  EXPECT_EQ(at("model.layers.0.self_attn.q_proj.bias"), 2.0f);
  EXPECT_EQ(at("model.layers.1.input_layernorm.weight"), 2.0f);
  EXPECT_EQ(at("model.layers.1.post_attention_layernorm.weight"), 2.0f);
  EXPECT_EQ(at("model.norm.weight"), 2.0f);
  int decay_tensors = 0;
  for (const ParamSpec& ps : fm.layout.params()) {
    const float want = ps.no_decay ? 2.0f : decayed;
    decay_tensors += !ps.no_decay;
    for (int64_t e = 0; e < ps.numel; ++e)
      ASSERT_EQ(fm.w32[static_cast<size_t>(ps.offset + e)], want) << ps.name << "[" << e << "]";
  }
  EXPECT_EQ(decay_tensors, 1 + 2 * 7 + 1);  // embed, 7 matrices per layer, lm_head
}

TEST(ZeroArith, DiscardStepForgetsTheGradientOnly) {
  CpuOps ops;
  HostMemory mem;
  dist::SingleComm comm;
  FakeModel a(DType::kF32), b(DType::kF32);
  ZeroEngine za(a.layout, DType::kF32, ops, comm, mem, mem, {1, false});
  ZeroEngine zb(b.layout, DType::kF32, ops, comm, mem, mem, {1, false});
  za.init_from_flat(a.flat());
  zb.init_from_flat(b.flat());
  a.set_grads(5, 3.0f);
  a.reduce_all(za);
  za.discard_step();
  EXPECT_EQ(za.adam_step(), 0);
  a.read(za);
  b.read(zb);
  EXPECT_EQ(a.w32, b.w32);
  a.set_grads(6, 1.0f);
  b.set_grads(6, 1.0f);
  a.reduce_all(za);
  b.reduce_all(zb);
  StepArgs args;
  args.lr = 1e-3;
  const StepResult ra = za.finish_step(args), rb = zb.finish_step(args);
  a.read(za);
  b.read(zb);
  EXPECT_EQ(ra.grad_norm, rb.grad_norm);
  EXPECT_EQ(ra.adam_step, 1);
  EXPECT_EQ(test::bits(a.w32), test::bits(b.w32));
  EXPECT_NE(a.w32, FakeModel(DType::kF32).w32);  // the step did move the weights
}

TEST(ZeroArith, NonFiniteNormIsReportedAndCanBeSkipped) {
  CpuOps ops;
  HostMemory mem;
  dist::SingleComm comm;
  FakeModel fm(DType::kF32);
  ZeroEngine z(fm.layout, DType::kF32, ops, comm, mem, mem, {2, true});
  z.init_from_flat(fm.flat());
  const std::vector<float> before = fm.w32;
  fm.set_grads(9, 1.0f);
  fm.grads[static_cast<size_t>(fm.layout.param(3).offset + 5)] = std::nanf("");
  fm.reduce_all(z);
  StepArgs args;
  args.lr = 1e-3;
  args.skip_nonfinite = true;
  const StepResult skipped = z.finish_step(args);
  EXPECT_TRUE(std::isnan(skipped.grad_norm));
  EXPECT_FALSE(skipped.applied);
  EXPECT_EQ(skipped.adam_step, 0);
  fm.read(z);
  EXPECT_EQ(test::bits(fm.w32), test::bits(before));
  // Without skip_nonfinite the update is applied, as HF does: NaN weights.
  fm.reduce_all(z);
  args.skip_nonfinite = false;
  const StepResult applied = z.finish_step(args);
  EXPECT_TRUE(applied.applied);
  EXPECT_EQ(applied.adam_step, 1);
  fm.read(z);
  EXPECT_TRUE(std::isnan(fm.w32[0]));
}

TEST(ZeroArith, MisuseIsAnErrorWithAClearMessage) {
  CpuOps ops;
  HostMemory mem;
  dist::SingleComm comm;
  FakeModel fm(DType::kF32);
  const auto message = [](const auto& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([&] {
              ZeroEngine(fm.layout, DType::kF32, ops, comm, mem, mem, {5, false});
            }),
            "zero: stage 5 is not supported (expected 0, 1, 2 or 3)");
  ZeroEngine z(fm.layout, DType::kF32, ops, comm, mem, mem, {1, false});
  EXPECT_EQ(message([&] { z.reduce_group(0); }),
            "zero: reduce_group before init_from_flat() or load_state()");
  EXPECT_EQ(message([&] { z.weights(0); }),
            "zero: weights before init_from_flat() or load_state()");
  z.init_from_flat(fm.flat());
  EXPECT_EQ(message([&] { z.reduce_group(4); }),
            "zero: reduce_group(4): group out of range [0, 4)");
  EXPECT_EQ(message([&] { z.grad_norm(); }),
            "zero: grad_norm: the groups were reduced [0, 0, 0, 0] times in this step (expected "
            "the same count >= 1 for every group: one reduction per micro-step)");
  z.reduce_group(3);
  EXPECT_EQ(message([&] { z.grad_norm(); }),
            "zero: grad_norm: the groups were reduced [0, 0, 0, 1] times in this step (expected "
            "the same count >= 1 for every group: one reduction per micro-step)");
  EXPECT_EQ(message([&] { z.save_state(::testing::TempDir()); }),
            "zero: save_state in the middle of an optimizer step (group 3 has a reduced gradient; "
            "call finish_step or discard_step first)");
  z.reduce_group(2);
  z.reduce_group(1);
  z.reduce_group(0);
  z.grad_norm();
  EXPECT_EQ(message([&] { z.reduce_group(3); }),
            "zero: reduce_group(3) after grad_norm() in the same optimizer step");
  EXPECT_EQ(message([&] { z.weights(4); }), "zero: weights(4): group out of range [0, 4)");
  std::vector<float> small(8);
  EXPECT_EQ(message([&] { z.init_from_flat(Tensor(small.data(), DType::kF32, {8})); }),
            fmt::format("zero: init_from_flat: expected a flat f32 tensor of {} elements, got [8] "
                        "f32",
                        fm.layout.total_elems()));
  EXPECT_EQ(message([&] {
              ZeroEngine(fm.layout, DType::kI32, ops, comm, mem, mem, {1, false});
            }),
            "zero: compute dtype i32 is not supported (expected f32 or bf16)");
}

}  // namespace
}  // namespace zt::zero
