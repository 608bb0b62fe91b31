// The ZeRO engine on the GPU as the trainer sets it up (the engine is the model's storage, one
// micro-batch per step): the update left in flight on its own stream (EngineOptions::
// overlap_gather at W = 1, ZeroEngine::overlaps_update) is bitwise the update on the compute
// stream — every step's loss, the eval forwards between steps, the final master weights — in
// bf16 (stages 0 and 2) and fp32 (stage 2: the update then casts the master into the weights). A
// forward that reads a group's weights before that group's update has finished (a missing wait)
// gives other numbers: the embedding is the first group updated and the first read.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "dist/comm.h"
#include "gpu/gpu_test_util.h"
#include "io/model_config.h"
#include "model/causal_lm.h"
#include "model/micro_batch.h"
#include "train/device.h"
#include "zero/zero_engine.h"

namespace zt {
namespace {

struct EngineRun {
  std::vector<double> losses;  // per step: the training loss sum, then an eval forward's
  std::vector<float> master;
  bool overlapped = false;
  int attention_lent = 0;  // CausalLM::attention_in_gradient_memory()
};

// 6 steps of a 4-layer model (hidden 1024, vocab 32,000, 4 × 512 tokens, checkpointing on: the
// attention outputs of layers 1-3 in lent gradient memory) under `stage`, the update overlapped
// or not; after each update an eval forward (as the trainer's evaluation after a step), before
// the next step's forward.
EngineRun train_steps(DType dt, int stage, bool overlap) {
  const Json j = {
      {"model_type", "qwen2"},     {"vocab_size", 32000},     {"hidden_size", 1024},
      {"intermediate_size", 2816}, {"num_hidden_layers", 4},  {"num_attention_heads", 8},
      {"num_key_value_heads", 2},  {"head_dim", 128},         {"max_position_embeddings", 4096},
      {"rms_norm_eps", 1e-6},      {"rope_theta", 1000000.0}, {"tie_word_embeddings", true}};
  const ModelConfig cfg = parse_model_config(j, "engine test config");
  train::DeviceContext dev = train::make_device(train::Backend::kCuda, 0, 1);
  std::unique_ptr<dist::Comm> comm =
      train::make_trainer_comm(std::make_unique<dist::SingleComm>(), train::Backend::kCuda, cfg);
  zero::EngineOptions eo;
  eo.stage = stage;
  eo.overlap_gather = overlap;
  eo.micro_steps_per_step = 1;
  zero::ZeroEngine engine(ParamLayout(cfg), dt, *dev.ops, *comm, *dev.device_memory,
                          *dev.host_memory, eo);
  ModelOptions mo;
  mo.dtype = dt;
  mo.max_tokens = 2048;
  mo.max_seqlen = 512;
  mo.checkpointing = true;
  CausalLM model(cfg, *dev.ops, *dev.device_memory, mo, engine);
  std::vector<std::byte> host(static_cast<size_t>(model.layout().total_elems()) * dtype_size(dt));
  const Tensor flat(host.data(), dt, {model.layout().total_elems()}, Device::kCPU);
  model.init_from_scratch(7, flat);
  engine.init_from_flat(flat);
  EngineRun out;
  out.overlapped = engine.overlaps_update();
  out.attention_lent = model.attention_in_gradient_memory();
  std::mt19937 rng(11);
  for (int k = 0; k < 6; ++k) {
    PackedBatch pb;
    for (int s = 0; s < 4; ++s) {
      std::vector<int32_t> ids(512);
      for (int32_t& t : ids) t = static_cast<int32_t>(rng() % 32000);
      pb.add(ids, ids);
    }
    BackwardOptions bo;
    bo.grad_scale = 1.0f / static_cast<float>(count_targets(pb.view()));
    out.losses.push_back(model.forward_backward(pb.view(), bo).loss_sum);
    zero::StepArgs sa;
    sa.lr = 1e-3;  // large steps: a stale weight shows in the next loss
    engine.finish_step(sa);
    out.losses.push_back(model.forward(pb.view()).loss_sum);
  }
  out.master = engine.full_master_weights();
  return out;
}

TEST(CudaEngine, OverlappedUpdateIsBitwiseTheUpdateOnTheComputeStream) {
  ZT_REQUIRE_GPU();
  for (const auto& [dt, stage] :
       {std::pair{DType::kBF16, 0}, std::pair{DType::kBF16, 2}, std::pair{DType::kF32, 2}}) {
    SCOPED_TRACE(std::string(dtype_name(dt)) + " stage " + std::to_string(stage));
    const EngineRun sync = train_steps(dt, stage, false);
    const EngineRun async = train_steps(dt, stage, true);
    EXPECT_FALSE(sync.overlapped);
    EXPECT_TRUE(async.overlapped);
    EXPECT_EQ(async.attention_lent, 3);
    ASSERT_EQ(sync.losses.size(), async.losses.size());
    for (size_t k = 0; k < sync.losses.size(); ++k)
      EXPECT_EQ(std::memcmp(&sync.losses[k], &async.losses[k], sizeof(double)), 0)
          << "step " << k << ": " << sync.losses[k] << " vs " << async.losses[k];
    ASSERT_EQ(sync.master.size(), async.master.size());
    EXPECT_EQ(std::memcmp(sync.master.data(), async.master.data(), sync.master.size() * 4), 0);
    // The updates change the model (random tokens: the loss need not fall in 6 steps).
    EXPECT_NE(sync.losses.front(), sync.losses[sync.losses.size() - 2]);
  }
}

}  // namespace
}  // namespace zt
