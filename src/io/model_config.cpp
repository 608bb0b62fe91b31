#include "io/model_config.h"

#include <cmath>
#include <numbers>
#include <string>

#include "core/error.h"
#include "io/unique_keys.h"

namespace zt {
namespace {

// Typed access to config.json keys with errors naming the file and the key.
struct Reader {
  const Json& j;
  std::string_view src;

  bool has(const char* key) const { return j.contains(key) && !j[key].is_null(); }

  int64_t req_int(const char* key) const {
    if (!has(key)) fail("{}: required key \"{}\" is missing", src, key);
    return as_int(j[key], key);
  }
  int64_t opt_int(const char* key, int64_t def) const {
    return has(key) ? as_int(j[key], key) : def;
  }
  int64_t as_int(const Json& v, const char* key) const {
    if (!v.is_number_integer())
      fail("{}: key \"{}\" is {}, expected an integer", src, key, v.dump());
    return v.get<int64_t>();
  }
  double opt_num(const Json& obj, const char* key, double def, std::string_view where) const {
    if (!obj.contains(key) || obj[key].is_null()) return def;
    return as_num(obj[key], key, where);
  }
  double as_num(const Json& v, const char* key, std::string_view where) const {
    if (!v.is_number())
      fail("{}: key \"{}{}\" is {}, expected a number", src, where, key, v.dump());
    return v.get<double>();
  }
  bool opt_bool(const char* key, bool def) const {
    if (!has(key)) return def;
    if (!j[key].is_boolean())
      fail("{}: key \"{}\" is {}, expected true or false", src, key, j[key].dump());
    return j[key].get<bool>();
  }
  std::string opt_str(const char* key, std::string def) const {
    if (!has(key)) return def;
    if (!j[key].is_string())
      fail("{}: key \"{}\" is {}, expected a string", src, key, j[key].dump());
    return j[key].get<std::string>();
  }
  // null / absent -> {}, int -> {v}, [ints] -> the list.
  std::vector<int64_t> ids(const char* key) const {
    std::vector<int64_t> out;
    if (!has(key)) return out;
    const Json& v = j[key];
    if (v.is_array()) {
      for (const Json& e : v) out.push_back(as_int(e, key));
    } else {
      out.push_back(as_int(v, key));
    }
    return out;
  }
};

Json ids_to_json(const std::vector<int64_t>& ids) {
  if (ids.empty()) return nullptr;
  if (ids.size() == 1) return ids[0];
  return ids;
}

void parse_rope(const Reader& r, ModelConfig& c) {
  const Json& j = r.j;
  // transformers 5 `convert_rope_params_to_dict`: a non-null rope_scaling replaces
  // rope_parameters; rope_theta inside the dict wins over the top-level key.
  const char* dict_key = nullptr;
  if (r.has("rope_scaling"))
    dict_key = "rope_scaling";
  else if (r.has("rope_parameters"))
    dict_key = "rope_parameters";
  const Json empty = Json::object();
  const Json& d = dict_key ? j[dict_key] : empty;
  if (!d.is_object()) fail("{}: key \"{}\" is {}, expected an object", r.src, dict_key, d.dump());
  const std::string where = dict_key ? std::string(dict_key) + "." : std::string();
  c.rope.theta = r.opt_num(j, "rope_theta", 10000.0, "");
  c.rope.theta = r.opt_num(d, "rope_theta", c.rope.theta, where);
  std::string type = "default";
  for (const char* k : {"rope_type", "type"}) {
    if (d.contains(k) && !d[k].is_null()) {
      if (!d[k].is_string())
        fail("{}: key \"{}{}\" is {}, expected a string", r.src, where, k, d[k].dump());
      type = d[k].get<std::string>();
      break;
    }
  }
  const double prf =
      r.opt_num(d, "partial_rotary_factor", r.opt_num(j, "partial_rotary_factor", 1.0, ""), where);
  if (prf != 1.0)
    fail("{}: partial_rotary_factor {} is not supported (zerotune rotates the whole head)", r.src,
         prf);
  if (type == "default") {
    c.rope.type = RopeType::kDefault;
  } else if (type == "llama3") {
    c.rope.type = RopeType::kLlama3;
    for (const char* k :
         {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
      if (!d.contains(k) || d[k].is_null())
        fail("{}: rope type \"llama3\" needs key \"{}{}\", which is missing", r.src, where, k);
    c.rope.factor = r.as_num(d["factor"], "factor", where);
    c.rope.low_freq_factor = r.as_num(d["low_freq_factor"], "low_freq_factor", where);
    c.rope.high_freq_factor = r.as_num(d["high_freq_factor"], "high_freq_factor", where);
    const Json& o = d["original_max_position_embeddings"];
    if (!o.is_number_integer())
      fail("{}: key \"{}original_max_position_embeddings\" is {}, expected an integer", r.src,
           where, o.dump());
    c.rope.original_max_position_embeddings = o.get<int64_t>();
    if (c.rope.high_freq_factor == c.rope.low_freq_factor)
      fail("{}: llama3 rope with high_freq_factor == low_freq_factor ({}) divides by zero", r.src,
           c.rope.low_freq_factor);
  } else {
    fail(
        "{}: rope type \"{}\" (key \"{}rope_type\") is not supported; zerotune implements "
        "\"default\" and \"llama3\"",
        r.src, type, where);
  }
}

}  // namespace

ModelConfig parse_model_config(const Json& j, std::string_view source) {
  if (!j.is_object()) fail("{}: expected a JSON object, got {}", source, j.type_name());
  const Reader r{j, source};
  ModelConfig c;
  c.source = std::string(source);
  c.raw = j;
  c.model_type = r.opt_str("model_type", "");
  if (c.model_type != "qwen2" && c.model_type != "llama")
    fail("{}: model_type \"{}\" is not supported; zerotune implements \"qwen2\" and \"llama\"",
         source, c.model_type);
  c.vocab_size = r.req_int("vocab_size");
  c.hidden_size = r.req_int("hidden_size");
  c.intermediate_size = r.req_int("intermediate_size");
  c.num_hidden_layers = r.req_int("num_hidden_layers");
  c.num_attention_heads = r.req_int("num_attention_heads");
  c.max_position_embeddings = r.req_int("max_position_embeddings");
  for (auto [k, v] : {std::pair{"vocab_size", c.vocab_size},
                      {"hidden_size", c.hidden_size},
                      {"intermediate_size", c.intermediate_size},
                      {"num_hidden_layers", c.num_hidden_layers},
                      {"num_attention_heads", c.num_attention_heads},
                      {"max_position_embeddings", c.max_position_embeddings}})
    if (v <= 0) fail("{}: key \"{}\" is {}, expected a positive integer", source, k, v);
  c.num_key_value_heads = r.opt_int("num_key_value_heads", c.num_attention_heads);
  if (c.num_key_value_heads <= 0 || c.num_attention_heads % c.num_key_value_heads != 0)
    fail("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", source,
         c.num_attention_heads, c.num_key_value_heads);
  if (r.has("head_dim")) {
    c.head_dim = r.opt_int("head_dim", 0);
    if (c.head_dim <= 0)
      fail("{}: key \"head_dim\" is {}, expected a positive integer", source, c.head_dim);
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      fail("{}: hidden_size {} is not a multiple of num_attention_heads {} (and no head_dim given)",
           source, c.hidden_size, c.num_attention_heads);
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0)
    fail("{}: head_dim {} is odd; RoPE needs an even head_dim", source, c.head_dim);
  c.rms_norm_eps = r.opt_num(j, "rms_norm_eps", 1e-6, "");
  parse_rope(r, c);
  c.tie_word_embeddings = r.opt_bool("tie_word_embeddings", false);
  if (c.model_type == "qwen2") {
    c.qkv_bias = true;  // Qwen2Attention: q/k/v Linear(bias=True), o_proj bias=False
    c.o_proj_bias = false;
  } else {
    c.qkv_bias = c.o_proj_bias = r.opt_bool("attention_bias", false);
  }
  if (r.opt_bool("mlp_bias", false))
    fail("{}: mlp_bias true is not supported (gate/up/down projections without bias only)", source);
  c.hidden_act = r.opt_str("hidden_act", "silu");
  if (c.hidden_act != "silu")
    fail("{}: hidden_act \"{}\" is not supported; zerotune implements \"silu\" (SwiGLU)", source,
         c.hidden_act);
  if (r.opt_bool("use_sliding_window", false))
    fail("{}: use_sliding_window true is not supported (full causal attention only)", source);
  if (r.has("layer_types")) {
    if (!j["layer_types"].is_array()) fail("{}: key \"layer_types\" is not a list", source);
    for (size_t i = 0; i < j["layer_types"].size(); ++i) {
      const Json& t = j["layer_types"][i];
      if (!t.is_string() || t.get<std::string>() != "full_attention")
        fail("{}: layer_types[{}] is {}; only \"full_attention\" is supported", source, i,
             t.dump());
    }
  }
  const double dropout = r.opt_num(j, "attention_dropout", 0.0, "");
  if (dropout != 0.0)
    fail("{}: attention_dropout {} is not supported (zerotune trains without dropout)", source,
         dropout);
  c.dtype = r.has("dtype") ? r.opt_str("dtype", "") : r.opt_str("torch_dtype", "");
  c.initializer_range = r.opt_num(j, "initializer_range", 0.02, "");
  c.bos_token_id = r.ids("bos_token_id");
  c.eos_token_id = r.ids("eos_token_id");
  c.pad_token_id = r.ids("pad_token_id");
  // The layer's choices (Llama's for qwen2 / llama).
  c.mlp_act = GluActivation::kSilu;
  c.attention_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  c.rotary_dim = c.head_dim;
  c.layer_window.assign(static_cast<size_t>(c.num_hidden_layers), 0);
  c.layer_rope.assign(static_cast<size_t>(c.num_hidden_layers), 0);
  return c;
}

std::vector<std::string> supported_model_types() { return {"qwen2", "llama"}; }

ModelConfig load_model_config(const fs::path& path) {
  std::error_code ec;
  const fs::path file = fs::is_directory(path, ec) ? path / "config.json" : path;
  const std::string text = read_file(file);
  return parse_model_config(parse_json_unique_keys(text, file.string()), file.string());
}

int64_t ModelConfig::num_parameters() const {
  const int64_t h = hidden_size, q = num_attention_heads * head_dim,
                kv = num_key_value_heads * head_dim;
  int64_t layer = h * q + 2 * h * kv + q * h + 3 * h * intermediate_size + 2 * h;
  if (qkv_bias) layer += q + 2 * kv;
  if (o_proj_bias) layer += h;
  int64_t n = vocab_size * h + num_hidden_layers * layer + h;
  if (!tie_word_embeddings) n += vocab_size * h;
  return n;
}

std::vector<float> rope_inv_freq(const ModelConfig& cfg) {
  return rope_inv_freq(cfg.rope, cfg.rotary_dim > 0 ? cfg.rotary_dim : cfg.head_dim, false);
}

std::vector<float> rope_inv_freq(const RopeConfig& rope, int64_t rotary_dim, bool long_factors) {
  if (rope.type != RopeType::kDefault && rope.type != RopeType::kLlama3)
    fail("rope_inv_freq: rope type {} is not implemented", static_cast<int>(rope.type));
  (void)long_factors;
  const int64_t dim = rotary_dim;
  const float base = static_cast<float>(rope.theta);
  std::vector<float> inv(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    // arange(0, dim, 2).float() / dim  (fp32 division)
    const float e = static_cast<float>(2 * i) / static_cast<float>(dim);
    // base ** e in fp32 (correctly rounded from the double power)
    const float p = static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(e)));
    inv[static_cast<size_t>(i)] = 1.0f / p;
  }
  if (rope.type == RopeType::kDefault) return inv;

  // transformers `_compute_llama3_parameters`, op by op in fp32. Python scalars meet fp32 tensors
  // as fp32 (wrapped numbers do not promote); `s / t` is `t.reciprocal() * s`.
  const float factor = static_cast<float>(rope.factor);
  const float low = static_cast<float>(rope.low_freq_factor);
  const double old_ctx = static_cast<double>(rope.original_max_position_embeddings);
  const float low_freq_wavelen = static_cast<float>(old_ctx / rope.low_freq_factor);
  const float high_freq_wavelen = static_cast<float>(old_ctx / rope.high_freq_factor);
  const float two_pi = static_cast<float>(2.0 * std::numbers::pi);
  const float old_ctx_f = static_cast<float>(old_ctx);
  const float denom = static_cast<float>(rope.high_freq_factor - rope.low_freq_factor);
  for (float& f : inv) {
    const float wavelen = (1.0f / f) * two_pi;
    const float llama = wavelen > low_freq_wavelen ? f / factor : f;
    const float smooth = ((1.0f / wavelen) * old_ctx_f - low) / denom;
    const float smoothed = ((1.0f - smooth) * llama) / factor + smooth * llama;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    f = medium ? smoothed : llama;
  }
  return inv;
}

Json model_config_to_json(const ModelConfig& c, std::string_view dtype) {
  // nlohmann::json (std::map) sorts keys like transformers' json.dumps(sort_keys=True).
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : c.raw.items()) j[k] = v;
  j["model_type"] = c.model_type;
  if (!j.contains("architectures"))
    j["architectures"] = {c.model_type == "qwen2" ? "Qwen2ForCausalLM" : "LlamaForCausalLM"};
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  if (j.contains("head_dim") || c.head_dim != c.hidden_size / c.num_attention_heads ||
      c.hidden_size % c.num_attention_heads != 0)
    j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["hidden_act"] = c.hidden_act;
  j["initializer_range"] = c.initializer_range;
  if (c.model_type == "llama") {
    j["attention_bias"] = c.qkv_bias;
    j["mlp_bias"] = false;
  }
  j["bos_token_id"] = ids_to_json(c.bos_token_id);
  j["eos_token_id"] = ids_to_json(c.eos_token_id);
  if (!c.pad_token_id.empty() || j.contains("pad_token_id"))
    j["pad_token_id"] = ids_to_json(c.pad_token_id);

  // RoPE: keep the layout of the source file (4.x: rope_theta + rope_scaling; 5.x:
  // rope_parameters).
  nlohmann::json rope = nlohmann::json::object();
  if (c.rope.type == RopeType::kLlama3) {
    rope["rope_type"] = "llama3";
    rope["factor"] = c.rope.factor;
    rope["low_freq_factor"] = c.rope.low_freq_factor;
    rope["high_freq_factor"] = c.rope.high_freq_factor;
    rope["original_max_position_embeddings"] = c.rope.original_max_position_embeddings;
  }
  const bool v5 = j.contains("rope_parameters") && !j["rope_parameters"].is_null();
  if (v5) {
    if (c.rope.type == RopeType::kDefault) rope["rope_type"] = "default";
    rope["rope_theta"] = c.rope.theta;
    j["rope_parameters"] = rope;
    j.erase("rope_scaling");
    j.erase("rope_theta");
  } else {
    j["rope_theta"] = c.rope.theta;
    j["rope_scaling"] = c.rope.type == RopeType::kDefault ? nlohmann::json(nullptr) : rope;
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
