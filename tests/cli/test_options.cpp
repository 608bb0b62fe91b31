// Options declared once (cli/config_schema.h, cli/train_options.h): the declarations fill
// TrainArgs (enums after parsing, null → the documented value), README.md's key table is the one
// the declarations print (`zerotune options`), and every command reads its command line with one
// error style (cli/command_line.h).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cli/command_line.h"
#include "cli/config_schema.h"
#include "cli/run_config.h"
#include "core/zt_test_util.h"
#include "train/train_args.h"

namespace {

using zt::Json;
using zt::cli::RunConfig;
using zt::train::IntervalStrategy;
using zt::train::NanPolicy;
using zt::train::Optimizer;
using zt::train::TrainArgs;

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// logging_steps / eval_steps / save_steps below 1 are transformers' ratios of the total steps:
// TrainerState.compute_steps makes each math.ceil(max_steps * ratio) (transformers 4.57.1
// trainer_callback.py); eval_steps null stays logging_steps; whole floats are counts.
TEST(Options, StepsGivenAsRatiosResolveAsTransformersComputeSteps) {
  const RunConfig cfg = RunConfig::from_json(
      {{"trainer", {{"logging_steps", 0.25}, {"eval_steps", 0.1}, {"save_steps", 20.0}}}},
      "sft.yaml");
  TrainArgs a;
  zt::cli::read_declared_options(cfg, a);
  EXPECT_EQ(a.logging_steps_ratio, 0.25);
  EXPECT_EQ(a.eval_steps_ratio, 0.1);
  EXPECT_EQ(a.save_steps_ratio, 0.0);
  EXPECT_EQ(a.save_steps, 20);
  a.resolve_step_ratios(37);
  EXPECT_EQ(a.logging_steps, 10);  // ceil(9.25)
  EXPECT_EQ(a.eval_steps, 4);      // ceil(3.7)
  EXPECT_EQ(a.save_steps, 20);
  a.eval_steps_ratio = 0.07;
  a.resolve_step_ratios(100);  // 100 * 0.07 is 7.000000000000001 in floats: math.ceil gives 8
  EXPECT_EQ(a.eval_steps, 8);
  TrainArgs n;
  zt::cli::read_declared_options(
      RunConfig::from_json({{"trainer", {{"eval_steps", nullptr}}}}, "s.yaml"), n);
  n.resolve_step_ratios(100);
  EXPECT_EQ(n.eval_steps, 0);  // null: the (resolved) logging_steps
  EXPECT_EQ(n.logging_steps, 10);
}

// A count is read exactly: an integer beyond 2^53 (a double would round 2^53 + 1 to 2^53), as
// Python's int keeps it; a whole float (10.0) is TrainingArguments.__post_init__'s int(10.0).
TEST(Options, StepCountsAreReadExactly) {
  const int64_t big = (int64_t{1} << 53) + 1;
  const RunConfig cfg = RunConfig::from_json(
      {{"trainer",
        {{"logging_steps", big}, {"eval_steps", 10.0}, {"save_steps", int64_t{1} << 62}}}},
      "sft.yaml");
  TrainArgs a;
  zt::cli::read_declared_options(cfg, a);
  EXPECT_EQ(a.logging_steps, big);
  EXPECT_EQ(a.eval_steps, 10);
  EXPECT_EQ(a.save_steps, int64_t{1} << 62);
  EXPECT_EQ(a.logging_steps_ratio, 0.0);
  EXPECT_EQ(a.eval_steps_ratio, 0.0);
  a.resolve_step_ratios(1000);  // no ratio: the counts stay
  EXPECT_EQ(a.logging_steps, big);
}

TEST(Options, DeclarationsFillTrainArgsWithTheirDefaults) {
  const RunConfig cfg = RunConfig::from_json(Json::object(), "sft.yaml");
  TrainArgs a;
  zt::cli::read_declared_options(cfg, a);
  EXPECT_EQ(a.learning_rate, 2e-5);
  EXPECT_EQ(a.lr_scheduler_type, zt::optim::LrScheduleKind::kLinear);
  EXPECT_EQ(a.optim, Optimizer::kAdamWTorch);
  EXPECT_EQ(a.save_strategy, zt::train::SaveStrategy::kSteps);
  EXPECT_EQ(a.eval_strategy, IntervalStrategy::kNo);
  EXPECT_EQ(a.nan_policy, NanPolicy::kError);
  EXPECT_EQ(a.save_steps, 500);
  EXPECT_EQ(a.logging_steps, 10);
  EXPECT_EQ(a.eval_steps, 0);        // null: logging_steps
  EXPECT_EQ(a.save_total_limit, 0);  // null: keep all
  EXPECT_EQ(a.max_grad_norm, 1.0);
  EXPECT_EQ(a.num_train_epochs, 3.0);
  EXPECT_EQ(a.max_steps, -1);
  EXPECT_EQ(a.per_device_train_batch_size, 8);
  EXPECT_EQ(a.gradient_accumulation_steps, 1);
  EXPECT_EQ(a.seed, 42u);
  EXPECT_TRUE(a.gradient_checkpointing);
  EXPECT_TRUE(a.balance_micro_batches);
  EXPECT_EQ(a.cross_entropy_workspace_mib, 512);  // kCeBudgetBytes
  EXPECT_FALSE(a.dataloader_drop_last);
}

TEST(Options, GivenValuesArriveTyped) {
  const RunConfig cfg = RunConfig::from_json(
      {{"trainer",
        {{"save_strategy", "epoch"},
         {"eval_strategy", "steps"},
         {"nan_policy", "skip"},
         {"lr_scheduler_type", "constant_with_warmup"},
         {"optim", "adamw_torch_fused"},
         {"max_grad_norm", nullptr},
         {"eval_steps", 7},
         {"save_total_limit", 2},
         {"warmup_steps", 0.25},
         {"seed", 4294967295}}},
       {"compute", {{"balance_micro_batches", false}, {"cross_entropy_workspace_mib", 2048}}}},
      "sft.yaml");
  TrainArgs a;
  zt::cli::read_declared_options(cfg, a);
  EXPECT_EQ(a.save_strategy, zt::train::SaveStrategy::kEpoch);
  EXPECT_EQ(a.eval_strategy, IntervalStrategy::kSteps);
  EXPECT_EQ(a.nan_policy, NanPolicy::kSkip);
  EXPECT_EQ(a.lr_scheduler_type, zt::optim::LrScheduleKind::kConstantWithWarmup);
  EXPECT_EQ(a.optim, Optimizer::kAdamWTorchFused);
  EXPECT_EQ(a.max_grad_norm, 0.0);  // null: no clipping
  EXPECT_EQ(a.eval_steps, 7);
  EXPECT_EQ(a.save_total_limit, 2);
  EXPECT_EQ(a.warmup_steps, 0.25);
  EXPECT_EQ(a.seed, 4294967295u);
  EXPECT_FALSE(a.balance_micro_batches);
  EXPECT_EQ(a.cross_entropy_workspace_mib, 2048);
}

// save_total_limit null, 0 or negative keeps every checkpoint, as transformers'
// _rotate_checkpoints returns for `None or <= 0` (-1 was refused).
TEST(Options, NonPositiveSaveTotalLimitKeepsEveryCheckpoint) {
  for (const int64_t limit : {int64_t{-1}, int64_t{0}, int64_t{-100}}) {
    const RunConfig cfg =
        RunConfig::from_json({{"trainer", {{"save_total_limit", limit}}}}, "sft.yaml");
    TrainArgs a;
    zt::cli::read_declared_options(cfg, a);
    EXPECT_EQ(a.save_total_limit, limit);
  }
}

TEST(Options, EnumChoicesAreTheEnumNames) {
  const auto* s = zt::cli::find_key("trainer.save_strategy");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->rule.choices, (std::vector<std::string_view>{"no", "steps", "epoch", "best"}));
  EXPECT_TRUE(s->rule.unsupported.empty());
  EXPECT_EQ(zt::cli::describe_rule(s->rule), "one of: no, steps, epoch, best");
  const auto* sched = zt::cli::find_key("trainer.lr_scheduler_type");
  ASSERT_NE(sched, nullptr);
  EXPECT_EQ(sched->rule.choices,
            (std::vector<std::string_view>{"linear", "cosine", "constant", "constant_with_warmup",
                                           "cosine_with_restarts", "polynomial", "inverse_sqrt",
                                           "cosine_with_min_lr", "cosine_warmup_with_min_lr",
                                           "warmup_stable_decay"}));
  EXPECT_EQ(sched->rule.unsupported, (std::vector<std::string_view>{"reduce_lr_on_plateau"}));
  EXPECT_EQ(zt::cli::describe_rule(zt::cli::find_key("trainer.eval_steps")->rule),
            "an integer number of steps >= 0, or a ratio in (0, 1) of the total steps, or null");
  EXPECT_EQ(zt::cli::find_key("trainer.nan_policy")->default_value, Json("error"));
  EXPECT_EQ(zt::cli::find_key("trainer.warmup_steps")->default_value.dump(),
            "0");  // as TRL spells it
}

TEST(Options, ReadmeKeyTableIsTheDeclarations) {
  const std::string readme = slurp(std::string(ZT_SOURCE_DIR) + "/README.md");
  const std::string begin = "<!-- options:begin (zerotune options) -->\n",
                    end = "<!-- options:end -->";
  const size_t b = readme.find(begin), e = readme.find(end);
  ASSERT_NE(b, std::string::npos) << "README.md has no " << begin;
  ASSERT_NE(e, std::string::npos);
  EXPECT_EQ(readme.substr(b + begin.size(), e - b - begin.size()), zt::cli::acted_keys_markdown())
      << "README.md's key table differs from the declarations: replace it by the output of "
         "`./build/zerotune options`";
}

struct CmdResult {
  int status;
  std::string out, err;
};

// Runs the zerotune binary with `args` (shell words), `env` (e.g. "TMPDIR=/x") set for it alone.
CmdResult run_zerotune(const std::string& args, const std::string& env = "") {
  zt::testing::TempDir tmp;
  const std::string out = (tmp / "out").string(), err = (tmp / "err").string();
  const std::string prefix = env.empty() ? "" : env + " ";
  const int rc = std::system(
      (prefix + std::string(ZT_BINARY) + " " + args + " >" + out + " 2>" + err).c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp(out), slurp(err)};
}

TEST(CommandLine, EveryCommandHasOneUsageErrorStyle) {
  const CmdResult r = run_zerotune("render --tokenizer x --bogus y.jsonl");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err,
            "zerotune: error: render: The following argument was not expected: --bogus\n"
            "usage: zerotune render --tokenizer DIR FILE.jsonl (`zerotune render --help` lists the "
            "options)\n");
  for (const char* cmd : {"train", "prepare", "loss", "tokenize", "comm-check", "make-demo-data",
                          "compare", "options"}) {
    const CmdResult u = run_zerotune(std::string(cmd) + " --no-such-option");
    EXPECT_EQ(u.status, 2) << cmd << ": " << u.err;
    EXPECT_EQ(u.err.rfind(std::string("zerotune: error: ") + cmd + ": ", 0), 0u) << u.err;
    EXPECT_NE(u.err.find(std::string("\nusage: zerotune ") + cmd), std::string::npos) << u.err;
    const CmdResult h = run_zerotune(std::string(cmd) + " --help");
    EXPECT_EQ(h.status, 0) << cmd;
    EXPECT_NE(h.out.find("--help"), std::string::npos) << cmd << ": " << h.out;
  }
}

// `zerotune --help` / `-h` prints the command list to stdout, exit 0 (a fresh user's
// `zerotune --help | less` showed nothing: it went to stderr); no command at all, or an unknown
// one, prints it to stderr, exit 2.
TEST(CommandLine, TopLevelHelpGoesToStdoutAndAMissingCommandToStderr) {
  for (const char* flag : {"--help", "-h"}) {
    const CmdResult h = run_zerotune(flag);
    EXPECT_EQ(h.status, 0) << flag;
    EXPECT_EQ(h.out.rfind("usage: zerotune <command> [options]\n\ncommands:\n  version ", 0), 0u)
        << flag << ": " << h.out;
    EXPECT_EQ(h.err, "") << flag;
  }
  const CmdResult none = run_zerotune("");
  EXPECT_EQ(none.status, 2);
  EXPECT_EQ(none.out, "");
  EXPECT_EQ(none.err.rfind("usage: zerotune <command> [options]\n", 0), 0u) << none.err;
  const CmdResult bad = run_zerotune("trian");
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(bad.out, "");
  EXPECT_EQ(bad.err.rfind("zerotune: unknown command 'trian'\nusage: zerotune <command>", 0), 0u)
      << bad.err;
}

// Every command's --help names it as it is typed: "Usage: zerotune <command> …" (most printed
// "Usage: [OPTIONS] …" with no command at all, some "Usage: <command>" without "zerotune").
TEST(CommandLine, EveryCommandsHelpNamesZerotuneAndTheCommand) {
  for (const char* cmd : {"version", "train", "prepare", "launch", "comm-check", "loss",
                          "make-demo-data", "tokenize", "render", "options", "compare"}) {
    const CmdResult h = run_zerotune(std::string(cmd) + " --help");
    EXPECT_EQ(h.status, 0) << cmd << ": " << h.err;
    const std::string usage = std::string("Usage: zerotune ") + cmd + " ";
    EXPECT_NE(h.out.find("\n" + usage), std::string::npos) << cmd << ": " << h.out;
    EXPECT_EQ(h.out.find("Usage: ["), std::string::npos) << cmd << ": " << h.out;
  }
  // version, which took no options, now says so like the others.
  const CmdResult v = run_zerotune("version --bogus");
  EXPECT_EQ(v.status, 2);
  EXPECT_EQ(v.err,
            "zerotune: error: version: The following argument was not expected: --bogus\n"
            "usage: zerotune version (`zerotune version --help` lists the options)\n");
  EXPECT_EQ(run_zerotune("version").out.rfind("zerotune 0.1.0 (backends: cpu", 0), 0u);
}

// `zerotune --version` (users type it; it was "unknown command '--version'") prints what
// `zerotune version` prints, to stdout, exit 0; an argument after it is the version command's.
TEST(CommandLine, VersionFlagPrintsTheVersion) {
  const CmdResult cmd = run_zerotune("version");
  ASSERT_EQ(cmd.status, 0) << cmd.err;
  ASSERT_EQ(cmd.out.rfind("zerotune 0.1.0 (backends: cpu", 0), 0u) << cmd.out;
  const CmdResult flag = run_zerotune("--version");
  EXPECT_EQ(flag.status, 0) << flag.err;
  EXPECT_EQ(flag.out, cmd.out);
  EXPECT_EQ(flag.err, "");
  const CmdResult bad = run_zerotune("--version --bogus");
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(bad.err.rfind("zerotune: error: version: The following argument was not expected: "
                          "--bogus\n",
                          0),
            0u)
      << bad.err;
  EXPECT_NE(run_zerotune("--help").out.find("\n  --version "), std::string::npos);
}

// `zerotune launch` given an accelerate-launch flag it does not take: a usage error before any rank
// starts (every rank was started with the flag as its command, and each failed on its own).
TEST(CommandLine, LaunchRefusesAnUnknownFlagBeforeStartingRanks) {
  const CmdResult r =
      run_zerotune("launch --num_processes 2 --mixed_precision fp16 train --config x");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err.rfind("zerotune: error: launch: '--mixed_precision' is not a launch option; ", 0),
            0u)
      << r.err;
  EXPECT_EQ(r.err.find("starting"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("unknown command"), std::string::npos) << r.err;
  EXPECT_EQ(run_zerotune("launch -n 2 train").status, 2);
}

// `zerotune launch` given a script, as `accelerate launch … sft.py ARGS` takes one: a usage error
// naming it and the command to run instead, before any rank starts (every rank was started on it
// and failed with "unknown command 'sft.py'").
TEST(CommandLine, LaunchRefusesAnUnknownCommandBeforeStartingRanks) {
  const CmdResult r = run_zerotune("launch --num_processes 2 sft.py model_name=Qwen/Qwen2.5-1.5B");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err.rfind("zerotune: error: launch: 'sft.py' is not a zerotune command (one of: "
                        "version, train, prepare, comm-check, loss, make-demo-data, tokenize, "
                        "render, options, compare); zerotune runs the SFT job itself: where you "
                        "ran `accelerate launch … sft.py ARGS`, run `zerotune launch … train "
                        "--config sft.yaml ARGS`\n",
                        0),
            0u)
      << r.err;
  EXPECT_EQ(r.err.find("starting"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("unknown command"), std::string::npos) << r.err;
  EXPECT_EQ(run_zerotune("launch -- sft.py").status, 2);
}

// `--` ends launch's options, as for accelerate launch and torchrun: the rest is the command (it
// was reported as an unknown launch option).
TEST(CommandLine, LaunchTakesDoubleDashAsTheEndOfItsOptions) {
  const CmdResult r = run_zerotune("launch --num_processes 2 -- version");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("zerotune 0.1.0"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("not a launch option"), std::string::npos) << r.err;
  const CmdResult d = run_zerotune("launch -- --num_processes 2 version");
  EXPECT_EQ(d.status, 2) << d.err;
  EXPECT_EQ(d.err.rfind("zerotune: error: launch: the command after '--' is '--num_processes', "
                        "not a zerotune command",
                        0),
            0u)
      << d.err;
}

// A count that is not a number is named as such (CLI11's range check said "not in range").
TEST(CommandLine, LaunchSaysWhatANumericOptionExpects) {
  const std::pair<const char*, const char*> cases[] = {
      {"--num_processes abc", "--num_processes: expected a positive integer, got \"abc\""},
      {"--num_processes 0", "--num_processes: expected a positive integer, got \"0\""},
      {"--nproc_per_node 2x", "--nproc_per_node: expected a positive integer, got \"2x\""},
      {"--node_rank -1", "--node_rank: expected a non-negative integer, got \"-1\""},
      {"--main_process_port 70000",
       "--main_process_port: expected a positive integer <= 65535, got 70000"},
      {"--kill_grace_s soon", "--kill_grace_s: expected a number in [0, 1000000000], got \"soon\""},
  };
  for (const auto& [flags, expected] : cases) {
    const CmdResult r = run_zerotune(std::string("launch ") + flags + " version");
    EXPECT_EQ(r.status, 2) << flags << ": " << r.err;
    EXPECT_EQ(r.err.rfind(std::string("zerotune: error: launch: ") + expected + "\n", 0), 0u)
        << flags << ": " << r.err;
  }
  // Decimal, as accelerate's int() reads it (CLI11 alone read 010 as octal 8).
  CLI::App app;
  int n = 0;
  app.add_option("--n", n)->transform(zt::cli::integer_in(1, 100));
  app.parse("--n 010");
  EXPECT_EQ(n, 10);
}

// train and prepare take Hydra's -cp / -cn (cli/command_line.h); their --help now says so (it
// listed only --config-path and --config-name).
TEST(CommandLine, HelpNamesHydrasShortConfigFlags) {
  for (const char* cmd : {"train", "prepare"}) {
    const CmdResult h = run_zerotune(std::string(cmd) + " --help");
    EXPECT_EQ(h.status, 0) << cmd << ": " << h.err;
    EXPECT_NE(h.out.find("\n  --config-path DIR           also -cp DIR. Hydra's form: the "
                         "directory of the config (with --config-name; default .)\n"),
              std::string::npos)
        << cmd << ": " << h.out;
    EXPECT_NE(h.out.find("\n  --config-name NAME          also -cn NAME. Hydra's form: the "
                         "config's name in --config-path (sft or sft.yaml)\n"),
              std::string::npos)
        << cmd << ": " << h.out;
  }
}

// Hydra's -m / --multirun: one usage error naming the flag, before the config is read (CLI11 said
// "The following argument was not expected: -m").
TEST(CommandLine, MultirunIsRefusedNamingTheFlag) {
  for (const char* cmd : {"train", "prepare"})
    for (const char* flag : {"-m", "--multirun"}) {
      const CmdResult r = run_zerotune(std::string(cmd) + " --config nope.yaml " + flag +
                                       " trainer.learning_rate=1e-5,2e-5");
      EXPECT_EQ(r.status, 2) << cmd << " " << flag << ": " << r.err;
      EXPECT_EQ(r.err.rfind(std::string("zerotune: error: ") + cmd + ": " + flag +
                                ": sweeps (Hydra --multirun) are not supported: launch one run "
                                "per value\nusage: zerotune " +
                                cmd + " ",
                            0),
                0u)
          << r.err;
    }
}

TEST(CommandLine, OptionsPrintsTheTable) {
  const CmdResult r = run_zerotune("options");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, zt::cli::acted_keys_markdown());
}

// make-demo-data's --out at a file, inside a file, empty, or where a directory stands in the way
// of train.parquet: exit 1 naming --out or the file, never "internal error" (exit 70, the
// std::filesystem exception's text), and no temp file left behind.
TEST(CommandLine, MakeDemoDataNamesAnOutFolderItCannotUse) {
  zt::testing::TempDir tmp;
  std::ofstream(tmp / "afile") << "mine\n";
  const std::string file = (tmp / "afile").string();
  for (const std::string& out : {file, file + "/sub"}) {
    const CmdResult r = run_zerotune("make-demo-data --out " + out + " --train-rows 3");
    EXPECT_EQ(r.status, 1) << out << ": " << r.err;
    EXPECT_EQ(r.err, "zerotune: error: make-demo-data: --out: cannot create " + out +
                         ": Not a directory (" + file + " is a file)\n");
  }
  EXPECT_EQ(slurp(file), "mine\n");
  const CmdResult e = run_zerotune("make-demo-data --out ''");
  EXPECT_EQ(e.status, 1) << e.err;
  EXPECT_EQ(e.err, "zerotune: error: make-demo-data: --out is empty; expected a folder\n");
  std::filesystem::create_directories(tmp / "d" / "train.parquet");
  const CmdResult d = run_zerotune("make-demo-data --out " + (tmp / "d").string());
  EXPECT_EQ(d.status, 1) << d.err;
  EXPECT_EQ(d.err, "zerotune: error: " + (tmp / "d" / "train.parquet").string() +
                       ": cannot move train.parquet.tmp into place: Is a directory\n");
  EXPECT_EQ(zt::testing::list_dir(tmp / "d"), std::vector<std::string>{"train.parquet"});
}

// make-demo-data's --seed and row counts are checked before anything is touched: a negative seed
// (which CLI11 read as 2^64-1) and a row count past 10,000,000 (10^12 rows would be ~40 TB built in
// memory) are refused naming the argument and the accepted range. --out is a path under a file, so
// an argument not checked first fails fast on --out instead (and never starts writing 10^12 rows).
TEST(CommandLine, MakeDemoDataRefusesANegativeSeedAndAbsurdRowCounts) {
  zt::testing::TempDir tmp;
  std::ofstream(tmp / "afile") << "mine\n";
  const std::string blocked = (tmp / "afile" / "sub").string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--seed -1", "--seed '-1': expected an integer from 0 to 18446744073709551615"},
      {"--seed=-1", "--seed '-1': expected an integer from 0 to 18446744073709551615"},
      {"--seed 18446744073709551616",
       "--seed '18446744073709551616': expected an integer from 0 to 18446744073709551615"},
      {"--train-rows 1000000000000",
       "--train-rows '1000000000000': expected a row count from 1 to 10000000"},
      {"--train-rows 99999999999999999999",
       "--train-rows '99999999999999999999': expected a row count from 1 to 10000000"},
      {"--test-rows 10000001", "--test-rows '10000001': expected a row count from 1 to 10000000"},
      {"--test-rows 0", "--test-rows '0': expected a row count from 1 to 10000000"},
  };
  for (const auto& [arg, why] : cases) {
    const CmdResult r = run_zerotune("make-demo-data --out " + blocked + " " + arg);
    EXPECT_EQ(r.status, 1) << arg << ": " << r.err;
    EXPECT_EQ(r.err, "zerotune: error: make-demo-data: " + why + "\n") << arg;
  }
  const std::string out = (tmp / "d").string();
  const CmdResult neg = run_zerotune("make-demo-data --out " + out + " --train-rows 3 --seed -1");
  EXPECT_EQ(neg.status, 1) << neg.err;
  EXPECT_FALSE(std::filesystem::exists(out));  // nothing written
  const CmdResult ok = run_zerotune("make-demo-data --out " + out +
                                    " --train-rows 3 --test-rows 2 --seed 18446744073709551615");
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(ok.out,
            "wrote " + out + "/train.parquet (3 rows) and " + out + "/test.parquet (2 rows)\n");
}

// render and tokenize read their JSONL rows themselves: a number beyond a double ('1e999') was an
// internal error (exit 70) there.
TEST(CommandLine, RenderAndTokenizeNameARowWithANumberBeyondADouble) {
  zt::testing::TempDir tmp;
  const std::string tok = std::string(ZT_SHARED_DATA) + "/tokenizers/qwen2.5-instruct";
  const std::string rows = (tmp / "rows.jsonl").string();
  std::ofstream(rows) << "{\"text\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": "
                         "\"x\"}], \"n\": 1e999}\n";
  const CmdResult r = run_zerotune("render --tokenizer " + tok + " " + rows);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.err,
            "zerotune: error: " + rows + ":1: invalid JSON: number overflow parsing '1e999'\n");
  const CmdResult t = run_zerotune("tokenize --tokenizer " + tok + " " + rows);
  EXPECT_EQ(t.status, 1) << t.err;
  EXPECT_EQ(t.err,
            "zerotune: error: " + rows + ":1: invalid JSON: number overflow parsing '1e999'\n");
}

// render (past 1 MiB of output) and tokenize (past 4,096 lines) printed their output in chunks: a
// bad last row left the earlier rows on stdout beside the error. Now nothing is printed on an
// error, and a good file's output (spooled to a temporary file past 1 MiB) arrives whole.
TEST(CommandLine, RenderAndTokenizePrintNothingWhenALateRowIsBad) {
  zt::testing::TempDir tmp;
  const std::string tok = std::string(ZT_SHARED_DATA) + "/tokenizers/qwen2.5-instruct";
  const std::string good = (tmp / "good.jsonl").string(), bad = (tmp / "bad.jsonl").string();
  {
    const std::string content(5000, 'x');
    std::ofstream g(good), b(bad);
    for (int i = 0; i < 300; ++i) {
      const std::string row =
          "{\"messages\": [{\"role\": \"user\", \"content\": \"" + content + "\"}]}\n";
      g << row;
      b << row;
    }
    b << "{\"messages\": 7}\n";
  }
  const CmdResult r = run_zerotune("render --tokenizer " + tok + " " + bad);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("zerotune: error: " + bad + ":301: ", 0), 0u) << r.err;
  const CmdResult ok = run_zerotune("render --tokenizer " + tok + " " + good);
  EXPECT_EQ(ok.status, 0) << ok.err;
  const std::string first = ok.out.substr(0, ok.out.find('\n') + 1);  // every row renders alike
  EXPECT_GT(first.size(), size_t{5000});
  std::string expected_render;
  for (int i = 0; i < 300; ++i) expected_render += first;
  EXPECT_EQ(ok.out, expected_render);  // > 1 MiB: spooled and read back whole
  // No usable temporary directory for the spool: an error naming TMPDIR, nothing printed.
  const CmdResult no_tmp =
      run_zerotune("render --tokenizer " + tok + " " + good, "TMPDIR=" + (tmp / "none").string());
  EXPECT_EQ(no_tmp.status, 1);
  EXPECT_EQ(no_tmp.out, "");
  EXPECT_NE(no_tmp.err.find("there is no usable temporary directory (TMPDIR='" +
                            (tmp / "none").string() + "')"),
            std::string::npos)
      << no_tmp.err;

  const std::string lines = (tmp / "lines.jsonl").string(),
                    bad_lines = (tmp / "bad_lines.jsonl").string();
  {
    std::ofstream g(lines), b(bad_lines);
    for (int i = 0; i < 5000; ++i) {
      g << "\"hello\"\n";
      b << "\"hello\"\n";
    }
    b << "{\"txt\": \"hello\"}\n";
  }
  const CmdResult t = run_zerotune("tokenize --tokenizer " + tok + " " + bad_lines);
  EXPECT_EQ(t.status, 1) << t.err;
  EXPECT_EQ(t.out, "");
  EXPECT_EQ(t.err, "zerotune: error: " + bad_lines + ":5001: object has no \"text\" key\n");
  const CmdResult tok_ok = run_zerotune("tokenize --tokenizer " + tok + " " + lines);
  EXPECT_EQ(tok_ok.status, 0) << tok_ok.err;
  std::string expected;
  for (int i = 0; i < 5000; ++i) expected += "[14990]\n";
  EXPECT_EQ(tok_ok.out, expected);
}

}  // namespace
