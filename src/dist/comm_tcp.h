// The TCP Comm: multi-process collectives over a full mesh of TCP connections, bootstrapped from
// the torchrun / accelerate environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT).
// It is what `zerotune launch` children and torchrun-style launchers use; needs no MPI runtime.
//
// Rendezvous: rank 0 listens on MASTER_ADDR:MASTER_PORT. Every other rank opens its own listener on
// a free port (on the interface it reaches the master through), connects to the master and sends
// {rank, world size, its address and port}. Rank 0 checks the set (every rank 1..W-1 exactly once,
// the same world size) and sends the table back (or the reason it refuses); then rank i connects to
// every rank 0 < j < i and accepts from every j > i. The links to rank 0 are the rendezvous links.
//
// Collectives: every message carries a header (collective kind, size, call number) that the
// receiver checks, so ranks calling different collectives fail with a message instead of mixing
// data. reduce_scatter_sum exchanges each rank's block with every peer (pipelined in chunks of
// CommOptions::chunk_elements) and folds the W blocks in rank order (fold_rank_order); all_gather
// and barrier exchange with every peer; broadcast is a star from the root.
//
// lost_peer() reports a peer whose connection closed (its process exited or was killed), without
// reading from the socket — the device Comm's watchdog polls it from its own thread.
#pragma once

#include <memory>
#include <string>

#include "dist/comm.h"

namespace zt::dist {

// Knobs of the multi-process Comms (environment names in bootstrap.h).
struct CommOptions {
  // Elements per peer in one reduce-scatter round (bounds the scratch to W * chunk fp32 values).
  size_t chunk_elements = size_t{1} << 20;
  // TCP: seconds a collective may wait with no byte moving before it fails.
  double timeout_s = 1800.0;
  // TCP: seconds the rendezvous may take (ranks starting late, rank 0 not up yet).
  double rendezvous_timeout_s = 300.0;
};

// Where this process sits in a torchrun-style job.
struct TcpRendezvous {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};

// Connects the job (blocks until all ranks joined or the rendezvous timeout). Throws zt::Error
// naming the address, the rank or the reason (port in use, duplicate rank, world size mismatch,
// timeout).
std::unique_ptr<Comm> make_tcp_comm(const TcpRendezvous& where, const CommOptions& options = {});

}  // namespace zt::dist
