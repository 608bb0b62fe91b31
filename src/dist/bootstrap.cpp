// Launch environment detection and Comm construction (see bootstrap.h).
#include "dist/bootstrap.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "dist/comm_mpi.h"
#ifdef ZT_HAVE_NCCL
#include "dist/nccl/comm_nccl.h"
#endif

namespace zt::dist {

namespace {

int64_t env_int(const EnvLookup& env, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const char* v = env(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  if (errno != 0 || *end != '\0' || x < lo || x > hi)
    fail("environment variable {}='{}': expected an integer in [{}, {}]", name, v, lo, hi);
  return x;
}

double env_seconds(const EnvLookup& env, const char* name, double fallback) {
  const char* v = env(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  if (*end != '\0' || !(x > 0.0))
    fail("environment variable {}='{}': expected a positive number of seconds", name, v);
  return x;
}

}  // namespace

LaunchEnv read_launch_env(const EnvLookup& env) {
  LaunchEnv le;
  le.options.timeout_s = env_seconds(env, "ZT_COMM_TIMEOUT_S", le.options.timeout_s);
  le.options.rendezvous_timeout_s =
      env_seconds(env, "ZT_RENDEZVOUS_TIMEOUT_S", le.options.rendezvous_timeout_s);
  le.options.chunk_elements = static_cast<size_t>(env_int(
      env, "ZT_COMM_CHUNK_ELEMENTS", static_cast<int64_t>(le.options.chunk_elements), 1, 1 << 28));
  if (env("OMPI_COMM_WORLD_SIZE") || env("PMIX_RANK")) {
    le.launcher = Launcher::kMpi;
    return le;
  }
  const int64_t world = env_int(env, "WORLD_SIZE", 1, 1, 1 << 20);
  if (world == 1) return le;
  TcpRendezvous& t = le.tcp;
  t.world_size = static_cast<int>(world);
  if (!env("RANK")) fail("environment variable RANK is not set (WORLD_SIZE={} is)", world);
  t.rank = static_cast<int>(env_int(env, "RANK", 0, 0, world - 1));
  t.local_world_size = static_cast<int>(env_int(env, "LOCAL_WORLD_SIZE", world, 1, world));
  t.local_rank = static_cast<int>(env_int(env, "LOCAL_RANK", t.rank, 0, t.local_world_size - 1));
  const char* addr = env("MASTER_ADDR");
  if (!addr || !*addr)
    fail("environment variable MASTER_ADDR is not set (needed with WORLD_SIZE={})", world);
  t.master_addr = addr;
  if (!env("MASTER_PORT"))
    fail("environment variable MASTER_PORT is not set (needed with WORLD_SIZE={})", world);
  t.master_port = static_cast<int>(env_int(env, "MASTER_PORT", 0, 1, 65535));
  le.launcher = Launcher::kTcp;
  return le;
}

std::unique_ptr<Comm> make_comm(const LaunchEnv& where) {
  switch (where.launcher) {
    case Launcher::kMpi:
      return make_mpi_comm(where.options);
    case Launcher::kTcp:
      return make_tcp_comm(where.tcp, where.options);
    case Launcher::kSingle:
      break;
  }
  return std::make_unique<SingleComm>();
}

std::unique_ptr<Comm> make_comm_from_environment() {
  return make_comm(read_launch_env([](const char* name) { return std::getenv(name); }));
}

bool have_device_comm() {
#ifdef ZT_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Comm> make_device_comm(std::unique_ptr<Comm> host, int device,
                                       size_t max_bucket_elems, const CommOptions& options) {
#ifdef ZT_HAVE_NCCL
  NcclCommOptions o;
  o.max_bucket_elems = max_bucket_elems;
  o.timeout_s = options.timeout_s;
  return std::make_unique<NcclComm>(std::move(host), device, o);
#else
  (void)host, (void)device, (void)max_bucket_elems, (void)options;
  fail(
      "this zerotune was built without CUDA/NCCL: no device Comm (rebuild where nvcc and NCCL "
      "are found)");
#endif
}

}  // namespace zt::dist
