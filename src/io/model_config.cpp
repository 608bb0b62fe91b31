#include "io/model_config.h"

#include <cmath>
#include <optional>
#include <string>
#include <tuple>

#include "core/error.h"
#include "io/unique_keys.h"

namespace zt {
namespace {

// Typed access to config.json keys with errors naming the file and the key. `pre` prefixes the
// key names in messages ("text_config." inside a gemma3 multimodal config).
struct Reader {
  const Json& j;
  std::string_view src;
  std::string pre;

  bool has(const char* key) const { return j.contains(key) && !j[key].is_null(); }

  int64_t req_int(const char* key) const {
    if (!has(key)) fail("{}: required key \"{}{}\" is missing", src, pre, key);
    return as_int(j[key], key);
  }
  int64_t opt_int(const char* key, int64_t def) const {
    return has(key) ? as_int(j[key], key) : def;
  }
  int64_t as_int(const Json& v, const char* key) const {
    if (!v.is_number_integer())
      fail("{}: key \"{}{}\" is {}, expected an integer", src, pre, key, v.dump());
    return v.get<int64_t>();
  }
  // Absent -> def; null -> nullopt; else a positive integer.
  std::optional<int64_t> opt_window(const char* key, std::optional<int64_t> def) const {
    if (!j.contains(key)) return def;
    if (j[key].is_null()) return std::nullopt;
    const int64_t w = as_int(j[key], key);
    if (w <= 0) fail("{}: key \"{}{}\" is {}, expected a positive integer", src, pre, key, w);
    return w;
  }
  // `obj` is j or a rope dict inside it; `where` names the dict ("rope_scaling.").
  double opt_num(const Json& obj, const char* key, double def, std::string_view where) const {
    if (!obj.contains(key) || obj[key].is_null()) return def;
    return as_num(obj[key], key, where);
  }
  double as_num(const Json& v, const char* key, std::string_view where) const {
    if (!v.is_number())
      fail("{}: key \"{}{}{}\" is {}, expected a number", src, pre, where, key, v.dump());
    return v.get<double>();
  }
  bool opt_bool(const char* key, bool def) const {
    if (!has(key)) return def;
    if (!j[key].is_boolean())
      fail("{}: key \"{}{}\" is {}, expected true or false", src, pre, key, j[key].dump());
    return j[key].get<bool>();
  }
  std::string opt_str(const char* key, std::string def) const {
    if (!has(key)) return def;
    if (!j[key].is_string())
      fail("{}: key \"{}{}\" is {}, expected a string", src, pre, key, j[key].dump());
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

// How a family's transformers model decides its per-layer sliding windows.
enum class Windows : uint8_t {
  kNone,     // no sliding window (llama, olmo2)
  kQwen,     // use_sliding_window + sliding_window + max_window_layers / layer_types (qwen2, qwen3)
  kUniform,  // sliding_window on every layer (mistral, phi3)
  kGemma,    // layer_types / sliding_window_pattern (gemma3_text)
  kSmol,     // use_sliding_window on NoPE layers (smollm3)
};

// Which attention biases a family's transformers model builds.
enum class Bias : uint8_t {
  kQwen2,          // q/k/v always, o_proj never
  kAttentionBias,  // q/k/v/o = attention_bias
  kNone,           // none (the key is ignored by transformers; true is refused)
};

// A family's config class defaults and modelling choices (transformers 5.17
// models/<family>/configuration_*.py and modeling_*.py).
struct Family {
  const char* type;
  double rms_norm_eps;
  bool tie;
  int64_t kv_heads;  // num_key_value_heads when absent (0: num_attention_heads)
  int64_t head_dim;  // head_dim when absent (0: hidden_size / num_attention_heads)
  double theta;      // default_theta (Gemma 3: of the full-attention layers)
  Bias bias;
  bool mlp_bias;        // reads mlp_bias
  const char* act_key;  // hidden_act or hidden_activation
  const char* act_default;
  RmsNormStyle norm_style;
  NormPlacement placement;
  QkNorm qk_norm;
  Windows windows;
  std::optional<int64_t> window_default;  // sliding_window when absent
  bool partial_rotary;                    // honours partial_rotary_factor (phi3)
  bool fused;                             // qkv_proj / gate_up_proj (phi3)
};

// qwen2's num_key_value_heads default stays num_attention_heads (zerotune's behaviour since the
// start; Qwen2Config's own default, 32, makes most small configs invalid).
const Family kFamilies[] = {
    {"qwen2", 1e-6, false, 0, 0, 1e4, Bias::kQwen2, false, "hidden_act", "silu",
     RmsNormStyle::kLlama, NormPlacement::kPre, QkNorm::kNone, Windows::kQwen, 4096, false, false},
    {"qwen3", 1e-6, false, 32, 128, 1e4, Bias::kAttentionBias, false, "hidden_act", "silu",
     RmsNormStyle::kLlama, NormPlacement::kPre, QkNorm::kPerHead, Windows::kQwen, 4096, false,
     false},
    {"llama", 1e-6, false, 0, 0, 1e4, Bias::kAttentionBias, true, "hidden_act", "silu",
     RmsNormStyle::kLlama, NormPlacement::kPre, QkNorm::kNone, Windows::kNone, std::nullopt, false,
     false},
    {"mistral", 1e-6, false, 8, 0, 1e4, Bias::kNone, false, "hidden_act", "silu",
     RmsNormStyle::kLlama, NormPlacement::kPre, QkNorm::kNone, Windows::kUniform, 4096, false,
     false},
    {"gemma3_text", 1e-6, true, 4, 256, 1e6, Bias::kAttentionBias, false, "hidden_activation",
     "gelu_pytorch_tanh", RmsNormStyle::kGemma, NormPlacement::kPrePost, QkNorm::kPerHead,
     Windows::kGemma, 4096, false, false},
    {"olmo2", 1e-5, false, 0, 0, 1e4, Bias::kAttentionBias, false, "hidden_act", "silu",
     RmsNormStyle::kOlmo2, NormPlacement::kPost, QkNorm::kProjection, Windows::kNone, std::nullopt,
     false, false},
    {"smollm3", 1e-6, true, 4, 0, 2e6, Bias::kAttentionBias, true, "hidden_act", "silu",
     RmsNormStyle::kLlama, NormPlacement::kPre, QkNorm::kNone, Windows::kSmol, std::nullopt, false,
     false},
    {"phi3", 1e-5, false, 0, 0, 1e4, Bias::kNone, false, "hidden_act", "silu", RmsNormStyle::kLlama,
     NormPlacement::kPre, QkNorm::kNone, Windows::kUniform, std::nullopt, true, true},
};

const Family* find_family(std::string_view type) {
  for (const Family& f : kFamilies)
    if (type == f.type) return &f;
  return nullptr;
}

std::string quoted_list(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", \"" : "\"") + v[i] + "\"";
  return s;
}

// Whether transformers 4.57's config class of `fam` copies rope_scaling's old "type" key over
// "rope_type" (configuration_qwen2 / qwen3 / llama / smollm3.py), so "type" wins there.
bool type_key_copied(const Family& fam) {
  const std::string_view t = fam.type;
  return t == "qwen2" || t == "qwen3" || t == "llama" || t == "smollm3";
}

// One rope dict (rope_scaling, rope_parameters, or a Gemma 3 per-layer-type entry; `where` names
// it with a trailing '.') -> RopeConfig, as transformers' `standardize_rope_params` and
// ROPE_INIT_FUNCTIONS read it. `theta` is the rope_theta to use when the dict has none, read from
// top-level key `theta_key` (or its default). A scaling value that makes the angles NaN or
// infinite (a factor, low_freq_factor or longrope entry <= 0, high_freq_factor == low_freq_factor,
// an original_max_position_embeddings <= 0) is refused naming the key: the first step's loss
// would be NaN, blamed on the data. Values transformers' `_validate_<type>_rope_parameters` only
// warns about and trains with (a linear factor 0.5, high_freq_factor < low_freq_factor) are
// accepted, as there.
RopeConfig parse_rope_dict(const Reader& r, const Json& d, const std::string& where, double theta,
                           std::string_view theta_key, int64_t max_pos, bool phi3,
                           bool type_key_copied) {
  // Refuses `v` of key `where + k` unless `ok` (a NaN fails every comparison).
  auto expect = [&](bool ok, std::string_view k, double v, std::string_view expected) {
    if (!ok || !std::isfinite(v))
      fail("{}: key \"{}{}{}\" is {}, expected {}", r.src, r.pre, where, k, v, expected);
  };
  RopeConfig rope;
  // The inverse frequencies theta^(-2i/d): theta <= 0 gives NaN or infinite angles at step 1.
  if (d.contains("rope_theta") && !d["rope_theta"].is_null()) {
    rope.theta = r.as_num(d["rope_theta"], "rope_theta", where);
    expect(rope.theta > 0.0, "rope_theta", rope.theta, "a positive number");
  } else {
    rope.theta = theta;
    if (!(theta > 0.0 && std::isfinite(theta)))
      fail("{}: key \"{}{}\" is {}, expected a positive number", r.src, r.pre, theta_key, theta);
  }
  std::string type = "default";
  std::optional<std::string> given[2];  // rope_type, type
  for (int i = 0; i < 2; ++i) {
    const char* k = i == 0 ? "rope_type" : "type";
    if (d.contains(k) && !d[k].is_null()) {
      if (!d[k].is_string())
        fail("{}: key \"{}{}{}\" is {}, expected a string", r.src, r.pre, where, k, d[k].dump());
      given[i] = d[k].get<std::string>();
    }
  }
  // transformers 4.57's Qwen2/Qwen3/Llama/SmolLM3 configs copy "type" over "rope_type"; its
  // other configs and transformers 5 read "rope_type" first. Where the two versions would build
  // different RoPEs, neither is guessed.
  if (type_key_copied && given[0] && given[1] && *given[0] != *given[1])
    fail(
        "{}: keys \"{}{}rope_type\" (\"{}\") and \"{}{}type\" (\"{}\") disagree: transformers "
        "4.57 uses \"type\" for this model_type, transformers 5 \"rope_type\"; keep one of them",
        r.src, r.pre, where, *given[0], r.pre, where, *given[1]);
  if (given[0])
    type = *given[0];
  else if (given[1])
    type = *given[1];
  // Phi3Config.convert_rope_params_to_dict: the old names of longrope.
  if (phi3 && (type == "su" || type == "yarn")) type = "longrope";
  auto need = [&](const char* k) -> const Json& {
    if (!d.contains(k) || d[k].is_null())
      fail("{}: rope type \"{}\" needs key \"{}{}{}\", which is missing", r.src, type, r.pre, where,
           k);
    return d[k];
  };
  // factor of linear / llama3 (and an explicit one of longrope): the frequencies are divided by
  // it (transformers warns below 1 and trains).
  auto scaling_factor = [&](const Json& v) {
    const double f = r.as_num(v, "factor", where);
    expect(f > 0.0, "factor", f, "a positive number");
    return f;
  };
  if (phi3 && type != "default" && type != "longrope")
    fail(
        "{}: rope type \"{}\" (key \"{}{}rope_type\") is not supported for phi3; transformers' "
        "Phi3Config accepts \"default\" and \"longrope\"",
        r.src, type, r.pre, where);
  if (type == "default") {
    rope.type = RopeType::kDefault;
  } else if (type == "linear") {
    rope.type = RopeType::kLinear;
    rope.factor = scaling_factor(need("factor"));
  } else if (type == "llama3") {
    rope.type = RopeType::kLlama3;
    rope.factor = scaling_factor(need("factor"));
    rope.low_freq_factor = r.as_num(need("low_freq_factor"), "low_freq_factor", where);
    rope.high_freq_factor = r.as_num(need("high_freq_factor"), "high_freq_factor", where);
    // transformers divides original_max_position_embeddings by both (ZeroDivisionError at 0)
    // and by their difference.
    expect(rope.low_freq_factor > 0.0, "low_freq_factor", rope.low_freq_factor,
           "a positive number");
    expect(rope.high_freq_factor != rope.low_freq_factor, "high_freq_factor", rope.high_freq_factor,
           fmt::format("a number other than low_freq_factor ({})", rope.low_freq_factor));
    // standardize_rope_params: setdefault("original_max_position_embeddings", max_pos).
    const Reader rd{d, r.src, r.pre + where};
    rope.original_max_position_embeddings = rd.opt_int("original_max_position_embeddings", max_pos);
    if (rope.original_max_position_embeddings <= 0)
      fail("{}: key \"{}{}original_max_position_embeddings\" is {}, expected a positive integer",
           r.src, r.pre, where, rope.original_max_position_embeddings);
  } else if (type == "longrope") {
    rope.type = RopeType::kLongrope;
    for (const char* k : {"short_factor", "long_factor"}) {
      const Json& v = need(k);
      if (!v.is_array())
        fail("{}: key \"{}{}{}\" is {}, expected a list of numbers", r.src, r.pre, where, k,
             v.dump());
      std::vector<double>& dst = k[0] == 's' ? rope.short_factor : rope.long_factor;
      for (const Json& e : v) {
        // The inverse frequencies are divided by each entry.
        dst.push_back(r.as_num(e, k, where));
        expect(dst.back() > 0.0, fmt::format("{}[{}]", k, dst.size() - 1), dst.back(),
               "a positive number");
      }
    }
    // Phi3Config has a top-level original_max_position_embeddings (default 4096) that
    // standardize_rope_params puts into the dict over the dict's own value; other configs
    // setdefault it to max_position_embeddings. transformers 4.57 reads only the top-level key
    // (else max_position_embeddings) for every family: where the two differ, the config is
    // refused rather than one version's RoPE guessed.
    const Reader rd{d, r.src, r.pre + where};
    rope.original_max_position_embeddings =
        phi3 ? r.opt_int("original_max_position_embeddings", 4096)
             : rd.opt_int("original_max_position_embeddings", max_pos);
    if (!phi3) {
      const int64_t v457 = r.opt_int("original_max_position_embeddings", max_pos);
      if (v457 != rope.original_max_position_embeddings)
        fail(
            "{}: longrope's original_max_position_embeddings is {} by key \"{}{}"
            "original_max_position_embeddings\" (as transformers 5 reads it) but {} as "
            "transformers 4.57 reads it (the top-level key, else max_position_embeddings); make "
            "them agree",
            r.src, rope.original_max_position_embeddings, r.pre, where, v457);
    }
    // attention_factor's default divides by ln(original_max_position_embeddings).
    if (rope.original_max_position_embeddings <= 1)
      fail(
          "{}: key \"{}{}original_max_position_embeddings\" is {}, expected an integer > 1 for "
          "longrope",
          r.src, r.pre, phi3 ? "" : where, rope.original_max_position_embeddings);
    // `_compute_longrope_parameters`: factor defaults to max_position_embeddings / original;
    // attention_factor to sqrt(1 + ln(factor) / ln(original)), 1 when factor <= 1.
    const double orig = static_cast<double>(rope.original_max_position_embeddings);
    rope.factor = d.contains("factor") && !d["factor"].is_null()
                      ? scaling_factor(d["factor"])
                      : static_cast<double>(max_pos) / orig;
    // transformers 4.57 replaces a dict factor by max_position_embeddings / the top-level
    // original_max_position_embeddings when that key is set (Phi3Config always has it);
    // transformers 5 keeps the dict's. Where the two differ and decide the attention factor, the
    // config is refused rather than one reading guessed.
    const bool top_level = phi3 || r.has("original_max_position_embeddings");
    const bool attention_factor_given =
        d.contains("attention_factor") && !d["attention_factor"].is_null();
    if (top_level && !attention_factor_given && d.contains("factor") && !d["factor"].is_null() &&
        rope.factor != static_cast<double>(max_pos) / orig)
      fail(
          "{}: key \"{}{}factor\" is {}, but transformers 4.57 uses max_position_embeddings / "
          "original_max_position_embeddings = {} / {} = {} for longrope's attention factor (5 "
          "uses the dict's factor); remove the key, make it agree, or set attention_factor",
          r.src, r.pre, where, rope.factor, max_pos, rope.original_max_position_embeddings,
          static_cast<double>(max_pos) / orig);
    rope.attention_factor = r.opt_num(
        d, "attention_factor",
        rope.factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(rope.factor) / std::log(orig)), where);
    expect(rope.attention_factor > 0.0, "attention_factor", rope.attention_factor,
           "a positive number");
  } else if (type == "dynamic") {
    // `config.rope_scaling["factor"]` is required; max_position_embeddings is the length up to
    // which the frequencies stay those of step 1 (`dynamic_rope_update`'s max_seq_len_cached).
    rope.type = RopeType::kDynamic;
    rope.factor = scaling_factor(need("factor"));
    rope.original_max_position_embeddings = max_pos;
  } else if (type == "yarn") {
    // transformers 4.57 `_compute_yarn_parameters`: factor required; original_max_position_
    // embeddings, beta_fast, beta_slow by Python `or` (0 / null take the default); attention_factor
    // when absent get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) if both are
    // truthy, else get_mscale(factor) — get_mscale(s, m) = 0.1 m ln(s) + 1, 1 for s <= 1.
    rope.type = RopeType::kYarn;
    rope.factor = scaling_factor(need("factor"));
    const auto truthy = [&](const char* k) {
      return d.contains(k) && !d[k].is_null() && r.as_num(d[k], k, where) != 0.0;
    };
    rope.original_max_position_embeddings =
        truthy("original_max_position_embeddings")
            ? Reader{d, r.src, r.pre + where}.opt_int("original_max_position_embeddings", max_pos)
            : max_pos;
    if (rope.original_max_position_embeddings <= 0)
      fail("{}: key \"{}{}original_max_position_embeddings\" is {}, expected a positive integer",
           r.src, r.pre, where, rope.original_max_position_embeddings);
    rope.beta_fast = truthy("beta_fast") ? r.as_num(d["beta_fast"], "beta_fast", where) : 32.0;
    rope.beta_slow = truthy("beta_slow") ? r.as_num(d["beta_slow"], "beta_slow", where) : 1.0;
    // ln(original / (beta * 2 pi)): a rotation count <= 0 has no logarithm.
    expect(rope.beta_fast > 0.0, "beta_fast", rope.beta_fast, "a positive number");
    expect(rope.beta_slow > 0.0, "beta_slow", rope.beta_slow, "a positive number");
    // `rope_scaling.get("truncate", True)`: an explicit null is falsy (no rounding).
    if (d.contains("truncate") && d["truncate"].is_null()) rope.truncate = false;
    if (d.contains("truncate") && !d["truncate"].is_null()) {
      if (!d["truncate"].is_boolean())
        fail("{}: key \"{}{}truncate\" is {}, expected true or false", r.src, r.pre, where,
             d["truncate"].dump());
      rope.truncate = d["truncate"].get<bool>();
    }
    const auto mscale = [](double s, double m) {
      return s <= 1.0 ? 1.0 : 0.1 * m * std::log(s) + 1.0;
    };
    double af = mscale(rope.factor, 1.0);
    if (truthy("mscale") && truthy("mscale_all_dim"))
      af = mscale(rope.factor, r.as_num(d["mscale"], "mscale", where)) /
           mscale(rope.factor, r.as_num(d["mscale_all_dim"], "mscale_all_dim", where));
    rope.attention_factor = r.opt_num(d, "attention_factor", af, where);
    expect(rope.attention_factor > 0.0, "attention_factor", rope.attention_factor,
           "a positive number");
  } else {
    fail(
        "{}: rope type \"{}\" (key \"{}{}rope_type\") is not supported; zerotune implements "
        "\"default\", \"linear\", \"llama3\", \"longrope\", \"dynamic\" and \"yarn\"",
        r.src, type, r.pre, where);
  }
  return rope;
}

// transformers `convert_rope_params_to_dict` (one rope for all layers): a non-null rope_scaling
// replaces rope_parameters; rope_theta / partial_rotary_factor inside the dict win over the
// top-level keys. Returns partial_rotary_factor.
double parse_rope(const Reader& r, const Family& fam, ModelConfig& c) {
  const Json& j = r.j;
  const char* dict_key = nullptr;
  // transformers `rope_scaling or rope_parameters`: an empty rope_scaling falls through.
  if (r.has("rope_scaling") && !(j["rope_scaling"].is_object() && j["rope_scaling"].empty()))
    dict_key = "rope_scaling";
  else if (r.has("rope_parameters"))
    dict_key = "rope_parameters";
  const Json empty = Json::object();
  const Json& d = dict_key ? j[dict_key] : empty;
  if (!d.is_object())
    fail("{}: key \"{}{}\" is {}, expected an object", r.src, r.pre, dict_key, d.dump());
  const std::string where = dict_key ? std::string(dict_key) + "." : std::string();
  const double theta = r.opt_num(j, "rope_theta", fam.theta, "");
  c.rope = parse_rope_dict(r, d, where, theta, "rope_theta", c.max_position_embeddings,
                           fam.partial_rotary, type_key_copied(fam));
  return r.opt_num(d, "partial_rotary_factor", r.opt_num(j, "partial_rotary_factor", 1.0, ""),
                   where);
}

// Gemma3TextConfig.convert_rope_params_to_dict: rope_parameters keyed by layer type (5.x), or
// rope_theta / rope_local_base_freq / rope_scaling (4.x; the scaling applies to full attention).
void parse_gemma_rope(const Reader& r, const Family& fam, ModelConfig& c) {
  const Json& j = r.j;
  Json full = Json::object(), local = Json::object();
  if (r.has("rope_parameters")) {
    const Json& p = j["rope_parameters"];
    if (!p.is_object() || (!p.contains("full_attention") && !p.contains("sliding_attention")))
      fail(
          "{}: key \"{}rope_parameters\" is {}, expected an object keyed by layer type "
          "(\"full_attention\", \"sliding_attention\")",
          r.src, r.pre, p.dump());
    for (const auto& [k, v] : p.items()) {
      if (k != "full_attention" && k != "sliding_attention")
        fail("{}: key \"{}rope_parameters.{}\" is not a layer type of gemma3_text", r.src, r.pre,
             k);
      if (!v.is_null() && !v.is_object())
        fail("{}: key \"{}rope_parameters.{}\" is {}, expected an object", r.src, r.pre, k,
             v.dump());
    }
    if (p.contains("full_attention") && p["full_attention"].is_object()) full = p["full_attention"];
    if (p.contains("sliding_attention") && p["sliding_attention"].is_object())
      local = p["sliding_attention"];
  }
  std::string full_where = "rope_parameters.full_attention.";
  if (r.has("rope_scaling")) {
    if (!j["rope_scaling"].is_object())
      fail("{}: key \"{}rope_scaling\" is {}, expected an object", r.src, r.pre,
           j["rope_scaling"].dump());
    for (const auto& [k, v] : j["rope_scaling"].items()) full[k] = v;
    full_where = "rope_scaling.";
  }
  const double theta = r.opt_num(j, "rope_theta", fam.theta, "");
  const double local_theta = r.opt_num(j, "rope_local_base_freq", 1e4, "");
  c.rope = parse_rope_dict(r, full, full_where, theta, "rope_theta", c.max_position_embeddings,
                           false, false);
  c.rope_local = parse_rope_dict(r, local, "rope_parameters.sliding_attention.", local_theta,
                                 "rope_local_base_freq", c.max_position_embeddings, false, false);
  if (c.rope_local.type != RopeType::kDefault && c.rope_local.type != RopeType::kLinear &&
      c.rope_local.type != RopeType::kLlama3)
    fail(
        "{}: key \"{}rope_parameters.sliding_attention.rope_type\" is \"{}\": not supported for "
        "Gemma's local RoPE (zerotune scales its frequencies only: default, linear, llama3)",
        r.src, r.pre, rope_type_name(c.rope_local.type));
}

// layer_types: absent/null -> {}; else num_hidden_layers of "full_attention" /
// "sliding_attention".
std::vector<std::string> read_layer_types(const Reader& r, int64_t n) {
  std::vector<std::string> out;
  if (!r.has("layer_types")) return out;
  const Json& v = r.j["layer_types"];
  if (!v.is_array() || static_cast<int64_t>(v.size()) != n)
    fail("{}: key \"{}layer_types\" is {}, expected a list of num_hidden_layers ({}) layer types",
         r.src, r.pre, v.dump(), n);
  for (size_t i = 0; i < v.size(); ++i) {
    const Json& t = v[i];
    if (!t.is_string() ||
        (t.get<std::string>() != "full_attention" && t.get<std::string>() != "sliding_attention"))
      fail(
          "{}: {}layer_types[{}] is {}; zerotune implements \"full_attention\" and "
          "\"sliding_attention\"",
          r.src, r.pre, i, t.dump());
    out.push_back(t.get<std::string>());
  }
  return out;
}

// layer_window / layer_rope of every layer, as the family's config __post_init__ and attention
// module decide them.
void parse_windows(const Reader& r, const Family& fam, ModelConfig& c) {
  const int64_t n = c.num_hidden_layers;
  const size_t un = static_cast<size_t>(n);
  c.layer_window.assign(un, 0);
  c.layer_rope.assign(un, 0);
  std::vector<std::string> types = read_layer_types(r, n);
  const bool reads_use_sw = fam.windows == Windows::kQwen || fam.windows == Windows::kSmol;
  const bool use_sw = r.opt_bool("use_sliding_window", false);
  if (use_sw && !reads_use_sw)
    fail(
        "{}: use_sliding_window true is not supported for model_type \"{}\" (transformers' model "
        "ignores the key{})",
        r.src, c.model_type,
        fam.windows == Windows::kNone ? "; it has no sliding window" : "; sliding_window decides");
  const bool reads_types = fam.windows == Windows::kQwen || fam.windows == Windows::kGemma ||
                           fam.windows == Windows::kSmol;
  if (!reads_types)
    for (size_t i = 0; i < types.size(); ++i)
      if (types[i] != "full_attention")
        fail(
            "{}: {}layer_types[{}] is \"{}\"; only \"full_attention\" is supported for model_type "
            "\"{}\" (transformers' model ignores layer_types)",
            r.src, r.pre, i, types[i], c.model_type);
  switch (fam.windows) {
    case Windows::kNone:
      break;
    case Windows::kUniform: {
      const std::optional<int64_t> w = r.opt_window("sliding_window", fam.window_default);
      c.layer_window.assign(un, w.value_or(0));
      break;
    }
    case Windows::kQwen: {
      // Qwen3Config.__post_init__: sliding_window = sliding_window if use_sliding_window else
      // None; layer_types default sliding for l >= max_window_layers (when a window is set).
      const std::optional<int64_t> sw =
          use_sw ? r.opt_window("sliding_window", fam.window_default) : std::nullopt;
      const int64_t mwl = r.opt_int("max_window_layers", 28);
      for (int64_t l = 0; l < n; ++l) {
        const bool sliding =
            types.empty() ? (sw && l >= mwl) : types[static_cast<size_t>(l)] == "sliding_attention";
        if (sliding && !sw)  // transformers' mask raises for a sliding layer without a window
          fail(
              "{}: {}layer_types[{}] is \"sliding_attention\" but there is no window "
              "(use_sliding_window false or sliding_window null)",
              r.src, r.pre, l);
        if (sliding) c.layer_window[static_cast<size_t>(l)] = *sw;
      }
      break;
    }
    case Windows::kGemma: {
      if (r.opt_bool("use_bidirectional_attention", false))
        fail(
            "{}: {}use_bidirectional_attention true is not supported (zerotune trains causal "
            "language models)",
            r.src, r.pre);
      const std::optional<int64_t> sw = r.opt_window("sliding_window", fam.window_default);
      const int64_t pattern = r.opt_int("sliding_window_pattern", 6);
      if (pattern <= 0)
        fail("{}: key \"{}sliding_window_pattern\" is {}, expected a positive integer", r.src,
             r.pre, pattern);
      for (int64_t l = 0; l < n; ++l) {
        const bool sliding = types.empty() ? (l + 1) % pattern != 0
                                           : types[static_cast<size_t>(l)] == "sliding_attention";
        if (sliding && !sw)  // transformers' mask raises for a sliding layer without a window
          fail("{}: {}sliding_window is null but layer {} is a sliding_attention layer", r.src,
               r.pre, l);
        if (sliding) {
          c.layer_rope[static_cast<size_t>(l)] = 1;
          c.layer_window[static_cast<size_t>(l)] = *sw;
        }
      }
      break;
    }
    case Windows::kSmol: {
      // SmolLM3Config.__post_init__: no_rope_layers[l] = 1 (RoPE) unless (l + 1) is a multiple of
      // no_rope_layer_interval; layer_types sliding on NoPE layers when use_sliding_window.
      std::vector<int64_t> rope_on;
      if (r.has("no_rope_layers")) {
        const Json& v = r.j["no_rope_layers"];
        if (!v.is_array() || static_cast<int64_t>(v.size()) != n)
          fail("{}: key \"{}no_rope_layers\" is {}, expected num_hidden_layers ({}) values 0 or 1",
               r.src, r.pre, v.dump(), n);
        for (const Json& e : v) {
          const int64_t x = r.as_int(e, "no_rope_layers");
          if (x != 0 && x != 1)
            fail("{}: key \"{}no_rope_layers\" holds {}, expected 0 or 1", r.src, r.pre, x);
          rope_on.push_back(x);
        }
      } else {
        const int64_t interval = r.opt_int("no_rope_layer_interval", 4);
        if (interval <= 0)
          fail("{}: key \"{}no_rope_layer_interval\" is {}, expected a positive integer", r.src,
               r.pre, interval);
        for (int64_t l = 0; l < n; ++l) rope_on.push_back((l + 1) % interval != 0 ? 1 : 0);
      }
      const std::optional<int64_t> sw = r.opt_window("sliding_window", fam.window_default);
      for (int64_t l = 0; l < n; ++l) {
        const size_t ul = static_cast<size_t>(l);
        c.layer_rope[ul] = rope_on[ul] ? 0 : -1;
        const bool sliding =
            types.empty() ? (use_sw && sw && !rope_on[ul]) : types[ul] == "sliding_attention";
        // transformers' SmolLM3 mask slides on a sliding_attention layer whenever sliding_window
        // is set, whatever use_sliding_window says, and raises without a window: both refused
        // when they disagree rather than guessed.
        if (sliding && (!use_sw || !sw))
          fail(
              "{}: {}layer_types[{}] is \"sliding_attention\" but use_sliding_window is {} and "
              "sliding_window is {}; set both or make the layer full_attention",
              r.src, r.pre, l, use_sw ? "true" : "false", sw ? std::to_string(*sw) : "null");
        if (sliding) c.layer_window[ul] = *sw;
      }
      break;
    }
  }
}

// The text model's config of a gemma3 multimodal config: text_config with the top-level keys it
// inherits when it lacks them (tie_word_embeddings, dtype, token ids).
Json gemma3_text_config(const Json& j, std::string_view source) {
  if (!j.contains("text_config") || !j["text_config"].is_object())
    fail("{}: model_type \"gemma3\" needs an object \"text_config\" (the text model's config)",
         source);
  Json t = j["text_config"];
  for (const char* k :
       {"tie_word_embeddings", "dtype", "torch_dtype", "bos_token_id", "eos_token_id",
        "pad_token_id", "initializer_range", "transformers_version"})
    if (j.contains(k) && (!t.contains(k) || t[k].is_null())) t[k] = j[k];
  t["model_type"] = "gemma3_text";
  t["architectures"] = Json::array({"Gemma3ForCausalLM"});
  return t;
}

}  // namespace

ModelConfig parse_model_config(const Json& file_json, std::string_view source) {
  if (!file_json.is_object())
    fail("{}: expected a JSON object, got {}", source, file_json.type_name());
  ModelConfig c;
  c.source = std::string(source);
  std::string pre;
  Json text;
  const Json* jp = &file_json;
  {
    const Reader top{file_json, source, ""};
    if (top.opt_str("model_type", "") == "gemma3") {
      text = gemma3_text_config(file_json, source);
      jp = &text;
      pre = "text_config.";
      c.multimodal_type = "gemma3";
    }
  }
  // Gemma3TextConfig's size defaults: the hub's multimodal configs leave them out of text_config
  // (other families' files always carry these required keys).
  Json filled;
  if (jp->contains("model_type") && (*jp)["model_type"] == "gemma3_text") {
    filled = *jp;
    for (auto [k, v] : {std::pair{"vocab_size", int64_t{262208}},
                        {"hidden_size", 2304},
                        {"intermediate_size", 9216},
                        {"num_hidden_layers", 26},
                        {"num_attention_heads", 8},
                        {"max_position_embeddings", 131072}})
      if (!filled.contains(k)) filled[k] = v;
    jp = &filled;
  }
  const Json& j = *jp;
  const Reader r{j, source, pre};
  c.raw = j;
  c.model_type = r.opt_str("model_type", "");
  const Family* fam_ptr = find_family(c.model_type);
  if (!r.has("model_type")) {  // absent or null
    const std::vector<std::string> names = supported_model_types();
    fail(
        "{}: no \"{}model_type\" key, which names the architecture (transformers' AutoConfig "
        "needs it too); zerotune implements {}",
        source, pre, quoted_list(names));
  }
  if (!fam_ptr) {
    const std::vector<std::string> names = supported_model_types();
    fail("{}: model_type \"{}\" is not supported; zerotune implements {}", source, c.model_type,
         quoted_list(names));
  }
  const Family& fam = *fam_ptr;
  // A quantised checkpoint (GPTQ, AWQ, bitsandbytes, FP8, compressed-tensors, …; the key sits at
  // the top level, also of a multimodal file): transformers loads it quantised and its Trainer
  // refuses to fine-tune it without adapters ("You cannot perform fine-tuning on purely quantized
  // models"). zerotune trains full-precision weights only; carried on, the key would also mark the
  // exported bf16/fp32 weights as quantised.
  for (const Json* q : {&file_json, jp})
    if (q->contains("quantization_config") && !(*q)["quantization_config"].is_null()) {
      const Json& qc = (*q)["quantization_config"];
      const std::string method =
          qc.is_object() && qc.contains("quant_method") && qc["quant_method"].is_string()
              ? qc["quant_method"].get<std::string>()
              : std::string("?");
      fail(
          "{}: key \"quantization_config\" (quant_method \"{}\") marks a quantized model; "
          "zerotune fine-tunes full-precision weights only (transformers' Trainer refuses a "
          "quantized model without adapters too): start from the unquantized model",
          source, method);
    }
  c.vocab_size = r.req_int("vocab_size");
  c.hidden_size = r.req_int("hidden_size");
  c.intermediate_size = r.req_int("intermediate_size");
  c.num_hidden_layers = r.req_int("num_hidden_layers");
  c.num_attention_heads = r.req_int("num_attention_heads");
  c.max_position_embeddings = r.req_int("max_position_embeddings");
  // Upper bounds keep every product of sizes (vocab·hidden, T·heads·head_dim, …) far inside
  // int64 and ids / positions inside int32; a larger value is a config error, not a std::bad_alloc.
  for (auto [k, v, most] :
       {std::tuple{"vocab_size", c.vocab_size, int64_t{1} << 31},
        {"hidden_size", c.hidden_size, int64_t{1} << 20},
        {"intermediate_size", c.intermediate_size, int64_t{1} << 22},
        {"num_hidden_layers", c.num_hidden_layers, int64_t{1} << 16},
        {"num_attention_heads", c.num_attention_heads, int64_t{1} << 14},
        {"max_position_embeddings", c.max_position_embeddings, int64_t{1} << 31}}) {
    if (v <= 0) fail("{}: key \"{}{}\" is {}, expected a positive integer", source, pre, k, v);
    if (v > most)
      fail("{}: key \"{}{}\" is {}, larger than zerotune supports (at most {})", source, pre, k, v,
           most);
  }
  // An explicit null is num_attention_heads (the configs' __post_init__); absent, the family's
  // default.
  const bool kv_null = r.j.contains("num_key_value_heads") && r.j["num_key_value_heads"].is_null();
  c.num_key_value_heads = kv_null ? c.num_attention_heads
                                  : r.opt_int("num_key_value_heads",
                                              fam.kv_heads ? fam.kv_heads : c.num_attention_heads);
  if (c.num_key_value_heads <= 0 || c.num_attention_heads % c.num_key_value_heads != 0)
    fail("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", source,
         c.num_attention_heads, c.num_key_value_heads);
  if (r.has("head_dim") || fam.head_dim) {
    c.head_dim = r.opt_int("head_dim", fam.head_dim);
    if (c.head_dim <= 0)
      fail("{}: key \"{}head_dim\" is {}, expected a positive integer", source, pre, c.head_dim);
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      fail("{}: hidden_size {} is not a multiple of num_attention_heads {} (and no head_dim given)",
           source, c.hidden_size, c.num_attention_heads);
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0)
    fail("{}: head_dim {} is odd; RoPE needs an even head_dim", source, c.head_dim);
  c.rms_norm_eps = r.opt_num(j, "rms_norm_eps", fam.rms_norm_eps, "");
  // eps ≤ 0 (or not finite) gives a NaN loss at step 1, which would be reported as the data's.
  if (!(c.rms_norm_eps > 0.0 && std::isfinite(c.rms_norm_eps)))
    fail("{}: key \"{}rms_norm_eps\" is {}, expected a positive number", source, pre,
         c.rms_norm_eps);

  // RoPE (one, or Gemma 3's global + local) and the rotated part of a head.
  double prf = 1.0;
  if (fam.windows == Windows::kGemma)
    parse_gemma_rope(r, fam, c);
  else
    prf = parse_rope(r, fam, c);
  if (prf != 1.0 && !fam.partial_rotary)
    fail(
        "{}: partial_rotary_factor {} is not supported for model_type \"{}\" (zerotune rotates "
        "the whole head; transformers' model does too)",
        source, prf, c.model_type);
  if (!(prf > 0.0 && prf <= 1.0))
    fail("{}: key \"{}partial_rotary_factor\" is {}, expected a number in (0, 1]", source, pre,
         prf);
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * prf);  // Python int()
  if (c.rotary_dim <= 0 || c.rotary_dim % 2 != 0)
    fail("{}: rotary dimension int(head_dim {} * partial_rotary_factor {}) = {} is not even",
         source, c.head_dim, prf, c.rotary_dim);
  for (const RopeConfig* rope : {&c.rope, &c.rope_local})
    if (rope->type == RopeType::kLongrope)
      for (const auto& [name, v] : {std::pair{"short_factor", &rope->short_factor},
                                    std::pair{"long_factor", &rope->long_factor}})
        if (static_cast<int64_t>(v->size()) != c.rotary_dim / 2)
          fail("{}: longrope {} has {} values, expected rotary_dim / 2 = {}", source, name,
               v->size(), c.rotary_dim / 2);

  c.tie_word_embeddings = r.opt_bool("tie_word_embeddings", fam.tie);
  switch (fam.bias) {
    case Bias::kQwen2:  // Qwen2Attention: q/k/v Linear(bias=True), o_proj bias=False
      c.qkv_bias = true;
      c.o_proj_bias = false;
      break;
    case Bias::kAttentionBias:
      c.qkv_bias = c.o_proj_bias = r.opt_bool("attention_bias", false);
      break;
    case Bias::kNone:
      if (r.opt_bool("attention_bias", false))
        fail(
            "{}: attention_bias true is not supported for model_type \"{}\" (transformers' model "
            "has no attention biases and ignores the key)",
            source, c.model_type);
      break;
  }
  const bool mlp_bias = r.opt_bool("mlp_bias", false);
  if (mlp_bias && !fam.mlp_bias)
    fail(
        "{}: mlp_bias true is not supported for model_type \"{}\" (transformers' model has no MLP "
        "biases and ignores the key)",
        source, c.model_type);
  c.mlp_bias = mlp_bias;
  c.hidden_act = r.opt_str(fam.act_key, fam.act_default);
  // "swish" is torch's SiLU too (transformers' ACT2CLS: nn.SiLU), the same function.
  if (c.hidden_act == "silu" || c.hidden_act == "swish")
    c.mlp_act = GluActivation::kSilu;
  else if (c.hidden_act == "gelu_pytorch_tanh")
    c.mlp_act = GluActivation::kGeluTanh;
  else
    fail(
        "{}: {} \"{}\" (key \"{}{}\") is not supported; zerotune implements \"silu\" (or "
        "\"swish\"; SwiGLU) and \"gelu_pytorch_tanh\" (GeGLU)",
        source, fam.act_key, c.hidden_act, pre, fam.act_key);
  for (const char* k : {"final_logit_softcapping", "attn_logit_softcapping"})
    if (r.has(k))
      fail("{}: {}{} {} is not supported (zerotune has no logit soft-capping; it must be null)",
           source, pre, k, j[k].dump());
  for (const char* k : {"attention_dropout", "resid_pdrop", "embd_pdrop", "hidden_dropout",
                        "embedding_dropout", "dropout"}) {
    const double p = r.opt_num(j, k, 0.0, "");
    if (p != 0.0)
      fail("{}: {}{} {} is not supported (zerotune trains without dropout)", source, pre, k, p);
  }
  parse_windows(r, fam, c);

  c.dtype = r.has("dtype") ? r.opt_str("dtype", "") : r.opt_str("torch_dtype", "");
  c.initializer_range = r.opt_num(j, "initializer_range", 0.02, "");
  // The standard deviation of a from-scratch model's normal init: torch's normal_ refuses std < 0.
  if (!(c.initializer_range >= 0.0 && std::isfinite(c.initializer_range)))
    fail(
        "{}: key \"{}initializer_range\" is {}, expected a number >= 0 (the standard deviation of "
        "the weights' initialisation)",
        source, pre, c.initializer_range);
  c.bos_token_id = r.ids("bos_token_id");
  c.eos_token_id = r.ids("eos_token_id");
  c.pad_token_id = r.ids("pad_token_id");

  // The layer's choices.
  c.norm_style = fam.norm_style;
  c.norm_placement = fam.placement;
  c.qk_norm = fam.qk_norm;
  c.fused_qkv = c.fused_gate_up = fam.fused;
  if (fam.windows == Windows::kGemma) {
    // Gemma3Attention: scaling = query_pre_attn_scalar ** -0.5; Gemma3TextScaledWordEmbedding:
    // embed_scale = hidden_size ** 0.5.
    const double qpas = r.opt_num(j, "query_pre_attn_scalar", 256.0, "");
    if (!(qpas > 0.0))
      fail("{}: key \"{}query_pre_attn_scalar\" is {}, expected a positive number", source, pre,
           qpas);
    c.attention_scale = std::pow(qpas, -0.5);
    c.embed_scale = std::sqrt(static_cast<double>(c.hidden_size));
  } else {
    c.attention_scale = std::pow(static_cast<double>(c.head_dim), -0.5);
    c.embed_scale = 1.0;
  }
  return c;
}

std::vector<std::string> supported_model_types() {
  std::vector<std::string> out;
  for (const Family& f : kFamilies) out.emplace_back(f.type);
  out.emplace_back("gemma3");  // read as its text_config (gemma3_text)
  return out;
}

ModelConfig load_model_config(const fs::path& path) {
  std::error_code ec;
  const fs::path file = fs::is_directory(path, ec) ? path / "config.json" : path;
  const std::string text = read_file(file);
  return parse_model_config(parse_json_unique_keys(text, file.string()), file.string());
}

int64_t ModelConfig::num_parameters() const {
  const int64_t h = hidden_size, q = num_attention_heads * head_dim,
                kv = num_key_value_heads * head_dim, im = intermediate_size;
  int64_t layer = h * q + 2 * h * kv + q * h + 3 * h * im;
  if (qkv_bias) layer += q + 2 * kv;
  if (o_proj_bias) layer += h;
  if (mlp_bias) layer += 2 * im + h;
  if (qk_norm == QkNorm::kPerHead) layer += 2 * head_dim;
  if (qk_norm == QkNorm::kProjection) layer += q + kv;
  layer += (norm_placement == NormPlacement::kPrePost ? 4 : 2) * h;
  int64_t n = vocab_size * h + num_hidden_layers * layer + h;
  if (!tie_word_embeddings) n += vocab_size * h;
  return n;
}

}  // namespace zt
