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
//
// Weights and gradients are reached per group (ParamLayout: embedding, one layer, final norm +
// untied head) through one base pointer each, so a caller can keep them elsewhere (ZeRO-3 keeps
// only a shard plus ~2 layers' full weights on the device; every stage packs a layer's gradients
// into its bucket right after that layer's backward): with ModelOptions::own_weights / own_grads
// false the model allocates no such arena and the caller binds each group's storage
// (bind_group_weights / bind_group_grads), typically from the GroupHooks the model calls around
// each group's use (the order is documented at GroupHooks).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
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
  // false: no parameter arena (memory().params == 0); every group's weights are bound by the
  // caller (bind_group_weights) before the model uses them.
  bool own_weights = true;
  // false: no gradient arena (memory().grads == 0); every group's gradients are bound by the
  // caller (bind_group_grads); all_grads() / zero_grads() are then errors.
  bool own_grads = true;
};

struct BackwardOptions {
  // Gradients are those of grad_scale * Σ CE over the micro-batch's targets (1/N for the
  // token-mean loss of an optimizer step whose global target count is N, SFT_SEMANTICS §3).
  float grad_scale = 1.0f;
  // false: the gradient buffers are overwritten; true: added to.
  bool accumulate = false;
  // Called with a group index (ParamLayout) as soon as that group's gradients are final, in the
  // order num_groups()-1, …, 1, 0 (for overlapping reduce-scatter with the rest of the backward).
  // The model writes group g's gradients only from its backward use of g up to on_group_ready(g)
  // (or reads them too, with accumulate): once on_group_ready(g) has returned the caller may
  // rebind or reuse that storage, provided the work it enqueued (e.g. packing the bucket) is
  // ordered on the model's stream (stream()). Exception: with a tied embedding, group 0's
  // gradient is written by the LM-head step at the start of the backward and added to by the
  // embedding backward at its end, so group 0's gradient storage must stay bound for the whole
  // backward. The head group's and (tied) group 0's gradients must be bound when the backward
  // starts, a layer's after its acquire hook, an untied group 0's before the embedding backward.
  // With accumulate = false the model writes every parameter element of a group but never the
  // alignment padding between parameters: bound gradient storage must hold zeros there (zero it
  // once; the model never writes it).
  std::function<void(int group)> on_group_ready;
};

// Called by the model around the use of one group's WEIGHTS in a pass (null = no-op), with the
// group index g (ParamLayout). They run on the host as the work is enqueued on the model's stream
// (CausalLM::stream()), not when it completes: whatever a hook enqueues (a copy into a slot, a
// bucket pack) must be ordered on that same stream. forward() reads no gradients; per pass a
// layer's group is acquired once in the forward and once more in the backward. The exact
// sequence (head = num_groups() - 1, L = num_layers()):
//   forward() (eval):
//     acquire(0) [embedding]; for l = 0..L-1: acquire(1+l), layer l, release(1+l);
//     acquire(head) [final norm, untied lm_head], LM head + CE, release(head), release(0).
//   forward_backward(mb, bo):
//     the same forward up to acquire(head) and the final norm (group 0 stays acquired for the
//     whole pass: a tied lm_head is the embedding); then LM head + CE backward, final-norm
//     backward, on_group_ready(head), release(head); for l = L-1..0: acquire(1+l),
//     (recompute layer l when checkpointing), layer l backward, on_group_ready(1+l),
//     release(1+l); embedding backward, on_group_ready(0), release(0).
//   logits(): acquire(g) and release(g) of the lm_head's group (0 when tied, else head) around
//     its matmuls.
// acquire(g) may bind group g's weights (bind_group_weights) and release(g) may unbind or rebind
// them: the model reads them only in between. After acquire(g) the model throws zt::Error when
// group g's weights (or, in a backward, its gradients) are unbound. A pass that throws stops
// where it is: groups acquired so far are not released.
struct GroupHooks {
  std::function<void(int g)> acquire;
  std::function<void(int g)> release;
};

// Bytes of each pool, for logs and tests.
struct ModelMemory {
  size_t params = 0, grads = 0, activations = 0, workspace = 0, inputs = 0;
};

class CausalLM {
 public:
  // Plans and allocates every pool on `memory` (which must outlive the model; its device is the
  // model's device). Throws zt::Error for an options.dtype other than f32/bf16, max_tokens < 1,
  // max_seqlen > max_tokens, a config the layout rejects, or an out-of-memory (naming the pool
  // and size). With own weights / grads every group is bound to the model's own arena.
  CausalLM(ModelConfig cfg, Ops& ops, MemoryResource& memory, ModelOptions options);
  CausalLM(const CausalLM&) = delete;
  CausalLM& operator=(const CausalLM&) = delete;

  const ModelConfig& config() const { return cfg_; }
  const ParamLayout& layout() const { return layout_; }
  const ModelOptions& options() const { return opt_; }
  Ops& ops() { return ops_; }
  // The stream every op of the model is enqueued on (hooks order their work on it).
  Stream stream() const { return stream_; }
  ModelMemory memory() const;

  // Compute-dtype view of parameter i with its HF shape, in its group's bound storage (data ==
  // nullptr while the group is unbound).
  Tensor param(int i) const;
  // fp32 gradient of parameter i with its HF shape (data == nullptr while its group's gradients
  // are unbound).
  Tensor grad(int i) const;
  // All weights of group g, a flat compute-dtype [group_end - group_begin] view (padding
  // included); data == nullptr while unbound.
  Tensor group_weights(int g) const;
  // All gradients of group g, a flat fp32 [group_end - group_begin] view (padding included and
  // kept at zero); data == nullptr while unbound.
  Tensor group_grads(int g) const;
  // The model's own parameter buffer, flat compute-dtype [layout().total_elems()]. Throws
  // zt::Error with own_weights = false.
  Tensor all_weights() const;
  // The whole gradient buffer, flat fp32 [layout().total_elems()]. Throws zt::Error with
  // own_grads = false (use group_grads).
  Tensor all_grads() const;
  // Sets every gradient to 0. Throws zt::Error with own_grads = false.
  void zero_grads();

  // Points group g's weights at `base`: device memory (the model's device) holding
  // [group_end(g) - group_begin(g)] elements of the compute dtype laid out as ParamLayout does
  // from group_begin(g) (padding included); nullptr unbinds. Allowed at any time, also from a
  // hook; the model reads it only between acquire(g) and release(g). Throws zt::Error for g
  // outside [0, num_groups()) or with own_weights = true.
  void bind_group_weights(int g, void* base);
  // Points group g's gradients at `base`: fp32 [group_end(g) - group_begin(g)] on the model's
  // device (padding zero, see BackwardOptions::on_group_ready); nullptr unbinds. Throws zt::Error
  // for g outside [0, num_groups()) or with own_grads = true.
  void bind_group_grads(int g, float* base);
  // Hooks called around each group's use (see GroupHooks); replaces the previous ones.
  void set_group_hooks(GroupHooks hooks) { hooks_ = std::move(hooks); }
  // "model.embed_tokens", "model.layers.4", "model.norm + lm_head" (untied) / "model.norm": the
  // HF prefix of group g's parameters, for messages.
  std::string group_name(int g) const;

  // From-scratch initialisation as HF `_init_weights` does it: Linear and embedding weights
  // ~ N(0, initializer_range), biases 0, norm weights 1, the pad_token_id row of the embedding 0.
  // The normal stream is this project's (counter-based on (seed, parameter name, element)), not
  // torch's: deterministic for a seed, independent of threads. Writes the model's own weights;
  // throws zt::Error with own_weights = false (use the overload with a flat buffer).
  void init_from_scratch(uint64_t seed);
  // The same values written into `flat`: a [layout().total_elems()] tensor of the compute dtype
  // in host memory (Device::kCPU) or on the model's device, at ParamLayout offsets (padding left
  // as it is). Throws zt::Error naming what was expected for another dtype, shape or device.
  void init_from_scratch(uint64_t seed, const Tensor& flat);
  // Loads every parameter from an HF checkpoint (converting F32/BF16/F16 to the compute dtype)
  // into the model's own weights. Throws zt::Error naming the file and tensor for a missing
  // tensor or a shape mismatch, or with own_weights = false (use the overload with a flat
  // buffer); tensors the model does not use are logged and ignored ("lm_head.weight" of a tied
  // model, rotary inv_freq buffers).
  void load_weights(const SafetensorsReader& reader);
  // The same into `flat` (as for init_from_scratch(seed, flat); the same errors).
  void load_weights(const SafetensorsReader& reader, const Tensor& flat);
  // Host views of the own weights under their HF names in state_dict order (for export / tests).
  // Throws zt::Error when they are not in host memory or with own_weights = false.
  std::vector<NamedTensor> named_weights() const;
  // The same views into `flat`, a host (Device::kCPU) [layout().total_elems()] tensor of the
  // compute dtype. Throws zt::Error naming what was expected otherwise.
  std::vector<NamedTensor> named_weights(const Tensor& flat) const;

  // Forward only (eval): loss statistics of the micro-batch. Throws what validate_micro_batch
  // throws, or zt::Error for a group whose weights are unbound after its acquire hook.
  CeStats forward(const MicroBatch& mb);
  // Forward + backward of one micro-batch: returns the loss statistics and writes (or adds,
  // per bo.accumulate) the gradients of bo.grad_scale * Σ CE into the gradient buffers. Throws
  // as forward() does, or for a group whose gradients are unbound when its backward starts.
  CeStats forward_backward(const MicroBatch& mb, const BackwardOptions& bo);
  // fp32 logits of rows [row0, row0 + n) of the last forward: out[n, V] (host). Call after
  // forward() (valid until the next call). Throws zt::Error when the rows are out of range or
  // out is too small.
  void logits(int64_t row0, int64_t n, std::span<float> out);

 private:
  // Throws zt::Error for g outside [0, num_groups()) or storage the model owns (`owned`).
  void check_bind(const char* what, int g, bool owned, const char* noun, const char* option) const;
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
  // Parameter i with its HF shape inside a flat [total_elems()] compute-dtype buffer.
  Tensor flat_param(const Tensor& flat, int i) const;
  void check_flat(const Tensor& flat, std::string_view what, bool host_only) const;
  // Hooks plus the bound checks (after the hook, so a hook may bind).
  void acquire(int g);
  void release(int g);
  void require_grads(int g) const;

  ModelConfig cfg_;
  ParamLayout layout_;
  Ops& ops_;
  ModelOptions opt_;
  Stream stream_;

  Arena params_{"parameters"}, grads_{"gradients"}, acts_{"activations"}, ws_{"workspace"},
      inputs_{"inputs"};
  Tensor workspace_;
  Device device_ = Device::kCPU;  // where the pools (and bound storage) live

  // Group g's storage: element group_begin(g) of its weights (compute dtype) / gradients (fp32);
  // nullptr = unbound.
  std::vector<char*> wbase_;
  std::vector<float*> gbase_;
  GroupHooks hooks_;

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
