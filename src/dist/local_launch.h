// Starts the N local processes of a job and watches them (what `zerotune launch` does, like
// torchrun / `accelerate launch` on one machine).
//
// Each child gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT (the
// TCP Comm's variables, bootstrap.h; with several nodes, RANK counts across them); MPI / PMIx
// variables inherited from an outer launcher are removed so the children do not mistake themselves
// for MPI ranks. SIGINT / SIGTERM / SIGHUP sent to the launcher are forwarded to every child (a
// second one kills them); children still running `kill_grace_s` later (default 30 s, torchrun's)
// get SIGKILL, and the launcher names the last complete checkpoint rank 0 recorded
// (note_checkpoint_for_launcher). When a child fails (non-zero status or killed by a signal) the
// others get SIGTERM and SIGCONT (a stopped rank wakes to see it), then SIGKILL after
// min(kill_grace_s, 5 s): the survivors cannot write a checkpoint without the failed rank's ZeRO
// shard, so a longer wait saves nothing. Children also get SIGKILL if the launcher itself dies
// (PR_SET_PDEATHSIG). ZT_LAUNCH_ERRORS names a fresh directory (removed at the end) through which
// the children print an error all of them hit only once (cli/error_report.h) and rank 0 records its
// checkpoints.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace zt::dist {

struct LocalLaunch {
  std::string exe;                // program to run (e.g. /proc/self/exe)
  std::vector<std::string> args;  // its arguments (argv[1…])
  int num_processes = 1;          // ranks started on this node (torchrun's nproc_per_node)
  // A job over several nodes (torchrun's --nnodes / --node_rank): one launcher per node, each
  // starting num_processes ranks, global RANK = node_rank * num_processes + local rank and
  // WORLD_SIZE = nnodes * num_processes; every launcher names the same master_addr/master_port
  // (rank 0's node), which must then be given (> 0).
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;                                         // 0: a free port is picked
  std::vector<std::pair<std::string, std::string>> extra_env;  // set in every child
  double kill_grace_s = 30.0;  // SIGTERM -> SIGKILL delay after a forwarded signal, seconds
  // Start num_processes ranks even past max_local_ranks() (`zerotune launch --oversubscribe`, as
  // mpirun's): a scheduler may give each rank fewer CPUs than that bound assumes (Slurm's
  // --cpus-per-task=1 with 8 GPUs: 8 GPU ranks on 1 CPU).
  bool oversubscribe = false;
};

// The SIGTERM -> SIGKILL delay after a child failed: min(kill_grace_s, this).
inline constexpr double kFailureGraceS = 5.0;

// The most ranks one launcher starts per CPU it may run on (max_local_ranks).
inline constexpr int kMaxRanksPerCpu = 4;

// The CPUs a launcher counts: those of its affinity mask (core/cpu_affinity.h), else
// std::thread::hardware_concurrency(); at least 1.
int launch_cpu_count();

// The most ranks one launcher starts on its machine: kMaxRanksPerCpu × launch_cpu_count(). Every
// rank is a process that needs a CPU to make progress (a CPU rank computes on it; a GPU rank's
// host thread launches its kernels and drives its collectives), and each collective waits for
// every rank, so ranks beyond the CPUs only take turns on them: a few per CPU still run (tests run
// 3 ranks on 2 CPUs); more is a mistake (a typo, the total of a many-machine job) that would start
// thousands of processes. Visible GPUs are not counted: the launcher does not know the command's
// backend (a CPU-backend job may run more ranks than there are GPUs), and `train` on CUDA refuses
// more ranks per host than visible GPUs itself (train/device.h).
int max_local_ranks();

// Why max_local_ranks() is what it is and how to pass it, for messages: "4 per CPU this launcher
// may use, 2 CPUs; --oversubscribe starts more".
std::string max_local_ranks_reason();

// Runs the job to completion. Returns 0 when every child exited 0; otherwise the first failing
// child's exit status (128 + signal number when it was killed), or 128 + the signal that stopped
// the launcher. Throws zt::Error if a child cannot be started, or before starting any when
// spec.num_processes is outside [1, max_local_ranks()] (no upper bound with spec.oversubscribe).
int run_local_launch(const LocalLaunch& spec);

// Called by rank 0 of a job under `zerotune launch` (ZT_LAUNCH_ERRORS set; a no-op otherwise):
// records `checkpoint` (empty: none yet) as the last complete checkpoint in `exp_dir`, and whether
// it is the interrupt checkpoint written after a stop signal, for the launcher's message when it
// has to kill the ranks. Written atomically (temp + rename); failures are ignored (the record only
// improves a message).
void note_checkpoint_for_launcher(const std::string& exp_dir, const std::string& checkpoint,
                                  bool interrupt);

// A TCP port that was free on `addr` a moment ago (bind to port 0, read it back, close).
int pick_free_port(const std::string& addr);

}  // namespace zt::dist
