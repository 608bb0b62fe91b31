// End-to-end properties of `zerotune train` (issue: Trainer and ZeRO engine) through the real
// binary: ZeRO stage / offload invariance (bitwise), world-size launch, resume equality, eval
// invariance, and the config errors a user sees. Tiny model and data so each run takes seconds.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/zt_dead_pid.h"
#include "io/json.h"
#include "train_cli_util.h"

namespace fs = std::filesystem;

namespace {

using zt::testing::dead_pid;
using zt_test::run;
using zt_test::RunResult;
using zt_test::slurp;
using zt_test::train_events;

class TrainCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("zt_train_cli_" + std::to_string(getpid()));
    const std::string error = zt_test::write_tiny_job(root_);
    ASSERT_TRUE(error.empty()) << error;
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  // Runs `train` (with `ranks` > 1 through `zerotune launch`) into runs/<name>.
  RunResult train(const std::string& name, const std::string& overrides, int ranks = 1) {
    std::string cmd = std::string(ZT_BINARY);
    if (ranks > 1) cmd += " launch --num_processes " + std::to_string(ranks);
    cmd +=
        " train --config " + (root_ / "sft.yaml").string() + " exp_name=" + name + " " + overrides;
    return run(cmd);
  }
  static fs::path exp(const std::string& name) { return root_ / "runs" / name; }
  // The learning_rate of each train record of run `name` (metrics.jsonl), in order.
  static std::vector<double> learning_rates(const std::string& name) {
    std::vector<double> lrs;
    for (const auto& e : train_events(exp(name)))
      if (e.contains("learning_rate")) lrs.push_back(e["learning_rate"].get<double>());
    return lrs;
  }
  // What run `name` did after step `after`: the steps it logged a train record at and evaluated
  // at (metrics.jsonl), and its checkpoint directories (sorted by name).
  struct LoopSteps {
    std::vector<int64_t> logged, evaluated;
    std::vector<std::string> checkpoints;
  };
  static LoopSteps loop_steps(const std::string& name, int64_t after = 0) {
    LoopSteps out;
    for (const zt::Json& e : train_events(exp(name))) {
      if (e["step"].get<int64_t>() <= after) continue;
      if (e.contains("loss")) out.logged.push_back(e["step"].get<int64_t>());
      if (e.contains("eval_loss")) out.evaluated.push_back(e["step"].get<int64_t>());
    }
    for (const auto& e : fs::directory_iterator(exp(name)))
      if (e.path().filename().string().starts_with("checkpoint-"))
        out.checkpoints.push_back(e.path().filename().string());
    std::sort(out.checkpoints.begin(), out.checkpoints.end());
    return out;
  }

  static fs::path root_;
};
fs::path TrainCli::root_;

// A run killed (SIGKILL) while it wrote a file of exp_dir atomically, or while it wrote the token
// cache, leaves their temporary files: the next run removes those whose process is gone, as it
// removes a killed run's staging directories, and keeps a running process's (this test's: a
// concurrent writer) and every name that is not zerotune's temporary name.
TEST_F(TrainCli, TempFilesOfAKilledRunAreRemovedAtTheNextStart) {
  const std::string gone = std::to_string(dead_pid());
  const std::string live = std::to_string(::getpid());
  const fs::path dir = exp("killed"), cache = root_ / "cache_killed";
  fs::create_directories(dir);
  fs::create_directories(cache);
  const std::string key = "-0123456789abcdef0123456789abcdef.ztc";
  const std::vector<fs::path> stale = {dir / ("args.yaml.tmp." + gone + ".0123456789abcdef"),
                                       dir / ("metrics.jsonl.tmp." + gone + ".00000000000000ff"),
                                       cache / (".train" + key + ".tmp." + gone + ".0badcafe")};
  const std::vector<fs::path> kept = {dir / ("args.yaml.tmp." + live + ".0123456789abcdef"),
                                      dir / ("notes.tmp." + gone + ".txt"),
                                      cache / (".train" + key + ".tmp." + live + ".0badcafe"),
                                      cache / ("train" + key + ".tmp." + gone + ".0badcafe"),
                                      // another program's atomic write beside the logs
                                      dir / ("plot.png.tmp." + gone + ".0123456789abcdef"),
                                      // no build lock to take: maybe another host's builder
                                      cache / (".eval" + key + ".tmp." + gone + ".0badcafe")};
  // The killed build's lock file, which every build creates before its temporary file.
  std::ofstream(cache / ("train" + key + ".lock")) << "";
  for (const auto& p : stale) std::ofstream(p) << "partial";
  for (const auto& p : kept) std::ofstream(p) << "x";
  const RunResult r = train("killed",
                            "trainer.max_steps=1 trainer.eval_strategy=no "
                            "dataset.cache_dir=" +
                                cache.string());
  ASSERT_EQ(r.status, 0) << r.output;
  for (const auto& p : stale) {
    EXPECT_FALSE(fs::exists(p)) << p;
    const bool said =
        r.output.find("removed " + p.string() + ", left by an interrupted tokenisation") !=
            std::string::npos ||
        r.output.find("cleaned " + p.string() + " left by an interrupted run") != std::string::npos;
    EXPECT_TRUE(said) << p << "\n" << r.output;
  }
  for (const auto& p : kept) EXPECT_TRUE(fs::exists(p)) << p;
}

// The token cache's line says how the cache came about in this run: built (by which rank, under
// a launch: one builds while the other waits for it and maps its file), or reused where it
// existed before the run started.
TEST_F(TrainCli, TokenCacheLineSaysWhichRankBuiltIt) {
  const std::string cache = "dataset.cache_dir=" + (root_ / "cache_ranks").string();
  const std::string quick = " trainer.max_steps=1 trainer.eval_strategy=no ";
  const auto cache_word = [](const std::string& out) {
    const size_t at = out.find("cache: ");
    if (at == std::string::npos) return std::string("no cache line");
    const size_t open = out.find(" (", at), comma = out.find(", ", open);
    return out.substr(open + 2, comma - open - 2);
  };
  RunResult r = train("cache2a", cache + quick, 2);
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string first = cache_word(r.output);
  EXPECT_TRUE(first == "built by rank 0" || first == "built by rank 1") << r.output;
  EXPECT_EQ(r.output.find("reused"), std::string::npos) << r.output;
  r = train("cache2b", cache + quick, 2);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(cache_word(r.output), "reused") << r.output;
  // One process: built, then reused.
  const std::string one = "dataset.cache_dir=" + (root_ / "cache_one").string();
  r = train("cache1a", one + quick);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(cache_word(r.output), "built") << r.output;
  r = train("cache1b", one + quick);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(cache_word(r.output), "reused") << r.output;
}

TEST_F(TrainCli, StagesAndOffloadAreBitwiseIdentical) {
  for (std::string stage : {"0", "1", "2", "3"})
    for (std::string off : {"false", "true"}) {
      if (stage != "0" && stage != "3" && off == "true") continue;
      std::string name = "s" + stage + "o" + off;
      auto r = train(name, "compute.zero_stage=" + stage + " compute.offload_optimizer=" + off);
      ASSERT_EQ(r.status, 0) << name << "\n" << r.output;
    }
  auto ref = train_events(exp("s0ofalse"));
  ASSERT_EQ(ref.size(), 6u);  // 4 log events + 2 evals
  EXPECT_TRUE(ref[0].contains("loss"));
  EXPECT_TRUE(ref[2].contains("eval_loss"));  // log 1, log 2, eval 2, log 3, log 4, eval 4
  std::string ref_model = slurp(exp("s0ofalse") / "final" / "model.safetensors");
  ASSERT_GT(ref_model.size(), 1000u);
  for (std::string name : {"s0otrue", "s1ofalse", "s2ofalse", "s3ofalse", "s3otrue"}) {
    EXPECT_EQ(train_events(exp(name)), ref) << name;
    EXPECT_TRUE(slurp(exp(name) / "final" / "model.safetensors") == ref_model) << name;
  }
}

TEST_F(TrainCli, TwoRanksAnyStageSameBitsAndCloseToOneRank) {
  auto a = train("w2s1", "compute.zero_stage=1", 2);
  ASSERT_EQ(a.status, 0) << a.output;
  auto b = train("w2s3", "compute.zero_stage=3 compute.offload_optimizer=true", 2);
  ASSERT_EQ(b.status, 0) << b.output;
  auto ea = train_events(exp("w2s1")), eb = train_events(exp("w2s3"));
  ASSERT_EQ(ea.size(), 6u);
  EXPECT_EQ(ea, eb);
  EXPECT_TRUE(slurp(exp("w2s1") / "final" / "model.safetensors") ==
              slurp(exp("w2s3") / "final" / "model.safetensors"));
  // One rank with twice the accumulation sees the same samples per step: equal up to rounding.
  auto c = train("w1ref", "compute.zero_stage=2", 1);
  ASSERT_EQ(c.status, 0) << c.output;
  auto ec = train_events(exp("w1ref"));
  ASSERT_EQ(ec.size(), ea.size());
  for (size_t i = 0; i < ec.size(); ++i) {
    const char* key = ec[i].contains("loss") ? "loss" : "eval_loss";
    double x = ec[i][key].get<double>(), y = ea[i][key].get<double>();
    EXPECT_NEAR(x, y, 1e-5 * std::abs(x)) << "event " << i;
  }
}

TEST_F(TrainCli, ResumeContinuesBitwise) {
  auto full = train("full", "compute.zero_stage=2");
  ASSERT_EQ(full.status, 0) << full.output;
  ASSERT_TRUE(fs::exists(exp("full") / "checkpoint-2" / "trainer_state.json"));
  ASSERT_TRUE(fs::exists(exp("full") / "checkpoint-4" / "model.safetensors"));
  // A second run that stops at step 2, then resumes from its checkpoint with another stage.
  auto first = train("resumed", "compute.zero_stage=3 trainer.max_steps=2");
  ASSERT_EQ(first.status, 0) << first.output;
  // The checkpoint records the token pipeline it was prepared with; the same one resumes silently.
  EXPECT_EQ(zt::Json::parse(
                slurp(exp("resumed") / "checkpoint-2" / "zerotune_state.json"))["data_pipeline"],
            "zerotune-sft-data-10");
  auto second = train("resumed", "compute.zero_stage=1 trainer.resume_from_checkpoint=true");
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_NE(second.output.find("resumed from"), std::string::npos) << second.output;
  EXPECT_EQ(second.output.find("token pipeline"), std::string::npos) << second.output;
  auto ef = train_events(exp("full")), er = train_events(exp("resumed"));
  ASSERT_EQ(ef.size(), er.size());
  for (size_t i = 0; i < ef.size(); ++i) {
    zt::Json a = ef[i], b = er[i];
    EXPECT_EQ(a, b) << "event " << i;
  }
  EXPECT_TRUE(slurp(exp("full") / "final" / "model.safetensors") ==
              slurp(exp("resumed") / "final" / "model.safetensors"));
}

// A run checkpointed on 2 ranks resumes on 1, and one checkpointed on 1 on 2: the global batch
// (compute.global_batch_size 8) is the same, so gradient_accumulation_steps follows the world size
// and every step holds the same samples; the ZeRO state is re-sharded. The steps before the
// checkpoint are the first run's, bit for bit; the later ones agree with an uninterrupted run on
// either world size to rounding.
TEST_F(TrainCli, ResumeOnAnotherWorldSize) {
  auto w2 = train("rw2full", "compute.zero_stage=1", 2);
  ASSERT_EQ(w2.status, 0) << w2.output;
  auto w1 = train("rw1full", "compute.zero_stage=2");
  ASSERT_EQ(w1.status, 0) << w1.output;
  struct Case {
    std::string name;
    int first_ranks, then_ranks;
    std::string change;
  };
  for (const Case& c :
       {Case{"rw2to1", 2, 1, "2 × 2 × 2 = 8 in the checkpoint, 2 × 1 × 4 = 8 now"},
        Case{"rw1to2", 1, 2, "2 × 1 × 4 = 8 in the checkpoint, 2 × 2 × 2 = 8 now"}}) {
    SCOPED_TRACE(c.name);
    auto a = train(c.name, "compute.zero_stage=1 trainer.max_steps=2", c.first_ranks);
    ASSERT_EQ(a.status, 0) << a.output;
    auto b =
        train(c.name, "compute.zero_stage=3 trainer.resume_from_checkpoint=true", c.then_ranks);
    ASSERT_EQ(b.status, 0) << b.output;
    EXPECT_NE(b.output.find("resumed from"), std::string::npos) << b.output;
    EXPECT_NE(b.output.find(c.change), std::string::npos) << b.output;
    EXPECT_NE(b.output.find("re-sharded"), std::string::npos) << b.output;
    const auto before = train_events(exp(c.first_ranks == 2 ? "rw2full" : "rw1full"));
    const auto after = train_events(exp(c.then_ranks == 2 ? "rw2full" : "rw1full"));
    const auto got = train_events(exp(c.name));
    ASSERT_EQ(got.size(), before.size());
    ASSERT_EQ(got.size(), 6u);  // log 1, log 2, eval 2, log 3, log 4, eval 4
    for (size_t i = 0; i < got.size(); ++i) {
      const char* key = got[i].contains("loss") ? "loss" : "eval_loss";
      ASSERT_TRUE(got[i].contains(key)) << got[i].dump();
      const double x = got[i][key].get<double>();
      if (got[i]["step"].get<int64_t>() <= 2) {
        EXPECT_EQ(got[i], before[i]) << "event " << i;
      } else {
        EXPECT_NE(x, 0.0);
        for (const auto* ref : {&before, &after})
          EXPECT_NEAR(x, (*ref)[i][key].get<double>(), 1e-5 * std::abs(x)) << "event " << i;
      }
    }
  }
  // A 2-rank checkpoint with a truncated rank file, resumed on 1 rank: refused naming the file, and
  // the "re-sharded" note (logged once the state has loaded) is not printed.
  {
    auto bad = train("rwbad", "compute.zero_stage=1 trainer.max_steps=2", 2);
    ASSERT_EQ(bad.status, 0) << bad.output;
    const fs::path f = exp("rwbad") / "checkpoint-2" / "zero_state_rank00001.bin";
    ASSERT_TRUE(fs::exists(f));
    fs::resize_file(f, 100);
    auto r = train("rwbad", "trainer.resume_from_checkpoint=true", 1);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("zero_state_rank00001.bin"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("re-sharded"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("resumed from"), std::string::npos) << r.output;
  }
  // Another global batch (from the 1-rank checkpoint-4 the resumed run wrote): refused, naming
  // both and the accumulation that keeps it.
  auto r = train("rw2to1", "trainer.resume_from_checkpoint=true compute.global_batch_size=4", 1);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("was 2 × 1 × 4 = 8 in the checkpoint and is 2 × 1 × 2 = 4 now; a run "
                          "resumes with another world size, micro-batch or accumulation only when "
                          "the global batch stays the same, so that every step holds the same "
                          "samples (gradient_accumulation_steps: 4 gives it here)"),
            std::string::npos)
      << r.output;
}

// The evaluations of a run: step → the value of `metric`, in step order.
std::vector<std::pair<int64_t, double>> evals_of(const fs::path& exp, const std::string& metric) {
  std::vector<std::pair<int64_t, double>> out;
  for (const zt::Json& e : train_events(exp))
    if (e.contains(metric)) out.emplace_back(e["step"].get<int64_t>(), e[metric].get<double>());
  return out;
}

// The step of the first strictly best value (transformers' np.greater / np.less from ±inf).
int64_t best_step(const std::vector<std::pair<int64_t, double>>& evals, bool greater) {
  int64_t step = 0;
  double best = greater ? -INFINITY : INFINITY;
  for (const auto& [s, v] : evals)
    if (greater ? v > best : v < best) best = v, step = s;
  return step;
}

// load_best_model_at_end: the final model is the best evaluation's checkpoint, byte for byte, for
// a metric where lower is better and (greater_is_better: true) where higher is; the best is
// recorded in each checkpoint's trainer_state.json; a run resumed half-way picks the same one; with
// save_total_limit 1 only the best checkpoint is left.
TEST_F(TrainCli, LoadBestModelAtEndExportsTheBestCheckpoint) {
  int64_t steps[2] = {0, 0};
  for (bool greater : {false, true}) {
    const std::string name = greater ? "besthi" : "bestlo";
    const std::string keys = std::string("trainer.load_best_model_at_end=true ") +
                             "trainer.greater_is_better=" + (greater ? "true" : "false");
    auto r = train(name, keys);
    ASSERT_EQ(r.status, 0) << r.output;
    const auto evals = evals_of(exp(name), "eval_loss");
    ASSERT_EQ(evals.size(), 2u);  // steps 2 and 4
    ASSERT_NE(evals[0].second, evals[1].second);
    const int64_t best = best_step(evals, greater);
    steps[greater] = best;
    const fs::path ck = exp(name) / ("checkpoint-" + std::to_string(best));
    EXPECT_NE(r.output.find("loading the best model from " + ck.string() + " (eval_loss "),
              std::string::npos)
        << r.output;
    EXPECT_TRUE(slurp(exp(name) / "final" / "model.safetensors") ==
                slurp(ck / "model.safetensors"));
    const zt::Json st = zt::Json::parse(slurp(exp(name) / "checkpoint-4" / "trainer_state.json"));
    EXPECT_EQ(st["best_global_step"], best) << st.dump();
    EXPECT_EQ(st["best_model_checkpoint"], ck.string()) << st.dump();
    EXPECT_EQ(st["best_metric"].get<double>(),
              best == evals[0].first ? evals[0].second : evals[1].second);
  }
  ASSERT_NE(steps[0], steps[1]);  // one of the two runs exports a model that is not the last
  // Stopped at step 2 and resumed, the direction whose best is step 2 (the resumed run must read
  // it from the checkpoint's zerotune_state.json, or it would take step 4's): the same final model.
  const bool hi = steps[1] == 2;
  const std::string dir =
      std::string("trainer.load_best_model_at_end=true trainer.greater_is_better=") +
      (hi ? "true" : "false");
  auto a = train("bestres", dir + " trainer.max_steps=2");
  ASSERT_EQ(a.status, 0) << a.output;
  auto b = train("bestres", dir + " trainer.resume_from_checkpoint=true");
  ASSERT_EQ(b.status, 0) << b.output;
  EXPECT_TRUE(slurp(exp("bestres") / "final" / "model.safetensors") ==
              slurp(exp(hi ? "besthi" : "bestlo") / "final" / "model.safetensors"));
  EXPECT_TRUE(slurp(exp("bestres") / "final" / "model.safetensors") ==
              slurp(exp("bestres") / "checkpoint-2" / "model.safetensors"));
  // save_total_limit 1: during the run the best and the newest stay; after it only the best.
  auto c = train("bestone",
                 "trainer.load_best_model_at_end=true trainer.greater_is_better=true "
                 "trainer.save_total_limit=1");
  ASSERT_EQ(c.status, 0) << c.output;
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(exp("bestone")))
    if (e.path().filename().string().starts_with("checkpoint-"))
      left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"checkpoint-" + std::to_string(steps[1])});
}

// save_strategy: best saves exactly at the evaluations that improve metric_for_best_model (here the
// token accuracy, higher is better by its name), and eval_delay holds the evaluations back until
// its step.
TEST_F(TrainCli, SaveStrategyBestAndEvalDelay) {
  auto r = train("savebest",
                 "trainer.save_strategy=best "
                 "trainer.metric_for_best_model=mean_token_accuracy trainer.eval_steps=1");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto evals = evals_of(exp("savebest"), "eval_mean_token_accuracy");
  ASSERT_EQ(evals.size(), 4u);
  std::vector<std::string> want, got;
  double best = -INFINITY;
  for (const auto& [step, v] : evals)
    if (v > best) best = v, want.push_back("checkpoint-" + std::to_string(step));
  for (const auto& e : fs::directory_iterator(exp("savebest")))
    if (e.path().filename().string().starts_with("checkpoint-"))
      got.push_back(e.path().filename().string());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
  EXPECT_FALSE(want.empty());
  auto d = train("delay", "trainer.eval_steps=1 trainer.eval_delay=3");
  ASSERT_EQ(d.status, 0) << d.output;
  const auto delayed = evals_of(exp("delay"), "eval_loss");
  ASSERT_EQ(delayed.size(), 2u);
  EXPECT_EQ(delayed[0].first, 3);
  EXPECT_EQ(delayed[1].first, 4);
}

// eval_on_start: one evaluation before the first step, logged at step 0 (epoch 0), that changes
// nothing else; a resumed run evaluates its checkpoint's weights first, bit for bit the first run's
// evaluation at that step. Without an eval set it is refused.
TEST_F(TrainCli, EvalOnStart) {
  auto plain = train("evs_plain", "");
  ASSERT_EQ(plain.status, 0) << plain.output;
  auto r = train("evs", "trainer.eval_on_start=true");
  ASSERT_EQ(r.status, 0) << r.output;
  auto ev = train_events(exp("evs")), ref = train_events(exp("evs_plain"));
  ASSERT_EQ(ev.size(), ref.size() + 1);
  EXPECT_EQ(ev[0]["step"], 0);
  EXPECT_EQ(ev[0]["epoch"], 0.0);
  EXPECT_TRUE(ev[0].contains("eval_loss"));
  EXPECT_GT(ev[0]["eval_loss"].get<double>(), 0.0);
  EXPECT_EQ(std::vector<zt::Json>(ev.begin() + 1, ev.end()), ref);
  auto a = train("evs_res", "trainer.max_steps=2");
  ASSERT_EQ(a.status, 0) << a.output;
  auto b = train("evs_res", "trainer.eval_on_start=true trainer.resume_from_checkpoint=true");
  ASSERT_EQ(b.status, 0) << b.output;
  std::vector<zt::Json> at2;
  for (const zt::Json& e : train_events(exp("evs_res")))
    if (e.contains("eval_loss") && e["step"] == 2) at2.push_back(e);
  ASSERT_EQ(at2.size(), 2u);
  EXPECT_EQ(at2[0]["eval_loss"], at2[1]["eval_loss"]);
  auto c =
      train("evs_none", "trainer.eval_on_start=true trainer.eval_strategy=no dataset.eval=null");
  EXPECT_EQ(c.status, 1) << c.output;
  EXPECT_NE(c.output.find("sft.yaml: trainer.eval_on_start (given on the command line) is true "
                          "but dataset.eval.path is not set\n"),
            std::string::npos)
      << c.output;
}

// The best checkpoint is found again under exp_dir after the run's directory moved (and so
// protected from rotation and loaded); one removed before the end leaves the last model with a
// warning; an evaluation a stop signal abandoned (eval_pending) runs first on resume; hand-edited
// best keys that contradict the checkpoint are refused. The best is pinned to step 2 by editing
// checkpoint-4's state (an eval_loss of -1, which no later evaluation beats).
TEST_F(TrainCli, BestModelAcrossMovesRemovalsAndInterruptions) {
  const std::string keys = "trainer.load_best_model_at_end=true trainer.save_total_limit=1 ";
  auto full = train("bmv_all", "trainer.load_best_model_at_end=true");
  ASSERT_EQ(full.status, 0) << full.output;
  zt::Json st = zt::Json::parse(slurp(exp("bmv_all") / "checkpoint-4" / "zerotune_state.json"));
  st["best_global_step"] = 2;
  st["best_metric"] = -1.0;
  st["best_model_checkpoint"] = (exp("bmv_all") / "checkpoint-2").string();
  std::ofstream(exp("bmv_all") / "checkpoint-4" / "zerotune_state.json") << st.dump(2);
  fs::rename(exp("bmv_all"), exp("bmv_moved"));
  auto b = train("bmv_moved", keys + "trainer.max_steps=6 trainer.resume_from_checkpoint=true");
  ASSERT_EQ(b.status, 0) << b.output;
  const fs::path best = exp("bmv_moved") / "checkpoint-2";
  EXPECT_NE(b.output.find("loading the best model from " + best.string()), std::string::npos)
      << b.output;
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(exp("bmv_moved")))
    if (e.path().filename().string().starts_with("checkpoint-"))
      left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"checkpoint-2"});
  EXPECT_TRUE(slurp(exp("bmv_moved") / "final" / "model.safetensors") ==
              slurp(best / "model.safetensors"));
  // The same pinned state, the best checkpoint's ZeRO state removed: a warning, the last model.
  auto c = train("bmv_gone", "trainer.load_best_model_at_end=true");
  ASSERT_EQ(c.status, 0) << c.output;
  const fs::path state = exp("bmv_gone") / "checkpoint-4" / "zerotune_state.json";
  zt::Json g = st;
  g["run_id"] = zt::Json::parse(slurp(state))["run_id"];  // resume_from_checkpoint: true finds it
  std::ofstream(state) << g.dump(2);
  fs::remove(exp("bmv_gone") / "checkpoint-2" / "zero_state_rank00000.bin");
  auto d = train("bmv_gone",
                 "trainer.load_best_model_at_end=true trainer.max_steps=6 "
                 "trainer.resume_from_checkpoint=true");
  ASSERT_EQ(d.status, 0) << d.output;
  EXPECT_NE(d.output.find("load_best_model_at_end: could not locate the best model at " +
                          (exp("bmv_gone") / "checkpoint-2").string()),
            std::string::npos)
      << d.output;
  EXPECT_TRUE(slurp(exp("bmv_gone") / "final" / "model.safetensors") ==
              slurp(exp("bmv_gone") / "checkpoint-6" / "model.safetensors"));
  // eval_pending: the resumed run evaluates step 4's weights first (twice logged at step 4).
  zt::Json p = g;
  p["eval_pending"] = true;
  std::ofstream(state) << p.dump(2);
  auto e = train("bmv_pend", "trainer.max_steps=6 trainer.resume_from_checkpoint=" +
                                 (exp("bmv_gone") / "checkpoint-4").string());
  ASSERT_EQ(e.status, 0) << e.output;
  const auto evals = evals_of(exp("bmv_pend"), "eval_loss");
  ASSERT_FALSE(evals.empty());
  EXPECT_EQ(evals[0].first, 4);
  std::vector<std::pair<int64_t, double>> at4;
  for (const auto& ev : evals_of(exp("bmv_gone"), "eval_loss"))
    if (ev.first == 4) at4.push_back(ev);
  ASSERT_FALSE(at4.empty());
  EXPECT_EQ(evals[0].second, at4[0].second);
  // Contradicting keys: a best step after the checkpoint's, a best step without a metric.
  for (const auto& [key, value, message] :
       std::vector<std::tuple<std::string, zt::Json, std::string>>{
           {"best_global_step", 8, "'best_global_step' must be an integer in [1, 4]"},
           {"best_metric", nullptr,
            "'best_metric' must be a number when best_global_step is set"}}) {
    zt::Json bad = g;
    bad[key] = value;
    std::ofstream(state) << bad.dump(2);
    auto r =
        train("bmv_bad", "trainer.load_best_model_at_end=true trainer.resume_from_checkpoint=" +
                             state.parent_path().string());
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << key << "\n" << r.output;
  }
}

// lr_scheduler_kwargs are checked against lr_scheduler_type before any rank starts: an argument
// the schedule does not take, or a required one missing, is exit 1 naming the file and key.
TEST_F(TrainCli, LrSchedulerKwargsAreCheckedAgainstTheSchedule) {
  const std::string sft = (root_ / "sft.yaml").string();
  auto r = train("kwbad",
                 "trainer.lr_scheduler_type=cosine_with_min_lr "
                 "'trainer.lr_scheduler_kwargs={min_lr_rat: 0.1}'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("zerotune: error: " + sft +
                          ": trainer.lr_scheduler_kwargs (lr_scheduler_type cosine_with_min_lr): "
                          "'min_lr_rat' is not an argument of the cosine_with_min_lr schedule "
                          "(transformers raises TypeError on it); it takes: num_cycles, min_lr, "
                          "min_lr_rate (given on the command line)\n"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(exp("kwbad") / "args.yaml"));
  // constant / constant_with_warmup / inverse_sqrt: transformers passes them no kwargs; a note.
  r = train("kwconst",
            "trainer.lr_scheduler_type=constant 'trainer.lr_scheduler_kwargs={min_lr_rate: 0.1}'");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("trainer.lr_scheduler_kwargs {\"min_lr_rate\":0.1} (given on the "
                          "command line) has no effect: transformers builds the constant schedule "
                          "without them"),
            std::string::npos)
      << r.output;
  // A schedule giving a step a negative learning rate (polynomial's lr_end below 0, which
  // transformers takes and torch trains on with) is refused before the first step: with max_steps
  // before any rank starts, nothing written; by epochs once the plan knows the total steps (it was
  // AdamW's error at that step, after the earlier steps had trained; attack finding 2).
  for (const std::string steps : {"trainer.max_steps=10", "trainer.max_steps=-1"}) {
    const std::string name = steps.back() == '0' ? "kwneg" : "kwnegepochs";
    r = train(name, steps +
                        " trainer.lr_scheduler_type=polynomial "
                        "'trainer.lr_scheduler_kwargs={lr_end: -1.0e-6, power: 10}'");
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find(": trainer.lr_scheduler_kwargs {\"lr_end\":-1e-06,\"power\":10} "
                            "(given on the command line): the polynomial schedule gives "
                            "optimizer step "),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("zerotune's AdamW takes a learning rate >= 0 only"), std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("invalid learning rate"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("{'loss': '"), std::string::npos) << r.output;  // no step ran
  }
  EXPECT_FALSE(fs::exists(exp("kwneg") / "args.yaml"));
  r = train("kwmissing", "trainer.lr_scheduler_type=warmup_stable_decay");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(": trainer.lr_scheduler_kwargs (lr_scheduler_type warmup_stable_decay): "
                          "warmup_stable_decay needs num_decay_steps"),
            std::string::npos)
      << r.output;
}

// lr_scheduler_kwargs given in the YAML as a JSON string: parsed as transformers'
// TrainingArguments.__post_init__ parses it (json.loads, then _convert_str_dict: "0.5" is 0.5), so
// the run equals one given the mapping; the plan line names the kwargs, the checkpoint records
// them, and a resume with other kwargs says the schedule now uses those (as transformers' restored
// LambdaLR does). A string that is not JSON is an error naming the file's line and the key.
TEST_F(TrainCli, LrSchedulerKwargsGivenAsAJsonString) {
  const std::string base = slurp(root_ / "sft.yaml");
  ASSERT_TRUE(base.ends_with("  report_to: none\n"));
  const auto lines = static_cast<int>(std::count(base.begin(), base.end(), '\n'));
  const auto config = [&](const std::string& name, const std::string& kwargs) {
    const fs::path p = root_ / (name + ".yaml");
    std::ofstream(p) << base << "  lr_scheduler_type: cosine_with_min_lr\n"
                     << "  lr_scheduler_kwargs: " << kwargs << "\n";
    return p;
  };
  const auto train_with = [&](const fs::path& cfg, const std::string& name,
                              const std::string& overrides) {
    return run(std::string(ZT_BINARY) + " train --config " + cfg.string() + " exp_name=" + name +
               " " + overrides);
  };
  const fs::path text = config("kwtext", R"('{"min_lr_rate": "0.5"}')");
  auto r = train_with(text, "kwtext", "");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("steps in all; lr cosine_with_min_lr 0.01 with 1 warm-up steps and "
                          "lr_scheduler_kwargs {\"min_lr_rate\":0.5}\n"),
            std::string::npos)
      << r.output;
  const zt::Json st =
      zt::Json::parse(slurp(exp("kwtext") / "checkpoint-4" / "zerotune_state.json"));
  EXPECT_EQ(st["lr_schedule"]["lr_scheduler_kwargs"].dump(), R"({"min_lr_rate":0.5})");
  r = train_with(config("kwmap", "{min_lr_rate: 0.5}"), "kwmap", "");
  ASSERT_EQ(r.status, 0) << r.output;
  ASSERT_EQ(learning_rates("kwtext").size(), 4u);
  EXPECT_EQ(learning_rates("kwtext"), learning_rates("kwmap"));
  // 0.01 × (f × 0.5 + 0.5), f the cosine factor after 1 warm-up step of 4: 1, 0.75, 0.25.
  const std::vector<double> lrs = learning_rates("kwtext");
  EXPECT_EQ(lrs[0], 0.0);
  EXPECT_EQ(lrs[1], 0.01);
  EXPECT_NEAR(lrs[2], 0.01 * 0.875, 1e-15);
  EXPECT_NEAR(lrs[3], 0.01 * 0.625, 1e-15);
  // Resumed with min_lr_rate 0.2: noted; the new kwargs shape the rest of the schedule.
  const fs::path ck = exp("kwtext") / "checkpoint-2";
  r = train_with(text, "kwtext2",
                 "'trainer.lr_scheduler_kwargs={min_lr_rate: 0.2}' "
                 "trainer.resume_from_checkpoint=" +
                     ck.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("zerotune: info: " + text.string() +
                          ": trainer.lr_scheduler_kwargs: {\"min_lr_rate\":0.2} differs from the "
                          "{\"min_lr_rate\":0.5} that " +
                          (ck / "zerotune_state.json").string() +
                          " records; the schedule is cosine_with_min_lr with "
                          "{\"min_lr_rate\":0.2} from step 3 on, as transformers' Trainer does "
                          "(the LR scheduler it restores keeps the shape this run's arguments "
                          "give; there the first resumed step still uses the old schedule's "
                          "value) (given on the command line)\n"),
            std::string::npos)
      << r.output;
  // Bad JSON: the file's line, the key, json.loads' complaint.
  r = train_with(config("kwbadjson", R"('{"min_lr_rate": 0.5')"), "kwbadjson", "");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("zerotune: error: " + (root_ / "kwbadjson.yaml").string() + ":" +
                          std::to_string(lines + 2) +
                          ": trainer.lr_scheduler_kwargs: the string starts with '{' but is not "
                          "valid JSON (parse error at line 1, column "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("); transformers' TrainingArguments json.loads such a string "
                          "(JSONDecodeError)\n"),
            std::string::npos)
      << r.output;
}

// '{"num_cycles": "true"}' is {num_cycles: True} after TrainingArguments' _convert_str_dict, and
// cosine_with_restarts computes with True as 1 (Python's bool is an int): the run's learning rates
// are those of num_cycles 1 (LrSchedule.KwargsSchedulesEqualTransformers457 has the schedules'
// bool cases from transformers).
TEST_F(TrainCli, LrSchedulerKwargsBoolIsANumber) {
  const std::string base = slurp(root_ / "sft.yaml");
  const auto run_with = [&](const std::string& name, const std::string& kwargs) {
    const fs::path p = root_ / (name + ".yaml");
    std::ofstream(p) << base << "  lr_scheduler_type: cosine_with_restarts\n"
                     << "  lr_scheduler_kwargs: " << kwargs << "\n";
    return run(std::string(ZT_BINARY) + " train --config " + p.string() + " exp_name=" + name +
               " trainer.warmup_steps=0 trainer.save_strategy=no");
  };
  RunResult r = run_with("kwbool", R"('{"num_cycles": "true"}')");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("lr_scheduler_kwargs {\"num_cycles\":true}\n"), std::string::npos)
      << r.output;
  r = run_with("kwone", "{num_cycles: 1}");
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_with("kwhalf", "{num_cycles: 0.5}");
  ASSERT_EQ(r.status, 0) << r.output;
  ASSERT_EQ(learning_rates("kwbool").size(), 4u);
  EXPECT_EQ(learning_rates("kwbool"), learning_rates("kwone"));
  EXPECT_NE(learning_rates("kwbool"), learning_rates("kwhalf"));
}

// logging_steps / eval_steps / save_steps in (0, 1) are ratios of the run's steps,
// ceil(max_steps × ratio) as transformers' TrainerState.compute_steps: at max_steps 8, 0.25 logs at
// 2, 4, 6, 8, 0.5 evaluates and saves at 4 and 8.
TEST_F(TrainCli, StepsGivenAsRatiosDriveTheLoop) {
  const RunResult r = train("ratio",
                            "trainer.max_steps=8 trainer.logging_steps=0.25 "
                            "trainer.eval_steps=0.5 trainer.save_steps=0.5");
  ASSERT_EQ(r.status, 0) << r.output;
  const LoopSteps did = loop_steps("ratio");
  EXPECT_EQ(did.logged, (std::vector<int64_t>{2, 4, 6, 8}));
  EXPECT_EQ(did.evaluated, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(did.checkpoints, (std::vector<std::string>{"checkpoint-4", "checkpoint-8"}));
  const zt::Json st = zt::Json::parse(slurp(exp("ratio") / "checkpoint-8" / "trainer_state.json"));
  EXPECT_EQ(st["logging_steps"], 2);
  EXPECT_EQ(st["eval_steps"], 4);
  EXPECT_EQ(st["save_steps"], 4);
}

// A resumed run keeps its checkpoint's logging / eval / save steps, as transformers 4.57.1's
// Trainer does (the TrainerState it loads from the checkpoint replaces the one compute_steps
// filled): resumed from checkpoint-4 of a run with ratios 0.25 / 0.5 / 0.5 at max_steps 8 (2, 4,
// 4) with max_steps 12, where the ratios would give 3, 6, 6, it logs at 6, 8, 10, 12, evaluates
// and saves at 8 and 12, records 2, 4, 4 in its own checkpoints, and says so at start-up.
TEST_F(TrainCli, ResumeKeepsTheCheckpointsLoggingEvalAndSaveSteps) {
  const std::string ratios =
      "trainer.logging_steps=0.25 trainer.eval_steps=0.5 trainer.save_steps=0.5 ";
  auto r = train("ratio_a", ratios + "trainer.max_steps=8");
  ASSERT_EQ(r.status, 0) << r.output;
  const fs::path ck = exp("ratio_a") / "checkpoint-4";
  r = train("ratio_b",
            ratios + "trainer.max_steps=12 trainer.resume_from_checkpoint=" + ck.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const LoopSteps did = loop_steps("ratio_b", 4);
  EXPECT_EQ(did.logged, (std::vector<int64_t>{6, 8, 10, 12}));
  EXPECT_EQ(did.evaluated, (std::vector<int64_t>{8, 12}));
  EXPECT_EQ(did.checkpoints, (std::vector<std::string>{"checkpoint-12", "checkpoint-8"}));
  const zt::Json st =
      zt::Json::parse(slurp(exp("ratio_b") / "checkpoint-12" / "trainer_state.json"));
  EXPECT_EQ(st["logging_steps"], 2);
  EXPECT_EQ(st["eval_steps"], 4);
  EXPECT_EQ(st["save_steps"], 4);
  EXPECT_EQ(st["max_steps"], 12);
  const std::string at = (root_ / "sft.yaml").string() + ": trainer.",
                    file = (ck / "trainer_state.json").string(),
                    why =
                        ", as transformers' Trainer does (it loads the checkpoint's TrainerState, "
                        "whose logging_steps, eval_steps and save_steps replace the ones this "
                        "run's arguments give) (given on the command line)\n";
  for (const std::string& note :
       {at + "logging_steps: 0.25 gives 3 of this run's 12 steps, and " + file +
            " records 2; the resumed run logs every 2 step(s)" + why,
        at + "eval_steps: 0.5 gives 6 of this run's 12 steps, and " + file +
            " records 4; the resumed run evaluates every 4 step(s)" + why,
        at + "save_steps: 0.5 gives 6 of this run's 12 steps, and " + file +
            " records 4; the resumed run saves every 4 step(s)" + why})
    EXPECT_NE(r.output.find("zerotune: info: " + note), std::string::npos) << note << r.output;
  // The same total steps give the same counts: no note.
  r = train("ratio_c",
            ratios + "trainer.max_steps=8 trainer.resume_from_checkpoint=" + ck.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("the resumed run logs every"), std::string::npos) << r.output;
}

// What transformers refuses about the best model, and what zerotune refuses on top (a metric its
// evaluation does not log; save_strategy best without evaluations): exit 1 naming the keys.
TEST_F(TrainCli, BestModelSettingsThatCannotWorkAreRefused) {
  const std::string sft = (root_ / "sft.yaml").string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"trainer.load_best_model_at_end=true trainer.save_steps=3",
       "sft.yaml: trainer.load_best_model_at_end (given on the command line) requires the saving "
       "steps to be a round multiple of the evaluation steps, but trainer.save_steps (given on "
       "the command line) 3 is not a round multiple of trainer.eval_steps (" +
           sft + ":30) 2\n"},
      // ratios (below 1) as transformers compares them: not mixed with a count, and dividing
      {"trainer.load_best_model_at_end=true trainer.save_steps=0.5",
       "sft.yaml: trainer.load_best_model_at_end (given on the command line) requires the saving "
       "steps to be a multiple of the evaluation steps, which cannot be guaranteed when "
       "trainer.save_steps (given on the command line) 0.5 and trainer.eval_steps (" +
           sft + ":30) 2 mix a ratio and a number of steps (as transformers refuses it)\n"},
      {"trainer.load_best_model_at_end=true trainer.save_steps=0.5 trainer.eval_steps=0.3",
       "sft.yaml: trainer.load_best_model_at_end (given on the command line) requires the saving "
       "steps to be a multiple of the evaluation steps, but trainer.save_steps (given on the "
       "command line) 0.5 is not a multiple of trainer.eval_steps (given on the command line) "
       "0.3\n"},
      {"trainer.load_best_model_at_end=true trainer.save_strategy=epoch",
       "sft.yaml: trainer.load_best_model_at_end (given on the command line) requires the save "
       "and eval strategy to match (as transformers does), but trainer.eval_strategy (" +
           sft + ":29) is 'steps' and trainer.save_strategy (given on the command line) 'epoch'\n"},
      {"trainer.metric_for_best_model=bleu",
       "sft.yaml: trainer.metric_for_best_model 'bleu' (eval_bleu) is not a metric of zerotune's "
       "evaluation; it logs eval_loss, eval_entropy, eval_mean_token_accuracy (given on the "
       "command line)\n"},
      {"trainer.save_strategy=best",
       "sft.yaml: trainer.save_strategy: best (given on the command line) needs "
       "trainer.metric_for_best_model (the metric whose new best triggers a save)\n"},
      {"trainer.save_strategy=best trainer.metric_for_best_model=loss trainer.eval_strategy=no",
       "sft.yaml: trainer.save_strategy: best (given on the command line) needs evaluations to "
       "find the best model, but trainer.eval_strategy (given on the command line) is 'no'\n"},
  };
  for (const auto& [overrides, message] : cases) {
    auto r = train("bestbad", overrides);
    EXPECT_EQ(r.status, 1) << overrides << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << overrides << "\n" << r.output;
  }
}

// A checkpoint recording an abandoned evaluation (eval_pending) resumed by a run without an eval
// set: the evaluation is skipped with a warning naming the checkpoint, and training goes on (it was
// an "internal error: std::bad_alloc", exit 70, from evaluating a missing eval set).
TEST_F(TrainCli, PendingEvaluationWithoutAnEvalSetIsSkipped) {
  auto r = train("pnoeval", "trainer.max_steps=2");
  ASSERT_EQ(r.status, 0) << r.output;
  const fs::path ck = exp("pnoeval") / "checkpoint-2", state = ck / "zerotune_state.json";
  zt::Json st = zt::Json::parse(slurp(state));
  ASSERT_EQ(st["eval_pending"], false);
  st["eval_pending"] = true;
  std::ofstream(state) << st.dump(2);
  r = train("pnoeval",
            "~dataset.eval trainer.eval_strategy=no trainer.max_steps=4 "
            "trainer.resume_from_checkpoint=true");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resume_from_checkpoint: " + ck.string() +
                          " records an evaluation at step 2 that a stop signal abandoned, but "
                          "dataset.eval is not set in this run: that evaluation is not run"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  std::vector<int64_t> train_steps;
  int evals = 0;
  for (const zt::Json& e : train_events(exp("pnoeval"))) {
    if (e.contains("eval_loss")) ++evals;
    if (e.contains("loss")) train_steps.push_back(e["step"].get<int64_t>());
  }
  EXPECT_EQ(evals, 1);  // the first run's at step 2; none after the resume
  EXPECT_EQ(train_steps, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_TRUE(fs::exists(exp("pnoeval") / "checkpoint-4" / "trainer_state.json"));
}

// A checkpoint whose zerotune_state.json is valid JSON of the wrong shape: exit 1 naming the file
// and the key (it was an "internal error", exit 70, from the JSON library).
TEST_F(TrainCli, ResumeFromAMalformedStateNamesTheKey) {
  auto r = train("state", "trainer.max_steps=2");
  ASSERT_EQ(r.status, 0) << r.output;
  const fs::path ck = exp("state") / "checkpoint-2", state = ck / "zerotune_state.json";
  const zt::Json good = zt::Json::parse(slurp(state));
  const auto resume_with = [&](const std::string& text) {
    std::ofstream(state) << text;
    return train("state2", "trainer.resume_from_checkpoint=" + ck.string());
  };
  r = resume_with("{}");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(state.string() + ": no 'plan' object"), std::string::npos) << r.output;
  r = resume_with("[]");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(state.string() + ": expected a JSON object"), std::string::npos)
      << r.output;
  // Not JSON at all: the parser's reason, without nlohmann's "[json.exception.…]" tag.
  r = resume_with("x");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(state.string() +
                          ": not valid JSON: parse error at line 1, column 1: syntax error while "
                          "parsing value - invalid literal; last read: 'x'\n"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("json.exception"), std::string::npos) << r.output;
  zt::Json bad = good;
  bad["applied_steps"] = "two";
  r = resume_with(bad.dump());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("'applied_steps' must be a non-negative integer, got \"two\""),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
}

// A resume whose config changes weight_decay or an Adam hyperparameter keeps the checkpoint's, as
// transformers' Trainer does (torch's Optimizer.load_state_dict restores the saved param groups'
// betas, eps and weight_decay), with a warning naming the key; it trained with the new values
// without a word. The resumed run is bitwise the unchanged resume, and args.yaml records the values
// used.
TEST_F(TrainCli, ResumeWithOtherAdamWValuesKeepsTheCheckpoints) {
  auto r = train("adamhp", "trainer.max_steps=2 trainer.eval_strategy=no");
  ASSERT_EQ(r.status, 0) << r.output;
  const fs::path ck = exp("adamhp") / "checkpoint-2", state = ck / "zerotune_state.json";
  EXPECT_EQ(zt::Json::parse(slurp(state))["optimizer"],
            zt::Json::parse(R"({"adam_beta1": 0.9, "adam_beta2": 0.999, "adam_epsilon": 1e-8,
                "weight_decay": 0.1})"));
  const std::string resume =
      "trainer.eval_strategy=no trainer.resume_from_checkpoint=" + ck.string();
  r = train("adamhp_same", resume);
  ASSERT_EQ(r.status, 0) << r.output;
  r = train("adamhp_other",
            resume + " trainer.weight_decay=0.5 trainer.adam_beta2=0.9 trainer.adam_epsilon=0.1");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string at = (root_ / "sft.yaml").string() + ": trainer.";
  EXPECT_NE(
      r.output.find("zerotune: warning: " + at + "weight_decay: 0.5 differs from the 0.1 that " +
                    state.string() +
                    " records; the checkpoint's 0.1 is used, as transformers' Trainer does "
                    "(resuming loads the optimizer's state, whose param groups keep their "
                    "betas, eps and weight_decay). To train on with 0.5, start a new run from "
                    "the checkpoint's weights (model.name_or_path=" +
                    ck.string() + ") (given on the command line)\n"),
      std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("warning: " + at + "adam_beta2: 0.9 differs from the 0.999 that "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("warning: " + at + "adam_epsilon: 0.1 differs from the 1e-08 that "),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("adam_beta1:"), std::string::npos) << r.output;
  EXPECT_TRUE(slurp(exp("adamhp_other") / "final" / "model.safetensors") ==
              slurp(exp("adamhp_same") / "final" / "model.safetensors"));
  const std::string yaml = slurp(exp("adamhp_other") / "args.yaml");
  EXPECT_NE(yaml.find("\n  weight_decay: 0.1\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("\n  adam_beta2: 0.999\n"), std::string::npos) << yaml;
  // An older checkpoint (no "optimizer"): the values its args.yaml records, with the warning
  // naming that file; the same model as the unchanged resume.
  zt::Json old = zt::Json::parse(slurp(state));
  old.erase("optimizer");
  std::ofstream(state) << old.dump(2);
  r = train("adamhp_old", resume + " trainer.weight_decay=0.5");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("warning: " + at + "weight_decay: 0.5 differs from the 0.1 that " +
                          (ck / "args.yaml").string() + " records; the checkpoint's 0.1 is used"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(slurp(exp("adamhp_old") / "final" / "model.safetensors") ==
              slurp(exp("adamhp_same") / "final" / "model.safetensors"));
  // … and without an args.yaml that holds them: the config's values, no warning.
  fs::remove(ck / "args.yaml");
  r = train("adamhp_older", resume + " trainer.weight_decay=0.5");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("weight_decay: 0.5 differs"), std::string::npos) << r.output;
  EXPECT_FALSE(slurp(exp("adamhp_older") / "final" / "model.safetensors") ==
               slurp(exp("adamhp_same") / "final" / "model.safetensors"));
}

// A resume whose config changes the LR schedule does what transformers' Trainer does (it restores
// the LR scheduler: base_lrs, the checkpoint's learning rate, continue; the schedule's shape is
// rebuilt from the new arguments), and says so at start-up naming each key, the checkpoint's value
// and the value now used. A checkpoint without "lr_schedule" (saved before it was recorded) still
// resumes, with the config's values as before; a malformed one names the file and the key.
TEST_F(TrainCli, ResumeWithAnotherLrScheduleKeepsTheCheckpointsLearningRate) {
  auto r = train("lrsched", "trainer.max_steps=2");
  ASSERT_EQ(r.status, 0) << r.output;
  const fs::path ck = exp("lrsched") / "checkpoint-2", state = ck / "zerotune_state.json";
  const zt::Json good = zt::Json::parse(slurp(state));
  EXPECT_EQ(good["lr_schedule"], zt::Json::parse(R"({"learning_rate": 0.01,
      "lr_scheduler_type": "linear", "warmup_steps": 1, "lr_scheduler_kwargs": {}})"));
  const std::string changed =
      " trainer.learning_rate=0.5 trainer.lr_scheduler_type=cosine trainer.warmup_steps=2";
  r = train("lrsched2", "trainer.resume_from_checkpoint=" + ck.string() + changed);
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string at = (root_ / "sft.yaml").string() + ": trainer.",
                    cl = " (given on the command line)\n";
  for (const std::string& note :
       {"warning: " + at + "learning_rate: 0.5 differs from the 0.01 that " + state.string() +
            " records; the checkpoint's 0.01 is used, as transformers' Trainer does (resuming "
            "restores its LR scheduler, base learning rate included). To train on with 0.5, start "
            "a new run from the checkpoint's weights (model.name_or_path=" +
            ck.string() + ")" + cl,
        "info: " + at + "lr_scheduler_type: cosine differs from the linear that " + state.string() +
            " records; the schedule is cosine from step 3 on, as transformers' Trainer does (the "
            "LR scheduler it restores keeps the shape this run's arguments give; there the first "
            "resumed step still uses the old schedule's value)" +
            cl,
        "info: " + at + "warmup_steps: 2 gives 2 warm-up step(s), and " + state.string() +
            " records 1; the schedule uses 2 from step 3 on, as transformers' Trainer does (the LR "
            "scheduler it restores keeps the shape this run's arguments give; there the first "
            "resumed step still uses the old schedule's value)" +
            cl})
    EXPECT_NE(r.output.find("zerotune: " + note), std::string::npos) << note << "\n" << r.output;
  // The plan line (after the warning) and args.yaml give the learning rate used, not the config's.
  const std::string plan_lr = "; lr cosine 0.01 with 2 warm-up steps\n";
  EXPECT_NE(r.output.find("zerotune: info: plan: 48 samples, world size 1, micro-batch 2, "
                          "accumulation 4 → global batch 8; 6 steps/epoch, 4 steps in all" +
                          plan_lr),
            std::string::npos)
      << r.output;
  EXPECT_GT(r.output.find(plan_lr), r.output.find("warning: " + at + "learning_rate: 0.5"))
      << r.output;
  EXPECT_EQ(r.output.find("lr cosine 0.5"), std::string::npos) << r.output;
  for (const fs::path& args :
       {exp("lrsched2") / "args.yaml", exp("lrsched2") / "checkpoint-4" / "args.yaml"}) {
    const std::string yaml = slurp(args);
    EXPECT_NE(yaml.find("\n  learning_rate: 0.01\n"), std::string::npos) << args << "\n" << yaml;
    EXPECT_NE(yaml.find("\n  lr_scheduler_type: cosine\n"), std::string::npos) << yaml;
  }
  // Steps 3 and 4 of 4: 0.01 × cosine after 2 warm-up steps (1, then 0.5), not 0.5 × anything.
  EXPECT_EQ(learning_rates("lrsched2"), (std::vector<double>{0.01, 0.005}));
  // The checkpoint this run saves records the schedule it used.
  EXPECT_EQ(zt::Json::parse(
                slurp(exp("lrsched2") / "checkpoint-4" / "zerotune_state.json"))["lr_schedule"],
            zt::Json::parse(R"({"learning_rate": 0.01, "lr_scheduler_type": "cosine",
                "warmup_steps": 2, "lr_scheduler_kwargs": {}})"));
  // An older checkpoint: no "lr_schedule", no note, the config's schedule (0.5 × cosine); no
  // "data_pipeline" either: a warning that its tokens may have been prepared under another rule.
  zt::Json old = good;
  old.erase("lr_schedule");
  old.erase("data_pipeline");
  std::ofstream(state) << old.dump(2);
  r = train("lrsched3", "trainer.resume_from_checkpoint=" + ck.string() + changed);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("zerotune: warning: resume_from_checkpoint: " + state.string() +
                          " records no token pipeline version (written before zerotune recorded "
                          "it), and this zerotune tokenises with 'zerotune-sft-data-10': the "
                          "resumed steps see samples tokenised under the new rule"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("differs from the"), std::string::npos) << r.output;
  EXPECT_EQ(learning_rates("lrsched3"), (std::vector<double>{0.5, 0.25}));
  EXPECT_NE(r.output.find("; lr cosine 0.5 with 2 warm-up steps\n"), std::string::npos) << r.output;
  EXPECT_NE(slurp(exp("lrsched3") / "args.yaml").find("\n  learning_rate: 0.5\n"),
            std::string::npos);
  zt::Json bad = good;
  bad["lr_schedule"]["lr_scheduler_type"] = "reduce_lr_on_plateau";
  std::ofstream(state) << bad.dump(2);
  r = train("lrsched4", "trainer.resume_from_checkpoint=" + ck.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("zerotune: error: " + state.string() +
                          ": 'lr_schedule.lr_scheduler_type' must be one of linear, cosine, "
                          "constant, constant_with_warmup, cosine_with_restarts, polynomial, "
                          "inverse_sqrt, cosine_with_min_lr, cosine_warmup_with_min_lr, "
                          "warmup_stable_decay, got \"reduce_lr_on_plateau\"\n"),
            std::string::npos)
      << r.output;
}

// eval_strategy / save_strategy "epoch" with the epoch cut short by max_steps: evaluated and saved
// at the last step, as transformers' loop ends the epoch there (on_epoch_end); nothing was done.
// (48 rows, global batch 8: 6 steps an epoch; max_steps 4.)
TEST_F(TrainCli, EpochStrategyActsAtTheEndOfACutShortEpoch) {
  auto r = train("epochcut",
                 "trainer.eval_strategy=epoch trainer.save_strategy=epoch trainer.max_steps=4");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::exists(exp("epochcut") / "checkpoint-4" / "trainer_state.json"));
  EXPECT_FALSE(fs::exists(exp("epochcut") / "checkpoint-2"));
  int evals = 0;
  for (const zt::Json& e : train_events(exp("epochcut")))
    if (e.contains("eval_loss")) {
      ++evals;
      EXPECT_EQ(e["step"].get<int64_t>(), 4) << e.dump();
    }
  EXPECT_EQ(evals, 1);
}

// The accelerate file's mixed_precision: fp16 is refused when trainer.bf16 is off (accelerate would
// autocast to fp16, which zerotune lacks; it trained fp32 without a word) and accepted with a
// warning when it is on (transformers' bf16 argument overrides accelerate's setting).
TEST_F(TrainCli, AccelerateFp16RefusedUnlessBf16) {
  std::ofstream(root_ / "acc_fp16.yaml") << "num_processes: 1\nmixed_precision: fp16\n";
  const std::string launch = std::string(ZT_BINARY) + " launch --config_file " +
                             (root_ / "acc_fp16.yaml").string() + " train --config " +
                             (root_ / "sft.yaml").string() + " trainer.max_steps=1 ";
  auto r = run(launch + "exp_name=fp16a");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("acc_fp16.yaml: mixed_precision fp16 is not supported by zerotune"),
            std::string::npos)
      << r.output;
  r = run(launch + "exp_name=fp16b trainer.bf16=true trainer.eval_strategy=no");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("mixed_precision fp16 differs from trainer.bf16 true; trainer.bf16 wins"),
            std::string::npos)
      << r.output;
}

// The accelerate config's deepspeed_config.gradient_accumulation_steps / gradient_clipping go into
// the DeepSpeed config accelerate builds, where transformers compares them with the trainer's:
// one that differs is refused like a DeepSpeed JSON's (it trained with a warning, "the trainer's
// wins"); equal values train.
TEST_F(TrainCli, AccelerateDeepSpeedValuesThatDifferFromTheTrainersAreRefused) {
  const fs::path acc = root_ / "acc_ga.yaml";
  std::ofstream(acc) << "distributed_type: DEEPSPEED\nnum_processes: 1\ndeepspeed_config:\n"
                        "  gradient_accumulation_steps: 3\n  gradient_clipping: 1.0\n"
                        "  zero_stage: 1\n";
  const std::string launch = std::string(ZT_BINARY) + " launch --config_file " + acc.string() +
                             " train --config " + (root_ / "sft.yaml").string() +
                             " trainer.max_steps=1 trainer.eval_strategy=no ";
  auto r = run(launch + "exp_name=acc_ga");  // accumulation 8 / (1 × 2) = 4
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("zerotune: error: " + acc.string() +
                          ": DeepSpeed values that differ from the trainer's, which transformers "
                          "refuses"),
            std::string::npos)
      << r.output;
  EXPECT_NE(
      r.output.find("\n  - " + acc.string() +
                    ":4: gradient_accumulation_steps 3 vs trainer.gradient_accumulation_steps"),
      std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("gradient_clipping 1.0 vs"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(exp("acc_ga")));
  r = run(launch + "exp_name=acc_ga_ok compute.global_batch_size=6");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("'grad_norm': '"), std::string::npos) << r.output;
  // gradient_clipping 0: accelerate leaves it out of the DeepSpeed config, so DeepSpeed does not
  // clip; refused beside trainer.max_grad_norm > 0, taken with max_grad_norm 0.
  std::ofstream(acc) << "distributed_type: DEEPSPEED\nnum_processes: 1\ndeepspeed_config:\n"
                        "  gradient_clipping: 0.0\n  zero_stage: 1\n";
  r = run(launch + "exp_name=acc_gc0");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("zerotune: error: " + acc.string() +
                          ":4: deepspeed_config.gradient_clipping is 0, which accelerate leaves "
                          "out of the DeepSpeed config, so DeepSpeed would train without clipping "
                          "while trainer.max_grad_norm is 1; set trainer.max_grad_norm to 0"),
            std::string::npos)
      << r.output;
  r = run(launch + "exp_name=acc_gc0_ok trainer.max_grad_norm=0");
  EXPECT_EQ(r.status, 0) << r.output;
  // No clipping: no grad_norm in the log records, as transformers computes it only to clip.
  EXPECT_NE(r.output.find("{'loss': '"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("'grad_norm'"), std::string::npos) << r.output;
  // A DeepSpeed JSON (deepspeed_config_file) without gradient_accumulation_steps: accelerate sets
  // it to 1, which transformers compares with the trainer's 4.
  const fs::path ds = root_ / "acc_ga_ds.json";
  std::ofstream(ds) << R"({"zero_optimization": {"stage": 1}})";
  std::ofstream(acc) << "distributed_type: DEEPSPEED\nnum_processes: 1\ndeepspeed_config:\n"
                        "  deepspeed_config_file: "
                     << ds.string() << "\n";
  r = run(launch + "exp_name=acc_ga_ds");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("\n  - " + ds.string() +
                          ": gradient_accumulation_steps 1 (not in the file: accelerate's "
                          "DeepSpeedPlugin sets it) vs trainer.gradient_accumulation_steps"),
            std::string::npos)
      << r.output;
  r = run(launch + "exp_name=acc_ga_ds_ok compute.global_batch_size=2");
  EXPECT_EQ(r.status, 0) << r.output;
}

// trainer.output_dir that is another run's checkpoint directory (even with overwrite_output_dir),
// or inside one: refused at start-up naming the key, with nothing written (the final export
// replaced the checkpoint whole, or wrote into it).
TEST_F(TrainCli, OutputDirInACheckpointIsRefused) {
  auto r = train("ckpt_a", "trainer.max_steps=2 trainer.eval_strategy=no");
  ASSERT_EQ(r.status, 0) << r.output;
  const fs::path ckpt = exp("ckpt_a") / "checkpoint-2";
  ASSERT_TRUE(fs::exists(ckpt / "trainer_state.json"));
  const std::string state = slurp(ckpt / "trainer_state.json");
  for (const fs::path& out : {ckpt, ckpt / "final"}) {
    r = train("ckpt_b",
              "trainer.max_steps=1 trainer.eval_strategy=no "
              "trainer.overwrite_output_dir=true trainer.output_dir=" +
                  out.string());
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("sft.yaml: trainer.output_dir: " + out.string() + " is " +
                            (out == ckpt ? "" : "inside ") + "checkpoint directory " +
                            ckpt.string() + ", which belongs to a run"),
              std::string::npos)
        << r.output;
    EXPECT_FALSE(fs::exists(exp("ckpt_b"))) << out;
  }
  EXPECT_EQ(slurp(ckpt / "trainer_state.json"), state);
  EXPECT_FALSE(fs::exists(ckpt / "final"));
}

// A TensorBoard logging_dir inside a checkpoint directory of the run: the save of that step
// replaced the directory (the event file open in it deleted) and rotation removed it, so the run
// ended with exit 0 and no event file anywhere. Refused as output_dir is, before anything is
// written.
TEST_F(TrainCli, LoggingDirInACheckpointIsRefused) {
  const fs::path tb = exp("tb_ckpt") / "checkpoint-1" / "tb";
  auto r = train("tb_ckpt",
                 "trainer.max_steps=2 trainer.eval_strategy=no trainer.report_to=tensorboard "
                 "trainer.logging_dir=" +
                     tb.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("sft.yaml: trainer.logging_dir: " + tb.string() +
                          " is inside checkpoint directory " +
                          (exp("tb_ckpt") / "checkpoint-1").string() + ", which belongs to a run"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(exp("tb_ckpt")));
  // Beside the checkpoints, the events are kept.
  r = train("tb_ckpt",
            "trainer.max_steps=2 trainer.eval_strategy=no trainer.report_to=tensorboard "
            "trainer.logging_dir=" +
                (exp("tb_ckpt") / "tb").string());
  ASSERT_EQ(r.status, 0) << r.output;
  int events = 0;
  for (const auto& e : fs::directory_iterator(exp("tb_ckpt") / "tb"))
    events += e.path().filename().string().starts_with("events.out.tfevents.") ? 1 : 0;
  EXPECT_EQ(events, 1);
}

// save_total_limit -1 keeps every checkpoint, as transformers' rotation does for a limit <= 0 (it
// was refused as a config error).
TEST_F(TrainCli, NegativeSaveTotalLimitKeepsEveryCheckpoint) {
  const auto r = train("keep_all",
                       "trainer.max_steps=3 trainer.save_steps=1 trainer.eval_strategy=no "
                       "trainer.save_total_limit=-1");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* ckpt : {"checkpoint-1", "checkpoint-2", "checkpoint-3"})
    EXPECT_TRUE(fs::is_directory(exp("keep_all") / ckpt)) << ckpt;
}

TEST_F(TrainCli, EvalLossIndependentOfEvalBatchAndWorld) {
  // learning_rate 0 keeps the weights bitwise (AdamW adds -0), so every run evaluates the same
  // model; eval_loss must then be bitwise equal for eval batch 1, 3, 8 and world size 1, 2.
  const std::string common =
      "trainer.learning_rate=0 trainer.max_steps=2 compute.global_batch_size=4 ";
  auto a = train("ev1", common + "trainer.per_device_eval_batch_size=1");
  auto b = train("ev8", common + "trainer.per_device_eval_batch_size=8");
  auto c = train("ev3w2", common + "trainer.per_device_eval_batch_size=3", 2);
  // ZeRO-3 gathers inside every forward: ranks with fewer eval examples must still match rank 0's
  // forwards (they repeat one and drop the result).
  auto d =
      train("ev3w2s3", common + "trainer.per_device_eval_batch_size=3 compute.zero_stage=3", 2);
  ASSERT_EQ(d.status, 0) << d.output;
  ASSERT_EQ(a.status, 0) << a.output;
  ASSERT_EQ(b.status, 0) << b.output;
  ASSERT_EQ(c.status, 0) << c.output;
  auto ea = train_events(exp("ev1")), eb = train_events(exp("ev8")),
       ec = train_events(exp("ev3w2"));
  ASSERT_EQ(ea.size(), 3u);
  ASSERT_EQ(ec.size(), 3u);
  ASSERT_TRUE(ea[2].contains("eval_loss"));
  EXPECT_GT(ea[2]["eval_loss"].get<double>(), 5.0);  // an untrained model over a 151936 vocab
  EXPECT_EQ(ea[2]["eval_loss"], eb[2]["eval_loss"]);
  EXPECT_EQ(ea[2]["eval_loss"], ec[2]["eval_loss"]);
  const auto ed = train_events(exp("ev3w2s3"));
  ASSERT_EQ(ed.size(), 3u);
  EXPECT_EQ(ea[2]["eval_loss"], ed[2]["eval_loss"]);
  EXPECT_EQ(ea[2]["eval_mean_token_accuracy"], eb[2]["eval_mean_token_accuracy"]);
  EXPECT_EQ(ea[2]["eval_mean_token_accuracy"], ec[2]["eval_mean_token_accuracy"]);
  // TRL's entropy: the mean over target tokens of H(softmax(logits_t)). Logits of the untrained
  // model have a std σ of about sqrt(32)·0.02 ≈ 0.113, so H ≈ log V − σ²/2 = log(151936) − 0.0064
  // (measured: 11.92482 vs log V = 11.93115).
  const double log_v = std::log(151936.0);
  ASSERT_TRUE(ea[2].contains("eval_entropy"));
  EXPECT_LT(ea[2]["eval_entropy"].get<double>(), log_v);
  EXPECT_NEAR(ea[2]["eval_entropy"].get<double>(), log_v - 0.0064, 0.001);
  EXPECT_EQ(ea[2]["eval_entropy"], eb[2]["eval_entropy"]);
  EXPECT_EQ(ea[2]["eval_entropy"], ec[2]["eval_entropy"]);
  ASSERT_TRUE(ea[0].contains("entropy"));  // the step-1 log event, same weights
  EXPECT_NEAR(ea[0]["entropy"].get<double>(), log_v - 0.0064, 0.001);
  // One step, the same samples on 1 or 2 ranks: the same sums in another order (the ranks' share
  // of the step is dealt by token count, compute.balance_micro_batches), so equal to fp64
  // reassociation.
  EXPECT_NEAR(ea[0]["entropy"].get<double>(), ec[0]["entropy"].get<double>(), 1e-9);
}

TEST_F(TrainCli, SameSeedSameBitsOtherSeedDiffers) {
  auto a = train("seedA", "trainer.max_steps=2 trainer.eval_strategy=no");
  auto b = train("seedB", "trainer.max_steps=2 trainer.eval_strategy=no");
  auto c = train("seedC", "trainer.max_steps=2 trainer.eval_strategy=no trainer.seed=43");
  ASSERT_EQ(a.status, 0) << a.output;
  ASSERT_EQ(b.status, 0) << b.output;
  ASSERT_EQ(c.status, 0) << c.output;
  auto ea = train_events(exp("seedA")), eb = train_events(exp("seedB")),
       ec = train_events(exp("seedC"));
  ASSERT_EQ(ea.size(), 2u);
  EXPECT_EQ(ea, eb);
  EXPECT_TRUE(slurp(exp("seedA") / "final" / "model.safetensors") ==
              slurp(exp("seedB") / "final" / "model.safetensors"));
  EXPECT_NE(ea[0]["loss"], ec[0]["loss"]);
  EXPECT_FALSE(slurp(exp("seedA") / "final" / "model.safetensors") ==
               slurp(exp("seedC") / "final" / "model.safetensors"));
}

// transformers: the sampler is seeded by data_seed when set, else seed; the weights' init by seed.
// With learning_rate 0 the exported model is the initial one, and each step's token count
// (num_tokens, cumulative) depends on which samples it holds only.
TEST_F(TrainCli, DataOrderFollowsDataSeedAndInitFollowsSeed) {
  const std::string common =
      "trainer.max_steps=4 trainer.eval_strategy=no trainer.save_strategy=no "
      "trainer.learning_rate=0 trainer.warmup_steps=0 ";
  const struct {
    const char* name;
    const char* seeds;
  } runs[] = {{"ds_s1", "trainer.seed=1"},
              {"ds_s1d5", "trainer.seed=1 trainer.data_seed=5"},
              {"ds_s2d5", "trainer.seed=2 trainer.data_seed=5"},
              {"ds_s5", "trainer.seed=5"}};
  for (const auto& r : runs) {
    const RunResult res = train(r.name, common + r.seeds);
    ASSERT_EQ(res.status, 0) << r.name << "\n" << res.output;
  }
  auto tokens = [](const std::string& name) {
    std::vector<int64_t> t;
    for (const auto& e : train_events(exp(name)))
      if (e.contains("loss")) t.push_back(e["num_tokens"].get<int64_t>());
    return t;
  };
  auto model = [](const std::string& name) {
    return slurp(exp(name) / "final" / "model.safetensors");
  };
  ASSERT_EQ(tokens("ds_s1").size(), 4u);
  // Same seed, another data_seed: the same initial weights, another data order.
  EXPECT_TRUE(model("ds_s1") == model("ds_s1d5"));
  EXPECT_NE(tokens("ds_s1"), tokens("ds_s1d5"));
  // Same data_seed, another seed: the same order, other weights.
  EXPECT_EQ(tokens("ds_s1d5"), tokens("ds_s2d5"));
  EXPECT_FALSE(model("ds_s1d5") == model("ds_s2d5"));
  // data_seed 5 gives the order seed 5 gives (the sampler's seed is exactly data_seed).
  EXPECT_EQ(tokens("ds_s1d5"), tokens("ds_s5"));
  EXPECT_TRUE(model("ds_s2d5") != model("ds_s5"));
  // The resolved config records it.
  EXPECT_NE(slurp(exp("ds_s1d5") / "args.yaml").find("data_seed: 5"), std::string::npos);
}

// args.yaml records what the run reported to: with report_to deleted (`~trainer.report_to`, the
// default "all") TensorBoard events are written and args.yaml says [tensorboard] and where (it
// had no report_to at all); with `none`, none are written and args.yaml says [].
TEST_F(TrainCli, ArgsYamlRecordsTheReportToTheRunUsed) {
  const std::string quick =
      "trainer.max_steps=1 trainer.eval_strategy=no trainer.save_strategy=no ";
  auto r = train("rt_deleted", quick + "~trainer.report_to");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(fs::is_empty(exp("rt_deleted") / "tensorboard"));
  const std::string args = slurp(exp("rt_deleted") / "args.yaml");
  EXPECT_NE(args.find("  report_to:\n    - tensorboard\n"), std::string::npos) << args;
  EXPECT_NE(args.find("  logging_dir: " + (exp("rt_deleted") / "tensorboard").string() + "\n"),
            std::string::npos)
      << args;
  r = train("rt_none", quick);  // the suite's report_to: none
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(fs::exists(exp("rt_none") / "tensorboard"));
  EXPECT_NE(slurp(exp("rt_none") / "args.yaml").find("  report_to:\n    []\n"), std::string::npos);
}

// args.yaml records the output_dir the final model went to: exp_dir/final when the config sets
// none (it had no output_dir at all), and the value given when it sets one.
TEST_F(TrainCli, ArgsYamlRecordsTheEffectiveOutputDir) {
  const std::string quick =
      "trainer.max_steps=1 trainer.eval_strategy=no trainer.save_strategy=no ";
  auto r = train("od_default", quick);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::exists(exp("od_default") / "final" / "model.safetensors"));
  std::string args = slurp(exp("od_default") / "args.yaml");
  EXPECT_NE(args.find("\n  output_dir: " + (exp("od_default") / "final").string() + "\n"),
            std::string::npos)
      << args;
  const fs::path given = root_ / "models" / "od_given";
  r = train("od_given", quick + "trainer.output_dir=" + given.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::exists(given / "model.safetensors"));
  args = slurp(exp("od_given") / "args.yaml");
  EXPECT_NE(args.find("\n  output_dir: " + given.string() + "\n"), std::string::npos) << args;
}

// The final export fails after training (output_dir on a file system that fills up; start-up only
// checks it is writable): with save_strategy no the trained weights were lost with the process.
// They are kept as a checkpoint in exp_dir, named in the error, and resuming from it writes the
// final model; with a checkpoint of the last step already saved the error names that one.
TEST_F(TrainCli, FinalExportFailureKeepsTheTrainedModel) {
  if (::geteuid() != 0) GTEST_SKIP() << "the small file system needs root to mount";
  const fs::path full = root_ / "full_fs";
  fs::create_directories(full);
  if (::mount("tmpfs", full.c_str(), "tmpfs", 0, "size=256k") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here";
  const std::string quick = "trainer.max_steps=2 trainer.eval_strategy=no trainer.output_dir=" +
                            (full / "final").string() + " ";
  const RunResult r = train("export_fails", quick + "trainer.save_strategy=no");
  const RunResult saved = train("export_fails_saved", quick);  // save_steps 2: checkpoint-2
  ::umount(full.c_str());
  EXPECT_EQ(r.status, 1) << r.output;
  const fs::path kept = exp("export_fails") / "checkpoint-2";
  EXPECT_NE(r.output.find("zerotune: error: cannot write the final model: "), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("; the trained model was saved instead as " + kept.string() +
                          " (an HF model directory with the optimizer state"),
            std::string::npos)
      << r.output;
  ASSERT_TRUE(fs::exists(kept / "model.safetensors"));
  EXPECT_TRUE(fs::exists(kept / "trainer_state.json"));
  EXPECT_EQ(saved.status, 1) << saved.output;
  EXPECT_NE(saved.output.find("; the trained model is in " +
                              (exp("export_fails_saved") / "checkpoint-2").string() +
                              " (the checkpoint of the last step"),
            std::string::npos)
      << saved.output;
  // Resuming from the kept checkpoint runs no step and writes the final model: the same weights.
  const RunResult again = train("export_fails",
                                "trainer.max_steps=2 trainer.eval_strategy=no "
                                "trainer.save_strategy=no "
                                "trainer.resume_from_checkpoint=" +
                                    kept.string());
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_TRUE(slurp(exp("export_fails") / "final" / "model.safetensors") ==
              slurp(kept / "model.safetensors"));
}

// A path the system refuses to look at — a name longer than NAME_MAX, a symbolic link loop — given
// as the model, the tokenizer, the chat template or exp_dir: exit 1 naming the path and the
// system's reason (it was "internal error: filesystem error: status: …", exit 70), nothing
// written.
TEST_F(TrainCli, UnreadablePathsAreUserErrors) {
  const fs::path long_name = root_ / std::string(300, 'a');
  const fs::path loop = root_ / "loop_a";
  fs::create_symlink(root_ / "loop_b", loop);
  fs::create_symlink(loop, root_ / "loop_b");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"model.name_or_path=" + long_name.string(), long_name.string() + ": File name too long"},
      {"model.tokenizer_name_or_path=" + loop.string(),
       loop.string() + ": Too many levels of symbolic links"},
      {"trainer.chat_template_path=" + long_name.string(),
       long_name.string() + ": File name too long"},
      // exp_dir is checked with the other run directories, naming the key.
      {"exp_dir=" + long_name.string(), (root_ / "sft.yaml").string() +
                                            ": exp_dir: cannot create " + long_name.string() +
                                            ": File name too long (given on the command line)"}};
  for (const auto& [override, message] : cases) {
    auto r = train("unreadable", "trainer.max_steps=1 " + override);
    EXPECT_EQ(r.status, 1) << override << "\n" << r.output;
    EXPECT_NE(r.output.find("zerotune: error: " + message + "\n"), std::string::npos)
        << override << "\n"
        << r.output;
    EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(exp("unreadable"))) << override;
  }
}

// Two runs with one trainer.output_dir and two exp_dirs (exp_dir's lock does not cover output_dir):
// the run that finishes second does not replace the model the other exported meanwhile; it keeps
// its own as a checkpoint and says why. (The later run's export replaced the earlier's, silently.)
// Run A is stopped (SIGSTOP) after its start-up, while run B trains and exports.
TEST_F(TrainCli, ARunDoesNotReplaceAModelAnotherRunExportedMeanwhile) {
  const fs::path out = root_ / "shared_final";
  const std::string zt =
      std::string(ZT_BINARY) + " train --config " + (root_ / "sft.yaml").string();
  const std::string common =
      " trainer.eval_strategy=no trainer.save_strategy=no trainer.output_dir=" + out.string();
  const auto r =
      run(zt + " exp_name=shared_a trainer.max_steps=40" + common + " > " +
          (root_ / "shared_a.log").string() +
          " 2>&1 & A=$!; trap 'kill -CONT $A 2>/dev/null' EXIT; while [ ! -f " +
          (exp("shared_a") / "zerotune_run.json").string() +
          " ] && kill -0 $A 2>/dev/null; do sleep 0.05; done; kill -STOP $A; " + zt +
          " exp_name=shared_b trainer.max_steps=1" + common + "; echo \"B=$?\"; cp " +
          (out / "model.safetensors").string() + " " + (root_ / "shared_b.safetensors").string() +
          "; kill -CONT $A; wait $A; echo \"A=$?\"; cat " + (root_ / "shared_a.log").string());
  EXPECT_NE(r.output.find("B=0\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("A=1\n"), std::string::npos) << r.output;
  EXPECT_NE(
      r.output.find("zerotune: error: cannot write the final model: trainer.output_dir " +
                    out.string() +
                    ": its model files changed since this run started (another run exported "
                    "there?); zerotune does not replace a model it did not find there at start-up; "
                    "the "
                    "trained model was saved instead as " +
                    (exp("shared_a") / "checkpoint-40").string()),
      std::string::npos)
      << r.output;
  EXPECT_TRUE(fs::exists(exp("shared_a") / "checkpoint-40" / "model.safetensors"));
  EXPECT_TRUE(slurp(out / "model.safetensors") ==
              slurp(root_ / "shared_b.safetensors"));  // B's model
}

// The same when the other run exports while this one is still being set up (tokenising a large
// dataset, say): what output_dir held was taken only once the data was prepared, so the other
// run's model counted as found there at start-up and was replaced, silently (exit 0). Now it is
// taken at the start-up check of output_dir. Run A is stopped (SIGSTOP) once it has logged its
// "rank 0 of 1" line (after that check, before the tokenizer and the data are loaded).
TEST_F(TrainCli, ARunDoesNotReplaceAModelAnotherRunExportedDuringItsSetUp) {
  const fs::path out = root_ / "shared_setup";
  const std::string zt =
      std::string(ZT_BINARY) + " train --config " + (root_ / "sft.yaml").string();
  const std::string common =
      " trainer.max_steps=1 trainer.eval_strategy=no "
      "trainer.save_strategy=no trainer.output_dir=" +
      out.string();
  const fs::path log_a = root_ / "setup_a.log";
  const auto r =
      run(zt + " exp_name=setup_a" + common + " > " + log_a.string() +
          " 2>&1 & A=$!; trap 'kill -CONT $A 2>/dev/null' EXIT; while ! grep -q "
          "'rank 0 of 1 ' " +
          log_a.string() +
          " && kill -0 $A 2>/dev/null; do sleep 0.02; done; kill -STOP "
          "$A; " +
          zt + " exp_name=setup_b" + common + "; echo \"B=$?\"; cp " +
          (out / "model.safetensors").string() + " " + (root_ / "setup_b.safetensors").string() +
          "; kill -CONT $A; wait $A; echo \"A=$?\"; cat " + log_a.string());
  EXPECT_NE(r.output.find("B=0\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("A=1\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("zerotune: error: cannot write the final model: trainer.output_dir " +
                          out.string() +
                          ": its model files changed since this run started (another run "
                          "exported there?); zerotune does not replace a model it did not find "
                          "there at start-up; the trained model was saved instead as " +
                          (exp("setup_a") / "checkpoint-1").string()),
            std::string::npos)
      << r.output;
  EXPECT_EQ(slurp(root_ / "setup_a.log").find("saved the final model to"), std::string::npos)
      << r.output;
  EXPECT_TRUE(fs::exists(exp("setup_a") / "checkpoint-1" / "model.safetensors"));
  EXPECT_TRUE(slurp(out / "model.safetensors") ==
              slurp(root_ / "setup_b.safetensors"));  // B's model
}

// A DeepSpeed JSON whose values differ from the trainer's is refused, as transformers refuses it
// ("Please correct the following DeepSpeed config values that mismatch TrainingArguments
// values"), naming each value's file:line and the trainer key; it trained with the trainer's values
// and a note. "auto" and equal values train.
TEST_F(TrainCli, DeepSpeedValuesThatDifferFromTheTrainersAreRefused) {
  const fs::path ds = root_ / "ds_mismatch.json";
  std::ofstream(ds)
      << "{\"zero_optimization\": {\"stage\": 1},\n"
         "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3, \"betas\": \"auto\"}},\n"
         "\"gradient_clipping\": 0.5}\n";
  auto r = train("dsmismatch", "trainer.max_steps=1 +trainer.deepspeed=" + ds.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("zerotune: error: " + ds.string() +
                          ": DeepSpeed values that differ from the trainer's, which transformers "
                          "refuses (\"Please correct the following DeepSpeed config values that "
                          "mismatch TrainingArguments values\"); set each to \"auto\" or to the "
                          "trainer's value:\n  - " +
                          ds.string() + ":2: optimizer.params.lr 1e-3 vs trainer.learning_rate"),
            std::string::npos)
      << r.output;
  EXPECT_NE(
      r.output.find("\n  - " + ds.string() + ":3: gradient_clipping 0.5 vs trainer.max_grad_norm"),
      std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(exp("dsmismatch")));
  // bf16.enabled against trainer.bf16 (false in this config), and warmup_min_lr, which
  // transformers fills and never compares.
  std::ofstream(ds) << R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 1}})";
  r = train("dsbf16", "trainer.max_steps=1 +trainer.deepspeed=" + ds.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("\n  - " + ds.string() + ":1: bf16.enabled true vs trainer.bf16"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(" false\n"), std::string::npos) << r.output;
  std::ofstream(ds) << R"({"zero_optimization": {"stage": 1}, "gradient_clipping": "auto",
      "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 1e-7, "warmup_max_lr": "auto"}},
      "train_micro_batch_size_per_gpu": "auto", "optimizer": {"type": "AdamW", "params": {"lr": "auto"}}})";
  r = train("dsauto",
            "trainer.max_steps=1 trainer.eval_strategy=no +trainer.deepspeed=" + ds.string());
  EXPECT_EQ(r.status, 0) << r.output;
}

// trainer.deepspeed given inline, as TrainingArguments takes it besides a file's path: a mapping,
// or a JSON string, which __post_init__ json.loads with its string values converted ("3" → 3).
// The settings are read as a file's are: checked against the trainer's values (the messages name
// the key), their ZeRO stage used; a value of another kind is refused naming the key.
TEST_F(TrainCli, DeepSpeedSettingsGivenInline) {
  const std::string key =
      (root_ / "sft.yaml").string() + ": trainer.deepspeed (given on the command line)";
  auto r = train("dsmap",
                 "trainer.max_steps=1 '+trainer.deepspeed={optimizer: {params: {lr: 1e-3}}, "
                 "zero_optimization: {stage: 1}}'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("zerotune: error: " + key + ": DeepSpeed values that differ"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("\n  - " + key + ": optimizer.params.lr 0.001 vs trainer.learning_rate"),
            std::string::npos)
      << r.output;
  // The JSON string in a YAML file (the trainer block is the fixture's last).
  const fs::path yaml = root_ / "sft_ds_string.yaml";
  std::ofstream(yaml) << slurp(root_ / "sft.yaml")
                      << "  deepspeed: '{\"zero_optimization\": {\"stage\": \"3\"}}'\n";
  r = zt_test::run(std::string(ZT_BINARY) + " train --config " + yaml.string() +
                   " exp_name=dsstring trainer.max_steps=1 trainer.eval_strategy=no");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ZeRO stage 3"), std::string::npos) << r.output;
  // A false value is no DeepSpeed (transformers' `if self.deepspeed:`): the export keeps the fp32
  // weights under bf16, where DeepSpeed would save bf16.
  const auto dtype = [&](const std::string& name) {
    return zt::Json::parse(slurp(exp(name) / "final" / "config.json")).value("torch_dtype", "");
  };
  int i = 0;
  for (const char* off :
       {"'+trainer.deepspeed={}'", "'+trainer.deepspeed=\"{}\"'", "'+trainer.deepspeed=\"\"'"}) {
    const std::string name = "dsoff" + std::to_string(i++);
    r = train(name,
              std::string("trainer.max_steps=1 trainer.eval_strategy=no trainer.bf16=true ") + off);
    ASSERT_EQ(r.status, 0) << off << r.output;
    EXPECT_EQ(dtype(name), "float32") << off;
  }
  r = train("dson",
            "trainer.max_steps=1 trainer.eval_strategy=no trainer.bf16=true "
            "'+trainer.deepspeed={zero_optimization: {stage: 1}}'");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(dtype("dson"), "bfloat16");
  r = train("dsnofile", "trainer.max_steps=1 +trainer.deepspeed=no_such_ds.json");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("trainer.deepspeed (given on the command line): 'no_such_ds.json' is no "
                          "existing file, no JSON and no base64-encoded JSON; expected the path of "
                          "a DeepSpeed JSON file"),
            std::string::npos)
      << r.output;
  r = train("dsnumber", "trainer.max_steps=1 +trainer.deepspeed=5");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("trainer.deepspeed (given on the command line) is 5; expected the path "
                          "of a DeepSpeed JSON file, or the DeepSpeed settings inline (a mapping"),
            std::string::npos)
      << r.output;
}

TEST_F(TrainCli, ConfigErrorsNameTheKey) {
  auto r = train("bad1", "+trainer.lerning_rate=1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("unknown config key 'trainer.lerning_rate'"), std::string::npos)
      << r.output;
  r = train("bad2", "compute.global_batch_size=5");
  EXPECT_EQ(r.status, 1);
  const std::string sft = (root_ / "sft.yaml").string();
  EXPECT_NE(r.output.find("zerotune: error: " + sft +
                          ": compute.global_batch_size (given on the command line) 5 is not a "
                          "multiple of world size 1 × trainer.per_device_train_batch_size (" +
                          sft + ":24) 2 = 2; cannot derive trainer.gradient_accumulation_steps (" +
                          sft + ":25)\n"),
            std::string::npos)
      << r.output;
  // Under `zerotune launch` every rank finds the same error: it is printed once.
  r = train("bad3", "+trainer.lerning_rate=1", 3);
  EXPECT_EQ(r.status, 1);
  size_t count = 0;
  for (size_t p = r.output.find("unknown config key 'trainer.lerning_rate'");
       p != std::string::npos;
       p = r.output.find("unknown config key 'trainer.lerning_rate'", p + 1))
    ++count;
  EXPECT_EQ(count, 1u) << r.output;
}

// A per_device_train_batch_size whose micro-batch cannot be held is a start-up error naming the
// key, its file, the bound and why (the model's pools are sized by the batch × the longest training
// sample, 56 tokens in the demo data), before anything is written: past the int32 token bound, and
// where the activations pool does not fit (a 7.6 GiB address-space limit against its 21.1 GiB) —
// there it was the arena's bare "out of memory: pool 'activations'".
TEST_F(TrainCli, HugeMicroBatchNamesTheKeyAndTheBound) {
  const std::string at = (root_ / "sft.yaml").string() + ": trainer.per_device_train_batch_size: ";
  auto r = train("hugebatch",
                 "trainer.per_device_train_batch_size=100000000 "
                 "trainer.gradient_accumulation_steps=1 trainer.max_steps=1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(
      r.output.find(
          "zerotune: error: " + at +
          "100000000 samples × the longest training sample (56 tokens) is more than the "
          "2147483647 tokens a micro-batch can hold (its position ids and sequence "
          "boundaries are int32; the model's pools are sized by per_device_train_batch_size "
          "× the longest sample): expected at most 38347922 here (a larger "
          "gradient_accumulation_steps keeps the global batch) (given on the command line)\n"),
      std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(exp("hugebatch")));
  r = run("ulimit -v 8000000 && " + std::string(ZT_BINARY) + " train --config " +
          (root_ / "sft.yaml").string() +
          " exp_name=oombatch trainer.per_device_train_batch_size=100000 "
          "trainer.gradient_accumulation_steps=1 trainer.max_steps=1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("zerotune: error: " + at +
                          "100000 samples × the longest training sample (56 tokens) = 5600000 "
                          "tokens per micro-batch, and the model's activation pools are sized for "
                          "that many: out of memory: pool 'activations' needs 22696061952 bytes "
                          "(21.1 GiB) on host"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(". Lower trainer.per_device_train_batch_size (a larger "
                          "gradient_accumulation_steps keeps the global batch) or "
                          "trainer.max_length (given on the command line)\n"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(exp("oombatch")));
}

// A tokenizer directory with tokenizer.json alone (transformers' PreTrainedTokenizerFast loads it)
// trains: no named special token and no chat template, so what needs one says which file would
// supply it and which key to set instead; with trainer.eos_token it trains and exports. (It was
// refused: "<dir>/tokenizer_config.json: file not found".)
TEST_F(TrainCli, TokenizerJsonAloneTrains) {
  const fs::path tok = root_ / "tokenizer_json_only";
  fs::create_directories(tok);
  fs::copy_file(fs::path(ZT_SOURCE_DIR) / "configs/tokenizers/qwen2.5-instruct/tokenizer.json",
                tok / "tokenizer.json", fs::copy_options::overwrite_existing);
  const std::string base = "trainer.max_steps=2 model.tokenizer_name_or_path=" + tok.string();
  auto r = train("tokonly1", base + " dataset.prompt_format=none");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("zerotune: error: " + tok.string() +
                          " has no tokenizer_config.json (only tokenizer.json), so no eos_token, "
                          "which " +
                          (root_ / "data/train.parquet").string() +
                          " (the train set, dataset.train.path) (prompt/completion data) needs; "
                          "set trainer.eos_token, or add a tokenizer_config.json with an "
                          "eos_token\n"),
            std::string::npos)
      << r.output;
  r = train("tokonly2", base + " \"trainer.eos_token='<|im_end|>'\"");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("zerotune: error: " + tok.string() +
                          ": the tokenizer has no chat template, which dataset.prompt_format: "
                          "chat needs"),
            std::string::npos)
      << r.output;
  r = train("tokonly3", base + " dataset.prompt_format=none \"trainer.eos_token='<|im_end|>'\"");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(train_events(exp("tokonly3")).size(), 3u);  // 2 logs + 1 eval
  EXPECT_TRUE(slurp(exp("tokonly3") / "final" / "tokenizer.json") == slurp(tok / "tokenizer.json"));
  // The EOS the run set is the exported tokenizer's, as TRL's save_pretrained writes it.
  EXPECT_EQ(zt::Json::parse(slurp(exp("tokonly3") / "final" / "tokenizer_config.json")),
            zt::Json::parse(R"({"eos_token": "<|im_end|>"})"));
}

// trainer.logging_strategy and logging_first_step act as transformers' DefaultFlowCallback: steps
// (every logging_steps, with step 1 under logging_first_step), epoch (each epoch's end), no (no
// training record); the run's last step is logged too unless it is "no". Both were noted as
// changing nothing.
TEST_F(TrainCli, LoggingStrategyAndFirstStepAreActedOn) {
  const auto logged_steps = [](const std::string& name) {
    std::vector<int64_t> steps;
    for (const zt::Json& e : train_events(exp(name)))
      if (e.contains("loss")) steps.push_back(e["step"].get<int64_t>());
    return steps;
  };
  const std::string base = "trainer.eval_strategy=no trainer.save_strategy=no ";
  auto r = train("logfirst", base +
                                 "trainer.max_steps=5 trainer.logging_steps=2 "
                                 "trainer.logging_first_step=true");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(logged_steps("logfirst"), (std::vector<int64_t>{1, 2, 4, 5}));
  // 48 samples, global batch 8: 6 steps an epoch.
  r = train("logepoch", base + "trainer.max_steps=9 trainer.logging_strategy=epoch");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(logged_steps("logepoch"), (std::vector<int64_t>{6, 9}));
  r = train("logno", base + "trainer.max_steps=3 trainer.logging_strategy=no");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(logged_steps("logno").empty());
}

// trainer.model_init_kwargs, what TRL passes to from_pretrained: a bf16 / fp16 / auto dtype is
// warned about (TRL trains those parameters without fp32 master weights), a dtype TRL refuses and
// another snapshot (revision, subfolder) are errors naming the key, the rest a note. Every one was
// an info line saying it changes nothing.
TEST_F(TrainCli, ModelInitKwargsThatChangeTheModelAreNamed) {
  const std::string sft = (root_ / "sft.yaml").string(), key = "trainer.model_init_kwargs";
  auto r = train("mik1", "+" + key + "={dtype:bf16x}");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("zerotune: error: " + sft + ": " + key +
                          ".dtype (given on the command line): bf16x is not a dtype zerotune "
                          "takes here (expected 'auto', 'bfloat16', 'float16' or 'float32'; TRL's "
                          "create_model_from_path refuses it too)"),
            std::string::npos)
      << r.output;
  r = train("mik2", "+" + key + "={revision:v2.0}");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(key + ".revision (given on the command line): 'v2.0' loads other "
                                "weights than model.name_or_path's"),
            std::string::npos)
      << r.output;
  r = train("mik3", "+" + key + "={load_in_4bit:true}");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(key + ".load_in_4bit (given on the command line): quantized loading is "
                                "not supported"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(exp("mik1")));
  r = train("mik4", "trainer.max_steps=1 trainer.eval_strategy=no +" + key +
                        "={dtype:bfloat16,attn_implementation:sdpa,revision:main}");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("zerotune: warning: " + sft + ": " + key +
                          ".dtype: bfloat16: TRL would load the model's parameters in bfloat16 and "
                          "train them without fp32 master weights (its AdamW state in that dtype "
                          "too); zerotune keeps fp32 master weights and computes in fp32 "
                          "(trainer.bf16), so its losses differ from such a run's (given on the "
                          "command line)\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("zerotune: info: " + sft + ": " + key +
                          " (given on the command line) attn_implementation changes nothing"),
            std::string::npos)
      << r.output;
  // A config attribute from_pretrained would set changes TRL's model: refused. A JSON string is
  // read as TrainingArguments parses it; "auto" with a float32 config.json is float32 (no warning).
  r = train("mik5", "+" + key + "={attention_dropout:0.1}");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(key + ".attention_dropout (given on the command line): 0.1: "
                                "from_pretrained sets it on the model's config, which changes "
                                "TRL's model"),
            std::string::npos)
      << r.output;
  r = train("mik6", "trainer.max_steps=1 trainer.eval_strategy=no \"+" + key +
                        "='{\\\"dtype\\\": \\\"auto\\\"}'\"");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("TRL would load"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("model_init_kwargs"), std::string::npos) << r.output;
}

// save_steps 0, which transformers takes: no periodic checkpoint, the final step's only (its
// DefaultFlowCallback saves on `save_steps > 0 and step % save_steps == 0`, and at the end).
TEST_F(TrainCli, SaveStepsZeroSavesTheLastStepOnly) {
  auto r = train("ss0", "trainer.save_steps=0 trainer.eval_strategy=no");
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<std::string> ckpts;
  for (const auto& e : fs::directory_iterator(exp("ss0")))
    if (e.path().filename().string().starts_with("checkpoint-"))
      ckpts.push_back(e.path().filename().string());
  EXPECT_EQ(ckpts, std::vector<std::string>{"checkpoint-4"});
}

// warmup_ratio 1.0, which transformers takes: the warm-up spans the whole run.
TEST_F(TrainCli, WarmupRatioOneWarmsUpOverTheWholeRun) {
  auto r = train("wr1", "trainer.warmup_steps=0 trainer.warmup_ratio=1.0 trainer.eval_strategy=no");
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<double> lrs;
  for (const auto& e : train_events(exp("wr1")))
    if (e.contains("learning_rate")) lrs.push_back(e["learning_rate"].get<double>());
  EXPECT_EQ(lrs, (std::vector<double>{0.0, 0.0025, 0.005, 0.0075}));
}

// trainer.chat_template_path: the template the run trained with is the exported tokenizer's
// (chat_template.jinja, tokenizer_config.json's own removed), in the final model and the
// checkpoints, as TRL saves the tokenizer it changed; the base tokenizer's was exported.
TEST_F(TrainCli, TheChatTemplateTrainedWithIsExported) {
  const zt::Json tc = zt::Json::parse(slurp(fs::path(ZT_SOURCE_DIR) / "configs" / "tokenizers" /
                                            "qwen2.5-instruct" / "tokenizer_config.json"));
  ASSERT_TRUE(tc.contains("chat_template"));
  const std::string tmpl = "Be brief.\n" + tc["chat_template"].get<std::string>();
  std::ofstream(root_ / "brief.jinja") << tmpl;
  auto r =
      train("tmplexp", "trainer.max_steps=2 trainer.eval_strategy=no trainer.chat_template_path=" +
                           (root_ / "brief.jinja").string());
  ASSERT_EQ(r.status, 0) << r.output;
  for (const fs::path& dir : {exp("tmplexp") / "final", exp("tmplexp") / "checkpoint-2"}) {
    EXPECT_EQ(slurp(dir / "chat_template.jinja"), tmpl) << dir;
    EXPECT_FALSE(zt::Json::parse(slurp(dir / "tokenizer_config.json")).contains("chat_template"))
        << dir;
  }
}

// A tokenizer with chat_template.jinja + additional_chat_templates/tool_use.jinja (transformers
// >= 4.54's layout): the rows with tools train with tool_use, and the final model and the
// checkpoints hold both files, as TRL's save_model (tokenizer save_pretrained) writes them; the
// export held chat_template.jinja alone, so a reloaded model rendered tool rows with the default.
TEST_F(TrainCli, AdditionalChatTemplatesAreTrainedAndExported) {
  const fs::path tok = root_ / "tok_tools",
                 qwen = fs::path(ZT_SOURCE_DIR) / "configs" / "tokenizers" / "qwen2.5-instruct";
  fs::create_directories(tok / "additional_chat_templates");
  fs::copy_file(qwen / "tokenizer.json", tok / "tokenizer.json",
                fs::copy_options::overwrite_existing);
  zt::Json tc = zt::Json::parse(slurp(qwen / "tokenizer_config.json"));
  tc.erase("chat_template");
  std::ofstream(tok / "tokenizer_config.json") << tc.dump(2);
  const std::string dflt = "JINJA{% for m in messages %}{{ m.content }}{% endfor %}";
  const std::string tool = "TOOL{{ messages[0].content }}{{ eos_token }}\n";
  std::ofstream(tok / "chat_template.jinja") << dflt;
  std::ofstream(tok / "additional_chat_templates" / "tool_use.jinja") << tool;
  {
    std::ofstream rows(root_ / "tools.jsonl");
    for (int i = 0; i < 16; ++i)
      rows << R"({"messages": [{"role": "user", "content": "call f )" << i
           << R"("}, {"role": "assistant", "content": "ok"}], "tools": [{"type": "function", )"
           << R"("function": {"name": "f", "parameters": {"type": "object"}}}]})"
           << "\n";
  }
  auto r = train("tooltmpl", "model.tokenizer_name_or_path=" + tok.string() +
                                 " dataset.train.path=" + (root_ / "tools.jsonl").string() +
                                 " dataset.eval=null dataset.prompt_format=none "
                                 "trainer.eval_strategy=no trainer.max_steps=2");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const fs::path& dir : {exp("tooltmpl") / "final", exp("tooltmpl") / "checkpoint-2"}) {
    EXPECT_EQ(slurp(dir / "chat_template.jinja"), dflt) << dir;
    EXPECT_EQ(slurp(dir / "additional_chat_templates" / "tool_use.jinja"), tool) << dir;
    EXPECT_FALSE(zt::Json::parse(slurp(dir / "tokenizer_config.json")).contains("chat_template"))
        << dir;
  }
  // The exported tokenizer renders the tool rows with tool_use again (jinja2 drops the file's
  // final newline, as transformers' does).
  const std::string rendered =
      run(std::string(ZT_BINARY) + " render --tokenizer " + (exp("tooltmpl") / "final").string() +
          " " + (root_ / "tools.jsonl").string())
          .output;
  EXPECT_EQ(rendered.substr(0, rendered.find('\n')), R"("TOOLcall f 0<|im_end|>")") << rendered;
  // tool_use alone (no default): the rows with tools train, as transformers renders them; a row
  // without tools is transformers' get_chat_template error, naming the row and the names.
  fs::remove(tok / "chat_template.jinja");
  auto only = train("tooltmpl2", "model.tokenizer_name_or_path=" + tok.string() +
                                     " dataset.train.path=" + (root_ / "tools.jsonl").string() +
                                     " dataset.eval=null dataset.prompt_format=none "
                                     "trainer.eval_strategy=no trainer.max_steps=1");
  ASSERT_EQ(only.status, 0) << only.output;
  EXPECT_FALSE(fs::exists(exp("tooltmpl2") / "final" / "chat_template.jinja"));
  EXPECT_EQ(slurp(exp("tooltmpl2") / "final" / "additional_chat_templates" / "tool_use.jinja"),
            tool);
  {
    std::ofstream rows(root_ / "tools.jsonl", std::ios::app);
    rows << R"({"messages": [{"role": "user", "content": "no tools"}, )"
         << R"({"role": "assistant", "content": "ok"}]})"
         << "\n";
  }
  auto mixed = train("tooltmpl3", "model.tokenizer_name_or_path=" + tok.string() +
                                      " dataset.train.path=" + (root_ / "tools.jsonl").string() +
                                      " dataset.eval=null dataset.prompt_format=none "
                                      "trainer.eval_strategy=no trainer.max_steps=1");
  EXPECT_EQ(mixed.status, 1) << mixed.output;
  EXPECT_NE(mixed.output.find(
                "zerotune: error: " + (root_ / "tools.jsonl").string() +
                ":17: row 16: " + (tok / "additional_chat_templates").string() +
                "/: the tokenizer has multiple chat templates with no default specified "
                "(transformers raises here too); available template names are ['tool_use']"),
            std::string::npos)
      << mixed.output;
}

// A model directory with tokenizer.json and no tokenizer_config.json: transformers' AutoTokenizer
// builds config.json's model_type's class (Qwen2TokenizerFast for qwen2) with its default EOS
// <|endoftext|>, with which TRL trains plain rows; zerotune refused them ("no eos_token"). (A
// tokenizer directory without config.json: TokenizerJsonAloneTrains.)
TEST_F(TrainCli, TokenizerJsonAloneTrainsWithTheClassDefaultEos) {
  const fs::path m = root_ / "model_tokjson";
  fs::create_directories(m);
  fs::copy_file(root_ / "model" / "config.json", m / "config.json",
                fs::copy_options::overwrite_existing);
  fs::copy_file(
      fs::path(ZT_SOURCE_DIR) / "configs" / "tokenizers" / "qwen2.5-instruct" / "tokenizer.json",
      m / "tokenizer.json", fs::copy_options::overwrite_existing);
  auto r = train("tokjson", "model.name_or_path=" + m.string() +
                                " model.tokenizer_name_or_path=" + m.string() +
                                " dataset.prompt_format=none trainer.eval_strategy=no "
                                "trainer.max_steps=1 trainer.save_strategy=no");
  ASSERT_EQ(r.status, 0) << r.output;
  // config.json and generation_config.json get the tokenizer's EOS and pad (151643), as TRL and
  // transformers' Trainer align them.
  const zt::Json gen = zt::Json::parse(slurp(exp("tokjson") / "final" / "generation_config.json"));
  EXPECT_EQ(gen["eos_token_id"], zt::Json::array({151643})) << gen.dump();
  EXPECT_EQ(gen["pad_token_id"], zt::Json(151643)) << gen.dump();
}

// A tokenizer without a pad token (Llama 3.x's files: PreTrainedTokenizerFast): the export writes
// no pad_token_id, as TRL 0.25.1 + transformers 4.57.1 save it. It wrote the EOS (TRL 1.16's
// fallback), which transformers and zerotune read as the embedding's padding_idx, so a fine-tune of
// the export left the EOS row of the input embedding untrained.
TEST_F(TrainCli, ATokenizerWithoutAPadTokenExportsNoPadId) {
  const fs::path tok = root_ / "tok_nopad",
                 qwen = fs::path(ZT_SOURCE_DIR) / "configs" / "tokenizers" / "qwen2.5-instruct";
  fs::create_directories(tok);
  fs::copy_file(qwen / "tokenizer.json", tok / "tokenizer.json",
                fs::copy_options::overwrite_existing);
  zt::Json tc = zt::Json::parse(slurp(qwen / "tokenizer_config.json"));
  ASSERT_EQ(tc["pad_token"], "<|endoftext|>");
  tc.erase("pad_token");
  tc["tokenizer_class"] = "PreTrainedTokenizerFast";  // Qwen2Tokenizer's class default pads
  std::ofstream(tok / "tokenizer_config.json") << tc.dump(2);
  auto r = train("nopad", "model.tokenizer_name_or_path=" + tok.string() +
                              " trainer.eval_strategy=no trainer.max_steps=1 "
                              "trainer.save_strategy=no");
  ASSERT_EQ(r.status, 0) << r.output;
  const zt::Json cfg = zt::Json::parse(slurp(exp("nopad") / "final" / "config.json"));
  const zt::Json gen = zt::Json::parse(slurp(exp("nopad") / "final" / "generation_config.json"));
  EXPECT_FALSE(cfg.contains("pad_token_id") && !cfg["pad_token_id"].is_null()) << cfg.dump();
  EXPECT_FALSE(gen.contains("pad_token_id")) << gen.dump();
  EXPECT_EQ(cfg["eos_token_id"], zt::Json(151645)) << cfg.dump();  // the trained EOS is aligned
  EXPECT_EQ(r.output.find("pad_token_id"), std::string::npos) << r.output;
}

// A model path that is a file (its config.json) or not there: the error names the file and the
// key, not only "model '…'".
TEST_F(TrainCli, ModelPathThatIsNoDirectoryNamesTheKey) {
  const std::string file = (root_ / "model" / "config.json").string();
  auto r = train("modelfile", "model.name_or_path=" + file);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(
      r.output.find((root_ / "sft.yaml").string() + ": model.name_or_path: model '" + file +
                    "': " + file + " is a file; expected a directory (given on the command line)"),
      std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(exp("modelfile")));
}

// A model directory holding weights zerotune does not read (pytorch_model.bin here) is an error
// naming the key and the file; it was trained from scratch with one info line, exit 0.
TEST_F(TrainCli, UnreadableWeightsAreAnErrorNotAFromScratchRun) {
  const fs::path dir = root_ / "model_bin";
  fs::create_directories(dir);
  fs::copy_file(root_ / "model" / "config.json", dir / "config.json",
                fs::copy_options::overwrite_existing);
  std::ofstream(dir / "pytorch_model.bin") << "pickle";
  auto r = train("modelbin", "model.name_or_path=" + dir.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(
      r.output.find("zerotune: error: " + (root_ / "sft.yaml").string() +
                    ": model.name_or_path: " + dir.string() +
                    " holds pytorch_model.bin but neither model.safetensors nor "
                    "model.safetensors.index.json; zerotune reads model.safetensors or the shards"),
      std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("(given on the command line)\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("from scratch (config only)"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(exp("modelbin")));
}

// num_train_epochs 0 without max_steps trains nothing: refused before the data is prepared or
// anything is written, naming the file and both keys (it used to fail after the model was built,
// as "step plan: …", naming neither).
TEST_F(TrainCli, ZeroEpochsWithoutMaxStepsIsRefusedAtStartUp) {
  auto r = train("noepochs", "trainer.max_steps=-1 trainer.num_train_epochs=0");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find((root_ / "sft.yaml").string() +
                          ": trainer.num_train_epochs (given on the command line) is 0 and "
                          "trainer.max_steps (given on the command line) is -1, so the run would "
                          "train no step (expected num_train_epochs > 0, or max_steps >= 1)\n"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("step plan"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(exp("noepochs")));
  // max_steps 0 is transformers' "not set": the epochs decide (3 steps: half a 6-step epoch).
  auto ok = train("halfepoch",
                  "trainer.max_steps=0 trainer.num_train_epochs=0.5 "
                  "trainer.eval_strategy=no trainer.save_strategy=no");
  ASSERT_EQ(ok.status, 0) << ok.output;
  EXPECT_EQ(train_events(exp("halfepoch")).back()["step"], 3) << ok.output;
}

}  // namespace
