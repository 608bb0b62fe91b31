// The ZeRO state file's save id and header checksum: every rank's file of one save carries the same
// id, a checkpoint directory that mixes rank files of two saves is refused on both load paths (the
// same world size on 2 TCP ranks as threads, and the re-sharding), a corrupt header is named as
// such, and files written before either field existed still load.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/zt_test_util.h"
#include "dist/comm_tcp.h"
#include "dist/local_launch.h"
#include "zero_test_util.h"

namespace zt::zero {
namespace {

using test::bits;
using test::load_and_save_as;
using test::RunResult;
using test::RunSpec;

constexpr size_t kSaveIdAt = 48;        // header offset of the save id
constexpr size_t kHeaderDigestAt = 56;  // header offset of the header checksum

uint64_t u64_at(const std::string& bytes, size_t at) {
  uint64_t v = 0;
  std::memcpy(&v, bytes.data() + at, sizeof v);
  return v;
}

uint64_t save_id_of(const fs::path& file) { return u64_at(read_file(file), kSaveIdAt); }

// Rewrites `file` with `edit` applied to its bytes.
void edit_file(const fs::path& file, const std::function<void(std::string&)>& edit) {
  std::string bytes = read_file(file);
  edit(bytes);
  write_file_atomic(file, bytes);
}

// The file as written before save ids: both header fields 0.
void strip_ids(const fs::path& file) {
  edit_file(file, [](std::string& b) { std::memset(b.data() + kSaveIdAt, 0, 16); });
}

// Runs `spec` on one rank, saves its state under d1 (created) and re-shards it to 2 ranks under
// d2 (created; stage 3 engines on ShapeComms): one save, as a 1-rank and a 2-rank checkpoint.
RunResult save_on_one_and_two_ranks(RunSpec spec, const fs::path& d1, const fs::path& d2) {
  fs::create_directories(d1);
  fs::create_directories(d2);
  dist::SingleComm one;
  spec.save_dir = d1.string();
  RunResult r = run_training(one, spec);
  load_and_save_as(d1.string(), d2.string(), 2, 3, false, spec.dtype);
  return r;
}

// Runs body(comm) on W TCP ranks (threads); returns each rank's exception message ("" if none).
std::vector<std::string> on_tcp_ranks(int w, const std::function<void(dist::Comm&)>& body) {
  dist::CommOptions opt;
  opt.timeout_s = 60;  // a rank left waiting fails the test instead of hanging it
  opt.rendezvous_timeout_s = 60;
  const int port = dist::pick_free_port("127.0.0.1");
  std::vector<std::string> errors(static_cast<size_t>(w));
  std::vector<std::thread> threads;
  for (int r = 0; r < w; ++r)
    threads.emplace_back([&, r] {
      try {
        auto comm = dist::make_tcp_comm(dist::TcpRendezvous{r, w, r, w, "127.0.0.1", port}, opt);
        body(*comm);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

// What one rank of a same-world-size load ended with.
struct Loaded {
  uint64_t save_id = 0;
  int64_t adam_step = -1;
};

// Loads `dir` (saved with world size 2) on 2 TCP ranks under stage 1: the same-world-size path,
// where each rank reads only its own file. Returns each rank's error ("" if none); `out` gets
// what each rank loaded.
std::vector<std::string> load_on_two_ranks(const fs::path& dir, std::vector<Loaded>& out) {
  out.assign(2, Loaded{});
  return on_tcp_ranks(2, [&](dist::Comm& c) {
    CpuOps ops;
    HostMemory mem;
    ZeroEngine z(ParamLayout(test::tiny_config(false)), DType::kF32, ops, c, mem, mem, {1, false});
    z.load_state(dir);
    out[static_cast<size_t>(c.rank())] = {z.save_id(), z.adam_step()};
  });
}

// Loads `dir` with one rank (the re-sharding path for a checkpoint of another world size).
void load_alone(const fs::path& dir) {
  CpuOps ops;
  HostMemory mem;
  dist::SingleComm one;
  ZeroEngine z(ParamLayout(test::tiny_config(false)), DType::kF32, ops, one, mem, mem, {1, false});
  z.load_state(dir);
}

// Two runs that differ only in their learning rate, each saved after step 2 with one rank and
// re-sharded to 2 ranks: the same world size and step count, two saves. Swapping in the other
// save's rank 1 file is refused on both load paths, naming both files and both ids; before the
// swap both load, and every rank takes the save's id.
TEST(ZeroStateFile, RankFileOfAnotherSaveIsRefused) {
  const testing::TempDir tmp;
  const fs::path a1 = tmp / "a1", b1 = tmp / "b1", a2 = tmp / "a2", b2 = tmp / "b2";
  RunSpec spec;
  spec.steps = 2;
  save_on_one_and_two_ranks(spec, a1, a2);
  spec.lr = 3e-3;
  save_on_one_and_two_ranks(spec, b1, b2);
  const uint64_t id_a = save_id_of(ZeroEngine::state_path(a1, 0));
  const uint64_t id_b = save_id_of(ZeroEngine::state_path(b1, 0));
  EXPECT_NE(id_a, 0u);
  EXPECT_NE(id_a, id_b);
  // Re-sharding keeps the save's id, in every rank's file; the step counts agree.
  for (int r : {0, 1}) {
    EXPECT_EQ(save_id_of(ZeroEngine::state_path(a2, r)), id_a) << r;
    EXPECT_EQ(save_id_of(ZeroEngine::state_path(b2, r)), id_b) << r;
    EXPECT_EQ(u64_at(read_file(ZeroEngine::state_path(a2, r)), 40), 2u);
    EXPECT_EQ(u64_at(read_file(ZeroEngine::state_path(b2, r)), 40), 2u);
  }
  std::vector<Loaded> loaded;
  const std::vector<std::string> ok = load_on_two_ranks(a2, loaded);
  for (int r : {0, 1}) {
    EXPECT_EQ(ok[static_cast<size_t>(r)], "") << r;
    EXPECT_EQ(loaded[static_cast<size_t>(r)].save_id, id_a) << r;
    EXPECT_EQ(loaded[static_cast<size_t>(r)].adam_step, 2) << r;
  }
  fs::copy_file(ZeroEngine::state_path(b2, 1), ZeroEngine::state_path(a2, 1),
                fs::copy_options::overwrite_existing);
  const std::string want = fmt::format(
      "{}: ZeRO state of save id {:016x}, but rank 0's file {} of save id {:016x}: the directory "
      "mixes files of two saves",
      ZeroEngine::state_path(a2, 1).string(), id_b, ZeroEngine::state_path(a2, 0).string(), id_a);
  const std::vector<std::string> errors = load_on_two_ranks(a2, loaded);
  EXPECT_EQ(errors[0], want);  // rank 0 read only its own, good, file: it fails alike
  EXPECT_EQ(errors[1], want);
  EXPECT_EQ(testing::error_of([&] { load_alone(a2); }), want);
}

// A rank whose own file is bad fails with that file's error, and the other rank, which read a
// good file, fails too (naming the rank) instead of waiting in the exchange.
TEST(ZeroStateFile, ABadFileOnOneRankFailsEveryRank) {
  const testing::TempDir tmp;
  const fs::path d1 = tmp / "w1", d2 = tmp / "w2";
  RunSpec spec;
  spec.steps = 1;
  save_on_one_and_two_ranks(spec, d1, d2);
  const fs::path bad = ZeroEngine::state_path(d2, 1);
  edit_file(bad, [](std::string& b) { b[100] = static_cast<char>(b[100] ^ 0x40); });
  std::vector<Loaded> loaded;
  const std::vector<std::string> errors = load_on_two_ranks(d2, loaded);
  EXPECT_EQ(errors[0], d2.string() +
                           ": rank 1 could not load its zero_state_rank00001.bin (its own error "
                           "says why); no rank loads the checkpoint");
  EXPECT_TRUE(errors[1].starts_with(bad.string() + ": ZeRO state checksum ")) << errors[1];
  EXPECT_TRUE(errors[1].ends_with("): the file is corrupt")) << errors[1];
}

// The header checksum is XXH3-64 of the 64 header bytes with its own field 0. A flipped header
// byte is reported as a corrupt header before the field is believed: the world size of rank 0's
// file (which would have been read as the checkpoint's world size), the layout hash of rank 1's
// file of a 2-rank checkpoint read by the re-sharding.
TEST(ZeroStateFile, FlippedHeaderByteIsACorruptHeader) {
  const testing::TempDir tmp;
  const fs::path d1 = tmp / "w1", d2 = tmp / "w2";
  RunSpec spec;
  spec.steps = 1;
  save_on_one_and_two_ranks(spec, d1, d2);
  const fs::path f0 = ZeroEngine::state_path(d1, 0);
  std::string header = read_file(f0).substr(0, 64);
  const uint64_t stored = u64_at(header, kHeaderDigestAt);
  std::memset(header.data() + kHeaderDigestAt, 0, 8);
  EXPECT_EQ(stored, XXH3_64bits(header.data(), 64));
  const auto corrupt = [](const fs::path& f) {
    return std::vector<std::string>{f.string() + ": ZeRO state header checksum ",
                                    "): the header is corrupt"};
  };
  edit_file(f0, [](std::string& b) { b[12] = static_cast<char>(b[12] ^ 0x02); });  // W 1 → 3
  testing::expect_error([&] { load_alone(d1); }, corrupt(f0));
  const fs::path f1 = ZeroEngine::state_path(d2, 1);
  edit_file(f1, [](std::string& b) { b[24] = static_cast<char>(b[24] ^ 0x01); });
  testing::expect_error([&] { load_alone(d2); }, corrupt(f1));
}

// Files written before save ids and header checksums (both fields 0) load with neither check,
// bitwise as before: one rank resuming a 1-rank checkpoint, and one rank re-sharding a 2-rank one
// — whose re-saved files then carry rank 0's payload checksum as their id. A directory mixing
// such a file with a newer one is refused as two saves.
TEST(ZeroStateFile, FilesWithoutSaveIdStillLoad) {
  const testing::TempDir tmp;
  const fs::path d1 = tmp / "w1", d2 = tmp / "w2", back = tmp / "back";
  fs::create_directories(back);
  dist::SingleComm one;
  RunSpec spec;
  spec.accum = 2;
  const RunResult full = run_training(one, spec);
  RunSpec first = spec;
  first.steps = 2;
  const RunResult part = save_on_one_and_two_ranks(first, d1, d2);
  const fs::path mixed_new = ZeroEngine::state_path(d2, 1);
  const uint64_t new_id = save_id_of(mixed_new);
  strip_ids(ZeroEngine::state_path(d1, 0));
  strip_ids(ZeroEngine::state_path(d2, 0));
  testing::expect_error(
      [&] { load_alone(d2); },
      {fmt::format("{}: ZeRO state of save id {:016x}, but rank 0's file {} of save id 0 (written "
                   "before save ids): the directory mixes files of two saves",
                   mixed_new.string(), new_id, ZeroEngine::state_path(d2, 0).string())});
  strip_ids(mixed_new);
  load_and_save_as(d2.string(), back.string(), 1, 1, false, DType::kF32);
  const std::string old0 = read_file(ZeroEngine::state_path(d2, 0));
  const std::string re = read_file(ZeroEngine::state_path(back, 0));
  EXPECT_EQ(u64_at(re, kSaveIdAt), u64_at(old0, old0.size() - 8));  // rank 0's payload checksum
  EXPECT_TRUE(re.substr(64) == read_file(ZeroEngine::state_path(d1, 0)).substr(64));
  RunSpec rest = spec;
  rest.first_step = 2;
  rest.load_dir = d1.string();
  rest.init_seed = 999;
  const RunResult r = run_training(one, rest);
  EXPECT_EQ(bits(r.initial_master), bits(part.master));
  ASSERT_EQ(r.losses.size(), 1u);
  EXPECT_EQ(bits(r.losses)[0], bits(full.losses)[2]);
  EXPECT_EQ(bits(r.master), bits(full.master));
  EXPECT_EQ(r.adam_step, 3);
}

}  // namespace
}  // namespace zt::zero
