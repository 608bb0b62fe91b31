// TCP plumbing: POSIX sockets, poll(2), non-blocking I/O with deadlines.
#include "dist/tcp_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"

namespace zt::dist::tcp {

namespace {

std::string sys_error(int err) { return std::strerror(err); }

void set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    fail("tcp: cannot make socket non-blocking: {}", sys_error(errno));
}

struct AddrList {
  addrinfo* head = nullptr;
  ~AddrList() {
    if (head) freeaddrinfo(head);
  }
};

void resolve(const std::string& host, int port, bool passive, AddrList* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string service = std::to_string(port);
  const int rc =
      getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out->head);
  if (rc != 0 || !out->head)
    fail("tcp: cannot resolve address '{}' (port {}): {}", host, port, gai_strerror(rc));
}

// Waits for `events` on fd until `deadline`; false on timeout.
bool wait_fd(int fd, short events, double deadline) {
  for (;;) {
    const double left = deadline - now_s();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int ms = static_cast<int>(std::min(left, 1.0) * 1000.0) + 1;
    const int rc = poll(&p, 1, ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) fail("tcp: poll failed: {}", sys_error(errno));
    if (rc > 0) return true;
  }
}

}  // namespace

Fd::~Fd() { reset(); }

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

Fd listen_on(const std::string& host, int port, int* bound_port) {
  AddrList addrs;
  resolve(host, port, true, &addrs);
  int last_err = 0;
  for (addrinfo* a = addrs.head; a; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) {
      last_err = errno;
      continue;
    }
    const int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), SOMAXCONN) != 0) {
      last_err = errno;
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
    const uint16_t p = ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                                : reinterpret_cast<sockaddr_in*>(&ss)->sin_port;
    if (bound_port) *bound_port = ntohs(p);
    set_nonblocking(fd.get());
    return fd;
  }
  fail("tcp: cannot listen on {}:{}: {}", host.empty() ? "*" : host, port, sys_error(last_err));
}

Fd connect_to(const std::string& host, int port, double deadline) {
  int last_err = 0;
  for (;;) {
    AddrList addrs;
    resolve(host, port, false, &addrs);
    for (addrinfo* a = addrs.head; a; a = a->ai_next) {
      Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
      if (!fd.valid()) {
        last_err = errno;
        continue;
      }
      set_nonblocking(fd.get());
      int rc = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        if (!wait_fd(fd.get(), POLLOUT, deadline)) {
          last_err = ETIMEDOUT;
          continue;
        }
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      }
      if (rc == 0) return fd;
      last_err = errno;
    }
    if (now_s() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  fail(
      "tcp: cannot connect to {}:{} before the rendezvous timeout: {} (is rank 0 running, and are "
      "MASTER_ADDR / MASTER_PORT right?)",
      host, port, sys_error(last_err));
}

Fd accept_one(int listen_fd, double deadline, const std::string& what) {
  for (;;) {
    if (!wait_fd(listen_fd, POLLIN, deadline))
      fail("tcp: timed out waiting for {} to connect", what);
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) return Fd(fd);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
      continue;
    fail("tcp: accept failed while waiting for {}: {}", what, sys_error(errno));
  }
}

void send_all(int fd, const void* data, size_t n, double deadline, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!wait_fd(fd, POLLOUT, deadline)) fail("tcp: timed out sending to {}", what);
      continue;
    }
    fail("tcp: connection to {} lost while sending: {}", what, sys_error(errno));
  }
}

void recv_all(int fd, void* data, size_t n, double deadline, const std::string& what) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k == 0) fail("tcp: {} closed the connection (it exited or failed)", what);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!wait_fd(fd, POLLIN, deadline)) fail("tcp: timed out waiting for data from {}", what);
      continue;
    }
    fail("tcp: connection to {} lost while receiving: {}", what, sys_error(errno));
  }
}

std::string local_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0)
    fail("tcp: getsockname failed: {}", sys_error(errno));
  char buf[INET6_ADDRSTRLEN] = {};
  const void* src = ss.ss_family == AF_INET6
                        ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr)
                        : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&ss)->sin_addr);
  if (!inet_ntop(ss.ss_family, src, buf, sizeof(buf)))
    fail("tcp: inet_ntop failed: {}", sys_error(errno));
  return buf;
}

void tune_link(int fd) {
  const int one = 1, idle = 10, intvl = 5, cnt = 4;
  const unsigned user_timeout_ms = 30000;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms));
}

bool peer_closed(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

namespace {

constexpr size_t kHdr = sizeof(Header);

// Sends as much of t's outgoing stream as the socket takes; true if bytes moved.
bool pump_out(Transfer& t) {
  bool moved = false;
  while (t.sent < kHdr + t.send_len) {
    const char* src =
        t.sent < kHdr ? reinterpret_cast<const char*>(&t.hdr) + t.sent : t.send + (t.sent - kHdr);
    const size_t len = t.sent < kHdr ? kHdr - t.sent : t.send_len - (t.sent - kHdr);
    const ssize_t k = ::send(t.fd, src, len, MSG_NOSIGNAL);
    if (k > 0) {
      t.sent += static_cast<size_t>(k);
      moved = true;
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (k < 0 && errno == EINTR) continue;
    fail("tcp: connection to rank {} lost while sending: {} (rank {} exited or failed)", t.peer,
         sys_error(errno), t.peer);
  }
  return moved;
}

// Receives what is available of t's incoming stream; true if bytes moved.
bool pump_in(Transfer& t, std::string (*describe)(const Header&)) {
  bool moved = false;
  while (t.received < kHdr + t.recv_len) {
    char* dst = t.received < kHdr ? reinterpret_cast<char*>(&t.hdr_in) + t.received
                                  : t.recv + (t.received - kHdr);
    const size_t len = t.received < kHdr ? kHdr - t.received : t.recv_len - (t.received - kHdr);
    const ssize_t k = ::recv(t.fd, dst, len, 0);
    if (k > 0) {
      const bool had_header = t.received >= kHdr;
      t.received += static_cast<size_t>(k);
      moved = true;
      if (!had_header && t.received >= kHdr && !(t.hdr_in == t.hdr)) {
        if (t.hdr_in.magic != t.hdr.magic)
          fail(
              "tcp: garbage from rank {} (bad frame magic {:#x}): the ranks' collectives are out "
              "of step",
              t.peer, t.hdr_in.magic);
        fail("tcp: collective mismatch: this rank is in {}, rank {} is in {}", describe(t.hdr),
             t.peer, describe(t.hdr_in));
      }
      continue;
    }
    if (k == 0)
      fail("tcp: rank {} closed its connection during a collective (it exited or failed)", t.peer);
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    if (errno == EINTR) continue;
    fail("tcp: connection to rank {} lost while receiving: {} (rank {} exited or failed)", t.peer,
         sys_error(errno), t.peer);
  }
  return moved;
}

}  // namespace

void exchange(std::span<Transfer> transfers, double timeout_s,
              std::string (*describe)(const Header&)) {
  std::vector<pollfd> fds;
  std::vector<Transfer*> owner;
  fds.reserve(transfers.size());
  owner.reserve(transfers.size());
  for (Transfer& t : transfers) {
    t.sent = 0;
    t.received = 0;
  }
  double last_progress = now_s();
  const int poll_ms = static_cast<int>(std::clamp(timeout_s * 250.0, 10.0, 1000.0));
  for (;;) {
    fds.clear();
    owner.clear();
    for (Transfer& t : transfers) {
      short ev = 0;
      if (t.sent < kHdr + t.send_len) ev |= POLLOUT;
      if (t.received < kHdr + t.recv_len) ev |= POLLIN;
      if (ev) {
        fds.push_back(pollfd{t.fd, ev, 0});
        owner.push_back(&t);
      }
    }
    if (fds.empty()) return;
    const int rc = poll(fds.data(), fds.size(), poll_ms);
    if (rc < 0 && errno != EINTR) fail("tcp: poll failed: {}", sys_error(errno));
    bool moved = false;
    for (size_t i = 0; rc > 0 && i < fds.size(); ++i) {
      const short re = fds[i].revents;
      if (!re) continue;
      Transfer& t = *owner[i];
      // Send first: our header leaves before we can fail on the peer's, so a mismatch is
      // reported as such on both sides.
      if (re & (POLLOUT | POLLHUP | POLLERR)) {
        if (t.sent < kHdr + t.send_len) moved |= pump_out(t);
      }
      if (re & (POLLIN | POLLHUP | POLLERR)) {
        if (t.received < kHdr + t.recv_len) moved |= pump_in(t, describe);
      }
    }
    const double now = now_s();
    if (moved) {
      last_progress = now;
    } else if (now - last_progress > timeout_s) {
      std::string who;
      for (Transfer* t : owner) who += fmt::format("{}{}", who.empty() ? "" : ", ", t->peer);
      fail(
          "tcp: {} made no progress for {:g} s waiting on rank(s) {} (trainer.ddp_timeout / "
          "ZT_COMM_TIMEOUT_S): a rank is stuck or never reached this collective",
          describe(transfers.front().hdr), timeout_s, who);
    }
  }
}

}  // namespace zt::dist::tcp
