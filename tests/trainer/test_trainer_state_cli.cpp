// A checkpoint's trainer_state.json after a real (tiny, CPU) run is transformers 4.57.1's
// TrainerState — the golden field set, the run's values, log_history holding the records logged
// through the checkpoint's step — and a run resumes from such a checkpoint and from one written
// before zerotune_state.json existed (zerotune's keys in trainer_state.json), continuing the log.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/json.h"
#include "io/model_config.h"
#include "param/param_layout.h"
#include "train/checkpoint_state.h"
#include "train/metrics.h"
#include "train_cli_util.h"

namespace fs = std::filesystem;

namespace {

using zt::Json;
using zt_test::exited;
using zt_test::run;
using zt_test::RunResult;
using zt_test::slurp;

class TrainerStateCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string error;
    root_ = zt_test::fresh_root_with_demo("zt_trainer_state_", 16, 4, 5, &error);
    ASSERT_FALSE(root_.empty()) << error;
    fs::create_directories(root_ / "model");
    std::ofstream(root_ / "model" / "config.json")
        << R"({"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 16,
  "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
  "rope_theta": 1000000.0, "hidden_act": "silu", "tie_word_embeddings": true,
  "torch_dtype": "float32"})";
    std::ofstream(root_ / "sft.yaml")
        << "exp_name: x\nexp_dir: " << (root_ / "runs").string() << "/${exp_name}\n"
        << "model:\n  name_or_path: " << (root_ / "model").string()
        << "\n  tokenizer_name_or_path: " << ZT_SOURCE_DIR
        << "/configs/tokenizers/qwen2.5-instruct\n"
        << "dataset:\n  train:\n    path: " << (root_ / "demo/train.parquet").string()
        << "\n  eval:\n    path: " << (root_ / "demo/test.parquet").string()
        << "\n  prompt_format: chat\n  cache_dir: " << (root_ / "cache").string() << "\n"
        << "compute:\n  backend: cpu\n  threads: 1\n"
           // constant: a run stopped by max_steps=2 is the first half of the 4-step one.
           "trainer:\n  learning_rate: 1.0e-2\n  lr_scheduler_type: constant\n"
           "  per_device_train_batch_size: 2\n"
           "  gradient_accumulation_steps: 1\n  max_steps: 4\n  max_length: 64\n"
           "  logging_steps: 1\n  eval_strategy: steps\n  eval_steps: 2\n  save_steps: 2\n"
           "  per_device_eval_batch_size: 2\n  gradient_checkpointing: false\n  bf16: false\n"
           "  report_to: none\n";
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static RunResult train(const std::string& name, const std::string& overrides) {
    return run(std::string(ZT_BINARY) + " train --config " + (root_ / "sft.yaml").string() +
               " exp_name=" + name + " " + overrides);
  }
  static fs::path exp(const std::string& name) { return root_ / "runs" / name; }
  static Json read(const fs::path& p) { return Json::parse(slurp(p)); }
  // A JSON value compared regardless of key order (the log's records are written with their keys
  // sorted, metrics.jsonl in logging order), without the timing fields that differ between runs.
  static nlohmann::json unordered(Json j, bool drop_timing = false) {
    if (drop_timing && j.is_array())
      for (Json& e : j) e = zt_test::without_timing(e);
    return nlohmann::json::parse(j.dump());
  }
  // metrics.jsonl's records as transformers' log_history holds them: "loss" round(loss, 4).
  static Json hf_rounded(Json log) {
    for (Json& e : log)
      if (e.contains("loss")) e["loss"] = zt::train::python_round(e["loss"].get<double>(), 4);
    return log;
  }
  static std::vector<std::string> keys_of(const Json& j) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : j.items()) keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    return keys;
  }
  static Json metrics_through(const fs::path& exp_dir, int64_t step) {
    Json out = Json::array();
    std::ifstream f(exp_dir / "metrics.jsonl");
    std::string line;
    while (std::getline(f, line)) {
      Json e = Json::parse(line);
      if (e["step"].get<int64_t>() <= step) out.push_back(std::move(e));
    }
    return out;
  }

  static fs::path root_;
};
fs::path TrainerStateCli::root_;

// Each checkpoint's trainer_state.json: the golden's keys in save_to_json's order (nothing of
// zerotune's), the run's values, log_history = metrics.jsonl's records through that step, and
// zerotune's own state in zerotune_state.json.
TEST_F(TrainerStateCli, CheckpointTrainerStateIsTransformersWithTheLog) {
  ASSERT_TRUE(exited(train("full", ""), 0));
  const Json golden =
      read(fs::path(ZT_SOURCE_DIR) / "tests/data/train/trainer_state_fields.golden.json");
  const zt::ParamLayout layout(zt::load_model_config(root_ / "model" / "config.json"));
  ASSERT_EQ(zt::train::non_embedding_parameters(layout), 4752);  // 2 × 2368 + the final norm's 16
  for (int64_t step : {2, 4}) {
    SCOPED_TRACE(step);
    const fs::path ck = exp("full") / ("checkpoint-" + std::to_string(step));
    const Json st = read(ck / "trainer_state.json");
    std::vector<std::string> keys;
    for (const auto& [k, v] : st.items()) keys.push_back(k);
    EXPECT_EQ(Json(keys), golden["saved_key_order"]);
    EXPECT_EQ(st["global_step"], step);
    EXPECT_EQ(st["max_steps"], 4);
    EXPECT_EQ(st["num_train_epochs"], 1);  // 16 samples, 2 a step: 8 steps an epoch
    EXPECT_EQ(st["epoch"].get<double>(), step / 8.0);
    EXPECT_EQ(st["logging_steps"], 1);
    EXPECT_EQ(st["eval_steps"], 2);
    EXPECT_EQ(st["save_steps"], 2);
    EXPECT_EQ(st["train_batch_size"], 2);
    EXPECT_TRUE(st["best_metric"].is_null());
    EXPECT_TRUE(st["best_global_step"].is_null());
    EXPECT_TRUE(st["best_model_checkpoint"].is_null());
    EXPECT_EQ(st["stateful_callbacks"]["TrainerControl"]["args"]["should_training_stop"],
              step == 4);
    EXPECT_EQ(st["stateful_callbacks"]["TrainerControl"]["args"]["should_save"], true);
    // log 1, log 2, eval 2 (, log 3, log 4, eval 4): metrics.jsonl's records, the same values
    // but the loss, which transformers rounds to 4 decimals (metrics.jsonl keeps every bit).
    const Json log = metrics_through(exp("full"), step);
    ASSERT_EQ(log.size(), step == 2 ? 3u : 6u);
    EXPECT_EQ(unordered(st["log_history"]), unordered(hf_rounded(log)));
    EXPECT_NE(st["log_history"][0]["loss"], log[0]["loss"]);  // full precision in metrics.jsonl
    EXPECT_EQ(st["log_history"][0]["loss"].get<double>(),
              std::round(log[0]["loss"].get<double>() * 1e4) / 1e4);
    // An eval record has the keys of a TRL 0.25.1 SFTTrainer's (tests/data/train/trl_run): the
    // speed metrics of 4 examples in 2 batches of 2, and the train tokens so far.
    const Json& ev = st["log_history"][2];
    const Json trl =
        read(fs::path(ZT_SOURCE_DIR) /
             "tests/data/train/trl_run/checkpoint-4/trainer_state.json")["log_history"];
    EXPECT_EQ(keys_of(ev), keys_of(trl[2]));
    EXPECT_EQ(ev["eval_num_tokens"].get<double>(), log[1]["num_tokens"].get<double>());
    EXPECT_GT(ev["eval_runtime"].get<double>(), 0.0);
    EXPECT_NEAR(ev["eval_samples_per_second"].get<double>(),
                2 * ev["eval_steps_per_second"].get<double>(), 0.0021);
    // The tokens of the records' num_tokens, and 6 · tokens · parameters of them.
    const Json& last_train = log[step == 2 ? 1 : 4];
    ASSERT_EQ(last_train["step"], step);
    const int64_t tokens = last_train["num_tokens"].get<int64_t>();
    ASSERT_GT(tokens, 0);
    EXPECT_EQ(st["num_input_tokens_seen"], tokens);
    EXPECT_EQ(st["total_flos"].get<double>(), 6.0 * static_cast<double>(tokens) * 4752.0);
    // zerotune's state, beside it.
    const Json zs = read(ck / "zerotune_state.json");
    EXPECT_EQ(zs["global_step"], step);
    EXPECT_EQ(zs["applied_steps"], step);
    EXPECT_EQ(zs["num_tokens_seen"], tokens);
    EXPECT_EQ(zs["run_id"], read(exp("full") / "zerotune_run.json")["run_id"]);
    EXPECT_TRUE(zs["plan"].is_object());
  }
}

// Resumed from a checkpoint in the current layout and from one in the layout before
// zerotune_state.json (zerotune's keys alone in trainer_state.json, no log_history): the same
// final model as the run without a stop, and checkpoint-4's log_history holds the whole run's
// records (the first from the checkpoint's log, the second from metrics.jsonl).
TEST_F(TrainerStateCli, ResumeFromANewAndAnOldCheckpointContinuesTheLog) {
  ASSERT_TRUE(exited(train("ref", ""), 0));
  ASSERT_TRUE(exited(train("new", "trainer.max_steps=2"), 0));
  fs::copy(exp("new"), exp("old"), fs::copy_options::recursive);
  const fs::path old_ck = exp("old") / "checkpoint-2";
  fs::rename(old_ck / "zerotune_state.json", old_ck / "trainer_state.json");
  ASSERT_FALSE(read(old_ck / "trainer_state.json").contains("log_history"));

  const Json want = read(exp("ref") / "checkpoint-4" / "trainer_state.json")["log_history"];
  ASSERT_EQ(want.size(), 6u);
  const std::string ref_model = slurp(exp("ref") / "final" / "model.safetensors");
  for (const std::string name : {"new", "old"}) {
    SCOPED_TRACE(name);
    const RunResult r = train(name, "trainer.resume_from_checkpoint=true");
    ASSERT_TRUE(
        exited(r, 0, "resumed from " + (exp(name) / "checkpoint-2").string() + " at step 2"));
    EXPECT_TRUE(slurp(exp(name) / "final" / "model.safetensors") == ref_model);
    const Json st = read(exp(name) / "checkpoint-4" / "trainer_state.json");
    EXPECT_EQ(unordered(st["log_history"], true), unordered(want, true));
    EXPECT_EQ(st["num_input_tokens_seen"],
              read(exp("ref") / "checkpoint-4" / "trainer_state.json")["num_input_tokens_seen"]);
    EXPECT_EQ(read(exp(name) / "checkpoint-4" / "zerotune_state.json")["run_id"],
              read(exp(name) / "zerotune_run.json")["run_id"]);
  }
}

// A checkpoint resumed from another exp_dir: the new layout brings its log along (there is no
// metrics.jsonl there); the older layout has none, and the exp_dir's metrics.jsonl is not its run's
// — the log starts at the resumed step, with a warning. A checkpoint that lost zerotune_state.json
// is named as damaged; one that lost trainer_state.json (the log only) still resumes.
TEST_F(TrainerStateCli, ResumeElsewhereAndDamagedCheckpoints) {
  ASSERT_TRUE(exited(train("half", "trainer.max_steps=2"), 0));
  const Json want2 = read(exp("half") / "checkpoint-2" / "trainer_state.json")["log_history"];
  ASSERT_EQ(want2.size(), 3u);  // steps 1, 2 and the eval at 2
  const auto copy_ck = [&](const std::string& name) {
    fs::create_directories(root_ / "ck");
    const fs::path ck = root_ / "ck" / name;
    fs::copy(exp("half") / "checkpoint-2", ck, fs::copy_options::recursive);
    return ck;
  };
  // New layout, elsewhere: the checkpoint-4 log starts with the checkpoint's records.
  const fs::path moved = copy_ck("moved");
  ASSERT_TRUE(exited(train("elsewhere", "trainer.resume_from_checkpoint=" + moved.string()), 0));
  const Json got = read(exp("elsewhere") / "checkpoint-4" / "trainer_state.json")["log_history"];
  ASSERT_EQ(got.size(), 6u);
  for (size_t i = 0; i < want2.size(); ++i)
    EXPECT_EQ(unordered(got[i], false), unordered(want2[i], false)) << i;
  // Older layout, elsewhere, into an exp_dir whose metrics.jsonl is another run's.
  const fs::path old_ck = copy_ck("old");
  fs::remove(old_ck / "trainer_state.json");
  fs::rename(old_ck / "zerotune_state.json", old_ck / "trainer_state.json");
  ASSERT_TRUE(exited(train("other", "trainer.max_steps=1"), 0));
  const RunResult o = train("other",
                            "trainer.overwrite_output_dir=false "
                            "trainer.resume_from_checkpoint=" +
                                old_ck.string());
  ASSERT_TRUE(exited(o, 0, "is not of the run whose metrics.jsonl is in"));
  const Json olog = read(exp("other") / "checkpoint-4" / "trainer_state.json")["log_history"];
  ASSERT_FALSE(olog.empty());
  EXPECT_EQ(olog[0]["step"], 3);
  // No zerotune_state.json beside zerotune's ZeRO state: damaged, not foreign.
  const fs::path lost = copy_ck("lost");
  fs::remove(lost / "zerotune_state.json");
  const RunResult l = train("lost", "trainer.resume_from_checkpoint=" + lost.string());
  EXPECT_TRUE(exited(l, 1,
                     (lost / "zerotune_state.json").string() + ": missing, though " +
                         lost.string() + " holds zerotune's zero_state_rank"));
  // No trainer_state.json: resumes (the log is the only thing in it), with a warning.
  const fs::path nolog = copy_ck("nolog");
  fs::remove(nolog / "trainer_state.json");
  const RunResult n = train("nolog", "trainer.resume_from_checkpoint=" + nolog.string());
  EXPECT_TRUE(exited(n, 0, "no trainer_state.json (transformers' TrainerState"));
  EXPECT_EQ(slurp(exp("nolog") / "final" / "model.safetensors"),
            slurp(exp("elsewhere") / "final" / "model.safetensors"));
}

// The end of training as transformers 4.57.1 + TRL 0.25.1 leave it: the last step, off the
// logging_steps grid, is in metrics.jsonl but not in log_history (transformers logs on the grid
// only); output_dir/trainer_state.json is the final state (`trainer.save_state()`), its
// log_history closed by the summary record, whose train_loss is the mean of every step's loss — a
// resumed run's too. best_model_checkpoint is the exp_dir as given joined with checkpoint-N
// (relative for a relative exp_dir), and a resume from another working directory still finds it.
TEST_F(TrainerStateCli, FinalStateHasTheSummaryAndBestCheckpointIsAsGiven) {
  ASSERT_TRUE(exited(train("every", ""), 0));  // logging_steps 1: each step's loss
  const Json every = metrics_through(exp("every"), 4);
  double loss_sum = 0;
  for (const Json& e : every)
    if (e.contains("loss")) loss_sum += e["loss"].get<double>();

  const std::string best = " trainer.metric_for_best_model=eval_loss";
  ASSERT_TRUE(exited(train("offgrid", "trainer.logging_steps=3" + best), 0));
  const Json m = metrics_through(exp("offgrid"), 4);
  ASSERT_EQ(m.size(), 4u);  // eval 2, log 3, log 4 (off the grid), eval 4
  ASSERT_EQ(m[2]["step"], 4);
  ASSERT_TRUE(m[2].contains("loss"));
  const Json ck = read(exp("offgrid") / "checkpoint-4" / "trainer_state.json");
  Json want = hf_rounded(m);
  want.erase(2);
  EXPECT_EQ(unordered(ck["log_history"]), unordered(want));

  const Json fin = read(exp("offgrid") / "final" / "trainer_state.json");
  const Json& hist = fin["log_history"];
  ASSERT_EQ(hist.size(), 4u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(unordered(hist[i]), unordered(ck["log_history"][i]));
  const Json& sum = hist[3];
  EXPECT_EQ(keys_of(sum),
            (std::vector<std::string>{"epoch", "step", "total_flos", "train_loss", "train_runtime",
                                      "train_samples_per_second", "train_steps_per_second"}));
  EXPECT_EQ(sum["step"], 4);
  EXPECT_EQ(sum["epoch"].get<double>(), 0.5);
  EXPECT_EQ(sum["train_loss"].get<double>(), loss_sum / 4);
  EXPECT_EQ(sum["total_flos"], ck["total_flos"]);
  EXPECT_GT(sum["train_runtime"].get<double>(), 0.0);
  // max_steps 4 × a global batch of 2: 8 samples in 4 steps.
  EXPECT_NEAR(sum["train_samples_per_second"].get<double>(),
              2 * sum["train_steps_per_second"].get<double>(), 0.0021);
  for (const char* k : {"global_step", "max_steps", "epoch", "total_flos", "best_metric",
                        "best_global_step", "best_model_checkpoint", "num_input_tokens_seen"})
    EXPECT_EQ(fin[k], ck[k]) << k;
  EXPECT_EQ(fin["stateful_callbacks"], ck["stateful_callbacks"]);  // the last save's
  EXPECT_EQ(fin["best_model_checkpoint"],
            (exp("offgrid") / ("checkpoint-" + fin["best_global_step"].dump())).string());

  // A relative exp_dir, run from root_: best_model_checkpoint is relative, in both state files.
  const std::string rel = "cd " + root_.string() + " && " + std::string(ZT_BINARY) +
                          " train --config sft.yaml exp_dir=runs/rel trainer.max_steps=2" + best;
  ASSERT_TRUE(exited(run(rel), 0));
  const fs::path rel_ck = exp("rel") / "checkpoint-2";
  EXPECT_EQ(read(rel_ck / "trainer_state.json")["best_model_checkpoint"], "runs/rel/checkpoint-2");
  EXPECT_EQ(read(rel_ck / "zerotune_state.json")["best_model_checkpoint"], "runs/rel/checkpoint-2");
  // Resumed from elsewhere with the absolute exp_dir: the best checkpoint is found (no warning
  // that it is gone), and the summary's train_loss covers the resumed steps too.
  const RunResult r =
      run("cd / && " + std::string(ZT_BINARY) + " train --config " + (root_ / "sft.yaml").string() +
          " exp_dir=" + exp("rel").string() + " trainer.resume_from_checkpoint=true" + best);
  ASSERT_TRUE(exited(r, 0, "resumed from"));
  EXPECT_EQ(r.output.find("does not exist anymore"), std::string::npos) << r.output;
  // final/ holds the first run's export and trainer_state.json, both the export's own files: the
  // resumed run's export replaces the directory whole (not "written into it beside them").
  EXPECT_EQ(r.output.find("holds other files"), std::string::npos) << r.output;
  const Json rfin = read(exp("rel") / "final" / "trainer_state.json");
  EXPECT_EQ(rfin["log_history"].back()["train_loss"].get<double>(), loss_sum / 4);
  EXPECT_EQ(rfin["best_global_step"], fin["best_global_step"]);
  EXPECT_EQ(rfin["best_model_checkpoint"],
            (exp("rel") / ("checkpoint-" + rfin["best_global_step"].dump())).string());
}

// transformers rates eval_samples_per_second / eval_steps_per_second by the eval dataset's samples,
// and TRL packs the eval set by eval_packing (null: packing). The demo's 4 eval examples fit one
// 1024-token bin: packed, 1 sample in 1 batch (the two rates equal); unpacked, 4 samples in 2
// batches of 2 (samples/s twice steps/s). zerotune's eval loss is the same either way (each
// example evaluated alone); with the train set unpacked TRL's is not, and a warning says so.
TEST_F(TrainerStateCli, EvalSpeedMetricsCountThePackedEvalSamples) {
  struct Case {
    const char* name;
    const char* overrides;
    double samples_per_step;
  };
  const std::string common = " trainer.max_steps=2 trainer.max_length=1024";
  std::optional<double> eval_loss;
  for (const Case& c :
       {Case{"ev_plain", "", 2.0}, Case{"ev_packed", "trainer.eval_packing=true", 1.0},
        Case{"ev_both", "trainer.packing=true", 1.0},
        Case{"ev_train_only", "trainer.packing=true trainer.eval_packing=false", 2.0}}) {
    const RunResult r = train(c.name, c.overrides + common);
    ASSERT_TRUE(exited(r, 0)) << c.name;
    EXPECT_EQ(
        r.output.find("true with packing false: TRL 0.25.1 then evaluates") != std::string::npos,
        std::string(c.name) == "ev_packed")
        << c.name << ": " << r.output;
    const Json m = metrics_through(exp(c.name), 2);
    const auto ev =
        std::find_if(m.begin(), m.end(), [](const Json& e) { return e.contains("eval_loss"); });
    ASSERT_NE(ev, m.end()) << c.name;
    const double sps = (*ev)["eval_samples_per_second"].get<double>();
    const double bps = (*ev)["eval_steps_per_second"].get<double>();
    ASSERT_GT(bps, 0.0) << c.name;
    EXPECT_NEAR(sps, c.samples_per_step * bps, 0.0021) << c.name;
    if (c.samples_per_step == 1.0) EXPECT_EQ(sps, bps) << c.name;
    if (std::string(c.name) == "ev_plain" || std::string(c.name) == "ev_packed") {
      if (eval_loss) EXPECT_EQ((*ev)["eval_loss"].get<double>(), *eval_loss) << c.name;
      eval_loss = (*ev)["eval_loss"].get<double>();
    }
  }
}

// trainer_state.json's logging_steps / eval_steps / save_steps are TrainerState's
// (HfTrainerState.IntervalStepsAreTransformersComputeSteps has the rule from transformers): a 1.0
// stays a float, an explicit eval_steps 0 under eval_strategy no stays 0, a 2.0 under save_strategy
// steps is int(2.0); a run resumed from it writes the same.
TEST_F(TrainerStateCli, IntervalStepsAreWrittenAsTransformersHoldsThem) {
  const std::string given =
      "trainer.eval_strategy=no trainer.eval_steps=0 trainer.logging_steps=1.0 "
      "trainer.save_steps=2.0 ";
  ASSERT_TRUE(exited(train("steps_a", given + "trainer.max_steps=2"), 0));
  const std::string text = slurp(exp("steps_a") / "checkpoint-2" / "trainer_state.json");
  for (const char* want : {"\"logging_steps\": 1.0,", "\"eval_steps\": 0,", "\"save_steps\": 2,"})
    EXPECT_NE(text.find(want), std::string::npos) << want << " in " << text;
  const RunResult r =
      train("steps_b",
            "trainer.eval_strategy=epoch trainer.logging_steps=3 trainer.max_steps=4 "
            "trainer.resume_from_checkpoint=" +
                (exp("steps_a") / "checkpoint-2").string());
  ASSERT_TRUE(exited(r, 0));
  const std::string resumed = slurp(exp("steps_b") / "checkpoint-4" / "trainer_state.json");
  for (const char* want : {"\"logging_steps\": 1.0,", "\"eval_steps\": 0,", "\"save_steps\": 2,"})
    EXPECT_NE(resumed.find(want), std::string::npos) << want << " in " << resumed;
}

// `samples` (a count) is what a rate `rate` (rounded to 3 decimals) over a runtime `runtime`
// (rounded to 4) measured: samples / true runtime rounds to rate, the true runtime to runtime.
::testing::AssertionResult rated(double samples, double rate, double runtime) {
  const double lo = (rate - 0.0005) * (runtime - 0.00005),
               hi = (rate + 0.0005) * (runtime + 0.00005);
  if (lo <= samples && samples <= hi) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << samples << " samples is not " << rate << "/s over "
                                       << runtime << " s (between " << lo << " and " << hi << ")";
}

// transformers rates the speed metrics by TRL's dataset lengths, the rows zerotune drops included:
// eval_samples_per_second by len(eval_dataset) — TRL's 17 bins of skipped_dropped_bins.jsonl
// packed (eval_packing, dataset_num_proc 3), where zerotune has 7 samples — and
// eval_steps_per_second by ceil(17 / 2) batches; train_samples_per_second by len(train_dataset) ×
// num_train_epochs — its 30 rows unpacked, where zerotune has 17 — over zerotune's own 9 steps.
// The lengths come from TRL's SFTTrainer (skipped_dropped_bins.golden.json).
TEST_F(TrainerStateCli, SpeedMetricsCountTrlsDatasetLengths) {
  const fs::path data = fs::path(ZT_SOURCE_DIR) / "tests/data/sft/skipped_dropped_bins.jsonl";
  const Json g = read(fs::path(ZT_SOURCE_DIR) / "tests/data/sft/skipped_dropped_bins.golden.json");
  const double eval_len = g["trl_lengths"]["packed"]["eval_dataset"].get<double>();
  const double train_len = g["trl_lengths"]["unpacked"]["train_dataset"].get<double>();
  ASSERT_EQ(eval_len, 17.0);
  ASSERT_EQ(train_len, 30.0);
  const RunResult r = train(
      "trl_lengths", "dataset.train.path=" + data.string() + " dataset.eval.path=" + data.string() +
                         " dataset.prompt_format=none trainer.dataset_num_proc=3 "
                         "trainer.eval_packing=true trainer.max_steps=-1 "
                         "trainer.num_train_epochs=1 trainer.save_strategy=no");
  ASSERT_TRUE(exited(r, 0, "samples: 7 (TRL 0.25.1's dataset length: 17)"));
  EXPECT_NE(r.output.find("samples: 17 (TRL 0.25.1's dataset length: 30)"), std::string::npos)
      << r.output;
  const Json m = metrics_through(exp("trl_lengths"), 9);
  int evals = 0;
  for (const Json& e : m) {
    if (!e.contains("eval_loss")) continue;
    ++evals;
    const double rt = e["eval_runtime"].get<double>();
    EXPECT_TRUE(rated(eval_len, e["eval_samples_per_second"].get<double>(), rt)) << e.dump();
    EXPECT_FALSE(rated(7.0, e["eval_samples_per_second"].get<double>(), rt)) << e.dump();
    EXPECT_TRUE(rated(9.0, e["eval_steps_per_second"].get<double>(), rt)) << e.dump();
  }
  EXPECT_EQ(evals, 4);  // steps 2, 4, 6, 8
  const Json sum = read(exp("trl_lengths") / "final" / "trainer_state.json")["log_history"].back();
  ASSERT_EQ(sum["step"], 9);
  const double rt = sum["train_runtime"].get<double>();
  EXPECT_TRUE(rated(train_len * 1.0, sum["train_samples_per_second"].get<double>(), rt))
      << sum.dump();
  EXPECT_FALSE(rated(17.0, sum["train_samples_per_second"].get<double>(), rt)) << sum.dump();
  EXPECT_TRUE(rated(9.0, sum["train_steps_per_second"].get<double>(), rt)) << sum.dump();
}

// The end-of-train record is logged as transformers' `self.log(metrics)` logs it: printed as the
// console's dict (without total_flos, as ProgressCallback.on_log drops it) and written to
// TensorBoard under train/ tags; metrics.jsonl keeps its per-step records only.
TEST_F(TrainerStateCli, SummaryIsPrintedAndSentToTensorBoard) {
  const RunResult r = train("summary", "trainer.max_steps=2 trainer.report_to=tensorboard");
  ASSERT_TRUE(exited(r, 0)) << r.output;
  const size_t at = r.output.find("{'train_runtime': '");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
  for (const char* k : {"'train_samples_per_second': '", "'train_steps_per_second': '",
                        "'train_loss': '", "'epoch': '"})
    EXPECT_NE(line.find(k), std::string::npos) << k << " in " << line;
  EXPECT_EQ(line.find("total_flos"), std::string::npos) << line;
  std::string events;
  for (const auto& e : fs::recursive_directory_iterator(exp("summary") / "tensorboard"))
    if (e.path().filename().string().starts_with("events.out.tfevents.")) events += slurp(e.path());
  for (const char* tag : {"train/train_loss", "train/train_runtime", "train/total_flos"})
    EXPECT_NE(events.find(tag), std::string::npos) << tag;
  for (const Json& e : metrics_through(exp("summary"), 2))
    EXPECT_FALSE(e.contains("train_runtime")) << e.dump();
}

// A checkpoint whose zerotune_state.json has no train_loss_sum (written before zerotune kept it):
// the summary's train_loss is transformers' after a resume, _total_loss_scalar (this process's
// step losses) / global_step (all the steps); with train_loss_sum it is every step's mean.
TEST_F(TrainerStateCli, ResumeWithoutTrainLossSumGivesTransformersTrainLoss) {
  ASSERT_TRUE(exited(train("tls", "trainer.max_steps=2"), 0));
  const fs::path zs = exp("tls") / "checkpoint-2" / "zerotune_state.json";
  Json st = read(zs);
  ASSERT_TRUE(st.contains("train_loss_sum"));
  st.erase("train_loss_sum");
  std::ofstream(zs) << st.dump();
  ASSERT_TRUE(exited(train("tls", "trainer.resume_from_checkpoint=true"), 0));
  double all = 0, resumed = 0;
  int n = 0;
  for (const Json& e : metrics_through(exp("tls"), 4)) {
    if (!e.contains("loss")) continue;
    ++n;
    all += e["loss"].get<double>();
    if (e["step"].get<int64_t>() > 2) resumed += e["loss"].get<double>();
  }
  ASSERT_EQ(n, 4);  // logging_steps 1: steps 1 and 2 before the resume, 3 and 4 after
  const Json fin = read(exp("tls") / "final" / "trainer_state.json");
  const Json& sum = fin["log_history"].back();
  EXPECT_DOUBLE_EQ(sum["train_loss"].get<double>(), resumed / 4);
  EXPECT_NE(sum["train_loss"].get<double>(), all / 4);
}

}  // namespace
