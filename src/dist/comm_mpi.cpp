// MPI Comm (see comm_mpi.h).
#include "dist/comm_mpi.h"

// Only MPI's C API: without these, OpenMPI's mpi.h pulls in the C++ bindings (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <time.h>

#include <algorithm>
#include <chrono>
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

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
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
    peers_.resize(reqs.size());
    for (size_t off = 0; off < shard; off += chunk) {
      const size_t len = std::min(chunk, shard - off);
      const int count = static_cast<int>(len);
      size_t nreq = 0;
      for (int k = 1; k < w; ++k) {
        const int q = (r + k) % w;
        float* slot = scratch_.data() + static_cast<size_t>(q) * chunk;
        peers_[nreq] = q;
        check(MPI_Irecv(slot, count, MPI_FLOAT, q, kTag, comm_, &reqs[nreq++]), "MPI_Irecv");
        parts[static_cast<size_t>(q)] = slot;
      }
      for (int k = 1; k < w; ++k) {
        const int q = (r + k) % w;
        const float* src = send + static_cast<size_t>(q) * shard + off;
        peers_[nreq] = q;
        check(MPI_Isend(src, count, MPI_FLOAT, q, kTag, comm_, &reqs[nreq++]), "MPI_Isend");
      }
      wait_all(reqs.data(), nreq, "reduce_scatter", peers_.data());
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
      MPI_Request req = MPI_REQUEST_NULL;
      const int rc =
          MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, o + off, 1, strided, comm_, &req);
      if (rc == MPI_SUCCESS) wait_all(&req, 1, "all_gather", nullptr);
      MPI_Type_free(&strided);
      MPI_Type_free(&block);
      check(rc, "MPI_Iallgather");
    }
  }

  void do_broadcast(void* data, size_t bytes, int root, Stream) override {
    char* p = static_cast<char*>(data);
    for (size_t off = 0; off < bytes; off += kMaxBytes) {
      const int len = static_cast<int>(std::min(kMaxBytes, bytes - off));
      MPI_Request req = MPI_REQUEST_NULL;
      check(MPI_Ibcast(p + off, len, MPI_BYTE, root, comm_, &req), "MPI_Ibcast");
      wait_all(&req, 1, "broadcast", nullptr);
    }
  }

  void do_barrier() override {
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Ibarrier(comm_, &req), "MPI_Ibarrier");
    wait_all(&req, 1, "barrier", nullptr);
  }

 private:
  // Waits for reqs[0..n) by polling MPI_Testall (spinning a while, then pausing 50 µs between
  // polls); throws after options_.timeout_s naming `what`, and with peers (the rank of each
  // request) the ranks whose messages are still pending.
  void wait_all(MPI_Request* reqs, size_t n, const char* what, const int* peers) {
    const double t0 = now_s();
    ++calls_;
    for (int polls = 0;; ++polls) {
      int done = 0;
      check(MPI_Testall(static_cast<int>(n), reqs, &done, MPI_STATUSES_IGNORE), what);
      if (done) return;
      if (polls > 1000) {
        const timespec pause{0, 50 * 1000};
        nanosleep(&pause, nullptr);
      }
      if ((polls & 63) == 0 && now_s() - t0 > options_.timeout_s) break;
    }
    std::vector<int> pending;
    for (size_t i = 0; peers && i < n; ++i) {
      int done = 0;
      MPI_Test(&reqs[i], &done, MPI_STATUS_IGNORE);
      if (!done && std::find(pending.begin(), pending.end(), peers[i]) == pending.end())
        pending.push_back(peers[i]);
    }
    std::sort(pending.begin(), pending.end());
    std::string who;
    for (int q : pending) who += fmt::format("{}{}", who.empty() ? "" : ", ", q);
    fail(
        "mpi: {} (call #{}) on rank {} did not complete within {:g} s (trainer.ddp_timeout / "
        "ZT_COMM_TIMEOUT_S){}: a rank is stuck or never reached this collective",
        what, calls_, rank(), options_.timeout_s,
        who.empty() ? "" : fmt::format(" waiting on rank(s) {}", who));
  }

  static constexpr int kTag = 7301;
  CommOptions options_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm local_ = MPI_COMM_NULL;
  bool owns_mpi_ = false;
  std::vector<float> scratch_;
  std::vector<int> peers_;  // the peer of each reduce-scatter request
  int64_t calls_ = 0;       // waits so far, to name a call in errors
};

}  // namespace

std::unique_ptr<Comm> make_mpi_comm(const CommOptions& options) {
  return std::make_unique<MpiComm>(options);
}

}  // namespace zt::dist
