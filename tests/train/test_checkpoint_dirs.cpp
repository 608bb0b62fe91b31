// checkpoint-<step> directories: listing, latest, HF rotation (tests/data/train/rotate.json),
// atomic commit and the cleanup of what a crash leaves.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "core/file_util.h"
#include "core/zt_test_util.h"
#include "io/json.h"
#include "train/checkpoint_dirs.h"

namespace zt::train {
namespace {

namespace fs = std::filesystem;
using testing::list_dir;
using testing::TempDir;

void touch(const fs::path& p, const std::string& text = "x") {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST(CheckpointDirs, ParseNames) {
  EXPECT_EQ(checkpoint_name(500), "checkpoint-500");
  EXPECT_EQ(parse_checkpoint_name("checkpoint-500"), 500);
  EXPECT_EQ(parse_checkpoint_name("checkpoint-0"), 0);
  EXPECT_EQ(parse_checkpoint_name("checkpoint-5.tmp-99"), std::nullopt);
  EXPECT_EQ(parse_checkpoint_name("checkpoint-"), std::nullopt);
  EXPECT_EQ(parse_checkpoint_name("checkpoint--1"), std::nullopt);
  EXPECT_EQ(parse_checkpoint_name("checkpoint-x"), std::nullopt);
  EXPECT_EQ(parse_checkpoint_name("xcheckpoint-5"), std::nullopt);
}

TEST(CheckpointDirs, ListAndLatestIgnoreFilesAndStagingDirs) {
  TempDir d;
  for (const char* n : {"checkpoint-9", "checkpoint-100", "checkpoint-10", "checkpoint-7.tmp-1",
                        "checkpoint-x", "runs"})
    fs::create_directory(d / n);
  touch(d / "checkpoint-5000");  // a file, not a directory
  const auto all = list_checkpoints(d.path());
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].step, 9);
  EXPECT_EQ(all[1].step, 10);
  EXPECT_EQ(all[2].step, 100);
  EXPECT_EQ(all[2].path, d / "checkpoint-100");
  EXPECT_EQ(latest_checkpoint(d.path())->step, 100);
  EXPECT_EQ(latest_checkpoint_or_fail(d.path()).path, d / "checkpoint-100");
  EXPECT_TRUE(list_checkpoints(d / "missing").empty());
  EXPECT_EQ(latest_checkpoint(d / "runs"), std::nullopt);
  testing::expect_error([&] { latest_checkpoint_or_fail(d / "runs"); },
                        {"No valid checkpoint found in output directory", "runs"});
}

TEST(CheckpointDirs, RotationEqualsHf) {
  const Json g = Json::parse(read_file(std::string(ZT_TEST_DATA) + "/train/rotate.json"));
  ASSERT_EQ(g.size(), 10u);
  for (const Json& s : g) {
    TempDir d;
    for (const auto& e : s["entries"]) fs::create_directory(d / e.get<std::string>());
    SCOPED_TRACE(s.dump());
    const auto latest = latest_checkpoint(d.path());
    ASSERT_TRUE(latest.has_value());
    EXPECT_EQ(latest->path.filename().string(), s["latest"].get<std::string>());
    std::optional<fs::path> best;
    if (!s["best"].is_null()) best = d / s["best"].get<std::string>();
    const size_t before = list_dir(d.path()).size();
    const auto removed = rotate_checkpoints(d.path(), s["save_total_limit"].get<int64_t>(), best);
    EXPECT_EQ(list_dir(d.path()), s["remaining"].get<std::vector<std::string>>());
    EXPECT_EQ(removed.size(), before - list_dir(d.path()).size());
  }
}

TEST(CheckpointDirs, StagingCommitIsAtomicAndReplaces) {
  TempDir d;
  const fs::path out = d / "out";
  {
    CheckpointStaging st(out, 20, 777);
    EXPECT_EQ(st.path(), out / "checkpoint-20.tmp-777");
    EXPECT_EQ(staging_path(out, 20, 777), st.path());
    touch(st.path() / "model.safetensors", "weights-v1");
    touch(st.path() / "rank0" / "optimizer.bin", "opt");
    // Not visible as a checkpoint before the commit.
    EXPECT_TRUE(list_checkpoints(out).empty());
    EXPECT_EQ(st.commit(), out / "checkpoint-20");
    testing::expect_error([&] { st.commit(); }, {"checkpoint-20", "committed twice"});
  }
  EXPECT_EQ(list_dir(out), std::vector<std::string>{"checkpoint-20"});
  EXPECT_EQ(read_file(out / "checkpoint-20" / "rank0" / "optimizer.bin"), "opt");
  {
    CheckpointStaging st(out, 20, 778);
    touch(st.path() / "model.safetensors", "weights-v2");
    st.commit();
  }
  EXPECT_EQ(list_dir(out), std::vector<std::string>{"checkpoint-20"});
  EXPECT_EQ(read_file(out / "checkpoint-20" / "model.safetensors"), "weights-v2");
  EXPECT_FALSE(fs::exists(out / "checkpoint-20" / "rank0"));
  {
    CheckpointStaging st(out, 30);  // never committed: removed
    EXPECT_EQ(st.path(), out / fmt::format("checkpoint-30.tmp-{}", ::getpid()));
    touch(st.path() / "partial", "p");
  }
  EXPECT_EQ(list_dir(out), std::vector<std::string>{"checkpoint-20"});
}

TEST(CheckpointDirs, CleanStaleRemovesLeftoversOfDeadProcesses) {
  TempDir d;
  // A pid that cannot be running (above any pid_max).
  const int64_t dead = 99999999;
  const int64_t alive = ::getppid();  // the test runner's parent is running
  fs::create_directory(d / "checkpoint-10");
  touch(d / fmt::format("checkpoint-20.tmp-{}", dead) / "model.safetensors");
  touch(d / fmt::format("checkpoint-30.tmp-{}", alive) / "model.safetensors");
  // A replaced checkpoint-10 left aside after its successor was renamed in: deleted.
  touch(d / fmt::format("checkpoint-10.old-{}", dead) / "a");
  // checkpoint-40 moved aside, crash before the new one was renamed in: restored.
  touch(d / fmt::format("checkpoint-40.old-{}", dead) / "b", "kept");
  // A live process's aside (between its commit's renames; it may roll back to it): left alone.
  touch(d / fmt::format("checkpoint-60.old-{}", alive) / "d", "live");
  touch(d / "checkpoint-50.tmp-notapid" / "c");  // not ours: left alone
  const auto done = clean_stale_checkpoint_dirs(d.path());
  EXPECT_EQ(done.size(), 3u);
  EXPECT_EQ(list_dir(d.path()),
            (std::vector<std::string>{"checkpoint-10", "checkpoint-30.tmp-" + std::to_string(alive),
                                      "checkpoint-40", "checkpoint-50.tmp-notapid",
                                      "checkpoint-60.old-" + std::to_string(alive)}));
  EXPECT_EQ(read_file(d / ("checkpoint-60.old-" + std::to_string(alive)) / "d"), "live");
  EXPECT_EQ(read_file(d / "checkpoint-40" / "b"), "kept");
  EXPECT_EQ(latest_checkpoint(d.path())->step, 40);
}

// A kill -9 during a checkpoint's model export left, beside the checkpoint staging directory
// `checkpoint-<step>.tmp-<id>`, the export's own staging directory
// `checkpoint-<step>.tmp-<id>.tmp.<pid>.<16 hex>` (config.json and a model-sized
// model.safetensors.tmp.*), which no later run removed; its `.old.` twin (the empty staging
// directory moved aside by the export's commit) neither. Now both go with the rule of the staging
// directory itself: when process <pid> no longer runs (or is this one: at start-up nothing of this
// process is being written). Names that only look alike are left alone.
TEST(CheckpointDirs, CleanStaleRemovesTheStagingOfACheckpointsModelExport) {
  TempDir d;
  const int64_t dead = 99999999;
  const int64_t alive = ::getppid();
  const int64_t self = ::getpid();
  const std::string hex = ".c8fb3a8a29a28e58";
  const std::vector<std::string> removed = {
      fmt::format("checkpoint-1.tmp-{}", dead),
      fmt::format("checkpoint-1.tmp-{0}.old.{0}{1}", dead, hex),
      fmt::format("checkpoint-1.tmp-{0}.tmp.{0}{1}", dead, hex),
      fmt::format("checkpoint-2.tmp-{0}.tmp.{0}{1}", self, hex),  // its staging dir already gone
  };
  const std::vector<std::string> kept = {
      "checkpoint-1",
      fmt::format("checkpoint-3.tmp-{0}", alive),
      fmt::format("checkpoint-3.tmp-{0}.tmp.{0}{1}", alive, hex),  // a live process's export
      fmt::format("checkpoint-3.tmp-{0}.old.{0}{1}", alive, hex),
      fmt::format("checkpoint-4.tmp-{0}.tmp.{0}.c8fb3a8a29a28e5", dead),   // 15 hex digits
      fmt::format("checkpoint-4.tmp-{0}.tmp.{0}.c8fb3a8a29a28e5g", dead),  // not hex
      fmt::format("checkpoint-4.tmp-{0}.bak.{0}{1}", dead, hex),           // another kind
      fmt::format("checkpoint-4.tmp-x.tmp.{0}{1}", dead, hex),     // not a staging dir's name
      fmt::format("checkpoint-4.tmp-{0}.tmp.x{0}{1}", dead, hex),  // not a pid
      fmt::format("mine.tmp-{0}.tmp.{0}{1}", dead, hex),           // not a checkpoint's
  };
  for (const auto& n : removed) touch(d / n / "config.json");
  touch(d / removed[2] / fmt::format("model.safetensors.tmp.{}{}", dead, hex), "partial");
  for (const auto& n : kept) touch(d / n / "config.json");
  const auto done = clean_stale_checkpoint_dirs(d.path());
  std::vector<fs::path> want;
  for (const auto& n : removed) want.push_back(d / n);
  EXPECT_EQ(done, want);
  std::vector<std::string> left = kept;
  std::sort(left.begin(), left.end());
  EXPECT_EQ(list_dir(d.path()), left);
}

}  // namespace
}  // namespace zt::train
