// ModelConfig -> HF config.json (io/model_config.h model_config_to_json), and the
// generation_config.json transformers derives from it.
#include <cmath>
#include <string>

#include "core/error.h"
#include "io/model_config.h"

namespace zt {
namespace {

using OJson = nlohmann::json;  // std::map-backed: sorted keys, as transformers' to_json_string

Json ids_to_json(const std::vector<int64_t>& ids) {
  if (ids.empty()) return nullptr;
  if (ids.size() == 1) return ids[0];
  return ids;
}

const char* architecture(std::string_view type) {
  if (type == "qwen2") return "Qwen2ForCausalLM";
  if (type == "qwen3") return "Qwen3ForCausalLM";
  if (type == "mistral") return "MistralForCausalLM";
  if (type == "gemma3_text") return "Gemma3ForCausalLM";
  if (type == "olmo2") return "Olmo2ForCausalLM";
  if (type == "smollm3") return "SmolLM3ForCausalLM";
  if (type == "phi3") return "Phi3ForCausalLM";
  return "LlamaForCausalLM";
}

// The rope dict of `rope`. Starts from `raw` (the file's dict) when it is of the same type, so its
// other keys survive; `v5` adds rope_theta (rope_parameters layout); `phi3`: original_max lives in
// the top-level key, which wins over the dict's.
OJson rope_dict(const RopeConfig& rope, const Json& raw, bool v5, bool phi3) {
  const std::string type = rope_type_name(rope.type);
  std::string raw_type;
  if (raw.is_object())
    for (const char* k : {"rope_type", "type"})
      if (raw.contains(k) && raw[k].is_string()) {
        raw_type = raw[k].get<std::string>();
        break;
      }
  if (phi3 && (raw_type == "su" || raw_type == "yarn")) raw_type = "longrope";
  OJson d = OJson::object();
  if (raw_type == type)
    for (const auto& [k, v] : raw.items()) d[k] = v;
  d["rope_type"] = type;
  if (d.contains("type")) d["type"] = type;
  switch (rope.type) {
    case RopeType::kDefault:
      break;
    case RopeType::kLinear:
      d["factor"] = rope.factor;
      break;
    case RopeType::kLlama3:
      d["factor"] = rope.factor;
      d["low_freq_factor"] = rope.low_freq_factor;
      d["high_freq_factor"] = rope.high_freq_factor;
      d["original_max_position_embeddings"] = rope.original_max_position_embeddings;
      break;
    case RopeType::kLongrope:
      d["short_factor"] = rope.short_factor;
      d["long_factor"] = rope.long_factor;
      if (!phi3 || d.contains("original_max_position_embeddings"))
        d["original_max_position_embeddings"] = rope.original_max_position_embeddings;
      // factor / attention_factor have defaults that follow from the other keys; written when
      // the file had them, or always for a config built in code.
      if (d.contains("factor") || raw_type.empty()) d["factor"] = rope.factor;
      if (d.contains("attention_factor") || raw_type.empty())
        d["attention_factor"] = rope.attention_factor;
      break;
    case RopeType::kDynamic:
      d["factor"] = rope.factor;
      break;
    case RopeType::kYarn:
      // The file's optional keys stay as they were (their defaults are `or` rules); a config
      // built in code writes them all.
      d["factor"] = rope.factor;
      if (raw_type.empty()) {
        d["original_max_position_embeddings"] = rope.original_max_position_embeddings;
        d["beta_fast"] = rope.beta_fast;
        d["beta_slow"] = rope.beta_slow;
        d["truncate"] = rope.truncate;
        d["attention_factor"] = rope.attention_factor;
      }
      break;
  }
  if (v5) d["rope_theta"] = rope.theta;
  return d;
}

// The one window size of the sliding layers (0 if none); zt::Error for two different sizes.
int64_t single_window(const ModelConfig& c) {
  int64_t w = 0;
  for (int64_t x : c.layer_window) {
    if (x != 0 && w != 0 && x != w)
      fail(
          "config.json export of {}: layers slide by different windows ({} and {}); the "
          "\"sliding_window\" key of model_type \"{}\" holds one",
          c.source, w, x, c.model_type);
    if (x != 0) w = x;
  }
  return w;
}

OJson layer_types(const ModelConfig& c, bool gemma) {
  OJson t = OJson::array();
  for (size_t l = 0; l < c.layer_window.size(); ++l) {
    const bool sliding = gemma ? c.layer_rope[l] == 1 : c.layer_window[l] != 0;
    t.push_back(sliding ? "sliding_attention" : "full_attention");
  }
  return t;
}

// Writes layer_window / layer_rope in the family's keys (the inverse of the parse).
void write_windows(const ModelConfig& c, OJson& j) {
  const int64_t w = single_window(c);
  const std::string& t = c.model_type;
  if (t == "qwen2" || t == "qwen3") {
    if (w != 0) {
      j["use_sliding_window"] = true;
      j["sliding_window"] = w;
      j["layer_types"] = layer_types(c, false);
    } else {
      if (j.contains("use_sliding_window") && j["use_sliding_window"] == true)
        j["use_sliding_window"] = false;
      if (j.contains("layer_types")) j["layer_types"] = layer_types(c, false);
    }
  } else if (t == "mistral" || t == "phi3") {
    for (int64_t x : c.layer_window)
      if (x != w)
        fail(
            "config.json export of {}: model_type \"{}\" slides every layer by one window, but "
            "the layers have {} and {}",
            c.source, t, w, x);
    j["sliding_window"] = w != 0 ? OJson(w) : OJson(nullptr);
  } else if (t == "gemma3_text") {
    j["layer_types"] = layer_types(c, true);
    if (w != 0) j["sliding_window"] = w;
  } else if (t == "smollm3") {
    OJson no_rope = OJson::array();
    for (int8_t r : c.layer_rope) no_rope.push_back(r == -1 ? 0 : 1);
    j["no_rope_layers"] = no_rope;
    j["layer_types"] = layer_types(c, false);
    j["use_sliding_window"] = w != 0;
    if (w != 0) j["sliding_window"] = w;
  } else if (w != 0) {
    fail("config.json export of {}: model_type \"{}\" has no sliding window, but a layer has {}",
         c.source, t, w);
  }
}

}  // namespace

const char* rope_type_name(RopeType t) {
  switch (t) {
    case RopeType::kLinear:
      return "linear";
    case RopeType::kLlama3:
      return "llama3";
    case RopeType::kLongrope:
      return "longrope";
    case RopeType::kYarn:
      return "yarn";
    case RopeType::kDynamic:
      return "dynamic";
    case RopeType::kDefault:
      break;
  }
  return "default";
}

Json model_config_to_json(const ModelConfig& c, std::string_view dtype) {
  // nlohmann::json (std::map) sorts keys like transformers' json.dumps(sort_keys=True).
  // A config read from a gemma3 multimodal file: cfg.raw is already its text_config (model_type
  // gemma3_text, architectures Gemma3ForCausalLM), so the export is a text-only model.
  OJson j = OJson::object();
  for (const auto& [k, v] : c.raw.items()) j[k] = v;
  const std::string& t = c.model_type;
  const bool gemma = t == "gemma3_text", phi3 = t == "phi3";
  j["model_type"] = t;
  // transformers' save_pretrained writes the class it saved (AutoModelForCausalLM's for the
  // model_type), whatever the input file said (Qwen2ForSequenceClassification, …): the export holds
  // a causal LM's weights, and loaders that pick the class by `architectures` (vLLM) must see that.
  j["architectures"] = {architecture(t)};
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  // qwen3 / gemma3_text default head_dim is not hidden / heads: always written for them.
  if (j.contains("head_dim") || t == "qwen3" || gemma ||
      c.head_dim != c.hidden_size / c.num_attention_heads ||
      c.hidden_size % c.num_attention_heads != 0)
    j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j[gemma ? "hidden_activation" : "hidden_act"] = c.hidden_act;
  j["initializer_range"] = c.initializer_range;
  if (t == "llama" || t == "qwen3" || t == "olmo2" || t == "smollm3" || gemma)
    j["attention_bias"] = c.qkv_bias;
  if (t == "llama" || t == "smollm3") j["mlp_bias"] = c.mlp_bias;
  if (gemma && !j.contains("query_pre_attn_scalar"))
    j["query_pre_attn_scalar"] = std::llround(1.0 / (c.attention_scale * c.attention_scale));
  j["bos_token_id"] = ids_to_json(c.bos_token_id);
  j["eos_token_id"] = ids_to_json(c.eos_token_id);
  if (!c.pad_token_id.empty() || j.contains("pad_token_id"))
    j["pad_token_id"] = ids_to_json(c.pad_token_id);
  write_windows(c, j);

  // RoPE: keep the layout of the source file (4.x: rope_theta + rope_scaling [+
  // rope_local_base_freq]; 5.x: rope_parameters [keyed by layer type for Gemma 3]).
  const bool v5 = j.contains("rope_parameters") && !j["rope_parameters"].is_null();
  const Json none;
  const double prf = static_cast<double>(c.rotary_dim) / static_cast<double>(c.head_dim);
  if (gemma) {
    const Json& rp = v5 ? c.raw["rope_parameters"] : none;
    if (v5) {
      OJson p = OJson::object();
      p["full_attention"] = rope_dict(
          c.rope, rp.contains("full_attention") ? rp["full_attention"] : none, true, false);
      p["sliding_attention"] =
          rope_dict(c.rope_local, rp.contains("sliding_attention") ? rp["sliding_attention"] : none,
                    true, false);
      j["rope_parameters"] = p;
      j.erase("rope_scaling");
      j.erase("rope_theta");
      j.erase("rope_local_base_freq");
    } else {
      if (c.rope_local.type != RopeType::kDefault)
        fail(
            "config.json export of {}: the sliding layers' rope type \"{}\" needs the "
            "rope_parameters layout (the 4.x keys hold a default local rope only)",
            c.source, rope_type_name(c.rope_local.type));
      j["rope_theta"] = c.rope.theta;
      j["rope_local_base_freq"] = c.rope_local.theta;
      const Json& rs = c.raw.contains("rope_scaling") ? c.raw["rope_scaling"] : none;
      j["rope_scaling"] =
          c.rope.type == RopeType::kDefault ? OJson(nullptr) : rope_dict(c.rope, rs, false, false);
    }
  } else if (v5) {
    OJson d = rope_dict(c.rope, c.raw["rope_parameters"], true, phi3);
    if (prf != 1.0 || d.contains("partial_rotary_factor")) d["partial_rotary_factor"] = prf;
    j["rope_parameters"] = d;
    j.erase("rope_scaling");
    j.erase("rope_theta");
  } else {
    j["rope_theta"] = c.rope.theta;
    const Json& rs = c.raw.contains("rope_scaling") ? c.raw["rope_scaling"] : none;
    j["rope_scaling"] =
        c.rope.type == RopeType::kDefault ? OJson(nullptr) : rope_dict(c.rope, rs, false, phi3);
  }
  if (phi3) {
    if (prf != 1.0 || j.contains("partial_rotary_factor")) j["partial_rotary_factor"] = prf;
    if (c.rope.type == RopeType::kLongrope)
      j["original_max_position_embeddings"] = c.rope.original_max_position_embeddings;
  }

  const std::string dt = dtype.empty() ? c.dtype : std::string(dtype);
  const char* dkey = j.contains("dtype") ? "dtype" : "torch_dtype";
  if (!dt.empty()) j[dkey] = dt;
  Json out;
  for (const auto& [k, v] : j.items()) out[k] = v;
  return out;
}

void write_model_config(const fs::path& path, const ModelConfig& cfg, std::string_view dtype) {
  write_file_atomic(path, model_config_to_json(cfg, dtype).dump(2) + "\n");
}

Json generation_config_json(const ModelConfig& c) {
  Json g = Json::object();
  g["_from_model_config"] = true;
  if (!c.bos_token_id.empty()) g["bos_token_id"] = ids_to_json(c.bos_token_id);
  if (!c.eos_token_id.empty()) g["eos_token_id"] = ids_to_json(c.eos_token_id);
  if (!c.pad_token_id.empty()) g["pad_token_id"] = ids_to_json(c.pad_token_id);
  if (c.raw.contains("transformers_version") && c.raw["transformers_version"].is_string())
    g["transformers_version"] = c.raw["transformers_version"];
  return g;
}

}  // namespace zt
