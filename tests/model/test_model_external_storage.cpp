// CausalLM with a caller's GroupStorage (param/group_storage.h): per-group weights and gradients
// in separate buffers give the resident model's loss and gradients bit for bit; the storage is
// called in the documented order; a ZeRO-3-like rotation of two weight slots and one gradient slot
// (poisoned with NaN when released) still matches; flat-buffer initialisation, loading and named
// views; the errors of a storage that gives nothing and of the flat-buffer overloads.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "core/error.h"
#include "model_test_util.h"

namespace zt {
namespace {

using test::Golden;
using test::TestModel;

// 64-byte aligned host bytes (the arenas' alignment), zero-filled.
class HostBuf {
 public:
  explicit HostBuf(size_t bytes = 0) : n_(bytes) {
    p_ = static_cast<std::byte*>(::operator new (std::max<size_t>(n_, 64), std::align_val_t{64}));
    std::memset(p_, 0, std::max<size_t>(n_, 64));
  }
  ~HostBuf() { ::operator delete (p_, std::align_val_t{64}); }
  HostBuf(HostBuf&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; }
  HostBuf(const HostBuf&) = delete;
  HostBuf& operator=(const HostBuf&) = delete;
  std::byte* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  std::byte* p_;
  size_t n_;
};

size_t group_bytes(const ParamLayout& lay, int g, DType dt) {
  return static_cast<size_t>(lay.group_end(g) - lay.group_begin(g)) * dtype_size(dt);
}

// Sets every parameter element of group g (not the alignment padding) of fp32 `base` to NaN.
void poison_params(const ParamLayout& lay, int g, float* base) {
  for (const ParamSpec& p : lay.params())
    if (p.group == g)
      std::fill_n(base + (p.offset - lay.group_begin(g)), p.numel,
                  std::numeric_limits<float>::quiet_NaN());
}

void expect_same_stats(const CeStats& a, const CeStats& b) {
  EXPECT_EQ(a.loss_sum, b.loss_sum);
  EXPECT_EQ(a.entropy_sum, b.entropy_sum);
  EXPECT_EQ(a.correct, b.correct);
  EXPECT_EQ(a.count, b.count);
}

// Each group's weights (copied from `from`) and gradients in a buffer of its own. null_weights /
// null_grads: the group whose weights / gradient buffer it does not give (-1: none).
struct SplitStorage : GroupStorage {
  std::vector<HostBuf> w, g;
  int null_weights = -1, null_grads = -1;
  explicit SplitStorage(const CausalLM& from) {
    const ParamLayout& lay = from.layout();
    for (int gi = 0; gi < lay.num_groups(); ++gi) {
      w.emplace_back(group_bytes(lay, gi, from.options().dtype));
      g.emplace_back(group_bytes(lay, gi, DType::kF32));
      std::memcpy(w.back().data(), from.group_weights(gi).data, w.back().size());
    }
  }
  const void* weights(int gi) override {
    return gi == null_weights ? nullptr : w[static_cast<size_t>(gi)].data();
  }
  void release(int) override {}
  float* grads(int gi) override {
    return gi == null_grads ? nullptr : reinterpret_cast<float*>(g[static_cast<size_t>(gi)].data());
  }
  void grads_ready(int) override {}
};

// A model of `from`'s config and options whose parameters are in a SplitStorage.
struct ExternalModel {
  CpuOps ops;
  HostMemory memory;
  SplitStorage storage;
  std::unique_ptr<CausalLM> model;
  explicit ExternalModel(const CausalLM& from) : storage(from) {
    model = std::make_unique<CausalLM>(from.config(), ops, memory, from.options(), storage);
  }
};

struct StorageCase {
  const char* golden;
  DType dtype;
  bool checkpointing;
  friend void PrintTo(const StorageCase& c, std::ostream* os) {
    *os << c.golden << " " << dtype_name(c.dtype) << (c.checkpointing ? " checkpointing" : "");
  }
};

class ExternalStorage : public ::testing::TestWithParam<StorageCase> {};

TEST_P(ExternalStorage, LossGradsAndLogitsMatchTheResidentModelBitwise) {
  const StorageCase c = GetParam();
  const Golden gd(c.golden);
  TestModel res(gd, c.dtype, c.checkpointing);
  ExternalModel ext(*res.model);
  CausalLM& m = *ext.model;
  EXPECT_EQ(m.memory().params, 0u);
  EXPECT_EQ(m.memory().grads, 0u);
  EXPECT_EQ(m.memory().activations, res.model->memory().activations);
  BackwardOptions bo;
  bo.grad_scale = 1.0f / static_cast<float>(gd.targets());
  for (const bool accumulate : {false, true}) {
    bo.accumulate = accumulate;
    const CeStats a = res.model->forward_backward(gd.packed.view(), bo);
    const CeStats b = m.forward_backward(gd.packed.view(), bo);
    expect_same_stats(b, a);
    EXPECT_GT(a.loss_sum, 0.0);
    for (int gi = 0; gi < m.layout().num_groups(); ++gi) {
      const Tensor want = res.model->group_grads(gi);
      ASSERT_EQ(ext.storage.g[static_cast<size_t>(gi)].size(), want.nbytes());
      EXPECT_EQ(
          0, std::memcmp(ext.storage.g[static_cast<size_t>(gi)].data(), want.data, want.nbytes()))
          << m.group_name(gi) << " accumulate " << accumulate;
    }
  }
  const ParamLayout& lay = m.layout();
  for (int i = 0; i < lay.num_params(); ++i) {
    const ParamSpec& ps = lay.param(i);
    const auto* got =
        reinterpret_cast<const float*>(ext.storage.g[static_cast<size_t>(ps.group)].data()) +
        (ps.offset - lay.group_begin(ps.group));
    ASSERT_EQ(0, std::memcmp(got, res.model->grad(i).data, res.model->grad(i).nbytes())) << ps.name;
    EXPECT_EQ(m.grad(i).data, nullptr) << ps.name;  // handed back: no view between passes
  }
  // Eval forward and logits (the lm_head read through its group).
  expect_same_stats(m.forward(gd.examples[1].view()), res.model->forward(gd.examples[1].view()));
  const int64_t V = gd.cfg.vocab_size, n = gd.examples[1].view().num_tokens();
  std::vector<float> la(static_cast<size_t>(n * V)), lb(la.size());
  res.model->logits(0, n, la);
  m.logits(0, n, lb);
  EXPECT_EQ(la, lb);
}

INSTANTIATE_TEST_SUITE_P(Tiny, ExternalStorage,
                         ::testing::Values(StorageCase{"qwen2_tied", DType::kF32, false},
                                           StorageCase{"qwen2_tied", DType::kF32, true},
                                           StorageCase{"llama3", DType::kF32, false},
                                           StorageCase{"llama3", DType::kF32, true},
                                           StorageCase{"qwen2_untied", DType::kBF16, true}),
                         [](const auto& info) {
                           return std::string(info.param.golden) +
                                  (info.param.dtype == DType::kBF16 ? "_bf16" : "") +
                                  (info.param.checkpointing ? "_ckpt" : "");
                         });

// Records "a<g>" (weights), "r<g>" (release), "g<g>" (grads) and "ready<g>" (grads_ready) in
// call order, forwarding to a SplitStorage. (fmt, not "a" + std::to_string(g): gcc 12 warns on
// that inlined concatenation, a -Wrestrict false positive.)
struct RecordingStorage : GroupStorage {
  SplitStorage inner;
  std::vector<std::string> ev;
  explicit RecordingStorage(const CausalLM& from) : inner(from) {}
  const void* weights(int g) override {
    ev.push_back(fmt::format("a{}", g));
    return inner.weights(g);
  }
  void release(int g) override { ev.push_back(fmt::format("r{}", g)); }
  float* grads(int g) override {
    ev.push_back(fmt::format("g{}", g));
    return inner.grads(g);
  }
  void grads_ready(int g) override { ev.push_back(fmt::format("ready{}", g)); }
};

using Events = std::vector<std::string>;

TEST(GroupStorage, IsCalledInTheDocumentedOrder) {
  for (const char* name : {"llama3", "qwen2_tied"}) {
    const Golden gd(name);
    for (const bool ckpt : {false, true}) {
      SCOPED_TRACE(std::string(name) + (ckpt ? " checkpointing" : ""));
      TestModel tm(gd, DType::kF32, ckpt);
      RecordingStorage rec(*tm.model);
      CpuOps ops;
      HostMemory mem;
      CausalLM m(gd.cfg, ops, mem, tm.model->options(), rec);
      const bool tied = m.layout().tied();
      // 2 layers: groups 0 (embedding), 1, 2 (layers), 3 (final norm [+ lm_head]).
      m.forward(gd.examples[0].view());
      EXPECT_EQ(rec.ev, (Events{"a0", "a1", "r1", "a2", "r2", "a3", "r3", "r0"}));
      rec.ev.clear();
      m.forward_backward(gd.examples[0].view(), {});
      // The weight and readiness calls, then the gradient-buffer calls alone.
      Events weights_ready, grads;
      for (const std::string& e : rec.ev) (e[0] == 'g' ? grads : weights_ready).push_back(e);
      EXPECT_EQ(weights_ready, (Events{"a0", "a1", "r1", "a2", "r2", "a3", "ready3", "r3", "a2",
                                       "ready2", "r2", "a1", "ready1", "r1", "ready0", "r0"}));
      EXPECT_EQ(grads,
                tied ? (Events{"g3", "g0", "g2", "g1", "g0"}) : (Events{"g3", "g2", "g1", "g0"}));
      rec.ev.clear();
      std::vector<float> out(static_cast<size_t>(gd.cfg.vocab_size));
      m.logits(0, 1, out);
      const std::string lm = tied ? "0" : "3";
      EXPECT_EQ(rec.ev, (Events{"a" + lm, "r" + lm}));
    }
  }
}

// ZeRO-3 simulation: the embedding and head groups live in the full buffers for good; every layer
// group's weights are copied into one of two shared slots when asked for (slot g % 2) and the slot
// is poisoned with NaN on release; all layer groups share one gradient slot, copied out to a full
// buffer on grads_ready and then poisoned. 5 layers, so the slots rotate with an odd count.
struct Stage3Case {
  const char* golden;
  bool checkpointing;
  friend void PrintTo(const Stage3Case& c, std::ostream* os) {
    *os << c.golden << (c.checkpointing ? " checkpointing" : "");
  }
};

struct SlotStorage : GroupStorage {
  const ParamLayout& lay;
  float *fw, *fg;  // the full weights and gradients (fp32, flat)
  size_t max_layer;
  HostBuf wslot[2], gslot;
  int owner[2] = {-1, -1};
  int acquires = 0;
  SlotStorage(const ParamLayout& l, float* w, float* g, size_t max_layer_bytes)
      : lay(l),
        fw(w),
        fg(g),
        max_layer(max_layer_bytes),
        wslot{HostBuf(max_layer_bytes), HostBuf(max_layer_bytes)},
        gslot(max_layer_bytes) {
    for (HostBuf& sl : wslot) poison(sl);
  }
  bool is_layer(int g) const { return g != 0 && g != lay.group_head(); }
  void poison(HostBuf& b) const {
    std::fill_n(reinterpret_cast<float*>(b.data()), max_layer / 4,
                std::numeric_limits<float>::quiet_NaN());
  }
  const void* weights(int g) override {
    ++acquires;
    if (!is_layer(g)) return fw + lay.group_begin(g);
    int& own = owner[g % 2];
    EXPECT_EQ(own, -1) << "slot " << g % 2 << " still holds group " << own;
    own = g;
    std::memcpy(wslot[g % 2].data(), fw + lay.group_begin(g), group_bytes(lay, g, DType::kF32));
    return wslot[g % 2].data();
  }
  void release(int g) override {
    if (!is_layer(g)) return;
    EXPECT_EQ(owner[g % 2], g);
    owner[g % 2] = -1;
    poison(wslot[g % 2]);
  }
  float* grads(int g) override {
    return is_layer(g) ? reinterpret_cast<float*>(gslot.data()) : fg + lay.group_begin(g);
  }
  void grads_ready(int g) override {
    if (!is_layer(g)) return;
    auto* slot = reinterpret_cast<float*>(gslot.data());
    std::memcpy(fg + lay.group_begin(g), slot, group_bytes(lay, g, DType::kF32));
    poison_params(lay, g, slot);
  }
};

class Stage3Simulation : public ::testing::TestWithParam<Stage3Case> {};

TEST_P(Stage3Simulation, TwoWeightSlotsAndOneGradSlotMatchTheResidentModel) {
  const Stage3Case c = GetParam();
  Golden gd(c.golden);
  gd.cfg.num_hidden_layers = 5;
  CpuOps ops;
  HostMemory mem;
  ModelOptions o;
  o.max_tokens = gd.packed.view().num_tokens();
  o.checkpointing = c.checkpointing;
  CausalLM res(gd.cfg, ops, mem, o);
  res.init_from_scratch(7);
  const ParamLayout lay(gd.cfg);
  const int head = lay.group_head();
  ASSERT_EQ(lay.num_groups(), 7);

  // The full weights (host flat, as the engine's checkpoint copy) and the full gradients.
  HostBuf full_w(static_cast<size_t>(lay.total_elems()) * 4),
      full_g(static_cast<size_t>(lay.total_elems()) * 4);
  const Tensor flat(full_w.data(), DType::kF32, {lay.total_elems()});
  auto* fw = reinterpret_cast<float*>(full_w.data());
  auto* fg = reinterpret_cast<float*>(full_g.data());
  size_t max_layer = 0;
  for (int l = 0; l < lay.num_layers(); ++l)
    max_layer = std::max(max_layer, group_bytes(lay, ParamLayout::group_of_layer(l), DType::kF32));
  SlotStorage st(lay, fw, fg, max_layer);
  CausalLM m(gd.cfg, ops, mem, o, st);
  m.init_from_scratch(7, flat);
  BackwardOptions bo;
  bo.grad_scale = 1.0f / static_cast<float>(gd.targets());
  const CeStats want = res.forward_backward(gd.packed.view(), bo);
  const CeStats got = m.forward_backward(gd.packed.view(), bo);
  expect_same_stats(got, want);
  EXPECT_GT(want.loss_sum, 0.0);
  EXPECT_EQ(st.acquires, 2 + 2 * lay.num_layers());
  EXPECT_EQ(st.owner[0], -1);
  EXPECT_EQ(st.owner[1], -1);
  const Tensor rg = res.all_grads();
  for (int g = 0; g < lay.num_groups(); ++g)
    EXPECT_EQ(0, std::memcmp(fg + lay.group_begin(g), rg.as<float>() + lay.group_begin(g),
                             group_bytes(lay, g, DType::kF32)))
        << m.group_name(g);
  EXPECT_NE(head, 0);
  // The eval forward through the same slots.
  expect_same_stats(m.forward(gd.examples[0].view()), res.forward(gd.examples[0].view()));
}

INSTANTIATE_TEST_SUITE_P(Tiny, Stage3Simulation,
                         ::testing::Values(Stage3Case{"qwen2_tied", false},
                                           Stage3Case{"qwen2_tied", true},
                                           Stage3Case{"llama3", false}, Stage3Case{"llama3", true}),
                         [](const auto& info) {
                           return std::string(info.param.golden) +
                                  (info.param.checkpointing ? "_ckpt" : "");
                         });

TEST(FlatWeights, InitLoadAndNamedViewsMatchTheOwnBuffer) {
  Golden gd("qwen2_tied");
  gd.cfg.pad_token_id = {5};
  for (const DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dt));
    CpuOps ops;
    HostMemory mem;
    ModelOptions o;
    o.dtype = dt;
    o.max_tokens = 8;
    CausalLM res(gd.cfg, ops, mem, o);
    res.init_from_scratch(42);
    const ParamLayout lay(gd.cfg);
    OwnedStorage other(lay, dt, ops, mem, {});  // a caller's storage: m has no weights of its own
    CausalLM m(gd.cfg, ops, mem, o, other);
    const int64_t n = m.layout().total_elems();
    const size_t bytes = static_cast<size_t>(n) * dtype_size(dt);
    HostBuf buf(bytes);
    const Tensor flat(buf.data(), dt, {n});
    m.init_from_scratch(42, flat);
    EXPECT_EQ(0, std::memcmp(buf.data(), res.all_weights().data, bytes));
    // Loading a checkpoint into a host flat buffer = loading into the own weights.
    std::memset(buf.data(), 0, bytes);
    res.load_weights(*gd.weights);
    m.load_weights(*gd.weights, flat);
    EXPECT_EQ(0, std::memcmp(buf.data(), res.all_weights().data, bytes));
    // Named views into the flat buffer: HF names, shapes and offsets of the own ones.
    const auto own = res.named_weights(), ext = m.named_weights(flat);
    ASSERT_EQ(own.size(), ext.size());
    for (size_t i = 0; i < own.size(); ++i) {
      EXPECT_EQ(ext[i].name, own[i].name);
      EXPECT_EQ(ext[i].shape, own[i].shape);
      const size_t off =
          static_cast<size_t>(m.layout().param(static_cast<int>(i)).offset) * dtype_size(dt);
      EXPECT_EQ(ext[i].data, static_cast<const void*>(buf.data() + off));
    }
  }
}

void expect_error(const std::function<void()>& f, const std::string& msg) {
  try {
    f();
    ADD_FAILURE() << "no error, expected: " << msg;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), msg);
  }
}

TEST(ExternalStorageErrors, NameTheGroupOrWhatWasExpected) {
  const Golden gd("llama3");
  TestModel res(gd, DType::kF32, false);
  ExternalModel ext(*res.model);
  CausalLM& m = *ext.model;
  const auto mb = gd.examples[0].view();
  ext.storage.null_weights = 2;
  expect_error([&] { m.forward(mb); },
               "model: group 2 (model.layers.1): the storage gave no weights");
  ext.storage.null_weights = -1;
  expect_same_stats(m.forward(mb), res.model->forward(mb));
  ext.storage.null_grads = 3;
  expect_error([&] { m.forward_backward(mb, {}); },
               "model: group 3 (model.norm + lm_head): the storage gave no gradient buffer");
  ext.storage.null_grads = 0;
  expect_error([&] { m.forward_backward(mb, {}); },
               "model: group 0 (model.embed_tokens): the storage gave no gradient buffer");
  ext.storage.null_grads = -1;
  m.forward_backward(mb, {});  // a pass that ends holds no view (one that throws stops where it is)
  EXPECT_EQ(m.grad(0).data, nullptr);
  EXPECT_EQ(m.param(0).data, nullptr);

  const std::string caller =
      " needs the model's own storage (this model uses a caller's GroupStorage)";
  expect_error([&] { m.all_grads(); }, "model: all_grads()" + caller);
  expect_error([&] { m.zero_grads(); }, "model: zero_grads()" + caller);
  expect_error([&] { m.all_weights(); }, "model: all_weights()" + caller);
  expect_error([&] { m.group_weights(2); }, "model: group_weights()" + caller);
  expect_error([&] { m.group_grads(2); }, "model: group_grads()" + caller);
  expect_error([&] { m.init_from_scratch(1); },
               "model.init_from_scratch: the model has no weights of its own (it uses a caller's "
               "GroupStorage); use init_from_scratch(seed, flat)");
  expect_error([&] { m.load_weights(*gd.weights); },
               "model.load_weights: the model has no weights of its own (it uses a caller's "
               "GroupStorage); use load_weights(reader, flat)");
  expect_error([&] { m.named_weights(); },
               "model.named_weights: the model has no weights of its own (it uses a caller's "
               "GroupStorage); use named_weights(flat)");

  // Flat buffers of the wrong size, dtype or place.
  const int64_t n = m.layout().total_elems();
  HostBuf buf(static_cast<size_t>(n) * 4);
  const std::string want = "the flat weight buffer must be f32 [" + std::to_string(n) +
                           "] (layout().total_elems()), got ";
  expect_error([&] { m.init_from_scratch(1, Tensor(buf.data(), DType::kF32, {n - 1})); },
               "model.init_from_scratch: " + want + "f32 with 1 dims and " + std::to_string(n - 1) +
                   " elements");
  expect_error(
      [&] { m.load_weights(*gd.weights, Tensor(buf.data(), DType::kBF16, {n})); },
      "model.load_weights: " + want + "bf16 with 1 dims and " + std::to_string(n) + " elements");
  expect_error(
      [&] {
        m.named_weights(Tensor(buf.data(), DType::kF32, {1, n}));
      },
      "model.named_weights: " + want + "f32 with 2 dims and " + std::to_string(n) + " elements");
  expect_error([&] { m.named_weights(Tensor(buf.data(), DType::kF32, {n}, Device::kCUDA)); },
               "model.named_weights: the flat weight buffer must be in host memory");
  expect_error([&] { m.init_from_scratch(1, Tensor(buf.data(), DType::kF32, {n}, Device::kCUDA)); },
               "model.init_from_scratch: the flat weight buffer must be in host memory or on the "
               "model's device");
}

}  // namespace
}  // namespace zt
