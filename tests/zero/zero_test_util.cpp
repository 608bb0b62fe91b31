#include "zero_test_util.h"

#include <cstring>
#include <random>

#include "backend/cpu/cpu_ops.h"
#include "core/arena.h"
#include "model/causal_lm.h"

namespace zt::zero::test {

ModelConfig tiny_config(bool tied, int64_t vocab) {
  Json j = {{"model_type", "qwen2"},    {"vocab_size", vocab},    {"hidden_size", 40},
            {"intermediate_size", 56},  {"num_hidden_layers", 2}, {"num_attention_heads", 4},
            {"num_key_value_heads", 2}, {"head_dim", 10},         {"max_position_embeddings", 128},
            {"rms_norm_eps", 1e-6},     {"rope_theta", 10000.0},  {"tie_word_embeddings", tied}};
  return parse_model_config(j, "tiny test config");
}

ModelConfig aligned_config(bool tied, int heads, int kv_heads, int head_dim) {
  Json j = {{"model_type", "qwen2"},           {"vocab_size", 112},
            {"hidden_size", 64},               {"intermediate_size", 96},
            {"num_hidden_layers", 2},          {"num_attention_heads", heads},
            {"num_key_value_heads", kv_heads}, {"head_dim", head_dim},
            {"max_position_embeddings", 128},
            {"rms_norm_eps", 1e-6},     {"rope_theta", 10000.0},  {"tie_word_embeddings", tied}};
  return parse_model_config(j, "aligned test config");
}

PackedBatch make_micro_batch(int64_t step, int64_t j, int64_t vocab) {
  std::mt19937 rng(static_cast<uint32_t>(1000003 * step + 7919 * j + 17));
  PackedBatch b;
  const int n = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < n; ++e) {
    const int len = 3 + static_cast<int>(rng() % 10);
    std::vector<int32_t> ids(static_cast<size_t>(len)), labels(static_cast<size_t>(len));
    for (int t = 0; t < len; ++t) {
      ids[static_cast<size_t>(t)] = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
      const bool masked = t < len / 3 || (step == 1 && j == 1);
      labels[static_cast<size_t>(t)] = masked ? -100 : ids[static_cast<size_t>(t)];
    }
    b.add(ids, labels);
  }
  return b;
}

RunResult run_training(dist::Comm& comm, const RunSpec& spec) {
  CpuOps ops;
  HostMemory mem;
  ModelConfig cfg =
      spec.aligned ? aligned_config(spec.tied, spec.heads > 0 ? spec.heads : 4,
                                    spec.kv_heads > 0 ? spec.kv_heads : 2,
                                    spec.head_dim > 0 ? spec.head_dim : 16)
                   : tiny_config(spec.tied, spec.vocab);
  if (spec.layers > 0) cfg.num_hidden_layers = spec.layers;
  const ParamLayout layout(cfg);
  // The trainer's set-up: the engine is the model's storage (the gradient window; every stage's
  // weights), initialised from a flat host buffer.
  EngineOptions eo;
  eo.stage = spec.stage;
  eo.offload = spec.offload;
  eo.host_gradient_accumulation = spec.host_accum;
  eo.gradient_delivery_elems = spec.delivery_elems;
  eo.micro_steps_per_step = spec.micro_steps_per_step;
  eo.overlap_gather = spec.overlap_gather;
  ZeroEngine engine(layout, spec.dtype, ops, comm, mem, mem, eo);
  ModelOptions mo;
  mo.dtype = spec.dtype;
  mo.max_tokens = spec.max_tokens;
  mo.checkpointing = spec.checkpointing;
  mo.keep_attention = spec.keep_attention;
  mo.share_activation_memory = spec.share_activation_memory;
  CausalLM model(cfg, ops, mem, mo, engine);
  std::vector<std::byte> flat_bytes(static_cast<size_t>(layout.total_elems()) *
                                    dtype_size(spec.dtype));
  const Tensor flat(flat_bytes.data(), spec.dtype, {layout.total_elems()}, Device::kCPU);
  model.init_from_scratch(spec.init_seed, flat);
  if (!spec.load_dir.empty())
    engine.load_state(spec.load_dir);
  else
    engine.init_from_flat(flat);
  RunResult res;
  res.initial_master = engine.full_master_weights();
  const int W = comm.world_size(), r = comm.rank();
  for (int k = spec.first_step; k < spec.steps; ++k) {
    int64_t N = 0;  // the step's global target count, known to every rank
    for (int j = 0; j < W * spec.accum; ++j)
      N += count_targets(make_micro_batch(k, j, cfg.vocab_size).view());
    double loss_sum = 0.0;
    for (int m = 0; m < spec.accum; ++m) {
      const PackedBatch b = make_micro_batch(k, m * W + r, cfg.vocab_size);
      BackwardOptions bo;
      bo.grad_scale = static_cast<float>(1.0 / static_cast<double>(N));
      loss_sum += model.forward_backward(b.view(), bo).loss_sum;
    }
    comm.all_reduce(&loss_sum, 1, dist::ReduceOp::kSum);
    // An eval forward between the backward and the update: it must leave the gradients alone.
    res.eval_losses.push_back(
        model.forward(make_micro_batch(k, r, cfg.vocab_size).view()).loss_sum);
    StepArgs args;
    args.lr = spec.lr * (1.0 - 0.2 * k);
    args.max_grad_norm = spec.max_grad_norm;
    args.adam.weight_decay = spec.weight_decay;
    const StepResult st = engine.finish_step(args);
    res.losses.push_back(loss_sum / static_cast<double>(N));
    res.norms.push_back(st.grad_norm);
    res.clip_coefs.push_back(st.clip_coef);
  }
  if (!spec.save_dir.empty()) engine.save_state(spec.save_dir);
  res.master = engine.full_master_weights();
  res.weights = read_weights(engine, spec.dtype);
  res.memory = engine.memory();
  res.groups_in_shard = engine.groups_in_shard();
  res.residuals_in_gradient_memory = model.residuals_in_gradient_memory();
  res.attention_in_gradient_memory = model.attention_in_gradient_memory();
  res.activation_bytes = model.memory().activations;
  res.overlaps_update = engine.overlaps_update();
  res.adam_step = engine.adam_step();
  return res;
}

std::vector<uint8_t> read_weights(ZeroEngine& engine, DType dtype) {
  const ShardLayout& L = engine.layout();
  std::vector<uint8_t> out(static_cast<size_t>(L.model_elems()) * dtype_size(dtype), 0);
  const size_t es = dtype_size(dtype);
  for (int g = 0; g < L.num_groups(); ++g) {  // group by group (stage 3 holds two layers at once)
    const void* w = engine.weights(g);
    const int64_t b = L.group_model_begin(g), e = L.group_model_end(g);
    std::memcpy(out.data() + static_cast<size_t>(b) * es, w, static_cast<size_t>(e - b) * es);
    engine.release(g);
  }
  return out;
}

void load_and_save_as(const std::string& dir, const std::string& out, int W, int stage, bool off,
                      DType dt) {
  CpuOps ops;
  HostMemory mem;
  for (int r = 0; r < W; ++r) {
    ShapeComm comm(W, r);
    ZeroEngine z(ParamLayout(tiny_config(false)), dt, ops, comm, mem, mem, {stage, off});
    z.load_state(dir);
    z.save_state(out);
  }
}

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> out(v.size());
  if (!v.empty()) std::memcpy(out.data(), v.data(), v.size() * 4);
  return out;
}

std::vector<uint64_t> bits(const std::vector<double>& v) {
  std::vector<uint64_t> out(v.size());
  if (!v.empty()) std::memcpy(out.data(), v.data(), v.size() * 8);
  return out;
}

}  // namespace zt::zero::test
