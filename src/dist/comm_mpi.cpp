// MPI Comm (see comm_mpi.h).
#include "dist/comm_mpi.h"

// Only MPI's C API: without these, OpenMPI's mpi.h pulls in the C++ bindings (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <exception>
#include <vector>

#include "core/error.h"
#include "core/log.h"

namespace zt::dist {

namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fail("MPI {} failed: {}", what, std::string(msg, static_cast<size_t>(len)));
}

// Largest byte count one MPI call moves (counts are int).
constexpr size_t kMaxBytes = size_t{1} << 30;

class MpiComm final : public Comm {
 public:
  explicit MpiComm(const CommOptions& options) : options_(options) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) fail("MPI was finalised already; one MPI Comm per process");
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
      owns_mpi_ = true;
      if (provided < MPI_THREAD_SERIALIZED)
        log::debug("MPI provides thread level {} (< SERIALIZED); calls stay on one thread",
                   provided);
    }
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local_),
          "MPI_Comm_split_type");
    int r = 0, w = 1, lr = 0, lw = 1;
    MPI_Comm_rank(comm_, &r);
    MPI_Comm_size(comm_, &w);
    MPI_Comm_rank(local_, &lr);
    MPI_Comm_size(local_, &lw);
    set_identity(r, w, lr, lw);
    if (options_.chunk_elements == 0) options_.chunk_elements = 1;
  }

  ~MpiComm() override {
    if (std::uncaught_exceptions() > 0) return;  // see comm_mpi.h: no MPI_Finalize while failing
    MPI_Comm_free(&local_);
    MPI_Comm_free(&comm_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_mpi_ && !finalized) MPI_Finalize();
  }

  std::string_view backend() const override { return "mpi"; }

 protected:
  void do_reduce_scatter_sum(const float* send, float* out, size_t n, bool accumulate,
                             Stream) override {
    const int w = world_size(), r = rank();
    const size_t shard = n / static_cast<size_t>(w);
    const size_t chunk = std::min({shard, options_.chunk_elements, kMaxBytes / sizeof(float)});
    scratch_.resize(static_cast<size_t>(w) * chunk);
    std::vector<const float*> parts(static_cast<size_t>(w));
    std::vector<MPI_Request> reqs(2 * static_cast<size_t>(w - 1));
    for (size_t off = 0; off < shard; off += chunk) {
      const size_t len = std::min(chunk, shard - off);
      const int count = static_cast<int>(len);
      size_t nreq = 0;
      for (int k = 1; k < w; ++k) {
        const int q = (r + k) % w;
        float* slot = scratch_.data() + static_cast<size_t>(q) * chunk;
        check(MPI_Irecv(slot, count, MPI_FLOAT, q, kTag, comm_, &reqs[nreq++]), "MPI_Irecv");
        parts[static_cast<size_t>(q)] = slot;
      }
      for (int k = 1; k < w; ++k) {
        const int q = (r + k) % w;
        const float* src = send + static_cast<size_t>(q) * shard + off;
        check(MPI_Isend(src, count, MPI_FLOAT, q, kTag, comm_, &reqs[nreq++]), "MPI_Isend");
      }
      check(MPI_Waitall(static_cast<int>(nreq), reqs.data(), MPI_STATUSES_IGNORE),
            "MPI_Waitall (reduce_scatter)");
      parts[static_cast<size_t>(r)] = send + static_cast<size_t>(r) * shard + off;
      fold_rank_order(parts.data(), w, len, out + off, accumulate);
    }
  }

  void do_all_gather_bytes(const void* send, void* out, size_t bytes, Stream) override {
    char* o = static_cast<char*>(out);
    char* mine = o + static_cast<size_t>(rank()) * bytes;
    if (send != mine) std::memcpy(mine, send, bytes);
    if (world_size() == 1) return;
    const size_t chunk = std::min(bytes, std::max<size_t>(1, options_.chunk_elements * 4));
    const size_t step = std::min(chunk, kMaxBytes);
    for (size_t off = 0; off < bytes; off += step) {
      const size_t len = std::min(step, bytes - off);
      // Rank q's sub-range [off, off+len) sits at out + q*bytes + off: a block of len bytes
      // repeated with stride `bytes`.
      MPI_Datatype block = MPI_DATATYPE_NULL, strided = MPI_DATATYPE_NULL;
      check(MPI_Type_contiguous(static_cast<int>(len), MPI_BYTE, &block), "MPI_Type_contiguous");
      check(MPI_Type_create_resized(block, 0, static_cast<MPI_Aint>(bytes), &strided),
            "MPI_Type_create_resized");
      MPI_Type_commit(&strided);
      const int rc = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, o + off, 1, strided, comm_);
      MPI_Type_free(&strided);
      MPI_Type_free(&block);
      check(rc, "MPI_Allgather");
    }
  }

  void do_broadcast(void* data, size_t bytes, int root, Stream) override {
    char* p = static_cast<char*>(data);
    for (size_t off = 0; off < bytes; off += kMaxBytes) {
      const int len = static_cast<int>(std::min(kMaxBytes, bytes - off));
      check(MPI_Bcast(p + off, len, MPI_BYTE, root, comm_), "MPI_Bcast");
    }
  }

  void do_barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier"); }

 private:
  static constexpr int kTag = 7301;
  CommOptions options_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm local_ = MPI_COMM_NULL;
  bool owns_mpi_ = false;
  std::vector<float> scratch_;
};

}  // namespace

std::unique_ptr<Comm> make_mpi_comm(const CommOptions& options) {
  return std::make_unique<MpiComm>(options);
}

}  // namespace zt::dist
