// The model families' real-size configs (tests/data/families/configs, written by
// tools/make_family_configs.py from transformers 5.17's config classes) -> ModelConfig: every layer
// choice, the per-layer windows and RoPE, num_parameters, inv_freq and the longrope attention
// factor against what transformers built from the same file; the refusals; the export round trip.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/zt_test_util.h"
#include "io/model_config.h"

namespace {

using zt::GluActivation;
using zt::ModelConfig;
using zt::NormPlacement;
using zt::QkNorm;
using zt::RmsNormStyle;
using zt::RopeType;
using zt::testing::expect_error;
namespace fs = std::filesystem;

const fs::path kConfigs = fs::path(ZT_TEST_DATA) / "families" / "configs";

const char* const kNames[] = {"qwen3-0.6b",      "qwen3-1.7b",       "llama-3.2-1b_hub",
                              "mistral-7b-v0.3", "gemma-3-1b",       "gemma-3-4b-it_hub",
                              "olmo-2-1b",       "smollm3-3b",       "phi-4-mini",
                              "phi-4-mini_hub",  "phi-3-mini-4k_hub"};

zt::Json load_json(const fs::path& p) { return zt::Json::parse(zt::read_file(p)); }
zt::Json expect_of(const std::string& name) {
  return load_json(kConfigs / (name + ".expect.json"));
}
ModelConfig config_of(const std::string& name) {
  return zt::load_model_config(kConfigs / (name + ".json"));
}

std::vector<float> bits_to_f32(const zt::Json& a) {
  std::vector<float> out;
  for (const auto& b : a) {
    const uint32_t u = b.get<uint32_t>();
    float f;
    std::memcpy(&f, &u, 4);
    out.push_back(f);
  }
  return out;
}

int64_t ulp_diff(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::abs(static_cast<int64_t>(ia) - ib);
}

// inv_freq within 1 ulp of transformers (torch's vectorised powf vs a correctly rounded pow),
// bitwise for at least 90 % of the entries.
void expect_inv_freq(const std::vector<float>& got, const zt::Json& want_bits,
                     const std::string& what) {
  const std::vector<float> want = bits_to_f32(want_bits);
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t exact = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(ulp_diff(got[i], want[i]), 1) << what << " i=" << i;
    exact += got[i] == want[i];
  }
  EXPECT_GE(exact * 10, got.size() * 9) << what << ": " << exact << " of " << got.size();
}

// Everything transformers decided for `name` (its .expect.json) holds for `c`.
void expect_matches_transformers(const ModelConfig& c, const std::string& name) {
  const zt::Json e = expect_of(name);
  SCOPED_TRACE(name);
  EXPECT_EQ(c.num_parameters(), e["num_parameters"].get<int64_t>());
  EXPECT_EQ(c.layer_window, e["layer_window"].get<std::vector<int64_t>>());
  std::vector<int8_t> rope;
  for (const auto& v : e["layer_rope"]) rope.push_back(static_cast<int8_t>(v.get<int>()));
  EXPECT_EQ(c.layer_rope, rope);
  for (const auto& s : e["attention_scale"]) EXPECT_DOUBLE_EQ(c.attention_scale, s.get<double>());
  EXPECT_DOUBLE_EQ(c.embed_scale, e["embed_scale"].get<double>());
  EXPECT_EQ(c.rotary_dim, e["rotary_dim"].get<int64_t>());
  EXPECT_DOUBLE_EQ(c.rope.attention_factor, e["attention_factor"].get<double>());
  expect_inv_freq(zt::rope_inv_freq(c), e["inv_freq"], "inv_freq");
  if (e.contains("inv_freq_local"))
    expect_inv_freq(zt::rope_inv_freq(c.rope_local, c.rotary_dim), e["inv_freq_local"],
                    "inv_freq_local");
  if (e.contains("inv_freq_long"))
    expect_inv_freq(zt::rope_inv_freq(c.rope, c.rotary_dim, true), e["inv_freq_long"],
                    "inv_freq_long");
}

TEST(FamilyConfigs, EveryFamilyMatchesTransformers) {
  for (const char* n : kNames) expect_matches_transformers(config_of(n), n);
}

TEST(FamilyConfigs, Qwen3) {
  for (const char* n : {"qwen3-0.6b", "qwen3-1.7b"}) {
    const ModelConfig c = config_of(n);
    EXPECT_EQ(c.model_type, "qwen3");
    EXPECT_EQ(c.head_dim, 128);
    EXPECT_EQ(c.num_key_value_heads, 8);
    EXPECT_EQ(c.qk_norm, QkNorm::kPerHead);
    EXPECT_EQ(c.norm_style, RmsNormStyle::kLlama);
    EXPECT_EQ(c.norm_placement, NormPlacement::kPre);
    EXPECT_FALSE(c.qkv_bias);
    EXPECT_FALSE(c.o_proj_bias);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_EQ(c.rope.type, RopeType::kDefault);
    EXPECT_EQ(c.rope.theta, 1e6);
    EXPECT_EQ(c.dtype, "bfloat16");
  }
  EXPECT_EQ(config_of("qwen3-0.6b").num_parameters(), 596049920);
  EXPECT_EQ(config_of("qwen3-1.7b").num_parameters(), 1720574976);
  // use_sliding_window: layers from max_window_layers on slide (Qwen3Config.__post_init__).
  zt::Json j = load_json(kConfigs / "qwen3-0.6b.json");
  j.erase("layer_types");
  j["use_sliding_window"] = true;
  j["sliding_window"] = 4096;
  j["max_window_layers"] = 26;
  const ModelConfig s = zt::parse_model_config(j, "sw.json");
  for (int64_t l = 0; l < 28; ++l) EXPECT_EQ(s.layer_window[l], l >= 26 ? 4096 : 0) << l;
  // Sliding layer_types without use_sliding_window: Qwen3Config sets sliding_window to None and
  // transformers' mask then raises (masking_utils.create_sliding_window_causal_mask): refused.
  j["use_sliding_window"] = false;
  j["layer_types"] = zt::Json::array();
  for (int l = 0; l < 28; ++l) j["layer_types"].push_back("sliding_attention");
  expect_error([&] { zt::parse_model_config(j, "x.json"); },
               {"x.json: layer_types[0] is \"sliding_attention\" but there is no window "
                "(use_sliding_window false or sliding_window null)"});
}

TEST(FamilyConfigs, LlamaMistralOlmo2SmolLM3) {
  const ModelConfig l = config_of("llama-3.2-1b_hub");
  EXPECT_EQ(l.rope.type, RopeType::kLlama3);
  EXPECT_EQ(l.rope.factor, 32.0);
  EXPECT_EQ(l.num_parameters(), 1235814400);
  EXPECT_FALSE(l.mlp_bias);

  const ModelConfig m = config_of("mistral-7b-v0.3");
  EXPECT_EQ(m.model_type, "mistral");
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_FALSE(m.qkv_bias);
  EXPECT_EQ(m.rms_norm_eps, 1e-5);
  EXPECT_EQ(m.num_parameters(), 7248023552);
  zt::Json mj = load_json(kConfigs / "mistral-7b-v0.3.json");
  mj["sliding_window"] = 4096;
  EXPECT_EQ(zt::parse_model_config(mj, "m.json").layer_window, std::vector<int64_t>(32, 4096));
  mj.erase("sliding_window");  // MistralConfig default: 4096
  EXPECT_EQ(zt::parse_model_config(mj, "m.json").layer_window, std::vector<int64_t>(32, 4096));

  const ModelConfig o = config_of("olmo-2-1b");
  EXPECT_EQ(o.model_type, "olmo2");
  EXPECT_EQ(o.norm_style, RmsNormStyle::kOlmo2);
  EXPECT_EQ(o.norm_placement, NormPlacement::kPost);
  EXPECT_EQ(o.qk_norm, QkNorm::kProjection);
  EXPECT_EQ(o.rope.theta, 500000.0);
  EXPECT_FALSE(o.tie_word_embeddings);

  const ModelConfig s = config_of("smollm3-3b");
  EXPECT_EQ(s.model_type, "smollm3");
  EXPECT_EQ(s.rope.theta, 5e6);
  EXPECT_TRUE(s.tie_word_embeddings);
  for (int64_t l = 0; l < 36; ++l) EXPECT_EQ(s.layer_rope[l], (l + 1) % 4 == 0 ? -1 : 0) << l;
  zt::Json sj = load_json(kConfigs / "smollm3-3b.json");
  sj.erase("no_rope_layers");
  sj.erase("layer_types");
  sj["no_rope_layer_interval"] = 3;
  sj["use_sliding_window"] = true;
  sj["sliding_window"] = 2048;
  const ModelConfig s3 = zt::parse_model_config(sj, "s.json");
  for (int64_t l = 0; l < 36; ++l) {
    EXPECT_EQ(s3.layer_rope[l], (l + 1) % 3 == 0 ? -1 : 0) << l;
    EXPECT_EQ(s3.layer_window[l], (l + 1) % 3 == 0 ? 2048 : 0) << l;
  }
}

TEST(FamilyConfigs, Gemma3TextAndMultimodal) {
  const ModelConfig g = config_of("gemma-3-1b");
  EXPECT_EQ(g.model_type, "gemma3_text");
  EXPECT_EQ(g.multimodal_type, "");
  EXPECT_EQ(g.norm_style, RmsNormStyle::kGemma);
  EXPECT_EQ(g.norm_placement, NormPlacement::kPrePost);
  EXPECT_EQ(g.qk_norm, QkNorm::kPerHead);
  EXPECT_EQ(g.mlp_act, GluActivation::kGeluTanh);
  EXPECT_EQ(g.hidden_act, "gelu_pytorch_tanh");
  EXPECT_EQ(g.head_dim, 256);
  EXPECT_EQ(g.num_key_value_heads, 1);
  EXPECT_TRUE(g.tie_word_embeddings);
  EXPECT_EQ(g.attention_scale, 0.0625);
  EXPECT_DOUBLE_EQ(g.embed_scale, 33.941125496954285);
  EXPECT_EQ(g.rope.theta, 1e6);
  EXPECT_EQ(g.rope_local.theta, 1e4);
  EXPECT_EQ(g.eos_token_id, (std::vector<int64_t>{1, 106}));
  for (int64_t l = 0; l < 26; ++l) {
    const bool full = (l + 1) % 6 == 0;
    EXPECT_EQ(g.layer_window[l], full ? 0 : 512) << l;
    EXPECT_EQ(g.layer_rope[l], full ? 0 : 1) << l;
  }
  // The multimodal config (4.x layout): its text_config, Gemma3TextConfig defaults filled in,
  // linear rope on the full layers only.
  const ModelConfig m = config_of("gemma-3-4b-it_hub");
  EXPECT_EQ(m.model_type, "gemma3_text");
  EXPECT_EQ(m.multimodal_type, "gemma3");
  EXPECT_EQ(m.vocab_size, 262208);
  EXPECT_EQ(m.num_attention_heads, 8);
  EXPECT_EQ(m.num_key_value_heads, 4);
  EXPECT_EQ(m.rope.type, RopeType::kLinear);
  EXPECT_EQ(m.rope.factor, 8.0);
  EXPECT_EQ(m.rope_local.type, RopeType::kDefault);
  EXPECT_EQ(m.dtype, "bfloat16");
  EXPECT_EQ(m.eos_token_id, (std::vector<int64_t>{1, 106}));
  EXPECT_EQ(m.raw["architectures"][0], "Gemma3ForCausalLM");
}

TEST(FamilyConfigs, Phi3AndPhi4Mini) {
  const ModelConfig p3 = config_of("phi-3-mini-4k_hub");
  EXPECT_EQ(p3.model_type, "phi3");
  EXPECT_TRUE(p3.fused_qkv);
  EXPECT_TRUE(p3.fused_gate_up);
  EXPECT_EQ(p3.rope.type, RopeType::kDefault);
  EXPECT_EQ(p3.rotary_dim, 96);
  EXPECT_EQ(p3.layer_window, std::vector<int64_t>(32, 2047));
  for (const char* n : {"phi-4-mini", "phi-4-mini_hub"}) {
    const ModelConfig p = config_of(n);
    SCOPED_TRACE(n);
    EXPECT_EQ(p.head_dim, 128);
    EXPECT_EQ(p.rotary_dim, 96);
    EXPECT_EQ(p.rope.type, RopeType::kLongrope);
    EXPECT_EQ(p.rope.original_max_position_embeddings, 4096);
    EXPECT_EQ(p.rope.factor, 32.0);
    EXPECT_EQ(p.rope.long_factor.size(), 48u);
    EXPECT_EQ(p.rope.long_factor[47], 47.77);
    EXPECT_DOUBLE_EQ(p.rope.attention_factor, 1.1902380714238083);
    EXPECT_TRUE(p.tie_word_embeddings);
    EXPECT_EQ(p.num_parameters(), 3836021760);
  }
  // The top-level original_max_position_embeddings wins over the dict's (Phi3Config).
  zt::Json j = load_json(kConfigs / "phi-4-mini_hub.json");
  j["rope_scaling"]["original_max_position_embeddings"] = 8192;
  j["rope_scaling"]["attention_factor"] = 1.5;
  const ModelConfig q = zt::parse_model_config(j, "p.json");
  EXPECT_EQ(q.rope.original_max_position_embeddings, 4096);
  EXPECT_EQ(q.rope.attention_factor, 1.5);
}

// parse(to_json(parse(x))) makes the same choices as parse(x).
TEST(FamilyConfigs, ExportRoundTrip) {
  for (const char* n : kNames) {
    SCOPED_TRACE(n);
    const ModelConfig a = config_of(n);
    const zt::Json j = zt::model_config_to_json(a);
    const ModelConfig b = zt::parse_model_config(j, "export.json");
    EXPECT_EQ(b.model_type, a.model_type);
    EXPECT_EQ(b.multimodal_type, "");
    EXPECT_EQ(b.num_parameters(), a.num_parameters());
    EXPECT_EQ(b.head_dim, a.head_dim);
    EXPECT_EQ(b.num_key_value_heads, a.num_key_value_heads);
    EXPECT_EQ(b.rms_norm_eps, a.rms_norm_eps);
    EXPECT_EQ(b.tie_word_embeddings, a.tie_word_embeddings);
    EXPECT_EQ(b.qkv_bias, a.qkv_bias);
    EXPECT_EQ(b.o_proj_bias, a.o_proj_bias);
    EXPECT_EQ(b.mlp_bias, a.mlp_bias);
    EXPECT_EQ(b.mlp_act, a.mlp_act);
    EXPECT_EQ(b.norm_style, a.norm_style);
    EXPECT_EQ(b.norm_placement, a.norm_placement);
    EXPECT_EQ(b.qk_norm, a.qk_norm);
    EXPECT_EQ(b.attention_scale, a.attention_scale);
    EXPECT_EQ(b.embed_scale, a.embed_scale);
    EXPECT_EQ(b.rotary_dim, a.rotary_dim);
    EXPECT_EQ(b.layer_window, a.layer_window);
    EXPECT_EQ(b.layer_rope, a.layer_rope);
    EXPECT_EQ(b.fused_qkv, a.fused_qkv);
    for (auto [x, y] : {std::pair{&a.rope, &b.rope}, std::pair{&a.rope_local, &b.rope_local}}) {
      EXPECT_EQ(y->type, x->type);
      EXPECT_EQ(y->theta, x->theta);
      EXPECT_EQ(y->factor, x->factor);
      EXPECT_EQ(y->original_max_position_embeddings, x->original_max_position_embeddings);
      EXPECT_EQ(y->short_factor, x->short_factor);
      EXPECT_EQ(y->long_factor, x->long_factor);
      EXPECT_EQ(y->attention_factor, x->attention_factor);
    }
    EXPECT_EQ(b.eos_token_id, a.eos_token_id);
    EXPECT_EQ(b.dtype, a.dtype);
  }
  // Architectures per family; a multimodal gemma3 exports a gemma3_text model.
  const zt::Json g = zt::model_config_to_json(config_of("gemma-3-4b-it_hub"));
  EXPECT_EQ(g["model_type"], "gemma3_text");
  EXPECT_EQ(g["architectures"], zt::Json::array({"Gemma3ForCausalLM"}));
  EXPECT_FALSE(g.contains("vision_config"));
  EXPECT_EQ(g["rope_scaling"]["rope_type"], "linear");
  EXPECT_EQ(g["rope_local_base_freq"], 10000.0);
  // A config built in code gets each family's architecture.
  for (auto [n, arch] : {std::pair{"qwen3-0.6b", "Qwen3ForCausalLM"},
                         {"mistral-7b-v0.3", "MistralForCausalLM"},
                         {"gemma-3-1b", "Gemma3ForCausalLM"},
                         {"olmo-2-1b", "Olmo2ForCausalLM"},
                         {"smollm3-3b", "SmolLM3ForCausalLM"},
                         {"phi-4-mini", "Phi3ForCausalLM"}}) {
    ModelConfig c = config_of(n);
    c.raw = zt::Json::object();
    const zt::Json j = zt::model_config_to_json(c);
    EXPECT_EQ(j["architectures"][0], arch) << n;
    const ModelConfig b = zt::parse_model_config(j, "fresh.json");
    EXPECT_EQ(b.layer_window, c.layer_window) << n;
    EXPECT_EQ(b.layer_rope, c.layer_rope) << n;
    EXPECT_EQ(b.rotary_dim, c.rotary_dim) << n;
    EXPECT_EQ(b.rope.attention_factor, c.rope.attention_factor) << n;
    EXPECT_EQ(b.rope_local.theta, c.rope_local.theta) << n;
    EXPECT_EQ(b.num_parameters(), c.num_parameters()) << n;
  }
}

TEST(FamilyConfigs, RefusalsNameFileKeyAndValue) {
  auto with = [](const char* name, const char* key, zt::Json v) {
    zt::Json j = load_json(kConfigs / (std::string(name) + ".json"));
    j[key] = std::move(v);
    return j;
  };
  expect_error(
      [&] {
        zt::parse_model_config(with("gemma-3-1b", "final_logit_softcapping", 30.0), "g.json");
      },
      {"g.json: final_logit_softcapping 30.0 is not supported"});
  expect_error(
      [&] { zt::parse_model_config(with("gemma-3-1b", "attn_logit_softcapping", 50.0), "g.json"); },
      {"g.json: attn_logit_softcapping 50.0 is not supported"});
  expect_error(
      [&] {
        zt::parse_model_config(with("gemma-3-1b", "use_bidirectional_attention", true), "g.json");
      },
      {"g.json: use_bidirectional_attention true is not supported"});
  expect_error(
      [&] { zt::parse_model_config(with("phi-3-mini-4k_hub", "resid_pdrop", 0.1), "p.json"); },
      {"p.json: resid_pdrop 0.1 is not supported"});
  expect_error(
      [&] { zt::parse_model_config(with("phi-3-mini-4k_hub", "embd_pdrop", 0.1), "p.json"); },
      {"p.json: embd_pdrop 0.1 is not supported"});
  expect_error([&] { zt::parse_model_config(with("olmo-2-1b", "hidden_act", "relu"), "o.json"); },
               {"o.json: hidden_act \"relu\" (key \"hidden_act\") is not supported"});
  // transformers maps "swish" to nn.SiLU: the same SwiGLU as "silu".
  EXPECT_EQ(zt::parse_model_config(with("olmo-2-1b", "hidden_act", "swish"), "o.json").mlp_act,
            zt::GluActivation::kSilu);
  expect_error(
      [&] { zt::parse_model_config(with("gemma-3-1b", "hidden_activation", "gelu"), "g.json"); },
      {"g.json: hidden_activation \"gelu\" (key \"hidden_activation\") is not supported"});
  expect_error(
      [&] {
        zt::parse_model_config(
            with("qwen3-0.6b", "rope_parameters", {{"rope_type", "ntk"}, {"factor", 4.0}}),
            "q.json");
      },
      {"q.json: rope type \"ntk\" (key \"rope_parameters.rope_type\") is not supported",
       "\"default\", \"linear\", \"llama3\", \"longrope\", \"dynamic\" and \"yarn\""});
  expect_error(
      [&] {
        zt::parse_model_config(with("qwen3-0.6b", "rope_parameters", {{"rope_type", "linear"}}),
                               "q.json");
      },
      {"q.json: rope type \"linear\" needs key \"rope_parameters.factor\", which is missing"});
  zt::Json short_list = load_json(kConfigs / "phi-4-mini_hub.json");
  short_list["rope_scaling"]["long_factor"] = {1.0, 2.0};
  expect_error([&] { zt::parse_model_config(short_list, "p.json"); },
               {"p.json: longrope long_factor has 2 values, expected rotary_dim / 2 = 48"});
  expect_error(
      [&] { zt::parse_model_config(with("mistral-7b-v0.3", "model_type", "gpt2"), "m.json"); },
      {"m.json: model_type \"gpt2\" is not supported; zerotune implements \"qwen2\", "
       "\"qwen3\", \"llama\", \"mistral\", \"gemma3_text\", \"olmo2\", \"smollm3\", "
       "\"phi3\", \"gemma3\""});
  expect_error(
      [&] { zt::parse_model_config(with("mistral-7b-v0.3", "attention_bias", true), "m.json"); },
      {"m.json: attention_bias true is not supported for model_type \"mistral\""});
  expect_error([&] { zt::parse_model_config(with("phi-4-mini_hub", "mlp_bias", true), "p.json"); },
               {"p.json: mlp_bias true is not supported for model_type \"phi3\""});
  expect_error(
      [&] { zt::parse_model_config(with("qwen3-0.6b", "partial_rotary_factor", 0.5), "q.json"); },
      {"q.json: partial_rotary_factor 0.5 is not supported for model_type \"qwen3\""});
  expect_error(
      [&] { zt::parse_model_config(with("olmo-2-1b", "use_sliding_window", true), "o.json"); },
      {"o.json: use_sliding_window true is not supported for model_type \"olmo2\""});
  expect_error(
      [&] {
        zt::parse_model_config(with("gemma-3-1b", "layer_types", {"full_attention"}), "g.json");
      },
      {"g.json: key \"layer_types\" is [\"full_attention\"], expected a list of "
       "num_hidden_layers (26) layer types"});
  expect_error(
      [&] {
        zt::parse_model_config(
            with("phi-4-mini_hub", "rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}}),
            "p.json");
      },
      {"p.json: rope type \"llama3\" (key \"rope_scaling.rope_type\") is not supported for phi3"});
  // Inside a multimodal gemma3 config the key is named with its text_config prefix.
  zt::Json mm = load_json(kConfigs / "gemma-3-4b-it_hub.json");
  mm["text_config"]["final_logit_softcapping"] = 30.0;
  expect_error([&] { zt::parse_model_config(mm, "mm.json"); },
               {"mm.json: text_config.final_logit_softcapping 30.0 is not supported"});
  mm["text_config"].erase("final_logit_softcapping");
  mm["text_config"]["sliding_window"] = "big";
  expect_error([&] { zt::parse_model_config(mm, "mm.json"); },
               {"mm.json: key \"text_config.sliding_window\" is \"big\", expected an integer"});
  mm.erase("text_config");
  expect_error([&] { zt::parse_model_config(mm, "mm.json"); },
               {"mm.json: model_type \"gemma3\" needs an object \"text_config\""});
}

TEST(FamilyConfigs, LinearAndLongropeInvFreqFormulas) {
  zt::RopeConfig r;
  r.type = RopeType::kLinear;
  r.theta = 10000.0;
  r.factor = 4.0;
  const std::vector<float> lin = zt::rope_inv_freq(r, 8);
  ASSERT_EQ(lin.size(), 4u);
  EXPECT_EQ(lin[0], 0.25f);
  EXPECT_EQ(lin[2], (1.0f / 100.0f) / 4.0f);
  r.type = RopeType::kLongrope;
  r.short_factor = {1.0, 2.0, 4.0, 8.0};
  r.long_factor = {2.0, 2.0, 2.0, 2.0};
  const std::vector<float> s = zt::rope_inv_freq(r, 8), l = zt::rope_inv_freq(r, 8, true);
  EXPECT_EQ(s[0], 1.0f);
  EXPECT_EQ(s[1], 1.0f / (2.0f * 10.0f));
  EXPECT_EQ(l[0], 0.5f);
  expect_error([&] { zt::rope_inv_freq(r, 6); },
               {"rope_inv_freq: longrope short_factor has 4 values, expected rotary_dim / 2 = 3"});
}

}  // namespace

// What transformers raises on or reads differently, refused or read as it does (review of the
// family parse): sliding layers without a window, SmolLM3's use_sliding_window disagreeing with
// its layer_types, an empty rope_scaling (falls through to rope_parameters), an explicit null
// num_key_value_heads (= num_attention_heads), longrope on Gemma's local RoPE.
TEST(FamilyConfigs, TransformersEdgeCases) {
  zt::Json g = load_json(kConfigs / "gemma-3-1b.json");
  g["sliding_window"] = nullptr;
  expect_error([&] { zt::parse_model_config(g, "g.json"); },
               {"g.json: sliding_window is null but layer 0 is a sliding_attention layer"});
  zt::Json s = load_json(kConfigs / "smollm3-3b.json");
  s["layer_types"][1] = "sliding_attention";
  s["sliding_window"] = 128;
  expect_error([&] { zt::parse_model_config(s, "s.json"); },
               {"s.json: layer_types[1] is \"sliding_attention\" but use_sliding_window is false "
                "and sliding_window is 128"});
  s["use_sliding_window"] = true;
  EXPECT_EQ(zt::parse_model_config(s, "s.json").layer_window[1], 128);
  zt::Json l = load_json(kConfigs / "llama-3.2-1b_hub.json");
  l["rope_parameters"] = l["rope_scaling"];
  l["rope_parameters"]["rope_theta"] = 500000.0;
  l["rope_scaling"] = zt::Json::object();
  EXPECT_EQ(zt::parse_model_config(l, "l.json").rope.type, RopeType::kLlama3);
  zt::Json q = load_json(kConfigs / "qwen3-1.7b.json");
  q["num_key_value_heads"] = nullptr;
  EXPECT_EQ(zt::parse_model_config(q, "q.json").num_key_value_heads,
            q["num_attention_heads"].get<int64_t>());
}

// Absurd sizes are config errors naming the key (not an allocation failure later).
TEST(FamilyConfigs, SizesBeyondWhatZerotuneSupportsNameTheKey) {
  zt::Json q = load_json(kConfigs / "qwen3-1.7b.json");
  q["num_hidden_layers"] = int64_t{1000000000000};
  expect_error([&] { zt::parse_model_config(q, "q.json"); },
               {"q.json: key \"num_hidden_layers\" is 1000000000000, larger than zerotune "
                "supports (at most 65536)"});
}
