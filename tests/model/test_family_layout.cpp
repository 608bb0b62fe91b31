// The parameter layout of each family's real-size config against the names and shapes of the
// transformers model built from it (tests/data/families/configs/*.expect.json, from
// tools/make_family_configs.py), and load_weights' treatment of checkpoint tensors that are not
// parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/zt_test_util.h"
#include "model_test_util.h"
#include "param/param_layout.h"

namespace {

namespace fs = std::filesystem;
const fs::path kConfigs = fs::path(ZT_TEST_DATA) / "families" / "configs";

TEST(FamilyLayout, ParamNamesShapesAndCountMatchTransformers) {
  for (const char* n :
       {"qwen3-0.6b", "llama-3.2-1b_hub", "mistral-7b-v0.3", "gemma-3-1b", "gemma-3-4b-it_hub",
        "olmo-2-1b", "smollm3-3b", "phi-4-mini", "phi-3-mini-4k_hub"}) {
    SCOPED_TRACE(n);
    const zt::ModelConfig c = zt::load_model_config(kConfigs / (std::string(n) + ".json"));
    const zt::Json e = zt::Json::parse(zt::read_file(kConfigs / (std::string(n) + ".expect.json")));
    const zt::ParamLayout layout(c);
    std::vector<std::pair<std::string, std::vector<int64_t>>> got, want;
    int64_t total = 0;
    for (const zt::ParamSpec& p : layout.params()) {
      got.emplace_back(p.name, p.shape);
      total += p.numel;
    }
    for (const auto& p : e["params"])
      want.emplace_back(p[0].get<std::string>(), p[1].get<std::vector<int64_t>>());
    // HF named_parameters() order, except Phi-3's attention, which registers o_proj before
    // qkv_proj (ParamLayout puts qkv_proj first; the order only decides the shard split).
    if (c.model_type == "phi3") {
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
    }
    EXPECT_EQ(got, want);
    EXPECT_EQ(total, e["num_parameters"].get<int64_t>());
    EXPECT_EQ(c.num_parameters(), total);
  }
}

// A copy of the tiny qwen2 checkpoint with `extra` tensors added.
void write_with_extra(const fs::path& dir, const std::vector<std::string>& extra) {
  const fs::path src = zt::test::model_dir("qwen2_untied");
  fs::create_directories(dir);
  fs::copy_file(src / "config.json", dir / "config.json");
  const zt::SafetensorsReader r(src);
  std::vector<std::vector<float>> data;
  std::vector<std::vector<int64_t>> shapes;
  for (const std::string& n : r.names()) {
    data.push_back(r.load_f32(n));
    shapes.push_back(r.info(n).shape);
  }
  std::vector<zt::NamedTensor> ts;
  for (size_t i = 0; i < r.names().size(); ++i)
    ts.push_back({r.names()[i], zt::DType::kF32, shapes[i], data[i].data()});
  static const float four[4] = {1, 2, 3, 4};
  for (const std::string& n : extra) ts.push_back({n, zt::DType::kF32, {4}, four});
  zt::write_safetensors(dir / "model.safetensors", ts);
}

TEST(FamilyLayout, LoadWeightsRefusesTensorsOfAnotherArchitecture) {
  zt::testing::TempDir d;
  write_with_extra(d / "ok", {"model.layers.0.self_attn.rotary_emb.inv_freq",
                              "model.layers.1.self_attn.rotary_emb.inv_freq"});
  zt::CpuOps ops;
  zt::HostMemory memory;
  zt::ModelOptions o;
  o.dtype = zt::DType::kF32;
  o.max_tokens = 8;
  zt::CausalLM ok(zt::load_model_config(d / "ok"), ops, memory, o);
  ok.load_weights(zt::SafetensorsReader(d / "ok"));  // inv_freq buffers: ignored
  // Weights equal the file's.
  const zt::SafetensorsReader ref(zt::test::model_dir("qwen2_untied"));
  const std::vector<zt::NamedTensor> w = ok.named_weights();
  ASSERT_FALSE(w.empty());
  const std::vector<float> first = ref.load_f32(w[0].name);
  EXPECT_EQ(std::vector<float>(static_cast<const float*>(w[0].data),
                               static_cast<const float*>(w[0].data) + first.size()),
            first);

  write_with_extra(d / "qk", {"model.layers.0.self_attn.q_norm.weight"});
  zt::CausalLM bad(zt::load_model_config(d / "qk"), ops, memory, o);
  zt::testing::expect_error(
      [&] { bad.load_weights(zt::SafetensorsReader(d / "qk")); },
      {(d / "qk" / "model.safetensors").string() +
           ": tensor 'model.layers.0.self_attn.q_norm.weight' is not a parameter of this qwen2 "
           "model",
       "does not match config.json's architecture"});
}

// A tied checkpoint that holds the shared tensor only as 'lm_head.weight' (safetensors'
// save_model keeps the first of a shared tensor's names in sorted order): transformers fills the
// embedding from it; zerotune refused it ("tensor 'model.embed_tokens.weight' not found").
TEST(FamilyLayout, TiedCheckpointWithOnlyTheHeadLoadsTheEmbeddingFromIt) {
  zt::testing::TempDir d;
  const fs::path src = zt::test::model_dir("qwen2_tied");
  fs::create_directories(d / "m");
  fs::copy_file(src / "config.json", d / "m" / "config.json");
  const zt::SafetensorsReader r(src);
  ASSERT_TRUE(r.contains("model.embed_tokens.weight"));
  ASSERT_FALSE(r.contains("lm_head.weight"));
  std::vector<std::vector<float>> data;
  std::vector<zt::NamedTensor> ts;
  data.reserve(r.names().size());
  for (const std::string& n : r.names()) {
    data.push_back(r.load_f32(n));
    ts.push_back({n == "model.embed_tokens.weight" ? "lm_head.weight" : n, zt::DType::kF32,
                  r.info(n).shape, data.back().data()});
  }
  zt::write_safetensors(d / "m" / "model.safetensors", ts);
  zt::CpuOps ops;
  zt::HostMemory memory;
  zt::ModelOptions o;
  o.dtype = zt::DType::kF32;
  o.max_tokens = 8;
  const zt::ModelConfig cfg = zt::load_model_config(d / "m");
  ASSERT_TRUE(cfg.tie_word_embeddings);
  zt::CausalLM m(cfg, ops, memory, o);
  m.load_weights(zt::SafetensorsReader(d / "m"));
  bool checked = false;
  for (const zt::NamedTensor& w : m.named_weights()) {
    const std::vector<float> want = r.load_f32(w.name);
    EXPECT_EQ(std::vector<float>(static_cast<const float*>(w.data),
                                 static_cast<const float*>(w.data) + want.size()),
              want)
        << w.name;
    checked |= w.name == "model.embed_tokens.weight";
  }
  EXPECT_TRUE(checked);
}

}  // namespace
