// Shared helpers of the ZeRO engine tests: a tiny Qwen2 model, deterministic random micro-batches,
// and a small training loop written the way the trainer drives the engine.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "dist/comm.h"
#include "io/model_config.h"
#include "model/micro_batch.h"
#include "zero/zero_engine.h"

namespace zt::zero::test {

// A 2-layer Qwen2 (vocab 97, hidden 40, 4 heads × 10, 2 KV heads, intermediate 56) — sizes chosen
// so no tensor is a multiple of the shard quantum. tied: tie_word_embeddings.
ModelConfig tiny_config(bool tied, int64_t vocab = 97);
// A 2-layer Qwen2 whose every tensor is a multiple of the shard quantum (vocab 112, hidden 64,
// 4 heads × 16, 2 KV heads, intermediate 96): alone, its shard columns are its storage.
// heads / kv_heads / head_dim: the attention's (defaults 4, 2, 16).
ModelConfig aligned_config(bool tied, int heads = 4, int kv_heads = 2, int head_dim = 16);

// Micro-batch j (global index within the step) of optimizer step k: 1–3 examples of 3–12 tokens,
// the first third of each example masked (-100). Micro-batch 1 of step 1 has no targets at all.
PackedBatch make_micro_batch(int64_t step, int64_t j, int64_t vocab);

// One training run (the trainer's loop over steps [first_step, steps)).
struct RunSpec {
  int stage = 1;
  bool offload = false;
  bool host_accum = true;      // offload: EngineOptions::host_gradient_accumulation
  int64_t delivery_elems = 0;  // EngineOptions::gradient_delivery_elems
  int accum = 1;               // micro-batches per rank per step (G)
  int steps = 3;               // run up to this step (exclusive)
  int first_step = 0;          // > 0 with load_dir: resume at this step
  DType dtype = DType::kF32;
  bool tied = false;
  double lr = 2e-3;  // step k uses lr·(1 − 0.2·k)
  double weight_decay = 0.1;
  double max_grad_norm = 0.5;
  uint64_t init_seed = 1234;
  std::string load_dir;  // non-empty: load_state instead of init_from_flat
  std::string save_dir;  // non-empty: save_state after the last step
  int64_t vocab = 97;    // > ~300: the embedding group outgrows a layer (chunked reduce-scatter)
  bool aligned = false;  // aligned_config (vocab ignored) instead of tiny_config
  int micro_steps_per_step = 0;         // EngineOptions::micro_steps_per_step
  bool checkpointing = false;           // ModelOptions::checkpointing
  bool share_activation_memory = true;  // ModelOptions::share_activation_memory
  int64_t max_tokens = 48;              // ModelOptions::max_tokens (the batches hold <= 36)
  int layers = 0;                       // > 0: num_hidden_layers instead of the config's 2
  bool keep_attention = false;          // ModelOptions::keep_attention
  int heads = 0, kv_heads = 0, head_dim = 0;  // aligned: > 0 instead of 4, 2, 16
  bool overlap_gather = false;          // EngineOptions::overlap_gather
};

// What the run produced (identical on every rank, except master: rank 0 only).
struct RunResult {
  std::vector<double> losses;         // per step: Σ CE / N over all ranks' micro-batches
  std::vector<double> norms;          // per step: pre-clip gradient norm
  std::vector<float> clip_coefs;      // per step
  std::vector<float> initial_master;  // rank 0: master weights before the first step
  std::vector<float> master;          // rank 0: final full_master_weights()
  std::vector<uint8_t> weights;  // final compute weights of the model (raw bytes, after gather)
  ZeroMemory memory;
  int64_t adam_step = 0;
  int groups_in_shard = 0;               // ZeroEngine::groups_in_shard()
  int residuals_in_gradient_memory = 0;  // CausalLM::residuals_in_gradient_memory()
  int attention_in_gradient_memory = 0;  // CausalLM::attention_in_gradient_memory()
  size_t activation_bytes = 0;           // CausalLM::memory().activations
  bool overlaps_update = false;          // ZeroEngine::overlaps_update()
  // Per step, between the backward and the update: forward() (eval) of micro-batch (k, rank), its Σ
  // CE.
  std::vector<double> eval_losses;
};

// Runs `spec` on `comm` (rank r takes micro-batches j = m·W + r, m < accum), the way the trainer
// drives the engine: the engine is the model's GroupStorage.
RunResult run_training(dist::Comm& comm, const RunSpec& spec);

// The engine's current compute weights in the flat ParamLayout order (raw bytes of `dtype`),
// read group by group through engine.weights(g) / release(g) (stage 3: gathered, collective).
std::vector<uint8_t> read_weights(ZeroEngine& engine, DType dtype);

// A Comm that only has a shape: lets a one-process test build the engine of rank `rank` of W ranks
// (memory, layout, load_state's header checks) without ever communicating; any collective throws
// zt::Error.
class ShapeComm final : public dist::Comm {
 public:
  explicit ShapeComm(int world_size, int rank = 0) {
    set_identity(rank, world_size, rank, world_size);
  }
  std::string_view backend() const override { return "shape"; }

 protected:
  void do_reduce_scatter_sum(const float*, float*, size_t, bool, dist::Stream) override { no(); }
  void do_all_gather_bytes(const void*, void*, size_t, dist::Stream) override { no(); }
  void do_broadcast(void*, size_t, int, dist::Stream) override { no(); }
  void do_barrier() override { no(); }

 private:
  [[noreturn]] static void no() { fail("ShapeComm: no collectives"); }
};

// Loads the state under `dir` (of a world size other than W: the re-sharding load) as each rank of
// W in turn (stage, offload) and saves it under `out`: one engine per rank on a ShapeComm (stages
// 0 and 3 load and save so without collectives). The untied tiny_config model.
void load_and_save_as(const std::string& dir, const std::string& out, int W, int stage, bool off,
                      DType dt);

// Raw bits of a float vector (for bitwise comparisons with readable failures).
std::vector<uint32_t> bits(const std::vector<float>& v);
std::vector<uint64_t> bits(const std::vector<double>& v);

}  // namespace zt::zero::test
