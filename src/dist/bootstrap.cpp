// Launch environment detection and Comm construction (see bootstrap.h).
#include "dist/bootstrap.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <optional>
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

// Slurm's SLURM_TASKS_PER_NODE ("2(x3),1": 2 tasks on each of nodes 0-2, 1 on node 3): the count
// on node `node`; nullopt when the value does not parse or has no such node.
std::optional<int64_t> slurm_tasks_on_node(const std::string& spec, int64_t node) {
  size_t at = 0;
  while (at < spec.size()) {
    char* end = nullptr;
    const long long tasks = std::strtoll(spec.c_str() + at, &end, 10);
    if (end == spec.c_str() + at || tasks < 1) return std::nullopt;
    at = static_cast<size_t>(end - spec.c_str());
    long long repeat = 1;
    if (spec.compare(at, 2, "(x") == 0) {
      repeat = std::strtoll(spec.c_str() + at + 2, &end, 10);
      if (repeat < 1 || *end != ')') return std::nullopt;
      at = static_cast<size_t>(end - spec.c_str()) + 1;
    }
    if (node < repeat) return tasks;
    node -= repeat;
    if (at < spec.size() && spec[at] != ',') return std::nullopt;
    if (at < spec.size()) ++at;
  }
  return std::nullopt;
}

}  // namespace

LaunchEnv read_launch_env(const EnvLookup& env, std::optional<double> configured_timeout_s) {
  LaunchEnv le;
  if (configured_timeout_s) le.options.timeout_s = *configured_timeout_s;
  le.options.timeout_s = env_seconds(env, "ZT_COMM_TIMEOUT_S", le.options.timeout_s);
  le.options.rendezvous_timeout_s =
      env_seconds(env, "ZT_RENDEZVOUS_TIMEOUT_S", le.options.rendezvous_timeout_s);
  le.options.chunk_elements = static_cast<size_t>(env_int(
      env, "ZT_COMM_CHUNK_ELEMENTS", static_cast<int64_t>(le.options.chunk_elements), 1, 1 << 28));
  if (env("OMPI_COMM_WORLD_SIZE") || env("PMIX_RANK")) {
    le.launcher = Launcher::kMpi;
    return le;
  }
  TcpRendezvous& t = le.tcp;
  std::string source;  // the variable that made this a TCP job, for the messages below
  const char* slurm_tasks = env("SLURM_NTASKS");
  if (!env("WORLD_SIZE") && env("SLURM_PROCID") && slurm_tasks && *slurm_tasks) {
    // srun, one task per rank: Slurm's variables give rank and sizes.
    const int64_t world = env_int(env, "SLURM_NTASKS", 1, 1, 1 << 20);
    if (world == 1) {
      env_int(env, "SLURM_PROCID", 0, 0, 0);  // the one task is task 0
      return le;
    }
    source = fmt::format("SLURM_NTASKS={}", world);
    t.world_size = static_cast<int>(world);
    t.rank = static_cast<int>(env_int(env, "SLURM_PROCID", 0, 0, world - 1));
    std::optional<int64_t> local;
    if (const char* per_node = env("SLURM_TASKS_PER_NODE"); per_node && *per_node)
      local = slurm_tasks_on_node(per_node, env_int(env, "SLURM_NODEID", 0, 0, 1 << 20));
    t.local_world_size = static_cast<int>(std::min<int64_t>(local.value_or(world), world));
    t.local_rank = static_cast<int>(env_int(env, "SLURM_LOCALID", 0, 0, t.local_world_size - 1));
  } else {
    const int64_t world = env_int(env, "WORLD_SIZE", 1, 1, 1 << 20);
    if (world == 1) {
      // One process: it runs alone, but a RANK other than 0 says the environment is not what the
      // launcher meant (torch.distributed refuses rank 1 of a world of 1).
      env_int(env, "RANK", 0, 0, 0);
      return le;
    }
    source = fmt::format("WORLD_SIZE={}", world);
    t.world_size = static_cast<int>(world);
    if (!env("RANK")) fail("environment variable RANK is not set (WORLD_SIZE={} is)", world);
    t.rank = static_cast<int>(env_int(env, "RANK", 0, 0, world - 1));
    t.local_world_size = static_cast<int>(env_int(env, "LOCAL_WORLD_SIZE", world, 1, world));
    t.local_rank = static_cast<int>(env_int(env, "LOCAL_RANK", t.rank, 0, t.local_world_size - 1));
  }
  const char* addr = env("MASTER_ADDR");
  if (!addr || !*addr)
    fail(
        "environment variable MASTER_ADDR is not set (needed with {}: the address of rank 0's "
        "host)",
        source);
  t.master_addr = addr;
  if (!env("MASTER_PORT"))
    fail("environment variable MASTER_PORT is not set (needed with {})", source);
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
