// The schema is complete by construction: every field of TRL's SFTConfig / transformers'
// TrainingArguments (users' and current versions, tests/data/cli/trainer_fields.json from
// tools/make_config_field_goldens.py) and every accelerate config key (accelerate_fields.json) is
// classified; every numeric and enum value is checked at start-up with file, key, value and range;
// renamed fields work under both names; the users' own sft.yaml loads unchanged.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "cli/config_schema.h"
#include "cli/data_setup.h"
#include "cli/launch_keys.h"
#include "cli/run_config.h"
#include "core/error.h"
#include "core/zt_test_util.h"

namespace fs = std::filesystem;
using zt::Json;
using zt::cli::KeyUse;
using zt::cli::RunConfig;

namespace {

using zt::testing::error_of;

Json read_json(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return Json::parse(ss.str());
}

bool is_alias(std::string_view path) {
  for (const auto& a : zt::cli::key_aliases())
    if (a.old_path == path) return true;
  return false;
}

TEST(ConfigSchema, EveryTrlAndTransformersFieldIsClassified) {
  const Json g = read_json(fs::path(ZT_TEST_DATA) / "cli" / "trainer_fields.json");
  ASSERT_EQ(g["stacks"]["users"]["trl"], "0.25.1");
  ASSERT_EQ(g["stacks"]["current"]["trl"], "1.16.0");
  ASSERT_GT(g["fields"].size(), 150u);
  std::vector<std::string> missing;
  for (const auto& f : g["fields"]) {
    const std::string path = "trainer." + f["field"].get<std::string>();
    if (zt::cli::find_key(path) == nullptr && !is_alias(path)) missing.push_back(path);
  }
  EXPECT_TRUE(missing.empty()) << "unclassified fields (add them to src/cli/trainer_keys.cpp): "
                               << Json(missing).dump();
}

TEST(ConfigSchema, NotesAndRefusalsSayWhy) {
  for (const auto& s : zt::cli::config_schema()) {
    if (s.use != KeyUse::kActs) {
      EXPECT_GE(s.note.size(), 7u) << s.path;
    }
    if (s.use == KeyUse::kUnsupported) {
      EXPECT_EQ(s.rule.kind, zt::cli::ValueRule::Kind::kAny) << s.path;
    }
  }
  std::set<std::string_view> seen;
  for (const auto& s : zt::cli::config_schema()) EXPECT_TRUE(seen.insert(s.path).second) << "twice: " << s.path;
}

TEST(ConfigSchema, ActedDefaultsAreTrlsOwn) {
  // zerotune's default of each acted-on trainer field is TRL 0.25's SFTConfig default, except:
  const std::set<std::string> differ = {
      "trainer.bf16",        // TRL None = "true unless fp16"; fp16 is refused, so true
      "trainer.optim",       // the golden holds the name `default_optim` (= "adamw_torch")
      "trainer.save_total_limit", "trainer.report_to",  // None in both
  };
  const Json g = read_json(fs::path(ZT_TEST_DATA) / "cli" / "trainer_fields.json");
  for (const auto& f : g["fields"]) {
    const std::string path = "trainer." + f["field"].get<std::string>();
    const zt::cli::KeySpec* s = zt::cli::find_key(path);
    if (s == nullptr || s->use != KeyUse::kActs || differ.count(path) || f["in"].dump().find("users") == std::string::npos) continue;
    EXPECT_EQ(s->default_value, f["defaults"]["users"]) << path;
  }
  EXPECT_EQ(zt::cli::find_key("trainer.optim")->default_value, "adamw_torch");
  EXPECT_EQ(zt::cli::find_key("trainer.bf16")->default_value, true);
}

TEST(ConfigSchema, EveryAccelerateKeyIsKnown) {
  const Json g = read_json(fs::path(ZT_TEST_DATA) / "cli" / "accelerate_fields.json");
  for (const auto& k : g["top"])
    EXPECT_NE(zt::cli::find_launch_key(zt::cli::accelerate_top_keys(), k.get<std::string>()), nullptr) << k;
  for (const auto& k : g["deepspeed_config"])
    EXPECT_NE(zt::cli::find_launch_key(zt::cli::accelerate_deepspeed_keys(), k.get<std::string>()), nullptr) << k;
  for (auto table : {zt::cli::accelerate_top_keys(), zt::cli::accelerate_deepspeed_keys(),
                     zt::cli::accelerate_fsdp_keys(), zt::cli::deepspeed_json_keys(), zt::cli::deepspeed_zero_keys()})
    for (const auto& k : table)
      if (!k.neutral.empty()) {
        EXPECT_GT(k.note.size(), 5u) << k.name;
      }
}

// The error for `trainer.<key>: <value>` given in sft.yaml.
std::string trainer_error(const std::string& key, const Json& value) {
  return error_of([&] { RunConfig::from_json({{"trainer", {{key, value}}}}, "sft.yaml"); });
}

// A fraction above 1 in logging_steps / eval_steps / save_steps is taken where its strategy is
// not steps (transformers 4.57.1's __post_init__ checks it only there; the value is unused), with
// the key's lower bound kept; where a strategy steps reads it, it is refused quoting transformers,
// eval_strategy steps reading logging_steps through a null or 0 eval_steps included.
TEST(ConfigSchema, AFractionOfStepsIsTakenWhereNoStrategyStepsReadsIt) {
  const auto error = [](const Json& trainer) {
    return error_of([&] { RunConfig::from_json({{"trainer", trainer}}, "sft.yaml"); });
  };
  const RunConfig c = RunConfig::from_json({{"trainer",
                                             {{"logging_strategy", "epoch"},
                                              {"logging_steps", 2.5},
                                              {"eval_strategy", "no"},
                                              {"eval_steps", 7.5},
                                              {"save_strategy", "epoch"},
                                              {"save_steps", 1.25}}}},
                                           "sft.yaml");
  EXPECT_EQ(c.value("trainer.logging_steps").dump() + " " + c.value("trainer.eval_steps").dump() +
                " " + c.value("trainer.save_steps").dump(),
            "2.5 7.5 1.25");
  // A value from ${oc.env:…} (a string) is the number it spells; a strategy under its old name.
  EXPECT_EQ(error({{"logging_strategy", "no"}, {"logging_steps", "3.5"}}), "<no error>");
  EXPECT_NE(error({{"evaluation_strategy", "steps"}, {"eval_steps", 2.5}})
                .find("sft.yaml: trainer.eval_steps: 2.5 is not valid (expected an integer "
                      "number of steps >= 0, or a ratio in (0, 1) of the total steps; "
                      "trainer.eval_strategy is steps, where transformers raises \"--eval_steps "
                      "must be an integer if bigger than 1: 2.5\""),
            std::string::npos);
  // The lower bound and int64 stay.
  EXPECT_EQ(error({{"logging_strategy", "epoch"}, {"logging_steps", -2.5}}),
            "sft.yaml: trainer.logging_steps: -2.5 is not valid (expected an integer number of "
            "steps >= 1, or a ratio in (0, 1) of the total steps)");
  EXPECT_NE(error({{"save_strategy", "no"}, {"save_steps", 1e19 + 0.5}}).find("is not valid"),
            std::string::npos);
  // eval_steps null (or 0) under eval_strategy steps is logging_steps' value.
  for (const Json& eval_steps : {Json(), Json(0)}) {
    Json t = {{"logging_strategy", "epoch"}, {"logging_steps", 2.5}, {"eval_strategy", "steps"}};
    if (!eval_steps.is_null()) t["eval_steps"] = eval_steps;
    EXPECT_EQ(error(t),
              "sft.yaml: trainer.logging_steps: 2.5 is not valid (expected an integer number of "
              "steps >= 1, or a ratio in (0, 1) of the total steps; trainer.eval_strategy is "
              "steps and trainer.eval_steps null or 0, so evaluations run every logging_steps, "
              "and transformers raises \"--eval_steps must be an integer if bigger than 1: "
              "2.5\")");
  }
  EXPECT_EQ(error({{"logging_strategy", "epoch"},
                   {"logging_steps", 2.5},
                   {"eval_strategy", "steps"},
                   {"eval_steps", 4}}),
            "<no error>");
}

TEST(ConfigSchema, EveryNumberAndEnumIsCheckedWithItsRange) {
  struct Case {
    const char* key;
    Json value;
    const char* expected;
  };
  const Case cases[] = {
      {"learning_rate", -1e-3,
       "trainer.learning_rate: -0.001 is not valid (expected a number >= 0)"},
      {"learning_rate", "1e-5x",
       "trainer.learning_rate: '1e-5x' is not valid (expected a number >= 0)"},
      {"learning_rate", std::nan(""), "is not valid (expected a number >= 0)"},
      {"adam_beta1", 1.0, "trainer.adam_beta1: 1.0 is not valid (expected a number in [0, 1))"},
      {"adam_beta2", -0.5, "trainer.adam_beta2: -0.5 is not valid (expected a number in [0, 1))"},
      {"adam_epsilon", -1e-8, "trainer.adam_epsilon: -1e-08 is not valid (expected a number >= 0)"},
      {"weight_decay", -0.1, "trainer.weight_decay: -0.1 is not valid (expected a number >= 0)"},
      {"max_grad_norm", "none", "trainer.max_grad_norm: 'none' is not valid (expected a number)"},
      {"num_train_epochs", -1,
       "trainer.num_train_epochs: -1 is not valid (expected a number >= 0)"},
      {"max_steps", -2, "trainer.max_steps: -2 is not valid (expected an integer >= -1)"},
      {"per_device_train_batch_size", 0,
       "trainer.per_device_train_batch_size: 0 is not valid (expected an integer >= 1)"},
      {"per_device_eval_batch_size", 2.5,
       "trainer.per_device_eval_batch_size: 2.5 is not valid (expected an integer >= 1)"},
      {"gradient_accumulation_steps", 0,
       "trainer.gradient_accumulation_steps: 0 is not valid (expected an integer >= 1)"},
      {"max_length", 0,
       "trainer.max_length: 0 is not valid (expected an integer in [1, 1000000000])"},
      {"logging_steps", 0,
       "trainer.logging_steps: 0 is not valid (expected an integer number of steps >= 1, or a "
       "ratio in (0, 1) of the total steps)"},
      // above 1 a number of steps must be whole under its strategy steps (save_strategy's
      // default), as transformers' __post_init__ requires
      {"save_steps", 2.5,
       "trainer.save_steps: 2.5 is not valid (expected an integer number of steps >= 0, or a "
       "ratio in (0, 1) of the total steps; trainer.save_strategy is steps, where transformers "
       "raises \"--save_steps must be an integer if bigger than 1: 2.5\" (under another strategy "
       "a fraction is taken, and unused))"},
      {"logging_steps", 10.5,
       "trainer.logging_steps: 10.5 is not valid (expected an integer number of steps >= 1, or a "
       "ratio in (0, 1) of the total steps; trainer.logging_strategy is steps, where "
       "transformers raises \"--logging_steps must be an integer if bigger than 1: 10.5\" (under "
       "another strategy a fraction is taken, and unused))"},
      {"save_steps", -5,
       "trainer.save_steps: -5 is not valid (expected an integer number of steps >= 0, or a "
       "ratio in (0, 1) of the total steps)"},
      // a whole float is int(value) to transformers; int64 ends below 2^63 (int(inf) raises)
      {"logging_steps", 1.0e19,
       "trainer.logging_steps: 1e+19 is not valid (expected an integer number of steps >= 1, or "
       "a ratio in (0, 1) of the total steps; zerotune's integers are 64-bit: at most "
       "9223372036854775807)"},
      {"save_steps", std::numeric_limits<double>::infinity(),
       "trainer.save_steps: inf is not valid (expected an integer number of steps >= 0, or a "
       "ratio in (0, 1) of the total steps; zerotune's integers are 64-bit: at most "
       "9223372036854775807)"},
      {"save_total_limit", 1.5,
       "trainer.save_total_limit: 1.5 is not valid (expected an integer <= 1000000000)"},
      {"seed", -1, "trainer.seed: -1 is not valid (expected an integer in [0, 4294967295])"},
      {"seed", 4294967296,
       "trainer.seed: 4294967296 is not valid (expected an integer in [0, 4294967295])"},
      {"warmup_steps", 1.5,
       "trainer.warmup_steps: 1.5 is not valid (expected 0, a ratio in (0, 1) of the total steps, "
       "or a whole "
       "number of steps >= 1)"},
      {"warmup_ratio", 1.5, "trainer.warmup_ratio: 1.5 is not valid (expected a number in [0, 1])"},
      {"lr_scheduler_type", "cosin",
       "trainer.lr_scheduler_type: 'cosin' is not valid (expected one of: linear, cosine, "
       "constant, constant_with_warmup, cosine_with_restarts, polynomial, inverse_sqrt, "
       "cosine_with_min_lr, cosine_warmup_with_min_lr, warmup_stable_decay)"},
      {"lr_scheduler_type", "reduce_lr_on_plateau",
       "trainer.lr_scheduler_type: 'reduce_lr_on_plateau' is not supported by zerotune (it "
       "implements: linear, cosine, constant, constant_with_warmup, cosine_with_restarts, "
       "polynomial, inverse_sqrt, cosine_with_min_lr, cosine_warmup_with_min_lr, "
       "warmup_stable_decay)"},
      {"eval_strategy", "step",
       "trainer.eval_strategy: 'step' is not valid (expected one of: no, steps, epoch)"},
      {"save_strategy", "bests",
       "trainer.save_strategy: 'bests' is not valid (expected one of: no, steps, "
       "epoch, best)"},
      {"eval_delay", -1, "trainer.eval_delay: -1 is not valid (expected a number >= 0)"},
      {"load_best_model_at_end", "yes", "trainer.load_best_model_at_end: 'yes' is not valid"},
      {"greater_is_better", 1, "trainer.greater_is_better: 1 is not valid"},
      {"optim", "sgd",
       "trainer.optim: 'sgd' is not supported by zerotune (it implements: adamw_torch, "
       "adamw_torch_fused)"},
      // transformers 4.57 has no adamw_hf (its own AdamW went in 4.50) and raises on it.
      {"optim", "adamw_hf",
       "trainer.optim: 'adamw_hf' is not valid (expected one of: adamw_torch, adamw_torch_fused"},
      {"packing_strategy", "wrapped",
       "trainer.packing_strategy: 'wrapped' is not supported by zerotune"},
      {"loss_type", "dft", "trainer.loss_type: 'dft' is not supported by zerotune"},
      {"logging_strategy", "sometimes", "trainer.logging_strategy: 'sometimes' is not valid"},
      {"nan_policy", "ignore",
       "trainer.nan_policy: 'ignore' is not valid (expected one of: error, skip)"},
      {"bf16", "yes", "trainer.bf16: 'yes' is not valid (expected true or false)"},
      {"learning_rate", nullptr,
       "trainer.learning_rate: null is not valid (expected a number >= 0)"},
      // Refused TRL fields: fine at their default, an error otherwise.
      {"fp16", true, "trainer.fp16: true is not supported by zerotune: fp16 needs loss scaling"},
      {"label_smoothing_factor", 0.1,
       "trainer.label_smoothing_factor: 0.1 is not supported by zerotune: label smoothing is not "
       "implemented"},
      {"neftune_noise_alpha", 5, "trainer.neftune_noise_alpha: 5 is not supported by zerotune"},
      {"group_by_length", true, "trainer.group_by_length: true is not supported by zerotune"},
      {"average_tokens_across_devices", false,
       "trainer.average_tokens_across_devices: false is not supported"},
      // Strings Python reads as true, and a "{}" TRL does not parse for this field.
      {"fp16", " ", "trainer.fp16: ' ' is not supported by zerotune"},
      {"adafactor", "{}", "trainer.adafactor: '{}' is not supported by zerotune"},
  };
  for (const auto& c : cases) {
    const std::string e = trainer_error(c.key, c.value);
    EXPECT_EQ(e.rfind("sft.yaml: ", 0), 0u) << e;
    EXPECT_NE(e.find(c.expected), std::string::npos) << c.key << ": " << e;
  }
  for (const auto& [key, value] : std::vector<std::pair<std::string, Json>>{
           {"fp16", false},
           {"label_smoothing_factor", 0.0},
           {"label_smoothing_factor", 0},
           {"group_by_length", false},
           {"lr_scheduler_kwargs", Json::object()},
           {"eval_steps", 5.0},
           {"warmup_steps", 0.1},
           {"warmup_steps", 10},
           {"max_length", nullptr},
           {"max_grad_norm", 0},
           {"seed", 4294967295},
           {"loss_type", "chunked_nll"},
           // as transformers takes them: no clipping, warm-up over the whole run, eval_steps
           // from logging_steps; no-op values of refused fields
           {"max_grad_norm", -1.0},
           {"warmup_ratio", 1.0},
           {"eval_steps", 0},
           {"dataset_kwargs", {{"skip_prepare_dataset", false}}},
           {"lr_scheduler_kwargs", " {} "},
           {"optim_args", ""},
           {"fp16", ""},
           {"save_steps", 0}})
    EXPECT_EQ(trainer_error(key, value), "<no error>") << key << " " << value.dump();
  EXPECT_EQ(error_of([] { RunConfig::from_json({{"compute", {{"zero_stage", 4}}}}, "sft.yaml"); }),
            "sft.yaml: compute.zero_stage: 4 is not valid (expected an integer in [0, 3])");
  EXPECT_EQ(error_of([] { RunConfig::from_json({{"compute", {{"backend", "tpu"}}}}, "sft.yaml"); }),
            "sft.yaml: compute.backend: 'tpu' is not valid (expected one of: auto, cpu, cuda)");
  EXPECT_EQ(error_of([] { RunConfig::from_json({{"dataset", {{"prompt_format", "chatml"}}}}, "sft.yaml"); }),
            "sft.yaml: dataset.prompt_format: 'chatml' is not valid (expected one of: none, chat)");
}

TEST(ConfigSchema, OverriddenValuesSayCommandLine) {
  auto dir = fs::temp_directory_path() / ("zt_schema_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "sft.yaml") << "trainer:\n  learning_rate: 1.0e-4\n";
  EXPECT_EQ(error_of([&] { RunConfig::load(dir / "sft.yaml", {"trainer.adam_beta2=1.5"}); }),
            (dir / "sft.yaml").string() +
                ": trainer.adam_beta2: 1.5 is not valid (expected a number in [0, 1)) (given on the command line)");
  fs::remove_all(dir);
}

TEST(ConfigSchema, RenamedFieldsWorkUnderBothNames) {
  auto a = RunConfig::from_json({{"trainer", {{"evaluation_strategy", "steps"}, {"max_seq_length", 256}}}}, "x.yaml");
  EXPECT_EQ(a.get<std::string>("trainer.eval_strategy"), "steps");
  EXPECT_EQ(a.get<int64_t>("trainer.max_length"), 256);
  ASSERT_EQ(a.notes().size(), 2u);
  EXPECT_EQ(a.notes()[0], "x.yaml: trainer.evaluation_strategy is read as trainer.eval_strategy (renamed in "
                          "transformers 4.46)");
  auto b = RunConfig::from_json({{"trainer", {{"activation_checkpointing", false}, {"per_gpu_train_batch_size", 3}}}},
                                "x.yaml");
  EXPECT_FALSE(b.get<bool>("trainer.gradient_checkpointing"));
  EXPECT_EQ(b.get<int64_t>("trainer.per_device_train_batch_size"), 3);
  EXPECT_EQ(error_of([] {
              RunConfig::from_json({{"trainer", {{"evaluation_strategy", "steps"}, {"eval_strategy", "no"}}}}, "x.yaml");
            }),
            "x.yaml: trainer.evaluation_strategy (the name before transformers 4.46) and trainer.eval_strategy are "
            "both given, with different values (\"steps\" and \"no\")");
  // warmup_ratio (transformers 4.x) and a fractional warmup_steps (5.x) both give a ratio.
  auto c = RunConfig::from_json({{"trainer", {{"warmup_ratio", 0.1}}}}, "x.yaml");
  auto d = RunConfig::from_json({{"trainer", {{"warmup_steps", 0.1}}}}, "x.yaml");
  EXPECT_EQ(c.get<double>("trainer.warmup_ratio"), 0.1);
  EXPECT_EQ(d.get<double>("trainer.warmup_steps"), 0.1);
}

TEST(ConfigSchema, UsersSftYamlLoadsUnchanged) {
  const fs::path yaml = fs::path(ZT_SHARED_DATA).parent_path() / "seed_configs" / "sft.yaml";
  ASSERT_TRUE(fs::exists(yaml)) << yaml;
  RunConfig c = RunConfig::load(yaml, {"model_name=Qwen/Qwen2.5-1.5B", "trainer.per_device_train_batch_size=4",
                                       "trainer.eval_steps=10", "trainer.seed=42", "trainer.full_determinism=true",
                                       "compute.n_gpus=4"});
  EXPECT_EQ(c.get<std::string>("model.name_or_path"), "Qwen/Qwen2.5-1.5B");
  EXPECT_EQ(c.get<std::string>("dataset.prompt_format"), "chat");
  EXPECT_EQ(c.get<std::string>("trainer.output_dir"), "logs/sft/ckpts");
  EXPECT_EQ(c.get<std::string>("trainer.logging_dir"), "logs/sft/tensorboard");
  EXPECT_EQ(c.get<int64_t>("trainer.max_length"), 4096);
  EXPECT_EQ(c.get<int64_t>("trainer.per_device_train_batch_size"), 4);
  EXPECT_TRUE(c.is_missing("trainer.gradient_accumulation_steps"));
  EXPECT_EQ(c.get<std::string>("trainer.save_strategy"), "no");
  std::string notes;
  for (const auto& n : c.notes()) notes += n + "\n";
  for (const char* key : {"use_ms: true", "trainer.use_liger_kernel: true", "trainer.full_determinism: true",
                          "dataset.prompt_format is chat"})
    EXPECT_NE(notes.find(key), std::string::npos) << key << "\n" << notes;
  EXPECT_EQ(c.notes().size(), 4u) << notes;  // activation_offloading: false etc. are defaults: no note
}

// The users' command-line forms end to end, read in Hydra's override grammar: a dict without
// spaces after its colons, a list, `007` (no int to Hydra: its INT has no leading zeros) for a
// text key, an escaped comma and a quoted value.
TEST(ConfigSchema, UsersOverridesInHydrasGrammar) {
  const fs::path yaml = fs::path(ZT_SHARED_DATA).parent_path() / "seed_configs" / "sft.yaml";
  ASSERT_TRUE(fs::exists(yaml)) << yaml;
  RunConfig c = RunConfig::load(yaml, {"trainer.gradient_accumulation_steps=1_6",
                                       "trainer.chat_template_kwargs={enable_thinking:false}",
                                       "trainer.report_to=[tensorboard, none]", "exp_name=007",
                                       "exp_dir=logs/a\\,b", "model_name='Qwen/Qwen2.5-1.5B'"});
  EXPECT_EQ(c.value("trainer.chat_template_kwargs"), Json({{"enable_thinking", false}}));
  EXPECT_EQ(c.value("trainer.report_to"), Json({"tensorboard", "none"}));
  EXPECT_EQ(c.get<std::string>("exp_name"), "007");
  EXPECT_EQ(c.get<int64_t>("trainer.gradient_accumulation_steps"), 16);
  EXPECT_EQ(c.get<std::string>("trainer.output_dir"), "logs/a,b/ckpts");
  EXPECT_EQ(c.get<std::string>("model.name_or_path"), "Qwen/Qwen2.5-1.5B");
}

TEST(ConfigSchema, ShippedConfigsLoadWithoutNotes) {
  for (const char* name : {"default.yaml", "sft_ultrafeedback.yaml"}) {
    RunConfig c = RunConfig::load(fs::path(ZT_SOURCE_DIR) / "configs" / name, {});
    EXPECT_TRUE(c.notes().empty()) << name << ": " << c.notes().front();
  }
}

TEST(ConfigSchema, UsersLayoutModelNameMustAgree) {
  EXPECT_EQ(error_of([] {
              RunConfig::from_json({{"model_name", "a/b"}, {"model", {{"name_or_path", "c/d"}}}}, "x.yaml");
            }),
            "x.yaml: model_name (\"a/b\") and model.name_or_path (\"c/d\") name different models; give one of them");
  auto c = RunConfig::from_json({{"model_name", "a/b"}, {"dataset", {{"prompt_format", "none"}}}}, "x.yaml");
  EXPECT_EQ(c.get<std::string>("dataset.prompt_format"), "none");  // an explicit choice wins
  auto d = RunConfig::from_json({{"model", {{"name_or_path", "a/b"}}}}, "x.yaml");
  EXPECT_EQ(d.get<std::string>("dataset.prompt_format"), "none");  // zerotune's own layout: TRL's default
}

TEST(ConfigSchema, DatasetSourcesFollowTheUsersLayout) {
  // A local file is one split named "train" (HF load_dataset(<format>, data_files=path)).
  auto local = RunConfig::from_json(
      {{"dataset", {{"is_local", true}, {"eval", {{"path", "e.parquet"}, {"split", "test"}}}}}}, "sft.yaml");
  EXPECT_EQ(error_of([&] { zt::cli::data_options(local, "eval"); }),
            "sft.yaml: dataset.eval.split: 'test' is not valid for the local file e.parquet: a data file given by "
            "path is one split named 'train' (as HF datasets' load_dataset(<format>, data_files=path) makes it); "
            "set split: train");
  auto ok = RunConfig::from_json({{"dataset", {{"train", {{"path", "t.jsonl"}, {"split", "train"}}}}}}, "sft.yaml");
  EXPECT_EQ(zt::cli::data_options(ok, "train").dataset, "t.jsonl");
  auto no_name = RunConfig::from_json({{"dataset", {{"is_local", false}, {"train", {{"path", "t.jsonl"}}}}}}, "s.yaml");
  EXPECT_EQ(error_of([&] { zt::cli::data_options(no_name, "train"); }),
            "s.yaml: dataset.train.name (a hub dataset id) is not set and dataset.is_local is false");
  auto none = RunConfig::from_json(Json::object(), "s.yaml");
  EXPECT_EQ(error_of([&] { zt::cli::data_options(none, "train"); }),
            "s.yaml: dataset.train.path is not set (nor dataset.train.name, a hub dataset id)");
  EXPECT_FALSE(zt::cli::has_eval_set(none));
}

// A glob in dataset.<split>.path is a data_files pattern (as the users' load_dataset(<format>,
// data_files=path) reads it), which must match one file; `datasets`' split slicing is named as
// such.
TEST(ConfigSchema, DatasetPathGlobsAndSplitSlicing) {
  zt::testing::TempDir dir;
  fs::create_directories(dir / "dd" / "dir");
  std::ofstream(dir / "dd" / "dir" / "a.jsonl") << "{}";
  std::ofstream(dir / "dd" / "dir" / ".b.jsonl") << "{}";  // hidden: `datasets` skips it
  const std::string pattern = (dir / "dd" / "dir").string() + "/*.jsonl";
  const auto with_path = [](const std::string& p, const std::string& split = "train") {
    return RunConfig::from_json({{"dataset", {{"train", {{"path", p}, {"split", split}}}}}},
                                "sft.yaml");
  };
  EXPECT_EQ(zt::cli::data_options(with_path(pattern), "train").dataset,
            dir / "dd" / "dir" / "a.jsonl");
  std::ofstream(dir / "dd" / "dir" / "c.jsonl") << "{}";
  EXPECT_EQ(
      error_of([&] { zt::cli::data_options(with_path(pattern), "train"); }),
      "sft.yaml: dataset.train.path: the pattern '" + pattern + "' matches 2 files (" +
          (dir / "dd" / "dir").string() + "/a.jsonl, " + (dir / "dd" / "dir").string() +
          "/c.jsonl); zerotune reads one file per split — merge them into one file, or name one");
  // The walk goes only as deep as the pattern reaches, and every level under a `**`.
  fs::create_directories(dir / "dd" / "dir" / "sub");
  std::ofstream(dir / "dd" / "dir" / "sub" / "d.jsonl") << "{}";
  EXPECT_EQ(
      zt::cli::data_options(with_path((dir / "dd").string() + "/**/d.jsonl"), "train").dataset,
      dir / "dd" / "dir" / "sub" / "d.jsonl");
  EXPECT_EQ(
      zt::cli::data_options(with_path((dir / "dd").string() + "/*/sub/d.jsonl"), "train").dataset,
      dir / "dd" / "dir" / "sub" / "d.jsonl");
  const std::string none = (dir / "dd").string() + "/**/*.parquet";
  EXPECT_EQ(error_of([&] { zt::cli::check_dataset_present(with_path(none), "train"); })
                .find("sft.yaml: dataset.train.path: the pattern '" + none +
                      "' matches no file (globs are read as HF "
                      "datasets' data_files reads them"),
            0u);
  EXPECT_EQ(error_of([&] { zt::cli::data_options(with_path("t.jsonl", "train[:50%]"), "train"); }),
            "sft.yaml: dataset.train.split: 'train[:50%]' is HF datasets' split slicing / "
            "concatenation syntax "
            "(ReadInstruction: 'train[:50%]', 'train[10:20]', 'train+test'), which zerotune does "
            "not support: it "
            "reads whole splits (cut the file to the rows you want instead); a local file's split "
            "is 'train' (set "
            "split: train)");
  auto hub = RunConfig::from_json(
      {{"dataset", {{"is_local", false}, {"train", {{"name", "org/x"}, {"split", "train+test"}}}}}},
      "sft.yaml");
  EXPECT_NE(error_of([&] {
              zt::cli::data_options(hub, "train");
            }).find("sft.yaml: dataset.train.split: 'train+test' is HF datasets' split slicing"),
            std::string::npos);
}

}  // namespace
