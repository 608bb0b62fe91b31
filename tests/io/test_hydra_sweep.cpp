// Hydra's sweep overrides are refused with one message naming the override (io/hydra_sweep.h);
// they gave generic errors ("unknown key", a type error on the string "1e-5,2e-5"), or, for
// hydra/sweeper=…, a note that the override was ignored. Which inputs are sweeps is what Hydra
// 1.3.2 says without --multirun ("Ambiguous value for argument" / "Sweep parameters … requires
// --multirun"), each form run through it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/zt_test_util.h"
#include "io/hydra_sweep.h"
#include "io/hydra_yaml.h"

namespace {

TEST(HydraSweep, SweepsAreWhatHydraCallsSweeps) {
  for (const char* v : {"1e-5,2e-5",
                        "a, b",
                        "mysql,postgres",
                        "[a],[b]",
                        "range(1,3),4",
                        "'a',b",
                        "choice(a,b)",
                        "choice(a)",
                        "choice (a,b)",
                        "range(1,3)",
                        "range(3)",
                        "range(start=1,stop=3)",
                        "interval(0,1)",
                        "glob(*)",
                        "glob(a*,exclude=b)",
                        "tag(x,choice(a,b))",
                        "sort(a,b)",
                        "sort(a,b,reverse=true)",
                        "shuffle(a,b)",
                        "str(a,b)",
                        "int(1,2)",
                        "sort(choice(a,b))",
                        "shuffle(range(1,3))",
                        "float(choice(1,2))"})
    EXPECT_TRUE(zt::is_sweep_value(v)) << v;
}

TEST(HydraSweep, CommasInQuotesBracketsAndCallsAreValues) {
  for (const char* v : {"1e-5",
                        "'a,b'",
                        "\"a,b\"",
                        "a\\,b",
                        "[1,2]",
                        "{a: 1, b: 2}",
                        "{a:1,b:2}",
                        "${oc.env:HOME,x}",
                        "sort([a,b])",
                        "sort([b,a],reverse=true)",
                        "sort(a,reverse=true)",
                        "shuffle([a,b])",
                        "str(1)",
                        "sort(a)",
                        "\"choice(a,b)\"",
                        "choice",
                        "range",
                        "",
                        "a b",
                        "[choice(a,b)]",
                        "f(a,b)",
                        "choice(a,b)x",
                        "'x\\',y'"})
    EXPECT_FALSE(zt::is_sweep_value(v)) << v;
}

TEST(HydraSweep, TheOverrideIsNamedInTheError) {
  EXPECT_EQ(
      zt::testing::error_of([] { zt::refuse_sweep_override("trainer.learning_rate=1e-5,2e-5"); }),
      "override 'trainer.learning_rate=1e-5,2e-5': sweeps (Hydra --multirun) are not "
      "supported: launch one run per value (a list is key=[a,b]; a string holding a comma "
      "is quoted: key='a,b')");
  EXPECT_EQ(zt::testing::error_of([] { zt::refuse_sweep_override("+trainer.seed=range(1,3)"); }),
            "override '+trainer.seed=range(1,3)': sweeps (Hydra --multirun) are not supported: "
            "launch one run per value");
  for (const char* ov : {"hydra/sweeper=optuna", "hydra/sweeper=basic", "hydra.sweeper.params.x=1",
                         "hydra.mode=MULTIRUN"})
    EXPECT_EQ(zt::testing::error_of([&] { zt::refuse_sweep_override(ov); }),
              std::string("override '") + ov +
                  "': sweeps (Hydra --multirun) are not supported: launch one run per value")
        << ov;
  for (const char* ov : {"trainer.learning_rate=1e-5", "~hydra/sweeper", "hydra.mode=RUN",
                         "dataset.train.path='a,b.parquet'", "~trainer.report_to", "x=[1,2]"})
    EXPECT_EQ(zt::testing::error_of([&] { zt::refuse_sweep_override(ov); }), "<no error>") << ov;
}

// Through load_hydra_yaml, before the key or the config group is looked at: a sweep of a config
// group (`db=mysql,postgres`) is refused the same way, not as "no option 'mysql,postgres'".
TEST(HydraSweep, LoadHydraYamlRefusesSweeps) {
  zt::testing::TempDir tmp;
  std::filesystem::create_directories(tmp / "db");
  std::ofstream(tmp / "db" / "mysql.yaml") << "port: 1\n";
  std::ofstream(tmp / "sft.yaml") << "defaults:\n  - db: mysql\n  - _self_\nlr: 1.0e-5\n";
  for (const char* ov : {"db=mysql,postgres", "lr=1e-5,2e-5", "lr=choice(1e-5,2e-5)"})
    EXPECT_EQ(zt::testing::error_of([&] { zt::load_hydra_yaml(tmp / "sft.yaml", {ov}); }),
              std::string("override '") + ov + "': " + std::string(zt::kSweepRefused) +
                  (std::string(ov).find("choice") == std::string::npos
                       ? " (a list is key=[a,b]; a string holding a comma is quoted: key='a,b')"
                       : ""))
        << ov;
  EXPECT_EQ(zt::load_hydra_yaml(tmp / "sft.yaml", {"lr='1e-5,2e-5'"})["lr"], "1e-5,2e-5");
}

}  // namespace
