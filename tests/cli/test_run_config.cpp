#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/run_config.h"
#include "core/zt_test_util.h"

namespace {
using zt::testing::error_of;

// A primary sft.yaml whose defaults list merges the config group file <section>/base.yaml (holding
// `group_yaml`) first, then the primary's own model.name_or_path and `extra` (_self_ last).
struct GroupConfig {
  zt::testing::TempDir dir;
  std::filesystem::path primary, group;
  GroupConfig(const std::string& group_yaml, const std::string& extra = "",
              const std::string& section = "trainer")
      : primary(dir / "sft.yaml"), group(dir / section / "base.yaml"), section_(section) {
    std::filesystem::create_directories(group.parent_path());
    std::ofstream(group) << group_yaml;
    write_primary(extra);
  }
  // Rewrites the primary with `extra` after its defaults list and model.
  void write_primary(const std::string& extra) const {
    std::ofstream(primary) << "defaults:\n  - " << section_
                           << ": base\n  - _self_\nmodel:\n  name_or_path: m\n"
                           << extra;
  }

 private:
  std::string section_;
};
}  // namespace

TEST(RunConfig, DefaultsAreTrlSftConfigs) {
  auto c = zt::cli::RunConfig::from_json({{"model", {{"name_or_path", "m"}}}}, "x.yaml");
  EXPECT_EQ(c.get<double>("trainer.learning_rate"), 2e-5);
  EXPECT_EQ(c.get<std::string>("trainer.lr_scheduler_type"), "linear");
  EXPECT_EQ(c.get<int64_t>("trainer.max_length"), 1024);
  EXPECT_EQ(c.get<int64_t>("trainer.per_device_train_batch_size"), 8);
  EXPECT_EQ(c.get<int64_t>("trainer.seed"), 42);
  EXPECT_EQ(c.get<bool>("trainer.packing"), false);
  EXPECT_EQ(c.get<double>("trainer.max_grad_norm"), 1.0);
  EXPECT_FALSE(c.get_optional<bool>("trainer.completion_only_loss").has_value());
}

TEST(RunConfig, UnknownKeyNamesPathAndFile) {
  EXPECT_EQ(error_of([] { zt::cli::RunConfig::from_json({{"trainer", {{"lerning_rate", 1}}}}, "sft.yaml"); }),
            "sft.yaml: unknown config key 'trainer.lerning_rate' (not a zerotune/TRL SFTConfig key) (did you "
            "mean 'trainer.learning_rate'?)");
  EXPECT_EQ(error_of([] { zt::cli::RunConfig::from_json({{"model", {{"zzz", "x"}}}}, "sft.yaml"); }),
            "sft.yaml: unknown config key 'model.zzz' (not a zerotune/TRL SFTConfig key)");
  // An empty key (`"": 2` in the YAML file) is refused too: at the top level it was dropped.
  EXPECT_EQ(error_of([] {
              zt::cli::RunConfig::from_json({{"", 2}}, "sft.yaml");
            }),
            "sft.yaml: an empty config key at the top level (not a zerotune/TRL SFTConfig key)");
  EXPECT_EQ(error_of([] {
              zt::cli::RunConfig::from_json({{"", {{"trainer", {{"max_steps", 3}}}}}}, "sft.yaml");
            }),
            "sft.yaml: an empty config key at the top level (not a zerotune/TRL SFTConfig key)");
  EXPECT_EQ(error_of([] {
              zt::cli::RunConfig::from_json({{"trainer", {{"", 1}}}}, "sft.yaml");
            }),
            "sft.yaml: an empty config key in 'trainer' (not a zerotune/TRL SFTConfig key)");
}

TEST(RunConfig, NotedKeysGetOneLineAndTopLevelSeedFlowsDown) {
  auto c = zt::cli::RunConfig::from_json({{"use_ms", true}, {"seed", 7}, {"trainer", {{"report_to", "wandb"}}}},
                                         "sft.yaml");
  ASSERT_EQ(c.notes().size(), 1u);
  EXPECT_EQ(c.notes()[0],
            "sft.yaml: use_ms: true changes nothing in zerotune: it switches the users' hub mirror (ModelScope); "
            "zerotune reads local directories and the local HF cache only");
  EXPECT_EQ(c.get<int64_t>("trainer.seed"), 7);
  // At their defaults, noted keys say nothing.
  auto d = zt::cli::RunConfig::from_json({{"trainer", {{"activation_offloading", false}, {"dataloader_num_workers", 0}}}},
                                         "sft.yaml");
  EXPECT_TRUE(d.notes().empty());
}

TEST(RunConfig, MissingAndTypeErrors) {
  auto c = zt::cli::RunConfig::from_json({{"trainer", {{"gradient_accumulation_steps", "???"}}}}, "sft.yaml");
  EXPECT_TRUE(c.is_missing("trainer.gradient_accumulation_steps"));
  EXPECT_EQ(error_of([&] { c.get<int64_t>("trainer.gradient_accumulation_steps"); }),
            "sft.yaml: config key 'trainer.gradient_accumulation_steps' is ??? (mandatory) and was not set");
  EXPECT_EQ(error_of([&] { c.get<std::string>("trainer.max_length"); }),
            "sft.yaml: config key 'trainer.max_length' must be a string, got 1024");
  c.set("trainer.gradient_accumulation_steps", 4);
  EXPECT_EQ(c.get<int64_t>("trainer.gradient_accumulation_steps"), 4);
}

TEST(RunConfig, OverridesOfSchemaKeysNeedNoPlus) {
  auto dir = std::filesystem::temp_directory_path() / "zt_test_run_config";
  std::filesystem::create_directories(dir);
  auto p = dir / "sft.yaml";
  std::ofstream(p) << "trainer:\n  learning_rate: 1.0e-4\n";
  auto c = zt::cli::RunConfig::load(p, {"trainer.max_steps=7"});
  EXPECT_EQ(c.get<int64_t>("trainer.max_steps"), 7);
  EXPECT_EQ(c.get<double>("trainer.learning_rate"), 1e-4);
  // A misspelt one is told the schema's key, which the file leaves at its default (only the
  // file's keys were compared: no suggestion), also where the file lacks the section or a second
  // word is misspelt; a word close to none gets none.
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {"trainer.max_stepz=7"}); }),
            "override 'trainer.max_stepz=7': key 'trainer.max_stepz' is not in " + p.string() +
                " (did you mean 'trainer.max_steps'? or use +trainer.max_stepz to add a new key)");
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {"compute.zero_stag=2"}); }),
            "override 'compute.zero_stag=2': key 'compute.zero_stag' is not in " + p.string() +
                " (did you mean 'compute.zero_stage'? or use +compute.zero_stag to add a new key)");
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {"trainr.max_stepz=7"}); }),
            "override 'trainr.max_stepz=7': key 'trainr.max_stepz' is not in " + p.string() +
                " (did you mean 'trainer.max_steps'? or use +trainr.max_stepz to add a new key)");
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {"trainer.zzzz=7"}); }),
            "override 'trainer.zzzz=7': key 'trainer.zzzz' is not in " + p.string() +
                " (use +trainer.zzzz to add a new key)");
  // The key suggested is accepted as it is.
  EXPECT_EQ(
      zt::cli::RunConfig::load(p, {"compute.zero_stage=2"}).get<int64_t>("compute.zero_stage"), 2);
}

// A misspelt old name (key_aliases: trainer.max_seq_length, renamed trainer.max_length in TRL
// 0.20) was told the old name; it is told the new one, in the file and in an override. An
// override whose file has the old name is still told that one (the new name beside it would clash).
TEST(RunConfig, MisspeltOldKeyNamesAreToldTheNewName) {
  EXPECT_EQ(error_of([] {
              zt::cli::RunConfig::from_json({{"trainer", {{"max_seq_lenght", 512}}}}, "sft.yaml");
            }),
            "sft.yaml: unknown config key 'trainer.max_seq_lenght' (not a zerotune/TRL SFTConfig "
            "key) (did you mean 'trainer.max_length'?)");
  EXPECT_EQ(error_of([] {
              zt::cli::RunConfig::from_json({{"trainer", {{"no_cudaa", true}}}}, "sft.yaml");
            }),
            "sft.yaml: unknown config key 'trainer.no_cudaa' (not a zerotune/TRL SFTConfig key) "
            "(did you mean 'trainer.use_cpu'?)");
  const auto dir = std::filesystem::temp_directory_path() / "zt_run_config_old_names";
  std::filesystem::create_directories(dir);
  const auto p = dir / "sft.yaml";
  std::ofstream(p) << "trainer:\n  learning_rate: 1.0e-4\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {"trainer.max_seq_lenght=512"}); }),
            "override 'trainer.max_seq_lenght=512': key 'trainer.max_seq_lenght' is not in " +
                p.string() +
                " (did you mean 'trainer.max_length'? or use +trainer.max_seq_lenght to add a new "
                "key)");
  // The name suggested is accepted as it is.
  EXPECT_EQ(
      zt::cli::RunConfig::load(p, {"trainer.max_length=512"}).get<int64_t>("trainer.max_length"),
      512);
  std::ofstream(p) << "trainer:\n  max_seq_length: 256\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {"trainer.max_seq_lenght=512"}); }),
            "override 'trainer.max_seq_lenght=512': key 'trainer.max_seq_lenght' is not in " +
                p.string() +
                " (did you mean 'trainer.max_seq_length'? or use +trainer.max_seq_lenght to add a "
                "new key)");
  EXPECT_EQ(zt::cli::RunConfig::load(p, {"trainer.max_seq_length=512"})
                .get<int64_t>("trainer.max_length"),
            512);
  std::filesystem::remove_all(dir);
}

// A file's unquoted yes / on read as OmegaConf's loader reads them (YAML 1.1: booleans), and an
// unquoted `no` where a word is wanted is refused with the reason.
TEST(RunConfig, FileReadsYaml11WordsAsOmegaConf) {
  const auto dir = std::filesystem::temp_directory_path() / "zt_run_config_yaml11";
  std::filesystem::create_directories(dir);
  auto p = dir / "sft.yaml";
  std::ofstream(p) << "trainer:\n  packing: yes\n  gradient_checkpointing: On\n  bf16: OFF\n";
  auto c = zt::cli::RunConfig::load(p, {});
  EXPECT_EQ(c.get<bool>("trainer.packing"), true);
  EXPECT_EQ(c.get<bool>("trainer.gradient_checkpointing"), true);
  EXPECT_EQ(c.get<bool>("trainer.bf16"), false);
  std::ofstream(p) << "trainer:\n  save_strategy: no\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            p.string() +
                ":2: trainer.save_strategy: false is not valid (expected one of: no, steps, epoch, "
                "best; YAML reads an unquoted yes / no / on / off / true / false as a boolean, as "
                "OmegaConf does: quote the word, e.g. \"no\")");
  std::ofstream(p) << "trainer:\n  save_strategy: \"no\"\n";
  EXPECT_EQ(zt::cli::RunConfig::load(p, {}).get<std::string>("trainer.save_strategy"), "no");
}

// `${oc.env:VAR}` gives the variable's text, as OmegaConf's oc.env does: a job id as the run name
// stays the string it is ("0042", not the integer 42 — it was refused: "exp_name: 42 is not valid
// (expected a string)"). A key that wants a number or a boolean reads a string that spells one
// (a trainer key's string spelling false excepted: TRL reads it as true); one that does not is
// named with the value.
TEST(RunConfig, EnvInterpolationsAreStringsAndTypedKeysReadThem) {
  auto dir = std::filesystem::temp_directory_path() / "zt_test_run_config_env";
  std::filesystem::create_directories(dir);
  auto p = dir / "sft.yaml";
  std::ofstream(p) << "exp_name: ${oc.env:ZT_TEST_ENV_JOB}\n"
                      "trainer:\n"
                      "  output_dir: runs/${exp_name}\n"
                      "  max_steps: ${oc.env:ZT_TEST_ENV_STEPS}\n"
                      "  learning_rate: ${oc.env:ZT_TEST_ENV_LR}\n"
                      "  packing: ${oc.env:ZT_TEST_ENV_PACK}\n"
                      "  seed: ${oc.env:ZT_TEST_ENV_UNSET,0010}\n";
  setenv("ZT_TEST_ENV_JOB", "0042", 1);
  setenv("ZT_TEST_ENV_STEPS", "7", 1);
  setenv("ZT_TEST_ENV_LR", "1e-4", 1);
  setenv("ZT_TEST_ENV_PACK", "True", 1);
  unsetenv("ZT_TEST_ENV_UNSET");
  auto c = zt::cli::RunConfig::load(p, {});
  EXPECT_EQ(c.get<std::string>("exp_name"), "0042");
  EXPECT_EQ(c.get<std::string>("trainer.output_dir"), "runs/0042");
  EXPECT_EQ(c.get<int64_t>("trainer.max_steps"), 7);
  EXPECT_EQ(c.get<double>("trainer.learning_rate"), 1e-4);
  EXPECT_EQ(c.get<bool>("trainer.packing"), true);
  EXPECT_EQ(c.get<int64_t>("trainer.seed"), 10);  // decimal, as Hydra's grammar and int() read it
  // A string spelling false is refused: TRL's SFTConfig gets the string, which Python reads as
  // true (the users' config is a plain DictConfig; no typed field converts it).
  setenv("ZT_TEST_ENV_PACK", "FALSE", 1);
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            p.string() +
                ":6: trainer.packing: 'FALSE' is a string (quoted, or from ${oc.env:…}), not the "
                "boolean false: TRL's SFTConfig takes the value as it is, and Python reads every "
                "non-empty string as true, so TRL would run with packing on; write false without "
                "quotes (on the command line: trainer.packing=false)");
  setenv("ZT_TEST_ENV_PACK", "yes", 1);  // refused, as a quoted 'yes' in the file is
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            p.string() + ":6: trainer.packing: 'yes' is not valid (expected true or false)");
  setenv("ZT_TEST_ENV_PACK", "True", 1);
  // An old key name from the environment beside the new one with the same value is no conflict
  // ("128" and 128 were "both given, with different values"), and a default that interpolates a
  // number is a string for a string key.
  auto q = dir / "alias.yaml";
  std::ofstream(q)
      << "exp_name: ${oc.env:ZT_TEST_ENV_UNSET,${trainer.seed}}\n"
         "trainer:\n  seed: 42\n  max_length: 128\n  max_seq_length: ${oc.env:ZT_TEST_ENV_LEN}\n";
  setenv("ZT_TEST_ENV_LEN", "128", 1);
  auto a = zt::cli::RunConfig::load(q, {});
  EXPECT_EQ(a.get<int64_t>("trainer.max_length"), 128);
  EXPECT_EQ(a.get<std::string>("exp_name"), "42");
  setenv("ZT_TEST_ENV_STEPS", "seven", 1);
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            p.string() + ":4: trainer.max_steps: 'seven' is not valid (expected an integer >= -1)");
  unsetenv("ZT_TEST_ENV_STEPS");
}

// An integer beyond int64 (Python's ints have no bound; a YAML file's one, or `${oc.env:…}`'s,
// reaches the check as its text) was read as a float and shown as 9.999999999999999e+22. It is
// shown as given, with what the key accepts, and the 64-bit bound where the key's range does not
// already exclude it. On the command line Hydra's grammar reads it: that message names the bounds.
TEST(RunConfig, IntegersBeyond64BitsAreShownAsGiven) {
  zt::testing::TempDir dir;
  const auto p = dir / "sft.yaml";
  std::ofstream(p) << "trainer:\n  seed: 99999999999999999999999\n";
  EXPECT_EQ(
      error_of([&] { zt::cli::RunConfig::load(p, {}); }),
      p.string() +
          ":2: trainer.seed: 99999999999999999999999 is not valid (expected an integer in [0, "
          "4294967295])");
  std::ofstream(p) << "trainer:\n  seed: ${oc.env:ZT_TEST_ENV_BIG_SEED}\n";
  setenv("ZT_TEST_ENV_BIG_SEED", " 1_000_000_000_000_000_000_000 ", 1);
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            p.string() +
                ":2: trainer.seed: 1_000_000_000_000_000_000_000 is not valid (expected an integer "
                "in [0, 4294967295])");
  unsetenv("ZT_TEST_ENV_BIG_SEED");
  // On the command line too the key's own range is named (the 64-bit range was).
  std::ofstream(p) << "trainer:\n  seed: 42\n";
  EXPECT_EQ(
      error_of([&] { zt::cli::RunConfig::load(p, {"trainer.seed=99999999999999999999999"}); }),
      p.string() +
          ": trainer.seed: 99999999999999999999999 is not valid (expected an integer in [0, "
          "4294967295]) (given on the command line)");
  EXPECT_EQ(
      error_of([&] { zt::cli::RunConfig::load(p, {"trainer.seed=-99999999999999999999999"}); }),
      p.string() +
          ": trainer.seed: -99999999999999999999999 is not valid (expected an integer in [0, "
          "4294967295]) (given on the command line)");
  // Where the key's range does not exclude it, the 64-bit bound is named, as from a file.
  EXPECT_EQ(
      error_of([&] { zt::cli::RunConfig::load(p, {"trainer.max_steps=99999999999999999999999"}); }),
      p.string() +
          ": trainer.max_steps: 99999999999999999999999 is not valid (expected an integer >= -1; "
          "zerotune's integers are 64-bit: at most 9223372036854775807) (given on the command "
          "line)");
  const auto trainer_error = [](const char* key, const char* value) {
    return error_of([&] {
      zt::cli::RunConfig::from_json({{"trainer", {{key, value}}}}, "sft.yaml");
    });
  };
  EXPECT_EQ(trainer_error("max_steps", "99999999999999999999999"),
            "sft.yaml: trainer.max_steps: 99999999999999999999999 is not valid (expected an "
            "integer >= -1; zerotune's integers are 64-bit: at most 9223372036854775807)");
  EXPECT_EQ(trainer_error("max_steps", "-99999999999999999999999"),
            "sft.yaml: trainer.max_steps: -99999999999999999999999 is not valid (expected an "
            "integer >= -1)");
  EXPECT_EQ(trainer_error("save_total_limit", "-99999999999999999999999"),
            "sft.yaml: trainer.save_total_limit: -99999999999999999999999 is not valid (expected "
            "an integer <= 1000000000; zerotune's integers are 64-bit: at least "
            "-9223372036854775808)");
  EXPECT_EQ(trainer_error("logging_steps", "9223372036854775808"),
            "sft.yaml: trainer.logging_steps: 9223372036854775808 is not valid (expected an "
            "integer number of steps >= 1, or a ratio in (0, 1) of the total steps; zerotune's "
            "integers are 64-bit: at most "
            "9223372036854775807)");
  // A key that wants a number reads it as float() does, as before.
  EXPECT_EQ(zt::cli::RunConfig::from_json(
                {{"trainer", {{"learning_rate", "99999999999999999999999"}}}}, "sft.yaml")
                .get<double>("trainer.learning_rate"),
            1e23);
}

// A string for a number key is read as Python's int(), else float(), reads it — as OmegaConf
// converts a string for a typed field: spaces around it are allowed (" 7" was refused), an
// underscore only between two digits ("1__0" was 10, as were "_1" and "1_"), as on the command
// line.
// The users' sft.yaml as their sft.py reads it — OmegaConf's loader, then SFTConfig(**trainer),
// no HfArgumentParser (checked with omegaconf 2.4: `2e-5` is the float 2e-05, OmegaConf's own float
// resolver; a quoted '2e-5', '8' or 'true' stays a str, which SFTConfig keeps as it is) — and what
// zerotune makes of each: the number or boolean the string spells (HfArgumentParser's reading);
// a float where an integer is wanted is an error naming file:line and key (SFTConfig would keep
// 1.0 and fail later, HfArgumentParser's int('1.0') raises); num_train_epochs is a float field.
TEST(RunConfig, TrainerNumbersInTheYamlFile) {
  auto dir = std::filesystem::temp_directory_path() / "zt_test_run_config_yaml_numbers";
  std::filesystem::create_directories(dir);
  auto p = dir / "sft.yaml";
  std::ofstream(p) << "model:\n  name_or_path: m\ntrainer:\n  learning_rate: 2e-5\n"
                      "  warmup_ratio: \"1e-1\"\n  per_device_train_batch_size: \"8\"\n"
                      "  packing: \"true\"\n  num_train_epochs: 1.0\n";
  const auto c = zt::cli::RunConfig::load(p, {});
  EXPECT_EQ(c.get<double>("trainer.learning_rate"), 2e-5);
  EXPECT_EQ(c.get<double>("trainer.warmup_ratio"), 0.1);
  EXPECT_EQ(c.get<int64_t>("trainer.per_device_train_batch_size"), 8);
  EXPECT_EQ(c.get<bool>("trainer.packing"), true);
  EXPECT_EQ(c.get<double>("trainer.num_train_epochs"), 1.0);
  std::ofstream(p) << "model:\n  name_or_path: m\ntrainer:\n  learning_rate: 2e-5\n"
                      "  max_steps: 1.0\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            p.string() + ":5: trainer.max_steps: 1.0 is not valid (expected an integer >= -1)");
}

TEST(RunConfig, NumberStringsReadAsPythonIntAndFloat) {
  const auto trainer = [](zt::Json t) {
    return zt::cli::RunConfig::from_json({{"trainer", std::move(t)}}, "sft.yaml");
  };
  EXPECT_EQ(trainer({{"max_steps", "1_0"}}).get<int64_t>("trainer.max_steps"), 10);
  EXPECT_EQ(trainer({{"max_steps", " 7"}}).get<int64_t>("trainer.max_steps"), 7);
  EXPECT_EQ(trainer({{"max_steps", "\t+7 \n"}}).get<int64_t>("trainer.max_steps"), 7);
  EXPECT_EQ(trainer({{"max_steps", "010"}}).get<int64_t>("trainer.max_steps"), 10);
  EXPECT_EQ(trainer({{"learning_rate", " 1_0.5e-5 "}}).get<double>("trainer.learning_rate"),
            10.5e-5);
  EXPECT_EQ(trainer({{"learning_rate", "2E-5"}}).get<double>("trainer.learning_rate"), 2e-5);
  for (const char* bad : {"1__0", "_1", "1_", "1 0", "0x10", ""})
    EXPECT_EQ(error_of([&] {
                trainer({{"max_steps", bad}});
              }),
              std::string("sft.yaml: trainer.max_steps: '") + bad +
                  "' is not valid (expected an integer >= -1)");
  for (const char* bad : {"1__0.5", "1_.5", "1e_5"})
    EXPECT_EQ(error_of([&] {
                trainer({{"learning_rate", bad}});
              }),
              std::string("sft.yaml: trainer.learning_rate: '") + bad +
                  "' is not valid (expected a number >= 0)");
  auto dir = std::filesystem::temp_directory_path() / "zt_test_run_config_num";
  std::filesystem::create_directories(dir);
  auto p = dir / "sft.yaml";
  std::ofstream(p) << "trainer:\n  max_steps: 5\n";
  EXPECT_EQ(
      zt::cli::RunConfig::load(p, {"trainer.max_steps=1_000"}).get<int64_t>("trainer.max_steps"),
      1000);
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {"trainer.max_steps=1__0"}); }),
            p.string() +
                ": trainer.max_steps: '1__0' is not valid (expected an integer >= -1) (given on "
                "the command line)");
}

// TRL passes trainer.chat_template_kwargs to the chat template as keyword arguments
// (apply_chat_template(**kwargs)); PyYAML reads an unquoted `yes:` there as True, `0x10:` as 16
// and `1.5:` as 1.5, and Python raises TypeError (keywords must be strings). zerotune kept them as
// the strings "yes", "0x10", "1.5"; they are refused, naming the file, line and key. A quoted key
// is a string, and a null key is refused anywhere, as OmegaConf's loader refuses it.
TEST(RunConfig, ChatTemplateKwargsKeysMustBeStrings) {
  zt::testing::TempDir dir;
  const auto p = dir / "sft.yaml";
  const auto refused = [&](const std::string& key, int line, const std::string& python) {
    return p.string() + ":" + std::to_string(line) + ": trainer.chat_template_kwargs: the key " +
           key + " is " + python +
           " to PyYAML (YAML 1.1, as OmegaConf loads it), not a string; TRL passes these keys to "
           "the chat template as keyword arguments, and a keyword name must be a string (Python "
           "raises TypeError: keywords must be strings): quote the key, as in '" +
           key + "':";
  };
  std::ofstream(p) << "trainer:\n  chat_template_kwargs:\n    enable_thinking: false\n    yes: 1\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            refused("yes", 4, "the boolean True"));
  std::ofstream(p) << "trainer:\n  chat_template_kwargs: {0x10: a}\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            refused("0x10", 2, "the integer 16"));
  std::ofstream(p) << "trainer:\n  chat_template_kwargs:\n    1.5: a\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }), refused("1.5", 3, "the float 1.5"));
  std::ofstream(p) << "trainer:\n  chat_template_kwargs:\n    'yes': 1\n    \"1\": 2\n    on_: 3\n";
  EXPECT_EQ(zt::cli::RunConfig::load(p, {}).value("trainer.chat_template_kwargs"),
            (zt::Json{{"yes", 1}, {"1", 2}, {"on_", 3}}));
  std::ofstream(p) << "trainer:\n  chat_template_kwargs:\n    ~: 1\n";
  EXPECT_EQ(
      error_of([&] { zt::cli::RunConfig::load(p, {}); }),
      p.string() +
          ":3: a null key in trainer.chat_template_kwargs (null, Null, NULL or ~, unquoted): "
          "OmegaConf refuses it (Incompatible key type 'NoneType'); quote it if it is a name");
  // From a config group's file, under the group's package.
  std::filesystem::create_directories(dir / "trainer");
  std::ofstream(dir / "trainer" / "base.yaml") << "chat_template_kwargs:\n  On: true\n";
  std::ofstream(p) << "defaults:\n  - trainer: base\n  - _self_\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            refused("On", 2, "the boolean True")
                .replace(0, p.string().size(), (dir / "trainer" / "base.yaml").string()));
}

// A key reached through a whole-value interpolation (`chat_template_kwargs: ${kw}`, or a section
// `trainer: ${base}` holding it, chains of them, a source in a config group's file) was never
// checked: the non-string key was listed under its place of writing only. Now it is refused as one
// written there, naming the file and line where the key is written. (YAML aliases and merge keys
// copy the nodes themselves and were refused already.)
TEST(RunConfig, ChatTemplateKwargsKeysMustBeStringsThroughInterpolations) {
  zt::testing::TempDir dir;
  const auto p = dir / "sft.yaml";
  const auto refused = [&](const std::filesystem::path& file, const std::string& key, int line,
                           const std::string& python) {
    return file.string() + ":" + std::to_string(line) + ": trainer.chat_template_kwargs: the key " +
           key + " is " + python +
           " to PyYAML (YAML 1.1, as OmegaConf loads it), not a string; TRL passes these keys to "
           "the chat template as keyword arguments, and a keyword name must be a string (Python "
           "raises TypeError: keywords must be strings): quote the key, as in '" +
           key + "':";
  };
  std::ofstream(p) << "kw:\n  enable_thinking: false\n  yes: 1\ntrainer:\n  chat_template_kwargs: "
                      "${kw}\nmodel:\n  name_or_path: m\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            refused(p, "yes", 3, "the boolean True"));
  std::ofstream(p) << "base:\n  chat_template_kwargs:\n    1.5: a\ntrainer: ${base}\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            refused(p, "1.5", 3, "the float 1.5"));
  // Relative, and chained through a config group's file.
  std::filesystem::create_directories(dir / "kwargs");
  std::ofstream(dir / "kwargs" / "thinking.yaml") << "enable_thinking: true\nOn: true\n";
  std::ofstream(p) << "defaults:\n  - kwargs: thinking\n  - _self_\nmid: ${kwargs}\ntrainer:\n"
                      "  chat_template_kwargs: ${..mid}\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            refused(dir / "kwargs" / "thinking.yaml", "On", 2, "the boolean True"));
  // Quoted keys pass; the source mapping's own key is checked as any other (`kw` is no config key).
  std::ofstream(p) << "kw:\n  'yes': 1\ntrainer:\n  chat_template_kwargs: ${kw}\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            p.string() + ":1: unknown config key 'kw' (not a zerotune/TRL SFTConfig key)");
}

// An unknown key in a config group's file (or a plain config its defaults list names) was reported
// against the primary sft.yaml; it is named with the file that holds it and its line. A key the
// command line adds names the primary, as before (no line: it is in no file).
TEST(RunConfig, UnknownKeyNamesTheFileThatHoldsIt) {
  zt::testing::TempDir dir;
  const auto p = dir / "sft.yaml";
  std::filesystem::create_directories(dir / "trainer");
  std::ofstream(dir / "trainer" / "base.yaml") << "learning_rate: 1.0e-5\nlerning_rate: 2\n";
  std::ofstream(dir / "common.yaml") << "model:\n  name_or_path: m\ncompute: 3\n";
  std::ofstream(p) << "defaults:\n  - trainer: base\n  - _self_\nmodel:\n  name_or_path: m\n";
  const std::string unknown =
      ": unknown config key 'trainer.lerning_rate' (not a zerotune/TRL SFTConfig key) (did you "
      "mean 'trainer.learning_rate'?)";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            (dir / "trainer" / "base.yaml").string() + ":2" + unknown);
  // Set in the primary too, merged after the group's (_self_ last): the primary's line.
  std::ofstream(p) << "defaults:\n  - trainer: base\n  - _self_\nmodel:\n  name_or_path: m\n"
                      "trainer:\n  lerning_rate: 3\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }), p.string() + ":7" + unknown);
  // A plain config of the defaults list: a section that is no mapping.
  std::ofstream(p) << "defaults:\n  - common\n  - _self_\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            (dir / "common.yaml").string() + ":3: config key 'compute' must be a mapping, got 3");
  std::ofstream(p) << "model:\n  name_or_path: m\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {"+trainer.lerning_rate=1"}); }),
            p.string() + unknown);
}

// A value error (wrong type, out of range, a value zerotune lacks) names the file and line that
// hold the key, as an unknown key's does: a config group's file, not the primary sft.yaml (both
// named sft.yaml, whichever file was wrong); the primary's own keys with their line; a key given
// on the command line the primary, "(given on the command line)". An old name read as the new
// one: the old name's line.
TEST(RunConfig, ValueErrorNamesTheFileThatHoldsTheKey) {
  const GroupConfig c("max_steps: 5\nlearning_rate: abc\n");
  const auto &p = c.primary, &group = c.group;
  EXPECT_EQ(
      error_of([&] { zt::cli::RunConfig::load(p, {}); }),
      group.string() + ":2: trainer.learning_rate: 'abc' is not valid (expected a number >= 0)");
  std::ofstream(group) << "gradient_accumulation_steps: 0\n";
  const std::string zero =
      ": trainer.gradient_accumulation_steps: 0 is not valid (expected an integer >= 1)";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }), group.string() + ":1" + zero);
  // The primary sets it too, merged last: the primary's line.
  c.write_primary("trainer:\n  gradient_accumulation_steps: 0\n");
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }), p.string() + ":7" + zero);
  // Given on the command line: the primary, no line, as before.
  std::ofstream(group) << "gradient_accumulation_steps: 2\n";
  c.write_primary("");
  EXPECT_EQ(
      error_of([&] { zt::cli::RunConfig::load(p, {"trainer.gradient_accumulation_steps=0"}); }),
      p.string() + zero + " (given on the command line)");
  // A value zerotune does not support, under an old name, in the group file.
  std::ofstream(group) << "learning_rate: 1.0e-5\nevaluation_strategy: sometimes\n";
  const std::string strategy = error_of([&] { zt::cli::RunConfig::load(p, {}); });
  EXPECT_EQ(strategy.rfind(group.string() + ":2: trainer.eval_strategy: 'sometimes' is not ", 0),
            0u)
      << strategy;
  // A key whose value a typed getter refuses after the check: its line too.
  std::ofstream(group) << "learning_rate: 1.0e-5\n";
  const auto cfg = zt::cli::RunConfig::load(p, {});
  EXPECT_EQ(cfg.key_at("trainer.learning_rate"), group.string() + ":1");
  EXPECT_EQ(
      error_of([&] { cfg.get<bool>("trainer.learning_rate"); }),
      group.string() + ":1: config key 'trainer.learning_rate' must be true or false, got 1e-05");
  EXPECT_EQ(cfg.key_at("trainer.max_steps"), p.string());  // a default: from no file
}

// A message about several keys begins with the first key's file:line and names each other key
// with its own (key_ref): here trainer.num_train_epochs in a config group's file and
// trainer.max_steps in sft.yaml. A key given on the command line says so; a key no file holds
// (a default) is named alone.
TEST(RunConfig, MessageAboutSeveralKeysNamesEachKeysFile) {
  const GroupConfig c("learning_rate: 1.0e-5\nnum_train_epochs: 0\n",
                      "trainer:\n  max_steps: -1\n");
  const auto &p = c.primary, &group = c.group;
  const auto cfg = zt::cli::RunConfig::load(p, {"trainer.packing=true"});
  EXPECT_EQ(cfg.key_ref("trainer.max_steps"), "trainer.max_steps (" + p.string() + ":7)");
  EXPECT_EQ(cfg.key_ref("trainer.num_train_epochs"),
            "trainer.num_train_epochs (" + group.string() + ":2)");
  EXPECT_EQ(cfg.key_ref("trainer.packing"), "trainer.packing (given on the command line)");
  EXPECT_EQ(cfg.key_ref("trainer.save_steps"), "trainer.save_steps");
  // The train command's check of the two keys, through the binary.
  const auto r = zt::testing::run_command(std::string(ZT_BINARY) + " train --config " + p.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output, "zerotune: error: " + group.string() +
                          ":2: trainer.num_train_epochs is 0 and trainer.max_steps (" + p.string() +
                          ":7) is -1, so the run would train no step (expected num_train_epochs > "
                          "0, or max_steps >= 1)\n");
}

// The first key of a message about several keys, given on the command line, says so right after
// its name, not at the end of the message, where it read as the last key's.
TEST(RunConfig, CommandLineNoteFollowsTheKeyItBelongsTo) {
  const GroupConfig c("learning_rate: 1.0e-5\n", "trainer:\n  max_steps: -1\n");
  const auto r = zt::testing::run_command(std::string(ZT_BINARY) + " train --config " +
                                          c.primary.string() + " trainer.num_train_epochs=0");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output, "zerotune: error: " + c.primary.string() +
                          ": trainer.num_train_epochs (given on the command line) is 0 and "
                          "trainer.max_steps (" +
                          c.primary.string() +
                          ":7) is -1, so the run would train no step (expected num_train_epochs > "
                          "0, or max_steps >= 1)\n");
}

// A message about one key names that key's own file and line (here a config group's file), not
// the primary sft.yaml; a key given on the command line names the primary and says so. (The
// train command's compute.n_gpus warning named the primary either way.)
TEST(RunConfig, SingleKeyMessageNamesItsKeysFile) {
  const GroupConfig c("n_gpus: 4\n", "", "compute");
  const std::string warning = " is 4 but the job has 1 rank(s); the actual world size (1) wins";
  auto r =
      zt::testing::run_command(std::string(ZT_BINARY) + " train --config " + c.primary.string());
  EXPECT_NE(r.output.find("zerotune: warning: " + c.group.string() + ":1: compute.n_gpus" +
                          warning + "\n"),
            std::string::npos)
      << r.output;
  r = zt::testing::run_command(std::string(ZT_BINARY) + " train --config " + c.primary.string() +
                               " compute.n_gpus=4");
  EXPECT_NE(r.output.find("zerotune: warning: " + c.primary.string() + ": compute.n_gpus" +
                          warning + " (given on the command line)\n"),
            std::string::npos)
      << r.output;
}

// A key spelled with dots is one key to YAML and OmegaConf (`trainer.learning_rate: 1e-3` at the
// top level is not trainer → learning_rate): nothing would read it, so it is refused, naming its
// line — at the top level and inside a section (attack finding 3).
TEST(RunConfig, KeyWithDotsInItsNameIsRefused) {
  zt::testing::TempDir dir;
  const auto p = dir / "sft.yaml";
  std::ofstream(p) << "model:\n  name_or_path: m\ntrainer.learning_rate: 1.0e-3\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            p.string() +
                ":3: config key 'trainer.learning_rate' is one key whose name holds dots (YAML and "
                "OmegaConf read it so; nothing reads it); to set trainer.learning_rate write each "
                "part as a nested mapping key or give trainer.learning_rate=… on the command "
                "line");
  std::ofstream(p) << "model:\n  name_or_path: m\ndataset:\n  train.path: d.jsonl\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            p.string() +
                ":4: config key 'train.path' in 'dataset' is one key whose name holds dots (YAML "
                "and OmegaConf read it so; nothing reads it); to set dataset.train.path write each "
                "part as a nested mapping key or give dataset.train.path=… on the command line");
}

// A NUL byte in a string value ("runs/o\0x" in YAML) is refused at start-up, naming the key and
// its line: as a path it was cut at the NUL (the run wrote to runs/o, or failed late with half a
// message) (attack finding 5).
TEST(RunConfig, NulByteInAStringIsRefused) {
  zt::testing::TempDir dir;
  const auto p = dir / "sft.yaml";
  std::ofstream(p) << "model:\n  name_or_path: m\ntrainer:\n  output_dir: \"runs/o\\0xyz\"\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            p.string() +
                ":4: trainer.output_dir: \"runs/o\\u0000xyz\" holds a NUL byte at offset 6; a "
                "path, name or text cannot hold one");
  std::ofstream(p) << "model:\n  name_or_path: m\nexp_dir: \"runs/e\\0\"\n";
  EXPECT_EQ(error_of([&] { zt::cli::RunConfig::load(p, {}); }),
            p.string() +
                ":3: exp_dir: \"runs/e\\u0000\" holds a NUL byte at offset 6; a path, name or text "
                "cannot hold one");
}
