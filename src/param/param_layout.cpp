#include "param/param_layout.h"

#include <fmt/format.h>

#include "core/error.h"

namespace zt {

int ParamLayout::add(std::string name, std::vector<int64_t> shape, int group, bool no_decay) {
  ParamSpec p;
  p.name = std::move(name);
  p.numel = 1;
  for (int64_t d : shape) p.numel *= d;
  p.shape = std::move(shape);
  p.group = group;
  p.no_decay = no_decay;
  while (static_cast<int>(group_begin_.size()) <= group) group_begin_.push_back(total_);
  p.offset = total_;
  total_ += (p.numel + kAlign - 1) / kAlign * kAlign;
  params_.push_back(std::move(p));
  return static_cast<int>(params_.size()) - 1;
}

ParamLayout::ParamLayout(const ModelConfig& c) {
  const int64_t V = c.vocab_size, H = c.hidden_size, I = c.intermediate_size;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, D = c.head_dim;
  if (V <= 0 || H <= 0 || I <= 0 || Hq <= 0 || Hkv <= 0 || D <= 0 || c.num_hidden_layers <= 0)
    fail(
        "ParamLayout: config {} has a non-positive size (vocab {}, hidden {}, intermediate {}, "
        "heads {}, kv heads {}, head_dim {}, layers {})",
        c.source, V, H, I, Hq, Hkv, D, c.num_hidden_layers);
  embed_ = add("model.embed_tokens.weight", {V, H}, 0, false);
  auto linear = [&](const std::string& n, int64_t out, int64_t in, bool bias, int g) {
    LinearIds ids;
    ids.w = add(n + ".weight", {out, in}, g, false);
    if (bias) ids.b = add(n + ".bias", {out}, g, true);
    ids.rows = out;
    return ids;
  };
  // One Linear, or `parts` row ranges of one fused tensor (Phi-3).
  auto fused = [&](const std::string& n, std::initializer_list<int64_t> outs, int64_t in, bool bias,
                   int g) {
    int64_t total = 0;
    for (int64_t o : outs) total += o;
    const LinearIds whole = linear(n, total, in, bias, g);
    std::vector<LinearIds> parts;
    int64_t row = 0;
    for (int64_t o : outs) {
      LinearIds ids = whole;
      ids.row0 = row;
      ids.rows = o;
      parts.push_back(ids);
      row += o;
    }
    return parts;
  };
  const bool per_head = c.qk_norm == QkNorm::kPerHead;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const int g = group_of_layer(static_cast<int>(l));
    const std::string p = fmt::format("model.layers.{}.", l);
    LayerIds ids;
    if (c.fused_qkv) {
      const auto qkv =
          fused(p + "self_attn.qkv_proj", {Hq * D, Hkv * D, Hkv * D}, H, c.qkv_bias, g);
      ids.q = qkv[0], ids.k = qkv[1], ids.v = qkv[2];
    } else {
      ids.q = linear(p + "self_attn.q_proj", Hq * D, H, c.qkv_bias, g);
      ids.k = linear(p + "self_attn.k_proj", Hkv * D, H, c.qkv_bias, g);
      ids.v = linear(p + "self_attn.v_proj", Hkv * D, H, c.qkv_bias, g);
    }
    ids.o = linear(p + "self_attn.o_proj", H, Hq * D, c.o_proj_bias, g);
    if (c.qk_norm != QkNorm::kNone) {
      ids.q_norm = add(p + "self_attn.q_norm.weight", {per_head ? D : Hq * D}, g, true);
      ids.k_norm = add(p + "self_attn.k_norm.weight", {per_head ? D : Hkv * D}, g, true);
    }
    if (c.fused_gate_up) {
      const auto gu = fused(p + "mlp.gate_up_proj", {I, I}, H, c.mlp_bias, g);
      ids.gate = gu[0], ids.up = gu[1];
    } else {
      ids.gate = linear(p + "mlp.gate_proj", I, H, c.mlp_bias, g);
      ids.up = linear(p + "mlp.up_proj", I, H, c.mlp_bias, g);
    }
    ids.down = linear(p + "mlp.down_proj", H, I, c.mlp_bias, g);
    const auto norm = [&](const char* name) { return add(p + name, {H}, g, true); };
    switch (c.norm_placement) {
      case NormPlacement::kPre:
        ids.attn_in_norm = norm("input_layernorm.weight");
        ids.mlp_in_norm = norm("post_attention_layernorm.weight");
        break;
      case NormPlacement::kPost:
        ids.attn_out_norm = norm("post_attention_layernorm.weight");
        ids.mlp_out_norm = norm("post_feedforward_layernorm.weight");
        break;
      case NormPlacement::kPrePost:
        ids.attn_in_norm = norm("input_layernorm.weight");
        ids.attn_out_norm = norm("post_attention_layernorm.weight");
        ids.mlp_in_norm = norm("pre_feedforward_layernorm.weight");
        ids.mlp_out_norm = norm("post_feedforward_layernorm.weight");
        break;
    }
    layers_.push_back(ids);
  }
  final_norm_ = add("model.norm.weight", {H}, group_head(), true);
  lm_head_ = c.tie_word_embeddings ? embed_ : add("lm_head.weight", {V, H}, group_head(), false);
  group_begin_.push_back(total_);
}

int ParamLayout::find(std::string_view name) const {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].name == name) return static_cast<int>(i);
  return -1;
}

}  // namespace zt
