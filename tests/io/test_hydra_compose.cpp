// Hydra's config-group composition against Hydra 1.3.2 itself: each case directory under
// tests/data/io/hydra_compose holds a primary config, its config groups, overrides.json (the
// runs) and golden.json (what Hydra's compose API made of each run; tools/make_hydra_goldens.py).
// A run Hydra composes must compose to the same config, key order included; a run Hydra refuses
// must be refused with zerotune's message (overrides.json "error"); a run marked "refused" is a
// form zerotune refuses although Hydra composes it, with that message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"
#include "core/file_util.h"
#include "core/zt_test_util.h"
#include "io/hydra_compose.h"
#include "io/hydra_yaml.h"

namespace {

namespace fs = std::filesystem;

const fs::path kCases = fs::path(ZT_TEST_DATA) / "io" / "hydra_compose";

zt::Json read_json(const fs::path& p) {
  std::ifstream in(p);
  return zt::Json::parse(in);
}

std::string with_dir(std::string s, const fs::path& dir) {
  for (size_t at; (at = s.find("{dir}")) != std::string::npos;) s.replace(at, 5, dir.string());
  return s;
}

std::vector<fs::path> case_dirs() {
  std::vector<fs::path> out;
  for (const auto& d : fs::directory_iterator(kCases))
    if (fs::exists(d.path() / "overrides.json")) out.push_back(d.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST(HydraCompose, MatchesHydraGoldens) {
  const auto dirs = case_dirs();
  ASSERT_GE(dirs.size(), 12u);
  size_t composed = 0, refused = 0;
  for (const auto& dir : dirs) {
    const zt::Json spec = read_json(dir / "overrides.json");
    const zt::Json golden = read_json(dir / "golden.json");
    ASSERT_EQ(spec["runs"].size(), golden.size()) << dir << ": golden.json is stale";
    for (const auto& run : spec["runs"]) {
      const std::string name = run["name"].get<std::string>();
      const std::string where = dir.filename().string() + "/" + name;
      ASSERT_TRUE(golden.contains(name)) << where << ": not in golden.json";
      const zt::Json& want = golden[name];
      const fs::path config = dir / (run.value("config", std::string("config")) + ".yaml");
      std::vector<std::string> overrides;
      for (const auto& o : run["overrides"]) overrides.push_back(o.get<std::string>());
      zt::Json got;
      std::string error = "<no error>";
      try {
        got = zt::load_hydra_yaml(config, overrides);
      } catch (const zt::Error& e) {
        error = e.what();
      }
      if (run.contains("refused")) {
        EXPECT_TRUE(want.contains("config")) << where << ": Hydra refuses this run too";
        EXPECT_EQ(error, with_dir(run["refused"].get<std::string>(), dir)) << where;
        ++refused;
      } else if (want.contains("error")) {
        ASSERT_TRUE(run.contains("error")) << where << ": Hydra says " << want["error"];
        EXPECT_EQ(error, with_dir(run["error"].get<std::string>(), dir))
            << where << " (Hydra: " << want["error"].get<std::string>() << ")";
        ++refused;
      } else {
        EXPECT_EQ(error, "<no error>") << where;
        EXPECT_EQ(got, want["config"])
            << where << "\n got: " << got.dump() << "\nwant: " << want["config"].dump();
        ++composed;
      }
    }
  }
  EXPECT_GE(composed, 50u);
  EXPECT_GE(refused, 20u);
}

// The golden cases cover each form the brief names; this keeps them from being dropped.
TEST(HydraCompose, GoldenCasesCoverEachForm) {
  std::set<std::string> names;
  for (const auto& d : case_dirs()) names.insert(d.filename().string());
  for (const char* c :
       {"group_default", "self_first", "self_last", "self_absent", "nested_group",
        "package_override", "optional_null", "cli_add_remove", "recursive", "interpolation",
        "defaults_interpolation", "config_entries", "hydra_entries", "merge_rules", "errors"})
    EXPECT_TRUE(names.count(c)) << c;
}

TEST(HydraCompose, ConfigGroupIsADirectoryBesideThePrimary) {
  const fs::path d = kCases / "group_default";
  EXPECT_TRUE(zt::is_config_group(d, "db"));
  EXPECT_FALSE(zt::is_config_group(d, "db.port"));
  EXPECT_FALSE(zt::is_config_group(d, "name"));
  EXPECT_FALSE(zt::is_config_group(d, ""));
  EXPECT_EQ(zt::config_groups_in(kCases / "nested_group"), std::vector<std::string>{"server"});
  EXPECT_EQ(zt::config_groups_in(kCases / "nested_group" / "server"),
            (std::vector<std::string>{"cache", "db"}));
}

// A symlink loop in a group directory (the reviewer's `ln -s loopdir opt/loopdir`): the missing
// option's error lists the real options, where listing them threw std::filesystem's "Too many
// levels of symbolic links" as an internal error.
TEST(HydraCompose, SymlinkLoopInAGroupDirectoryIsNoInternalError) {
  zt::testing::TempDir d;
  zt::write_file_atomic(d / "config.yaml", "defaults:\n  - opt: a\n  - _self_\nx: 0\n");
  fs::create_directories(d / "opt");
  zt::write_file_atomic(d / "opt" / "a.yaml", "lr: 1\n");
  fs::create_directory_symlink("loop", d / "opt" / "loop");
  fs::create_directory_symlink("loop2", d / "loop2");
  EXPECT_EQ(zt::load_hydra_yaml(d / "config.yaml", {})["opt"]["lr"], 1);
  std::string error = "<no error>";
  try {
    zt::load_hydra_yaml(d / "config.yaml", {"opt=nope"});
  } catch (const zt::Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("'nope'"), std::string::npos) << error;
  EXPECT_NE(error.find("a"), std::string::npos) << error;
  EXPECT_EQ(error.find("symbolic links"), std::string::npos) << error;
  EXPECT_EQ(zt::config_groups_in(d.path()), std::vector<std::string>{"opt"});
}

namespace {

// A primary config.yaml whose defaults list names g0/a.yaml, whose list names g1/a.yaml, …, down
// to g<groups-1>/a.yaml (plain writes: a file system sync each would take seconds): a chain of
// groups + 1 configs, each adding its own key at the top.
fs::path write_defaults_chain(const fs::path& d, int groups) {
  std::ofstream(d / "config.yaml") << "defaults:\n  - g0@_global_: a\n  - _self_\nx: 1\n";
  for (int i = 0; i < groups; ++i) {
    const std::string next =
        i + 1 < groups ? fmt::format("defaults:\n  - /g{}@_global_: a\n  - _self_\n", i + 1) : "";
    fs::create_directories(d / fmt::format("g{}", i));
    std::ofstream(d / fmt::format("g{}", i) / "a.yaml") << next << fmt::format("v{}: {}\n", i, i);
  }
  return d / "config.yaml";
}

}  // namespace

// A chain of defaults lists nesting kMaxDefaultsDepth configs composes; one more is an error naming
// the entry, the file and its depth (a chain of 20,000 overflowed the stack: a crash, no message).
TEST(HydraCompose, DefaultsChainDeeperThanTheLimitIsAnError) {
  ASSERT_EQ(zt::kMaxDefaultsDepth, 1000);
  zt::testing::TempDir ok;
  const zt::Json j = zt::compose_hydra_config(write_defaults_chain(ok.path(), 999), {});
  EXPECT_EQ(j.size(), 1000u);  // x and v0 … v998
  EXPECT_EQ(j["v998"], 998);
  zt::testing::TempDir deep;
  const fs::path primary = write_defaults_chain(deep.path(), 1000);
  const std::string d = deep.path().string();
  EXPECT_EQ(zt::testing::error_of([&] { zt::compose_hydra_config(primary, {}); }),
            d + "/g998/a.yaml: defaults: entry {\"/g999@_global_\":\"a\"}: " + d +
                "/g999/a.yaml is config 1001 of one chain of defaults lists (" + d +
                "/config.yaml -> … -> " + d +
                "/g998/a.yaml); zerotune composes at most 1000 nested configs (Hydra 1.3 stops "
                "with a RecursionError near 470)");
}

// A primary config that is a pipe (`--config <(cat sft.yaml)`) or a device is named as such; it was
// "there is no config /dev/fd/63" for the pipe, and /dev/zero was read without end.
TEST(HydraCompose, APrimaryThatIsNoFileIsNamedAsSuch) {
  EXPECT_EQ(zt::testing::error_of([] { zt::compose_hydra_config("/dev/zero", {}); }),
            "/dev/zero: is a device, not a file; expected a YAML file (its directory holds the "
            "config groups)");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string fifo = "/dev/fd/" + std::to_string(fds[0]);
  EXPECT_EQ(zt::testing::error_of([&] { zt::compose_hydra_config(fifo, {}); }),
            fifo +
                ": is a pipe, not a file; expected a YAML file (its directory holds the config "
                "groups)");
  ::close(fds[0]);
  ::close(fds[1]);
}
