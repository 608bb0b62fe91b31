// HF `config.json` of a Qwen2 / Llama model -> ModelConfig, and back (for export).
// Field names and defaults are transformers' (`Qwen2Config`, `LlamaConfig`); both the 4.x layout
// (`rope_theta`, `rope_scaling`, `torch_dtype`) and the 5.x layout (`rope_parameters`, `dtype`) are
// read. Anything zerotune's model does not implement is an error naming the key, the value and the
// file, never silently ignored: model_type other than qwen2/llama, hidden_act other than silu,
// mlp_bias true, use_sliding_window true (or a "sliding_attention" layer type), rope types other
// than default/llama3.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_util.h"
#include "io/json.h"

namespace zt {

// RoPE variant ("rope_type", or the older "type", of rope_scaling / rope_parameters).
enum class RopeType : uint8_t {
  kDefault,  // inv_freq[i] = 1 / theta^(2i/d)
  kLlama3,   // Llama 3.1 frequency-dependent scaling (transformers `_compute_llama3_parameters`)
};

// RoPE parameters. For kLlama3 the four scaling fields are required in the config (zt::Error
// naming the missing key otherwise); for kDefault they are unused.
struct RopeConfig {
  RopeType type = RopeType::kDefault;
  double theta = 10000.0;  // rope_theta (transformers' default_theta when absent)
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

// Everything about the architecture that the model, the tokenizer glue and export need.
struct ModelConfig {
  std::string model_type;  // "qwen2" | "llama"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // default: num_attention_heads
  int64_t head_dim = 0;             // default: hidden_size / num_attention_heads
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  RopeConfig rope;
  bool tie_word_embeddings = false;  // default: false (LlamaConfig and Qwen2Config)
  // q/k/v projections have a bias: always true for qwen2; `attention_bias` (default false) for
  // llama. o_proj: llama's attention_bias applies to it too (o_proj_bias); qwen2's o_proj has none.
  bool qkv_bias = false;
  bool o_proj_bias = false;
  std::string hidden_act = "silu";  // only "silu" is accepted
  std::string dtype;  // "torch_dtype" / "dtype" ("bfloat16", "float32", …; "" if absent)
  double initializer_range = 0.02;
  std::vector<int64_t> bos_token_id;  // empty when null/absent; one id usually
  std::vector<int64_t> eos_token_id;  // empty when null/absent; Llama 3 lists several
  std::vector<int64_t> pad_token_id;  // empty when null/absent
  Json raw = Json::object();          // the file as read, kept so export preserves other keys
  std::string source;                 // file path it was read from ("" if built in code)

  // Elements of the weights of the whole model (embedding, layers, final norm, untied lm_head).
  // Matches `sum(p.numel() for p in model.parameters())` of the HF model (tied counted once).
  int64_t num_parameters() const;
};

// Parses `config.json` (or a model directory containing it). Throws zt::Error naming the file and
// the key for: unreadable file / bad JSON, a missing required key (vocab_size, hidden_size,
// intermediate_size, num_hidden_layers, num_attention_heads, max_position_embeddings), a key of the
// wrong JSON type, unsupported model_type / hidden_act / rope type, mlp_bias true,
// use_sliding_window true, hidden_size not divisible by heads (when head_dim absent), heads not
// divisible by KV heads.
ModelConfig load_model_config(const fs::path& path);

// Same from a parsed JSON object; `source` names it in errors.
ModelConfig parse_model_config(const Json& j, std::string_view source);

// RoPE inverse frequencies, fp32 [head_dim / 2], computed in the same fp32 operation order as
// transformers (default: `1.0 / (base ** (arange(0, dim, 2).float() / dim))`; llama3:
// `_compute_llama3_parameters`, where `x / t` for a scalar x is `t.reciprocal() * x`). The fp32
// `base ** e` is evaluated as the correctly rounded fp32 of the double power, so a value may differ
// from torch's vectorised powf by ≤ 1 ulp.
std::vector<float> rope_inv_freq(const ModelConfig& cfg);

// HF config.json object for `cfg`: starts from cfg.raw (so architectures, transformers_version, …
// survive) and sets every field above with HF names; the rope layout (rope_theta+rope_scaling vs
// rope_parameters) and the dtype key (torch_dtype vs dtype) follow the source file (4.x layout
// when there is none). `dtype` overrides the dtype field ("bfloat16", "float32"; "" keeps cfg's).
// Keys are sorted, as transformers' `to_json_string` writes them.
Json model_config_to_json(const ModelConfig& cfg, std::string_view dtype = "");

// Writes model_config_to_json() to `path` atomically, indent 2 + "\n" (transformers' layout).
void write_model_config(const fs::path& path, const ModelConfig& cfg, std::string_view dtype = "");

// generation_config.json content transformers derives from a model config
// (`GenerationConfig.from_model_config`): {"_from_model_config": true, "bos_token_id",
// "eos_token_id", "pad_token_id" (those that are set), "transformers_version" (from cfg.raw, if
// any)}.
Json generation_config_json(const ModelConfig& cfg);

}  // namespace zt
