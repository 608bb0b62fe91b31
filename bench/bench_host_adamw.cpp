// The offloaded optimizer step on the CPU: parameters per second of HostAdamW (optim/host_adamw.h)
// over a 100 M-parameter fp32 shard (master, m, v, gradient; bf16 copy of the master written) at
// 1, 2, 4, 8, 16 threads (those above the hardware's thread count left out), as one chunk and as
// the engine's pipeline would feed it (4 Mi-element chunks, all submitted, then wait_all), against
// the OpenMP adamw_cpu at omp_get_max_threads() and at 1 thread (what OMP_NUM_THREADS=1 gives).
// bench/deepspeed_cpu_adam.py prints DeepSpeed's DeepSpeedCPUAdam with the same JSON keys.
// Usage: bench_host_adamw [params] [reps]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "optim/adamw.h"
#include "optim/host_adamw.h"

namespace {

using zt::optim::HostAdamW;

double seconds_of(const auto& f, int reps) {
  f();  // warm-up (page faults, thread start)
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

struct Row {
  std::string impl;
  int threads;
  size_t chunk;  // elements per submitted unit of work
  double params_per_s;
};

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : size_t{100'000'000};
  const int reps = argc > 2 ? std::atoi(argv[2]) : 3;
  constexpr size_t kChunk = size_t{1} << 22;  // 4 Mi elements: 16 MiB of fp32 gradient per chunk
  std::vector<float> p(n, 0.5f), m(n, 1e-3f), v(n, 1e-6f), g(n);
  std::vector<uint16_t> pb(n);
  for (size_t i = 0; i < n; ++i) g[i] = static_cast<float>(i % 1000) * 1e-5f - 5e-3f;
  const zt::optim::AdamWStep s = zt::optim::adamw_step({0.9, 0.999, 1e-8, 0.01}, 2e-5, 10, 0.9f);
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  std::vector<Row> rows;
  for (const int t : {1, 2, 4, 8, 16}) {
    if (t > hw) break;
    HostAdamW pool(t);
    const double one = seconds_of(
        [&] { pool.run(s, p.data(), m.data(), v.data(), g.data(), n, pb.data()); }, reps);
    rows.push_back({"zerotune HostAdamW", t, n, n / one});
    const double chunked = seconds_of(
        [&] {
          for (size_t lo = 0; lo < n; lo += kChunk)
            pool.submit(s, p.data() + lo, m.data() + lo, v.data() + lo, g.data() + lo,
                        std::min(kChunk, n - lo), pb.data() + lo);
          pool.wait_all();
        },
        reps);
    rows.push_back({"zerotune HostAdamW", t, kChunk, n / chunked});
  }
  const int omp_default = omp_get_max_threads();
  for (const int t : {omp_default, 1}) {
    omp_set_num_threads(t);
    const double sec = seconds_of(
        [&] { zt::optim::adamw_cpu(s, p.data(), m.data(), v.data(), g.data(), n, pb.data()); },
        reps);
    rows.push_back({"zerotune adamw_cpu (OpenMP)", t, n, n / sec});
    if (omp_default == 1) break;
  }

  // Bytes moved per parameter: read master, m, v, grad; write master, m, v, bf16 master.
  const double bytes = 4.0 * 7 + 2;
  std::printf("params %zu  hardware threads %d  reps %d\n", n, hw, reps);
  std::printf("%-28s %7s %10s %12s %8s\n", "impl", "threads", "chunk", "Mparams/s", "GB/s");
  for (const Row& r : rows)
    std::printf("%-28s %7d %10zu %12.1f %8.2f\n", r.impl.c_str(), r.threads, r.chunk,
                r.params_per_s / 1e6, r.params_per_s * bytes / 1e9);
  std::printf(
      "{\"bench\": \"cpu_adamw\", \"params\": %zu, \"hardware_threads\": %d, \"results\": [", n,
      hw);
  for (size_t i = 0; i < rows.size(); ++i)
    std::printf("%s{\"impl\": \"%s\", \"threads\": %d, \"chunk\": %zu, \"params_per_s\": %.4g}",
                i ? ", " : "", rows[i].impl.c_str(), rows[i].threads, rows[i].chunk,
                rows[i].params_per_s);
  std::printf("]}\n");
  return 0;
}
