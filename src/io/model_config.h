// HF `config.json` of a dense decoder -> ModelConfig, and back (for export). A family is data
// (DESIGN §12): the parse turns each family's config into the choices a decoder layer makes (norm
// style and placement, q/k norm, attention scale, RoPE per layer, sliding window per layer, MLP
// activation, embedding scale, fused projections), and the model composes its layers from them.
// Families (model_type): qwen2, qwen3, llama, mistral, gemma3_text (and the text model of a gemma3
// multimodal config), olmo2, smollm3, phi3. Field names and defaults are transformers 5.17's
// (`Qwen3Config`, `Gemma3TextConfig`, … and their modelling code, which decides what each key
// does); both the 4.x layout (`rope_theta`, `rope_scaling`, `rope_local_base_freq`, `torch_dtype`)
// and the 5.x layout (`rope_parameters`, per layer type for Gemma 3, `dtype`) are read. Anything
// zerotune's model does not implement is an error naming the file, the key and the value, never
// silently ignored (an unknown model_type lists the ones zerotune has; logit soft-capping,
// bidirectional attention, dropout, rope types other than those of RopeType, unknown activations).
//
// What each family sets (everything else is Llama's default: RmsNormStyle::kLlama, kPre, no q/k
// norm, 1/sqrt(head_dim), embed_scale 1, rotary_dim = head_dim, full attention, RoPE everywhere):
//   qwen2    q/k/v bias (o_proj none); windows from use_sliding_window / sliding_window /
//            max_window_layers / layer_types (as qwen3)
//   qwen3    q/k/v/o bias = attention_bias; QkNorm::kPerHead; windows: layer l slides by
//            sliding_window when use_sliding_window and layer_types[l] == "sliding_attention"
//            (layer_types default: sliding for l >= max_window_layers)
//   llama    attention_bias (q/k/v/o), mlp_bias; rope default / linear / llama3
//   mistral  no biases; every layer slides by sliding_window (null = full; absent = 4096)
//   gemma3_text  kGemma norms, kPrePost, QkNorm::kPerHead, GeGLU (hidden_activation),
//            attention_scale = query_pre_attn_scalar^-0.5, embed_scale = sqrt(hidden_size),
//            sliding layers (layer_types, default every sliding_window_pattern-th layer full) use
//            rope_local (layer_rope 1) and sliding_window, full layers `rope` (layer_rope 0)
//   olmo2    kOlmo2 norms, kPost, QkNorm::kProjection, attention_bias
//   smollm3  attention_bias, mlp_bias; layer_rope -1 where no_rope_layers[l] == 0 (default every
//            no_rope_layer_interval-th layer); windows only with use_sliding_window, on NoPE layers
//   phi3     fused_qkv, fused_gate_up, no biases; rotary_dim = int(head_dim ·
//            partial_rotary_factor); rope default or longrope; every layer slides by
//            sliding_window (null / absent = full)
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_util.h"
#include "core/layer_kinds.h"
#include "io/json.h"

namespace zt {

// RoPE variant ("rope_type", or the older "type", of rope_scaling / rope_parameters).
enum class RopeType : uint8_t {
  kDefault,   // inv_freq[i] = 1 / theta^(2i/d)
  kLinear,    // default / factor (transformers `_compute_linear_scaling_rope_parameters`; Gemma 3)
  kLlama3,    // Llama 3.1 frequency-dependent scaling (transformers `_compute_llama3_parameters`)
  kLongrope,  // Phi-3 / Phi-4-mini: default / short_factor[i], or / long_factor[i] when the
              // micro-batch's max position + 1 exceeds original_max_position_embeddings
              // (transformers `_compute_longrope_parameters` + `dynamic_rope_update`); cos and
              // sin are multiplied by attention_factor in both cases
  kDynamic,   // dynamic NTK (transformers 4.57 `_compute_dynamic_ntk_parameters`): the default
              // frequencies of base * ((factor * L / L) - (factor - 1)) ** (d / (d - 2)), L =
              // max_position_embeddings (original_max_position_embeddings below), while every
              // sequence fits in L; a longer one is an error (transformers then rescales the base
              // from batch to batch, a state zerotune does not keep)
  kYarn,      // YaRN (transformers 4.57 `_compute_yarn_parameters`): per frequency a blend of
              // default and default / factor by a linear ramp between the correction dims of
              // beta_fast and beta_slow rotations over original_max_position_embeddings; cos and
              // sin are multiplied by attention_factor
};

// The transformers name of `t` ("default", "linear", "llama3", "longrope", "dynamic", "yarn").
const char* rope_type_name(RopeType t);

// RoPE parameters of one rotary embedding (a model has one, or two for Gemma 3's local and
// global layers). For kLlama3 / kLongrope the scaling fields are required in the config (zt::Error
// naming the missing key otherwise); for kDefault they are unused.
struct RopeConfig {
  RopeType type = RopeType::kDefault;
  double theta = 10000.0;  // rope_theta (transformers' default_theta when absent)
  double factor = 1.0;     // llama3 / linear / longrope "factor" (longrope default:
                           // max_position_embeddings / original_max_position_embeddings)
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // llama3, longrope (default max_position_embeddings; Phi-3: the top-level key, default 4096).
  int64_t original_max_position_embeddings = 8192;
  // longrope: per-frequency divisors, rotary_dim / 2 values each; attention_factor (cos/sin
  // multiplier; transformers' default sqrt(1 + ln(factor)/ln(original_max)) when absent, 1 when
  // factor <= 1).
  std::vector<double> short_factor, long_factor;
  double attention_factor = 1.0;
  // yarn: the ramp's rotation counts (`beta_fast or 32`, `beta_slow or 1`) and whether its ends
  // are rounded outwards to whole dims (`truncate`, default true); original_max_position_embeddings
  // above is the dict's (`or max_position_embeddings`), factor the dict's required one.
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool truncate = true;
};

// What a decoder layer does around attention and MLP (HF modelling code's forward order).
enum class NormPlacement : uint8_t {
  kPre,      // x += attn(norm1(x)); x += mlp(norm2(x))                (Llama, Qwen, Mistral, Phi-3)
  kPost,     // x += norm1(attn(x)); x += norm2(mlp(x))                (OLMo 2)
  kPrePost,  // x += norm2(attn(norm1(x))); x += norm4(mlp(norm3(x)))  (Gemma 2/3)
};

// Where q/k get an RMSNorm (before RoPE).
enum class QkNorm : uint8_t {
  kNone,
  kPerHead,     // q_norm / k_norm weight [head_dim] over each head (Qwen3, Gemma 3)
  kProjection,  // q_norm [Hq·D], k_norm [Hkv·D] over the whole projection (OLMo 2)
};

// Everything about the architecture that the model, the tokenizer glue and export need.
struct ModelConfig {
  std::string model_type;  // one of supported_model_types(); "gemma3" is read as "gemma3_text"
  // "gemma3" when read from the text_config of a multimodal gemma3 config.json ("" otherwise): the
  // checkpoint names its text weights model.language_model.* (transformers 5) or
  // language_model.model.* (4.x) and holds vision / projector tensors, which are not trained.
  // Export writes a text-only gemma3_text model (Gemma3ForCausalLM).
  std::string multimodal_type;
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
  bool mlp_bias = false;            // gate/up/down biases (llama / smollm3 `mlp_bias`)
  std::string hidden_act = "silu";  // "silu" or "gelu_pytorch_tanh" (Gemma's hidden_activation)
  GluActivation mlp_act = GluActivation::kSilu;  // from hidden_act

  // ---- the layer's choices (DESIGN §12); defaults are Llama's.
  RmsNormStyle norm_style = RmsNormStyle::kLlama;
  NormPlacement norm_placement = NormPlacement::kPre;
  QkNorm qk_norm = QkNorm::kNone;
  double attention_scale = 0.0;  // softmax scale: 1/sqrt(head_dim), or Gemma's
                                 // query_pre_attn_scalar^-0.5
  double embed_scale = 1.0;  // Gemma: sqrt(hidden_size) (rounded to the compute dtype by the model)
  int64_t rotary_dim = 0;    // rotated elements of a head: head_dim · partial_rotary_factor
                             // (even; = head_dim without it)
  // Per layer (num_hidden_layers entries each):
  // sliding window W of layer l (HF's sliding_window), 0 = full attention. Query position q sees
  // the keys k with q - W < k <= q (W keys, itself included; transformers `sliding_window_overlay`
  // + causal, as the sdpa/eager paths mask).
  std::vector<int64_t> layer_window;
  std::vector<int8_t> layer_rope;  // 0: rope, 1: rope_local (Gemma 3 sliding layers), -1: no RoPE
                                   // (SmolLM3 no_rope_layers)
  RopeConfig rope_local;           // Gemma 3: rope_local_base_freq (default rope); unused else
  // Phi-3's checkpoint fuses q/k/v into self_attn.qkv_proj [(Hq+2Hkv)·D, H] and gate/up into
  // mlp.gate_up_proj [2I, H] (gate rows first); the layout keeps HF's tensors and the model
  // uses row ranges of them.
  bool fused_qkv = false;
  bool fused_gate_up = false;
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

// The model_type values parse_model_config accepts, in the order error messages list them:
// qwen2, qwen3, llama, mistral, gemma3_text, olmo2, smollm3, phi3, gemma3.
std::vector<std::string> supported_model_types();

// Parses `config.json` (or a model directory containing it). Throws zt::Error naming the file and
// the key (text_config.<key> inside a gemma3 multimodal config) for: unreadable file / bad JSON, a
// missing required key (vocab_size, hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, max_position_embeddings), a key of the wrong JSON type, unsupported
// model_type / hidden_act / rope type, a rope type's missing key, longrope factors of the wrong
// length, rms_norm_eps or rope_theta not positive, a rope scaling value outside the range of
// transformers' rope validation (factor < 1, low_freq_factor <= 0, high_freq_factor <=
// low_freq_factor, original_max_position_embeddings <= 0 (longrope: <= 1), a longrope
// short_factor / long_factor entry or attention_factor <= 0),
// final_logit_softcapping / attn_logit_softcapping not null, use_bidirectional_attention
// true, a dropout key (attention_dropout, resid_pdrop, embd_pdrop, …) not 0, a bias or window key
// set in a family whose transformers model ignores it (mlp_bias, attention_bias,
// use_sliding_window true, "sliding_attention" in layer_types), partial_rotary_factor other than 1
// outside phi3, a bad layer_types / no_rope_layers list, hidden_size not divisible by heads (when
// head_dim absent), heads not divisible by KV heads, an odd head_dim or rotary_dim, a
// quantization_config (a quantized model: naming its quant_method).
ModelConfig load_model_config(const fs::path& path);

// Same from a parsed JSON object; `source` names it in errors.
ModelConfig parse_model_config(const Json& j, std::string_view source);

// RoPE inverse frequencies of `rope`, fp32 [rotary_dim / 2], computed in the same fp32 operation
// order as transformers `modeling_rope_utils` (default: `1.0 / (base ** (arange(0, dim, 2).float()
// / dim))` with dim = rotary_dim; llama3: `_compute_llama3_parameters`, where `x / t` for a scalar
// x is `t.reciprocal() * x`; linear: `inv_freq /= factor`; longrope: `1.0 / (ext_factors *
// base ** e)` with ext_factors the fp32 short_factor, or long_factor when `long_factors`; yarn:
// `_compute_yarn_parameters` of transformers 4.57, its Python-float ramp ends). The
// fp32 `base ** e` is evaluated as the correctly rounded fp32 of the double power, so a value may
// differ from torch's vectorised powf by ≤ 1 ulp. The cos/sin multiplier is rope.attention_factor
// (1 except longrope and yarn). When to use long factors (HF `dynamic_rope_update`, recomputed each
// forward): seq_len = max(position_ids) + 1 over the whole micro-batch; long factors when seq_len >
// rope.original_max_position_embeddings, short factors otherwise (one choice for all rows). The
// model makes that choice per micro-batch. Throws zt::Error for a longrope factor list whose
// length is not rotary_dim / 2.
std::vector<float> rope_inv_freq(const RopeConfig& rope, int64_t rotary_dim,
                                 bool long_factors = false);
// The same for cfg.rope and cfg.rotary_dim (short factors).
std::vector<float> rope_inv_freq(const ModelConfig& cfg);

// HF config.json object for `cfg`: starts from cfg.raw (so transformers_version and other keys
// survive), sets `architectures` to the family's causal-LM class (as save_pretrained does, whatever
// the input said) and every field above with the family's HF names (hidden_activation for Gemma,
// layer_types / sliding_window / use_sliding_window / no_rope_layers from layer_window and
// layer_rope, partial_rotary_factor from rotary_dim); the rope layout (rope_theta + rope_scaling
// [+ rope_local_base_freq] vs rope_parameters [per layer type]) and the dtype key (torch_dtype vs
// dtype) follow the source file (4.x layout when there is none). A config read from a gemma3
// multimodal file is written as its text model: model_type gemma3_text, architectures
// Gemma3ForCausalLM (the export holds the text weights only). Throws zt::Error when the windows
// cannot be written in the family's keys (two different window sizes, windows in llama / olmo2).
// `dtype` overrides the dtype field ("bfloat16", "float32"; "" keeps cfg's). Keys are sorted, as
// transformers' `to_json_string` writes them.
Json model_config_to_json(const ModelConfig& cfg, std::string_view dtype = "");

// Writes model_config_to_json() to `path` atomically, indent 2 + "\n" (transformers' layout).
void write_model_config(const fs::path& path, const ModelConfig& cfg, std::string_view dtype = "");

// generation_config.json content transformers derives from a model config
// (`GenerationConfig.from_model_config`): {"_from_model_config": true, "bos_token_id",
// "eos_token_id", "pad_token_id" (those that are set), "transformers_version" (from cfg.raw, if
// any)}.
Json generation_config_json(const ModelConfig& cfg);

}  // namespace zt
