// The CPU model against transformers 5.17 (fp32, eager attention) on tiny random models of every
// family beyond Qwen2 / Llama-3 (tests/data/model/<case>/, made by
// tools/make_family_model_goldens.py): Qwen3, Llama 3.x variants, Mistral, Gemma 3 text, OLMo 2,
// SmolLM3, Phi-3 / Phi-4-mini. test_model_golden.cpp runs the parity checks on these cases (loss,
// logits, gradients against transformers); here: what the parsed config must say (sliding windows
// per layer, Gemma's embedding scale, longrope's attention factor) and that an export holds exactly
// transformers' state-dict keys with the input's bytes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "io/hf_export.h"
#include "model_test_util.h"

namespace zt {
namespace {

using test::Golden;
using test::TestModel;

class FamilyGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(FamilyGolden, ConfigMatchesTransformers) {
  // The layer choices golden.json records from transformers' modules (layer_choices() of the
  // tool): per-layer sliding window and RoPE, rotated dims, softmax scale; Gemma's embedding
  // scale; longrope's cos/sin factor.
  const Golden g(GetParam());
  const ModelConfig& c = g.cfg;
  EXPECT_EQ(c.layer_window, g.json["layer_window"].get<std::vector<int64_t>>());
  std::vector<int64_t> rope(c.layer_rope.begin(), c.layer_rope.end());
  EXPECT_EQ(rope, g.json["layer_rope"].get<std::vector<int64_t>>());
  EXPECT_EQ(c.rotary_dim, g.json["rotary_dim"].get<int64_t>());
  const double scale = g.json["attention_scale"].get<double>();
  EXPECT_NEAR(c.attention_scale, scale, 1e-15 * scale);
  if (g.json.contains("embed_scale")) {  // Gemma: fp32 sqrt(hidden_size), as transformers has it
    EXPECT_EQ(static_cast<float>(c.embed_scale), g.json["embed_scale"].get<float>());
  } else {
    EXPECT_EQ(c.embed_scale, 1.0);
  }
  if (g.json.contains("rope_attention_factor")) {
    EXPECT_EQ(c.rope.type, RopeType::kLongrope);
    EXPECT_NEAR(c.rope.attention_factor, g.json["rope_attention_factor"].get<double>(), 1e-12);
  }
  EXPECT_EQ(c.num_parameters(), g.json["num_parameters"].get<int64_t>());
}

TEST_P(FamilyGolden, ExportHasExactlyTransformersStateDictKeys) {
  // golden.json "state_dict_keys": the sorted tensor names of transformers' save_pretrained
  // (a tied lm_head absent). The model's named weights and an exported model.safetensors must be
  // exactly those, and (the weights being bf16-exact) hold the input file's bytes.
  const Golden g(GetParam());
  const auto want = g.json["state_dict_keys"].get<std::vector<std::string>>();
  TestModel tm(g, DType::kF32, false, 8);
  std::vector<std::string> names;
  for (const NamedTensor& t : tm.model->named_weights()) names.push_back(t.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, want);

  const auto out =
      std::filesystem::path(::testing::TempDir()) / (std::string("zt_family_export_") + GetParam());
  export_hf_model(out, g.cfg, tm.model->named_weights());  // BF16, as the input file
  const SafetensorsReader back(out);
  std::vector<std::string> exported = back.names();
  std::sort(exported.begin(), exported.end());
  EXPECT_EQ(exported, want);
  for (const std::string& n : want) {
    if (!back.contains(n) || !g.weights->contains(n)) continue;  // reported above
    const auto a = back.raw(n), b = g.weights->raw(n);
    ASSERT_EQ(a.size(), b.size()) << n;
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size())) << n;
  }
  // The exported config parses to the same architecture.
  const ModelConfig re = load_model_config(out);
  EXPECT_EQ(re.num_parameters(), g.cfg.num_parameters());
  EXPECT_EQ(re.layer_window, g.cfg.layer_window);
  EXPECT_EQ(re.layer_rope, g.cfg.layer_rope);
  EXPECT_EQ(re.rotary_dim, g.cfg.rotary_dim);
  EXPECT_EQ(re.attention_scale, g.cfg.attention_scale);
  EXPECT_EQ(re.embed_scale, g.cfg.embed_scale);
  // ZT_KEEP_FAMILY_EXPORTS=DIR keeps each export as DIR/<case> for tools/check_family_export.py,
  // which loads it in transformers (missing/unexpected keys, logits against the golden).
  if (const char* keep = std::getenv("ZT_KEEP_FAMILY_EXPORTS")) {
    const auto dst = std::filesystem::path(keep) / GetParam();
    std::filesystem::remove_all(dst);
    std::filesystem::create_directories(dst.parent_path());
    std::filesystem::copy(out, dst, std::filesystem::copy_options::recursive);
  }
  std::filesystem::remove_all(out);
}

// tools/make_family_model_goldens.py CASES, in its order.
INSTANTIATE_TEST_SUITE_P(
    Tiny, FamilyGolden,
    ::testing::Values("qwen3_tied_gqa", "qwen3_untied", "qwen3_sliding", "llama32_tied",
                      "llama_bias", "llama_linear", "mistral_swa", "gemma3_swa", "gemma3_linear",
                      "olmo2_gqa", "smollm3_nope", "phi3_partial_swa", "phi3_longrope_short",
                      "phi4mini_longrope_long", "gemma3_pad", "olmo2_pad"),
    [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace zt
