// The "checkpoints in and out" cases of ../shared/cases (issue 17; README there: expected vs
// observed), run through the zerotune binary as their run.sh does, on copies of the case inputs:
//   tied-config-drops-distinct-lm-head  loss_sum 54.17591 (transformers 5.24: kept untied); train
//                                       exports the untied model
//   index-and-single-file-precedence    loss_sum 54.29305 (model.safetensors), a warning naming
//   both generation-config-dropped           final/ and checkpoint-N/ carry the input generation
//   config
//                                       with the trained EOS among eos_token_id
//   eos-token-not-in-vocab              the EOS is one added token, 151665 (targets [2518, 2518,
//                                       151665]); a vocab_size without room for it is an error
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "data/token_cache.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "train_cli_util.h"

namespace fs = std::filesystem;

namespace {

using zt_test::exited;
using zt_test::run;
using zt_test::RunResult;

const fs::path kTok = fs::path(ZT_SHARED_DATA) / "tokenizers" / "qwen2.5-instruct";

// The one JSON line `zerotune loss` prints on stdout.
zt::Json loss_json(const std::string& output) {
  size_t at = output.rfind("\n{");
  at = at == std::string::npos ? output.find('{') : at + 1;
  return zt::Json::parse(output.substr(at, output.find('\n', at) - at));
}

class CheckpointCase : public ::testing::Test {
 protected:
  // A writable copy of case `name`; commands run there (as run.sh's `cd "$(dirname "$0")"`).
  fs::path copy_case(const std::string& name) {
    return dir_ = zt_test::copy_case(name, "zt_ckpt_case_");
  }
  RunResult zerotune(const std::string& args) {
    return run("cd " + dir_.string() + " && ZEROTUNE_CACHE_DIR=" + (dir_ / "zt_cache").string() +
               " " + ZT_BINARY + " " + args);
  }
  static void set_json(const fs::path& file, const std::string& key, const zt::Json& v) {
    zt::Json j = zt::Json::parse(zt::read_file(file));
    j[key] = v;
    zt::write_file_atomic(file, j.dump(1));
  }
  // `zerotune loss --model model rows.jsonl`: exit 0, `text` in the output; its JSON result.
  zt::Json loss(const std::string& text) {
    const RunResult r = zerotune("loss --model model rows.jsonl");
    EXPECT_TRUE(exited(r, 0, text));
    return r.status == 0 ? loss_json(r.output) : zt::Json();
  }
  static zt::Json read_json(const fs::path& file) { return zt::Json::parse(zt::read_file(file)); }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(CheckpointCase, TiedConfigWithDistinctHeadLossIsTransformers) {
  copy_case("tied-config-drops-distinct-lm-head");
  const zt::Json j = loss(
      "zerotune: warning: model/model.safetensors: model/config.json has tie_word_embeddings "
      "true, but the checkpoint holds an 'lm_head.weight' different from "
      "'model.embed_tokens.weight'; loading them untied");
  EXPECT_EQ(j["targets"], 13);
  EXPECT_NEAR(j["loss_sum"].get<double>(), 54.17591, 1e-5);  // transformers 5.24 (was 54.666002)
  // The same files read with tie_word_embeddings false: the same model, the same number.
  set_json(dir_ / "model" / "config.json", "tie_word_embeddings", false);
  const RunResult u = zerotune("loss --model model rows.jsonl");
  ASSERT_TRUE(exited(u, 0));
  EXPECT_EQ(u.output.find("warning"), std::string::npos) << u.output;
  EXPECT_EQ(loss_json(u.output)["loss_sum"], j["loss_sum"]);
}

// A base model's save (AutoModel: no "model." prefix, no head) of a tied model: transformers 4.57
// adds the prefix when no key has it, so the same tensors give the same loss with the prefix or
// without it (it was refused: "tensor 'model.embed_tokens.weight' not found").
TEST_F(CheckpointCase, BaseModelCheckpointWithoutThePrefixLoadsAsTransformersLoadsIt) {
  copy_case("tied-config-drops-distinct-lm-head");
  const zt::SafetensorsReader r(dir_ / "model");
  std::vector<std::vector<float>> values;
  values.reserve(r.names().size());
  std::vector<zt::NamedTensor> prefixed, base;
  for (const std::string& name : r.names()) {
    if (name == "lm_head.weight") continue;
    ASSERT_TRUE(name.starts_with("model.")) << name;
    values.push_back(r.load_f32(name));
    const std::vector<int64_t> shape = r.info(name).shape;
    prefixed.push_back({name, zt::DType::kF32, shape, values.back().data()});
    base.push_back({name.substr(6), zt::DType::kF32, shape, values.back().data()});
  }
  for (const auto& [sub, tensors] : {std::pair{"prefixed", &prefixed}, std::pair{"base", &base}}) {
    fs::create_directories(dir_ / sub);
    fs::copy_file(dir_ / "model" / "config.json", dir_ / sub / "config.json");
    zt::write_safetensors(dir_ / sub / "model.safetensors", *tensors);
  }
  const RunResult p = zerotune("loss --model prefixed rows.jsonl");
  ASSERT_TRUE(exited(p, 0));
  const RunResult b = zerotune("loss --model base rows.jsonl");
  ASSERT_TRUE(exited(b, 0,
                     "base/model.safetensors: the checkpoint's tensors have no 'model.' prefix (a "
                     "base model's save); read as the qwen2 body, as transformers does"));
  EXPECT_EQ(loss_json(b.output)["targets"], 13);
  EXPECT_EQ(loss_json(b.output)["loss_sum"], loss_json(p.output)["loss_sum"]);
  // A head key beside unprefixed body keys: transformers raises ("corrupted"), so does zerotune.
  std::vector<float> head = r.load_f32("lm_head.weight");
  base.push_back({"lm_head.weight", zt::DType::kF32, r.info("lm_head.weight").shape, head.data()});
  zt::write_safetensors(dir_ / "base" / "model.safetensors", base);
  const RunResult h = zerotune("loss --model base rows.jsonl");
  EXPECT_TRUE(exited(h, 1,
                     "base/model.safetensors: the checkpoint's tensors have no 'model.' prefix (a "
                     "base model's save) but it holds 'lm_head.weight'; transformers refuses"));
}

TEST_F(CheckpointCase, SingleFileBesideIndexIsReadWithAWarning) {
  copy_case("index-and-single-file-precedence");
  const zt::Json j = loss(
      "zerotune: warning: model: holds both model.safetensors and model.safetensors.index.json; "
      "reading model.safetensors, as transformers' from_pretrained does, and ignoring the index "
      "and its shards");
  EXPECT_NEAR(j["loss_sum"].get<double>(), 54.29305, 1e-5);  // weights B (the shards: 54.586278)
  // Without model.safetensors, the shards are read, silently.
  fs::remove(dir_ / "model" / "model.safetensors");
  const RunResult s = zerotune("loss --model model rows.jsonl");
  ASSERT_TRUE(exited(s, 0));
  EXPECT_EQ(s.output.find("warning"), std::string::npos) << s.output;
  EXPECT_NEAR(loss_json(s.output)["loss_sum"].get<double>(), 54.586278, 1e-5);
}

TEST_F(CheckpointCase, GenerationConfigOfTheInputIsExportedEverywhere) {
  copy_case("generation-config-dropped");
  const std::string input = zt::read_file(dir_ / "model" / "generation_config.json");
  const RunResult r =
      zerotune("train --config sft.yaml model.tokenizer_name_or_path=" + kTok.string() +
               " trainer.max_steps=2 trainer.save_strategy=steps "
               "trainer.save_steps=1");
  ASSERT_TRUE(exited(r, 0,
                     "export: generation_config.json from model/generation_config.json "
                     "(eos_token_id [151645,151643]); config.json and generation_config.json get "
                     "the tokenizer's {\"pad_token_id\":151643,\"eos_token_id\":151645}, as TRL's "
                     "SFTTrainer and transformers' Trainer set them"));
  for (const char* sub : {"checkpoint-1", "checkpoint-2", "final"}) {
    const fs::path out = dir_ / "runs" / "gen" / sub;
    EXPECT_EQ(zt::read_file(out / "generation_config.json"), input) << sub;
    // As TRL 1.16 + transformers 5.24 export this job: eos 151645, pad 151643, bos 151643.
    const zt::Json c = read_json(out / "config.json");
    EXPECT_EQ(c["eos_token_id"], 151645) << sub;
    EXPECT_EQ(c["pad_token_id"], 151643) << sub;
    EXPECT_EQ(c["bos_token_id"], 151643) << sub;
    // No DeepSpeed: TRL's parameters stay float32 under bf16 autocast and are saved so.
    EXPECT_EQ(c["torch_dtype"], "float32") << sub;
    EXPECT_EQ(zt::SafetensorsReader(out).info("model.embed_tokens.weight").dtype_str, "F32") << sub;
  }
  // An input that lists only the base model's EOS gets the trained one (<|im_end|>) first.
  set_json(dir_ / "model" / "generation_config.json", "eos_token_id", 151643);
  fs::remove_all(dir_ / "runs" / "gen");
  const RunResult b =
      zerotune("train --config sft.yaml model.tokenizer_name_or_path=" + kTok.string());
  ASSERT_TRUE(exited(b, 0,
                     "export: generation_config.json from model/generation_config.json "
                     "(eos_token_id [151645,151643]); config.json and generation_config.json get "
                     "the tokenizer's {\"pad_token_id\":151643,\"eos_token_id\":151645}"));
  const zt::Json g = read_json(dir_ / "runs" / "gen" / "final" / "generation_config.json");
  EXPECT_EQ(g["eos_token_id"], zt::Json::parse("[151645, 151643]"));
  EXPECT_EQ(g["top_k"], 20);
  EXPECT_EQ(g["temperature"], 0.7);
}

TEST_F(CheckpointCase, TrainingATiedConfigWithDistinctHeadTrainsAndExportsTheUntiedModel) {
  copy_case("generation-config-dropped");
  const std::string tok = " model.tokenizer_name_or_path=" + kTok.string();
  // An untied model with weights: one step from scratch, exported.
  set_json(dir_ / "model" / "config.json", "tie_word_embeddings", false);
  RunResult r = zerotune("train --config sft.yaml exp_name=base" + tok);
  ASSERT_TRUE(exited(r, 0));
  const fs::path base = dir_ / "runs" / "base" / "final";
  fs::copy(base, dir_ / "untied", fs::copy_options::recursive);
  fs::copy(base, dir_ / "flipped", fs::copy_options::recursive);
  set_json(dir_ / "flipped" / "config.json", "tie_word_embeddings", true);
  r = zerotune("train --config sft.yaml exp_name=flipped model.name_or_path=flipped" + tok);
  ASSERT_TRUE(exited(r, 0,
                     "flipped/config.json has tie_word_embeddings true, but the checkpoint "
                     "holds an 'lm_head.weight' different from 'model.embed_tokens.weight'"));
  r = zerotune("train --config sft.yaml exp_name=untied model.name_or_path=untied" + tok);
  ASSERT_TRUE(exited(r, 0));
  // The same model trained: the same step, bitwise; exported untied.
  EXPECT_EQ(zt_test::train_events(dir_ / "runs" / "flipped"),
            zt_test::train_events(dir_ / "runs" / "untied"));
  const fs::path out = dir_ / "runs" / "flipped" / "final";
  EXPECT_EQ(read_json(out / "config.json")["tie_word_embeddings"], false);
  const zt::SafetensorsReader w(out);
  ASSERT_TRUE(w.contains("lm_head.weight"));
  EXPECT_NE(w.load_f32("lm_head.weight"), w.load_f32("model.embed_tokens.weight"));
  EXPECT_EQ(w.load_f32("lm_head.weight"),
            zt::SafetensorsReader(dir_ / "runs" / "untied" / "final").load_f32("lm_head.weight"));
}

TEST_F(CheckpointCase, EosNotInVocabularyIsOneAddedTokenAsInTransformers) {
  copy_case("eos-token-not-in-vocab");
  fs::create_directories(dir_ / "tok");
  fs::copy(kTok / "tokenizer.json", dir_ / "tok" / "tokenizer.json");
  fs::copy(kTok / "tokenizer_config.json", dir_ / "tok" / "tokenizer_config.json");
  set_json(dir_ / "tok" / "tokenizer_config.json", "eos_token", "<|nope|>");
  const RunResult r = zerotune(
      "prepare --config sft.yaml --json > prep.json 2> prep.log; s=$?; cat prep.log; exit $s");
  ASSERT_TRUE(exited(r, 0,
                     "zerotune: warning: tok/tokenizer_config.json: eos_token '<|nope|>' is "
                     "not a token of tokenizer.json; added as a special token with id "
                     "151665, as transformers does"));
  const fs::path cache = read_json(dir_ / "prep.json")["cache_file"].get<std::string>();
  const zt::data::PreparedDataset ds =
      zt::data::PreparedDataset::open(cache.is_absolute() ? cache : dir_ / cache);
  ASSERT_EQ(ds.num_examples(), 2);
  std::vector<int32_t> targets;
  for (size_t t = 0; t < ds.tokens(0).size(); ++t)
    if (ds.targets(0)[t]) targets.push_back(ds.tokens(0)[t]);
  EXPECT_EQ(targets, (std::vector<int32_t>{2518, 2518, 151665}));  // was 2518, 2518, 27, 91, …
  EXPECT_EQ(ds.tokens(1).back(), 151665);

  // Qwen2.5's vocab_size 151936 has room for it: training runs.
  const RunResult t = zerotune("train --config sft.yaml trainer.max_steps=1");
  EXPECT_TRUE(exited(t, 0));
  // A vocab_size without room is an error naming config.json and the token, not a crash.
  set_json(dir_ / "model" / "config.json", "vocab_size", 151665);
  const RunResult s = zerotune("train --config sft.yaml trainer.max_steps=1 exp_name=small");
  EXPECT_TRUE(exited(s, 1,
                     "token id 151665 ('<|nope|>', the eos_token of "
                     "tok/tokenizer_config.json) is outside the model's vocabulary [0, "
                     "151665) (vocab_size of model/config.json)"));
}

// tokenizer_config.json's add_eos_token under tokenizer_class LlamaTokenizerFast: transformers'
// class rebuilds the post-processor, so every plain row TRL tokenises gets a second EOS after the
// one TRL's add_eos appends (transformers 4.57.1 AutoTokenizer: "hello world</s>" →
// [1, 1168, 1352, 29477, 2294, 2, 2]); zerotune gave one.
TEST_F(CheckpointCase, AddEosTokenOfALlamaClassTokenizerIsAppliedAsInTransformers) {
  copy_case("eos-token-not-in-vocab");
  const fs::path mistral = fs::path(ZT_TEST_DATA) / "families" / "mistral_v3";
  fs::create_directories(dir_ / "tok");
  fs::copy(mistral / "tokenizer.json", dir_ / "tok" / "tokenizer.json");
  fs::copy(mistral / "tokenizer_config.json", dir_ / "tok" / "tokenizer_config.json");
  set_json(dir_ / "tok" / "tokenizer_config.json", "add_eos_token", true);
  std::ofstream(dir_ / "data.jsonl") << "{\"text\": \"hello world\"}\n{\"text\": \"hi\"}\n";
  const RunResult r = zerotune(
      "prepare --config sft.yaml --json > prep.json 2> prep.log; s=$?; cat prep.log; exit $s");
  ASSERT_TRUE(exited(r, 0));
  const fs::path cache = read_json(dir_ / "prep.json")["cache_file"].get<std::string>();
  const zt::data::PreparedDataset ds =
      zt::data::PreparedDataset::open(cache.is_absolute() ? cache : dir_ / cache);
  ASSERT_EQ(ds.num_examples(), 2);
  const auto tokens = ds.tokens(0);
  EXPECT_EQ(std::vector<int32_t>(tokens.begin(), tokens.end()),
            (std::vector<int32_t>{1, 1168, 1352, 29477, 2294, 2, 2}));
}

}  // namespace
