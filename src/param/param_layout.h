// ParamLayout: the parameter tensors of a decoder-only causal LM of any supported family — HF
// names and shapes, in HF state_dict order — and where each lives in one flat buffer (element
// offsets). The same layout serves the compute weights (fp32 or bf16) and the fp32 gradients, so
// the gradients of one *group* (the embedding, one transformer layer, the final norm + untied head)
// are one contiguous range — the unit the ZeRO engine buckets and reduce-scatters (DESIGN §6).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/model_config.h"

namespace zt {

// One parameter tensor.
struct ParamSpec {
  std::string name;            // HF name, e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // HF shape; Linear weights are [out, in]
  int64_t numel = 0;
  int64_t offset = 0;     // elements from the start of the flat buffer (multiple of kAlign)
  int group = 0;          // see ParamLayout::group_*
  bool no_decay = false;  // a bias or a norm weight (SFT_SEMANTICS §4: no weight decay)
};

// Parameter indices (into ParamLayout::params) of one Linear; b = -1 when it has no bias. A
// Linear may be a row range of a fused HF tensor (Phi-3's qkv_proj, gate_up_proj): rows
// [row0, row0 + rows) of W [out_total, in] (and of b) — contiguous, as W is row-major.
struct LinearIds {
  int w = -1;
  int b = -1;
  int64_t row0 = 0;  // first output row of W this Linear uses
  int64_t rows = 0;  // output rows it uses (the whole of W when not fused)
};

// Parameter indices of one decoder layer; -1 for a norm the family does not have. The norms are
// named by what they do, the HF names by family (NormPlacement, io/model_config.h):
//   attn_in_norm:  input_layernorm (kPre, kPrePost)
//   attn_out_norm: post_attention_layernorm (kPost, kPrePost)
//   mlp_in_norm:   post_attention_layernorm (kPre), pre_feedforward_layernorm (kPrePost)
//   mlp_out_norm:  post_feedforward_layernorm (kPost, kPrePost)
//   q_norm, k_norm: self_attn.q_norm / k_norm (QkNorm::kPerHead [D], kProjection [H·D])
struct LayerIds {
  int attn_in_norm = -1, attn_out_norm = -1, mlp_in_norm = -1, mlp_out_norm = -1;
  int q_norm = -1, k_norm = -1;
  LinearIds q, k, v, o;
  LinearIds gate, up, down;
};

class ParamLayout {
 public:
  // Every offset is a multiple of kAlign elements (64 bytes for fp32, 64 for bf16 too as kAlign
  // is 32 elements): views of any dtype start on a cache line.
  static constexpr int64_t kAlign = 32;

  // Builds the layout of `cfg`: model.embed_tokens.weight [V, H]; per layer in HF module order:
  // self_attn q/k/v (or Phi-3's fused qkv_proj) and o_proj, q_norm / k_norm when cfg.qk_norm, mlp
  // gate/up (or fused gate_up_proj) and down, then the layer's norms in the family's order
  // (LayerIds); q/k/v biases when cfg.qkv_bias, an o_proj bias when cfg.o_proj_bias, MLP biases
  // when cfg.mlp_bias; model.norm.weight [H]; lm_head.weight [V, H] unless
  // cfg.tie_word_embeddings (then lm_head() == embed()). Throws zt::Error for non-positive sizes.
  explicit ParamLayout(const ModelConfig& cfg);

  const std::vector<ParamSpec>& params() const { return params_; }
  const ParamSpec& param(int i) const { return params_.at(static_cast<size_t>(i)); }
  int num_params() const { return static_cast<int>(params_.size()); }
  // Index of the parameter called `name`, or -1.
  int find(std::string_view name) const;

  int embed() const { return embed_; }
  int final_norm() const { return final_norm_; }
  int lm_head() const { return lm_head_; }  // == embed() when tied
  bool tied() const { return lm_head_ == embed_; }
  const LayerIds& layer(int l) const { return layers_.at(static_cast<size_t>(l)); }
  int num_layers() const { return static_cast<int>(layers_.size()); }

  // Groups: 0 = embedding, 1 + l = decoder layer l, num_layers() + 1 = final norm (+ untied
  // lm_head). The backward completes them in the order num_groups()-1, …, 1, 0.
  int num_groups() const { return num_layers() + 2; }
  static int group_of_layer(int l) { return 1 + l; }
  int group_head() const { return num_layers() + 1; }
  // [begin, end) element range of group g in the flat buffer (padding included).
  int64_t group_begin(int g) const { return group_begin_.at(static_cast<size_t>(g)); }
  int64_t group_end(int g) const { return group_begin_.at(static_cast<size_t>(g) + 1); }

  // Elements of the flat buffer (sum of numel + alignment padding).
  int64_t total_elems() const { return total_; }

 private:
  int add(std::string name, std::vector<int64_t> shape, int group, bool no_decay);
  std::vector<ParamSpec> params_;
  std::vector<LayerIds> layers_;
  std::vector<int64_t> group_begin_;
  int embed_ = -1, final_norm_ = -1, lm_head_ = -1;
  int64_t total_ = 0;
};

}  // namespace zt
