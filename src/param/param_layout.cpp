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
    return ids;
  };
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const int g = group_of_layer(static_cast<int>(l));
    const std::string p = fmt::format("model.layers.{}.", l);
    LayerIds ids;
    ids.q = linear(p + "self_attn.q_proj", Hq * D, H, c.qkv_bias, g);
    ids.k = linear(p + "self_attn.k_proj", Hkv * D, H, c.qkv_bias, g);
    ids.v = linear(p + "self_attn.v_proj", Hkv * D, H, c.qkv_bias, g);
    ids.o = linear(p + "self_attn.o_proj", H, Hq * D, c.o_proj_bias, g);
    ids.gate = linear(p + "mlp.gate_proj", I, H, false, g);
    ids.up = linear(p + "mlp.up_proj", I, H, false, g);
    ids.down = linear(p + "mlp.down_proj", H, I, false, g);
    ids.input_layernorm = add(p + "input_layernorm.weight", {H}, g, true);
    ids.post_attention_layernorm = add(p + "post_attention_layernorm.weight", {H}, g, true);
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
