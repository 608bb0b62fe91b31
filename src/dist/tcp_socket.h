// TCP plumbing of the TCP Comm (comm_tcp.cpp): sockets with deadlines, and `exchange`, which moves
// several framed messages to and from several peers at once over non-blocking sockets.
//
// Failure detection: a peer process that exits or crashes closes its sockets, so the kernel reports
// EOF / ECONNRESET at once; a peer *host* that vanishes is caught by TCP keep-alive (probes after
// 10 s idle, every 5 s, 4 misses) and TCP_USER_TIMEOUT (30 s of unacknowledged data) — about 30 s.
// Either way the waiting rank throws zt::Error naming the peer rank. A peer that is alive but never
// reaches the collective is caught by the per-collective progress timeout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace zt::dist::tcp {

// Owns a file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

// Seconds on a monotonic clock.
double now_s();

// A non-blocking listening socket on host:port (port 0 picks a free port; *bound_port receives the
// port). Throws zt::Error naming the address and the system error (e.g. the port is in use).
Fd listen_on(const std::string& host, int port, int* bound_port);

// Connects to host:port, retrying while the listener is not up yet (refused / unreachable) until
// `deadline` (now_s() scale). Throws zt::Error naming the address when the deadline passes.
Fd connect_to(const std::string& host, int port, double deadline);

// Accepts one connection on a listening socket, waiting until `deadline`. Throws on timeout.
Fd accept_one(int listen_fd, double deadline, const std::string& what);

// Blocking (poll-based) send / receive of exactly `n` bytes on a non-blocking socket, until
// `deadline`. `what` names the peer in error messages ("rank 3", "the master 10.0.0.1:29500").
void send_all(int fd, const void* data, size_t n, double deadline, const std::string& what);
void recv_all(int fd, void* data, size_t n, double deadline, const std::string& what);

// Numeric address of the local end of a connected socket ("10.1.2.3", "::1").
std::string local_address(int fd);

// Sets TCP_NODELAY, keep-alive and TCP_USER_TIMEOUT on a connected peer link (see the file
// comment).
void tune_link(int fd);

// True when the other end of a connected socket has closed it or the connection failed (FIN or
// RST received, or a keep-alive / user timeout): poll(2) for POLLRDHUP | POLLHUP | POLLERR with a
// zero timeout. Reads nothing, so it may run on another thread while the socket is in use.
bool peer_closed(int fd);

// Frame header of every collective message; both ends of a link must agree on it.
struct Header {
  uint32_t magic = 0x5a54434dU;  // "ZTCM"
  uint16_t op = 0;               // collective kind (comm_tcp.cpp)
  uint16_t arg = 0;              // broadcast root
  uint64_t bytes = 0;            // size of the collective's buffer
  uint64_t seq = 0;              // number of this collective call on this Comm
  bool operator==(const Header&) const = default;
};

// One link's part of an exchange: send hdr then `send_len` bytes of `send`; receive a header (which
// must equal hdr) then `recv_len` bytes into `recv`. Either payload may be empty.
struct Transfer {
  int peer = -1;  // rank, for messages
  int fd = -1;
  Header hdr;
  const char* send = nullptr;
  size_t send_len = 0;
  char* recv = nullptr;
  size_t recv_len = 0;
  // Progress, bytes of header + payload (set by exchange()).
  size_t sent = 0;
  size_t received = 0;
  Header hdr_in;
};

// Runs all transfers to completion concurrently. Throws zt::Error naming the peer when a
// connection closes or fails, when a received header differs (`describe` renders a header for that
// message: "all_gather of 4096 bytes, call #12"), or when no byte moves for `timeout_s` seconds.
void exchange(std::span<Transfer> transfers, double timeout_s,
              std::string (*describe)(const Header&));

}  // namespace zt::dist::tcp
