#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/hydra_yaml.h"

namespace {

std::filesystem::path write_tmp(const std::string& name, const std::string& text) {
  auto dir = std::filesystem::temp_directory_path() / "zt_test_hydra";
  std::filesystem::create_directories(dir);
  auto p = dir / name;
  std::ofstream(p) << text;
  return p;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const zt::Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST(YamlScalar, OmegaConfTyping) {
  EXPECT_EQ(zt::yaml_scalar_to_json("1e-5", false).get<double>(), 1e-5);
  EXPECT_TRUE(zt::yaml_scalar_to_json("1e-5", false).is_number_float());
  EXPECT_EQ(zt::yaml_scalar_to_json("2_000", false).get<int64_t>(), 2000);
  EXPECT_EQ(zt::yaml_scalar_to_json("True", false).get<bool>(), true);
  EXPECT_TRUE(zt::yaml_scalar_to_json("null", false).is_null());
  EXPECT_TRUE(zt::yaml_scalar_to_json("~", false).is_null());
  EXPECT_EQ(zt::yaml_scalar_to_json("42", true).get<std::string>(), "42");
  EXPECT_EQ(zt::yaml_scalar_to_json("Qwen/Qwen2.5-1.5B", false).get<std::string>(),
            "Qwen/Qwen2.5-1.5B");
  EXPECT_EQ(zt::yaml_scalar_to_json("1.5.2", false).get<std::string>(), "1.5.2");
}

TEST(HydraYaml, InterpolationOverridesAndDroppedSections) {
  setenv("ZT_TEST_HYDRA_ENV", "from-env", 1);
  auto p = write_tmp("a.yaml", R"(defaults:
  - _self_
hydra:
  run: {dir: x}
exp_name: demo
exp_dir: runs/${exp_name}
n: 4
copy: ${n}
env: ${oc.env:ZT_TEST_HYDRA_ENV}
env_default: ${oc.env:ZT_TEST_HYDRA_UNSET,fallback}
trainer:
  lr: 1e-5
  steps: ???
  out: ${exp_dir}/final
)");
  zt::Json j = zt::load_hydra_yaml(p, {"n=8", "+trainer.extra=true"});
  EXPECT_FALSE(j.contains("defaults"));
  EXPECT_FALSE(j.contains("hydra"));
  EXPECT_EQ(j["exp_dir"], "runs/demo");
  EXPECT_EQ(j["copy"].get<int64_t>(), 8);  // typed whole-value interpolation sees the override
  EXPECT_EQ(j["env"], "from-env");
  EXPECT_EQ(j["env_default"], "fallback");
  EXPECT_EQ(j["trainer"]["lr"].get<double>(), 1e-5);
  EXPECT_EQ(j["trainer"]["steps"], "???");
  EXPECT_EQ(j["trainer"]["out"], "runs/demo/final");
  EXPECT_EQ(j["trainer"]["extra"], true);
}

TEST(HydraYaml, Errors) {
  auto p = write_tmp("b.yaml", "a: 1\nb: ${nope.x}\n");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(p, {}); }),
            p.string() + ": 'b' interpolates '${nope.x}', but no key 'nope.x' exists");
  auto q = write_tmp("c.yaml", "a: 1\n");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(q, {"zz=3"}); }),
            "override 'zz=3': key 'zz' is not in " + q.string() + " (use +zz to add a new key)");
  auto r = write_tmp("d.yaml", "a: [1, 2\n");
  EXPECT_NE(error_of([&] { zt::load_hydra_yaml(r, {}); }).find(r.string() + ":"),
            std::string::npos);
  auto s = write_tmp("e.yaml", "a: ${b}\nb: ${a}\n");
  EXPECT_NE(error_of([&] { zt::load_hydra_yaml(s, {}); }).find("interpolation loop"),
            std::string::npos);
  auto t = write_tmp("f.yaml", "a: ???\nb: ${a}\n");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(t, {}); }),
            t.string() + ": 'b' interpolates 'a', which is ??? (mandatory, not set)");
}

TEST(HydraYaml, YamlRoundTrip) {
  zt::Json j = {{"a", 1}, {"b", "true"}, {"c", {{"d", 1.5}, {"e", nullptr}}}, {"f", {1, 2}}};
  auto p = write_tmp("g.yaml", zt::json_to_yaml(j));
  EXPECT_EQ(zt::load_yaml_file(p), j);
}
