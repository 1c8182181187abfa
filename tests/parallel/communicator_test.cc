// Communicator collectives (parallel/communicator.h) and the fixed-order reduce-scatter
// (parallel/fixed_order.h), run as 1 process and under mpirun with 2 and 4 ranks
// (tests/CMakeLists.txt). Every rank checks its own results against a single-process
// computation of the same data: unequal row counts, ranks with no rows, receive tails
// poisoned before and unchanged after, byte counts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/fixed_order.h"

namespace dsv4 {

Communicator& comm();  // main.cc: MPI under mpirun, else one rank

namespace {

constexpr uint8_t kSentinel = 0xA7;

// Row i of rank r: bytes derived from (r, i), width w.
void fill_row(uint8_t* row, int r, int64_t i, int64_t w) {
  for (int64_t b = 0; b < w; ++b) row[b] = static_cast<uint8_t>((r * 131 + i * 17 + b * 7) & 0xFF);
}

std::vector<std::vector<int64_t>> row_patterns(int n) {
  std::vector<std::vector<int64_t>> p;
  p.push_back(std::vector<int64_t>(n, 3));                  // equal
  std::vector<int64_t> uneven(n);
  for (int r = 0; r < n; ++r) uneven[r] = (r * 5 + 2) % 7;  // includes 0 for some n
  p.push_back(uneven);
  std::vector<int64_t> one(n, 0);
  one[n - 1] = 1;                                           // only the last rank has a row
  p.push_back(one);
  p.push_back(std::vector<int64_t>(n, 0));                  // nobody
  return p;
}

TEST(Communicator, AllGatherRows) {
  Communicator& c = comm();
  const int n = c.size(), me = c.rank();
  for (int64_t w : {1, 12, 4096}) {
    for (const auto& rows : row_patterns(n)) {
      const int64_t total = std::accumulate(rows.begin(), rows.end(), int64_t{0});
      std::vector<uint8_t> send(static_cast<size_t>((rows[me] + 1) * w), 0xEE);
      for (int64_t i = 0; i < rows[me]; ++i) fill_row(send.data() + i * w, me, i, w);
      std::vector<uint8_t> recv(static_cast<size_t>((total + 2) * w), kSentinel);
      c.reset_bytes();
      ASSERT_TRUE(c.all_gather_rows(send.data(), rows, w, recv.data()).ok());
      std::vector<uint8_t> want(static_cast<size_t>(w));
      int64_t at = 0;
      for (int r = 0; r < n; ++r)
        for (int64_t i = 0; i < rows[r]; ++i, ++at) {
          fill_row(want.data(), r, i, w);
          ASSERT_EQ(std::memcmp(recv.data() + at * w, want.data(), static_cast<size_t>(w)), 0)
              << "rank " << me << " row " << i << " of rank " << r;
        }
      for (size_t b = static_cast<size_t>(total * w); b < recv.size(); ++b) ASSERT_EQ(recv[b], kSentinel);
      EXPECT_EQ(c.bytes().sent[static_cast<int>(Collective::kAllGather)], rows[me] * w * (n - 1));
    }
  }
}

TEST(Communicator, AllToAllRowsWithPerPeerCounts) {
  Communicator& c = comm();
  const int n = c.size(), me = c.rank();
  const int64_t w = 20;
  // Rank r sends (r + 2p) % 4 rows to peer p; row i to p is fill_row(r * 100 + p, i).
  auto count = [](int r, int p) { return static_cast<int64_t>((r + 2 * p) % 4); };
  std::vector<int64_t> send_rows(n), recv_rows(n);
  int64_t ns = 0, nr = 0;
  for (int p = 0; p < n; ++p) {
    send_rows[p] = count(me, p);
    recv_rows[p] = count(p, me);
    ns += send_rows[p];
    nr += recv_rows[p];
  }
  std::vector<uint8_t> send(static_cast<size_t>((ns + 1) * w)), recv(static_cast<size_t>((nr + 3) * w), kSentinel);
  int64_t at = 0;
  for (int p = 0; p < n; ++p)
    for (int64_t i = 0; i < send_rows[p]; ++i, ++at) fill_row(send.data() + at * w, me * 100 + p, i, w);
  c.reset_bytes();
  ASSERT_TRUE(c.all_to_all_rows(send.data(), send_rows, recv.data(), recv_rows, w).ok());
  std::vector<uint8_t> want(w);
  at = 0;
  for (int p = 0; p < n; ++p)
    for (int64_t i = 0; i < recv_rows[p]; ++i, ++at) {
      fill_row(want.data(), p * 100 + me, i, w);
      ASSERT_EQ(std::memcmp(recv.data() + at * w, want.data(), w), 0) << "from rank " << p << " row " << i;
    }
  for (size_t b = static_cast<size_t>(nr * w); b < recv.size(); ++b) ASSERT_EQ(recv[b], kSentinel);
  EXPECT_EQ(c.bytes().sent[static_cast<int>(Collective::kAllToAll)], (ns - send_rows[me]) * w);
}

TEST(Communicator, BroadcastBarrierAndBadArguments) {
  Communicator& c = comm();
  const int n = c.size(), me = c.rank();
  std::vector<int32_t> v(5, me == n - 1 ? 42 : -1);
  ASSERT_TRUE(c.broadcast(v.data(), 5 * 4, n - 1).ok());
  EXPECT_EQ(v, std::vector<int32_t>(5, 42));
  EXPECT_TRUE(c.barrier().ok());
  EXPECT_NE(c.broadcast(v.data(), 4, n).message().find("root"), std::string::npos);  // checked before any transfer
  std::vector<int64_t> wrong(n + 1, 0);
  EXPECT_NE(c.all_gather_rows(nullptr, wrong, 4, nullptr).message().find("row counts"), std::string::npos);
}

// Non-blocking: the same rows as the blocking calls, polled with test() until done or waited
// for; several outstanding at once (started in the same order on every rank).
TEST(Communicator, StartedCollectivesEqualBlocking) {
  Communicator& c = comm();
  const int n = c.size(), me = c.rank();
  const int64_t w = 24;
  for (const auto& rows : row_patterns(n)) {
    const int64_t total = std::accumulate(rows.begin(), rows.end(), int64_t{0});
    std::vector<uint8_t> send(static_cast<size_t>((rows[me] + 1) * w));
    for (int64_t i = 0; i < rows[me]; ++i) fill_row(send.data() + i * w, me, i, w);
    std::vector<uint8_t> want(static_cast<size_t>((total + 1) * w)), got(want.size(), kSentinel);
    // All-to-all: every peer gets this rank's rows (send_rows = rows[me]).
    std::vector<int64_t> to(n, rows[me]);
    std::vector<uint8_t> a2a(static_cast<size_t>(n * (rows[me] + 1) * w)), want_a2a(static_cast<size_t>((total + 1) * w)),
        got_a2a(want_a2a.size(), kSentinel);
    for (int p = 0; p < n; ++p) std::memcpy(a2a.data() + p * rows[me] * w, send.data(), rows[me] * w);
    ASSERT_TRUE(c.all_gather_rows(send.data(), rows, w, want.data()).ok());
    ASSERT_TRUE(c.all_to_all_rows(a2a.data(), to, want_a2a.data(), rows, w).ok());
    PendingCollective g, a;
    ASSERT_TRUE(c.start_all_gather_rows(send.data(), rows, w, got.data(), &g).ok());
    ASSERT_TRUE(c.start_all_to_all_rows(a2a.data(), to, got_a2a.data(), rows, w, &a).ok());
    for (int i = 0; i < 1000 && !g.test(); ++i) {
    }
    ASSERT_TRUE(g.wait().ok());
    ASSERT_TRUE(a.wait().ok());
    EXPECT_TRUE(g.done() && a.done());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), static_cast<size_t>(total * w)), 0);
    EXPECT_EQ(std::memcmp(got_a2a.data(), want_a2a.data(), static_cast<size_t>(total * w)), 0);
    EXPECT_EQ(got[total * w], kSentinel);
    EXPECT_EQ(got_a2a[total * w], kSentinel);
  }
}

// Strided send: every peer p gets this rank's rows' column block p of a [rows, n·w] layout.
TEST(Communicator, AllToAllStridedSendsColumnBlocks) {
  Communicator& c = comm();
  const int n = c.size(), me = c.rank();
  const int64_t w = 12, stride = n * w + 5;  // padded rows
  for (const auto& rows : row_patterns(n)) {
    const int64_t total = std::accumulate(rows.begin(), rows.end(), int64_t{0});
    std::vector<uint8_t> send(static_cast<size_t>((rows[me] + 1) * stride), 0xEE);
    for (int64_t i = 0; i < rows[me]; ++i)
      for (int p = 0; p < n; ++p) fill_row(send.data() + i * stride + p * w, me * 100 + p, i, w);
    std::vector<uint8_t> recv(static_cast<size_t>((total + 1) * w), kSentinel), want(static_cast<size_t>(w));
    c.reset_bytes();
    ASSERT_TRUE(c.all_to_all_strided(send.data(), rows[me], stride, w, recv.data(), rows, w).ok());
    int64_t at = 0;
    for (int p = 0; p < n; ++p)
      for (int64_t i = 0; i < rows[p]; ++i, ++at) {
        fill_row(want.data(), p * 100 + me, i, w);
        ASSERT_EQ(std::memcmp(recv.data() + at * w, want.data(), w), 0) << "from rank " << p << " row " << i;
      }
    for (size_t b = static_cast<size_t>(total * w); b < recv.size(); ++b) ASSERT_EQ(recv[b], kSentinel);
    EXPECT_EQ(c.bytes().sent[static_cast<int>(Collective::kAllToAll)], rows[me] * w * (n - 1));
  }
}

// The reduce-scatter adds every row's G partials in ascending group order on its owner:
// bit-identical to one process summing all groups, for any split of rows and groups.
// serve and chat communicate from their service thread: MPI must run at SERIALIZED or better,
// and a library that offers less is refused by name.
TEST(Communicator, MpiThreadLevel) {
  if (comm().size() > 1) {
    EXPECT_GE(mpi_thread_level(), kMpiThreadSerialized);
  }
  EXPECT_TRUE(check_mpi_thread_level(kMpiThreadSerialized).ok());
  EXPECT_TRUE(check_mpi_thread_level(kMpiThreadSerialized + 1).ok());
  const Status funneled = check_mpi_thread_level(kMpiThreadSerialized - 1);
  EXPECT_NE(funneled.message().find("MPI_THREAD_SERIALIZED"), std::string::npos) << funneled.message();
  EXPECT_NE(funneled.message().find("MPI_THREAD_FUNNELED"), std::string::npos) << funneled.message();
}

// Rank 0's step headers reach every other rank whole and in order (empty, small, large), one
// counted call per header on every rank.
TEST(Communicator, StepHeadersInOrder) {
  Communicator& c = comm();
  if (c.size() == 1) {
    std::vector<uint8_t> got;
    EXPECT_FALSE(c.receive_header(got).ok());
    return;
  }
  const std::vector<size_t> sizes{0, 9, 300000, 1};
  const int64_t calls0 = c.bytes().calls[static_cast<int>(Collective::kHeader)];
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<uint8_t> h(sizes[k]);
    for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint8_t>(k * 31 + i * 7);
    if (c.rank() == 0) {
      ASSERT_TRUE(c.send_header(h).ok());
    } else {
      std::vector<uint8_t> got(5, kSentinel);
      ASSERT_TRUE(c.receive_header(got).ok());
      EXPECT_EQ(got, h) << "header " << k;
    }
  }
  EXPECT_EQ(c.bytes().calls[static_cast<int>(Collective::kHeader)] - calls0, static_cast<int64_t>(sizes.size()));
  std::vector<uint8_t> none;
  if (c.rank() == 0) {
    EXPECT_FALSE(c.receive_header(none).ok());
  } else {
    EXPECT_FALSE(c.send_header(none).ok());
  }
  ASSERT_TRUE(c.job_status().ok());
  ASSERT_TRUE(c.barrier().ok());
}

TEST(FixedOrder, ReduceScatterEqualsOneProcessSum) {
  Communicator& c = comm();
  const int n = c.size(), me = c.rank();
  const int64_t width = 33;
  for (int64_t G : {int64_t{4}, int64_t{8}, int64_t{7}}) {
    if (G < n) continue;
    for (const auto& rows : row_patterns(n)) {
      const int64_t T = std::accumulate(rows.begin(), rows.end(), int64_t{0});
      // Global partials [G, T, width]: the same on every rank (seeded), magnitudes spread so
      // that the summation order matters.
      std::vector<float> all(static_cast<size_t>(G * T * width));
      std::mt19937 rng(7);
      for (auto& x : all) x = std::ldexp(std::normal_distribution<float>()(rng), static_cast<int>(rng() % 40) - 20);
      const GroupRange mine = groups_of_rank(G, me, n);
      const int64_t lc = mine.end - mine.begin;
      std::vector<float> local(static_cast<size_t>(lc * T * width));  // [T, local groups, width]
      for (int64_t t = 0; t < T; ++t)
        for (int64_t lg = 0; lg < lc; ++lg)
          std::memcpy(local.data() + (t * lc + lg) * width, all.data() + ((mine.begin + lg) * T + t) * width,
                      sizeof(float) * width);
      std::vector<float> out(static_cast<size_t>((rows[me] + 1) * width), -7.0f);
      std::vector<float> scratch(static_cast<size_t>(reduce_scatter_scratch_floats(G, n, T, width)),
                                 std::numeric_limits<float>::quiet_NaN());
      ASSERT_TRUE(reduce_scatter_fixed_order(c, G, local.data(), rows, width, out.data(), scratch.data()).ok());
      int64_t off = 0;
      for (int r = 0; r < me; ++r) off += rows[r];
      for (int64_t t = 0; t < rows[me]; ++t)
        for (int64_t j = 0; j < width; ++j) {
          float acc = all[(0 * T + off + t) * width + j];
          for (int64_t g = 1; g < G; ++g) acc = acc + all[(g * T + off + t) * width + j];
          ASSERT_EQ(std::memcmp(&acc, &out[t * width + j], 4), 0) << "G " << G << " row " << t << " col " << j;
        }
      for (int64_t j = 0; j < width; ++j) ASSERT_EQ(out[rows[me] * width + j], -7.0f);  // tail untouched
    }
  }
}

}  // namespace
}  // namespace dsv4
