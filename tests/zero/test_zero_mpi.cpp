// The engine with 2 and 4 MPI ranks. ZeroMpi.* re-executes this test binary under
// `mpirun --oversubscribe -np N` with ZT_ZERO_MPI_OUT set, running only ZeroMpiWorker.* in the
// ranks; the worker checks stage / offload invariance and checkpoint resume on every rank, and
// rank 0 writes its results so the parent can compare them with a one-rank run that processes the
// same micro-batches (split invariance, DESIGN §1 promise 2).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "core/file_util.h"
#include "dist/bootstrap.h"
#include "dist/child_process.h"
#include "zero_test_util.h"

namespace zt::zero {
namespace {

using test::bits;
using test::RunResult;
using test::RunSpec;

constexpr const char* kOutEnv = "ZT_ZERO_MPI_OUT";

void write_vec(std::ofstream& f, const void* p, uint64_t count, size_t elem) {
  f.write(reinterpret_cast<const char*>(&count), sizeof count);
  f.write(static_cast<const char*>(p), static_cast<std::streamsize>(count * elem));
}

template <typename T>
std::vector<T> read_vec(std::ifstream& f) {
  uint64_t count = 0;
  f.read(reinterpret_cast<char*>(&count), sizeof count);
  std::vector<T> v(count);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(count * sizeof(T)));
  return v;
}

void expect_same(const RunResult& a, const RunResult& b, int rank) {
  EXPECT_EQ(bits(a.losses), bits(b.losses)) << "rank " << rank;
  EXPECT_EQ(bits(a.norms), bits(b.norms)) << "rank " << rank;
  EXPECT_EQ(bits(a.master), bits(b.master)) << "rank " << rank;
  EXPECT_TRUE(a.weights == b.weights) << "compute weights differ on rank " << rank;
}

void worker(dist::Comm& comm, const std::string& out) {
  const int W = comm.world_size(), r = comm.rank();
  // fp32, tied embedding: every stage × offload (none, the gradient accumulated in host memory,
  // on the device), accumulation 1 and 4.
  for (int accum : {1, 4}) {
    RunSpec spec;
    spec.accum = accum;
    spec.tied = true;
    const RunResult ref = run_training(comm, spec);
    for (int stage = 0; stage <= 3; ++stage)
      for (int off = 0; off < 3; ++off) {
        if (stage == 1 && off == 0) continue;
        SCOPED_TRACE(fmt::format("W {} accum {} stage {} offload {}", W, accum, stage, off));
        RunSpec s = spec;
        s.stage = stage;
        s.offload = off > 0;
        s.host_accum = off == 1;
        expect_same(run_training(comm, s), ref, r);
      }
    // Every rank ends with the same compute weights.
    const uint64_t h = XXH3_64bits(ref.weights.data(), ref.weights.size());
    std::vector<uint64_t> all(static_cast<size_t>(W));
    comm.all_gather_bytes(&h, all.data(), sizeof h);
    for (int q = 0; q < W; ++q) EXPECT_EQ(all[static_cast<size_t>(q)], h) << "rank " << q;
    if (r == 0) {
      std::ofstream f(fmt::format("{}/result_accum{}.bin", out, accum), std::ios::binary);
      write_vec(f, ref.losses.data(), ref.losses.size(), 8);
      write_vec(f, ref.norms.data(), ref.norms.size(), 8);
      write_vec(f, ref.initial_master.data(), ref.initial_master.size(), 4);
      write_vec(f, ref.master.data(), ref.master.size(), 4);
    }
  }
  // bf16 compute weights (untied): the all-gathered bf16 bits are the owner's rounding.
  {
    RunSpec spec;
    spec.accum = 2;
    spec.dtype = DType::kBF16;
    const RunResult ref = run_training(comm, spec);
    for (int stage : {0, 3})
      for (bool off : {false, true}) {
        SCOPED_TRACE(fmt::format("W {} bf16 stage {} offload {}", W, stage, off));
        RunSpec s = spec;
        s.stage = stage;
        s.offload = off;
        expect_same(run_training(comm, s), ref, r);
      }
  }
  // Checkpoint after step 1 under stage 1, resume under other stages (stage 0 all-gathers); in
  // bf16 the device master is split (optim/master_split.h): saved joined, loaded split, and under
  // stage 0 without offload all-gathered through the reducer's staging.
  for (DType dt : {DType::kF32, DType::kBF16}) {
    RunSpec spec;
    spec.tied = true;
    spec.dtype = dt;
    const RunResult full = run_training(comm, spec);
    const std::string dir = out + "/ckpt_" + std::string(dtype_name(dt));
    if (r == 0) fs::create_directories(dir);
    comm.barrier();
    RunSpec first = spec;
    first.steps = 2;
    first.save_dir = dir;
    run_training(comm, first);
    comm.barrier();
    // Stage 0 with offload twice: the load's all-gather of master / m / v goes through the host
    // staging ring (host accumulation) or the device shard (device accumulation).
    const int stages[5] = {0, 0, 3, 2, 0};
    const bool offs[5] = {true, true, false, true, false};
    const bool host_accum[5] = {true, false, true, true, false};
    for (int i = 0; i < 5; ++i) {
      SCOPED_TRACE(fmt::format("W {} {} resume under stage {} offload {} host accumulation {}", W,
                               dtype_name(dt), stages[i], offs[i], host_accum[i]));
      RunSpec rest = spec;
      rest.stage = stages[i];
      rest.offload = offs[i];
      rest.host_accum = host_accum[i];
      rest.first_step = 2;
      rest.load_dir = dir;
      rest.init_seed = 4321;
      const RunResult res = run_training(comm, rest);
      EXPECT_EQ(res.losses.size(), 1u);
      if (res.losses.size() != 1) continue;  // (no ASSERT here: the other ranks must go on)
      EXPECT_EQ(bits(res.losses)[0], bits(full.losses)[2]);
      EXPECT_EQ(bits(res.norms)[0], bits(full.norms)[2]);
      EXPECT_EQ(bits(res.master), bits(full.master));
      EXPECT_TRUE(res.weights == full.weights);
    }
  }
}

// Runs inside the ranks only (skipped in a normal run: ZeroMpi.* starts it).
TEST(ZeroMpiWorker, StagesOffloadAndResumeAgree) {
  const char* out = std::getenv(kOutEnv);
  if (out == nullptr) GTEST_SKIP() << "started by ZeroMpi.* under mpirun";
  const auto comm = dist::make_comm_from_environment();
  ASSERT_EQ(comm->backend(), "mpi");
  try {
    worker(*comm, out);
  } catch (const std::exception& e) {
    // A rank that stops here would leave the others waiting in a collective: end the job.
    std::fprintf(stderr, "rank %d: %s\n", comm->rank(), e.what());
    std::fflush(stderr);
    std::_Exit(3);
  }
}

void run_ranks(int W) {
  const std::string dir = fmt::format("{}/zero_mpi_w{}_{}", ::testing::TempDir(), W, getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  const std::string log = dir + "/log.txt";
  const std::string cmd = fmt::format(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 {}={} "
      "OMPI_MCA_orte_tmpdir_base={} timeout 120 mpirun --oversubscribe --bind-to none -np {} {} "
      "--gtest_filter=ZeroMpiWorker.* --gtest_color=no > {} 2>&1",
      kOutEnv, dir, zt::test::mpi_tmpdir_base(), W, exe, log);
  const int rc = std::system(cmd.c_str());
  std::string text;
  try {
    text = read_file(log);
  } catch (const std::exception&) {
  }
  ASSERT_EQ(rc, 0) << cmd << "\n" << text;
  ASSERT_NE(text.find("[  PASSED  ] 1 test"), std::string::npos) << text;

  for (int accum : {1, 4}) {
    SCOPED_TRACE(fmt::format("W {} accum {}", W, accum));
    std::ifstream f(fmt::format("{}/result_accum{}.bin", dir, accum), std::ios::binary);
    ASSERT_TRUE(f.good());
    const auto losses = read_vec<double>(f), norms = read_vec<double>(f);
    const auto init = read_vec<float>(f), master = read_vec<float>(f);
    // One rank, W·accum micro-batches per step: the same samples in every optimizer step.
    dist::SingleComm one;
    RunSpec spec;
    spec.accum = accum * W;
    spec.tied = true;
    const RunResult ref = run_training(one, spec);
    ASSERT_EQ(losses.size(), 3u);
    ASSERT_EQ(master.size(), ref.master.size());
    EXPECT_EQ(bits(init), bits(ref.initial_master));
    if (accum == 1) {
      // One micro-batch per rank: the rank-order reduction ((g0 + g1) + …) is exactly the
      // one-rank accumulation of the same micro-batches in the same order. Only the fp64 sum of
      // squares is grouped differently (W shards vs one), below the fp32 clip coefficient.
      EXPECT_EQ(bits(losses), bits(ref.losses));
      for (size_t k = 0; k < 3; ++k) EXPECT_NEAR(norms[k], ref.norms[k], 1e-13 * ref.norms[k]);
      EXPECT_EQ(bits(master), bits(ref.master));
      continue;
    }
    // Otherwise the sums are reassociated: equal to the stated tolerances, not bitwise.
    EXPECT_NE(bits(master), bits(ref.master));
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_NEAR(losses[k], ref.losses[k], 1e-6 * ref.losses[k]) << "step " << k;
      EXPECT_NEAR(norms[k], ref.norms[k], 1e-5 * ref.norms[k]) << "step " << k;
    }
    // The updates (final − initial master weights) agree to 1e-5 relative (L2 over all
    // parameters; single elements with near-zero gradients are amplified by Adam's 1/sqrt(v)).
    double diff2 = 0.0, upd2 = 0.0;
    for (size_t i = 0; i < master.size(); ++i) {
      const double u = static_cast<double>(ref.master[i]) - ref.initial_master[i];
      const double v = static_cast<double>(master[i]) - init[i];
      diff2 += (u - v) * (u - v);
      upd2 += u * u;
    }
    EXPECT_GT(std::sqrt(upd2), 1e-2);  // 3 steps of lr ≈ 2e-3 on ~30k weights
    EXPECT_LE(std::sqrt(diff2), 1e-5 * std::sqrt(upd2));
  }
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);  // kept for a look when it failed
}

TEST(ZeroMpi, TwoRanks) { run_ranks(2); }
TEST(ZeroMpi, FourRanks) { run_ranks(4); }

}  // namespace
}  // namespace zt::zero
