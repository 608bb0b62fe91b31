// config.json -> ModelConfig on the shared Qwen2.5 configs (4.x and 5.x layouts) and Llama 3.1
// fixtures; RoPE inverse frequencies against transformers (tests/data/io/rope.json).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/zt_test_util.h"
#include "io/model_config.h"

namespace {

using zt::ModelConfig;
using zt::RopeType;
using zt::testing::expect_error;
using zt::testing::TempDir;
namespace fs = std::filesystem;

const fs::path kShared = fs::path(ZT_SHARED_DATA) / "models";
const fs::path kData = fs::path(ZT_TEST_DATA) / "io";

zt::Json load_json(const fs::path& p) { return zt::Json::parse(zt::read_file(p)); }

TEST(ModelConfig, ReadsQwen25Layout449) {
  const ModelConfig c = zt::load_model_config(kShared / "qwen2.5-0.5b-instruct");
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden_size, 896);
  EXPECT_EQ(c.intermediate_size, 4864);
  EXPECT_EQ(c.num_hidden_layers, 24);
  EXPECT_EQ(c.num_attention_heads, 14);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope.type, RopeType::kDefault);
  EXPECT_EQ(c.rope.theta, 1000000.0);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_proj_bias);
  EXPECT_EQ(c.dtype, "float32");  // torch_dtype
  EXPECT_EQ(c.bos_token_id, std::vector<int64_t>{151643});
  EXPECT_EQ(c.eos_token_id, std::vector<int64_t>{151645});
  EXPECT_TRUE(c.pad_token_id.empty());
  EXPECT_EQ(c.num_parameters(), 494032768);  // Qwen2.5-0.5B: 0.49B parameters
  EXPECT_NE(c.source.find("qwen2.5-0.5b-instruct/config.json"), std::string::npos);
}

TEST(ModelConfig, ReadsTransformers5Layout) {
  // rope_parameters.rope_theta and "dtype" instead of rope_theta / torch_dtype
  const ModelConfig c = zt::load_model_config(kShared / "qwen2.5-1.5b-instruct" / "config.json");
  EXPECT_EQ(c.hidden_size, 1536);
  EXPECT_EQ(c.num_hidden_layers, 28);
  EXPECT_EQ(c.num_attention_heads, 12);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rope.theta, 1000000.0);
  EXPECT_EQ(c.rope.type, RopeType::kDefault);
  EXPECT_EQ(c.dtype, "float16");
  EXPECT_EQ(c.num_parameters(), 1543714304);
  // The base model's config (4.57 layout, integer rope_theta) gives the documented count.
  const ModelConfig b = zt::load_model_config(kShared / "qwen2.5-1.5b");
  EXPECT_EQ(b.rope.theta, 1000000.0);
  EXPECT_EQ(b.max_position_embeddings, 131072);
  EXPECT_EQ(b.dtype, "bfloat16");
  EXPECT_EQ(b.num_parameters(), 1543714304);
}

TEST(ModelConfig, Llama3BothLayoutsAgree) {
  for (const char* f : {"llama3_v4_config.json", "llama3_v5_config.json"}) {
    const ModelConfig c = zt::load_model_config(kData / f);
    EXPECT_EQ(c.model_type, "llama") << f;
    EXPECT_EQ(c.head_dim, 128);
    EXPECT_EQ(c.num_key_value_heads, 8);
    EXPECT_FALSE(c.qkv_bias);
    EXPECT_FALSE(c.tie_word_embeddings);
    EXPECT_EQ(c.rope.type, RopeType::kLlama3);
    EXPECT_EQ(c.rope.theta, 500000.0);
    EXPECT_EQ(c.rope.factor, 8.0);
    EXPECT_EQ(c.rope.low_freq_factor, 1.0);
    EXPECT_EQ(c.rope.high_freq_factor, 4.0);
    EXPECT_EQ(c.rope.original_max_position_embeddings, 8192);
    EXPECT_EQ(c.eos_token_id, (std::vector<int64_t>{128001, 128008, 128009}));
    EXPECT_EQ(c.rms_norm_eps, 1e-5);
    EXPECT_EQ(c.num_parameters(), 8030261248);  // Llama 3.1 8B
  }
}

// Units in the last place between two finite floats of the same sign.
int64_t ulp_diff(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::abs(static_cast<int64_t>(ia) - ib);
}

std::vector<float> golden_rope(const char* key) {
  const zt::Json g = load_json(kData / "rope.json");
  std::vector<float> out;
  for (const auto& b : g[key]) {
    const uint32_t u = b.get<uint32_t>();
    float f;
    std::memcpy(&f, &u, 4);
    out.push_back(f);
  }
  return out;
}

// inv_freq within 1 ulp of transformers everywhere (torch's vectorised powf vs a correctly
// rounded pow), and bitwise equal for most entries.
void check_rope(const ModelConfig& c, const char* key, size_t want_len) {
  const std::vector<float> want = golden_rope(key);
  const std::vector<float> got = zt::rope_inv_freq(c);
  ASSERT_EQ(want.size(), want_len) << key;
  ASSERT_EQ(got.size(), want.size()) << key;
  size_t exact = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(ulp_diff(got[i], want[i]), 1)
        << key << " i=" << i << " got " << got[i] << " want " << want[i];
    exact += got[i] == want[i];
  }
  EXPECT_GE(exact * 10, got.size() * 9)
      << key << ": only " << exact << " of " << got.size() << " bitwise";
  EXPECT_EQ(got[0], want[0]);  // 1 / base^0 = 1 (or 1/factor-scaled) exactly
}

TEST(ModelConfig, RopeInvFreqMatchesTransformers) {
  check_rope(zt::load_model_config(kShared / "qwen2.5-1.5b-instruct"), "qwen25_15b", 64);
  check_rope(zt::load_model_config(kShared / "qwen2.5-0.5b-instruct"), "qwen25_05b", 32);
  const ModelConfig l31 = zt::load_model_config(kData / "llama3_v4_config.json");
  check_rope(l31, "llama31_8b", 64);
  // The llama3 scaling is applied: the lowest frequencies are divided by 8, the highest kept.
  const std::vector<float> inv = zt::rope_inv_freq(l31);
  EXPECT_EQ(inv[0], 1.0f);
  EXPECT_LT(inv[63], 1e-6f);
  zt::Json j = load_json(kData / "llama3_v4_config.json");
  j["hidden_size"] = 2048;
  j["rope_scaling"]["factor"] = 32.0;
  check_rope(zt::parse_model_config(j, "llama32"), "llama32_1b", 32);
  zt::Json d = load_json(kData / "llama3_v4_config.json");
  d["rope_scaling"] = nullptr;
  d["rope_theta"] = 10000;
  check_rope(zt::parse_model_config(d, "theta1e4"), "theta_1e4_d128", 64);
}

// Rope types whose rules transformers 4.57.1 (the users' version) fixes — yarn, the old "type"
// key — against its own ROPE_INIT_FUNCTIONS (tools/make_rope_goldens.py): inv_freq within 1 ulp and
// the cos/sin scaling.
TEST(ModelConfig, RopeOfTransformers457) {
  const zt::Json g = load_json(kData / "rope_457.golden.json");
  ASSERT_EQ(g["transformers"], "4.57.1");
  ASSERT_GE(g["cases"].size(), 10u);
  for (const auto& c : g["cases"]) {
    const std::string name = c["name"].get<std::string>();
    const ModelConfig m = zt::parse_model_config(c["config"], name);
    std::vector<float> want;
    for (const auto& b : c["inv_freq_bits"]) {
      const uint32_t u = b.get<uint32_t>();
      float f;
      std::memcpy(&f, &u, 4);
      want.push_back(f);
    }
    const std::vector<float> got = zt::rope_inv_freq(m);
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_LE(ulp_diff(got[i], want[i]), 1)
          << name << " i=" << i << " got " << got[i] << " want " << want[i];
    EXPECT_EQ(zt::rope_type_name(m.rope.type), c["rope_type"].get<std::string>()) << name;
    if (c["rope_type"] == "yarn") {
      EXPECT_NEAR(m.rope.attention_factor, c["attention_factor"].get<double>(), 1e-15) << name;
    }
  }
}

// Configs transformers 4.57 and 5 would read into different RoPEs are refused naming the keys.
TEST(ModelConfig, RopeKeysThatTransformers457And5ReadApartAreRefused) {
  zt::Json j = load_json(kData / "llama3_v4_config.json");
  j["rope_scaling"] = zt::Json{{"type", "linear"}, {"rope_type", "default"}, {"factor", 4.0}};
  expect_error([&] { zt::parse_model_config(j, "c.json"); },
               {"c.json: keys \"rope_scaling.rope_type\" (\"default\") and \"rope_scaling.type\" "
                "(\"linear\") disagree: transformers 4.57 uses \"type\""});
  // longrope outside Phi-3: 4.57 reads the top-level original_max_position_embeddings, 5 the
  // dict's.
  j["rope_scaling"] = zt::Json{{"rope_type", "longrope"},
                               {"short_factor", zt::Json::array()},
                               {"long_factor", zt::Json::array()},
                               {"original_max_position_embeddings", 1024}};
  std::vector<double> ones(64, 1.0);
  j["rope_scaling"]["short_factor"] = ones;
  j["rope_scaling"]["long_factor"] = ones;
  expect_error([&] { zt::parse_model_config(j, "c.json"); },
               {"longrope's original_max_position_embeddings is 1024 by key "
                "\"rope_scaling.original_max_position_embeddings\" (as transformers 5 reads it) "
                "but 131072 as transformers 4.57 reads it"});
  j["original_max_position_embeddings"] = 1024;  // the key 4.57 reads: both agree
  EXPECT_EQ(zt::parse_model_config(j, "c.json").rope.original_max_position_embeddings, 1024);
  // With the top-level key 4.57 takes factor = max_position_embeddings / it (128) for the
  // attention factor, 5 the dict's: a differing dict factor is refused unless attention_factor
  // is given.
  j["rope_scaling"]["factor"] = 4.0;
  expect_error(
      [&] { zt::parse_model_config(j, "c.json"); },
      {"c.json: key \"rope_scaling.factor\" is 4, but transformers 4.57 uses "
       "max_position_embeddings / original_max_position_embeddings = 131072 / 1024 = 128"});
  j["rope_scaling"]["factor"] = 128.0;
  EXPECT_EQ(zt::parse_model_config(j, "c.json").rope.factor, 128.0);
  j["rope_scaling"]["factor"] = 4.0;
  j["rope_scaling"]["attention_factor"] = 1.2;
  EXPECT_EQ(zt::parse_model_config(j, "c.json").rope.attention_factor, 1.2);
  j["rope_scaling"] = zt::Json{{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", -1}};
  expect_error([&] { zt::parse_model_config(j, "c.json"); },
               {"c.json: key \"rope_scaling.beta_fast\" is -1, expected a positive number"});
  j["rope_scaling"] = zt::Json{{"rope_type", "yarn"}};
  expect_error([&] { zt::parse_model_config(j, "c.json"); },
               {"rope type \"yarn\" needs key \"rope_scaling.factor\", which is missing"});
  j["rope_scaling"] = zt::Json{{"rope_type", "dynamic"}};
  expect_error([&] { zt::parse_model_config(j, "c.json"); },
               {"rope type \"dynamic\" needs key \"rope_scaling.factor\", which is missing"});
  j["rope_scaling"] = zt::Json{{"rope_type", "ntk"}, {"factor", 2.0}};
  expect_error([&] { zt::parse_model_config(j, "c.json"); },
               {"rope type \"ntk\"", "\"longrope\", \"dynamic\" and \"yarn\""});
}

zt::Json tiny() {
  return zt::Json::parse(R"({"model_type": "qwen2", "vocab_size": 64, "hidden_size": 16,
      "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4,
      "max_position_embeddings": 128})");
}

TEST(ModelConfig, DefaultsFollowTransformers) {
  const ModelConfig c = zt::parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.num_key_value_heads, 4);  // = heads
  EXPECT_EQ(c.head_dim, 4);             // hidden / heads
  EXPECT_EQ(c.rope.theta, 10000.0);     // default_theta
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_EQ(c.initializer_range, 0.02);
  EXPECT_EQ(c.dtype, "");
  zt::Json l = tiny();
  l["model_type"] = "llama";
  l["attention_bias"] = true;
  l["head_dim"] = 8;
  l["rope_scaling"] = {{"type", "default"}};
  const ModelConfig lc = zt::parse_model_config(l, "l.json");
  EXPECT_TRUE(lc.qkv_bias);
  EXPECT_TRUE(lc.o_proj_bias);
  EXPECT_EQ(lc.head_dim, 8);
  EXPECT_EQ(lc.rope.type, RopeType::kDefault);
}

TEST(ModelConfig, UnsupportedSettingsAreErrorsNamingFileAndKey) {
  auto with = [](const char* key, zt::Json v) {
    zt::Json j = tiny();
    j[key] = std::move(v);
    return j;
  };
  expect_error(
      [&] { zt::parse_model_config(with("model_type", "gpt2"), "m/config.json"); },
      {"m/config.json: model_type \"gpt2\" is not supported", "\"qwen2\", \"qwen3\", \"llama\""});
  // No model_type (or null): said so, naming the file; it read as 'model_type "" is not supported'.
  for (const zt::Json& absent : {zt::Json(), zt::Json("drop")}) {
    zt::Json j = tiny();
    if (absent.is_null())
      j["model_type"] = nullptr;
    else
      j.erase("model_type");
    EXPECT_EQ(zt::testing::error_of([&] { zt::parse_model_config(j, "m/config.json"); }),
              "m/config.json: no \"model_type\" key, which names the architecture (transformers' "
              "AutoConfig needs it too); zerotune implements \"qwen2\", \"qwen3\", \"llama\", "
              "\"mistral\", \"gemma3_text\", \"olmo2\", \"smollm3\", \"phi3\", \"gemma3\"")
        << absent.dump();
  }
  expect_error(
      [&] {
        zt::parse_model_config(with("rope_scaling", {{"rope_type", "ntk"}, {"factor", 4.0}}),
                               "y.json");
      },
      {"y.json: rope type \"ntk\" (key \"rope_scaling.rope_type\") is not supported"});
  expect_error(
      [&] {
        zt::parse_model_config(with("rope_parameters", {{"rope_type", "ntk"}, {"rope_theta", 1e4}}),
                               "p.json");
      },
      {"p.json: rope type \"ntk\" (key \"rope_parameters.rope_type\") is not supported"});
  expect_error(
      [&] {
        zt::parse_model_config(with("rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}}),
                               "l.json");
      },
      {"l.json: rope type \"llama3\" needs key \"rope_scaling.low_freq_factor\", which is "
       "missing"});
  expect_error([&] { zt::parse_model_config(with("mlp_bias", true), "b.json"); },
               {"b.json: mlp_bias true is not supported"});
  // llama's transformers model has no sliding window (qwen2's has: tests/io/test_family_configs).
  auto llama_with = [&](const char* key, zt::Json v) {
    zt::Json j = with(key, std::move(v));
    j["model_type"] = "llama";
    return j;
  };
  expect_error([&] { zt::parse_model_config(llama_with("use_sliding_window", true), "s.json"); },
               {"s.json: use_sliding_window true is not supported"});
  expect_error(
      [&] {
        zt::parse_model_config(llama_with("layer_types", {"full_attention", "sliding_attention"}),
                               "lt.json");
      },
      {"lt.json: layer_types[1] is \"sliding_attention\"; only \"full_attention\" is supported"});
  expect_error([&] { zt::parse_model_config(with("hidden_act", "gelu"), "a.json"); },
               {"a.json: hidden_act \"gelu\" (key \"hidden_act\") is not supported"});
  expect_error([&] { zt::parse_model_config(with("attention_dropout", 0.1), "d.json"); },
               {"d.json: attention_dropout 0.1 is not supported"});
  expect_error([&] { zt::parse_model_config(with("hidden_size", "16"), "t.json"); },
               {"t.json: key \"hidden_size\" is \"16\", expected an integer"});
  expect_error([&] { zt::parse_model_config(with("num_key_value_heads", 3), "k.json"); },
               {"k.json: num_attention_heads 4 is not a multiple of num_key_value_heads 3"});
  zt::Json missing = tiny();
  missing.erase("vocab_size");
  expect_error([&] { zt::parse_model_config(missing, "v.json"); },
               {"v.json: required key \"vocab_size\" is missing"});
  TempDir d;
  zt::write_file_atomic(d / "config.json", "{\"model_type\": ");
  expect_error([&] { zt::load_model_config(d.path()); }, {"config.json: invalid JSON"});
  expect_error([&] { zt::load_model_config(d / "nope.json"); }, {"nope.json: cannot open"});
}

// A quantized checkpoint's config (bitsandbytes, GPTQ, …; at the top level of a gemma3 multimodal
// file too): transformers' Trainer refuses to fine-tune it without adapters, so does zerotune,
// naming the file, the key and the method. A null quantization_config is no quantization.
TEST(ModelConfig, QuantizedModelIsRefusedNamingTheMethod) {
  zt::Json j = tiny();
  j["quantization_config"] = {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}};
  expect_error([&] { zt::parse_model_config(j, "q/config.json"); },
               {"q/config.json: key \"quantization_config\" (quant_method \"bitsandbytes\") "
                "marks a quantized model; zerotune fine-tunes full-precision weights only",
                "start from the unquantized model"});
  zt::Json mm = zt::Json::object();
  mm["model_type"] = "gemma3";
  mm["text_config"] = tiny();
  mm["text_config"]["model_type"] = "gemma3_text";
  mm["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
  expect_error([&] { zt::parse_model_config(mm, "mm.json"); },
               {"mm.json: key \"quantization_config\" (quant_method \"gptq\")"});
  j["quantization_config"] = nullptr;
  EXPECT_EQ(zt::parse_model_config(j, "n.json").hidden_size, 16);
}

// Values that make the first step's loss NaN, which the trainer would report as the data's
// ("dataset rows of the step: …, set trainer.nan_policy"): refused where config.json is read.
TEST(ModelConfig, NonPositiveEpsAndRopeThetaNameTheKey) {
  zt::Json j = tiny();
  j["rms_norm_eps"] = -1;
  expect_error([&] { zt::parse_model_config(j, "m/config.json"); },
               {"m/config.json: key \"rms_norm_eps\" is -1, expected a positive number"});
  j = tiny();
  j["rms_norm_eps"] = 0;
  expect_error([&] { zt::parse_model_config(j, "m/config.json"); },
               {"key \"rms_norm_eps\" is 0, expected a positive number"});
  j = tiny();
  j["rope_theta"] = 0;
  expect_error([&] { zt::parse_model_config(j, "m/config.json"); },
               {"m/config.json: key \"rope_theta\" is 0, expected a positive number"});
  // A negative init standard deviation (torch: "normal expects std >= 0.0"); 0 is torch's too.
  j = tiny();
  j["initializer_range"] = -1;
  expect_error([&] { zt::parse_model_config(j, "m/config.json"); },
               {"m/config.json: key \"initializer_range\" is -1, expected a number >= 0"});
  j["initializer_range"] = 0;
  EXPECT_EQ(zt::parse_model_config(j, "m/config.json").initializer_range, 0.0);
  j = tiny();
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", -5}};
  expect_error([&] { zt::parse_model_config(j, "m/config.json"); },
               {"key \"rope_parameters.rope_theta\" is -5, expected a positive number"});
}

// The rope_theta refused is named by the key it came from: the top-level key when the rope dict
// has none (it was named "rope_scaling.rope_theta"), Gemma 3's rope_local_base_freq for its local
// rope.
TEST(ModelConfig, NonPositiveRopeThetaNamesTheKeyItCameFrom) {
  zt::Json j = tiny();
  j["rope_theta"] = 0;
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  expect_error([&] { zt::parse_model_config(j, "m/config.json"); },
               {"m/config.json: key \"rope_theta\" is 0, expected a positive number"});
  j["rope_scaling"]["rope_theta"] = -1;  // the dict's own wins, and is named
  expect_error(
      [&] { zt::parse_model_config(j, "m/config.json"); },
      {"m/config.json: key \"rope_scaling.rope_theta\" is -1, expected a positive number"});
  zt::Json g = tiny();
  g["model_type"] = "gemma3_text";
  g["rope_local_base_freq"] = -10000;
  g["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  expect_error(
      [&] { zt::parse_model_config(g, "g/config.json"); },
      {"g/config.json: key \"rope_local_base_freq\" is -10000, expected a positive number"});
}

// Every rope scaling value zerotune reads is held to the range of transformers'
// `_validate_<type>_rope_parameters` (which only warns): factor 0 and its kin gave a NaN loss at
// step 1, blamed on the data.
TEST(ModelConfig, RopeScalingValuesOutsideTransformersRangesNameTheKey) {
  const zt::Json llama3 = {{"rope_type", "llama3"},
                           {"factor", 8.0},
                           {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0},
                           {"original_max_position_embeddings", 64}};
  const zt::Json longrope = {{"rope_type", "longrope"},
                             {"short_factor", {1.0, 1.0}},
                             {"long_factor", {2.0, 2.0}},
                             {"original_max_position_embeddings", 64}};
  auto error_of = [](const char* type, const zt::Json& dict) {
    zt::Json j = tiny();
    j["model_type"] = type;
    j["rope_scaling"] = dict;
    try {
      zt::parse_model_config(j, "m/config.json");
    } catch (const zt::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // The fixtures themselves are accepted, and so are the values transformers only warns about.
  EXPECT_EQ(error_of("llama", llama3), "");
  EXPECT_EQ(error_of("phi3", longrope), "");
  zt::Json warned = llama3;
  warned["factor"] = 0.5;
  warned["high_freq_factor"] = 0.5;
  EXPECT_EQ(error_of("llama", warned), "");
  EXPECT_EQ(error_of("llama", zt::Json{{"rope_type", "linear"}, {"factor", 0.5}}), "");
  struct Case {
    const char* type;
    zt::Json base;
    const char* key;
    zt::Json value;
    const char* expected;
  };
  const Case cases[] = {
      {"llama", llama3, "factor", 0.0,
       "m/config.json: key \"rope_scaling.factor\" is 0, expected a positive number"},
      {"llama", llama3, "factor", -2.0,
       "key \"rope_scaling.factor\" is -2, expected a positive number"},
      {"llama", llama3, "low_freq_factor", 0.0,
       "key \"rope_scaling.low_freq_factor\" is 0, expected a positive number"},
      {"llama", llama3, "high_freq_factor", 1.0,
       "key \"rope_scaling.high_freq_factor\" is 1, expected a number other than low_freq_factor "
       "(1)"},
      {"llama", llama3, "original_max_position_embeddings", 0,
       "key \"rope_scaling.original_max_position_embeddings\" is 0, expected a positive integer"},
      {"llama",
       {{"rope_type", "linear"}, {"factor", 1.0}},
       "factor",
       0.0,
       "key \"rope_scaling.factor\" is 0, expected a positive number"},
      {"phi3", longrope, "factor", 0.0,
       "key \"rope_scaling.factor\" is 0, expected a positive number"},
      {"phi3",
       longrope,
       "short_factor",
       {1.0, 0.0},
       "key \"rope_scaling.short_factor[1]\" is 0, expected a positive number"},
      {"phi3",
       longrope,
       "long_factor",
       {-2.0, 2.0},
       "key \"rope_scaling.long_factor[0]\" is -2, expected a positive number"},
      {"phi3", longrope, "attention_factor", 0.0,
       "key \"rope_scaling.attention_factor\" is 0, expected a positive number"},
  };
  for (const Case& c : cases) {
    zt::Json d = c.base;
    d[c.key] = c.value;
    const std::string e = error_of(c.type, d);
    EXPECT_NE(e.find(c.expected), std::string::npos) << c.key << " " << c.value << ": " << e;
  }
  // Phi-3's original_max_position_embeddings is the top-level key, and named so.
  zt::Json p = tiny();
  p["model_type"] = "phi3";
  p["rope_scaling"] = longrope;
  p["original_max_position_embeddings"] = 1;
  expect_error([&] { zt::parse_model_config(p, "m/config.json"); },
               {"m/config.json: key \"original_max_position_embeddings\" is 1, expected an integer "
                "> 1 for longrope"});
}

TEST(ModelConfig, Qwen2SlidingWindowAsTransformers) {
  // Qwen2Config: use_sliding_window + max_window_layers (layer_types default), as qwen3.
  zt::Json j = tiny();
  j["use_sliding_window"] = true;
  j["sliding_window"] = 32;
  j["max_window_layers"] = 1;
  EXPECT_EQ(zt::parse_model_config(j, "q.json").layer_window, (std::vector<int64_t>{0, 32}));
  j["layer_types"] = {"sliding_attention", "full_attention"};
  EXPECT_EQ(zt::parse_model_config(j, "q.json").layer_window, (std::vector<int64_t>{32, 0}));
  // A sliding layer without a window: transformers' mask raises; refused naming the layer.
  j["use_sliding_window"] = false;
  expect_error([&] { zt::parse_model_config(j, "q.json"); },
               {"q.json: layer_types[0] is \"sliding_attention\" but there is no window"});
  j["layer_types"] = {"full_attention", "full_attention"};
  EXPECT_EQ(zt::parse_model_config(j, "q.json").layer_window, (std::vector<int64_t>{0, 0}));
}

TEST(ModelConfig, WritesConfigLikeTransformers) {
  // transformers' own fp32 save, re-written by us with dtype bfloat16, equals its bf16 save.
  const ModelConfig c = zt::load_model_config(kData / "tiny_qwen2_f32");
  TempDir d;
  zt::write_model_config(d / "config.json", c, "bfloat16");
  EXPECT_EQ(zt::read_file(d / "config.json"),
            zt::read_file(kData / "tiny_qwen2_bf16" / "config.json"));
  // 4.x layout: written back unchanged (file made by json.dump(indent=2, sort_keys=True)).
  const ModelConfig l = zt::load_model_config(kData / "llama3_v4_config.json");
  EXPECT_EQ(zt::model_config_to_json(l).dump(2), zt::read_file(kData / "llama3_v4_config.json"));
  // 5.x layout: unchanged too, except that "architectures" (absent in a bare config save) is added.
  const ModelConfig l5 = zt::load_model_config(kData / "llama3_v5_config.json");
  zt::Json j5 = zt::model_config_to_json(l5);
  EXPECT_EQ(j5["architectures"], zt::Json::array({"LlamaForCausalLM"}));
  j5.erase("architectures");
  EXPECT_EQ(j5.dump(2) + "\n", zt::read_file(kData / "llama3_v5_config.json"));
  // A config built in code gets the 4.x names and parses back to the same values.
  ModelConfig fresh = zt::parse_model_config(tiny(), "tiny");
  fresh.raw = zt::Json::object();
  fresh.eos_token_id = {5, 6};
  const zt::Json j = zt::model_config_to_json(fresh, "float32");
  EXPECT_EQ(j["architectures"][0], "Qwen2ForCausalLM");
  EXPECT_EQ(j["torch_dtype"], "float32");
  EXPECT_EQ(j["rope_theta"], 10000.0);
  EXPECT_TRUE(j["rope_scaling"].is_null());
  const ModelConfig back = zt::parse_model_config(j, "back");
  EXPECT_EQ(back.eos_token_id, (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(back.num_parameters(), fresh.num_parameters());
  // The input's architectures (a classification head, another family's class) is not carried:
  // the export is the model_type's causal LM, as transformers' save_pretrained writes it.
  zt::Json cls = tiny();
  cls["architectures"] = {"Qwen2ForSequenceClassification"};
  EXPECT_EQ(zt::model_config_to_json(zt::parse_model_config(cls, "cls"))["architectures"],
            zt::Json::array({"Qwen2ForCausalLM"}));
  cls["model_type"] = "llama";
  cls["architectures"] = {"MistralForCausalLM"};
  EXPECT_EQ(zt::model_config_to_json(zt::parse_model_config(cls, "cls"))["architectures"],
            zt::Json::array({"LlamaForCausalLM"}));
}

TEST(ModelConfig, GenerationConfigFromModelConfig) {
  const ModelConfig c = zt::load_model_config(kShared / "qwen2.5-0.5b-instruct");
  EXPECT_EQ(
      zt::generation_config_json(c).dump(),
      R"({"_from_model_config":true,"bos_token_id":151643,"eos_token_id":151645,"transformers_version":"4.49.0"})");
}

}  // namespace
