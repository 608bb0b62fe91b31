// The MPI Comm (OpenMPI): for jobs started by `mpirun` (or srun with PMIx). Bulk data moves with
// point-to-point messages and MPI_Allgather / MPI_Bcast; the reduction is ours (rank order, fp32),
// never MPI_Reduce_scatter's, whose summation order is implementation-defined.
//
// Every call is non-blocking underneath (MPI_Isend/Irecv, MPI_Iallgather, MPI_Ibcast, MPI_Ibarrier)
// and waited for by polling, so a rank that stalls is caught: a call not complete after
// options.timeout_s (trainer.ddp_timeout / ZT_COMM_TIMEOUT_S) throws zt::Error naming it and, for
// the reduce-scatter's messages, the ranks not heard from.
//
// Lifetime: MPI is initialised by the first make_mpi_comm (MPI_THREAD_SERIALIZED: one thread at a
// time may call the Comm) and finalised when that Comm is destroyed normally. When it is destroyed
// during exception unwinding, MPI_Finalize is skipped — it can wait for ranks still blocked in a
// collective — and the process is expected to exit non-zero, whereupon mpirun ends every rank.
// So on an error, let the exception leave the scope that owns the Comm (or exit non-zero); do not
// catch it, destroy the Comm and carry on.
#pragma once

#include <memory>

#include "dist/comm.h"
#include "dist/comm_tcp.h"

namespace zt::dist {

// The MPI_COMM_WORLD job as a Comm (its own duplicate communicator; local rank from
// MPI_COMM_TYPE_SHARED). Throws zt::Error if MPI cannot be initialised or was finalised already.
std::unique_ptr<Comm> make_mpi_comm(const CommOptions& options = {});

}  // namespace zt::dist
