// A checkpoint's trainer_state.json is transformers 4.57.1's TrainerState (its field set, types and
// the key order save_to_json writes, against a golden made from the dataclass by
// tools/make_trainer_state_golden.py), zerotune's own state is zerotune_state.json (older
// checkpoints' trainer_state.json still read), and total_flos is transformers' estimate.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

#include "cli/config_schema.h"
#include "cli/run_config.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/zt_test_util.h"
#include "io/json.h"
#include "io/model_config.h"
#include "param/param_layout.h"
#include "train/checkpoint_state.h"

namespace fs = std::filesystem;
using zt::Json;
using namespace zt::train;

namespace {

Json golden() {
  return Json::parse(zt::read_file(fs::path(ZT_SOURCE_DIR) / "tests/data/train" /
                                   "trainer_state_fields.golden.json"));
}

bool has_json_type(const Json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "integer") return v.is_number_integer();
  if (t == "number") return v.is_number();
  if (t == "boolean") return v.is_boolean();
  if (t == "string") return v.is_string();
  if (t == "array") return v.is_array();
  if (t == "object") return v.is_object();
  ADD_FAILURE() << "unknown JSON type in the golden: " << t;
  return false;
}

HfTrainerState sample_state() {
  HfTrainerState s;
  s.epoch = 1.0;
  s.global_step = 2;
  s.max_steps = 4;
  s.num_train_epochs = 2;
  s.logging_steps = 1;
  s.eval_steps = 2;
  s.save_steps = 2;
  s.train_batch_size = 2;
  s.num_input_tokens_seen = 28;
  s.total_flos = 798336.0;
  s.log_history.push_back(Json::parse(
      R"({"loss": 11.8973, "grad_norm": 2.4377, "learning_rate": 0.01, "num_tokens": 14,
          "epoch": 0.5, "step": 1})"));
  s.log_history.push_back(Json::parse(R"({"eval_loss": 11.55, "epoch": 1.0, "step": 2})"));
  return s;
}

// Every field of the dataclass, no other key (TrainerState(**json) raises TypeError on one),
// each value of a type its annotation admits, in save_to_json's sorted order, with
// TrainerControl's state under stateful_callbacks.
TEST(HfTrainerState, HasExactlyTransformersFieldsWithTheirTypes) {
  const Json g = golden();
  ASSERT_EQ(g["transformers"], "4.57.1");
  ASSERT_EQ(g["fields"].size(), 20u);
  HfTrainerState s = sample_state();
  for (bool best : {false, true}) {
    if (best) {
      s.best_metric = 11.55;
      s.best_global_step = 2;
      s.best_model_checkpoint = "/runs/x/checkpoint-2";
      s.should_training_stop = true;
    }
    const std::string text = hf_trainer_state_text(s);
    const Json st = Json::parse(text);  // ordered_json: the keys in the file's order
    std::vector<std::string> keys;
    for (const auto& [k, v] : st.items()) keys.push_back(k);
    EXPECT_EQ(Json(keys), g["saved_key_order"]);
    for (const Json& f : g["fields"]) {
      const std::string name = f["name"];
      ASSERT_TRUE(st.contains(name)) << name;
      bool ok = false;
      for (const Json& t : f["json_types"]) ok = ok || has_json_type(st[name], t);
      EXPECT_TRUE(ok) << name << " = " << st[name].dump() << ", annotation "
                      << f["annotation"].get<std::string>();
    }
    // The values.
    EXPECT_EQ(st["global_step"], 2);
    EXPECT_EQ(st["max_steps"], 4);
    EXPECT_EQ(st["num_train_epochs"], 2);
    EXPECT_EQ(st["train_batch_size"], 2);
    EXPECT_EQ(st["num_input_tokens_seen"], 28);
    EXPECT_EQ(st["eval_steps"], 2);
    EXPECT_DOUBLE_EQ(st["total_flos"].get<double>(), 798336.0);
    EXPECT_DOUBLE_EQ(st["epoch"].get<double>(), 1.0);
    EXPECT_EQ(st["is_local_process_zero"], true);
    EXPECT_EQ(st["is_world_process_zero"], true);
    EXPECT_EQ(st["is_hyper_param_search"], false);
    EXPECT_TRUE(st["trial_name"].is_null());
    EXPECT_TRUE(st["trial_params"].is_null());
    EXPECT_EQ(st["best_metric"], best ? Json(11.55) : Json());
    EXPECT_EQ(st["best_global_step"], best ? Json(2) : Json());
    EXPECT_EQ(st["best_model_checkpoint"], best ? Json("/runs/x/checkpoint-2") : Json());
    // TrainerControl as _save_checkpoint stores it: its args (the golden's names), saving.
    const Json& control = st["stateful_callbacks"]["TrainerControl"];
    ASSERT_EQ(st["stateful_callbacks"].size(), 1u);
    std::set<std::string> want, got;
    for (const auto& [k, v] : g["trainer_control_state"]["args"].items()) want.insert(k);
    for (const auto& [k, v] : control["args"].items()) got.insert(k);
    EXPECT_EQ(got, want);
    EXPECT_EQ(control["attributes"], Json::object());
    EXPECT_EQ(control["args"]["should_save"], true);
    EXPECT_EQ(control["args"]["should_log"], false);
    EXPECT_EQ(control["args"]["should_evaluate"], false);
    EXPECT_EQ(control["args"]["should_epoch_stop"], false);
    EXPECT_EQ(control["args"]["should_training_stop"], best);
    // log_history: the records, each with its keys sorted (sort_keys) and its types kept.
    ASSERT_EQ(st["log_history"].size(), 2u);
    EXPECT_EQ(st["log_history"][0].dump(),
              R"({"epoch":0.5,"grad_norm":2.4377,"learning_rate":0.01,"loss":11.8973,)"
              R"("num_tokens":14,"step":1})");
    EXPECT_EQ(st["log_history"][1].dump(), R"({"epoch":1.0,"eval_loss":11.55,"step":2})");
    // json.dumps(indent=2) + "\n".
    EXPECT_TRUE(text.starts_with("{\n  \"best_global_step\": ")) << text.substr(0, 40);
    EXPECT_TRUE(text.ends_with("}\n"));
  }
  // The steps fields as floats, which transformers writes where the strategy is not steps (a
  // whole 10.0, a fraction 2.5: trainer_state_steps.golden.json), though annotated int: the
  // golden's types for them are the ones transformers writes, and they admit these.
  s.logging_steps = 10.0;
  s.eval_steps = 2.5;
  s.save_steps = 20;
  const Json st = Json::parse(hf_trainer_state_text(s));
  EXPECT_EQ(
      st["logging_steps"].dump() + " " + st["eval_steps"].dump() + " " + st["save_steps"].dump(),
      "10.0 2.5 20");
  for (const Json& f : g["fields"]) {
    const std::string name = f["name"];
    if (!name.ends_with("_steps") || name == "max_steps") continue;
    EXPECT_EQ(f["json_types"], Json({"integer", "number"})) << name;
    bool ok = false;
    for (const Json& t : f["json_types"]) ok = ok || has_json_type(st[name], t);
    EXPECT_TRUE(ok) << name << " = " << st[name].dump();
  }
}

// Python's json.dumps escapes non-ASCII (ensure_ascii), as save_to_json writes a path.
TEST(HfTrainerState, NonAsciiIsEscapedAsPythonWritesIt) {
  HfTrainerState s = sample_state();
  s.best_model_checkpoint = "/runs/ü/checkpoint-2";
  const std::string text = hf_trainer_state_text(s);
  EXPECT_NE(text.find(R"("best_model_checkpoint": "/runs/\u00fc/checkpoint-2")"), std::string::npos)
      << text;
}

// transformers 4.57.1 rounds only "loss" of a log record (round(..., 4), _maybe_log_save_evaluate);
// the values are a TRL 0.25.1 run's step 1 (tests/data/train/trl_run: "loss": 11.9321, the rest as
// computed). The file's text holds the rounded value as Python's json writes it.
TEST(HfTrainerState, LogRecordsAreRoundedAsTransformersRoundsThem) {
  const Json rec = Json::parse(
      R"({"loss":11.932143211364746,"grad_norm":1.4205864667892456,"learning_rate":2e-05,)"
      R"("entropy":11.926803588867188,"num_tokens":412.0,"epoch":0.25,"step":1})");
  const Json hf = hf_log_record(rec);
  EXPECT_EQ(hf["loss"].get<double>(), 11.9321);
  for (const char* k : {"grad_norm", "learning_rate", "entropy", "num_tokens", "epoch", "step"})
    EXPECT_EQ(hf[k], rec[k]) << k;
  EXPECT_TRUE(hf_log_record(Json::parse(R"({"loss":null,"step":3})"))["loss"].is_null());
  HfTrainerState s = sample_state();
  s.log_history = Json::array({hf});
  s.should_save = false;
  const std::string text = hf_trainer_state_text(s);
  EXPECT_NE(text.find(R"("loss": 11.9321,)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("should_save": false,)"), std::string::npos) << text;
  zt::testing::expect_error([] { hf_log_record(Json::array()); },
                            {"log_history record", "expected a JSON object"});
}

// os.path.join(output_dir, "checkpoint-N") as given: relative stays relative, no normalising.
TEST(HfTrainerState, BestModelCheckpointIsTheJoinedPath) {
  EXPECT_EQ(hf_best_model_checkpoint(fs::path("runs/x") / "checkpoint-2"), "runs/x/checkpoint-2");
  EXPECT_EQ(hf_best_model_checkpoint(fs::path("runs/x/") / "checkpoint-2"), "runs/x/checkpoint-2");
  EXPECT_EQ(hf_best_model_checkpoint(fs::path("./out") / "checkpoint-4"), "./out/checkpoint-4");
  EXPECT_EQ(hf_best_model_checkpoint(fs::path("/abs/run") / "checkpoint-4"),
            "/abs/run/checkpoint-4");
  EXPECT_FALSE(hf_best_model_checkpoint(fs::path()).has_value());
}

// transformers' floating_point_ops: 6 · tokens · num_parameters(exclude_embeddings=True). The
// tied Qwen2 model of a TRL 0.25.1 run (hidden 16, 2 layers) has 4752 such parameters, and its
// checkpoint-2 (28 tokens) recorded total_flos 798336.0; an untied head counts.
TEST(HfTrainerState, TotalFlosAsTransformersCountsThem) {
  const std::string cfg = R"({"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 16,
    "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "max_position_embeddings": 512, "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": )";
  const zt::ParamLayout tied(zt::parse_model_config(Json::parse(cfg + "true}"), "tied.json"));
  EXPECT_EQ(non_embedding_parameters(tied), 4752);
  EXPECT_EQ(hf_total_flos(28, non_embedding_parameters(tied)), 798336.0);
  EXPECT_EQ(hf_total_flos(56, non_embedding_parameters(tied)), 1596672.0);  // its checkpoint-4
  const zt::ParamLayout untied(zt::parse_model_config(Json::parse(cfg + "false}"), "untied.json"));
  EXPECT_EQ(non_embedding_parameters(untied), 4752 + 151936 * 16);
}

class CheckpointStateFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zt_ckpt_state_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// zerotune_state.json when there, else trainer_state.json (a checkpoint of an older zerotune).
TEST_F(CheckpointStateFiles, ZerotuneStateOrTheOlderTrainerState) {
  EXPECT_EQ(zerotune_state_path(dir_), dir_ / "trainer_state.json");
  std::ofstream(dir_ / "trainer_state.json") << "{}";
  EXPECT_EQ(zerotune_state_path(dir_), dir_ / "trainer_state.json");
  std::ofstream(dir_ / "zerotune_state.json") << "{}";
  EXPECT_EQ(zerotune_state_path(dir_), dir_ / "zerotune_state.json");
}

TEST_F(CheckpointStateFiles, HfTrainerStateIsReadAndChecked) {
  const fs::path f = dir_ / "trainer_state.json";
  std::ofstream(f) << R"({"global_step": 2, "log_history": [{"loss": 1.5, "step": 1},
    {"eval_loss": 1.25, "step": 2}]})";
  const HfTrainerStateRead r = read_hf_trainer_state(f);
  EXPECT_EQ(r.global_step, 2);
  const Json& h = r.log_history;
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[1]["eval_loss"], 1.25);
  // No steps keys: TrainerState's dataclass defaults, as transformers' TrainerState(**json).
  EXPECT_EQ(std::tuple(r.logging_steps, r.eval_steps, r.save_steps), std::tuple(500, 500, 500));
  std::ofstream(f) << R"({"global_step": 2, "log_history": [], "logging_steps": 3,
    "eval_steps": 6, "save_steps": 0})";
  const HfTrainerStateRead s = read_hf_trainer_state(f);
  EXPECT_EQ(std::tuple(s.logging_steps, s.eval_steps, s.save_steps), std::tuple(3, 6, 0));
  const auto error = [&](const std::string& text) {
    std::ofstream(f) << text;
    try {
      read_hf_trainer_state(f);
    } catch (const zt::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error(R"({"global_step": 2})"),
            f.string() + ": no \"log_history\" list (a transformers trainer_state.json has one)");
  EXPECT_EQ(error(R"({"log_history": []})"),
            f.string() + ": 'global_step' must be a non-negative integer, got nothing");
  EXPECT_EQ(error(R"({"global_step": 2, "log_history": [{"step": 1}, {"loss": 2}]})"),
            f.string() + ": log_history[1]: expected an object with an integer \"step\", got " +
                R"({"loss":2})");
  EXPECT_TRUE(error("{\"log_history\": [").starts_with(f.string() + ": not valid JSON: "));
  EXPECT_EQ(error(R"({"global_step": 2, "log_history": [], "logging_steps": -1})"),
            f.string() +
                ": 'logging_steps' must be a number of optimizer steps >= 0 (below 2^63), got -1");
  EXPECT_EQ(error(R"({"global_step": 2, "log_history": [], "eval_steps": -2.5})"),
            f.string() +
                ": 'eval_steps' must be a number of optimizer steps >= 0 (below 2^63), got -2.5");
  EXPECT_EQ(error(R"({"global_step": 2, "log_history": [], "save_steps": 1e19})"),
            f.string() +
                ": 'save_steps' must be a number of optimizer steps >= 0 (below 2^63), got 1e+19");
  EXPECT_EQ(error(R"({"global_step": 2, "log_history": [], "save_steps": "4"})"),
            f.string() +
                ": 'save_steps' must be a number of optimizer steps >= 0 (below 2^63), got "
                "\"4\"");
  // What transformers writes outside strategy steps, kept as written for the resumed run's own
  // trainer_state.json: an eval_steps of 0, a whole float (10.0), a fraction given under a strategy
  // other than steps, whose count is where `global_step % value == 0` first holds (2.5: 5,
  // 0.75: 3, 1.125: 9).
  for (const auto& [steps, counts] :
       {std::pair{std::string("1.0 0 20.0"), std::tuple(1, 0, 20)},
        std::pair{std::string("2.5 0.75 1.125"), std::tuple(5, 3, 9)}}) {
    std::istringstream in(steps);
    std::string l, e, s;
    in >> l >> e >> s;
    std::ofstream(f) << R"({"global_step": 2, "log_history": [], "logging_steps": )" << l
                     << R"(, "eval_steps": )" << e << R"(, "save_steps": )" << s << "}";
    const HfTrainerStateRead got = read_hf_trainer_state(f);
    EXPECT_EQ(std::tuple(got.logging_steps, got.eval_steps, got.save_steps), counts) << steps;
    EXPECT_EQ(got.logging_steps_value.dump() + " " + got.eval_steps_value.dump() + " " +
                  got.save_steps_value.dump(),
              steps);
  }
}

// trainer_state.json's logging_steps / eval_steps / save_steps are what transformers 4.57.1's
// TrainerState holds for the config's values (tests/data/train/trainer_state_steps.golden.json,
// tools/make_trainer_state_golden.py: TRL's SFTConfig, then TrainerState.compute_steps): eval_steps
// null or 0 under eval_strategy steps is logging_steps, null otherwise 500, an explicit 0 stays 0,
// ratios are math.ceil(max_steps * r), and a whole float is an int under strategy steps and above
// 1, else written as the float it is (10.0, 1.0). A fraction above 1 (2.5) is taken and written as
// it is where its strategy is not steps, and refused, quoting transformers, where it is (eval_steps
// null copying logging_steps' under eval_strategy steps included).
TEST(HfTrainerState, IntervalStepsAreTransformersComputeSteps) {
  const Json g = Json::parse(zt::read_file(fs::path(ZT_SOURCE_DIR) / "tests/data/train" /
                                           "trainer_state_steps.golden.json"));
  ASSERT_EQ(g["transformers"], "4.57.1");
  ASSERT_EQ(g["cases"].size(), 28u);
  int refused = 0, fractions = 0;
  for (const Json& c : g["cases"]) {
    SCOPED_TRACE(c.dump());
    Json trainer = Json::object();
    for (const char* k : {"logging_strategy", "logging_steps", "eval_strategy", "eval_steps",
                          "save_strategy", "save_steps"})
      trainer[k] = c[k];
    if (c.contains("error")) {
      const std::string e = zt::testing::error_of([&] {
        zt::cli::RunConfig::from_json({{"trainer", trainer}}, "s.yaml");
      });
      EXPECT_NE(e.find("transformers raises \"" + c["error"]["message"].get<std::string>() + "\""),
                std::string::npos)
          << e;
      EXPECT_TRUE(e.starts_with("s.yaml: trainer.")) << e;
      ++refused;
      continue;
    }
    for (const char* k : {"logging_steps", "eval_steps", "save_steps"})
      fractions += c["state"][k].is_number_float() &&
                   c["state"][k].get<double>() != std::floor(c["state"][k].get<double>());
    TrainArgs a;
    zt::cli::read_declared_options(zt::cli::RunConfig::from_json({{"trainer", trainer}}, "s.yaml"),
                                   a);
    const int64_t max_steps = c["max_steps"].get<int64_t>();
    a.resolve_step_ratios(max_steps);
    set_hf_state_steps(&a, max_steps);
    EXPECT_EQ("[" + a.state_logging_steps.dump() + ", " + a.state_eval_steps.dump() + ", " +
                  a.state_save_steps.dump() + "]",
              c["state_text"].get<std::string>());
    // The file's text: the same values.
    HfTrainerState s = sample_state();
    s.logging_steps = a.state_logging_steps;
    s.eval_steps = a.state_eval_steps;
    s.save_steps = a.state_save_steps;
    const Json st = Json::parse(hf_trainer_state_text(s));
    EXPECT_EQ("[" + st["logging_steps"].dump() + ", " + st["eval_steps"].dump() + ", " +
                  st["save_steps"].dump() + "]",
              c["state_text"].get<std::string>());
  }
  EXPECT_EQ(refused, 5);
  EXPECT_EQ(fractions, 8);  // 2.5, 7.5, 12.5, 1.5, 3.25, 2.5, 2.5, 2.5
  // The rule alone: a 1.0 is not > 1, so not int()ed even under steps.
  EXPECT_EQ(hf_state_steps(1.0, true, 100).dump(), "1.0");
  EXPECT_EQ(hf_state_steps(10.0, true, 100).dump(), "10");
  EXPECT_EQ(hf_state_steps(10.0, false, 100).dump(), "10.0");
  EXPECT_EQ(hf_state_steps(nullptr, true, 100).dump(), "500");
  EXPECT_EQ(hf_state_steps(0.0, false, 100).dump(), "0");
}

}  // namespace
