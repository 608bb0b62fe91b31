// Comm semantics in one process: SingleComm, the rank-order fold, and the TCP Comm with W ranks as
// W threads (each its own sockets) — bitwise results, chunking, mismatch and rendezvous errors.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "core/error.h"
#include "dist/comm.h"
#include "dist/comm_tcp.h"
#include "dist/local_launch.h"
#include "dist/selftest.h"

namespace zt::dist {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(FoldRankOrder, AddsLeftToRightInRankOrder) {
  // 1e8 + 1 - 1e8 in fp32: rank order gives 0, other orders give 1.
  const float a[] = {1e8f, 2.0f}, b[] = {1.0f, 3.0f}, c[] = {-1e8f, 4.0f};
  const float* parts[] = {a, b, c};
  float out[2];
  fold_rank_order(parts, 3, 2, out, false);
  EXPECT_EQ(out[0], (1e8f + 1.0f) + -1e8f);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 9.0f);
  float acc[2] = {0.5f, -9.0f};
  fold_rank_order(parts, 3, 2, acc, true);
  EXPECT_EQ(acc[0], 0.5f);
  EXPECT_EQ(acc[1], 0.0f);
  // out may alias parts[0].
  float x[] = {1.0f, 2.0f};
  const float* alias[] = {x, b};
  fold_rank_order(alias, 2, 2, x, false);
  EXPECT_EQ(x[0], 2.0f);
  EXPECT_EQ(x[1], 5.0f);
}

TEST(SingleComm, CollectivesAreCopies) {
  SingleComm c;
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.world_size(), 1);
  EXPECT_EQ(c.backend(), "single");
  std::vector<float> send = {1.5f, -2.0f, 3.25f}, out(3, 7.0f);
  c.reduce_scatter_sum(send.data(), out.data(), 3);
  EXPECT_EQ(out, send);
  c.reduce_scatter_sum(send.data(), out.data(), 3, true);
  EXPECT_EQ(out, (std::vector<float>{3.0f, -4.0f, 6.5f}));
  std::vector<uint16_t> b = {1, 2}, bo(2);
  c.all_gather_bf16(b.data(), bo.data(), 2);
  EXPECT_EQ(bo, b);
  double d[] = {2.5, -1.0};
  c.all_reduce(d, 2, ReduceOp::kSum);
  EXPECT_EQ(d[1], -1.0);
  EXPECT_EQ(c.sum_in_rank_order(0.125), 0.125);
  EXPECT_EQ(c.all_gather_f64(4.0), std::vector<double>{4.0});
  EXPECT_EQ(run_comm_selftest(c, 77), selftest_expected_digest(1, 77));
}

TEST(SingleComm, RejectsBadArguments) {
  SingleComm c;
  std::vector<float> buf(8);
  try {
    c.reduce_scatter_sum(buf.data(), buf.data() + 2, 4);
    FAIL() << "overlap accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overlaps the send buffer"), std::string::npos)
        << e.what();
  }
  try {
    c.broadcast(buf.data(), 4, 1);
    FAIL() << "root 1 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("root rank 1"), std::string::npos) << e.what();
  }
}

TEST(Selftest, DataMakesTheSumOrderVisible) {
  // The self-test data must catch a transport that adds in another order: for W=4 the rank-order
  // sum differs from the reverse-order sum on many elements.
  int differ = 0;
  for (size_t i = 0; i < 2000; ++i) {
    float fwd = selftest_value(0, i);
    for (int q = 1; q < 4; ++q) fwd += selftest_value(q, i);
    float rev = selftest_value(3, i);
    for (int q = 2; q >= 0; --q) rev += selftest_value(q, i);
    differ += bits(fwd) != bits(rev);
  }
  EXPECT_GT(differ, 100);
  EXPECT_NE(selftest_expected_digest(2, 100), selftest_expected_digest(4, 50));
}

// Runs body(comm) on W TCP ranks (threads); returns each rank's exception message ("" if none).
std::vector<std::string> on_tcp_ranks(int w, const CommOptions& opt,
                                      const std::function<void(Comm&)>& body) {
  const int port = pick_free_port("127.0.0.1");
  std::vector<std::string> errors(static_cast<size_t>(w));
  std::vector<std::thread> threads;
  for (int r = 0; r < w; ++r) {
    threads.emplace_back([&, r] {
      try {
        TcpRendezvous where{r, w, r, w, "127.0.0.1", port};
        auto comm = make_tcp_comm(where, opt);
        body(*comm);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

TEST(TcpComm, SelftestIsBitwiseForTwoThreeAndFourRanks) {
  for (int w : {2, 3, 4}) {
    CommOptions opt;
    opt.chunk_elements = 300;  // several reduce-scatter rounds, a ragged last one
    opt.rendezvous_timeout_s = 30;
    std::vector<uint64_t> digest(static_cast<size_t>(w));
    const auto errors = on_tcp_ranks(w, opt, [&](Comm& c) {
      EXPECT_EQ(c.backend(), "tcp");
      EXPECT_EQ(c.world_size(), w);
      digest[static_cast<size_t>(c.rank())] = run_comm_selftest(c, 1001);
    });
    for (int r = 0; r < w; ++r) {
      EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "W=" << w << " rank " << r;
      EXPECT_EQ(digest[static_cast<size_t>(r)], selftest_expected_digest(w, 1001)) << "W=" << w;
    }
  }
}

TEST(TcpComm, LargeReduceScatterEqualsSingleProcessRankOrderSum) {
  const int w = 3;
  const size_t n = 3 * 200000;  // ~2.4 MB per rank: socket buffers fill, both directions at once
  std::vector<std::vector<float>> shards(w);
  const auto errors = on_tcp_ranks(w, CommOptions{}, [&](Comm& c) {
    std::vector<float> send(n);
    for (size_t i = 0; i < n; ++i) send[i] = selftest_value(c.rank(), i);
    std::vector<float> out(n / w);
    c.reduce_scatter_sum(send.data(), out.data(), n);
    shards[static_cast<size_t>(c.rank())] = out;
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    const float want = (selftest_value(0, i) + selftest_value(1, i)) + selftest_value(2, i);
    wrong += bits(shards[i / (n / w)][i % (n / w)]) != bits(want);
  }
  EXPECT_EQ(wrong, 0u);
}

TEST(TcpComm, DifferentCollectivesOnTwoRanksFailWithAMessage) {
  CommOptions opt;
  opt.timeout_s = 20;
  const auto errors = on_tcp_ranks(2, opt, [](Comm& c) {
    std::vector<float> buf(8), out(16);
    if (c.rank() == 0)
      c.all_gather(buf.data(), out.data(), 8);
    else
      c.barrier();
  });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("collective mismatch"), std::string::npos) << e;
  }
  EXPECT_NE(errors[0].find("this rank is in all_gather of 32 bytes"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[0].find("rank 1 is in barrier"), std::string::npos) << errors[0];
}

TEST(TcpComm, PeerThatLeavesMakesTheOthersFail) {
  // Rank 2 destroys its Comm (closing its sockets) instead of joining the barrier.
  const auto errors = on_tcp_ranks(3, CommOptions{}, [](Comm& c) {
    if (c.rank() != 2) c.barrier();
  });
  EXPECT_EQ(errors[2], "");
  // Whoever notices first names rank 2; the other survivor may instead see that rank fail and
  // close first (a race in the mesh), so it names rank 2 or the other survivor.
  int named_two = 0;
  for (int r : {0, 1}) {
    const std::string& e = errors[static_cast<size_t>(r)];
    const std::string other = "rank " + std::to_string(1 - r);
    EXPECT_TRUE(e.find("rank 2") != std::string::npos || e.find(other) != std::string::npos) << e;
    EXPECT_NE(e.find("exited or failed"), std::string::npos) << e;
    named_two += e.find("rank 2") != std::string::npos;
  }
  EXPECT_GE(named_two, 1);
}

TEST(TcpComm, LostPeerNamesARankWhoseProcessLeft) {
  // The device Comm's watchdog asks lost_peer() from another thread; here rank 1 leaves (its Comm
  // closes its sockets) after rank 0 saw everyone alive.
  int before = -2, after = -2, single = -2;
  const auto errors = on_tcp_ranks(2, CommOptions{}, [&](Comm& c) {
    if (c.rank() == 0) {
      before = c.lost_peer();
      c.barrier();
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while ((after = c.lost_peer()) < 0 && std::chrono::steady_clock::now() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } else {
      c.barrier();
    }
  });
  SingleComm s;
  single = s.lost_peer();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(before, -1);
  EXPECT_EQ(after, 1);
  EXPECT_EQ(single, -1);
}

TEST(TcpComm, StalledPeerTripsTheProgressTimeout) {
  // Rank 1 is alive but does not reach the barrier (it sleeps past rank 0's timeout).
  CommOptions opt;
  opt.timeout_s = 0.3;
  const auto errors = on_tcp_ranks(2, opt, [](Comm& c) {
    if (c.rank() == 1)
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    else
      c.barrier();
  });
  EXPECT_NE(errors[0].find("barrier of 0 bytes (call #1) made no progress for 0.3 s waiting on "
                           "rank(s) 1 (trainer.ddp_timeout / ZT_COMM_TIMEOUT_S)"),
            std::string::npos)
      << errors[0];
}

TEST(TcpComm, HugeTimeoutIsHonoured) {
  // trainer.ddp_timeout: 180000000 (LlamaFactory's): a peer 1.5 s late is waited for, not timed out
  // by an overflowed deadline.
  CommOptions opt;
  opt.timeout_s = 180000000.0;
  const auto errors = on_tcp_ranks(2, opt, [](Comm& c) {
    if (c.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    c.barrier();
    double x = c.rank() + 1.0;
    c.all_reduce(&x, 1, ReduceOp::kSum);
    if (x != 3.0) throw std::runtime_error("all_reduce gave " + std::to_string(x));
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(TcpComm, RendezvousRejectsDuplicateRanksAndTimesOut) {
  const int port = pick_free_port("127.0.0.1");
  CommOptions opt;
  opt.rendezvous_timeout_s = 10;
  std::vector<std::string> errors(3);
  std::vector<std::thread> ts;
  const int ranks[] = {0, 1, 1};
  for (int i = 0; i < 3; ++i) {
    ts.emplace_back([&, i] {
      try {
        make_tcp_comm(TcpRendezvous{ranks[i], 3, ranks[i], 3, "127.0.0.1", port}, opt);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(i)] = e.what();
      }
    });
  }
  for (auto& t : ts) t.join();
  for (const auto& e : errors)
    EXPECT_NE(e.find("two processes joined with RANK=1"), std::string::npos) << e;

  // Rank 1 of 2 alone: nobody listens on the master port.
  opt.rendezvous_timeout_s = 0.5;
  try {
    make_tcp_comm(TcpRendezvous{1, 2, 1, 2, "127.0.0.1", pick_free_port("127.0.0.1")}, opt);
    FAIL() << "rendezvous without rank 0 succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot connect to 127.0.0.1:"), std::string::npos)
        << e.what();
  }
  // Rank 0 of 2 alone: nobody joins.
  try {
    make_tcp_comm(TcpRendezvous{0, 2, 0, 2, "127.0.0.1", pick_free_port("127.0.0.1")}, opt);
    FAIL() << "rendezvous without rank 1 succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("timed out waiting for 1 more rank(s)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace zt::dist
