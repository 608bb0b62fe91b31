// The ZeRO engine on the GPU as the trainer sets it up (the engine is the model's storage, one
// micro-batch per step): the update left in flight on its own stream (EngineOptions::
// overlap_gather at W = 1, ZeroEngine::overlaps_update) is bitwise the update on the compute
// stream — every step's loss, the final master weights. A forward that reads a group's weights
// before that group's update has finished (a missing wait) gives other numbers: the embedding is
// the first group updated and the first read.
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
  std::vector<double> losses;
  std::vector<float> master;
  bool overlapped = false;
};

// 6 steps of a 4-layer bf16 model (hidden 1024, vocab 32,000, 4 × 512 tokens, checkpointing on)
// under `stage`, the update overlapped or not.
EngineRun train_steps(int stage, bool overlap) {
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
  zero::ZeroEngine engine(ParamLayout(cfg), DType::kBF16, *dev.ops, *comm, *dev.device_memory,
                          *dev.host_memory, eo);
  ModelOptions mo;
  mo.dtype = DType::kBF16;
  mo.max_tokens = 2048;
  mo.max_seqlen = 512;
  mo.checkpointing = true;
  CausalLM model(cfg, *dev.ops, *dev.device_memory, mo, engine);
  std::vector<std::byte> host(static_cast<size_t>(model.layout().total_elems()) * 2);
  const Tensor flat(host.data(), DType::kBF16, {model.layout().total_elems()}, Device::kCPU);
  model.init_from_scratch(7, flat);
  engine.init_from_flat(flat);
  EngineRun out;
  out.overlapped = engine.overlaps_update();
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
  }
  out.master = engine.full_master_weights();
  return out;
}

TEST(CudaEngine, OverlappedUpdateIsBitwiseTheUpdateOnTheComputeStream) {
  ZT_REQUIRE_GPU();
  for (int stage : {0, 2}) {
    SCOPED_TRACE(stage);
    const EngineRun sync = train_steps(stage, false);
    const EngineRun async = train_steps(stage, true);
    EXPECT_FALSE(sync.overlapped);
    EXPECT_TRUE(async.overlapped);
    ASSERT_EQ(sync.losses.size(), async.losses.size());
    for (size_t k = 0; k < sync.losses.size(); ++k)
      EXPECT_EQ(std::memcmp(&sync.losses[k], &async.losses[k], sizeof(double)), 0)
          << "step " << k << ": " << sync.losses[k] << " vs " << async.losses[k];
    ASSERT_EQ(sync.master.size(), async.master.size());
    EXPECT_EQ(std::memcmp(sync.master.data(), async.master.data(), sync.master.size() * 4), 0);
    // The updates change the model (random tokens: the loss need not fall in 6 steps).
    EXPECT_NE(sync.losses.front(), sync.losses.back());
  }
}

}  // namespace
}  // namespace zt
