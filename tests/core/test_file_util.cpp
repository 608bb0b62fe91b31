#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/zt_dead_pid.h"
#include "zt_test_util.h"

namespace {

using zt::testing::dead_pid;
using zt::testing::expect_error;
using zt::testing::list_dir;
using zt::testing::TempDir;
namespace fs = std::filesystem;

TEST(FileUtil, AtomicWriteReplacesWholeFile) {
  TempDir d;
  const auto p = d / "out.txt";
  zt::write_file_atomic(p, "first version");
  EXPECT_EQ(zt::read_file(p), "first version");
  zt::write_file_atomic(p, std::string("a\0b", 3));
  EXPECT_EQ(zt::read_file(p), std::string("a\0b", 3));
  zt::write_file_atomic(p, [](const zt::ByteSink& sink) {
    sink("abc", 3);
    sink("def", 3);
  });
  EXPECT_EQ(zt::read_file(p), "abcdef");
  EXPECT_EQ(list_dir(d.path()), std::vector<std::string>{"out.txt"});
}

TEST(FileUtil, FailedWriteKeepsOldFileAndLeavesNoTemp) {
  TempDir d;
  const auto p = d / "state.json";
  zt::write_file_atomic(p, "old");
  expect_error(
      [&] {
        zt::write_file_atomic(p, [](const zt::ByteSink& sink) {
          sink("partial", 7);
          zt::fail("writer gave up");
        });
      },
      {"writer gave up"});
  EXPECT_EQ(zt::read_file(p), "old");
  EXPECT_EQ(list_dir(d.path()), std::vector<std::string>{"state.json"});
  expect_error([&] { zt::write_file_atomic(d / "no/such/dir/x", "y"); },
               {"no/such/dir/x: cannot create temporary file"});
}

TEST(FileUtil, MapsFilesReadOnly) {
  TempDir d;
  zt::write_file_atomic(d / "m.bin", "0123456789");
  zt::MappedFile m(d / "m.bin");
  ASSERT_EQ(m.size(), 10u);
  EXPECT_EQ(static_cast<char>(m.data()[3]), '3');
  zt::MappedFile moved = std::move(m);
  EXPECT_EQ(moved.size(), 10u);
  EXPECT_EQ(m.data(), nullptr);  // NOLINT(bugprone-use-after-move)
  zt::write_file_atomic(d / "empty", "");
  zt::MappedFile e(d / "empty");
  EXPECT_EQ(e.size(), 0u);
  expect_error([&] { zt::MappedFile x(d / "missing.bin"); },
               {"missing.bin: cannot open: No such file or directory"});
  expect_error([&] { zt::MappedFile x(d.path()); }, {"not a regular file"});
  expect_error([&] { zt::read_file(d / "nope"); }, {"nope: cannot open"});
}

// read_file takes a regular file or a pipe; a device (/dev/zero, read forever before) or a
// directory is an error naming the path and what it is.
TEST(FileUtil, ReadFileTakesFilesAndPipesAndRefusesDevices) {
  TempDir d;
  zt::write_file_atomic(d / "a.yaml", "x: 1\n");
  EXPECT_EQ(zt::read_file(d / "a.yaml"), "x: 1\n");
  expect_error([] { zt::read_file("/dev/zero"); },
               {"/dev/zero: not a regular file (a device); expected a file"});
  expect_error([&] { zt::read_file(d.path()); }, {": not a regular file (a directory)"});
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "y: 2\n", 5), 5);
  ::close(fds[1]);
  EXPECT_EQ(zt::read_file("/dev/fd/" + std::to_string(fds[0])), "y: 2\n");
  ::close(fds[0]);
}

TEST(FileUtil, StagingDirAppearsCompleteOrNotAtAll) {
  TempDir d;
  const auto out = d / "model";
  {
    zt::StagingDir s(out);
    zt::write_file_atomic(s.path() / "a.txt", "A");
    EXPECT_FALSE(std::filesystem::exists(out));
    // destroyed without commit: nothing left behind
  }
  EXPECT_TRUE(list_dir(d.path()).empty());
  {
    zt::StagingDir s(out);
    zt::write_file_atomic(s.path() / "a.txt", "A1");
    s.commit();
  }
  EXPECT_EQ(zt::read_file(out / "a.txt"), "A1");
  {
    zt::StagingDir s(out);
    zt::write_file_atomic(s.path() / "b.txt", "B");
    expect_error([&] { s.commit(false); }, {"model: already exists"});
  }
  EXPECT_EQ(list_dir(out), std::vector<std::string>{"a.txt"});
  {
    zt::StagingDir s(out);
    zt::write_file_atomic(s.path() / "b.txt", "B");
    s.commit(true);  // replaces the old directory entirely
  }
  EXPECT_EQ(list_dir(out), std::vector<std::string>{"b.txt"});
  EXPECT_EQ(list_dir(d.path()), std::vector<std::string>{"model"});
}

// What a StagingDir left when its process was killed: removed when that process is gone, kept while
// it runs (a concurrent export), and nothing of another name, kind or pattern is touched.
TEST(FileUtil, StaleStagingDirsOfGoneProcessesAreRemovedAndNothingElse) {
  TempDir d;
  const std::string hex = ".0123456789abcdef";
  const int64_t gone = dead_pid();
  ASSERT_FALSE(zt::process_running(gone));
  EXPECT_TRUE(zt::process_running(::getppid()));
  const std::string stale = "model.tmp." + std::to_string(gone) + hex;
  const std::string aside = "model.old." + std::to_string(gone) + ".00000000000000aa";
  const std::vector<std::string> kept_dirs = {
      "model",                                                    // the output itself
      "model.tmp." + std::to_string(::getppid()) + hex,           // a live process's
      "model.old." + std::to_string(::getppid()) + hex,           // a live process's
      "model.tmp." + std::to_string(::getpid()) + hex,            // this process's
      "model.tmp." + std::to_string(gone) + ".0123456789abcdeg",  // not hex
      "model.tmp." + std::to_string(gone) + ".0123",              // not 16 digits
      "model.tmp.x" + std::to_string(gone) + hex,                 // not a pid
      "model.bak." + std::to_string(gone) + hex,                  // not ours
      "other.tmp." + std::to_string(gone) + hex,                  // another output's
  };
  for (const auto& n : kept_dirs) fs::create_directories(d / n / "sub");
  for (const auto& n : {stale, aside}) {
    fs::create_directories(d / n / "sub");
    zt::write_file_atomic(d / n / "sub" / "model.safetensors", n);
  }
  const std::string file = "model.tmp." + std::to_string(gone) + ".fedcba9876543210";
  zt::write_file_atomic(d / file, "a file");
  const std::vector<zt::StaleStaging> done = zt::clean_stale_staging_dirs(d / "model");
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].path, d / aside);  // `model` exists: the moved-aside copy goes
  EXPECT_FALSE(done[0].restored);
  EXPECT_EQ(done[1].path, d / stale);
  EXPECT_FALSE(done[1].restored);
  std::vector<std::string> want = kept_dirs;
  want.push_back(file);
  std::sort(want.begin(), want.end());
  EXPECT_EQ(list_dir(d.path()), want);
  EXPECT_TRUE(zt::clean_stale_staging_dirs(d / "model/").empty());  // a trailing slash
  EXPECT_TRUE(zt::clean_stale_staging_dirs(d / "nowhere" / "model").empty());
}

// What write_file_atomic left when its process was killed before the rename
// ("<name>.tmp.<pid>.<16 hex>"): removed when that process is gone, kept while it runs, and no
// other name (nor a directory or symlink of that name) is touched.
TEST(FileUtil, StaleAtomicWriteTempFilesOfGoneProcessesAreRemovedAndNothingElse) {
  TempDir d;
  const std::string hex = ".0123456789abcdef";
  const std::string gone = std::to_string(dead_pid());
  const std::string live = std::to_string(::getppid());
  const std::vector<std::string> stale = {"args.yaml.tmp." + gone + hex,
                                          "metrics.jsonl.tmp." + gone + ".fedcba9876543210",
                                          ".x.tmp." + gone + hex};
  const std::vector<std::string> kept = {
      "args.yaml",
      "args.yaml.tmp." + live + hex,                        // a live process's
      "args.yaml.tmp." + std::to_string(::getpid()) + hex,  // this process's
      "args.yaml.tmp." + gone + ".0123456789abcdeF",        // not lowercase hex
      "args.yaml.tmp." + gone + ".0123456789abcde",         // 15 digits
      "args.yaml.tmp." + gone + "x" + hex,                  // not a pid
      "args.yaml.old." + gone + hex,                        // not a temp file's kind
      ".tmp." + gone + hex,                                 // no name before it
      "notes.tmp." + gone,                                  // no random part
      "notes.txt"};
  for (const auto& n : stale) zt::write_file_atomic(d / n, n);
  for (const auto& n : kept) zt::write_file_atomic(d / n, n);
  const std::string dir = "model.tmp." + gone + hex;  // a StagingDir's: not a file
  fs::create_directories(d / dir);
  const std::string link = "link.tmp." + gone + hex;
  fs::create_symlink(d / "notes.txt", d / link);
  EXPECT_EQ(zt::atomic_write_temp_pid("args.yaml.tmp." + gone + hex), std::stoll(gone));
  EXPECT_EQ(zt::atomic_write_temp_pid("args.yaml.tmp." + gone + ".0123"), std::nullopt);
  // No pid of this host (pid_t is 32-bit): not read as one, so nothing is judged by it.
  EXPECT_EQ(zt::atomic_write_temp_pid("args.yaml.tmp.2147483647" + hex), 2147483647);
  EXPECT_EQ(zt::atomic_write_temp_pid("args.yaml.tmp.2147483648" + hex), std::nullopt);

  const std::vector<fs::path> removed =
      zt::clean_stale_temp_files(d.path(), zt::atomic_write_temp_pid);
  std::vector<fs::path> want;
  for (const auto& n : stale) want.push_back(d / n);
  std::sort(want.begin(), want.end());
  EXPECT_EQ(removed, want);
  std::vector<std::string> left = kept;
  left.push_back(dir);
  left.push_back(link);
  std::sort(left.begin(), left.end());
  EXPECT_EQ(list_dir(d.path()), left);
  EXPECT_TRUE(zt::clean_stale_temp_files(d.path(), zt::atomic_write_temp_pid).empty());
  EXPECT_TRUE(zt::clean_stale_temp_files(d / "nowhere", zt::atomic_write_temp_pid).empty());
}

// A commit killed between its two renames: the previous directory waits under ".old." and `final`
// is missing. It is renamed back (not deleted with the never-committed staging directory).
TEST(FileUtil, PreviousDirectoryMovedAsideByAKilledCommitIsRestored) {
  TempDir d;
  const std::string gone = std::to_string(dead_pid());
  const fs::path aside = d / ("model.old." + gone + ".00000000000000aa");
  const fs::path staged = d / ("model.tmp." + gone + ".00000000000000bb");
  fs::create_directories(aside);
  zt::write_file_atomic(aside / "a.txt", "previous");
  fs::create_directories(staged);
  zt::write_file_atomic(staged / "a.txt", "new");
  const std::vector<zt::StaleStaging> done = zt::clean_stale_staging_dirs(d / "model");
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].path, aside);
  EXPECT_TRUE(done[0].restored);
  EXPECT_EQ(done[1].path, staged);
  EXPECT_FALSE(done[1].restored);
  EXPECT_EQ(list_dir(d.path()), std::vector<std::string>{"model"});
  EXPECT_EQ(zt::read_file(d / "model" / "a.txt"), "previous");
  // StagingDir's commit moves the replaced directory aside under that name.
  {
    zt::StagingDir s(d / "model");
    zt::write_file_atomic(s.path() / "b.txt", "B");
    s.commit(true);
  }
  EXPECT_EQ(list_dir(d / "model"), std::vector<std::string>{"b.txt"});
  EXPECT_EQ(zt::temp_sibling(d / "model", "old").filename().string().rfind("model.old.", 0), 0u);
}

}  // namespace
