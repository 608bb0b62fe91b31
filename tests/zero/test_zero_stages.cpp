// A tiny Qwen2 trained through the engine with one rank: stage / offload invariance, the tied
// embedding counted once in the norm, checkpoint round trips across stages, memory per stage.
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <bit>
#include <cmath>
#include <tuple>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/zt_test_util.h"
#include "model/causal_lm.h"
#include "optim/master_split.h"
#include "zero_test_util.h"

namespace zt::zero {
namespace {

using test::bits;
using test::load_and_save_as;
using test::RunResult;
using test::RunSpec;
using test::ShapeComm;

// A fresh directory under the test temp dir, unique to this process, removed at scope exit.
struct ScopedDir {
  std::string path;
  explicit ScopedDir(const std::string& name)
      : path(fmt::format("{}/{}_{}", ::testing::TempDir(), name, getpid())) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScopedDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void expect_same(const RunResult& a, const RunResult& b) {
  EXPECT_EQ(bits(a.losses), bits(b.losses));
  EXPECT_EQ(bits(a.norms), bits(b.norms));
  EXPECT_EQ(bits(a.eval_losses), bits(b.eval_losses));
  EXPECT_EQ(bits(a.master), bits(b.master));
  EXPECT_TRUE(a.weights == b.weights) << "compute weights differ";
  EXPECT_EQ(a.adam_step, b.adam_step);
}

TEST(ZeroStages, AllStagesAndOffloadAreBitwiseEqual) {
  dist::SingleComm comm;
  for (int accum : {1, 4})
    for (DType dt : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(fmt::format("accum {} {}", accum, dtype_name(dt)));
      RunSpec spec;
      spec.accum = accum;
      spec.dtype = dt;
      spec.tied = dt == DType::kBF16;
      const RunResult ref = run_training(comm, spec);
      ASSERT_EQ(ref.losses.size(), 3u);
      EXPECT_EQ(ref.adam_step, 3);
      for (int k = 0; k < 3; ++k) {
        EXPECT_GT(ref.losses[static_cast<size_t>(k)], 3.0);  // ≈ ln 97 = 4.57 for a fresh model
        EXPECT_LT(ref.losses[static_cast<size_t>(k)], 6.0);
        EXPECT_GT(ref.norms[static_cast<size_t>(k)], 0.5);  // so max_grad_norm 0.5 clips
        EXPECT_LT(ref.clip_coefs[static_cast<size_t>(k)], 1.0f);
      }
      EXPECT_NE(bits(ref.master), bits(ref.initial_master));
      for (int stage = 0; stage <= 3; ++stage)
        // none, host accumulation, device accumulation (delivered in one piece, and in pieces
        // of 100 elements that the host AdamW waits for one by one)
        for (int off = 0; off < 4; ++off) {
          if (stage == 1 && off == 0) continue;
          SCOPED_TRACE(fmt::format("stage {} offload {}", stage, off));
          RunSpec s = spec;
          s.stage = stage;
          s.offload = off > 0;
          s.host_accum = off == 1;
          s.delivery_elems = off == 3 ? 100 : 0;
          expect_same(run_training(comm, s), ref);
        }
    }
}

// An embedding larger than a layer (reduced in chunks), through the gradient window and the stage-3
// layer slots, changes nothing across stages and offload.
TEST(ZeroStages, WindowedStorageAndChunkedReductionAreBitwiseEqual) {
  dist::SingleComm comm;
  for (bool tied : {false, true}) {
    RunSpec spec;
    spec.accum = 3;
    spec.vocab = 701;  // embedding 28040 elements > a layer's group
    spec.tied = tied;
    spec.dtype = tied ? DType::kBF16 : DType::kF32;
    const RunResult ref = run_training(comm, spec);
    for (int stage = 0; stage <= 3; ++stage)
      for (bool off : {false, true}) {
        SCOPED_TRACE(fmt::format("tied {} stage {} offload {}", tied, stage, off));
        RunSpec s = spec;
        s.stage = stage;
        s.offload = off;
        expect_same(run_training(comm, s), ref);
      }
  }
}

// The global norm is the norm over distinct tensors: a tied embedding (one tensor used twice)
// counts once.
TEST(ZeroStages, TiedEmbeddingCountsOnceInTheNorm) {
  CpuOps ops;
  HostMemory mem;
  dist::SingleComm comm;
  ModelOptions mo;
  mo.max_tokens = 48;
  // The reference gradients from a model that owns its storage; the same model on the engine.
  CausalLM model(test::tiny_config(true), ops, mem, mo);
  model.init_from_scratch(77);
  ASSERT_TRUE(model.layout().tied());
  ZeroEngine z(model.layout(), DType::kF32, ops, comm, mem, mem, {3, false});
  CausalLM on_engine(test::tiny_config(true), ops, mem, mo, z);
  z.init_from_flat(model.all_weights());
  const PackedBatch b = test::make_micro_batch(0, 0, 97);
  BackwardOptions bo;
  bo.grad_scale = 1.0f / static_cast<float>(count_targets(b.view()));
  model.forward_backward(b.view(), bo);
  on_engine.forward_backward(b.view(), bo);
  double distinct = 0.0, embed = 0.0;
  for (int i = 0; i < model.layout().num_params(); ++i) {
    const Tensor g = model.grad(i);
    double s = 0.0;
    for (int64_t e = 0; e < g.numel(); ++e)
      s += static_cast<double>(g.as<float>()[e]) * g.as<float>()[e];
    distinct += s;
    if (i == model.layout().embed()) embed = s;
  }
  ASSERT_GT(embed, 1e-3 * distinct);  // the embedding gradient is a sizeable part of the total
  const double norm = z.grad_norm();
  EXPECT_NEAR(norm, std::sqrt(distinct), 1e-12 * norm);
  EXPECT_GT(std::abs(norm - std::sqrt(distinct + embed)), 1e-4 * norm);
  z.discard_step();
}

// Also in bf16, where the device master is split (optim/master_split.h): saved joined, loaded
// split.
TEST(ZeroStages, SaveLoadRoundTripAcrossStages) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dt));
    dist::SingleComm comm;
    const ScopedDir d1("zero_state_w1");
    const std::string& dir = d1.path;
    const ScopedDir d0("zero_state_w1_stage0");
    const std::string& dir0 = d0.path;
    RunSpec spec;
    spec.accum = 2;
    spec.dtype = dt;
    const RunResult full = run_training(comm, spec);  // steps 0, 1, 2 in one go
    RunSpec first = spec;
    first.steps = 2;
    first.save_dir = dir;
    const RunResult part = run_training(comm, first);
    EXPECT_EQ(part.adam_step, 2);
    // The same state saved under stage 0 with offload is the same file, byte for byte.
    first.stage = 0;
    first.offload = true;
    first.save_dir = dir0;
    run_training(comm, first);
    const std::string bytes = read_file(ZeroEngine::state_path(dir, 0));
    EXPECT_EQ(bytes.size(),
              64 +
                  3 * 4 *
                      static_cast<size_t>(
                          ShardLayout(ParamLayout(test::tiny_config(false)), 1).shard_elems()) +
                  8);
    EXPECT_EQ(bytes.substr(0, 8), "ZTZERO01");
    EXPECT_TRUE(bytes == read_file(ZeroEngine::state_path(dir0, 0)));
    // Load (into a model initialised differently) under every stage and finish step 2.
    for (int stage = 0; stage <= 3; ++stage)
      for (bool off : {false, true}) {
        SCOPED_TRACE(fmt::format("resume under stage {} offload {}", stage, off));
        RunSpec rest = spec;
        rest.stage = stage;
        rest.offload = off;
        rest.first_step = 2;
        rest.load_dir = dir;
        rest.init_seed = 999;
        const RunResult r = run_training(comm, rest);
        EXPECT_EQ(bits(r.initial_master), bits(part.master));
        ASSERT_EQ(r.losses.size(), 1u);
        EXPECT_EQ(bits(r.losses)[0], bits(full.losses)[2]);
        EXPECT_EQ(bits(r.norms)[0], bits(full.norms)[2]);
        EXPECT_EQ(bits(r.master), bits(full.master));
        EXPECT_TRUE(r.weights == full.weights);
        EXPECT_EQ(r.adam_step, 3);
      }
  }
}

// A bf16 checkpoint whose master weights all sit exactly on a bf16 rounding tie (low half 0x8000),
// resumed with the master split on the device and with it in host memory (offload): the compute
// weights are the ties-away rounding on both sides, and the runs stay bitwise equal (ties are
// otherwise rare: about one element in 2^16 per update). Were one side rounding ties to even, the
// first step's loss would already differ.
TEST(ZeroStages, TiedRoundingIsTheSameSplitAndOffloaded) {
  dist::SingleComm comm;
  const ScopedDir d("zero_state_ties");
  RunSpec spec;
  spec.dtype = DType::kBF16;
  spec.accum = 2;
  RunSpec first = spec;
  first.steps = 1;
  first.save_dir = d.path;
  run_training(comm, first);
  // Plant the ties in the saved master (the data elements: every non-zero one) and re-sign it.
  const std::string path = ZeroEngine::state_path(d.path, 0).string();
  std::string bytes = read_file(path);
  const int64_t S = ShardLayout(ParamLayout(test::tiny_config(false)), 1).shard_elems();
  ASSERT_EQ(bytes.size(), 64 + 12 * static_cast<size_t>(S) + 8);
  std::vector<float> planted(static_cast<size_t>(S));
  size_t ties = 0;
  for (int64_t i = 0; i < S; ++i) {
    uint32_t u;
    std::memcpy(&u, bytes.data() + 64 + 4 * i, 4);
    if (u != 0) u = (u & 0xffff0000u) | 0x8000u, ++ties;
    std::memcpy(bytes.data() + 64 + 4 * i, &u, 4);
    std::memcpy(&planted[static_cast<size_t>(i)], &u, 4);
  }
  ASSERT_GT(ties, 1000u);
  const uint64_t digest = XXH3_64bits(bytes.data() + 64, 12 * static_cast<size_t>(S));
  std::memcpy(bytes.data() + 64 + 12 * S, &digest, 8);
  write_file_atomic(path, bytes);
  std::vector<RunResult> runs;
  for (const auto& [stage, off, host_accum] :
       {std::tuple{1, false, false}, std::tuple{1, true, true}, std::tuple{0, true, false},
        std::tuple{3, false, false}}) {
    SCOPED_TRACE(fmt::format("stage {} offload {} host accumulation {}", stage, off, host_accum));
    RunSpec rest = spec;
    rest.stage = stage;
    rest.offload = off;
    rest.host_accum = host_accum;
    rest.first_step = 1;
    rest.load_dir = d.path;
    rest.init_seed = 777;
    runs.push_back(run_training(comm, rest));
    // The loaded master is the planted one, bit for bit, whichever way it is stored.
    size_t found = 0;
    for (float x : runs.back().initial_master)
      found += (std::bit_cast<uint32_t>(x) & 0xffffu) == 0x8000u;
    EXPECT_EQ(found, ties);
    EXPECT_EQ(bits(runs.back().master), bits(runs.front().master));
    EXPECT_TRUE(runs.back().weights == runs.front().weights);
    EXPECT_EQ(bits(runs.back().losses), bits(runs.front().losses));
  }
}

TEST(ZeroStages, LoadRejectsAnotherModelOrACorruptFile) {
  CpuOps ops;
  HostMemory mem;
  dist::SingleComm comm;
  const ScopedDir d("zero_state_bad");
  const std::string& dir = d.path;
  RunSpec spec;
  spec.steps = 1;
  spec.save_dir = dir;
  run_training(comm, spec);
  const fs::path file = ZeroEngine::state_path(dir, 0);
  EXPECT_EQ(file.filename(), "zero_state_rank00000.bin");
  const ParamLayout tied(test::tiny_config(true));
  ZeroEngine zt(tied, DType::kF32, ops, comm, mem, mem, {1, false});
  const uint64_t want = ShardLayout(tied, 1).hash();
  const uint64_t got = ShardLayout(ParamLayout(test::tiny_config(false)), 1).hash();
  try {
    zt.load_state(dir);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("{}: ZeRO state layout hash {:016x} does not match this model's {:016x} "
                          "(different tensors or shapes)",
                          file.string(), got, want));
  }
  std::string bytes = read_file(file);
  bytes[100] = static_cast<char>(bytes[100] ^ 0x40);
  write_file_atomic(file, bytes);
  ZeroEngine z(ParamLayout(test::tiny_config(false)), DType::kF32, ops, comm, mem, mem, {1, false});
  try {
    z.load_state(dir);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with(file.string() + ": ZeRO state checksum "))
        << e.what();
    EXPECT_TRUE(std::string(e.what()).ends_with("): the file is corrupt")) << e.what();
  }
}

// A checkpoint of one world size loads under another (re-sharding): 1 → 3 ranks (stage 3) → 2
// ranks (stage 0, offload) → 1 rank gives back rank 0's file byte for byte; every rank's shards of
// the 3-rank state hold exactly the saved master weights (padding 0); and a run resumed from the
// 3-rank state on one rank is bitwise the uninterrupted run.
TEST(ZeroStages, StateReshardsToAnotherWorldSize) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dt));
    dist::SingleComm one;
    const ScopedDir d1("reshard_w1"), d3("reshard_w3"), d2("reshard_w2"), back("reshard_back");
    RunSpec spec;
    spec.accum = 2;
    spec.dtype = dt;
    const RunResult full = run_training(one, spec);
    RunSpec first = spec;
    first.steps = 2;
    first.save_dir = d1.path;
    const RunResult part = run_training(one, first);
    load_and_save_as(d1.path, d3.path, 3, 3, false, dt);
    load_and_save_as(d3.path, d2.path, 2, 0, true, dt);
    load_and_save_as(d2.path, back.path, 1, 1, false, dt);
    EXPECT_TRUE(read_file(ZeroEngine::state_path(back.path, 0)) ==
                read_file(ZeroEngine::state_path(d1.path, 0)));
    ASSERT_FALSE(fs::exists(ZeroEngine::state_path(d2.path, 2)));
    // The 3-rank files: header W 3, rank r, step 2; rank r's shard of tensor i holds elements
    // [r·S_i, (r+1)·S_i) of the tensor.
    const ShardLayout L3(ParamLayout(test::tiny_config(false)), 3);
    int64_t checked = 0;
    for (int r = 0; r < 3; ++r) {
      const std::string bytes = read_file(ZeroEngine::state_path(d3.path, r));
      ASSERT_EQ(bytes.size(), 64 + 12 * static_cast<size_t>(L3.shard_elems()) + 8);
      uint32_t w = 0, rank = 0;
      int64_t step = 0;
      std::memcpy(&w, bytes.data() + 12, 4);
      std::memcpy(&rank, bytes.data() + 16, 4);
      std::memcpy(&step, bytes.data() + 40, 8);
      EXPECT_EQ(w, 3u);
      EXPECT_EQ(rank, static_cast<uint32_t>(r));
      EXPECT_EQ(step, 2);
      std::vector<float> master(static_cast<size_t>(L3.shard_elems()));
      std::memcpy(master.data(), bytes.data() + 64, master.size() * 4);
      for (const ShardTensor& t : L3.tensors())
        for (int64_t j = 0; j < t.shard_elems; ++j) {
          const int64_t e = r * t.shard_elems + j;
          const float want = e < t.numel ? part.master[static_cast<size_t>(t.model_offset + e)] : 0;
          ASSERT_EQ(std::bit_cast<uint32_t>(master[static_cast<size_t>(t.shard_offset + j)]),
                    std::bit_cast<uint32_t>(want))
              << t.name << " rank " << r << " element " << e;
          ++checked;
        }
    }
    EXPECT_EQ(checked, 3 * L3.shard_elems());
    RunSpec rest = spec;
    rest.first_step = 2;
    rest.load_dir = d3.path;
    rest.init_seed = 999;
    const RunResult r = run_training(one, rest);
    EXPECT_EQ(bits(r.initial_master), bits(part.master));
    ASSERT_EQ(r.losses.size(), 1u);
    EXPECT_EQ(bits(r.losses)[0], bits(full.losses)[2]);
    EXPECT_EQ(bits(r.master), bits(full.master));
    EXPECT_TRUE(r.weights == full.weights);
    EXPECT_EQ(r.adam_step, 3);
  }
}

// A re-sharding load checks every file it reads: one missing, one of another checkpoint.
TEST(ZeroStages, ReshardingNamesAMissingOrForeignFile) {
  dist::SingleComm one;
  const ScopedDir d1("reshard_err_w1"), d3("reshard_err_w3"), d2("reshard_err_w2");
  RunSpec spec;
  spec.steps = 1;
  spec.save_dir = d1.path;
  run_training(one, spec);
  load_and_save_as(d1.path, d3.path, 3, 3, false, DType::kF32);
  load_and_save_as(d1.path, d2.path, 2, 3, false, DType::kF32);
  CpuOps ops;
  HostMemory mem;
  ZeroEngine z(ParamLayout(test::tiny_config(false)), DType::kF32, ops, one, mem, mem, {1, false});
  // Rank 1's file of the 2-rank checkpoint in place of the 3-rank one's rank 2.
  fs::copy_file(ZeroEngine::state_path(d2.path, 1), ZeroEngine::state_path(d3.path, 2),
                fs::copy_options::overwrite_existing);
  testing::expect_error([&] { z.load_state(d3.path); },
                        {ZeroEngine::state_path(d3.path, 2).string() +
                         ": ZeRO state was written with world size 2, but rank 0's file of the "
                         "same checkpoint with world size 3: the directory mixes two checkpoints"});
  fs::remove(ZeroEngine::state_path(d3.path, 1));
  testing::expect_error(
      [&] { z.load_state(d3.path); },
      {d3.path + ": the checkpoint has no zero_state_rank00001.bin (rank 1's master weights and "
                 "optimizer state, of world size 3); it is incomplete"});
  fs::remove(ZeroEngine::state_path(d3.path, 0));
  testing::expect_error([&] { z.load_state(d3.path); },
                        {d3.path + ": the checkpoint has no zero_state_rank00000.bin (rank 0's"});
}

// Stage 0's device gradient pool without offload.
constexpr char kFullGradient[] = "full gradient (the shard is this rank's block)";

const PoolBytes* pool(const ZeroMemory& m, const std::string& name) {
  for (const PoolBytes& p : m.pools)
    if (p.name == name) return &p;
  return nullptr;
}

// The untied tiny model's layout with `layers` decoder layers.
ParamLayout tiny_layout(int layers) {
  ModelConfig cfg = test::tiny_config(false);
  cfg.num_hidden_layers = layers;
  return ParamLayout(cfg);
}

TEST(ZeroStages, MemoryShrinksWithTheStage) {
  CpuOps ops;
  HostMemory mem;
  ShapeComm four(4);
  const ParamLayout L(test::tiny_config(false));
  const auto memory = [&](const ParamLayout& layout, int stage, bool off) {
    return ZeroEngine(layout, DType::kF32, ops, four, mem, mem, {stage, off}).memory();
  };
  // S = 976 (embed) + 2 × 2976 (layers) + 16 (norm) + 976 (lm_head) = 7920; largest group 2976.
  const size_t S = 7920, G = 2976, W = 4;
  ASSERT_EQ(ShardLayout(L, 4).shard_elems(), static_cast<int64_t>(S));
  const ZeroMemory m0 = memory(L, 0, false), m1 = memory(L, 1, false), m2 = memory(L, 2, false),
                   m3 = memory(L, 3, false), m1o = memory(L, 1, true), m0o = memory(L, 0, true);
  for (const char* nm : {"master weights", "adam m", "adam v"}) {
    ASSERT_NE(pool(m0, nm), nullptr) << nm;
    EXPECT_EQ(pool(m0, nm)->bytes, 4 * W * S) << nm;
    EXPECT_EQ(pool(m1, nm)->bytes, 4 * S) << nm;
    EXPECT_FALSE(pool(m1, nm)->host) << nm;
    EXPECT_TRUE(pool(m1o, nm)->host) << nm;
    EXPECT_TRUE(pool(m0o, nm)->host) << nm;
    EXPECT_EQ(pool(m0o, nm)->bytes, 4 * W * S) << nm;
  }
  // A bf16 model's master is split: its low halves [S] u16 beside the compute weights (the high
  // halves) on the device; offloaded, beside the host bf16 weights that go H2D.
  for (bool off : {false, true}) {
    const ZeroMemory mb = ZeroEngine(L, DType::kBF16, ops, four, mem, mem, {1, off}).memory();
    EXPECT_EQ(pool(mb, "master weights"), nullptr) << off;
    ASSERT_NE(pool(mb, "master weights (low halves)"), nullptr) << off;
    EXPECT_EQ(pool(mb, "master weights (low halves)")->bytes, 2 * S);
    EXPECT_EQ(pool(mb, "master weights (low halves)")->host, off);
    const PoolBytes* hi = pool(mb, "master weights (high halves: the bf16 weights)");
    EXPECT_EQ(hi != nullptr && hi->bytes > 0, off) << off;
    if (off) {
      EXPECT_EQ(hi->bytes, 2 * S);
    }
    EXPECT_EQ(pool(mb, "adam m")->bytes, 4 * S);
  }
  EXPECT_EQ(pool(m1, "gradient shard")->bytes, 4 * S);
  EXPECT_EQ(pool(m1, "reduce-scatter bucket")->bytes, 4 * W * G);
  // Stage 0: one fp32 gradient, the full [W][S] one; the shard is this rank's block of it.
  EXPECT_EQ(pool(m0, kFullGradient)->bytes, 4 * W * S);
  EXPECT_EQ(pool(m0, "gradient shard"), nullptr);
  EXPECT_EQ(pool(m1, kFullGradient), nullptr);
  EXPECT_EQ(pool(m3, "compute weight shard")->bytes, 4 * S);
  EXPECT_EQ(pool(m1, "reduce-scatter bucket 2")->bytes, 4 * W * G);  // the other layer
  EXPECT_EQ(pool(m1, "compute weights")->bytes, 4 * static_cast<size_t>(L.total_elems()));
  EXPECT_EQ(pool(m1, "all-gather send")->bytes, 4 * G);  // this rank's shard of one group
  EXPECT_EQ(pool(m1, "all-gather staging")->bytes, 4 * W * G);
  EXPECT_EQ(pool(m1, "compute weight shard"), nullptr);  // the update writes the full weights
  EXPECT_EQ(pool(m0, "compute weight shard"), nullptr);
  EXPECT_EQ(pool(m0, "all-gather staging"), nullptr);  // stage 0 updates every shard itself
  // Every stage: the engine holds the gradient window (the embedding, the head, one layer slot);
  // stage 3 also the weights of the embedding, the head and two layer slots instead of the model.
  const auto group_bytes = [&](int g) {
    return 4 * static_cast<size_t>(L.group_end(g) - L.group_begin(g));
  };
  EXPECT_EQ(pool(m3, "compute weights"), nullptr);
  EXPECT_EQ(pool(m3, "weights: layer slot 0")->bytes, group_bytes(1));
  EXPECT_EQ(pool(m3, "weights: layer slot 1")->bytes, group_bytes(1));
  EXPECT_EQ(pool(m3, "weights: embedding")->bytes, group_bytes(0));
  EXPECT_EQ(pool(m1, "weights: embedding"), nullptr);
  for (const ZeroMemory* m : {&m0, &m1, &m3}) {
    EXPECT_EQ(pool(*m, "gradients: layer slot")->bytes, group_bytes(1));
    EXPECT_EQ(pool(*m, "gradients: head")->bytes, group_bytes(L.group_head()));
    EXPECT_EQ(pool(*m, "gradients: embedding")->bytes, group_bytes(0));
  }
  EXPECT_EQ(m1.device_bytes(), m2.device_bytes());
  EXPECT_GT(m0.device_bytes(), m1.device_bytes());
  // Stage 2 keeps the full weights: more than stage 3 once the model has more layers than the
  // two slots (4 here; the 2-layer model above ties).
  const ParamLayout L4 = tiny_layout(4);
  EXPECT_GT(memory(L4, 2, false).device_bytes(), memory(L4, 3, false).device_bytes());
  EXPECT_GT(m0.device_bytes(), m2.device_bytes());
  EXPECT_EQ(m1.host_bytes(), 0u);
  // Offload: master / m / v and the gradient shard leave the device (and the norm's device
  // workspace); a staging ring of two chunks (C = G, a layer's shard) takes the reduce-scatter's
  // output on the device, and its copy on the host.
  EXPECT_EQ(m1o.device_bytes(), m1.device_bytes() - 3 * 4 * S - 4 * S - 64 + 2 * 4 * G);
  EXPECT_EQ(m1o.host_bytes(), 3 * 4 * S + 4 * S + 2 * 4 * G + 64);  // + host gradient, staging
  EXPECT_EQ(pool(m1o, "gradient shard"), nullptr);
  EXPECT_EQ(pool(m0o, kFullGradient), nullptr);
  EXPECT_EQ(pool(m1o, "host gradient")->bytes, 4 * S);
  EXPECT_EQ(pool(m0o, "host gradient")->bytes, 4 * W * S);
  EXPECT_EQ(
      m1o.describe(),
      "device 373.9 KiB (reduce-scatter bucket 46.5 KiB, reduce-scatter bucket 2 46.5 KiB, "
      "gradient staging 23.2 KiB, gradients: embedding 15.2 KiB, gradients: head 15.5 KiB, "
      "gradients: layer slot 46.0 KiB, compute weights 122.8 KiB, all-gather staging 46.5 KiB, "
      "all-gather send 11.6 KiB); host 147.1 KiB (gradient staging (host) 23.2 KiB, norm "
      "workspace (host) 64 B, master weights 30.9 KiB, adam m 30.9 KiB, adam v 30.9 KiB, host "
      "gradient 30.9 KiB)");
}

// Under offload with host accumulation (the default; the trainer's choice at one micro-batch per
// step) the fp32 gradient shard [S] (and stage 0's [W][S]) leaves the device: it accumulates in
// the optimizer's host gradient, through a device staging ring of two chunks.
// Apart from the compute weights, no device pool is as large as S fp32 elements (8 layers, so a
// layer's bucket [W][C] is smaller than S for every W here); without offload the shard is there.
TEST(ZeroStages, OffloadKeepsNoGradientShardOnTheDevice) {
  CpuOps ops;
  HostMemory mem;
  const ParamLayout L = tiny_layout(8);
  for (int W : {1, 2, 4})
    for (int stage = 0; stage <= 3; ++stage) {
      SCOPED_TRACE(fmt::format("W {} stage {}", W, stage));
      ShapeComm comm(W);
      const ShardLayout sl(L, W);
      const auto S = static_cast<size_t>(sl.shard_elems());
      const auto C = static_cast<size_t>(GradReducer::chunk_elems(sl));
      const ZeroMemory on = ZeroEngine(L, DType::kF32, ops, comm, mem, mem, {stage, true}).memory();
      const ZeroMemory off =
          ZeroEngine(L, DType::kF32, ops, comm, mem, mem, {stage, false}).memory();
      for (const PoolBytes& p : on.pools) {
        if (!p.host && p.arena != kWeightArena) {
          EXPECT_LT(p.bytes, 4 * S) << p.name;
        }
      }
      EXPECT_EQ(pool(on, "gradient shard"), nullptr);
      EXPECT_EQ(pool(on, kFullGradient), nullptr);
      ASSERT_NE(pool(on, "gradient staging"), nullptr);
      EXPECT_FALSE(pool(on, "gradient staging")->host);
      EXPECT_EQ(pool(on, "gradient staging")->bytes, 2 * 4 * C);
      ASSERT_NE(pool(on, "host gradient"), nullptr);
      EXPECT_TRUE(pool(on, "host gradient")->host);
      EXPECT_EQ(pool(on, "host gradient")->bytes, 4 * S * (stage == 0 ? W : 1));
      EXPECT_EQ(pool(on, "gradient staging (host)")->bytes, 2 * 4 * C);
      // Without offload one fp32 gradient on the device: the shard, or at stage 0 the full
      // gradient that holds it.
      const PoolBytes* g = pool(off, stage == 0 ? kFullGradient : "gradient shard");
      ASSERT_NE(g, nullptr);
      EXPECT_FALSE(g->host);
      EXPECT_EQ(g->bytes, 4 * S * (stage == 0 ? W : 1));
      EXPECT_EQ(pool(off, stage == 0 ? "gradient shard" : kFullGradient), nullptr);
      EXPECT_EQ(pool(off, "host gradient"), nullptr);
      // Alone, every chunk packs into the staging ring: no reduce-scatter bucket.
      EXPECT_EQ(pool(on, "reduce-scatter bucket") == nullptr, W == 1);
      // Without offload too: alone the later micro-steps add straight into the shard.
      if (W == 1)
        EXPECT_EQ(pool(off, "reduce-scatter bucket"), nullptr);
      else
        EXPECT_EQ(pool(off, "reduce-scatter bucket")->bytes, 4 * W * C);
      // Offload with device accumulation (EngineOptions::host_gradient_accumulation false, the
      // trainer's choice with gradient accumulation): the shard [S] is on the device as without
      // offload, but stage 0 gathers through the host gradient (no [W][S] on the device).
      EngineOptions dev_accum;
      dev_accum.stage = stage;
      dev_accum.offload = true;
      dev_accum.host_gradient_accumulation = false;
      const ZeroMemory da = ZeroEngine(L, DType::kF32, ops, comm, mem, mem, dev_accum).memory();
      ASSERT_NE(pool(da, "gradient shard"), nullptr);
      EXPECT_FALSE(pool(da, "gradient shard")->host);
      EXPECT_EQ(pool(da, "gradient shard")->bytes, 4 * S);
      EXPECT_EQ(pool(da, kFullGradient), nullptr);
      EXPECT_EQ(pool(da, "gradient staging"), nullptr);
      ASSERT_NE(pool(da, "host gradient"), nullptr);
      EXPECT_EQ(pool(da, "host gradient")->bytes, 4 * S * (stage == 0 ? W : 1));
    }
}

// One rank, one micro-step per step (EngineOptions::micro_steps_per_step = 1): a model whose
// tensors need no shard padding writes its gradients straight into the fp32 shard, with no
// gradient window on the device — bitwise the windowed run under every stage and offload; a
// second micro-step in a step is refused; a padded model keeps its windows. The residual stream
// x.1, x.2 then lives in the layers' idle shard columns (with and without checkpointing; eval
// forwards between steps keep to activation memory), bitwise the same.
// The aligned model (no shard padding) in `dt`, its embedding tied in bf16.
RunSpec aligned_spec(DType dt) {
  RunSpec spec;
  spec.aligned = true;
  spec.dtype = dt;
  spec.tied = dt == DType::kBF16;
  return spec;
}

TEST(ZeroStages, GradientsStraightIntoTheShardAreBitwiseTheWindows) {
  dist::SingleComm comm;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const RunSpec spec = aligned_spec(dt);
    const RunResult ref = run_training(comm, spec);  // windows (micro-steps unknown)
    EXPECT_EQ(ref.groups_in_shard, 0);
    EXPECT_EQ(ref.residuals_in_gradient_memory, 0);
    ASSERT_EQ(ref.eval_losses.size(), 3u);
    EXPECT_GT(ref.eval_losses[2], 0.0);
    ASSERT_NE(pool(ref.memory, "gradients: embedding"), nullptr);
    for (int stage = 0; stage <= 3; ++stage)
      for (int off = 0; off < 3; ++off) {  // none, host accumulation, device accumulation
        SCOPED_TRACE(fmt::format("{} stage {} offload {}", dtype_name(dt), stage, off));
        RunSpec s = spec;
        s.stage = stage;
        s.offload = off > 0;
        s.host_accum = off == 1;
        const RunResult windowed = run_training(comm, s);
        s.micro_steps_per_step = 1;
        const RunResult r = run_training(comm, s);
        expect_same(r, ref);
        // Host accumulation has no device shard to write into: it keeps its windows.
        EXPECT_EQ(r.groups_in_shard, off == 1 ? 0 : 4);               // embedding, 2 layers, head
        EXPECT_EQ(r.residuals_in_gradient_memory, off == 1 ? 0 : 2);  // x.1, x.2
        EXPECT_EQ(r.attention_in_gradient_memory, 0);  // no checkpointing: nothing to skip
        EXPECT_EQ(windowed.residuals_in_gradient_memory, 0);
        if (stage == 1) {  // the residuals under checkpointing, and without the sharing
          RunSpec c = s;
          c.checkpointing = true;
          const RunResult ckpt = run_training(comm, c);
          expect_same(ckpt, ref);
          EXPECT_EQ(ckpt.residuals_in_gradient_memory, off == 1 ? 0 : 2);
          EXPECT_EQ(ckpt.attention_in_gradient_memory, off == 1 ? 0 : 1);  // layer 1's
          c.share_activation_memory = false;
          const RunResult own = run_training(comm, c);
          expect_same(own, ref);
          EXPECT_EQ(own.residuals_in_gradient_memory, 0);
          EXPECT_EQ(own.attention_in_gradient_memory, 0);
        }
        size_t windows = 0;  // the windowed run's window pools: what the direct run saves
        for (const char* w : {"gradients: embedding", "gradients: layer slot", "gradients: head"}) {
          EXPECT_EQ(pool(r.memory, w) == nullptr, off != 1) << w;
          ASSERT_NE(pool(windowed.memory, w), nullptr) << w;
          windows += pool(windowed.memory, w)->bytes;
        }
        EXPECT_EQ(windowed.memory.device_bytes() - r.memory.device_bytes(), off == 1 ? 0 : windows);
      }
  }
  RunSpec two;  // the engine set up for one micro-step, driven with two
  two.aligned = true;
  two.accum = 2;
  two.micro_steps_per_step = 1;
  try {
    run_training(comm, two);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reduced twice in one optimizer step"), std::string::npos)
        << e.what();
  }
  {  // adding to gradients whose memory held the residual stream is refused before any write
    CpuOps ops;
    HostMemory mem;
    const ModelConfig cfg = test::aligned_config(false);
    EngineOptions eo;
    eo.micro_steps_per_step = 1;
    ZeroEngine engine(ParamLayout(cfg), DType::kF32, ops, comm, mem, mem, eo);
    ModelOptions mo;
    mo.max_tokens = 48;
    CausalLM model(cfg, ops, mem, mo, engine);
    EXPECT_EQ(model.residuals_in_gradient_memory(), 2);
    BackwardOptions bo;
    bo.accumulate = true;
    try {
      model.forward_backward(test::make_micro_batch(0, 0, cfg.vocab_size).view(), bo);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("accumulate = true"), std::string::npos) << e.what();
    }
  }
  RunSpec padded;  // the tiny model pads every tensor: nothing is written into the shard
  padded.micro_steps_per_step = 1;
  EXPECT_EQ(run_training(comm, padded).groups_in_shard, 0);
}

// Under checkpointing the lent gradient memory also keeps attention outputs and lse (after the
// residuals, where they fit before the end of the memory of the layers below their own), and the
// recomputation skips those layers' attention forward: bitwise the windowed run without
// checkpointing, eval forwards included. Four layers at a 256-token capacity make items run on
// from one layer's memory into the next and one not fit. A layer's memory is 30,976 fp32
// gradients (123,904 B); items are x [256, 64] and att [256, 64] + lse [4, 256] fp32:
//  fp32: x.1 [0, 64K); att.1 would end at 132 K > 121 K (layer 0's end): not kept; x.2 [64K,
//        128K) runs into layer 1; att.2 [128K, 196K); x.3, att.3; x.4 — 4 residuals, 2 layers.
//  bf16: half the x and att bytes: att.1 ends at 68 K, so layers 1, 2, 3 — 4 residuals, 3 layers.
// With keep_attention as well, activation memory holds the att / lse of the other layers only.
// With overlap_gather the update is left in flight (on the CPU the streams are one: this checks
// the bookkeeping and the per-group update, not the ordering, which the GPU runs check).
TEST(ZeroStages, AttentionKeptInLentGradientMemoryIsBitwise) {
  dist::SingleComm comm;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    RunSpec spec = aligned_spec(dt);
    spec.layers = 4;
    spec.max_tokens = 256;
    const RunResult ref = run_training(comm, spec);  // windows, no checkpointing
    ASSERT_EQ(ref.eval_losses.size(), 3u);
    for (int stage = 0; stage <= 3; ++stage)
      for (int off : {0, 2}) {  // none, offload with device accumulation
        SCOPED_TRACE(fmt::format("{} stage {} offload {}", dtype_name(dt), stage, off));
        RunSpec s = spec;
        s.stage = stage;
        s.offload = off > 0;
        s.host_accum = false;
        s.micro_steps_per_step = 1;
        s.checkpointing = true;
        const RunResult r = run_training(comm, s);
        expect_same(r, ref);
        EXPECT_EQ(r.residuals_in_gradient_memory, 4);
        const int lent = dt == DType::kF32 ? 2 : 3;
        EXPECT_EQ(r.attention_in_gradient_memory, lent);
        // Selective checkpointing adds activation memory for the other layers' att / lse only.
        s.keep_attention = true;
        const RunResult k = run_training(comm, s);
        expect_same(k, ref);
        EXPECT_EQ(k.attention_in_gradient_memory, lent);
        const size_t att = 256 * 64 * dtype_size(dt), lse = 4 * 256 * 4;
        EXPECT_EQ(k.activation_bytes - r.activation_bytes, (4 - lent) * (att + lse));
        EXPECT_FALSE(r.overlaps_update);
        // The update left in flight for the next forward (W = 1, device state, stages 0-2).
        s.overlap_gather = true;
        const RunResult o = run_training(comm, s);
        expect_same(o, ref);
        EXPECT_EQ(o.overlaps_update, off == 0 && stage <= 2);
      }
  }
}

// Residuals before attention outputs: with fewer attention columns than hidden (4 heads × 8 <
// 64) and residuals larger than a layer's memory (x: 520 tokens × 64 × 4 B = 133,120 B; a layer's
// 26,848 gradients: 107,392 B; att + lse 74,880 B), residuals alone fit x.2, x.4, x.5, x.6. A
// greedy placement in layer order (att.1, x.2, att.3, x.4, att.5, x.6) would keep 3 residuals;
// att.l is placed only when the later residuals still fit as many as without any: att.1 and the
// 4 residuals — bitwise the windowed run.
TEST(ZeroStages, LentMemoryTakesResidualsBeforeAttentionOutputs) {
  dist::SingleComm comm;
  RunSpec spec = aligned_spec(DType::kF32);
  spec.layers = 6;
  spec.kv_heads = 4;
  spec.head_dim = 8;
  spec.max_tokens = 520;
  const RunResult ref = run_training(comm, spec);
  RunSpec s = spec;
  s.micro_steps_per_step = 1;
  const RunResult alone = run_training(comm, s);  // no checkpointing: residuals only
  expect_same(alone, ref);
  EXPECT_EQ(alone.residuals_in_gradient_memory, 4);
  EXPECT_EQ(alone.attention_in_gradient_memory, 0);
  s.checkpointing = true;
  const RunResult r = run_training(comm, s);
  expect_same(r, ref);
  EXPECT_EQ(r.residuals_in_gradient_memory, 4);
  EXPECT_EQ(r.attention_in_gradient_memory, 1);
}

// One bf16 copy of the weights on the device: under stages 0–2 the engine's weight pools at W = 1
// are exactly the padded model (the update writes the weights the model reads), at W = 4 stage 0
// too, stages 1/2 add only a send and a staging buffer of the largest group's shard; stage 3 keeps
// the shard and four group buffers. Offload changes none of it.
TEST(ZeroStages, OneFullWeightCopyOnTheDevice) {
  CpuOps ops;
  HostMemory mem;
  const ParamLayout L = tiny_layout(4);
  const size_t es = 2;  // bf16
  const size_t model = es * static_cast<size_t>(L.total_elems());
  const auto weight_pools = [&](int W, int stage, bool off) {
    ShapeComm comm(W);
    const ZeroMemory m = ZeroEngine(L, DType::kBF16, ops, comm, mem, mem, {stage, off}).memory();
    size_t sum = 0;
    for (const PoolBytes& p : m.pools)
      if (p.arena == kWeightArena) {
        EXPECT_FALSE(p.host) << p.name;
        sum += p.bytes;
      }
    return sum;
  };
  for (bool off : {false, true})
    for (int stage = 0; stage <= 2; ++stage) {
      SCOPED_TRACE(fmt::format("stage {} offload {}", stage, off));
      EXPECT_EQ(weight_pools(1, stage, off), model);
    }
  const ShardLayout s4(L, 4), s1(L, 1);
  const auto G4 = static_cast<size_t>(s4.max_group_shard_elems());
  for (bool off : {false, true}) {
    EXPECT_EQ(weight_pools(4, 0, off), model);
    EXPECT_EQ(weight_pools(4, 1, off), model + es * (4 + 1) * G4);
    EXPECT_EQ(weight_pools(4, 2, off), model + es * (4 + 1) * G4);
  }
  // Stage 3 at W = 1: the shard [S] (the whole model, tensors padded to 16) + embedding, head
  // and two layer slots + the staging buffer.
  const auto group = [&](int g) {
    return es * static_cast<size_t>(L.group_end(g) - L.group_begin(g));
  };
  EXPECT_EQ(weight_pools(1, 3, false), es * static_cast<size_t>(s1.shard_elems()) + group(0) +
                                           group(L.group_head()) + 2 * group(1) +
                                           es * static_cast<size_t>(s1.max_group_shard_elems()));
}

}  // namespace
}  // namespace zt::zero
