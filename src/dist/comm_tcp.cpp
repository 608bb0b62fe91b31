// TCP Comm: rendezvous, full mesh, collectives (see comm_tcp.h).
#include "dist/comm_tcp.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "dist/tcp_socket.h"

namespace zt::dist {

namespace {

using tcp::Fd;
using tcp::Header;
using tcp::Transfer;

constexpr char kHelloMagic[4] = {'Z', 'T', 'R', '1'};
constexpr char kMeshMagic[4] = {'Z', 'T', 'M', '1'};

// Rendezvous messages: fixed-size, host byte order (all ranks run the same binary).
struct Hello {
  char magic[4];
  int32_t rank;
  int32_t world_size;
  int32_t port;
  char address[64];
};
struct TableEntry {
  int32_t port;
  char address[64];
};
struct TableHead {
  int32_t ok;
  char reason[256];
};
struct MeshHello {
  char magic[4];
  int32_t rank;
};

enum Op : uint16_t { kReduceScatter = 1, kAllGather = 2, kBroadcast = 3, kBarrier = 4 };

std::string describe(const Header& h) {
  const char* name = h.op == kReduceScatter ? "reduce_scatter"
                     : h.op == kAllGather   ? "all_gather"
                     : h.op == kBroadcast   ? "broadcast"
                     : h.op == kBarrier     ? "barrier"
                                            : "an unknown collective";
  if (h.op == kBroadcast)
    return fmt::format("broadcast of {} bytes from rank {} (call #{})", h.bytes, h.arg, h.seq);
  if (h.op == kReduceScatter)
    return fmt::format("reduce_scatter round of {} bytes per peer (call #{})", h.bytes, h.seq);
  return fmt::format("{} of {} bytes (call #{})", name, h.bytes, h.seq);
}

void copy_address(char (&dst)[64], const std::string& src) {
  if (src.size() >= sizeof(dst)) fail("tcp: address '{}' is too long", src);
  std::memset(dst, 0, sizeof(dst));
  std::memcpy(dst, src.data(), src.size());
}

std::string read_address(const char (&src)[64]) { return std::string(src, strnlen(src, 64)); }

class TcpComm final : public Comm {
 public:
  TcpComm(const TcpRendezvous& where, const CommOptions& options) : options_(options) {
    set_identity(where.rank, where.world_size, where.local_rank, where.local_world_size);
    if (options_.chunk_elements == 0) options_.chunk_elements = 1;
    peers_.resize(static_cast<size_t>(where.world_size));
    if (where.world_size > 1) connect_mesh(where);
  }

  std::string_view backend() const override { return "tcp"; }

  int lost_peer() const override {
    for (size_t q = 0; q < peers_.size(); ++q)
      if (peers_[q].valid() && tcp::peer_closed(peers_[q].get())) return static_cast<int>(q);
    return -1;
  }

 protected:
  void do_reduce_scatter_sum(const float* send, float* out, size_t n, bool accumulate,
                             Stream) override {
    const int w = world_size(), r = rank();
    const size_t shard = n / static_cast<size_t>(w);
    const size_t chunk = std::min(shard, options_.chunk_elements);
    scratch_.resize(static_cast<size_t>(w) * chunk);
    std::vector<const float*> parts(static_cast<size_t>(w));
    for (size_t off = 0; off < shard; off += chunk) {
      const size_t len = std::min(chunk, shard - off);
      const Header h = next_header(kReduceScatter, len * sizeof(float), 0);  // per-peer round
      std::vector<Transfer> ts;
      for (int k = 1; k < w; ++k) {
        const int q = (r + k) % w;
        Transfer t = link(q, h);
        t.send = reinterpret_cast<const char*>(send + static_cast<size_t>(q) * shard + off);
        t.send_len = len * sizeof(float);
        t.recv = reinterpret_cast<char*>(scratch_.data() + static_cast<size_t>(q) * chunk);
        t.recv_len = len * sizeof(float);
        ts.push_back(t);
        parts[static_cast<size_t>(q)] = scratch_.data() + static_cast<size_t>(q) * chunk;
      }
      parts[static_cast<size_t>(r)] = send + static_cast<size_t>(r) * shard + off;
      tcp::exchange(ts, options_.timeout_s, describe);
      fold_rank_order(parts.data(), w, len, out + off, accumulate);
    }
  }

  void do_all_gather_bytes(const void* send, void* out, size_t bytes, Stream) override {
    const int w = world_size(), r = rank();
    char* o = static_cast<char*>(out);
    char* mine = o + static_cast<size_t>(r) * bytes;
    if (send != mine) std::memcpy(mine, send, bytes);
    if (w == 1) return;
    const Header h = next_header(kAllGather, bytes, 0);
    std::vector<Transfer> ts;
    for (int k = 1; k < w; ++k) {
      const int q = (r + k) % w;
      Transfer t = link(q, h);
      t.send = mine;
      t.send_len = bytes;
      t.recv = o + static_cast<size_t>(q) * bytes;
      t.recv_len = bytes;
      ts.push_back(t);
    }
    tcp::exchange(ts, options_.timeout_s, describe);
  }

  void do_broadcast(void* data, size_t bytes, int root, Stream) override {
    const int w = world_size(), r = rank();
    const Header h = next_header(kBroadcast, bytes, static_cast<uint16_t>(root));
    std::vector<Transfer> ts;
    if (r == root) {
      for (int k = 1; k < w; ++k) {
        Transfer t = link((r + k) % w, h);
        t.send = static_cast<const char*>(data);
        t.send_len = bytes;
        ts.push_back(t);
      }
    } else {
      Transfer t = link(root, h);
      t.recv = static_cast<char*>(data);
      t.recv_len = bytes;
      ts.push_back(t);
    }
    tcp::exchange(ts, options_.timeout_s, describe);
  }

  void do_barrier() override {
    const Header h = next_header(kBarrier, 0, 0);
    std::vector<Transfer> ts;
    for (int k = 1; k < world_size(); ++k) ts.push_back(link((rank() + k) % world_size(), h));
    tcp::exchange(ts, options_.timeout_s, describe);
  }

 private:
  Header next_header(uint16_t op, uint64_t bytes, uint16_t arg) {
    Header h;
    h.op = op;
    h.arg = arg;
    h.bytes = bytes;
    h.seq = seq_++;
    return h;
  }

  Transfer link(int peer, const Header& h) {
    Transfer t;
    t.peer = peer;
    t.fd = peers_[static_cast<size_t>(peer)].get();
    t.hdr = h;
    return t;
  }

  void connect_mesh(const TcpRendezvous& where) {
    const int w = world_size(), r = rank();
    const double deadline = tcp::now_s() + options_.rendezvous_timeout_s;
    const std::string master =
        fmt::format("the master {}:{} (rank 0)", where.master_addr, where.master_port);
    if (where.master_port <= 0 || where.master_port > 65535)
      fail("MASTER_PORT {} (expected 1..65535)", where.master_port);
    std::vector<TableEntry> table(static_cast<size_t>(w));
    if (r == 0) {
      Fd listener = tcp::listen_on(where.master_addr, where.master_port, nullptr);
      std::vector<Fd> pending;
      std::vector<Hello> hellos;
      for (int k = 1; k < w; ++k) {
        Fd c = tcp::accept_one(
            listener.get(), deadline,
            fmt::format("{} more rank(s) on {}:{} (rendezvous timeout {:g} s)", w - k,
                        where.master_addr, where.master_port, options_.rendezvous_timeout_s));
        Hello h{};
        tcp::recv_all(c.get(), &h, sizeof(h), deadline, "a rank joining the rendezvous");
        hellos.push_back(h);
        pending.push_back(std::move(c));
      }
      std::string reason;
      for (const Hello& h : hellos) {
        if (std::memcmp(h.magic, kHelloMagic, 4) != 0) {
          reason = "a process that is not a zerotune rank connected to the master port";
        } else if (h.world_size != w) {
          reason = fmt::format("rank {} has WORLD_SIZE={}, rank 0 has WORLD_SIZE={}", h.rank,
                               h.world_size, w);
        } else if (h.rank < 1 || h.rank >= w) {
          reason = fmt::format("a process joined with RANK={} (expected 1..{})", h.rank, w - 1);
        } else if (peers_[static_cast<size_t>(h.rank)].valid() || h.rank == 0) {
          reason = fmt::format("two processes joined with RANK={}", h.rank);
        }
        if (!reason.empty()) break;
        const size_t idx = static_cast<size_t>(h.rank);
        table[idx].port = h.port;
        std::memcpy(table[idx].address, h.address, sizeof(h.address));
        peers_[idx] = std::move(pending[static_cast<size_t>(&h - hellos.data())]);
      }
      TableHead head{};
      head.ok = reason.empty() ? 1 : 0;
      std::snprintf(head.reason, sizeof(head.reason), "%s", reason.c_str());
      auto send_table = [&](int fd) {
        tcp::send_all(fd, &head, sizeof(head), deadline, "a joining rank");
        if (head.ok)
          tcp::send_all(fd, table.data(), table.size() * sizeof(TableEntry), deadline,
                        "a joining rank");
      };
      for (Fd& p : peers_)
        if (p.valid()) send_table(p.get());
      for (Fd& p : pending)
        if (p.valid()) send_table(p.get());
      if (!head.ok) fail("tcp rendezvous refused: {}", reason);
    } else {
      int port = 0;
      Fd to_master = tcp::connect_to(where.master_addr, where.master_port, deadline);
      const std::string my_address = tcp::local_address(to_master.get());
      Fd listener = tcp::listen_on(my_address, 0, &port);
      Hello h{};
      std::memcpy(h.magic, kHelloMagic, 4);
      h.rank = r;
      h.world_size = w;
      h.port = port;
      copy_address(h.address, my_address);
      tcp::send_all(to_master.get(), &h, sizeof(h), deadline, master);
      TableHead head{};
      tcp::recv_all(to_master.get(), &head, sizeof(head), deadline, master);
      if (!head.ok)
        fail("tcp rendezvous refused by rank 0: {}",
             std::string(head.reason, strnlen(head.reason, 256)));
      tcp::recv_all(to_master.get(), table.data(), table.size() * sizeof(TableEntry), deadline,
                    master);
      peers_[0] = std::move(to_master);
      for (int j = 1; j < r; ++j) {
        const TableEntry& e = table[static_cast<size_t>(j)];
        Fd c = tcp::connect_to(read_address(e.address), e.port, deadline);
        MeshHello mh{};
        std::memcpy(mh.magic, kMeshMagic, 4);
        mh.rank = r;
        tcp::send_all(c.get(), &mh, sizeof(mh), deadline, fmt::format("rank {}", j));
        peers_[static_cast<size_t>(j)] = std::move(c);
      }
      for (int k = r + 1; k < w; ++k) {
        Fd c = tcp::accept_one(listener.get(), deadline,
                               fmt::format("{} higher rank(s) to connect", w - k));
        MeshHello mh{};
        tcp::recv_all(c.get(), &mh, sizeof(mh), deadline, "a higher rank");
        if (std::memcmp(mh.magic, kMeshMagic, 4) != 0 || mh.rank <= r || mh.rank >= w ||
            peers_[static_cast<size_t>(mh.rank)].valid())
          fail("tcp rendezvous: unexpected connection on rank {}'s port (claims rank {})", r,
               mh.rank);
        peers_[static_cast<size_t>(mh.rank)] = std::move(c);
      }
    }
    for (Fd& p : peers_)
      if (p.valid()) tcp::tune_link(p.get());
    do_barrier();  // every link works before anyone starts
    log::debug("tcp comm: rank {}/{} connected", r, w);
  }

  CommOptions options_;
  std::vector<Fd> peers_;  // [world_size], by rank; peers_[rank()] unused
  std::vector<float> scratch_;
  uint64_t seq_ = 0;
};

}  // namespace

std::unique_ptr<Comm> make_tcp_comm(const TcpRendezvous& where, const CommOptions& options) {
  return std::make_unique<TcpComm>(where, options);
}

}  // namespace zt::dist
