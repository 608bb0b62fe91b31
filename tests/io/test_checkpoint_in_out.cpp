// Checkpoints in and out, read as transformers reads them (issue 17, ../shared/cases):
//   index-and-single-file-precedence     model.safetensors wins over an index beside it (warning)
//   tied-config-drops-distinct-lm-head   a distinct lm_head.weight under a tied config is kept
//   generation-config-dropped            the input generation_config.json is exported, with the
//                                        trained EOS among its eos_token_id
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/zt_test_util.h"
#include "io/hf_export.h"
#include "io/json.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "io/tied_embeddings.h"

namespace {

using zt::SafetensorsReader;
using zt::testing::expect_error;
using zt::testing::TempDir;
using Tensors = std::vector<zt::NamedTensor>;
namespace fs = std::filesystem;
constexpr zt::DType kF32 = zt::DType::kF32;

const fs::path kCases = fs::path(ZT_SHARED_DATA).parent_path() / "cases";

// A tiny Qwen2 config.json (vocab 4, hidden 2, one layer) with `tie`.
zt::Json tiny_config(bool tie) {
  zt::Json j = zt::Json::parse(R"({"model_type": "qwen2", "vocab_size": 4, "hidden_size": 2,
    "intermediate_size": 4, "num_hidden_layers": 1, "num_attention_heads": 1,
    "num_key_value_heads": 1, "max_position_embeddings": 16, "bos_token_id": 1,
    "eos_token_id": 2})");
  j["tie_word_embeddings"] = tie;
  return j;
}

// Writes dir/config.json and dir/model.safetensors holding an embedding [4, 2] and, when given,
// an lm_head.weight [4, 2] (only the two tensors the tying decision looks at).
void write_model(const fs::path& dir, bool tie, const std::vector<float>* head) {
  fs::create_directories(dir);
  zt::write_file_atomic(dir / "config.json", tiny_config(tie).dump(2));
  static const std::vector<float> embed = {1, 2, 3, 4, 5, 6, 7, 8};
  Tensors ts = {{"model.embed_tokens.weight", kF32, {4, 2}, embed.data()}};
  if (head) ts.push_back({"lm_head.weight", kF32, {4, 2}, head->data()});
  zt::write_safetensors(dir / "model.safetensors", ts);
}

// ---------------------------------------------------------------- which weight file

TEST(WeightFile, SingleFileWinsOverIndexAsInTransformersAndSaysSo) {
  const fs::path model = kCases / "index-and-single-file-precedence" / "model";
  ::testing::internal::CaptureStderr();
  const fs::path got = zt::resolve_weights_file(model);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(got, model / "model.safetensors");
  EXPECT_NE(err.find("zerotune: warning: " + model.string() +
                     ": holds both model.safetensors and model.safetensors.index.json; reading "
                     "model.safetensors, as transformers' from_pretrained does"),
            std::string::npos)
      << err;
  // The reader of the directory reads weights B (model.safetensors), not the shards' A.
  const SafetensorsReader dir(model), single(model / "model.safetensors"),
      shards(model / "model.safetensors.index.json");
  EXPECT_EQ(dir.files().size(), 1u);
  const std::string t = "model.layers.0.mlp.down_proj.weight";
  EXPECT_EQ(dir.load_f32(t), single.load_f32(t));
  EXPECT_NE(dir.load_f32(t), shards.load_f32(t));
  ::testing::internal::CaptureStderr();
  zt::resolve_weights_file(model, /*log_choice=*/false);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(WeightFile, OneOfThemAloneIsReadSilently) {
  const fs::path src = kCases / "index-and-single-file-precedence" / "model";
  TempDir d;
  fs::create_directories(d / "single");
  fs::copy(src / "model.safetensors", d / "single" / "model.safetensors");
  fs::create_directories(d / "index");
  for (const auto& e : fs::directory_iterator(src))
    if (e.path().filename().string().starts_with("model-") ||
        e.path().filename() == "model.safetensors.index.json")
      fs::copy(e.path(), d / "index" / e.path().filename());
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(zt::resolve_weights_file(d / "single"), d / "single" / "model.safetensors");
  EXPECT_EQ(zt::resolve_weights_file(d / "index"), d / "index" / "model.safetensors.index.json");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(SafetensorsReader(d / "index").files().size(), 8u);
}

TEST(WeightFile, ConfigTransformersWeightsNamesTheFile) {
  TempDir d;
  write_model(d.path(), true, nullptr);
  fs::copy(d / "model.safetensors", d / "other.safetensors");
  zt::Json cfg = tiny_config(true);
  cfg["transformers_weights"] = "other.safetensors";
  zt::write_file_atomic(d / "config.json", cfg.dump());
  EXPECT_EQ(zt::resolve_weights_file(d.path()), d / "other.safetensors");
  cfg["transformers_weights"] = "weights.bin";
  zt::write_file_atomic(d / "config.json", cfg.dump());
  expect_error([&] { zt::resolve_weights_file(d.path()); },
               {(d / "config.json").string(),
                "transformers_weights 'weights.bin' is neither a safetensors file (*.safetensors) "
                "nor a safetensors index (*.safetensors.index.json)"});
  cfg["transformers_weights"] = "../x.safetensors";
  zt::write_file_atomic(d / "config.json", cfg.dump());
  expect_error([&] { zt::resolve_weights_file(d.path()); },
               {"transformers_weights '../x.safetensors' must name a file inside"});
  cfg["transformers_weights"] = "gone.safetensors";
  zt::write_file_atomic(d / "config.json", cfg.dump());
  expect_error([&] { zt::resolve_weights_file(d.path()); },
               {"transformers_weights names " + (d / "gone.safetensors").string() +
                ", which does not exist"});
}

TEST(WeightFile, NoSafetensorsIsAnErrorNamingWhatIsThere) {
  TempDir d;
  zt::write_file_atomic(d / "pytorch_model.bin", "x");
  expect_error([&] { zt::resolve_weights_file(d.path()); },
               {d.path().string() +
                ": directory holds neither model.safetensors nor model.safetensors.index.json (it "
                "has pytorch_model.bin, which zerotune cannot read)"});
}

// ---------------------------------------------------------------- tying

TEST(TiedEmbeddings, DistinctHeadUnderTiedConfigIsKeptUntiedWithAWarning) {
  const fs::path model = kCases / "tied-config-drops-distinct-lm-head" / "model";
  zt::ModelConfig cfg = zt::load_model_config(model);
  ASSERT_TRUE(cfg.tie_word_embeddings);
  const SafetensorsReader w(model);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(zt::reconcile_tied_embeddings(cfg, w), zt::TieDecision::kUntiedDistinctHead);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(cfg.tie_word_embeddings);
  EXPECT_EQ(cfg.num_parameters(), 5776 + 64 * 16);  // the head counts
  EXPECT_NE(err.find("zerotune: warning: " + (model / "model.safetensors").string() + ": " +
                     (model / "config.json").string() +
                     " has tie_word_embeddings true, but the checkpoint holds an "
                     "'lm_head.weight' different from 'model.embed_tokens.weight'; loading them "
                     "untied"),
            std::string::npos)
      << err;
  // The export of that model says what it is.
  EXPECT_EQ(zt::model_config_to_json(cfg)["tie_word_embeddings"], false);
}

TEST(TiedEmbeddings, BitwiseEqualHeadStaysTied) {
  TempDir d;
  const std::vector<float> same = {1, 2, 3, 4, 5, 6, 7, 8};
  write_model(d.path(), true, &same);
  zt::ModelConfig cfg = zt::load_model_config(d.path());
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(zt::reconcile_tied_embeddings(cfg, SafetensorsReader(d.path())),
            zt::TieDecision::kTiedEqualHead);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find(
                "tensor 'lm_head.weight' equals 'model.embed_tokens.weight' bitwise; tied"),
            std::string::npos);
  EXPECT_TRUE(cfg.tie_word_embeddings);
  // One element different (the last one): untied.
  const std::vector<float> other = {1, 2, 3, 4, 5, 6, 7, 8.5f};
  write_model(d.path(), true, &other);
  cfg = zt::load_model_config(d.path());
  EXPECT_EQ(zt::reconcile_tied_embeddings(cfg, SafetensorsReader(d.path()), false),
            zt::TieDecision::kUntiedDistinctHead);
  EXPECT_FALSE(cfg.tie_word_embeddings);
}

TEST(TiedEmbeddings, AgreeingConfigsChangeNothing) {
  TempDir d;
  const std::vector<float> head = {8, 7, 6, 5, 4, 3, 2, 1};
  write_model(d / "untied", false, &head);
  zt::ModelConfig cfg = zt::load_model_config(d / "untied");
  EXPECT_EQ(zt::reconcile_tied_embeddings(cfg, SafetensorsReader(d / "untied")),
            zt::TieDecision::kAsConfig);
  EXPECT_FALSE(cfg.tie_word_embeddings);
  write_model(d / "tied", true, nullptr);
  cfg = zt::load_model_config(d / "tied");
  EXPECT_EQ(zt::reconcile_tied_embeddings(cfg, SafetensorsReader(d / "tied")),
            zt::TieDecision::kAsConfig);
  EXPECT_TRUE(cfg.tie_word_embeddings);
}

TEST(TiedEmbeddings, UntiedConfigWithoutHeadIsRefusedNamingBoth) {
  TempDir d;
  write_model(d.path(), false, nullptr);
  zt::ModelConfig cfg = zt::load_model_config(d.path());
  expect_error(
      [&] { zt::reconcile_tied_embeddings(cfg, SafetensorsReader(d.path())); },
      {(d / "model.safetensors").string() + ": tensor 'lm_head.weight' not found, but " +
       (d / "config.json").string() + " has tie_word_embeddings false (an LM head of its own)"});
}

// ---------------------------------------------------------------- generation config

// The Qwen2.5-Instruct tokenizer's ids: eos <|im_end|>, no bos, pad <|endoftext|>.
zt::TokenizerSpecialIds qwen_instruct_ids() {
  zt::TokenizerSpecialIds t;
  t.eos = 151645;
  t.pad = 151643;
  return t;
}

zt::ModelConfig gen_case_config() {
  return zt::load_model_config(kCases / "generation-config-dropped" / "model");
}

TEST(GenerationConfigExport, InputFileIsExportedAsItIsAndConfigAlignedAsTrlLeavesIt) {
  const fs::path in = kCases / "generation-config-dropped" / "model" / "generation_config.json";
  zt::ModelConfig cfg = gen_case_config();
  const zt::GenerationConfigExport g = zt::export_generation_config(cfg, in, qwen_instruct_ids());
  EXPECT_TRUE(g.from_input);
  EXPECT_EQ(g.text, zt::read_file(in));
  // transformers 5.24 save_model() of that directory (the case README): these values.
  const zt::Json want = zt::Json::parse(R"({"bos_token_id": 151643, "do_sample": true,
    "eos_token_id": [151645, 151643], "pad_token_id": 151643, "repetition_penalty": 1.1,
    "temperature": 0.7, "top_k": 20, "top_p": 0.8, "transformers_version": "5.1.0"})");
  EXPECT_EQ(g.json, want);
  // TRL 1.16 + transformers 5.24 SFT (one step, save_model) of the case: config.json bos 151643,
  // eos 151645, pad 151643 (checked 2026-12-01).
  EXPECT_EQ(cfg.bos_token_id, std::vector<int64_t>{151643});
  EXPECT_EQ(cfg.eos_token_id, std::vector<int64_t>{151645});
  EXPECT_EQ(cfg.pad_token_id, std::vector<int64_t>{151643});
  EXPECT_EQ(g.updated.dump(), R"({"pad_token_id":151643,"eos_token_id":151645})");
}

TEST(GenerationConfigExport, TrainedEosIsPutFirstWhenAbsent) {
  TempDir d;
  zt::write_file_atomic(d / "generation_config.json",
                        R"({"top_p": 0.8, "eos_token_id": 151643, "do_sample": true})");
  zt::ModelConfig cfg = gen_case_config();
  const zt::GenerationConfigExport g =
      zt::export_generation_config(cfg, d / "generation_config.json", qwen_instruct_ids());
  EXPECT_EQ(g.text,
            "{\n  \"do_sample\": true,\n  \"eos_token_id\": [\n    151645,\n    151643\n  ],\n"
            "  \"pad_token_id\": 151643,\n  \"top_p\": 0.8\n}\n");
  // No input file: derived from config.json (eos 151643) before the alignment.
  cfg = gen_case_config();
  const zt::GenerationConfigExport derived =
      zt::export_generation_config(cfg, d / "absent.json", qwen_instruct_ids());
  EXPECT_FALSE(derived.from_input);
  EXPECT_EQ(derived.json.dump(),
            R"({"_from_model_config":true,"bos_token_id":151643,"eos_token_id":[151645,151643],)"
            R"("pad_token_id":151643})");
  // No tokenizer ids: exactly what transformers derives, config untouched.
  cfg = gen_case_config();
  EXPECT_EQ(zt::export_generation_config(cfg, "", std::nullopt).json,
            zt::generation_config_json(gen_case_config()));
  EXPECT_EQ(cfg.eos_token_id, std::vector<int64_t>{151643});
}

TEST(GenerationConfigExport, TrlEosArgumentAndClonedTemplateSetTheEos) {
  zt::ModelConfig cfg = gen_case_config();
  zt::Json gen = zt::Json::parse(R"({"eos_token_id": [7, 151643]})");
  zt::TokenizerSpecialIds t;
  t.eos = 151645;
  t.eos_origin = zt::EosOrigin::kEosTokenArg;  // SFTConfig.eos_token: prepended
  zt::align_special_token_ids(cfg, gen, t, "g.json");
  EXPECT_EQ(gen.dump(), R"({"eos_token_id":[151645,7,151643]})");
  EXPECT_EQ(cfg.eos_token_id, std::vector<int64_t>{151645});
  gen = zt::Json::parse(R"({"eos_token_id": [7, 151643]})");
  t.eos_origin = zt::EosOrigin::kClonedTemplate;  // clone_chat_template: replaced
  zt::align_special_token_ids(cfg, gen, t, "g.json");
  EXPECT_EQ(gen.dump(), R"({"eos_token_id":151645})");
  // A config that lists several EOS ids keeps them behind the new one; one it has changes nothing.
  cfg.eos_token_id = {128001, 128009};
  gen = zt::Json::parse(R"({"eos_token_id": [128001, 128009]})");
  t.eos = 128009;
  t.eos_origin = zt::EosOrigin::kTokenizer;
  EXPECT_EQ(zt::align_special_token_ids(cfg, gen, t, "g.json"), zt::Json::object());
  t.eos = 5;
  zt::align_special_token_ids(cfg, gen, t, "g.json");
  EXPECT_EQ(cfg.eos_token_id, (std::vector<int64_t>{5, 128001, 128009}));
  EXPECT_EQ(gen.dump(), R"({"eos_token_id":[5,128001,128009]})");
}

TEST(GenerationConfigExport, BadInputIsNamed) {
  zt::ModelConfig cfg = gen_case_config();
  TempDir d;
  zt::write_file_atomic(d / "g.json", R"({"eos_token_id": "</s>"})");
  expect_error([&] { zt::export_generation_config(cfg, d / "g.json", qwen_instruct_ids()); },
               {(d / "g.json").string(),
                R"(eos_token_id must be a token id or a list of token ids, got "</s>")"});
  zt::write_file_atomic(d / "g.json", R"({"pad_token_id": [1, null]})");
  expect_error([&] { zt::export_generation_config(cfg, d / "g.json", qwen_instruct_ids()); },
               {"pad_token_id must be a token id or a list of token ids, got [1,null]"});
  zt::write_file_atomic(d / "g.json", "[1]");
  expect_error([&] { zt::export_generation_config(cfg, d / "g.json", std::nullopt); },
               {"expected a JSON object (a generation config), got array"});
  zt::write_file_atomic(d / "g.json", "{");
  expect_error([&] { zt::export_generation_config(cfg, d / "g.json", std::nullopt); },
               {(d / "g.json").string(), "invalid JSON"});
}

TEST(GenerationConfigExport, ExportWritesBothFiles) {
  const zt::ModelConfig cfg = gen_case_config();
  TempDir d;
  zt::write_file_atomic(d / "generation_config.json", R"({"eos_token_id": [151643]})");
  std::vector<float> embed(static_cast<size_t>(cfg.vocab_size * cfg.hidden_size), 0.0f);
  const Tensors ts = {
      {"model.embed_tokens.weight", kF32, {cfg.vocab_size, cfg.hidden_size}, embed.data()}};
  zt::HfExportOptions o;
  o.dtype = kF32;
  o.generation_config = d / "generation_config.json";
  o.tokenizer_ids = zt::TokenizerSpecialIds{};
  o.tokenizer_ids->eos = 151645;
  zt::export_hf_model(d / "out", cfg, ts, o);
  EXPECT_EQ(zt::read_file(d / "out" / "generation_config.json"),
            "{\n  \"eos_token_id\": [\n    151645,\n    151643\n  ]\n}\n");
  const zt::Json c = zt::Json::parse(zt::read_file(d / "out" / "config.json"));
  EXPECT_EQ(c["eos_token_id"], 151645);
  EXPECT_EQ(c["bos_token_id"], 151643);
  // Absent or null (a const operator[] of an absent key is a precondition failure, see io/json.h).
  EXPECT_TRUE(!c.contains("pad_token_id") || c.at("pad_token_id").is_null());
}

}  // namespace
