// CausalLM behaviour beyond the goldens: parameter layout and groups, the grads-ready hook,
// gradient accumulation, from-scratch initialisation, micro-batch validation, pool sizing errors,
// and export → reload.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "core/error.h"
#include "io/hf_export.h"
#include "model_test_util.h"

namespace zt {
namespace {

using test::Golden;
using test::TestModel;

TEST(ParamLayout, NamesGroupsAndContiguousGradRanges) {
  const Golden g("llama3");
  const ParamLayout lay(g.cfg);
  EXPECT_EQ(lay.num_params(), 29);
  EXPECT_EQ(lay.param(0).name, "model.embed_tokens.weight");
  EXPECT_EQ(lay.param(1).name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(lay.param(2).name, "model.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(lay.param(lay.layer(0).o.b).name, "model.layers.0.self_attn.o_proj.bias");
  EXPECT_EQ(lay.param(lay.num_params() - 1).name, "lm_head.weight");
  EXPECT_EQ(lay.param(lay.layer(1).k.w).shape, (std::vector<int64_t>{12, 48}));
  EXPECT_FALSE(lay.tied());
  EXPECT_EQ(lay.num_groups(), 4);
  for (int gi = 0; gi < lay.num_groups(); ++gi) {
    if (gi > 0) {
      EXPECT_EQ(lay.group_begin(gi), lay.group_end(gi - 1));
    }
    for (const ParamSpec& p : lay.params())
      if (p.group == gi) {
        EXPECT_GE(p.offset, lay.group_begin(gi));
        EXPECT_LE(p.offset + p.numel, lay.group_end(gi));
        EXPECT_EQ(p.offset % ParamLayout::kAlign, 0);
      }
  }
  EXPECT_TRUE(lay.param(lay.layer(0).mlp_in_norm).no_decay);
  EXPECT_FALSE(lay.param(lay.layer(0).gate.w).no_decay);
  const Golden t("qwen2_tied");
  const ParamLayout tl(t.cfg);
  EXPECT_TRUE(tl.tied());
  EXPECT_EQ(tl.lm_head(), tl.embed());
  EXPECT_EQ(tl.find("lm_head.weight"), -1);
  EXPECT_EQ(tl.layer(0).o.b, -1);  // qwen2: no o_proj bias
  EXPECT_GE(tl.layer(0).q.b, 0);
}

// An OwnedStorage that records each group's gradient as the model hands it back.
struct SnapshotStorage : GroupStorage {
  OwnedStorage own;
  const ParamLayout& lay;
  std::vector<int> order;
  std::vector<std::vector<float>> snapshots;
  SnapshotStorage(const ParamLayout& l, Ops& ops, MemoryResource& mem)
      : own(l, DType::kF32, ops, mem, {}), lay(l), snapshots(static_cast<size_t>(l.num_groups())) {}
  const void* weights(int g) override { return own.weights(g); }
  void release(int) override {}
  float* grads(int g) override { return own.grads(g); }
  void grads_ready(int g) override {
    order.push_back(g);
    const float* p = own.grad_base(g);
    snapshots[static_cast<size_t>(g)].assign(p, p + (lay.group_end(g) - lay.group_begin(g)));
  }
};

TEST(CausalLM, GradsReadyComesInBackwardOrderWithFinalGradients) {
  const Golden g("qwen2_tied");
  TestModel tm(g, DType::kF32, true);
  const ParamLayout lay(g.cfg);
  SnapshotStorage st(lay, tm.ops, tm.memory);
  CausalLM m(g.cfg, tm.ops, tm.memory, tm.model->options(), st);
  const Tensor w = st.own.all_weights();
  std::memcpy(w.data, tm.model->all_weights().data, w.nbytes());
  BackwardOptions bo;
  bo.grad_scale = 0.5f;
  m.forward_backward(g.packed.view(), bo);
  EXPECT_EQ(st.order, (std::vector<int>{3, 2, 1, 0}));
  for (int gi = 0; gi < lay.num_groups(); ++gi) {
    const float* p = st.own.grad_base(gi);
    ASSERT_EQ(0, std::memcmp(st.snapshots[gi].data(), p, st.snapshots[gi].size() * 4))
        << "group " << gi;
  }
  // The same gradients as the model owning its storage.
  tm.model->forward_backward(g.packed.view(), bo);
  EXPECT_EQ(0, std::memcmp(st.own.all_grads().data, tm.model->all_grads().data,
                           st.own.all_grads().nbytes()));
}

TEST(CausalLM, AccumulateAddsAndOverwriteReplaces) {
  const Golden g("qwen2_untied");
  TestModel tm(g, DType::kF32, false);
  BackwardOptions bo;
  bo.grad_scale = 0.25f;
  const auto mb = g.examples[2].view();
  tm.model->forward_backward(mb, bo);
  const auto once = tm.all_grads();
  EXPECT_GT(std::abs(once[100]) + std::abs(once[5000]), 0.0f);
  bo.accumulate = true;
  tm.model->forward_backward(mb, bo);
  const auto twice = tm.all_grads();
  // Accumulating rounds differently from computing then adding (BLAS and the embedding scatter
  // add into the existing values), so "twice" is 2·once to fp32 rounding, not bitwise.
  std::vector<float> doubled(once.size());
  for (size_t i = 0; i < once.size(); ++i) doubled[i] = 2 * once[i];
  for (int i = 0; i < tm.model->layout().num_params(); ++i) {
    const ParamSpec& p = tm.model->layout().param(i);
    const std::vector<float> a(twice.begin() + p.offset, twice.begin() + p.offset + p.numel),
        b(doubled.begin() + p.offset, doubled.begin() + p.offset + p.numel);
    EXPECT_LT(test::rel_err(a, b), 1e-6) << p.name;
    EXPECT_GT(*std::max_element(b.begin(), b.end()), 0.0f) << p.name;
  }
  bo.accumulate = false;
  tm.model->forward_backward(mb, bo);
  EXPECT_EQ(tm.all_grads(), once);
}

TEST(CausalLM, InitFromScratchIsSeededAndHasHfStatistics) {
  Golden g("qwen2_tied");
  g.cfg.pad_token_id = {5};
  CpuOps ops;
  HostMemory mem;
  ModelOptions o;
  o.max_tokens = 16;
  CausalLM a(g.cfg, ops, mem, o), b(g.cfg, ops, mem, o), c(g.cfg, ops, mem, o);
  a.init_from_scratch(42);
  b.init_from_scratch(42);
  c.init_from_scratch(43);
  const ParamLayout& lay = a.layout();
  bool differs = false;
  for (int i = 0; i < lay.num_params(); ++i) {
    const Tensor pa = a.param(i), pb = b.param(i), pc = c.param(i);
    ASSERT_EQ(0, std::memcmp(pa.data, pb.data, pa.nbytes())) << lay.param(i).name;
    differs |= std::memcmp(pa.data, pc.data, pa.nbytes()) != 0;
    const float* v = pa.as<float>();
    const int64_t n = pa.numel();
    const std::string& name = lay.param(i).name;
    if (name.ends_with(".bias")) {
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(v[j], 0.0f) << name;
    } else if (lay.param(i).no_decay) {
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(v[j], 1.0f) << name;
    } else {
      double s = 0, ss = 0;
      for (int64_t j = 0; j < n; ++j) s += v[j], ss += static_cast<double>(v[j]) * v[j];
      const double mean = s / n, sd = std::sqrt(ss / n - mean * mean);
      EXPECT_LT(std::abs(mean), 4 * 0.02 / std::sqrt(static_cast<double>(n))) << name;
      EXPECT_NEAR(sd, 0.02, 0.02 * 5 / std::sqrt(static_cast<double>(n))) << name;
    }
  }
  EXPECT_TRUE(differs);
  const float* emb = a.param(lay.embed()).as<float>();
  for (int64_t j = 0; j < g.cfg.hidden_size; ++j) EXPECT_EQ(emb[5 * g.cfg.hidden_size + j], 0.0f);
  EXPECT_NE(emb[4 * g.cfg.hidden_size], 0.0f);
  // bf16 weights are the fp32 initialisation rounded.
  o.dtype = DType::kBF16;
  CausalLM h(g.cfg, ops, mem, o);
  h.init_from_scratch(42);
  const Tensor pe = h.param(lay.embed());
  for (int64_t j = 0; j < pe.numel(); ++j)
    ASSERT_EQ(static_cast<const uint16_t*>(pe.data)[j], f32_to_bf16(emb[j])) << j;
}

TEST(CausalLM, MicroBatchValidationNamesTheProblem) {
  const Golden g("qwen2_tied");
  TestModel tm(g, DType::kF32, false, 64);
  const auto expect_error = [&](const PackedBatch& b, const std::string& msg) {
    try {
      tm.model->forward(b.view());
      ADD_FAILURE() << "no error, expected: " << msg;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), msg);
    }
  };
  PackedBatch b;
  b.add(std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{1, 300, 3});
  expect_error(b, "micro-batch: label 300 at position 1 is outside [0, 300) and not -100");
  PackedBatch c;
  c.add(std::vector<int32_t>{1, -2}, std::vector<int32_t>{1, 2});
  expect_error(c, "micro-batch: token id -2 at position 1 is outside the vocabulary [0, 300)");
  PackedBatch d;
  d.add(std::vector<int32_t>(65, 1), std::vector<int32_t>(65, 1));
  expect_error(d, "micro-batch: 65 tokens, more than the 64 the model was sized for (max_tokens)");
  PackedBatch e;
  e.add(std::vector<int32_t>{1, 2}, std::vector<int32_t>{1, 2});
  e.cu_seqlens.back() = 1;
  expect_error(e,
               "micro-batch: cu_seqlens must start at 0 and end at 2 tokens (got 2 entries, first "
               "0, last 1)");
}

TEST(CausalLM, ShiftedTargetsNeverCrossExamples) {
  PackedBatch b;
  b.add(std::vector<int32_t>{10, 11, 12}, std::vector<int32_t>{-100, 11, 12});
  b.add(std::vector<int32_t>{20, 21}, std::vector<int32_t>{20, 21});
  std::vector<int32_t> t(5);
  EXPECT_EQ(shift_targets(b.view(), t), 3);
  EXPECT_EQ(t, (std::vector<int32_t>{11, 12, -100, 21, -100}));
  EXPECT_EQ(count_targets(b.view()), 3);
  EXPECT_EQ(b.position_ids, (std::vector<int32_t>{0, 1, 2, 0, 1}));
  EXPECT_EQ(b.cu_seqlens, (std::vector<int32_t>{0, 3, 5}));
}

TEST(CausalLM, OutOfMemoryAtConstructionNamesThePool) {
  const Golden g("qwen2_tied");
  CpuOps ops;
  HostMemory small(100000);  // the 54000 fp32 parameters need ~216 KB
  ModelOptions o;
  o.max_tokens = 8;
  try {
    CausalLM m(g.cfg, ops, small, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory: pool 'parameters'"), std::string::npos)
        << e.what();
  }
}

TEST(CausalLM, ExportedWeightsReloadBitwise) {
  const Golden g("llama3");
  TestModel tm(g, DType::kF32, false, 8);
  const auto out = std::filesystem::path(::testing::TempDir()) / "zt_model_export";
  HfExportOptions eo;
  eo.dtype = DType::kF32;
  export_hf_model(out, g.cfg, tm.model->named_weights(), eo);
  const SafetensorsReader back(out);
  CpuOps ops;
  HostMemory mem;
  ModelOptions o;
  o.max_tokens = 8;
  CausalLM m2(load_model_config(out), ops, mem, o);
  m2.load_weights(back);
  for (int i = 0; i < m2.layout().num_params(); ++i)
    ASSERT_EQ(0, std::memcmp(m2.param(i).data, tm.model->param(i).data, m2.param(i).nbytes()))
        << m2.layout().param(i).name;
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace zt
