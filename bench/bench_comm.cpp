// Collective throughput of the Comm the environment describes, e.g.
//   mpirun -np 4 build/bench/bench_comm [elements]
// or two ranks by hand with the torchrun-style variables (TCP Comm):
//   RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 build/bench/bench_comm &
//   RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 build/bench/bench_comm
// Prints, on rank 0, the time of one reduce_scatter_sum and one all_gather of `elements` fp32 values
// (default 16 Mi) per rank and the bus bandwidth, (W-1)/W * bytes / time (NCCL's convention).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "dist/bootstrap.h"

int main(int argc, char** argv) {
  const size_t n_arg = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (size_t{1} << 24);
  auto comm = zt::dist::make_comm_from_environment();
  const auto w = static_cast<size_t>(comm->world_size());
  const size_t n = n_arg / w * w;
  std::vector<float> send(n, 1.0f + static_cast<float>(comm->rank())), shard(n / w), full(n);
  auto time_of = [&](const auto& f) {
    f();  // warm-up
    comm->barrier();
    const auto t0 = std::chrono::steady_clock::now();
    const int reps = 5;
    for (int i = 0; i < reps; ++i) f();
    comm->barrier();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
  };
  const double rs = time_of([&] { comm->reduce_scatter_sum(send.data(), shard.data(), n); });
  const double ag = time_of([&] { comm->all_gather(shard.data(), full.data(), n / w); });
  if (comm->rank() == 0) {
    const double bytes =
        static_cast<double>(n) * 4.0 * static_cast<double>(w - 1) / static_cast<double>(w);
    std::printf("backend %.*s  world %zu  elements %zu\n", static_cast<int>(comm->backend().size()),
                comm->backend().data(), w, n);
    std::printf("reduce_scatter_sum  %8.2f ms  bus %6.2f GB/s\n", rs * 1e3, bytes / rs / 1e9);
    std::printf("all_gather          %8.2f ms  bus %6.2f GB/s\n", ag * 1e3, bytes / ag / 1e9);
  }
  return 0;
}
