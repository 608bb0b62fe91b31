// A key given twice in any YAML or JSON file zerotune reads is an error naming file, line and key
// (yaml-cpp keeps both entries, nlohmann the last: without the check one of them wins silently).
#include <gtest/gtest.h>

#include <fstream>

#include "core/zt_test_util.h"
#include "io/hydra_yaml.h"
#include "io/model_config.h"
#include "io/unique_keys.h"

namespace {

using zt::Json;
using zt::testing::error_of;
using zt::testing::expect_error;
using zt::testing::TempDir;


TEST(UniqueKeys, YamlNestedAndInSequences) {
  EXPECT_EQ(error_of([] { zt::check_unique_yaml_keys(YAML::Load("a: 1\nb:\n  c: 2\n  d: 3\n  c: 4\n"), "f.yaml"); }),
            "f.yaml:5: duplicate key 'b.c' (first given at line 3)");
  EXPECT_EQ(error_of([] { zt::check_unique_yaml_keys(YAML::Load("l:\n  - x: 1\n  - x: 1\n    x: 2\n"), "f.yaml"); }),
            "f.yaml:4: duplicate key 'l[1].x' (first given at line 3)");
  EXPECT_EQ(error_of([] { zt::check_unique_yaml_keys(YAML::Load("{a: 1, b: {a: 2}}"), "f.yaml"); }), "<no error>");
}

TEST(UniqueKeys, HydraYamlFileAndOverrideValue) {
  TempDir d;
  std::ofstream(d / "sft.yaml") << "exp_dir: x\ntrainer:\n  learning_rate: 1.0e-3\n  seed: 1\n"
                                   "  learning_rate: 0.5\n";
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(d / "sft.yaml", {}); }),
            (d / "sft.yaml").string() + ":5: duplicate key 'trainer.learning_rate' (first given at line 3)");
  std::ofstream(d / "ok.yaml") << "trainer:\n  x: 1\n";
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(d / "ok.yaml", {"trainer.x={a: 1, a: 2}"}); }),
            "override 'trainer.x={a: 1, a: 2}': duplicate key 'a' at character 18 (first given "
            "at character 12)");
}

TEST(UniqueKeys, JsonNamesLineAndPath) {
  const std::string text = "{\n  \"model\": {\n    \"vocab\": {\"a\": 0,\n              \"b\": 1,\n"
                           "              \"a\": 2}\n  },\n  \"list\": [{\"x\": 1}, {\"x\": 1, \"y\": 2}]\n}\n";
  EXPECT_EQ(error_of([&] { zt::parse_json_unique_keys(text, "t.json"); }),
            "t.json:5: duplicate key 'model.vocab.a' (first given at line 3)");
  const Json ok = zt::parse_json_unique_keys(R"({"list": [{"x": 1}, {"x": 1, "y": [1, {"x": 3}]}], "x": 0})", "o.json");
  EXPECT_EQ(ok["list"][1]["y"][1]["x"], 3);
  EXPECT_EQ(error_of([] { zt::parse_json_unique_keys(R"({"l": [1, {"k": 1}, {"k": 2, "k": 3}]})", "a.json"); }),
            "a.json:1: duplicate key 'l[2].k' (first given at line 1)");
  EXPECT_EQ(error_of([] { zt::parse_json_unique_keys("{\"a\": 1,}", "b.json"); }).rfind("b.json: invalid JSON: ", 0),
            0u);
}

// tokenizer_config.json, config.json …: a number beyond a double was an internal error (exit 70,
// nlohmann's out_of_range escaping); now the file and line.
TEST(UniqueKeys, JsonNumberBeyondADoubleNamesLine) {
  EXPECT_EQ(error_of([] {
              zt::parse_json_unique_keys("{\n  \"model_max_length\": 1e999\n}\n", "c.json");
            }),
            "c.json:2: invalid JSON: number overflow parsing '1e999' (beyond the range of a 64-bit "
            "float)");
}

TEST(UniqueKeys, ModelConfigJson) {
  TempDir d;
  std::ofstream(d / "config.json") << "{\"model_type\": \"qwen2\",\n \"hidden_size\": 16,\n \"hidden_size\": 32}";
  expect_error([&] { zt::load_model_config(d.path()); },
               {(d / "config.json").string() + ":3: duplicate key 'hidden_size' (first given at line 2)"});
}

}  // namespace
