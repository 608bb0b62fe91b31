// Model families end to end through the real binary (issue: model families): a Qwen3 and a
// Gemma 3 model directory (tiny random configurations of the real families — Qwen3's per-head
// q/k norm and independent head_dim; Gemma 3's (1+w) norms, pre+post norms, GeGLU, embedding scale,
// query_pre_attn_scalar, sliding-window layers shorter than the rows beside a global layer, two
// RoPE bases — with the families' tokenizers) trained
//   - by the users' own sft.yaml and accelerate file, unchanged, with model_name pointing at them
//     (resolved through a local HF cache, as for Qwen2.5 in test_users_command.cpp);
//   - under ZeRO stages 0–3 × offload on 2 CPU ranks: bitwise equal losses and final weights.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/json.h"
#include "io/model_config.h"
#include "train_cli_util.h"

namespace fs = std::filesystem;

namespace {

using zt_test::run;
using zt_test::RunResult;
using zt_test::slurp;
using zt_test::train_events;

constexpr const char* kQwen3Config = R"({
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936,
  "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 4096,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "hidden_act": "silu", "initializer_range": 0.02,
  "tie_word_embeddings": true, "attention_bias": false, "use_sliding_window": false,
  "bos_token_id": 151643, "eos_token_id": 151645, "torch_dtype": "bfloat16"})";

// Layers: sliding (window 8, shorter than most rows), sliding, global.
constexpr const char* kGemma3Config = R"({
  "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "vocab_size": 32770,
  "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
  "num_key_value_heads": 1, "head_dim": 16, "max_position_embeddings": 4096,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
  "sliding_window": 8, "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
  "query_pre_attn_scalar": 24, "hidden_activation": "gelu_pytorch_tanh",
  "initializer_range": 0.02, "tie_word_embeddings": true, "final_logit_softcapping": null,
  "attn_logit_softcapping": null, "rope_scaling": null, "attention_bias": false,
  "torch_dtype": "bfloat16"})";

class FamilyRuns : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string error;
    root_ = zt_test::fresh_root_with_demo("zt_family_runs_", 32, 8, 5, &error);
    ASSERT_FALSE(root_.empty()) << error;
    // Hub-cache snapshots, as `huggingface_hub` lays them out.
    const fs::path qwen3 = zt_test::hf_snapshot(root_ / "hf", "Qwen/Qwen3-1.7B", "c0ffee1");
    std::ofstream(qwen3 / "config.json") << kQwen3Config;
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      fs::copy_file(fs::path(ZT_SHARED_DATA) / "tokenizers" / "qwen3" / f, qwen3 / f);
    // Gemma 3: no real Gemma tokenizer can be had here; the Mistral vocabulary in Gemma's
    // tokenizer layout (tests/data/families/gemma_style) with Gemma 3's chat template.
    const fs::path gemma = zt_test::hf_snapshot(root_ / "hf", "google/gemma-3-1b-it", "c0ffee1");
    std::ofstream(gemma / "config.json") << kGemma3Config;
    const fs::path fam = fs::path(ZT_TEST_DATA) / "families";
    fs::copy_file(fam / "gemma_style" / "tokenizer.json", gemma / "tokenizer.json");
    zt::Json tc = zt::Json::parse(slurp(fam / "gemma_style" / "tokenizer_config.json"));
    tc["chat_template"] = slurp(fam / "chat" / "gemma3" / "chat_template.jinja");
    std::ofstream(gemma / "tokenizer_config.json") << tc.dump(2);
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static fs::path workdir(const std::string& name) {
    return zt_test::users_workdir(root_ / name, root_ / "demo");
  }

  // The users' command line (their accelerate file and sft.yaml) with `model` and `ranks`.
  static RunResult users_command(const fs::path& w, const std::string& model, int ranks,
                                 const std::string& extra) {
    const std::string n = std::to_string(ranks);
    return run("cd " + w.string() + " && HF_HOME=" + (root_ / "hf").string() +
               " ZEROTUNE_CACHE_DIR=" + (root_ / "cache").string() + " " + ZT_BINARY +
               " launch --num_processes " + n +
               " --config_file sft_zero1_4gpu.yaml train --config sft.yaml model_name=" + model +
               " trainer.per_device_train_batch_size=2 trainer.max_length=96 compute.n_gpus=" + n +
               " compute.global_batch_size=8 compute.threads=1 compute.backend=cpu " + extra);
  }

  static fs::path root_;
};
fs::path FamilyRuns::root_;

// The users' sft.yaml and accelerate file, unchanged, train each family and export a model
// directory whose config.json keeps the family.
TEST_F(FamilyRuns, UsersSftYamlTrainsQwen3AndGemma3) {
  for (const auto& [model, type] :
       {std::pair{"Qwen/Qwen3-1.7B", "qwen3"}, std::pair{"google/gemma-3-1b-it", "gemma3_text"}}) {
    const fs::path w = workdir(std::string("users_") + type);
    const RunResult r = users_command(w, model, 1, "trainer.num_train_epochs=1");
    ASSERT_EQ(r.status, 0) << model << "\n" << r.output;
    const auto ev = train_events(w / "logs" / "sft");
    ASSERT_FALSE(ev.empty()) << r.output;
    bool saw_loss = false;
    for (const auto& e : ev)
      if (e.contains("loss")) {
        saw_loss = true;
        const double loss = e["loss"].get<double>();
        EXPECT_TRUE(std::isfinite(loss)) << model;
        EXPECT_GT(loss, 3.0) << model;  // a random model of a 32k–152k vocabulary
      }
    EXPECT_TRUE(saw_loss) << r.output;
    const fs::path out = w / "logs" / "sft" / "ckpts";
    ASSERT_TRUE(fs::exists(out / "model.safetensors")) << r.output;
    const zt::ModelConfig back = zt::load_model_config(out / "config.json");
    EXPECT_EQ(back.model_type, type);
    if (std::string(type) == "gemma3_text") {
      EXPECT_EQ(back.layer_window, (std::vector<int64_t>{8, 8, 0}));
      EXPECT_EQ(back.norm_placement, zt::NormPlacement::kPrePost);
    } else {
      EXPECT_EQ(back.qk_norm, zt::QkNorm::kPerHead);
      EXPECT_EQ(back.head_dim, 16);
    }
  }
}

// ZeRO stages 0–3 × offload on 2 CPU ranks: every logged number and the final weights bitwise
// equal, for both families.
TEST_F(FamilyRuns, StagesAndOffloadBitwiseOnTwoRanks) {
  for (const char* model : {"Qwen/Qwen3-1.7B", "google/gemma-3-1b-it"}) {
    std::vector<std::vector<zt::Json>> events;
    std::vector<std::string> weights;
    for (const auto& [stage, offload] :
         {std::pair{"0", "false"}, std::pair{"0", "true"}, std::pair{"1", "false"},
          std::pair{"2", "false"}, std::pair{"3", "false"}, std::pair{"3", "true"}}) {
      const std::string mode =
          std::string("compute.zero_stage=") + stage + " compute.offload_optimizer=" + offload;
      const fs::path w = workdir("stages_" + std::to_string(events.size()) + "_" +
                                 std::string(model).substr(0, 4));
      const RunResult r =
          users_command(w, model, 2, "trainer.max_steps=3 trainer.eval_steps=2 " + mode);
      ASSERT_EQ(r.status, 0) << model << " " << mode << "\n" << r.output;
      events.push_back(train_events(w / "logs" / "sft"));
      weights.push_back(slurp(w / "logs" / "sft" / "ckpts" / "model.safetensors"));
      ASSERT_GT(weights.back().size(), 1000u);
    }
    ASSERT_GE(events[0].size(), 2u);
    for (size_t i = 1; i < events.size(); ++i) {
      EXPECT_EQ(events[i], events[0]) << model << " mode " << i;
      EXPECT_TRUE(weights[i] == weights[0]) << model << " mode " << i;
    }
  }
}

}  // namespace
