// CausalLM: a Qwen2 / Llama decoder-only model written once against Ops (DESIGN §3–5,
// SFT_SEMANTICS §7). It owns its activations, one workspace for the ops and a small inputs arena
// (token ids, positions, targets, cu_seqlens, RoPE inv_freq), all sized before the first step.
// Its parameters live in a GroupStorage (param/group_storage.h): its own OwnedStorage (full
// weight and gradient buffers) unless the caller gives one — the trainer gives the ZeRO engine,
// which gathers a group's weights where the stage needs that and reduce-scatters each group's
// gradients as soon as they are final.
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
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/ops.h"
#include "core/arena.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/micro_batch.h"
#include "model/owned_storage.h"
#include "param/group_storage.h"
#include "param/param_layout.h"

namespace zt {

struct ModelOptions {
  DType dtype = DType::kF32;   // compute weights + activations: kF32, or kBF16 (bf16-storage)
  int64_t max_tokens = 0;      // T capacity of one micro-batch (> 0)
  int64_t max_seqlen = 0;      // longest example (tokens); 0 = max_tokens
  bool checkpointing = false;  // per-layer activation checkpointing
  // With checkpointing: keep every layer's attention output [T, Hq·D] (compute dtype) and softmax
  // statistics lse [Hq, T] (fp32) from the forward, so the recomputation before a layer's backward
  // skips the attention forward (selective activation checkpointing; torchtitan's "selective"
  // mode). Costs T·(Hq·D·dtype bytes + Hq·4) bytes of activations for each layer whose output
  // does not fit in lent gradient memory (attention_in_gradient_memory(); all L when none is
  // lent); changes no bit of the result.
  bool keep_attention = false;
  // Buffers that are never live at the same time share memory: under checkpointing the fused
  // cross-entropy's workspace is the layer activation set; the attention's gradient buffers and
  // workspace are carved from each layer's MLP activations (each where it fits). Changes no bit;
  // false gives every buffer its own memory (tests compare the two).
  bool share_activation_memory = true;
};

struct BackwardOptions {
  // Gradients are those of grad_scale * Σ CE over the micro-batch's targets (1/N for the
  // token-mean loss of an optimizer step whose global target count is N, SFT_SEMANTICS §3).
  float grad_scale = 1.0f;
  // false: the gradient buffers are overwritten; true: added to. With false the model writes
  // every parameter element of a group but never the alignment padding between parameters.
  bool accumulate = false;
};

// Bytes of each pool, for logs and tests.
struct ModelMemory {
  size_t params = 0, grads = 0, activations = 0, workspace = 0, inputs = 0;
};

class CausalLM {
 public:
  // Plans and allocates every pool on `memory` (which must outlive the model; its device is the
  // model's device), the parameters included (an OwnedStorage: full weights and gradients).
  // Throws zt::Error for an options.dtype other than f32/bf16, max_tokens < 1, max_seqlen >
  // max_tokens, a config the layout rejects, or an out-of-memory (naming the pool and size).
  CausalLM(ModelConfig cfg, Ops& ops, MemoryResource& memory, ModelOptions options);
  // The same without parameter pools: every group's weights and gradients come from `storage`
  // (which must outlive the model and be laid out as ParamLayout(cfg) with options.dtype weights
  // on memory's device; the ZeRO engine in the trainer).
  CausalLM(ModelConfig cfg, Ops& ops, MemoryResource& memory, ModelOptions options,
           GroupStorage& storage);
  CausalLM(const CausalLM&) = delete;
  CausalLM& operator=(const CausalLM&) = delete;

  const ModelConfig& config() const { return cfg_; }
  const ParamLayout& layout() const { return layout_; }
  const ModelOptions& options() const { return opt_; }
  Ops& ops() { return ops_; }
  // The stream every op of the model is enqueued on (a GroupStorage orders its work on it).
  Stream stream() const { return stream_; }
  ModelMemory memory() const;
  // Whether the fused cross-entropy's workspace is the layer activation set (gradient
  // checkpointing; the set extended by ce_overhang_bytes() when it is smaller and that is cheaper
  // than the pool holding the buffer), not part of the workspace pool.
  bool ce_shares_layer_set() const { return ce_in_layer_set_; }
  // Bytes the layer activation set was extended by for the cross-entropy's workspace to fit in it
  // (0 when it fits, or when the cross-entropy has its own buffer).
  size_t ce_overhang_bytes() const { return ce_in_layer_set_ ? ce_overhang_ : 0; }
  // Whether the attention's gradient buffers and workspace live in each layer's MLP activations
  // (when those are large enough: every family's real configuration) instead of their own pools.
  bool attention_in_mlp_activations() const { return attn_in_mlp_; }
  // How many residual-stream checkpoints (layer inputs x.1 … x.L, the last the final norm's
  // input) forward_backward keeps in the gradient memory of the layer that writes them
  // (GroupStorage::gradient_scratch: the ZeRO engine alone with one micro-step per step), not in
  // activation memory: T·hidden_size·dtype bytes each. 0 without share_activation_memory.
  int residuals_in_gradient_memory() const { return residuals_in_grads_; }
  // Under checkpointing: how many layers keep their attention output [T, Hq·D] and lse [Hq, T]
  // from the forward in such lent gradient memory (after the residuals, where they fit; never
  // layer 0), so that their recomputation skips the attention forward, as keep_attention does,
  // at no memory cost (keep_attention then reserves activation memory for the other layers
  // only). Changes no bit. 0 without share_activation_memory.
  int attention_in_gradient_memory() const { return att_in_grads_; }

  // Compute-dtype view of parameter i with its HF shape: in the model's own storage, or (a
  // caller's storage) where the storage put its group for the use in progress (data == nullptr
  // outside it).
  Tensor param(int i) const;
  // fp32 gradient of parameter i with its HF shape (the same rule).
  Tensor grad(int i) const;
  // The views below need the model's own storage (the first constructor); with a caller's
  // storage they throw zt::Error naming the call.
  // All weights of group g, a flat compute-dtype [group_end - group_begin] view (padding
  // included).
  Tensor group_weights(int g) const;
  // All gradients of group g, a flat fp32 [group_end - group_begin] view (padding included and
  // kept at zero).
  Tensor group_grads(int g) const;
  // The model's own parameter buffer, flat compute-dtype [layout().total_elems()].
  Tensor all_weights() const;
  // The whole gradient buffer, flat fp32 [layout().total_elems()].
  Tensor all_grads() const;
  // Sets every gradient to 0.
  void zero_grads();
  // "model.embed_tokens", "model.layers.4", "model.norm + lm_head" (untied) / "model.norm": the
  // HF prefix of group g's parameters, for messages.
  std::string group_name(int g) const;

  // From-scratch initialisation as HF `_init_weights` does it: Linear and embedding weights
  // ~ N(0, initializer_range), biases 0, norm weights 1, the pad_token_id row of the embedding 0.
  // The normal stream is this project's (counter-based on (seed, parameter name, element)), not
  // torch's: deterministic for a seed, independent of threads. Writes the model's own weights;
  // throws zt::Error with a caller's storage (use the overload with a flat buffer).
  void init_from_scratch(uint64_t seed);
  // The same values written into `flat`: a [layout().total_elems()] tensor of the compute dtype
  // in host memory (Device::kCPU) or on the model's device, at ParamLayout offsets (padding left
  // as it is). Throws zt::Error naming what was expected for another dtype, shape or device.
  void init_from_scratch(uint64_t seed, const Tensor& flat);
  // Loads every parameter from an HF checkpoint (converting F32/BF16/F16 to the compute dtype)
  // into the model's own weights. Throws zt::Error naming the file and tensor for a missing
  // tensor or a shape mismatch, or with a caller's storage (use the overload with a flat
  // buffer); tensors the model does not use are logged and ignored ("lm_head.weight" of a tied
  // model, rotary inv_freq buffers).
  void load_weights(const SafetensorsReader& reader);
  // The same into `flat` (as for init_from_scratch(seed, flat); the same errors).
  void load_weights(const SafetensorsReader& reader, const Tensor& flat);
  // Host views of the own weights under their HF names in state_dict order (for export / tests).
  // Throws zt::Error when they are not in host memory or with a caller's storage.
  std::vector<NamedTensor> named_weights() const;
  // The same views into `flat`, a host (Device::kCPU) [layout().total_elems()] tensor of the
  // compute dtype. Throws zt::Error naming what was expected otherwise.
  std::vector<NamedTensor> named_weights(const Tensor& flat) const;

  // Forward only (eval): loss statistics of the micro-batch. Calls the storage per group
  // (param/group_storage.h: under ZeRO-3 each call all-gathers, so every rank must run the same
  // number of forwards). Throws what validate_micro_batch throws, or zt::Error for a group the
  // storage gives no weights.
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
  CausalLM(ModelConfig cfg, Ops& ops, MemoryResource& memory, ModelOptions options,
           GroupStorage* storage);
  struct LayerActs;
  void plan_and_allocate(MemoryResource& memory);
  int64_t stage_inputs(const MicroBatch& mb);
  // The embedding, every layer and the final norm; layer l reads xs[l] and writes xs[l + 1].
  void forward_trunk(int64_t T, const std::vector<void*>& xs);
  void layer_forward(int l, const LayerActs& a, const Tensor& x, const Tensor* y, int64_t T);
  // RMSNorm of the family's style: y = norm(x) with weight parameter w, rstd [rows] f32.
  void norm_fwd(const Tensor& y, const Tensor& rstd, const Tensor& x, int w);
  // Its backward: dx (+)= …, grad(w) = beta*grad(w) + …
  void norm_bwd(const Tensor& dx, bool accumulate_dx, const Tensor& dy, const Tensor& x, int w,
                const Tensor& rstd, float beta);
  // The cos/sin tables of layer l's RoPE ([T, rotary_dim/2] each), or false for a layer without.
  bool rope_of(int l, int64_t T, Tensor& cos, Tensor& sin) const;
  void layer_backward(int l, const LayerActs& a, const Tensor& x, int64_t T, float beta);
  // A Linear's weight [rows, in] and bias [rows] (empty when none): row ranges of fused tensors.
  Tensor lin_w(const LinearIds& ids) const;
  Tensor lin_b(const LinearIds& ids) const;
  void linear(const Tensor& y, const Tensor& x, const LinearIds& ids);
  // dx = beta_dx·dx + dy·W and dW = beta_w·dW + dyᵀ·x (and the bias gradient). weight_first:
  // dW first, so dx may alias x (the two GEMMs are independent: no bit changes).
  void linear_backward(const Tensor& dx, float beta_dx, const Tensor& dy, const Tensor& x,
                       const LinearIds& ids, float beta_w, bool weight_first = false);
  Tensor act(void* p, std::initializer_list<int64_t> shape, DType dt) const;
  // The activation view of `slot`, or nullptr for a view reserved with 0 bytes (a buffer the
  // family does not use: a stray use fails loudly instead of aliasing the next view).
  void* ptr_or_null(Arena::Slot slot) const;
  Tensor residual(int l, int64_t T) const;
  // Parameter i with its HF shape inside a flat [total_elems()] compute-dtype buffer.
  Tensor flat_param(const Tensor& flat, int i) const;
  void check_flat(const Tensor& flat, std::string_view what, bool host_only) const;
  // The storage calls with the model's checks: group g's weights for a use (the ZeRO engine
  // may all-gather here), done with them, its gradient buffer, its gradients final (the ZeRO
  // engine reduce-scatters here).
  void acquire(int g);
  void release(int g);
  void take_grads(int g);
  void grads_ready(int g);
  // Throws unless the model has its own storage.
  OwnedStorage& own(const char* what) const;

  ModelConfig cfg_;
  ParamLayout layout_;
  Ops& ops_;
  ModelOptions opt_;
  Stream stream_;

  Arena acts_{"activations"}, ws_{"workspace"}, inputs_{"inputs"};
  std::unique_ptr<OwnedStorage> own_;  // the model's own parameters (first constructor)
  GroupStorage* storage_ = nullptr;    // own_ or the caller's
  Tensor workspace_;
  // The fused cross-entropy's workspace: workspace_, or under gradient checkpointing the layer
  // activation set, extended when needed (ce_in_layer_set_; see plan_and_allocate).
  Tensor ce_workspace_;
  bool ce_in_layer_set_ = false;
  size_t ce_overhang_ = 0;  // see ce_overhang_bytes()
  Device device_ = Device::kCPU;  // where the pools (and bound storage) live

  // Group g's weights (compute dtype) / gradients (fp32) as the storage gave them for the use in
  // progress (element group_begin(g) of the layout).
  std::vector<const char*> wbase_;
  std::vector<float*> gbase_;

  // Activation base pointers (views are made per micro-batch with its T).
  // Per layer: the norm outputs and statistics, q/k/v (after q/k norm and RoPE), attention output
  // and lse, the residual between attention and MLP, the MLP's gate/up/activation; with q/k norm
  // the projections before it (q_raw, k_raw) and its statistics; with post-norms (OLMo 2, Gemma)
  // the o_proj / down_proj outputs they normalise and their statistics.
  static constexpr size_t kLayerActs = 21;
  struct LayerActs {
    void *ln1, *rstd1, *q, *k, *v, *att, *lse, *xmid, *ln2, *rstd2, *gate, *up, *act;
    void *q_raw, *k_raw, *rstd_q, *rstd_k, *attn_out, *rstd_ao, *mlp_out, *rstd_mo;
  };
  std::vector<LayerActs> layer_acts_;  // num_layers entries, or 1 with checkpointing
  // Per layer (empty when no layer keeps them): where its attention output and lse are kept —
  // lent gradient memory (kept_lent_: forward_backward only), activation memory (keep_attention)
  // — or nullptr (the LayerActs' att / lse, recomputed).
  std::vector<void*> kept_att_, kept_lse_;
  std::vector<bool> kept_lent_;  // per layer (with kept_att_): in lent gradient memory
  int att_in_grads_ = 0;
  bool training_pass_ = false;  // forward_backward's passes (else forward()'s)
  // Layer l's attention output and lse buffers.
  void* att_of(int l, const LayerActs& a) const;
  void* lse_of(int l, const LayerActs& a) const;
  std::vector<void*> xs_;  // num_layers + 1 residual-stream inputs (forward_backward)
  // forward()'s: xs_, or where some of those are gradient memory (which forward() must not
  // touch: it may run between a backward and the step that reads its gradients) x.0 and
  // d.residual (unused by a forward) in turn.
  std::vector<void*> xs_eval_;
  int residuals_in_grads_ = 0;
  void *lnf_ = nullptr, *rstdf_ = nullptr, *tmp_ = nullptr, *cos_ = nullptr, *sin_ = nullptr;
  void *cosl_ = nullptr, *sinl_ = nullptr;  // the local RoPE's tables (Gemma 3 sliding layers)
  bool uses_local_rope_ = false;
  float embed_scale_ = 1.0f;  // cfg.embed_scale in the compute dtype
  int64_t pad_row_ = -1;      // HF padding_idx (pad_token_id), -1 for none
  void* pad_save_ = nullptr;  // fp32 [H]: the pad row's gradient kept across embedding_bwd
  void *dres_ = nullptr, *dh_ = nullptr, *dh32_ = nullptr, *datt_ = nullptr, *dq_ = nullptr,
       *dk_ = nullptr, *dv_ = nullptr, *logits_buf_ = nullptr;
  // The attention's gradient buffers and workspace for a layer. With attn_in_mlp_ they are carved
  // from that layer's MLP activations (gate, up, act: contiguous, and dead while the attention
  // runs — before the MLP forward writes them, after the MLP backward has read them) at the byte
  // offsets below; else the dedicated d.att / d.q / d.k / d.v buffers and workspace_.
  struct AttnBufs {
    void *datt, *dq, *dk, *dv;
    Tensor ws;
  };
  AttnBufs attn_bufs(const LayerActs& a) const;
  bool attn_in_mlp_ = false;
  size_t off_dq_ = 0, off_dk_ = 0, off_dv_ = 0, off_aws_ = 0, attn_ws_bytes_ = 0;
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
