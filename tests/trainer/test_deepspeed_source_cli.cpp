// Which DeepSpeed settings `zerotune train` uses when an accelerate config and trainer.deepspeed
// are both given, against what transformers 4.57.1 + accelerate 1.11.0 do for the same files
// (tests/data/cli/deepspeed_sources.json, tools/make_deepspeed_source_goldens.py: accelerate
// launch's environment, then TrainingArguments and a Trainer): the same refusals, quoting
// accelerate's reason and naming each key's file:line, or the same ZeRO stage and offload in force,
// said in the start-up line and acted on (the rank-0 line, the bf16 export of DeepSpeed runs).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "io/json.h"
#include "train_cli_util.h"

namespace fs = std::filesystem;
using zt::Json;

namespace {

class DeepSpeedSourceCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("zt_ds_source_" + std::to_string(getpid()));
    const std::string error = zt_test::write_tiny_job(root_);
    ASSERT_TRUE(error.empty()) << error;
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static Json golden() {
    return Json::parse(zt_test::slurp(fs::path(ZT_TEST_DATA) / "cli" / "deepspeed_sources.json"));
  }
  // `zerotune train` on the tiny job, one step, bf16 (the golden's trainer arguments: batch 2,
  // accumulation 8 / 2 = 4), with `extra` arguments.
  static zt_test::RunResult train(const std::string& name, const std::string& extra) {
    return zt_test::run(std::string(ZT_BINARY) + " train --config " +
                        (root_ / "sft.yaml").string() + " exp_name=" + name +
                        " trainer.max_steps=1 trainer.eval_strategy=no trainer.bf16=true " + extra);
  }
  // The 1-based line of `text` whose first non-blank characters are `key` + ':'.
  static int line_of(const std::string& text, const std::string& key) {
    std::istringstream in(text);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n)
      if (line.substr(line.find_first_not_of(' ')).starts_with(key + ":")) return n;
    return 0;
  }
  // The value of top-level `key` in YAML `text` (to the end of its line), "" without one.
  static std::string yaml_value(const std::string& text, const std::string& key) {
    const size_t at = text.find("\n" + key + ": ");
    if (at == std::string::npos) return "";
    const size_t b = at + key.size() + 3;
    return text.substr(b, text.find('\n', b) - b);
  }
  static std::string dtype(const std::string& name) {
    return Json::parse(zt_test::slurp(root_ / "runs" / name / "final" / "config.json"))
        .value("torch_dtype", "");
  }

  static fs::path root_;
};
fs::path DeepSpeedSourceCli::root_;

// Each combination of the golden, run as the users run it (`train --config_file accel.yaml` and
// trainer.deepspeed on the command line): refused where transformers / accelerate raise, with
// their reason quoted; else the ZeRO stage and offload they put in force, from the file they take
// them from.
TEST_F(DeepSpeedSourceCli, CombinationsFollowTransformersAndAccelerate) {
  const Json g = golden();
  ASSERT_EQ(g.at("transformers"), "4.57.1");
  ASSERT_EQ(g.at("accelerate"), "1.11.0");
  const std::string key_ref = "trainer.deepspeed (given on the command line)";
  int refused = 0, trainers = 0;
  for (const Json& c : g.at("combinations")) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    const fs::path dir = root_ / name;
    fs::create_directories(dir);
    for (const auto& [file, settings] : g.at("files").items())
      std::ofstream(dir / file) << settings.dump();
    std::string extra;
    const fs::path acc = dir / "accel.yaml";
    if (!c.at("accelerate").is_null()) {
      std::ofstream(acc) << c.at("accelerate").get<std::string>();
      extra += "--config_file " + acc.string();
    }
    const std::string kind =
        c.at("deepspeed").is_null() ? "" : c.at("deepspeed").get<std::string>();
    std::string source;  // the start-up line's "from …"
    if (kind == "base64") {
      extra += " '+trainer.deepspeed=\"" + c.at("deepspeed_value").get<std::string>() + "\"'";
      source = key_ref + ", base64-encoded JSON";
    } else if (!kind.empty()) {
      const fs::path ds = dir / c.at("deepspeed_value").get<std::string>();
      extra += " +trainer.deepspeed=" + ds.string();
      source = ds.string() + ", the file " + key_ref + " names";
    }
    const zt_test::RunResult r = train(name, extra);
    if (c.contains("error")) {
      ++refused;
      EXPECT_EQ(r.status, 1) << r.output;
      const std::string message = c.at("message");
      std::string reason = message.substr(0, message.find('\n'));
      if (reason.ends_with(':')) reason.pop_back();  // "… mismatch TrainingArguments values:"
      EXPECT_NE(r.output.find(reason), std::string::npos) << reason << "\n" << r.output;
      EXPECT_FALSE(fs::exists(root_ / "runs" / name));
      if (!reason.starts_with("When using `deepspeed_config_file`")) continue;
      EXPECT_NE(
          r.output.find("zerotune: error: " + (root_ / "sft.yaml").string() + ": " + key_ref +
                        " gives DeepSpeed settings, and the accelerate config " + acc.string() +
                        " (distributed_type DEEPSPEED) gives DeepSpeed "
                        "settings of its own"),
          std::string::npos)
          << r.output;
      // Each field accelerate launch passed on that accelerate refuses, with its line.
      std::istringstream fields(c.at("ACCELERATE_CONFIG_DS_FIELDS").get<std::string>());
      int named = 0;
      for (std::string f; std::getline(fields, f, ',');) {
        const std::string shown = f == "mixed_precision" ? f : "deepspeed_config." + f;
        const std::string item = "\n  - " + acc.string() + ":" +
                                 std::to_string(line_of(c.at("accelerate"), f)) + ": " + shown;
        const bool refused_field = reason.find("'" + f + "'") != std::string::npos;
        EXPECT_EQ(r.output.find(item) != std::string::npos, refused_field) << item << r.output;
        named += refused_field;
      }
      EXPECT_GE(named, 1);
      continue;
    }
    ASSERT_EQ(r.status, 0) << r.output;
    ASSERT_EQ(c.at("distributed_type"), "DEEPSPEED");
    const int stage = c.at("zero_stage");
    const bool offload = c.at("offload_optimizer_device") == "cpu";
    const std::string accelerate = c.at("accelerate").is_null() ? "" : c.at("accelerate");
    const std::string type = yaml_value("\n" + accelerate, "distributed_type");
    if (const std::string file = yaml_value("\n" + accelerate, "  deepspeed_config_file");
        kind.empty() && !file.empty())
      source = file + " (deepspeed_config.deepspeed_config_file of " + acc.string() + ")";
    else if (kind.empty() && accelerate.find("deepspeed_config:") != std::string::npos)
      source = acc.string() + "'s deepspeed_config";
    else if (kind.empty())
      source = acc.string() + " (distributed_type DEEPSPEED without deepspeed_config";
    if (!kind.empty()) {  // transformers takes trainer.deepspeed's JSON, whatever the accelerate
                          // config says (also a deepspeed_config_file that is missing or that
                          // zerotune would refuse: never opened); "auto" is accelerate's stage 2
      EXPECT_EQ(stage,
                kind == "auto"
                    ? 2
                    : g.at("trainer_deepspeed").at("zero_optimization").at("stage").get<int>());
      ++trainers;
    }
    const std::string line =
        "DeepSpeed settings in force: ZeRO stage " + std::to_string(stage) +
        (offload ? ", optimizer offload to the CPU" : ", no optimizer offload") + ", from " +
        source;
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
    EXPECT_NE(r.output.find(" thread(s) per rank, ZeRO stage " + std::to_string(stage) +
                            (offload ? " + optimizer offload\n" : "\n")),
              std::string::npos)
        << r.output;
    EXPECT_EQ(dtype(name), c.at("bf16_enabled") == true ? "bfloat16" : "float32");
    if (!kind.empty() && !type.empty() && type != "DEEPSPEED")
      EXPECT_NE(r.output.find("; DeepSpeed although the accelerate config " + acc.string() +
                              " has distributed_type"),
                std::string::npos)
          << r.output;
    EXPECT_EQ(r.output.find("fsdp_config is not used") != std::string::npos, type == "FSDP")
        << r.output;
  }
  EXPECT_EQ(refused, 6);
  EXPECT_EQ(trainers, 11);
}

// The accelerate config's deepspeed_config_file beside trainer.deepspeed through `zerotune launch`
// (ZT_ACCELERATE_CONFIG): trainer.deepspeed's settings are in force, and the line says the file
// is not used.
TEST_F(DeepSpeedSourceCli, TheAccelerateJsonIsNotUsedBesideTrainerDeepSpeed) {
  const fs::path dir = root_ / "launch";
  fs::create_directories(dir);
  std::ofstream(dir / "acc_ds.json") << R"({"zero_optimization": {"stage": 1}})";
  std::ofstream(dir / "ds.json") << R"({"zero_optimization": {"stage": 3}})";
  std::ofstream(dir / "accel.yaml") << "distributed_type: DEEPSPEED\nnum_processes: 1\n"
                                       "deepspeed_config:\n  deepspeed_config_file: acc_ds.json\n";
  const zt_test::RunResult r = zt_test::run(
      std::string(ZT_BINARY) + " launch --config_file " + (dir / "accel.yaml").string() +
      " train --config " + (root_ / "sft.yaml").string() +
      " exp_name=launch trainer.max_steps=1 trainer.eval_strategy=no +trainer.deepspeed=" +
      (dir / "ds.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("DeepSpeed settings in force: ZeRO stage 3, no optimizer offload, from " +
                          (dir / "ds.json").string() +
                          ", the file trainer.deepspeed (given on the command line) names; "
                          "acc_ds.json (deepspeed_config.deepspeed_config_file of " +
                          (dir / "accel.yaml").string() +
                          ") is not used: TrainingArguments builds the Accelerator's "
                          "DeepSpeedPlugin from trainer.deepspeed\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(" thread(s) per rank, ZeRO stage 3\n"), std::string::npos) << r.output;
}

// `zerotune launch` reads the accelerate config as its ranks do, after trainer.deepspeed: a
// deepspeed_config_file that trainer.deepspeed replaces is not opened (missing here; accelerate
// never reads it, golden accelerate_json_file_missing), and the warnings are printed once each —
// the accelerate config's by launch, trainer.deepspeed's JSON's and the sft.yaml's by rank 0.
TEST_F(DeepSpeedSourceCli, LaunchDoesNotOpenAJsonThatTrainerDeepSpeedReplaces) {
  const fs::path dir = root_ / "launch_missing";
  fs::create_directories(dir);
  std::ofstream(dir / "ds.json")
      << R"({"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}})";
  std::ofstream(dir / "accel.yaml")
      << "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n"
         "  deepspeed_config_file: missing.json\n  deepspeed_hostfile: hosts\n";
  const std::string launch = std::string(ZT_BINARY) + " launch --config_file " +
                             (dir / "accel.yaml").string() + " train --config " +
                             (root_ / "sft.yaml").string() + " trainer.eval_strategy=no ";
  zt_test::RunResult r = zt_test::run(launch +
                                      "exp_name=launch_missing trainer.max_steps=1 "
                                      "hydra.run.dir=. +trainer.deepspeed=" +
                                      (dir / "ds.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ZeRO stage 2, no optimizer offload, from " + (dir / "ds.json").string() +
                          ", the file trainer.deepspeed (given on the command line) names; "
                          "missing.json (deepspeed_config.deepspeed_config_file of " +
                          (dir / "accel.yaml").string() + ") is not used"),
            std::string::npos)
      << r.output;
  const auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = r.output.find(what); at != std::string::npos; at = r.output.find(what, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count("parameter offload (offload_param.device: cpu) is not supported"), 1u)
      << r.output;
  EXPECT_EQ(count("'deepspeed_config.deepspeed_hostfile: hosts' changes nothing"), 1u) << r.output;
  EXPECT_EQ(count("DeepSpeed settings in force"), 1u) << r.output;
  // The sft.yaml's own lines are rank 0's alone: launch reads it silently.
  EXPECT_EQ(count("override 'hydra.run.dir=.' configures Hydra itself"), 1u) << r.output;
  // Without trainer.deepspeed the file is the accelerate config's DeepSpeed JSON: launch refuses
  // it before any rank starts.
  r = zt_test::run(launch + "exp_name=launch_missing2 trainer.max_steps=1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("missing.json' cannot be read"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(root_ / "runs" / "launch_missing2"));
  // An sft.yaml that launch cannot read is the ranks' to report (once): not the JSON, which
  // trainer.deepspeed may replace.
  r = zt_test::run(launch + "exp_name=launch_missing3 trainer.max_stepz=1 +trainer.deepspeed=" +
                   (dir / "ds.json").string());
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_EQ(
      count("unknown config key 'trainer.max_stepz'") + count("key 'trainer.max_stepz' is not in "),
      1u)
      << r.output;
  EXPECT_EQ(r.output.find("cannot be read"), std::string::npos) << r.output;
  // An sft.yaml that only the ranks can resolve (LOCAL_WORLD_SIZE is set by launch for them):
  // rank 0 reports the accelerate config, once, and a mark inherited from the shell (not launch's,
  // not naming this file) silences nothing.
  r = zt_test::run("ZT_ACCELERATE_REPORTED=1 ZT_ACCELERATE_CONFIG=/nonexistent.yaml " + launch +
                   "exp_name=launch_missing4 trainer.max_steps=1 "
                   "'trainer.logging_steps=${oc.env:LOCAL_WORLD_SIZE}' +trainer.deepspeed=" +
                   (dir / "ds.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(count("'deepspeed_config.deepspeed_hostfile: hosts' changes nothing"), 1u) << r.output;
  EXPECT_EQ(count("DeepSpeed settings in force"), 1u) << r.output;
  EXPECT_EQ(r.output.find("nonexistent"), std::string::npos) << r.output;
}

// The start-up line states the ZeRO stage and offload the run acts on: compute.zero_stage and
// compute.offload_optimizer override the DeepSpeed JSON's, named with what they override.
TEST_F(DeepSpeedSourceCli, TheInForceLineNamesComputeOverrides) {
  const fs::path dir = root_ / "override";
  fs::create_directories(dir);
  std::ofstream(dir / "ds.json") << R"({"zero_optimization": {"stage": 2}})";
  const std::string ds = "+trainer.deepspeed=" + (dir / "ds.json").string();
  auto r = train("override", ds + " compute.zero_stage=3 compute.offload_optimizer=true");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("DeepSpeed settings in force: ZeRO stage 3 (compute.zero_stage (given on "
                          "the command line), over stage 2), optimizer offload to the CPU "
                          "(compute.offload_optimizer (given on the command line), over no "
                          "optimizer offload), the rest from " +
                          (dir / "ds.json").string() +
                          ", the file trainer.deepspeed (given on the command line) names\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(" thread(s) per rank, ZeRO stage 3 + optimizer offload\n"),
            std::string::npos)
      << r.output;
  // The same values as the JSON's: nothing overridden, the line as without them.
  r = train("override_same", ds + " compute.zero_stage=2 compute.offload_optimizer=false");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("DeepSpeed settings in force: ZeRO stage 2, no optimizer offload, from " +
                          (dir / "ds.json").string() + ", the file"),
            std::string::npos)
      << r.output;
}

// Beside trainer.deepspeed, the accelerate config's own DeepSpeed settings are listed in
// accelerate's order (its message's list), as the refusal of a deepspeed_config_file lists them.
TEST_F(DeepSpeedSourceCli, SettingsBesideTrainerDeepSpeedAreListedInAcceleratesOrder) {
  const fs::path dir = root_ / "order";
  fs::create_directories(dir);
  std::ofstream(dir / "ds.json") << R"({"zero_optimization": {"stage": 2}})";
  const fs::path acc = dir / "accel.yaml";
  std::ofstream(acc) << "distributed_type: DEEPSPEED\nmixed_precision: bf16\n"
                        "deepspeed_config:\n  zero_stage: 2\n  gradient_accumulation_steps: 4\n";
  const auto r = train("order", "--config_file " + acc.string() +
                                    " +trainer.deepspeed=" + (dir / "ds.json").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(":\n  - " + acc.string() +
                          ":5: deepspeed_config.gradient_accumulation_steps\n  - " + acc.string() +
                          ":4: deepspeed_config.zero_stage\n  - " + acc.string() +
                          ":2: mixed_precision\n"),
            std::string::npos)
      << r.output;
}

// trainer.deepspeed as a string that names no file: JSON (leading blanks: TrainingArguments left it
// a string, HfDeepSpeedConfig json.loads it) and base64-encoded JSON train with their stage; a
// string that is neither is refused naming the key and quoting transformers' ValueError.
TEST_F(DeepSpeedSourceCli, StringsAreReadAsHfDeepSpeedConfigReadsThem) {
  const std::string key_ref = "trainer.deepspeed (given on the command line)";
  // {"zero_optimization": {"stage": 3}}, URL-safe base64 (golden string of that name).
  auto r =
      train("b64", "'+trainer.deepspeed=\"eyJ6ZXJvX29wdGltaXphdGlvbiI6IHsic3RhZ2UiOiAzfX0=\"'");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("DeepSpeed settings in force: ZeRO stage 3, no optimizer offload, from " +
                          key_ref + ", base64-encoded JSON\n"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(dtype("b64"), "bfloat16");
  const fs::path yaml = root_ / "sft_ds_blank.yaml";
  std::ofstream(yaml) << zt_test::slurp(root_ / "sft.yaml")
                      << "  deepspeed: ' {\"zero_optimization\": {\"stage\": 1}}'\n";
  r = zt_test::run(std::string(ZT_BINARY) + " train --config " + yaml.string() +
                   " exp_name=blank trainer.max_steps=1 trainer.eval_strategy=no");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ZeRO stage 1, no optimizer offload, from trainer.deepspeed (" +
                          yaml.string() + ":36), a JSON string\n"),
            std::string::npos)
      << r.output;
  r = train("nofile", "+trainer.deepspeed=no_such_ds.json");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("zerotune: error: " + (root_ / "sft.yaml").string() + ": " + key_ref +
                          ": 'no_such_ds.json' is no existing file, no JSON and no base64-encoded "
                          "JSON; expected the path of a DeepSpeed JSON file, or the DeepSpeed "
                          "settings inline (a mapping, a JSON string, or base64-encoded JSON); "
                          "transformers' HfDeepSpeedConfig raises \"Expected a string path to an "
                          "existing deepspeed config, or a dictionary, or a base64 encoded string. "
                          "Received: no_such_ds.json\""),
            std::string::npos)
      << r.output;
  r = train("list", "'+trainer.deepspeed=\" [1, 2]\"'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(key_ref + ": ' [1, 2]' is JSON of the list [1,2], not a mapping of "
                                    "DeepSpeed settings (transformers fails on it: AttributeError: "
                                    "'list' object has no attribute 'get')"),
            std::string::npos)
      << r.output;
}

// DeepSpeed settings without zero_optimization from trainer.deepspeed: the message begins as its
// others do, "FILE:LINE: trainer.deepspeed", naming the JSON file where there is one.
TEST_F(DeepSpeedSourceCli, NoZeroOptimizationNamesFileLineThenKey) {
  const std::string head =
      "zerotune: error: " + (root_ / "sft.yaml").string() +
      ": trainer.deepspeed (given on the command line): the DeepSpeed settings";
  const std::string rest =
      " have no zero_optimization section, which accelerate's DeepSpeedPlugin requires";
  auto r = train("nozero_inline", "'+trainer.deepspeed={bf16: {enabled: true}}'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(head + rest), std::string::npos) << r.output;
  const fs::path ds = root_ / "nozero.json";
  std::ofstream(ds) << R"({"bf16": {"enabled": true}})";
  r = train("nozero_file", "+trainer.deepspeed=" + ds.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(head + " of " + ds.string() + rest), std::string::npos) << r.output;
}

// An error in settings given inline names the sft.yaml file:line of trainer.deepspeed and the
// DeepSpeed key path, not a line of a text the user never saw.
TEST_F(DeepSpeedSourceCli, InlineSettingsErrorsNameTheKeyAndThePath) {
  const fs::path yaml = root_ / "sft_ds_inline.yaml";
  std::ofstream(yaml) << zt_test::slurp(root_ / "sft.yaml")
                      << "  deepspeed:\n    zero_optimization:\n      stage: 1\n"
                         "      offload_optimizer: {device: nvme}\n";
  auto r = zt_test::run(std::string(ZT_BINARY) + " train --config " + yaml.string() +
                        " exp_name=inl trainer.max_steps=1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(
      r.output.find("zerotune: error: " + yaml.string() +
                    ":36: trainer.deepspeed: key 'zero_optimization.offload_optimizer.device' "
                    "has value 'nvme' (expected none, cpu or \"auto\" (zerotune does not "
                    "offload to nvme))\n"),
      std::string::npos)
      << r.output;
  r = train("inl2", "'+trainer.deepspeed={zero_optimization: {stage: 1, stag: 2}}'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("zerotune: error: " + (root_ / "sft.yaml").string() +
                          ": trainer.deepspeed (given on the command line): unknown key "
                          "'zero_optimization.stag': not a key of DeepSpeed's zero_optimization"),
            std::string::npos)
      << r.output;
  r = train("inl3", "'+trainer.deepspeed={zero_optimization: {stage: 1}, gradient_clipping: 0.5}'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("\n  - " + (root_ / "sft.yaml").string() +
                          ": trainer.deepspeed (given on the command line): gradient_clipping 0.5 "
                          "vs trainer.max_grad_norm 1\n"),
            std::string::npos)
      << r.output;
}

}  // namespace
