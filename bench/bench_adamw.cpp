// AdamW on the CPU (the offload path): elements per second of adamw_cpu on a 64 Mi-element fp32
// shard with the bf16 copy, against a plain scalar loop of adamw_element() (the same arithmetic,
// one thread, no SIMD dispatch). Also the fp64 sum of squares used for the gradient norm.
// Usage: bench_adamw [elements]
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "optim/adamw.h"
#include "optim/clip.h"

namespace {

double seconds_of(const auto& f, int reps) {
  f();  // warm-up (page faults, thread pool)
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (size_t{1} << 26);
  std::vector<float> p(n, 0.5f), m(n, 1e-3f), v(n, 1e-6f), g(n);
  std::vector<uint16_t> pb(n);
  for (size_t i = 0; i < n; ++i) g[i] = static_cast<float>(i % 1000) * 1e-5f - 5e-3f;
  const zt::optim::AdamWStep s = zt::optim::adamw_step({0.9, 0.999, 1e-8, 0.01}, 2e-5, 10, 0.9f);
  const double simd = seconds_of(
      [&] { zt::optim::adamw_cpu(s, p.data(), m.data(), v.data(), g.data(), n, pb.data()); }, 5);
  const double scalar = seconds_of(
      [&] {
        for (size_t i = 0; i < n; ++i) zt::optim::adamw_element(s, p[i], m[i], v[i], g[i]);
      },
      2);
  double sink = 0;
  const double sumsq = seconds_of([&] { sink += zt::optim::sumsq_f64(g.data(), n); }, 5);
  // Bytes moved per element by adamw_cpu: read p, m, v, g; write p, m, v, bf16 p.
  const double bytes = 4.0 * 7 + 2;
  std::printf("elements %zu  threads %d\n", n, omp_get_max_threads());
  std::printf("adamw_cpu      %8.1f Melem/s  %6.2f GB/s\n", n / simd / 1e6, n * bytes / simd / 1e9);
  std::printf("scalar loop    %8.1f Melem/s  (adamw_cpu is %.1fx)\n", n / scalar / 1e6,
              scalar / simd);
  std::printf("sumsq_f64      %8.1f Melem/s  (sum %.6g)\n", n / sumsq / 1e6, sink);
  return 0;
}
