// accelerate config / DeepSpeed JSON parsing: the settings zerotune acts on, unknown and repeated
// keys refused with file, line and key, known no-op keys noted.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "cli/accelerate_config.h"
#include "core/error.h"
#include "core/zt_test_util.h"

namespace zt::cli {
namespace {

namespace fs = std::filesystem;

using zt::testing::error_of;

// distributed_type DEEPSPEED without zero_stage: accelerate's DeepSpeedPlugin builds stage 2 (its
// default; tests/data/cli/deepspeed_sources.json accelerate_no_stage_alone / _no_section_alone).
// The deepspeed_config keys and mixed_precision are kept with their lines: accelerate launch passes
// them on (ACCELERATE_CONFIG_DS_FIELDS), and beside trainer.deepspeed they decide a refusal.
TEST(AccelerateConfig, DeepSpeedWithoutStageIsStageTwoAndItsFieldsAreKept) {
  const AccelerateConfig c = parse_accelerate_config_text(
      "distributed_type: DEEPSPEED\nmixed_precision: bf16\ndeepspeed_config:\n"
      "  zero3_init_flag: false\n  offload_optimizer_device: cpu\n",
      "a.yaml");
  EXPECT_EQ(c.zero_stage, 2);
  EXPECT_EQ(c.offload_optimizer_device, "cpu");
  ASSERT_EQ(c.deepspeed_fields.size(), 3u);
  EXPECT_EQ(c.deepspeed_fields[0].name, "deepspeed_config.zero3_init_flag");
  EXPECT_EQ(c.deepspeed_fields[0].at, "a.yaml:4");
  EXPECT_EQ(c.deepspeed_fields[1].name, "deepspeed_config.offload_optimizer_device");
  EXPECT_EQ(c.deepspeed_fields[1].at, "a.yaml:5");
  EXPECT_EQ(c.deepspeed_fields[2].name, "mixed_precision");
  EXPECT_EQ(c.deepspeed_fields[2].at, "a.yaml:2");
  EXPECT_EQ(c.deepspeed_source, "a.yaml's deepspeed_config");
  const AccelerateConfig bare =
      parse_accelerate_config_text("distributed_type: DEEPSPEED\nnum_processes: 2\n", "b.yaml");
  EXPECT_EQ(bare.zero_stage, 2);
  EXPECT_TRUE(bare.deepspeed_fields.empty());
  EXPECT_TRUE(bare.warnings.empty());
  const AccelerateConfig multi = parse_accelerate_config_text(
      "distributed_type: MULTI_GPU\nmixed_precision: bf16\n", "m.yaml");
  EXPECT_EQ(multi.zero_stage, std::nullopt);
  EXPECT_TRUE(multi.deepspeed_fields.empty());
  EXPECT_TRUE(multi.deepspeed_source.empty());
}

TEST(AccelerateConfig, DeepSpeedZero2WithOffload) {
  // The shape `accelerate config` writes for DeepSpeed.
  const AccelerateConfig c = parse_accelerate_config_text(R"(compute_environment: LOCAL_MACHINE
debug: false
deepspeed_config:
  gradient_accumulation_steps: 4
  gradient_clipping: 1.0
  offload_optimizer_device: cpu
  offload_param_device: none
  zero3_init_flag: false
  zero_stage: 2
distributed_type: DEEPSPEED
downcast_bf16: 'no'
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 4
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
)",
                                                          "ds.yaml");
  EXPECT_EQ(c.distributed_type, "DEEPSPEED");
  EXPECT_EQ(c.num_processes, 4);
  EXPECT_EQ(c.zero_stage, 2);
  EXPECT_EQ(c.offload_optimizer_device, "cpu");
  EXPECT_EQ(c.mixed_precision, "bf16");
  // Compared with the trainer's by `train` (check_deepspeed_values), as transformers compares
  // the DeepSpeed config accelerate builds from them.
  ASSERT_EQ(c.deepspeed_values.size(), 2u);
  EXPECT_EQ(c.deepspeed_values[0].key, "gradient_accumulation_steps");
  EXPECT_EQ(c.deepspeed_values[0].values, std::vector<double>{4});
  EXPECT_EQ(c.deepspeed_values[0].at, "ds.yaml:4");
  EXPECT_EQ(c.deepspeed_values[1].key, "gradient_clipping");
  EXPECT_EQ(c.deepspeed_values[1].values, std::vector<double>{1.0});
  EXPECT_EQ(c.deepspeed_values[1].text, "1.0");
  EXPECT_EQ(c.deepspeed_values[1].at, "ds.yaml:5");
  EXPECT_TRUE(c.warnings.empty()) << c.warnings.front();
  // "auto" is filled from the trainer: nothing to compare.
  const AccelerateConfig a = parse_accelerate_config_text(
      "distributed_type: DEEPSPEED\ndeepspeed_config:\n  gradient_accumulation_steps: auto\n"
      "  gradient_clipping: auto\n  zero_stage: 1\n",
      "auto.yaml");
  EXPECT_TRUE(a.deepspeed_values.empty());
  EXPECT_EQ(error_of([] {
              parse_accelerate_config_text(
                  "distributed_type: DEEPSPEED\ndeepspeed_config:\n  "
                  "gradient_accumulation_steps: 2.5\n",
                  "f.yaml");
            }),
            "f.yaml:3: key 'deepspeed_config.gradient_accumulation_steps' has value '2.5' "
            "(expected a number or \"auto\")");
}

// An accelerate config naming a DeepSpeed JSON and also a setting that JSON holds is refused, as
// accelerate refuses it (DeepSpeedPlugin._deepspeed_config_checks); the YAML's zero_stage won over
// the JSON's stage without a word. Keys the check allows (zero3_init_flag, the launcher) and a null
// mixed_precision, as `accelerate config` writes beside a JSON, are read.
TEST(AccelerateConfig, SettingsBesideADeepSpeedFileAreRefused) {
  zt::testing::TempDir dir;
  std::ofstream(dir / "ds.json") << R"({"zero_optimization": {"stage": 3}})";
  std::ofstream(dir / "acc.yaml") << "distributed_type: DEEPSPEED\n"
                                     "deepspeed_config:\n  deepspeed_config_file: ds.json\n"
                                     "  zero_stage: 2\n  gradient_clipping: 1.0\n"
                                     "mixed_precision: bf16\n";
  const std::string acc = (dir / "acc.yaml").string();
  // In accelerate's order (its message's list), not the file's.
  EXPECT_EQ(error_of([&] { parse_accelerate_config(acc); }),
            acc +
                ":3: deepspeed_config.deepspeed_config_file is given, so the DeepSpeed JSON holds "
                "these settings, and accelerate refuses them beside it (\"When using "
                "`deepspeed_config_file`, the following accelerate config variables will be "
                "ignored: ['gradient_accumulation_steps', 'gradient_clipping', 'zero_stage', "
                "'offload_optimizer_device', 'offload_param_device', 'offload_param_nvme_path', "
                "'offload_optimizer_nvme_path', 'zero3_save_16bit_model', "
                "'mixed_precision'].\"); remove them from the accelerate config "
                "(mixed_precision: set bf16.enabled in the JSON):\n  - " +
                acc + ":5: deepspeed_config.gradient_clipping\n  - " + acc +
                ":4: deepspeed_config.zero_stage\n  - " + acc + ":6: mixed_precision");
  // Refused beside trainer.deepspeed's JSON too (kGiven: the file is not opened).
  EXPECT_NE(error_of([&] {
              parse_accelerate_config(acc, TrainerDeepSpeed::kGiven);
            }).find(":4: deepspeed_config.zero_stage\n  - "),
            std::string::npos);
  std::ofstream(dir / "acc.yaml") << "distributed_type: DEEPSPEED\nmixed_precision: 'no'\n"
                                     "deepspeed_config:\n  deepspeed_config_file: ds.json\n";
  EXPECT_NE(error_of([&] { parse_accelerate_config(acc); }).find(":2: mixed_precision"),
            std::string::npos);
  std::ofstream(dir / "acc.yaml") << "distributed_type: DEEPSPEED\nmixed_precision: null\n"
                                     "deepspeed_config:\n  deepspeed_config_file: ds.json\n"
                                     "  zero3_init_flag: true\n"
                                     "  deepspeed_multinode_launcher: standard\n";
  EXPECT_EQ(parse_accelerate_config(acc).zero_stage, 3);
  // Without distributed_type DEEPSPEED accelerate reads no deepspeed_config (a warning says so).
  std::ofstream(dir / "acc.yaml") << "distributed_type: MULTI_GPU\nmixed_precision: bf16\n"
                                     "deepspeed_config:\n  deepspeed_config_file: ds.json\n"
                                     "  zero_stage: 2\n";
  EXPECT_FALSE(parse_accelerate_config(acc).zero_stage.has_value());
}

TEST(AccelerateConfig, UnknownKeysAreErrorsNamingFileLineAndKey) {
  EXPECT_EQ(
      error_of([] {
        parse_accelerate_config_text(
            "distributed_type: MULTI_GPU\nnum_processes: 2\nmy_knob: 3\ndeepspeed_config: {}\n",
            "a.yaml");
      }),
      "a.yaml:3: unknown key 'my_knob': not an accelerate config key");
  EXPECT_EQ(
      error_of([] {
        parse_accelerate_config_text(
            "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n  zero_stag: 1\n",
            "b.yaml");
      }),
      "b.yaml:4: unknown key 'deepspeed_config.zero_stag': not a key of accelerate's "
      "deepspeed_config (did "
      "you mean 'zero_stage'?)");
  // A key of a section written at the top level: the nested key is suggested, not the section
  // itself ("did you mean 'deepspeed_config'?").
  EXPECT_EQ(error_of([] {
              parse_accelerate_config_text(
                  "distributed_type: DEEPSPEED\ndeepspeed_config_file: ds.json\n", "t.yaml");
            }),
            "t.yaml:2: unknown key 'deepspeed_config_file': not an accelerate config key (did you "
            "mean 'deepspeed_config.deepspeed_config_file'? it belongs in the deepspeed_config "
            "section)");
  EXPECT_EQ(error_of([] {
              parse_accelerate_config_text("distributed_type: FSDP\nfsdp_version: 2\n", "v.yaml");
            }),
            "v.yaml:2: unknown key 'fsdp_version': not an accelerate config key (did you mean "
            "'fsdp_config.fsdp_version'? it belongs in the fsdp_config section)");
  // A section accelerate ignores for this distributed_type is still spell-checked.
  EXPECT_EQ(error_of([] {
              parse_accelerate_config_text(
                  "distributed_type: NO\nfsdp_config:\n  fsdp_sharding_stratgy: 1\n", "c.yaml");
            }),
            "c.yaml:3: unknown key 'fsdp_config.fsdp_sharding_stratgy': not a key of accelerate's "
            "fsdp_config "
            "(did you mean 'fsdp_sharding_strategy'?)");
}

// An accelerate config file with no settings (empty, comments only, `null`, a bare `---`) is an
// error naming it: it was run as one process at ZeRO stage 0 without a word.
TEST(AccelerateConfig, AFileWithoutSettingsIsAnError) {
  for (const char* text : {"", "\n", "# num_processes: 4\n", "null\n", "---\n"})
    EXPECT_EQ(error_of([&] { parse_accelerate_config_text(text, "e.yaml"); }),
              "e.yaml: the file holds no accelerate settings (it is empty, only comments, or "
              "null); expected a mapping such as `num_processes: 2` (accelerate refuses such a "
              "file too)")
        << text;
}

// A directory given as the accelerate config (`train --config_file DIR`) or as its DeepSpeed JSON
// opens as an empty stream: it was run as a file without settings (one process, ZeRO stage 0).
TEST(AccelerateConfig, ADirectoryIsNotAConfigFile) {
  zt::testing::TempDir dir;
  EXPECT_EQ(error_of([&] { parse_accelerate_config(dir.path().string()); }),
            "accelerate config '" + dir.path().string() +
                "' is a directory; expected an accelerate config YAML file");
  EXPECT_EQ(error_of([&] { parse_deepspeed_config(dir.path().string()); }),
            dir.path().string() + ": DeepSpeed config '" + dir.path().string() +
                "' is a directory; expected a DeepSpeed JSON file");
  EXPECT_EQ(error_of([&] {
              parse_accelerate_config_text(
                  "distributed_type: DEEPSPEED\ndeepspeed_config:\n  "
                  "deepspeed_config_file: " +
                      dir.path().string() + "\n",
                  "acc.yaml");
            }),
            "acc.yaml: DeepSpeed config '" + dir.path().string() +
                "' is a directory; expected a DeepSpeed JSON file");
}

// A tag PyYAML's safe_load (accelerate's loader) refuses is an error naming file, line and tag;
// yaml-cpp kept the value and dropped the tag (`!!python/object:os.system 2` read as 2). Core tags
// are read as the value's type.
TEST(AccelerateConfig, YamlTagsAsSafeLoadReadsThem) {
  for (const auto& [text, tag, line] : std::vector<std::tuple<std::string, std::string, int>>{
           {"num_processes: !!python/object:os.system 2\n", "!!python/object:os.system", 1},
           {"distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: !custom 2\n", "!custom",
            3},
           {"num_processes: 2\ntpu_env: !!set {a: null}\n", "!!set", 2},
           {"!!python/name:os.system\nnum_processes: 2\n", "!!python/name:os.system", 1}})
    EXPECT_EQ(error_of([&] { parse_accelerate_config_text(text, "t.yaml"); }),
              "t.yaml:" + std::to_string(line) + ": the YAML tag '" + tag +
                  "': an accelerate config takes only the tags !!str, !!int, !!float, !!bool, "
                  "!!null, !!seq and !!map (accelerate's yaml.safe_load refuses !!python/… and "
                  "custom tags); remove it")
        << text;
  const AccelerateConfig c = parse_accelerate_config_text(
      "num_processes: !!int 4\nmixed_precision: !!str bf16\ntpu_env: !!seq []\n", "t.yaml");
  EXPECT_EQ(c.num_processes, 4);
  EXPECT_EQ(c.mixed_precision, "bf16");
}

// A core tag types the value as accelerate's yaml.safe_load does where a number or a boolean is
// read (PyYAML 6: `!!float 2` is 2.0, `!!str false` and 'false' are str, a plain n is 'n', `!!bool
// yes` is True): a float process count (torchrun refuses "2.0") and a string boolean (accelerate
// tests it for truth, so 'false' is true) are refused; yaml-cpp read them as 2 and false.
TEST(AccelerateConfig, CoreTagsTypeValuesAsSafeLoad) {
  const auto error = [](const std::string& text) {
    return error_of([&] { parse_accelerate_config_text(text, "t.yaml"); });
  };
  EXPECT_EQ(error("num_processes: !!float 2\n"),
            "t.yaml:1: key 'num_processes' has value '2' (expected an integer in [1, 1048576]; "
            "accelerate's yaml.safe_load reads '!!float 2' as the float 2.0)");
  EXPECT_EQ(error("num_processes: 2\nuse_cpu: !!str false\n"),
            "t.yaml:2: key 'use_cpu' has value 'false' (expected true or false; accelerate's "
            "yaml.safe_load reads '!!str false' as a string, which Python takes as true whatever "
            "it says: write true or false, unquoted)");
  for (const char* v : {"'false'", "n", "\"no\""})
    EXPECT_NE(
        error(std::string("use_cpu: ") + v + "\n").find("accelerate's yaml.safe_load reads '"),
        std::string::npos)
        << v;
  EXPECT_EQ(error("use_cpu: !!int 1\n"),
            "t.yaml:1: key 'use_cpu' has value '1' (expected true or false)");
  const AccelerateConfig c =
      parse_accelerate_config_text("num_processes: !!int 4\nuse_cpu: !!bool yes\n", "t.yaml");
  EXPECT_EQ(c.num_processes, 4);
  EXPECT_TRUE(c.use_cpu);
  const AccelerateConfig q =
      parse_accelerate_config_text("num_processes: '3'\nuse_cpu: Off\n", "t.yaml");
  EXPECT_EQ(q.num_processes, 3);
  EXPECT_FALSE(q.use_cpu);
}

// DeepSpeed validates its JSON with pydantic, which coerces a boolean given as a string ("false",
// "no", "0" …) instead of testing it for truth: a DeepSpeed JSON's string booleans read so, while
// the accelerate YAML's are refused (above).
TEST(AccelerateConfig, DeepSpeedJsonStringBooleansAreCoercedAsPydanticDoes) {
  zt::testing::TempDir dir;
  const std::string acc = (dir / "acc.yaml").string();
  std::ofstream(acc) << "distributed_type: DEEPSPEED\nmixed_precision: null\n"
                        "deepspeed_config:\n  deepspeed_config_file: ds.json\n";
  std::ofstream(dir / "ds.json")
      << R"({"zero_optimization": {"stage": 2, "cpu_offload": "false"}})";
  EXPECT_NE(parse_accelerate_config(acc).offload_optimizer_device, "cpu");
  std::ofstream(dir / "ds.json") << R"({"zero_optimization": {"stage": 2, "cpu_offload": "Yes"}})";
  EXPECT_EQ(parse_accelerate_config(acc).offload_optimizer_device, "cpu");
  std::ofstream(dir / "ds.json")
      << R"({"zero_optimization": {"stage": 2, "cpu_offload": "maybe"}})";
  EXPECT_NE(
      error_of([&] {
        parse_accelerate_config(acc);
      }).find("key 'zero_optimization.cpu_offload' has value 'maybe' (expected true or false"),
      std::string::npos);
}

TEST(AccelerateConfig, DuplicateKeysAreErrors) {
  EXPECT_EQ(error_of([] {
              parse_accelerate_config_text(
                  "num_processes: 2\nmixed_precision: bf16\nnum_processes: 4\n", "d.yaml");
            }),
            "d.yaml:3: duplicate key 'num_processes' (first given at line 1)");
  EXPECT_EQ(
      error_of([] {
        parse_accelerate_config_text(
            "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 1\n  zero_stage: 2\n",
            "d.yaml");
      }),
      "d.yaml:4: duplicate key 'deepspeed_config.zero_stage' (first given at line 3)");
}

TEST(AccelerateConfig, MergeKeysSecondDocumentsAndDeepNesting) {
  // Merge keys resolve as PyYAML does (the mapping's own keys win); the merged keys are checked.
  const AccelerateConfig m = parse_accelerate_config_text(
      "distributed_type: DEEPSPEED\ndeepspeed_config:\n  <<: {zero_stage: 2, "
      "offload_optimizer_device: cpu}\n"
      "  zero_stage: 3\n",
      "m.yaml");
  EXPECT_EQ(m.zero_stage, 3);
  EXPECT_EQ(m.offload_optimizer_device, "cpu");
  EXPECT_EQ(error_of([] {
              parse_accelerate_config_text(
                  "distributed_type: DEEPSPEED\ndeepspeed_config:\n  <<: {zero_stag: 1}\n  "
                  "zero_stage: 1\n",
                  "u.yaml");
            }),
            "u.yaml:3: unknown key 'deepspeed_config.zero_stag': not a key of accelerate's "
            "deepspeed_config (did "
            "you mean 'zero_stage'?)");
  EXPECT_EQ(error_of([] {
              parse_accelerate_config_text("num_processes: 2\n---\nnum_processes: 4\n", "s.yaml");
            }).substr(0, 44),
            "s.yaml:2: a second YAML document starts here");
  const auto dir = fs::path(::testing::TempDir()) / "zt_ds_deep";
  fs::create_directories(dir);
  for (size_t depth : {100000u, 200000u}) {
    std::ofstream(dir / "deep.json")
        << "{\"train_batch_size\": 8,\n \"x\": " << std::string(depth, '[')
        << std::string(depth, ']') << "}\n";
    EXPECT_EQ(error_of([&] { parse_deepspeed_config((dir / "deep.json").string()); }),
              (dir / "deep.json").string() + ":2: nesting depth exceeds 400");
  }
  fs::remove_all(dir);
}

TEST(AccelerateConfig, KnownKeysThatChangeNothingGetANoteOnlyOffTheirDefault) {
  // The users' own file: every key is known, and every no-op key is at its default: no notes.
  const fs::path users =
      fs::path(ZT_SHARED_DATA).parent_path() / "seed_configs" / "sft_zero1_4gpu.yaml";
  const AccelerateConfig u = parse_accelerate_config(users.string());
  EXPECT_EQ(u.zero_stage, 1);
  EXPECT_EQ(u.offload_optimizer_device, "cpu");
  EXPECT_EQ(u.num_processes, 4);
  EXPECT_EQ(u.mixed_precision, "bf16");
  EXPECT_TRUE(u.notes.empty()) << u.notes.front();
  EXPECT_TRUE(u.warnings.empty()) << u.warnings.front();
  const AccelerateConfig z2 = parse_accelerate_config(
      (fs::path(ZT_SHARED_DATA).parent_path() / "seed_configs" / "sft_zero2_4gpu.yaml").string());
  EXPECT_EQ(z2.zero_stage, 2);
  const AccelerateConfig c = parse_accelerate_config_text(
      "debug: true\ntpu_use_sudo: true\nmain_training_function: train\ndistributed_type: "
      "DEEPSPEED\n"
      "deepspeed_config:\n  zero_stage: 2\n  zero3_init_flag: true\n",
      "n.yaml");
  ASSERT_EQ(c.notes.size(), 3u);
  EXPECT_EQ(c.notes[0],
            "n.yaml:1: 'debug: true' changes nothing in zerotune: accelerate's collective-shape "
            "checks; zerotune's "
            "transports always check sizes");
  EXPECT_EQ(c.notes[1], "n.yaml:2: 'tpu_use_sudo: true' changes nothing in zerotune: TPU only");
  EXPECT_EQ(c.notes[2].rfind("n.yaml:3: 'main_training_function: train' changes nothing", 0), 0u);
}

TEST(AccelerateConfig, DeepSpeedJsonKeysAreCheckedToo) {
  const auto dir = fs::path(::testing::TempDir()) / "zt_ds_keys";
  fs::create_directories(dir);
  std::ofstream(dir / "bad.json") << "{\n  \"zero_optimization\": {\n    \"stage\": 2,\n"
                                     "    \"overlap_comms\": true\n  }\n}\n";
  EXPECT_EQ(error_of([&] { parse_deepspeed_config((dir / "bad.json").string()); }),
            (dir / "bad.json").string() +
                ":4: unknown key 'zero_optimization.overlap_comms': not a key of DeepSpeed's "
                "zero_optimization (did "
                "you mean 'overlap_comm'?)");
  std::ofstream(dir / "dup.json") << "{\"train_batch_size\": 8,\n \"train_batch_size\": 16}\n";
  EXPECT_EQ(
      error_of([&] { parse_deepspeed_config((dir / "dup.json").string()); }),
      (dir / "dup.json").string() + ":2: duplicate key 'train_batch_size' (first given at line 1)");
  std::ofstream(dir / "q.json")
      << "{\"zero_optimization\": {\"stage\": 3, \"zero_quantized_gradients\": true}}\n";
  EXPECT_EQ(error_of([&] { parse_deepspeed_config((dir / "q.json").string()); }),
            (dir / "q.json").string() +
                ":1: 'zero_optimization.zero_quantized_gradients: true' is not supported by "
                "zerotune: ZeRO++ "
                "quantised gradient reduction changes the gradients");
  std::ofstream(dir / "ok.json") << R"({"zero_optimization": {"stage": 3, "overlap_comm": true,
    "offload_optimizer": {"device": "cpu", "pin_memory": true}, "stage3_max_live_parameters": 1e9},
    "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto", "steps_per_print": 10,
    "wall_clock_breakdown": false})";
  const AccelerateConfig ok = parse_deepspeed_config((dir / "ok.json").string());
  EXPECT_EQ(ok.zero_stage, 3);
  EXPECT_EQ(ok.offload_optimizer_device, "cpu");
  EXPECT_TRUE(ok.notes.empty()) << ok.notes.front();
  fs::remove_all(dir);
}

// A NUL byte in the DeepSpeed JSON is refused naming file, line and column, as every JSON read
// refuses one (it was read by the YAML loader, which did not look).
TEST(AccelerateConfig, DeepSpeedJsonWithANulByteIsRefused) {
  zt::testing::TempDir dir;
  const std::string nul(1, '\0');
  std::ofstream(dir / "ds.json", std::ios::binary)
      << "{\"zero_optimization\": {\"stage\": 2},\n \"bf16\": {\"enabled\": true}}" << nul << "\n";
  const std::string want =
      (dir / "ds.json").string() + ":2:28: a NUL byte: not JSON text (a truncated or binary file?)";
  EXPECT_EQ(error_of([&] { parse_deepspeed_config((dir / "ds.json").string()); }), want);
  std::ofstream(dir / "acc.yaml") << "distributed_type: DEEPSPEED\n"
                                     "deepspeed_config:\n  deepspeed_config_file: ds.json\n";
  EXPECT_EQ(error_of([&] { parse_accelerate_config((dir / "acc.yaml").string()); }), want);
}

// A DeepSpeed JSON's own optimizer, scheduler and batch sizes are not read (the trainer's are):
// anything but "auto" gets a note saying so (it got none: an SGD at lr 0.1 ran as the trainer's
// AdamW without a word).
TEST(AccelerateConfig, DeepSpeedOptimizerSchedulerAndBatchGetANote) {
  const auto dir = fs::path(::testing::TempDir()) / "zt_ds_opt";
  fs::create_directories(dir);
  std::ofstream(dir / "ds.json")
      << "{\"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.1}},\n"
         " \"scheduler\": {\"type\": \"WarmupDecayLR\"},\n"
         " \"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": \"auto\"}\n";
  const AccelerateConfig c = parse_deepspeed_config((dir / "ds.json").string());
  ASSERT_EQ(c.notes.size(), 3u);
  EXPECT_EQ(c.notes[0].rfind((dir / "ds.json").string() + ":1: 'optimizer: ", 0), 0u) << c.notes[0];
  EXPECT_NE(c.notes[0].find("zerotune's optimizer is trainer.optim"), std::string::npos);
  EXPECT_EQ(c.notes[1].rfind((dir / "ds.json").string() + ":2: 'scheduler: ", 0), 0u) << c.notes[1];
  EXPECT_EQ(c.notes[2].rfind((dir / "ds.json").string() + ":3: 'train_batch_size: 64' changes", 0),
            0u)
      << c.notes[2];
  std::ofstream(dir / "ds.json") << "{\"train_batch_size\": \"auto\"}\n";
  EXPECT_TRUE(parse_deepspeed_config((dir / "ds.json").string()).notes.empty());
  fs::remove_all(dir);
}

// The optimizer block the users' DeepSpeed files carry, AdamW with every value "auto", is the
// trainer's AdamW as transformers fills it: no note (it got one). Another type, or one value that
// is not "auto", still gets it.
TEST(AccelerateConfig, DeepSpeedAdamWWithAllAutoParamsGetsNoNote) {
  const auto dir = fs::path(::testing::TempDir()) / "zt_ds_auto_opt";
  fs::create_directories(dir);
  const std::string file = (dir / "ds.json").string();
  auto notes_of = [&](const std::string& optimizer) {
    std::ofstream(file) << "{\"optimizer\": " << optimizer << "}\n";
    return parse_deepspeed_config(file).notes;
  };
  EXPECT_TRUE(notes_of("{\"type\": \"AdamW\", \"params\": {\"lr\": \"auto\", \"betas\": \"auto\", "
                       "\"eps\": \"auto\", \"weight_decay\": \"auto\"}}")
                  .empty());
  EXPECT_TRUE(notes_of("{\"type\": \"adamw\"}").empty());
  for (const char* noted :
       {"{\"type\": \"AdamW\", \"params\": {\"lr\": 3e-5, \"betas\": \"auto\"}}",
        "{\"type\": \"Lamb\", \"params\": {\"lr\": \"auto\"}}",
        "{\"type\": \"AdamW\", \"params\": {\"lr\": \"auto\"}, \"legacy_fusion\": true}"}) {
    const auto notes = notes_of(noted);
    ASSERT_EQ(notes.size(), 1u) << noted;
    EXPECT_EQ(notes[0].rfind(file + ":1: 'optimizer: {…}' changes nothing in zerotune: ", 0), 0u)
        << notes[0];
  }
  fs::remove_all(dir);
}

TEST(AccelerateConfig, FsdpStrategiesMapToZeroStages) {
  const std::pair<std::string, int> cases[] = {
      {"FULL_SHARD", 3}, {"SHARD_GRAD_OP", 2}, {"NO_SHARD", 0}, {"1", 3}, {"2", 2}, {"3", 0}};
  for (const auto& [strategy, stage] : cases) {
    const AccelerateConfig c = parse_accelerate_config_text(
        "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: " + strategy +
            "\n  fsdp_offload_params: false\n",
        "f.yaml");
    EXPECT_EQ(c.zero_stage, stage) << strategy;
    EXPECT_EQ(c.offload_optimizer_device, "none");
  }
  const AccelerateConfig v2 = parse_accelerate_config_text(
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: "
      "false\n"
      "  fsdp_offload_params: true\n",
      "f2.yaml");
  EXPECT_EQ(v2.zero_stage, 2);
  EXPECT_EQ(v2.offload_optimizer_device, "cpu");
  ASSERT_EQ(v2.warnings.size(), 1u);
  EXPECT_NE(v2.warnings[0].find("fsdp_offload_params: true is run as optimizer offload"),
            std::string::npos);
}

// The section distributed_type does not select is ignored, as accelerate ignores it, with a
// warning whatever the type: deepspeed_config beside FSDP was dropped without a word (ZeRO stage 3,
// no offload) while beside MULTI_GPU it was warned about.
TEST(AccelerateConfig, TheUnselectedSectionIsIgnoredWithAWarning) {
  const std::string ds =
      "deepspeed_config:\n  offload_optimizer_device: cpu\n  zero_stage: 1\n"
      "mixed_precision: bf16\nnum_processes: 2\n";
  const AccelerateConfig fsdp =
      parse_accelerate_config_text("distributed_type: FSDP\n" + ds, "f.yaml");
  EXPECT_EQ(fsdp.zero_stage, 3);  // fsdp_config's default, FULL_SHARD
  EXPECT_EQ(fsdp.offload_optimizer_device, "none");
  ASSERT_EQ(fsdp.warnings.size(), 1u);
  EXPECT_EQ(fsdp.warnings[0],
            "f.yaml: deepspeed_config is ignored with distributed_type FSDP, as accelerate ignores "
            "it (set distributed_type: DEEPSPEED to use it)");
  const AccelerateConfig multi =
      parse_accelerate_config_text("distributed_type: MULTI_GPU\n" + ds, "m.yaml");
  EXPECT_EQ(multi.zero_stage, std::nullopt);
  ASSERT_EQ(multi.warnings.size(), 1u);
  EXPECT_EQ(multi.warnings[0],
            "m.yaml: deepspeed_config is ignored with distributed_type MULTI_GPU, as accelerate "
            "ignores it (set distributed_type: DEEPSPEED to use it)");
  const AccelerateConfig dspeed = parse_accelerate_config_text(
      "distributed_type: DEEPSPEED\n" + ds + "fsdp_config:\n  fsdp_sharding_strategy: 2\n",
      "d.yaml");
  EXPECT_EQ(dspeed.zero_stage, 1);
  ASSERT_EQ(dspeed.warnings.size(), 1u);
  EXPECT_EQ(dspeed.warnings[0],
            "d.yaml: fsdp_config is ignored with distributed_type DEEPSPEED, as accelerate "
            "ignores it (set distributed_type: FSDP to use it)");
}

// Beside trainer.deepspeed (TrainerDeepSpeed::kGiven) TrainingArguments' DeepSpeedPlugin replaces
// the accelerate config's DeepSpeed JSON, which accelerate then never opens
// (tests/data/cli/deepspeed_sources.json accelerate_json_file_missing / _fp16: transformers runs):
// a missing file, or one zerotune refuses alone, is recorded by its path and read no further.
TEST(AccelerateConfig, ADeepSpeedFileReplacedByTrainerDeepSpeedIsNotOpened) {
  zt::testing::TempDir dir;
  std::ofstream(dir / "fp16.json") << R"({"zero_optimization": {"stage": 1},
      "fp16": {"enabled": true}})";
  for (const std::string file : {"missing.json", "fp16.json"}) {
    SCOPED_TRACE(file);
    std::ofstream(dir / "acc.yaml") << "distributed_type: DEEPSPEED\nnum_processes: 2\n"
                                       "deepspeed_config:\n  deepspeed_config_file: " +
                                           file + "\n";
    const std::string acc = (dir / "acc.yaml").string();
    const AccelerateConfig c = parse_accelerate_config(acc, TrainerDeepSpeed::kGiven);
    EXPECT_EQ(c.num_processes, 2);
    EXPECT_EQ(c.distributed_type, "DEEPSPEED");
    EXPECT_EQ(c.deepspeed_source,
              file + " (deepspeed_config.deepspeed_config_file of " + acc + ")");
    EXPECT_EQ(c.zero_stage, std::nullopt);
    EXPECT_TRUE(c.deepspeed_values.empty());
    EXPECT_TRUE(c.warnings.empty());
    // Alone it is the config in force, read and checked.
    const std::string e = error_of([&] { parse_accelerate_config(acc); });
    EXPECT_NE(e.find(file == "missing.json" ? "cannot be read" : "fp16.enabled"), std::string::npos)
        << e;
  }
}

// fsdp_config where accelerate does not act on it — another distributed_type, or FSDP beside
// trainer.deepspeed (DeepSpeed runs) — gets no notes or warnings about its keys, only the one that
// it is not used (from cli/deepspeed_source.cpp beside trainer.deepspeed); an unknown key in it is
// still an error.
TEST(AccelerateConfig, AnUnusedFsdpSectionGetsOnlyTheNotUsedWarning) {
  const std::string fsdp =
      "fsdp_config:\n  fsdp_offload_params: true\n  fsdp_sharding_strategy: HYBRID_SHARD\n"
      "  fsdp_activation_checkpointing: true\n";
  const AccelerateConfig alone =
      parse_accelerate_config_text("distributed_type: FSDP\n" + fsdp, "f.yaml");
  EXPECT_EQ(alone.warnings.size(), 2u);  // hybrid sharding, offload_params
  EXPECT_EQ(alone.notes.size(), 1u);     // fsdp_activation_checkpointing
  EXPECT_EQ(alone.zero_stage, 3);
  const AccelerateConfig beside = parse_accelerate_config_text(
      "distributed_type: FSDP\n" + fsdp, "f.yaml", ".", TrainerDeepSpeed::kGiven);
  EXPECT_TRUE(beside.warnings.empty());
  EXPECT_TRUE(beside.notes.empty());
  EXPECT_EQ(beside.zero_stage, std::nullopt);
  EXPECT_EQ(beside.offload_optimizer_device, "none");
  // Its values are still checked beside trainer.deepspeed: accelerate builds the FSDP plugin from
  // them and refuses a bad one (KeyError 'BOGUS' from FullyShardedDataParallelPlugin, checked with
  // accelerate 1.11.0 + TrainingArguments(deepspeed=...)).
  EXPECT_NE(error_of([] {
              parse_accelerate_config_text(
                  "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: BOGUS\n",
                  "b.yaml", ".", TrainerDeepSpeed::kGiven);
            }).find("b.yaml:3: key 'fsdp_config.fsdp_sharding_strategy' has value 'BOGUS'"),
            std::string::npos);
  const AccelerateConfig multi =
      parse_accelerate_config_text("distributed_type: MULTI_GPU\n" + fsdp, "m.yaml");
  EXPECT_TRUE(multi.notes.empty());
  ASSERT_EQ(multi.warnings.size(), 1u);
  EXPECT_EQ(multi.warnings[0],
            "m.yaml: fsdp_config is ignored with distributed_type MULTI_GPU, as accelerate "
            "ignores it (set distributed_type: FSDP to use it)");
  EXPECT_NE(error_of([] {
              parse_accelerate_config_text(
                  "distributed_type: MULTI_GPU\nfsdp_config:\n  fsdp_sharding_stratgy: 1\n",
                  "u.yaml");
            }).find("u.yaml:3: unknown key 'fsdp_config.fsdp_sharding_stratgy'"),
            std::string::npos);
}

// A DeepSpeed JSON's zero_optimization.stage "auto" is stage 2 and an offload device "auto" none:
// accelerate's DeepSpeedPlugin fills them with its own zero_stage (2 unless the accelerate config
// gives one, which it refuses beside a JSON) and offload devices (golden trainer_auto_stage,
// accelerate_json_auto_stage_alone).
TEST(AccelerateConfig, DeepSpeedAutoStageIsTwoAndAutoOffloadIsNone) {
  const AccelerateConfig c = parse_deepspeed_settings(
      Json::parse(R"({"zero_optimization": {"stage": "auto", "offload_optimizer":
        {"device": "auto"}, "offload_param": {"device": "auto"}}})"),
      "s.yaml:3: trainer.deepspeed");
  EXPECT_EQ(c.zero_stage, 2);
  EXPECT_EQ(c.offload_optimizer_device, "none");
  EXPECT_EQ(c.offload_param_device, "none");
  EXPECT_TRUE(c.warnings.empty());
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_EQ(c.notes[0],
            "s.yaml:3: trainer.deepspeed: zero_optimization.stage \"auto\" is ZeRO stage 2, as "
            "accelerate's DeepSpeedPlugin fills it (its default zero_stage)");
  // Parameter offload given is warned about (parameters stay on the device).
  const AccelerateConfig param = parse_deepspeed_settings(
      Json::parse(R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}})"),
      "o");
  ASSERT_EQ(param.warnings.size(), 1u);
  EXPECT_EQ(param.warnings[0],
            "o: parameter offload (offload_param.device: cpu) is not supported; parameters stay "
            "on the device");
  EXPECT_EQ(error_of([] {
              parse_deepspeed_settings(Json::parse(R"({"zero_optimization": {"stage": "two"}})"),
                                       "o");
            }),
            "o: key 'zero_optimization.stage' has value 'two' (expected an integer in [0, 3] or "
            "\"auto\")");
  EXPECT_EQ(error_of([] {
              parse_deepspeed_settings(
                  Json::parse(R"({"zero_optimization": {"offload_optimizer": {"device": "gpu"}}})"),
                  "o");
            }),
            "o: key 'zero_optimization.offload_optimizer.device' has value 'gpu' (expected none, "
            "cpu or \"auto\")");
}

// The fields accelerate refuses beside a DeepSpeed JSON, in its message's order whatever the
// file's, each with its line; the others (zero3_init_flag, the launcher keys) are not listed.
TEST(AccelerateConfig, FieldsIgnoredBesideAJsonAreListedInAcceleratesOrder) {
  const std::vector<AccelerateConfig::Field> fields = {
      {"mixed_precision", "a:2"},
      {"deepspeed_config.zero3_init_flag", "a:4"},
      {"deepspeed_config.offload_optimizer_device", "a:5"},
      {"deepspeed_config.gradient_accumulation_steps", "a:6"}};
  EXPECT_EQ(fields_ignored_beside_deepspeed_json(fields),
            "\n  - a:6: deepspeed_config.gradient_accumulation_steps"
            "\n  - a:5: deepspeed_config.offload_optimizer_device\n  - a:2: mixed_precision");
  EXPECT_EQ(fields_ignored_beside_deepspeed_json({{"deepspeed_config.zero3_init_flag", "a:4"}}),
            "");
}

TEST(AccelerateConfig, DeepSpeedJsonFile) {
  const auto dir = fs::path(::testing::TempDir()) / "zt_ds_json";
  fs::create_directories(dir);
  {
    std::ofstream(dir / "ds.json") << R"({"zero_optimization": {"stage": 1, "offload_optimizer":
      {"device": "cpu"}}, "bf16": {"enabled": true}, "gradient_accumulation_steps": "auto",
      "gradient_clipping": "auto", "train_micro_batch_size_per_gpu": "auto"})";
    std::ofstream(dir / "acc.yaml") << "distributed_type: DEEPSPEED\nnum_processes: 8\n"
                                       "deepspeed_config:\n  deepspeed_config_file: ds.json\n";
  }
  const AccelerateConfig c = parse_accelerate_config((dir / "acc.yaml").string());
  EXPECT_EQ(c.zero_stage, 1);
  EXPECT_EQ(c.offload_optimizer_device, "cpu");
  EXPECT_EQ(c.mixed_precision, "bf16");
  EXPECT_EQ(c.num_processes, 8);
  // bf16.enabled is compared with trainer.bf16; every other value is "auto".
  ASSERT_EQ(c.deepspeed_values.size(), 1u);
  EXPECT_EQ(c.deepspeed_values[0].key, "bf16.enabled");
  EXPECT_EQ(c.deepspeed_values[0].values, std::vector<double>{1});
  // Numbers that transformers compares with the trainer's are kept with their file:line.
  std::ofstream(dir / "ds.json") << R"({"train_micro_batch_size_per_gpu": 4,
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.95], "eps": "auto"}},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 2e-5, "warmup_num_steps": 10}}})";
  const AccelerateConfig d = parse_deepspeed_config((dir / "ds.json").string());
  ASSERT_EQ(d.deepspeed_values.size(), 4u);
  const std::string at = (dir / "ds.json").string();
  EXPECT_EQ(d.deepspeed_values[0].key, "train_micro_batch_size_per_gpu");
  EXPECT_EQ(d.deepspeed_values[0].values, std::vector<double>{4});
  EXPECT_EQ(d.deepspeed_values[0].at, at + ":1");
  EXPECT_EQ(d.deepspeed_values[1].key, "optimizer.params.lr");
  EXPECT_EQ(d.deepspeed_values[1].text, "1e-3");
  EXPECT_EQ(d.deepspeed_values[2].key, "optimizer.params.betas");
  EXPECT_EQ(d.deepspeed_values[2].values, (std::vector<double>{0.9, 0.95}));
  EXPECT_EQ(d.deepspeed_values[2].text, "[0.9, 0.95]");
  EXPECT_EQ(d.deepspeed_values[3].key, "scheduler.params.warmup_max_lr");
  EXPECT_EQ(d.deepspeed_values[3].at, at + ":3");
  fs::remove_all(dir);
}

TEST(AccelerateConfig, BadValuesNameFileLineKeyAndValue) {
  EXPECT_EQ(error_of([] { parse_accelerate_config_text("num_processes: four\n", "x.yaml"); }),
            "x.yaml:1: key 'num_processes' has value 'four' (expected an integer in [1, 1048576])");
  // A null or a list is named as what it is (it was "has value '<not a scalar>'").
  EXPECT_EQ(error_of([] { parse_accelerate_config_text("num_processes: null\n", "x.yaml"); }),
            "x.yaml:1: key 'num_processes' is null (expected an integer in [1, 1048576])");
  EXPECT_EQ(error_of([] { parse_accelerate_config_text("num_processes: [2]\n", "x.yaml"); }),
            "x.yaml:1: key 'num_processes' is a list (expected an integer in [1, 1048576])");
  EXPECT_EQ(
      error_of([] {
        parse_accelerate_config_text(
            "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 4\n", "x.yaml");
      }),
      "x.yaml:3: key 'deepspeed_config.zero_stage' has value '4' (expected an integer in [0, 3])");
  EXPECT_EQ(
      error_of([] {
        parse_accelerate_config_text(
            "distributed_type: DEEPSPEED\ndeepspeed_config:\n  offload_optimizer_device: nvme\n",
            "x.yaml");
      }),
      "x.yaml:3: key 'deepspeed_config.offload_optimizer_device' has value 'nvme' (expected none "
      "or cpu (zerotune does not offload to nvme))");
  EXPECT_EQ(error_of([] { parse_accelerate_config_text("distributed_type: XLA\n", "x.yaml"); }),
            "x.yaml:1: key 'distributed_type' has value 'XLA' (expected NO, MULTI_CPU, MULTI_GPU, "
            "DEEPSPEED or FSDP)");
  EXPECT_EQ(error_of([] { parse_accelerate_config("/nonexistent/acc.yaml"); }),
            "accelerate config '/nonexistent/acc.yaml' cannot be read: /nonexistent/acc.yaml: "
            "cannot open: No such file or directory");
  EXPECT_EQ(error_of([] { parse_deepspeed_config("/dev/zero"); }),
            "/dev/zero: DeepSpeed config '/dev/zero' cannot be read: /dev/zero: not a regular file "
            "(a device); expected a file");
  // A device is refused (`launch --config_file /dev/zero` read without end).
  EXPECT_EQ(error_of([] { parse_accelerate_config("/dev/zero"); }),
            "accelerate config '/dev/zero' cannot be read: /dev/zero: not a regular file (a "
            "device); expected a file");
}

// fp16 asked for in the DeepSpeed JSON: refused naming the file, line and key (transformers
// refuses an fp16.enabled that differs from its arguments). The accelerate file's mixed_precision
// fp16 / fp8 is read as given: `train` refuses it unless trainer.bf16 is on (TrainCli tests).
TEST(AccelerateConfig, Fp16InTheDeepSpeedJsonIsRefused) {
  EXPECT_EQ(parse_accelerate_config_text("mixed_precision: fp16\n", "x.yaml").mixed_precision,
            "fp16");
  const auto dir = fs::path(::testing::TempDir()) / "zt_ds_fp16";
  fs::create_directories(dir);
  std::ofstream(dir / "ds.json") << "{\"zero_optimization\": {\"stage\": 2},\n"
                                    " \"fp16\": {\"enabled\": true}}";
  std::ofstream(dir / "acc.yaml") << "distributed_type: DEEPSPEED\n"
                                     "deepspeed_config:\n  deepspeed_config_file: ds.json\n";
  EXPECT_EQ(error_of([&] { parse_accelerate_config((dir / "acc.yaml").string()); }),
            (dir / "ds.json").string() +
                ":2: key 'fp16.enabled' has value 'true' (expected false or \"auto\": zerotune "
                "trains in bf16 or fp32, not fp16, which needs loss scaling (as trainer.fp16 is "
                "refused); enable bf16 instead)");
  std::ofstream(dir / "ds.json")
      << "{\"fp16\": {\"enabled\": \"auto\"}, \"bf16\": {\"enabled\": true}}";
  EXPECT_EQ(parse_accelerate_config((dir / "acc.yaml").string()).mixed_precision, "bf16");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace zt::cli
