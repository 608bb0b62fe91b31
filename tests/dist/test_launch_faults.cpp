// Faults and signals of `zerotune launch … train` (issue 17; and one of a lone `zerotune train`),
// and jobs over several "nodes" (two launchers on this machine, issue 16 item 4), through the real
// binary on the inputs of ../shared/cases (`launch-sigterm-grace-loses-checkpoint`,
// `ddp-timeout-ignored`), each run from a temporary folder linking to the case's files, as its
// run.sh does: a SIGTERM during an evaluation or after a step ends with the interrupt checkpoint;
// a stop signal during the evaluation before the first step (eval_on_start, a resume's pending
// one) ends with no step trained and no checkpoint written; a grace period that runs out names the
// last complete checkpoint; a stop signal while the final model is written lets it finish and is
// no success (exit 130); trainer.ddp_timeout ends a job whose rank stalls.
// Timings are generous bounds (a loaded 2-core machine), never exact.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "child_process.h"
#include "core/zt_test_util.h"
#include "dist/local_launch.h"
#include "dist/selftest.h"
#include "io/json.h"

namespace fs = std::filesystem;

namespace zt::dist {
namespace {

using test::Child;

const std::string kBin = ZT_BINARY;
const fs::path kCases = fs::path(ZT_SHARED_DATA) / ".." / "cases";
const fs::path kTokenizer = fs::path(ZT_SHARED_DATA) / "tokenizers" / "qwen2.5-instruct";
constexpr double kHangGuard = 180.0;  // seconds before a run counts as hung

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// The pids of `parent`'s child processes (the launcher's ranks), in start order.
std::vector<pid_t> children_of(pid_t parent) {
  std::istringstream in(slurp(fmt::format("/proc/{}/task/{}/children", parent, parent)));
  std::vector<pid_t> out;
  for (pid_t p; in >> p;) out.push_back(p);
  return out;
}

// The RANK of process `pid` (from its environment), or -1.
int rank_of(pid_t pid) {
  const std::string env = slurp(fmt::format("/proc/{}/environ", pid));
  std::istringstream in(env);
  for (std::string e; std::getline(in, e, '\0');)
    if (e.rfind("RANK=", 0) == 0) return std::stoi(e.substr(5));
  return -1;
}

// Stops (SIGSTOP) the launcher's rank `rank`; returns its pid, or -1 when there is no such rank.
pid_t stop_rank(const Child& launcher, int rank) {
  for (pid_t p : children_of(launcher.pid()))
    if (rank_of(p) == rank) return kill(p, SIGSTOP) == 0 ? p : -1;
  return -1;
}

// Sends SIGTERM to the launcher and waits for it: its exit status (-1: still running after the
// guard, then killed); *took: the seconds it took to end.
int sigterm_and_wait(Child& launcher, double* took) {
  const double t0 = now_s();
  if (kill(launcher.pid(), SIGTERM) != 0) return -2;
  const int st = launcher.wait(kHangGuard);
  *took = now_s() - t0;
  return st;
}

class LaunchFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::is_directory(kCases)) << kCases << " (../shared/cases beside the checkout)";
  }

  // A working folder for case `name`: a link to each entry of the (read-only) shared case folder;
  // the runs write their exp_dir and cache beside them, as the case's run.sh does.
  fs::path case_dir(const std::string& name) {
    const fs::path dst = tmp_.path() / name;
    fs::create_directories(dst);
    for (const auto& e : fs::directory_iterator(kCases / name))
      fs::create_symlink(e.path(), dst / e.path().filename());
    return dst;
  }

  // Beside model_h256/ of `dir`: model_h<hidden>/ (the same config-only Qwen2 with that width), to
  // keep steps and checkpoints small.
  static void write_model(const fs::path& dir, int hidden) {
    Json cfg = Json::parse(slurp(dir / "model_h256" / "config.json"));
    cfg["hidden_size"] = hidden;
    cfg["intermediate_size"] = 2 * hidden;
    const fs::path m = dir / fmt::format("model_h{}", hidden);
    fs::create_directories(m);
    std::ofstream(m / "config.json") << cfg.dump();
  }

  // `zerotune <command> --config sft.yaml …` run in `dir` (command: "train", or "launch
  // <launch options> train"), with the tokenizer folder `tokenizer`.
  static std::unique_ptr<Child> start(const fs::path& dir, const std::string& command,
                                      const std::string& overrides,
                                      const fs::path& tokenizer = kTokenizer) {
    const std::string cmd =
        fmt::format("cd '{}' && exec {} {} --config sft.yaml model.tokenizer_name_or_path={} {}",
                    dir.string(), kBin, command, tokenizer.string(), overrides);
    return std::make_unique<Child>(
        std::vector<std::string>{"/bin/sh", "-c", cmd},
        std::vector<std::string>{"ZT_COMM_TIMEOUT_S=", "RANK=", "WORLD_SIZE=", "MASTER_ADDR=",
                                 "MASTER_PORT=", "OMPI_COMM_WORLD_SIZE=", "PMIX_RANK="});
  }

  // `zerotune launch <launch_opts> train --config sft.yaml …` run in `dir` (launch_opts: the
  // process count and any other launcher option).
  static std::unique_ptr<Child> launch(const fs::path& dir, const std::string& launch_opts,
                                       const std::string& overrides) {
    return start(dir, "launch " + launch_opts + " train", overrides);
  }

  // Reads the child's output until `done(output)` holds (looked at every 0.1 s, output or not);
  // false when the child ended first or after the guard.
  static bool until(Child& c, const std::function<bool(const std::string&)>& done) {
    for (const double end = now_s() + kHangGuard; now_s() < end;) {
      if (c.read_until(done, 0.1)) return true;
      if (kill(c.pid(), 0) != 0) return false;
    }
    return false;
  }

  // until() metrics.jsonl of `exp` has the record of step `step`.
  static bool until_step(Child& c, const fs::path& exp, int step) {
    const std::string key = fmt::format("\"step\":{},", step);
    return until(c, [&](const std::string&) {
      return slurp(exp / "metrics.jsonl").find(key) != std::string::npos;
    });
  }

  // Starts the launch-sigterm case on 2 ranks with a hidden-16 model into `exp` (exp_dir, in the
  // case's working folder) and returns the launcher once step 3 is logged; nullptr when it is not.
  static std::unique_ptr<Child> small_run_at_step_3(const fs::path& exp, const std::string& opts,
                                                    const std::string& overrides) {
    const fs::path dir = exp.parent_path().parent_path();
    write_model(dir, 16);
    auto c = launch(dir, "--num_processes 2 " + opts,
                    fmt::format("exp_dir=runs/{} model.name_or_path=model_h16 {}",
                                exp.filename().string(), overrides));
    if (!until_step(*c, exp, 3)) {
      ADD_FAILURE() << c->output();
      return nullptr;
    }
    return c;
  }

  // global_step of the checkpoint `dir` (its trainer_state.json), -1 when it has none.
  static int64_t checkpoint_step(const fs::path& dir) {
    const fs::path st = dir / "trainer_state.json";
    if (!fs::exists(st)) return -1;
    return Json::parse(slurp(st)).at("global_step").get<int64_t>();
  }

  zt::testing::TempDir tmp_;
};

// `launch-sigterm-grace-loses-checkpoint` part 1: a SIGTERM during an evaluation (600 rows, one
// per batch: many seconds at hidden 64) is served at the next eval batch; the interrupt
// checkpoint of the step is written without the eval record.
TEST_F(LaunchFaults, SigtermDuringEvaluationSavesTheStepsCheckpoint) {
  const fs::path dir = case_dir("launch-sigterm-grace-loses-checkpoint");
  const fs::path exp = dir / "runs" / "eval";
  write_model(dir, 64);
  auto c = launch(dir, "--num_processes 2",
                  "exp_dir=runs/eval model.name_or_path=model_h64 dataset.eval.path=eval.jsonl "
                  "trainer.eval_strategy=steps "
                  "trainer.eval_steps=2 trainer.per_device_eval_batch_size=1 "
                  "trainer.save_steps=1000");
  ASSERT_TRUE(until_step(*c, exp, 2)) << c->output();
  double took = 0;
  EXPECT_EQ(sigterm_and_wait(*c, &took), 128 + SIGTERM) << c->output();
  EXPECT_NE(c->output().find("interrupted during the evaluation at step 2"), std::string::npos)
      << c->output();
  EXPECT_EQ(checkpoint_step(exp / "checkpoint-2"), 2) << c->output();
  EXPECT_NE(c->output().find("resume with trainer.resume_from_checkpoint=runs/eval/checkpoint-2"),
            std::string::npos)
      << c->output();
  EXPECT_EQ(slurp(exp / "metrics.jsonl").find("eval_loss"), std::string::npos);
  EXPECT_EQ(c->output().find("killing them"), std::string::npos) << c->output();
  EXPECT_LT(took, 60.0) << c->output();  // the whole evaluation alone takes about as long
}

// A SIGINT to a one-process `zerotune train` during eval_on_start's evaluation (600 rows, one per
// batch) stops the run there: no step is trained, no checkpoint or model is written, the exit
// status is an interrupt's (130), and the message's way to start again works.
TEST_F(LaunchFaults, SigintDuringTheStartEvaluationTrainsNoStep) {
  const fs::path dir = case_dir("launch-sigterm-grace-loses-checkpoint");
  const fs::path exp = dir / "runs" / "fresh";
  write_model(dir, 64);
  const std::string run =
      "exp_dir=runs/fresh model.name_or_path=model_h64 dataset.eval.path=eval.jsonl "
      "trainer.per_device_eval_batch_size=1 ";
  auto c = start(dir, "train", run + "trainer.eval_on_start=true");
  // metrics.jsonl is opened after the signal handlers are installed, just before the evaluation
  // (a signal before the evaluation abandons it at its first batch).
  ASSERT_TRUE(until(*c, [&](const std::string&) { return fs::exists(exp / "metrics.jsonl"); }))
      << c->output();
  ASSERT_EQ(kill(c->pid(), SIGINT), 0);
  ASSERT_EQ(c->wait(kHangGuard), 130) << c->output();
  const std::string& out = c->output();
  EXPECT_NE(out.find("interrupted during the evaluation at step 0 after "), std::string::npos)
      << out;
  EXPECT_NE(out.find("interrupted: stopped at step 0 before training any step"), std::string::npos)
      << out;
  EXPECT_NE(out.find("training was interrupted before its first step: nothing was trained and no "
                     "checkpoint was written; start the run again with "
                     "trainer.overwrite_output_dir=true"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("resume with"), std::string::npos) << out;
  EXPECT_EQ(out.find("saved "), std::string::npos) << out;
  EXPECT_EQ(slurp(exp / "metrics.jsonl"), "");  // neither a step nor the evaluation
  for (const auto& e : fs::directory_iterator(exp))
    EXPECT_FALSE(e.path().filename().string().starts_with("checkpoint-")) << e.path();
  EXPECT_FALSE(fs::exists(exp / "final"));
  auto again = start(dir, "train", run + "trainer.overwrite_output_dir=true trainer.max_steps=1");
  ASSERT_EQ(again->wait(kHangGuard), 0) << again->output();
  EXPECT_EQ(checkpoint_step(exp / "checkpoint-1"), 1) << again->output();
}

// A SIGINT while a large dataset is tokenised (300,000 rows; about 5 s here) ends the run at once.
// The stop flag was set and read only once the whole dataset was tokenised and cached, after
// which the run wrote args.yaml and metrics.jsonl and stopped "before its first step", leaving an
// exp_dir that only trainer.overwrite_output_dir gets past. Now nothing is written to exp_dir, and
// no partial token cache is left. The lone process says it was interrupted (to stderr), as the
// other phases do; it printed nothing before.
TEST_F(LaunchFaults, SigintDuringTokenisationEndsTheRunAtOnce) {
  const fs::path dir = case_dir("launch-sigterm-grace-loses-checkpoint");
  const fs::path exp = dir / "runs" / "tok";
  write_model(dir, 16);
  const zt::testing::CommandResult data = zt::testing::run_command(
      fmt::format("{} make-demo-data --out '{}' --train-rows 300000 --test-rows 1 --seed 1", kBin,
                  (dir / "big").string()));
  ASSERT_EQ(data.status, 0) << data.output;
  auto c =
      start(dir, "train",
            "exp_dir=runs/tok model.name_or_path=model_h16 dataset.train.path=big/train.parquet "
            "trainer.max_steps=1");
  // The cache's lock file is created just before the dataset is read and tokenised.
  ASSERT_TRUE(until(*c, [&](const std::string&) {
    if (!fs::is_directory(dir / "runs" / "cache")) return false;
    for (const auto& e : fs::directory_iterator(dir / "runs" / "cache"))
      if (e.path().extension() == ".lock") return true;
    return false;
  })) << c->output();
  ASSERT_EQ(kill(c->pid(), SIGINT), 0);
  EXPECT_EQ(c->wait(kHangGuard), 128 + SIGINT) << c->output();
  EXPECT_NE(c->output().find("zerotune: warning: training was interrupted while the datasets were "
                             "tokenised: nothing was trained and no checkpoint was written; the "
                             "same command starts the run again\n"),
            std::string::npos)
      << c->output();
  EXPECT_EQ(c->output().find("train data big/train.parquet"), std::string::npos) << c->output();
  EXPECT_FALSE(fs::exists(exp)) << c->output();
  for (const auto& e : fs::directory_iterator(dir / "runs" / "cache"))
    EXPECT_EQ(e.path().extension(), ".lock") << e.path();
}

// Waits until `fifo` has a reader (the child blocked opening it): returns a write end (kept open,
// so the reader then waits for bytes), or -1 when `c` ended first or after the guard.
int fifo_writer_once_read(Child& c, const fs::path& fifo) {
  for (const double end = now_s() + kHangGuard; now_s() < end; usleep(20 * 1000)) {
    const int w = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // ENXIO while no reader
    if (w >= 0) return w;
    if (kill(c.pid(), 0) != 0) return -1;
  }
  return -1;
}

// A SIGTERM in the first moments of a lone `zerotune train` (reading the config, loading the
// tokenizer: before the trainer's handlers were installed) ended it by the signal's default
// action: status 143 and not a word. Now it ends at once with status 130, as an interrupted run,
// saying so, with nothing written. The tokenizer's tokenizer_config.json is a FIFO, which the
// set-up opens and waits on until the signal is sent.
TEST_F(LaunchFaults, SigtermDuringTheSetUpEndsTheRunSayingSo) {
  const fs::path dir = case_dir("launch-sigterm-grace-loses-checkpoint");
  write_model(dir, 16);
  const fs::path tok = dir / "tok";
  fs::create_directories(tok);
  for (const auto& e : fs::directory_iterator(kTokenizer))
    if (e.path().filename() != "tokenizer_config.json")
      fs::create_symlink(e.path(), tok / e.path().filename());
  const fs::path fifo = tok / "tokenizer_config.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto c = start(dir, "train",
                 "exp_dir=runs/setup model.name_or_path=model_h16 trainer.max_steps=1", tok);
  const int w = fifo_writer_once_read(*c, fifo);
  ASSERT_GE(w, 0) << c->output();
  ASSERT_EQ(kill(c->pid(), SIGTERM), 0);
  EXPECT_EQ(c->wait(kHangGuard), 130) << c->output();
  close(w);
  EXPECT_NE(c->output().find("zerotune: warning: training was interrupted during its set-up: "
                             "nothing was trained and no checkpoint was written; the same command "
                             "starts the run again\n"),
            std::string::npos)
      << c->output();
  EXPECT_FALSE(fs::exists(dir / "runs" / "setup")) << c->output();
}

// The same for `zerotune launch` before it starts its ranks (here while it reads its accelerate
// config, a FIFO): it says so and exits 128 + the signal, as after a forwarded one; it ended by
// the default action, silently.
TEST_F(LaunchFaults, SigtermBeforeTheRanksStartEndsTheLauncherSayingSo) {
  const fs::path dir = case_dir("launch-sigterm-grace-loses-checkpoint");
  write_model(dir, 16);
  const fs::path fifo = dir / "accelerate_fifo.yaml";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto c = launch(dir, "--config_file accelerate_fifo.yaml",
                  "exp_dir=runs/launch_setup model.name_or_path=model_h16 trainer.max_steps=1");
  const int w = fifo_writer_once_read(*c, fifo);
  ASSERT_GE(w, 0) << c->output();
  ASSERT_EQ(kill(c->pid(), SIGTERM), 0);
  EXPECT_EQ(c->wait(kHangGuard), 128 + SIGTERM) << c->output();
  close(w);
  EXPECT_NE(c->output().find("zerotune: warning: launch: interrupted before any process was "
                             "started; nothing was run\n"),
            std::string::npos)
      << c->output();
  EXPECT_EQ(c->output().find("launch: starting"), std::string::npos) << c->output();
  EXPECT_FALSE(fs::exists(dir / "runs" / "launch_setup")) << c->output();
}

// A SIGTERM to a one-process `zerotune train` while it writes its final model — after the last
// step's stop check — ended the run with status 0, as if it had finished. Now the export finishes
// (whole: written under a temporary name, then renamed) and the run says it was stopped, exiting
// 130. The tokenizer folder's added_tokens.json is a FIFO, which only the model export reads: the
// export waits on it until the signal is sent and the file's bytes written.
TEST_F(LaunchFaults, SigtermDuringTheFinalExportIsNotSuccess) {
  const fs::path dir = case_dir("launch-sigterm-grace-loses-checkpoint");
  const fs::path exp = dir / "runs" / "end";
  write_model(dir, 16);
  const fs::path tok = dir / "tok";
  fs::create_directories(tok);
  for (const auto& e : fs::directory_iterator(kTokenizer))
    fs::create_symlink(e.path(), tok / e.path().filename());
  const fs::path fifo = tok / "added_tokens.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto c = start(dir, "train",
                 "exp_dir=runs/end model.name_or_path=model_h16 trainer.max_steps=2 "
                 "trainer.save_strategy=no",
                 tok);
  // Opening it for writing succeeds once the export has it open for reading.
  int fd = -1;
  ASSERT_TRUE(until(*c, [&](const std::string&) {
    fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    return fd >= 0;
  })) << c->output();
  ASSERT_EQ(kill(c->pid(), SIGTERM), 0);
  EXPECT_EQ(write(fd, "{}", 2), 2);
  close(fd);
  ASSERT_EQ(c->wait(kHangGuard), 130) << c->output();
  const std::string& out = c->output();
  EXPECT_NE(out.find("saved the final model to runs/end/final"), std::string::npos) << out;
  EXPECT_NE(out.find("interrupted: SIGTERM came after the last step's stop check, while the last "
                     "checkpoint, the best model or the final model was written"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("training was stopped by SIGTERM after its last step, while its outputs were "
                     "written: every step was trained and the final model in runs/end/final was "
                     "written whole, but the run did not end on its own"),
            std::string::npos)
      << out;
  EXPECT_EQ(slurp(exp / "final" / "added_tokens.json"), "{}");
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors",
                        "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(fs::is_regular_file(exp / "final" / f)) << f;
  for (const auto& e : fs::directory_iterator(exp)) {  // no staging directory left beside it
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
    EXPECT_EQ(e.path().filename().string().find(".old."), std::string::npos) << e.path();
  }
}

// Resumed at a step whose evaluation a stop signal had abandoned (eval_pending), a SIGTERM during
// that evaluation stops the 2-rank job before it trains a step: the checkpoint resumed from is left
// as it was and named for the next resume, which runs the pending evaluation first.
TEST_F(LaunchFaults, SigtermDuringAResumesPendingEvaluationKeepsItPending) {
  const fs::path dir = case_dir("launch-sigterm-grace-loses-checkpoint");
  const fs::path exp = dir / "runs" / "pend";
  write_model(dir, 64);
  const std::string run = "exp_dir=runs/pend model.name_or_path=model_h64 ";
  auto first = launch(dir, "--num_processes 2", run + "trainer.max_steps=2 trainer.save_steps=2");
  ASSERT_EQ(first->wait(kHangGuard), 0) << first->output();
  const fs::path state = exp / "checkpoint-2" / "zerotune_state.json";
  Json st = Json::parse(slurp(state));
  ASSERT_EQ(st["eval_pending"], false);
  st["eval_pending"] = true;
  std::ofstream(state) << st.dump(2);
  const std::string state_bytes = slurp(state), metrics = slurp(exp / "metrics.jsonl");
  ASSERT_NE(metrics.find("\"step\":2,"), std::string::npos) << metrics;
  const std::string final_model = slurp(exp / "final" / "model.safetensors");  // step 2's
  ASSERT_GT(final_model.size(), 1000u);

  const std::string resume = run +
                             "trainer.resume_from_checkpoint=true trainer.max_steps=3 "
                             "trainer.per_device_eval_batch_size=1 ";
  auto c = launch(dir, "--num_processes 2", resume + "dataset.eval.path=eval.jsonl");
  // Logged after every rank has loaded the checkpoint (a collective), so all handle the signal.
  ASSERT_TRUE(until(*c, [](const std::string& o) {
    return o.find("resumed from runs/pend/checkpoint-2 at step 2") != std::string::npos;
  })) << c->output();
  double took = 0;
  EXPECT_EQ(sigterm_and_wait(*c, &took), 128 + SIGTERM) << c->output();
  const std::string& out = c->output();
  EXPECT_NE(out.find("interrupted during the evaluation at step 2 after "), std::string::npos)
      << out;
  EXPECT_NE(out.find("interrupted: stopped at step 2 before training any step"), std::string::npos)
      << out;
  EXPECT_NE(out.find("resume with trainer.resume_from_checkpoint=runs/pend/checkpoint-2\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("killing them"), std::string::npos) << out;
  EXPECT_EQ(slurp(state), state_bytes);  // eval_pending still true
  EXPECT_EQ(slurp(exp / "metrics.jsonl"), metrics);
  EXPECT_FALSE(fs::exists(exp / "checkpoint-3"));
  EXPECT_TRUE(slurp(exp / "final" / "model.safetensors") == final_model);  // not exported again

  // The next resume (8 eval rows, to be quick) evaluates step 2 first, then trains step 3.
  {
    std::ifstream in(dir / "eval.jsonl");
    std::ofstream few(dir / "eval8.jsonl");
    std::string line;
    for (int i = 0; i < 8 && std::getline(in, line); ++i) few << line << '\n';
  }
  auto d = launch(dir, "--num_processes 2", resume + "dataset.eval.path=eval8.jsonl");
  ASSERT_EQ(d->wait(kHangGuard), 0) << d->output();
  std::vector<std::string> events;  // "eval <step>" / "train <step>" in metrics.jsonl's order
  std::istringstream lines(slurp(exp / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const Json j = Json::parse(line);
    events.push_back(
        fmt::format("{} {}", j.contains("eval_loss") ? "eval" : "train", j["step"].get<int64_t>()));
  }
  EXPECT_EQ(events, (std::vector<std::string>{"train 1", "train 2", "eval 2", "train 3"}));
  EXPECT_EQ(checkpoint_step(exp / "checkpoint-3"), 3) << d->output();
}

// Part 2 with the default grace (30 s, torchrun's): a SIGTERM between steps ends with the
// interrupt checkpoint of the step the ranks agreed on.
TEST_F(LaunchFaults, SigtermBetweenStepsSavesTheInterruptCheckpoint) {
  const fs::path exp = case_dir("launch-sigterm-grace-loses-checkpoint") / "runs" / "step";
  auto c = small_run_at_step_3(exp, "", "trainer.save_steps=1000");
  ASSERT_TRUE(c) << "the run did not reach step 3";
  ASSERT_EQ(kill(c->pid(), SIGTERM), 0);
  const int st = c->wait(kHangGuard);
  ASSERT_NE(st, -1) << "hung\n" << c->output();
  EXPECT_EQ(st, 128 + SIGTERM) << c->output();
  const size_t at = c->output().find("interrupted: stopped after step ");
  ASSERT_NE(at, std::string::npos) << c->output();
  const int step = std::stoi(c->output().substr(at + 32));
  EXPECT_GE(step, 3);
  EXPECT_EQ(checkpoint_step(exp / fmt::format("checkpoint-{}", step)), step) << c->output();
  EXPECT_EQ(c->output().find("killing them"), std::string::npos) << c->output();
}

// When the grace period runs out (here: rank 1 stopped with SIGSTOP, --kill_grace_s 1), the ranks
// are killed and the launcher names the last complete checkpoint.
TEST_F(LaunchFaults, GraceRunningOutNamesTheLastCompleteCheckpoint) {
  const fs::path dir = case_dir("launch-sigterm-grace-loses-checkpoint");
  const fs::path exp = dir / "runs" / "grace";
  auto c = small_run_at_step_3(exp, "--kill_grace_s 1", "trainer.save_steps=2");
  ASSERT_TRUE(c) << "the run did not reach step 3";
  const pid_t r1 = stop_rank(*c, 1);
  ASSERT_GT(r1, 0) << c->output();
  double took = 0;
  EXPECT_EQ(sigterm_and_wait(*c, &took), 128 + SIGTERM) << c->output();
  const std::string msg =
      "ranks killed before the interrupt checkpoint was written; last complete checkpoint: ";
  const size_t at = c->output().find(msg);
  ASSERT_NE(at, std::string::npos) << c->output();
  const size_t from = at + msg.size();
  // Relative to the launcher's directory, as the ranks' exp_dir is.
  const fs::path named = dir / c->output().substr(from, c->output().find('\n', from) - from);
  // The named checkpoint is complete and the newest one in exp_dir (checkpoint-2, or -4 if rank 1
  // got that far before it was stopped).
  const int64_t step = checkpoint_step(named);
  EXPECT_GE(step, 2) << named;
  for (const auto& e : fs::directory_iterator(exp)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("checkpoint-", 0) == 0 && n.find('.') == std::string::npos) {
      EXPECT_LE(std::stoll(n.substr(11)), step) << n;
    }
  }
  EXPECT_LT(took, 30.0) << c->output();
  EXPECT_NE(kill(r1, 0), 0) << "rank 1 still exists";
}

// A second run started in the exp_dir of a live one (a job started twice, a requeue while the
// first still runs) wrote the same checkpoint directories, rotated the other's and interleaved
// metrics.jsonl; a resume also rewrote the run record and a trainer.overwrite_output_dir run
// deleted the live run's metrics.jsonl. Now each is refused, naming the live run's pid, and
// changes nothing; once that run is gone (even killed with SIGKILL) the lock goes with it.
TEST_F(LaunchFaults, SecondRunInTheExpDirOfALiveRunIsRefused) {
  const fs::path dir = case_dir("launch-sigterm-grace-loses-checkpoint");
  const fs::path exp = dir / "runs" / "busy";
  write_model(dir, 16);
  const std::string run =
      "exp_dir=runs/busy model.name_or_path=model_h16 trainer.max_steps=100000 ";
  auto a = start(dir, "train", run + "trainer.save_steps=2 trainer.save_total_limit=2");
  ASSERT_TRUE(until_step(*a, exp, 3)) << a->output();
  const std::string record = slurp(exp / "zerotune_run.json");
  const std::string busy = fmt::format(
      "exp_dir runs/busy is in use by another zerotune run (pid {}, per "
      "runs/busy/.zerotune.lock)",
      a->pid());
  for (const char* how :
       {"trainer.resume_from_checkpoint=true", "trainer.overwrite_output_dir=true",
        "trainer.resume_from_checkpoint=runs/busy/checkpoint-2"}) {
    auto b = start(dir, "train", run + how);
    EXPECT_EQ(b->wait(kHangGuard), 1) << how << "\n" << b->output();
    EXPECT_NE(b->output().find(busy), std::string::npos) << how << "\n" << b->output();
    EXPECT_EQ(b->output().find("resumed from"), std::string::npos) << b->output();
  }
  EXPECT_EQ(slurp(exp / "zerotune_run.json"), record);
  // The live run goes on, its metrics.jsonl whole (its first step is still there).
  ASSERT_TRUE(until_step(*a, exp, 8)) << a->output();
  EXPECT_NE(slurp(exp / "metrics.jsonl").find("\"step\":1,"), std::string::npos);
  ASSERT_EQ(kill(a->pid(), SIGKILL), 0);
  EXPECT_EQ(a->wait(kHangGuard), 128 + SIGKILL);
  // No stale lock: the run resumes from its newest complete checkpoint.
  auto c = start(dir, "train", run + "trainer.resume_from_checkpoint=true");
  EXPECT_TRUE(until(*c, [](const std::string& o) {
    return o.find("resumed from runs/busy/checkpoint-") != std::string::npos;
  })) << c->output();
  ASSERT_EQ(kill(c->pid(), SIGTERM), 0);
  EXPECT_EQ(c->wait(kHangGuard), 130) << c->output();
}

// `ddp-timeout-ignored`: trainer.ddp_timeout (3 s here) is the collective timeout: rank 1 stopped
// with SIGSTOP makes the job end non-zero within about that, naming rank 1.
TEST_F(LaunchFaults, DdpTimeoutEndsAStalledJobNamingTheRank) {
  const fs::path dir = case_dir("ddp-timeout-ignored");
  const fs::path exp = dir / "runs" / "ddp";
  auto c = launch(dir, "--num_processes 2",
                  "exp_dir=runs/ddp trainer.ddp_timeout=3 trainer.logging_steps=1");
  ASSERT_TRUE(until_step(*c, exp, 2)) << c->output();
  const pid_t r1 = stop_rank(*c, 1);
  ASSERT_GT(r1, 0) << c->output();
  const double t0 = now_s();
  const int st = c->wait(kHangGuard);
  const double took = now_s() - t0;
  ASSERT_NE(st, -1) << "hung\n" << c->output();
  EXPECT_EQ(st, 1) << c->output();
  EXPECT_NE(c->output().find("waiting on rank(s) 1 (trainer.ddp_timeout / ZT_COMM_TIMEOUT_S)"),
            std::string::npos)
      << c->output();
  EXPECT_NE(c->output().find("made no progress for 3 s"), std::string::npos) << c->output();
  EXPECT_EQ(c->output().find("changes nothing"), std::string::npos) << c->output();
  EXPECT_LT(took, 30.0) << c->output();  // the default timeout would be 1800 s
  EXPECT_NE(kill(r1, 0), 0) << "rank 1 still exists";
}

// A ddp_timeout that is not a positive whole number of seconds is refused naming the key.
TEST_F(LaunchFaults, DdpTimeoutOfZeroIsRefused) {
  const fs::path dir = case_dir("ddp-timeout-ignored");
  const zt::testing::CommandResult r = zt::testing::run_command(
      fmt::format("cd '{}' && {} train --config sft.yaml model.tokenizer_name_or_path={} "
                  "trainer.ddp_timeout=0",
                  dir.string(), kBin, kTokenizer.string()));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("trainer.ddp_timeout"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "runs" / "stall" / "metrics.jsonl"));
}

// ---------------------------------------------------------------- several nodes (issue 16 item 4)

// Two "nodes" on this machine (two launchers, --nnodes 2, one rank each) train the same bits as
// one launcher of two ranks: the losses and gradient norms of every step and the final model.
TEST_F(LaunchFaults, TwoNodesTrainTheBitsOfOneNode) {
  const fs::path dir = case_dir("ddp-timeout-ignored");
  const std::string run = "trainer.max_steps=4 trainer.logging_steps=1 trainer.save_strategy=no ";
  auto one = launch(dir, "--num_processes 2", run + "exp_dir=runs/one");
  ASSERT_EQ(one->wait(kHangGuard), 0) << one->output();
  const int port = pick_free_port("127.0.0.1");
  std::vector<std::unique_ptr<Child>> nodes;
  for (int node = 0; node < 2; ++node)
    nodes.push_back(launch(dir,
                           fmt::format("--nnodes 2 --node_rank {} --nproc_per_node 1 "
                                       "--master_addr 127.0.0.1 --master_port {}",
                                       node, port),
                           run + "exp_dir=runs/two"));
  for (int node = 0; node < 2; ++node) {
    Child& c = *nodes[static_cast<size_t>(node)];
    ASSERT_EQ(c.wait(kHangGuard), 0) << "node " << node << "\n" << c.output();
    EXPECT_NE(c.output().find(fmt::format("launch: node {} of 2: starting ranks {}..{} of 2", node,
                                          node, node)),
              std::string::npos)
        << c.output();
  }
  EXPECT_NE(nodes[0]->output().find("rank 0 of 2 (tcp comm)"), std::string::npos)
      << nodes[0]->output();
  auto steps = [](const fs::path& exp) {
    std::vector<std::string> out;
    std::istringstream in(slurp(exp / "metrics.jsonl"));
    for (std::string line; std::getline(in, line);) {
      const Json j = Json::parse(line);
      if (j.contains("loss")) out.push_back(j["loss"].dump() + " " + j["grad_norm"].dump());
    }
    return out;
  };
  const auto a = steps(dir / "runs" / "one"), b = steps(dir / "runs" / "two");
  EXPECT_EQ(a.size(), 4u);
  EXPECT_EQ(a, b);
  const std::string ma = slurp(dir / "runs" / "one" / "final" / "model.safetensors");
  EXPECT_GT(ma.size(), 100000u);
  EXPECT_TRUE(ma == slurp(dir / "runs" / "two" / "final" / "model.safetensors"));
}

// `zerotune launch --nnodes 2 --node_rank 0|1 --nproc_per_node 2 … comm-check --rounds K`: the two
// launchers of a 4-rank job on this machine (node 0 first).
std::vector<std::unique_ptr<Child>> two_node_comm_check(int rounds) {
  const int port = pick_free_port("127.0.0.1");
  std::vector<std::unique_ptr<Child>> nodes;
  for (int node = 0; node < 2; ++node)
    nodes.push_back(std::make_unique<Child>(
        std::vector<std::string>{kBin, "launch", "--nnodes", "2", "--node_rank",
                                 std::to_string(node), "--nproc_per_node", "2", "--master_port",
                                 std::to_string(port), "comm-check", "--elements", "1001",
                                 "--rounds", std::to_string(rounds)},
        std::vector<std::string>{"RANK=", "WORLD_SIZE=", "MASTER_ADDR=", "MASTER_PORT=",
                                 "OMPI_COMM_WORLD_SIZE=", "PMIX_RANK="}));
  return nodes;
}

// The collective self-test over two nodes of two ranks: every rank's digest is the 4-rank one.
TEST(TwoNodes, SelftestBitwiseOverTwoLaunchers) {
  auto nodes = two_node_comm_check(1);
  std::string all;
  for (auto& c : nodes) {
    ASSERT_EQ(c->wait(kHangGuard), 0) << c->output();
    all += c->output();
  }
  for (int r = 0; r < 4; ++r)
    EXPECT_NE(all.find(fmt::format("comm-check: rank {} ok digest {:016x}", r,
                                   selftest_expected_digest(4, 1001))),
              std::string::npos)
        << all;
  EXPECT_NE(nodes[1]->output().find("rank 3/4 local_rank 1/2 backend tcp"), std::string::npos)
      << nodes[1]->output();
}

// A node that dies (its launcher and ranks SIGKILLed) ends every rank of the other node non-zero
// within a minute.
TEST(TwoNodes, NodeThatDiesEndsTheOtherNode) {
  auto nodes = two_node_comm_check(100000000);
  for (auto& c : nodes)
    ASSERT_TRUE(c->read_until(
        [](const std::string& o) { return test::count_of(o, "backend tcp pid") == 2; }, kHangGuard))
        << c->output();
  const std::vector<pid_t> ranks0 = children_of(nodes[0]->pid());
  ASSERT_EQ(ranks0.size(), 2u);
  ASSERT_EQ(kill(-nodes[1]->pid(), SIGKILL), 0);  // the whole of node 1
  const double t0 = now_s();
  const int st = nodes[0]->wait(kHangGuard);
  const double took = now_s() - t0;
  ASSERT_NE(st, -1) << "node 0 hung\n" << nodes[0]->output();
  EXPECT_EQ(st, 1) << nodes[0]->output();
  EXPECT_NE(nodes[0]->output().find("exited or failed"), std::string::npos) << nodes[0]->output();
  EXPECT_LT(took, 60.0) << nodes[0]->output();
  for (pid_t p : ranks0) EXPECT_NE(kill(p, 0), 0) << "rank pid " << p << " still exists";
}

}  // namespace
}  // namespace zt::dist
