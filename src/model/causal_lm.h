// CausalLM: a Qwen2 / Llama decoder-only model written once against Ops (DESIGN §3–5,
// SFT_SEMANTICS §7). It owns four arenas sized before the first step: parameters (compute dtype),
// gradients (fp32, one contiguous buffer per parameter tensor, laid out by ParamLayout so each
// group is a contiguous range), activations, and one workspace for the ops; plus a small inputs
// arena (token ids, positions, targets, cu_seqlens, RoPE inv_freq).
//
// One call = one padding-free micro-batch (MicroBatch): the forward is, per HF,
//   x = embed[ids]; per layer: h = rmsnorm1(x); q,k,v = h·Wᵀ (+b); rope(q, k);
//   x = x + o_proj(attn(q, k, v)); h = rmsnorm2(x); x = x + down(silu(gate(h)) * up(h));
//   loss = Σ_targets CE(lm_head(rmsnorm_f(x)))
// and the backward is the same ops in reverse, written out explicitly (no autograd).
// With options.checkpointing only each layer's input is kept and the layer is recomputed just
// before its backward; results are bitwise the same as without.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "core/arena.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/micro_batch.h"
#include "model/param_layout.h"

namespace zt {

struct ModelOptions {
  DType dtype = DType::kF32;   // compute weights + activations: kF32, or kBF16 (bf16-storage)
  int64_t max_tokens = 0;      // T capacity of one micro-batch (> 0)
  int64_t max_seqlen = 0;      // longest example (tokens); 0 = max_tokens
  bool checkpointing = false;  // per-layer activation checkpointing
};

struct BackwardOptions {
  // Gradients are those of grad_scale * Σ CE over the micro-batch's targets (1/N for the
  // token-mean loss of an optimizer step whose global target count is N, SFT_SEMANTICS §3).
  float grad_scale = 1.0f;
  // false: the gradient buffers are overwritten; true: added to.
  bool accumulate = false;
  // Called with a group index (ParamLayout) as soon as that group's gradients are final, in the
  // order num_groups()-1, …, 1, 0 (for overlapping reduce-scatter with the rest of the backward).
  std::function<void(int group)> on_group_ready;
};

// Bytes of each pool, for logs and tests.
struct ModelMemory {
  size_t params = 0, grads = 0, activations = 0, workspace = 0, inputs = 0;
};

class CausalLM {
 public:
  // Plans and allocates every pool on `memory` (which must outlive the model). Throws zt::Error
  // for an options.dtype other than f32/bf16, max_tokens < 1, max_seqlen > max_tokens, a config
  // the layout rejects, or an out-of-memory (naming the pool and size).
  CausalLM(ModelConfig cfg, Ops& ops, MemoryResource& memory, ModelOptions options);
  CausalLM(const CausalLM&) = delete;
  CausalLM& operator=(const CausalLM&) = delete;

  const ModelConfig& config() const { return cfg_; }
  const ParamLayout& layout() const { return layout_; }
  const ModelOptions& options() const { return opt_; }
  Ops& ops() { return ops_; }
  ModelMemory memory() const;

  // Compute-dtype view of parameter i with its HF shape.
  Tensor param(int i) const;
  // fp32 gradient of parameter i with its HF shape.
  Tensor grad(int i) const;
  // All gradients of group g, a flat fp32 [group_end - group_begin] view (padding included and
  // kept at zero).
  Tensor group_grads(int g) const;
  // The whole gradient buffer, flat fp32 [layout().total_elems()].
  Tensor all_grads() const;
  // Sets every gradient to 0.
  void zero_grads();

  // From-scratch initialisation as HF `_init_weights` does it: Linear and embedding weights
  // ~ N(0, initializer_range), biases 0, norm weights 1, the pad_token_id row of the embedding 0.
  // The normal stream is this project's (counter-based on (seed, parameter name, element)), not
  // torch's: deterministic for a seed, independent of threads.
  void init_from_scratch(uint64_t seed);
  // Loads every parameter from an HF checkpoint (converting F32/BF16/F16 to the compute dtype).
  // Throws zt::Error naming the file and tensor for a missing tensor or a shape mismatch;
  // tensors the model does not use are logged and ignored ("lm_head.weight" of a tied model,
  // rotary inv_freq buffers).
  void load_weights(const SafetensorsReader& reader);
  // Host views of the weights under their HF names in state_dict order (for export / tests).
  std::vector<NamedTensor> named_weights() const;

  // Forward only (eval): loss statistics of the micro-batch. Throws what validate_micro_batch
  // throws.
  CeStats forward(const MicroBatch& mb);
  // Forward + backward of one micro-batch: returns the loss statistics and writes (or adds,
  // per bo.accumulate) the gradients of bo.grad_scale * Σ CE into the gradient buffers.
  CeStats forward_backward(const MicroBatch& mb, const BackwardOptions& bo);
  // fp32 logits of rows [row0, row0 + n) of the last forward: out[n, V] (host). Call after
  // forward() (valid until the next call). Throws zt::Error when the rows are out of range or
  // out is too small.
  void logits(int64_t row0, int64_t n, std::span<float> out);

 private:
  struct LayerActs;
  void plan_and_allocate(MemoryResource& memory);
  int64_t stage_inputs(const MicroBatch& mb);
  void forward_trunk(int64_t T);
  void layer_forward(int l, const LayerActs& a, const Tensor& x, const Tensor* y, int64_t T);
  void layer_backward(int l, const LayerActs& a, const Tensor& x, int64_t T, float beta);
  void linear(const Tensor& y, const Tensor& x, const LinearIds& ids);
  void linear_backward(const Tensor& dx, float beta_dx, const Tensor& dy, const Tensor& x,
                       const LinearIds& ids, float beta_w);
  Tensor act(void* p, std::initializer_list<int64_t> shape, DType dt) const;
  Tensor residual(int l, int64_t T) const;

  ModelConfig cfg_;
  ParamLayout layout_;
  Ops& ops_;
  ModelOptions opt_;
  Stream stream_;

  Arena params_{"parameters"}, grads_{"gradients"}, acts_{"activations"}, ws_{"workspace"},
      inputs_{"inputs"};
  Tensor workspace_;

  // Activation base pointers (views are made per micro-batch with its T).
  struct LayerActs {
    void *ln1, *rstd1, *q, *k, *v, *att, *lse, *xmid, *ln2, *rstd2, *gate, *up, *act;
  };
  std::vector<LayerActs> layer_acts_;  // num_layers entries, or 1 with checkpointing
  std::vector<void*> xs_;              // num_layers + 1 residual-stream inputs
  void *lnf_ = nullptr, *rstdf_ = nullptr, *tmp_ = nullptr, *cos_ = nullptr, *sin_ = nullptr;
  void *dres_ = nullptr, *dh_ = nullptr, *dh32_ = nullptr, *datt_ = nullptr, *dq_ = nullptr,
       *dk_ = nullptr, *dv_ = nullptr, *dact_ = nullptr, *logits_buf_ = nullptr;
  static constexpr int64_t kLogitRows = 8;
  // Inputs (device) and their host staging.
  void *tokens_ = nullptr, *pos_ = nullptr, *targets_ = nullptr, *cu_ = nullptr,
       *inv_freq_ = nullptr;
  std::vector<int32_t> targets_host_;
  std::vector<int32_t> cu_host_;
  Varlen seqs_;
  int64_t last_T_ = -1;
};

}  // namespace zt
