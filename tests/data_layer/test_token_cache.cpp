// Token cache file: round trip through mmap, rejection of corrupt/truncated/stale files, rebuild
// on a key change, and several processes building at once (fork) ending with one valid file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "core/error.h"
#include "core/zt_dead_pid.h"
#include "data/rows.h"
#include "data/token_cache.h"
#include "test_util.h"

namespace zt::data {
namespace {

using zt::testing::dead_pid;
using zt::testing::error_of;
using zt::testing::TempDir;
using zt::testing::write_file;

// Two samples: a packed bin of examples 0 and 1, and example 2 alone.
TokenData sample_data() {
  TokenData d;
  d.ids = {151644, 8948, 198, 10, 11, 12, 13, 7, 8};
  d.targets = {0, 0, 0, 1, 1, 1, 1, 0, 1};
  d.example_offsets = {0, 3, 7, 9};
  d.example_rows = {4, 0, 9};
  d.sample_offsets = {0, 2, 3};
  d.report = Json{{"examples_kept", 3}, {"note", "caf\xC3\xA9"}};
  return d;
}

CacheKey key_of(std::string_view s) {
  KeyHasher h;
  h.add("test", s);
  return h.finish();
}

TEST(KeyHasher, FramesPartsAndHashesFiles) {
  KeyHasher a, b, c;
  a.add("x", "ab");
  a.add("y", "c");
  b.add("x", "a");
  b.add("y", "bc");
  EXPECT_NE(a.finish(), b.finish());
  TempDir dir;
  write_file(dir / "f", "ab");
  c.add_file("x", dir / "f");
  c.add("y", "c");
  EXPECT_EQ(c.finish(), a.finish());  // a file hashes as its bytes
  // A device (dataset.train.path=/dev/zero was hashed without end) is an error naming it.
  KeyHasher d;
  EXPECT_EQ(zt::testing::error_of([&] { d.add_file("dataset", "/dev/zero"); }),
            "/dev/zero: not a regular file (a device); expected a file");
  EXPECT_EQ(key_of("v").hex().size(), 32u);
  EXPECT_NE(key_of("v"), key_of("w"));
}

TEST(TokenCache, RoundTripThroughMmap) {
  TempDir dir;
  const auto file = dir / "ds.ztc";
  const CacheKey key = key_of("inputs");
  write_token_cache(file, key, sample_data());
  PreparedDataset ds = PreparedDataset::open(file, &key);
  EXPECT_EQ(ds.key(), key);
  EXPECT_EQ(ds.num_tokens(), 9);
  EXPECT_EQ(ds.num_examples(), 3);
  EXPECT_EQ(ds.num_samples(), 2);
  EXPECT_EQ(std::vector<int32_t>(ds.tokens(1).begin(), ds.tokens(1).end()),
            (std::vector<int32_t>{10, 11, 12, 13}));
  EXPECT_EQ(std::vector<uint8_t>(ds.targets(2).begin(), ds.targets(2).end()),
            (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(ds.source_row(0), 4);
  EXPECT_EQ(ds.source_row(2), 9);
  EXPECT_EQ(ds.sample_examples(0).first, 0);
  EXPECT_EQ(ds.sample_examples(0).last, 2);
  EXPECT_EQ(ds.sample_tokens(0).size(), 7u);
  EXPECT_EQ(ds.sample_tokens(1)[0], 7);
  EXPECT_EQ(ds.sample_targets(0)[3], 1);
  EXPECT_EQ(ds.example_length(0), 3);
  // Zero copies: the spans point into the mapping, 64-byte aligned sections.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ds.all_tokens().data()) % 64, 0u);
  EXPECT_EQ(ds.stored_report()["note"], "caf\xC3\xA9");
  // Moving keeps the mapping alive.
  PreparedDataset moved = std::move(ds);
  EXPECT_EQ(moved.tokens(0)[0], 151644);
  // No temporary file is left beside it.
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1);
}

TEST(TokenCache, RejectsCorruptTruncatedAndStaleFiles) {
  TempDir dir;
  const auto file = dir / "ds.ztc";
  const CacheKey key = key_of("inputs");
  write_token_cache(file, key, sample_data());
  const std::string good = read_file_bytes(file);

  std::string bad = good;
  bad[40] ^= 0x01;  // num_tokens
  write_file(file, bad);
  EXPECT_EQ(error_of([&] { PreparedDataset::open(file); }),
            file.string() + ": corrupt token cache header (checksum mismatch)");

  bad = good;
  bad[0] = 'X';
  write_file(file, bad);
  EXPECT_EQ(error_of([&] { PreparedDataset::open(file); }),
            file.string() + ": not a zerotune token cache (bad magic)");

  write_file(file, good.substr(0, good.size() - 10));
  EXPECT_EQ(error_of([&] { PreparedDataset::open(file); }),
            file.string() + ": token cache is " + std::to_string(good.size() - 10) +
                " bytes, its header says " + std::to_string(good.size()) +
                " (truncated or overwritten)");

  write_file(file, good.substr(0, 100));
  EXPECT_EQ(error_of([&] { PreparedDataset::open(file); }),
            file.string() + ": not a token cache: 100 bytes, shorter than the 256-byte header");

  bad = good;
  bad[300] ^= 0x40;  // a token id
  write_file(file, bad);
  EXPECT_EQ(error_of([&] { PreparedDataset::open(file); }),
            file.string() + ": corrupt token cache (payload checksum mismatch)");

  write_file(file, good);
  const CacheKey other = key_of("other inputs");
  EXPECT_EQ(error_of([&] { PreparedDataset::open(file, &other); }),
            file.string() + ": token cache key " + key.hex() + " does not match the inputs' key " +
                other.hex());
}

TEST(TokenCache, OpenOrBuildReusesAndRebuilds) {
  TempDir dir;
  const auto file = dir / "ds.ztc";
  int builds = 0;
  const auto build = [&] {
    ++builds;
    return sample_data();
  };
  bool built = false;
  const CacheKey key = key_of("inputs");
  {
    const PreparedDataset a = open_or_build_cache(file, key, build, &built);
    EXPECT_TRUE(built);
    EXPECT_EQ(a.num_examples(), 3);
  }
  const PreparedDataset b = open_or_build_cache(file, key, build, &built);
  EXPECT_FALSE(built);
  EXPECT_EQ(builds, 1);
  // A corrupt header is rejected and the file rebuilt.
  std::string bytes = read_file_bytes(file);
  bytes[20] ^= 0x7F;
  write_file(file, bytes);
  const PreparedDataset c = open_or_build_cache(file, key, build, &built);
  EXPECT_TRUE(built);
  EXPECT_EQ(builds, 2);
  // Another key at the same path (inputs changed) rebuilds too.
  const CacheKey key2 = key_of("changed");
  const PreparedDataset d = open_or_build_cache(file, key2, build, &built);
  EXPECT_TRUE(built);
  EXPECT_EQ(d.key(), key2);
  // A failing build leaves no cache file.
  const auto file2 = dir / "fails.ztc";
  EXPECT_EQ(error_of([&] {
              open_or_build_cache(file2, key, []() -> TokenData { throw Error("bad row"); });
            }),
            "bad row");
  EXPECT_FALSE(std::filesystem::exists(file2));
}

// A build killed before its rename leaves ".<file>.tmp.<pid>.<8 hex>" beside the cache: the next
// open_or_build_cache removes it when that process is gone and no builder holds the file's lock,
// and keeps a running process's, a locked file's and every other name. `existed` says whether the
// file was there at the first look.
TEST(TokenCache, StaleTempFilesOfKilledBuildsAreRemoved) {
  TempDir dir;
  const std::string cache = "ds-0123456789abcdef0123456789abcdef.ztc";
  const std::string locked = "other-ffffffffffffffffffffffffffffffff.ztc";
  const std::string gone = std::to_string(dead_pid());
  const std::string stale = "." + cache + ".tmp." + gone + ".0badcafe";
  const std::string stale2 = ".x-00000000000000000000000000000000.ztc.tmp." + gone + ".00000001";
  const std::vector<std::string> kept = {
      "." + cache + ".tmp." + std::to_string(::getpid()) + ".0badcafe",  // a running process's
      "." + locked + ".tmp." + gone + ".0badcafe",                       // its lock is held
      "." + cache + ".tmp." + gone + ".0badcafe1",                       // 9 hex digits
      cache + ".tmp." + gone + ".0badcafe",                              // no leading dot
      ".ds-0123.ztc.tmp." + gone + ".0badcafe",                          // no 32-hex key
      ".notes.tmp." + gone + ".0badcafe",                                // not a cache file's
      // No build lock to take (a builder never made one, or it is gone): kept.
      ".y-11111111111111111111111111111111.ztc.tmp." + gone + ".00000002", locked + ".lock",
      "x-00000000000000000000000000000000.ztc.lock"};
  for (const auto& n : kept) write_file(dir / n, "x");
  for (const auto& n : {stale, stale2}) write_file(dir / n, "partial");
  // A killed build leaves its lock file (created before the temporary file), free.
  write_file(dir / (cache + ".lock"), "");
  EXPECT_EQ(token_cache_temp_pid(stale), std::stoll(gone));
  EXPECT_EQ(token_cache_temp_pid(kept[2]), std::nullopt);
  // Another process builds `locked`: it holds the lock (an flock of another open file).
  const int lock = ::open((dir / (locked + ".lock")).c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(::flock(lock, LOCK_EX), 0);

  bool built = false, existed = true;
  const PreparedDataset a =
      open_or_build_cache(dir / cache, key_of("inputs"), sample_data, &built, &existed);
  EXPECT_TRUE(built);
  EXPECT_FALSE(existed);
  std::vector<std::string> want = kept;
  want.push_back(cache);
  want.push_back(cache + ".lock");
  std::sort(want.begin(), want.end());
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, want);
  const PreparedDataset b =
      open_or_build_cache(dir / cache, key_of("inputs"), sample_data, &built, &existed);
  EXPECT_FALSE(built);
  EXPECT_TRUE(existed);
  // The lock now free, its leftover goes too.
  ::close(lock);
  EXPECT_EQ(clean_stale_token_cache_temps(dir.path()),
            std::vector<std::filesystem::path>{dir / kept[1]});
}

TEST(TokenCache, ConcurrentBuildersProduceOneValidFile) {
  TempDir dir;
  const auto file = dir / "shared.ztc";
  const auto log = dir / "builds.log";
  const CacheKey key = key_of("inputs");
  constexpr int kProcs = 6;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        const PreparedDataset ds = open_or_build_cache(file, key, [&] {
          const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
          (void)!::write(fd, "b\n", 2);
          ::close(fd);
          ::usleep(200 * 1000);  // widen the window in which the others arrive
          return sample_data();
        });
        const auto t = ds.tokens(1);
        code = (ds.num_examples() == 3 && t.size() == 4 && t[3] == 13) ? 0 : 2;
      } catch (...) {
        code = 3;
      }
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  for (const pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  EXPECT_EQ(read_file_bytes(log), "b\n");  // built exactly once
  const PreparedDataset ds = PreparedDataset::open(file, &key);
  EXPECT_EQ(ds.num_tokens(), 9);
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"builds.log", "shared.ztc", "shared.ztc.lock"}));
}

}  // namespace
}  // namespace zt::data
