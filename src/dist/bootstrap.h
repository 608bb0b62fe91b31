// How a process finds its Comm (DESIGN §7): under `mpirun` the MPI Comm; with the torchrun /
// accelerate / `zerotune launch` variables the TCP Comm; otherwise a single process.
//
// Environment read:
//   MPI job:  OMPI_COMM_WORLD_SIZE (OpenMPI's mpirun) or PMIX_RANK (srun --mpi=pmix) present.
//   TCP job:  WORLD_SIZE > 1 with RANK, MASTER_ADDR, MASTER_PORT (required) and LOCAL_RANK,
//             LOCAL_WORLD_SIZE (default: RANK and WORLD_SIZE, i.e. one host) — torchrun's,
//             accelerate's and `zerotune launch`'s (also across nodes: --nnodes);
//             or, when WORLD_SIZE is unset, Slurm's (srun, one task per rank): SLURM_NTASKS > 1,
//             SLURM_PROCID (rank), SLURM_LOCALID (local rank, default 0), the local count from
//             SLURM_TASKS_PER_NODE ("2(x3),1") at SLURM_NODEID, with MASTER_ADDR/MASTER_PORT
//             (required: Slurm names no rendezvous; e.g. the job's first host and a free port).
//   Knobs:    ZT_COMM_TIMEOUT_S (TCP collective progress timeout, how long a device collective
//             may stay incomplete, and how long an MPI one may wait; default: the job's
//             configured timeout, trainer.ddp_timeout for `train`, else 1800 — the variable
//             overrides the config),
//             ZT_RENDEZVOUS_TIMEOUT_S (default 300), ZT_COMM_CHUNK_ELEMENTS (reduce-scatter chunk
//             per peer, default 1048576).
// When both kinds of variables are present, MPI wins.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "dist/comm.h"
#include "dist/comm_tcp.h"

namespace zt::dist {

enum class Launcher { kSingle, kMpi, kTcp };

// What the environment says about this process's place in the job.
struct LaunchEnv {
  Launcher launcher = Launcher::kSingle;
  TcpRendezvous tcp;    // rank, sizes and master address (kTcp; rank 0 of 1 otherwise)
  CommOptions options;  // from the ZT_* knobs
};

// Looks up an environment variable: nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

// Reads the variables above through `env`. configured_timeout_s: the collective timeout the job's
// config sets (trainer.ddp_timeout, seconds > 0), used unless ZT_COMM_TIMEOUT_S is set. Throws
// zt::Error naming the variable, its value and what was expected (non-integer, RANK outside
// [0, WORLD_SIZE), missing MASTER_ADDR/MASTER_PORT, …).
LaunchEnv read_launch_env(const EnvLookup& env,
                          std::optional<double> configured_timeout_s = std::nullopt);

// The Comm for `where` (MPI, TCP rendezvous, or SingleComm).
std::unique_ptr<Comm> make_comm(const LaunchEnv& where);

// make_comm(read_launch_env(std::getenv)).
std::unique_ptr<Comm> make_comm_from_environment();

// Whether this build has the device Comm (CUDA + NCCL found at configure time).
bool have_device_comm();

// The device Comm (dist/nccl/comm_nccl.h) over `host`: collectives on CUDA device memory of
// `device` (pass host->local_rank(), i.e. LOCAL_RANK), NCCL for world size > 1, copies and the
// rank-order add kernel alone. max_bucket_elems: the largest reduce_scatter_sum n (fp32 elements;
// the ZeRO engine's W × max group shard) — its scratch is allocated here, once. options: the
// ZT_COMM_TIMEOUT_S value (timeout_s; read_launch_env(...).options). Throws zt::Error when the
// build has no NCCL, there is no such device, or the NCCL set-up fails (naming the call, a vanished
// peer, or the timeout).
std::unique_ptr<Comm> make_device_comm(std::unique_ptr<Comm> host, int device,
                                       size_t max_bucket_elems, const CommOptions& options = {});

}  // namespace zt::dist
