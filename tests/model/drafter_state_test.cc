// DrafterState on its own (no model): commits checked against their slots and gathered in
// order, this rank's only; ring rows written at slot p mod W and marked committed, a started
// slot's rings emptied; propose rounds checked (γ, batch, owner, token, anchor, context
// committed, naming the missing position); the block rows a round becomes; the key lists
// (ring rows in ring-slot order after the wrap, then the block keys, read whole by every
// row); the Markov chain programmed as in dspark.md §6 (W1 = identity, W2 a map f: drafts
// f(x0), f(f(x0)), ...) with its decisions logged.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/drafter_state.h"
#include "model/sequence_state.h"

namespace dsv4 {
namespace {

constexpr int64_t kVocab = 5;
constexpr int64_t kDh = 72;
constexpr int32_t kMaxSeqs = 3;  // slots per rank

Limits test_limits() {
  Limits l;
  l.max_batch = 2;
  l.max_seqs = kMaxSeqs;
  l.max_chunk = 8;
  l.max_rows = 8;
  l.max_context = 64;
  l.page_tokens = 16;
  return l;
}

DrafterState::Dims test_dims() {
  DrafterState::Dims d;
  d.n_stages = 2;
  d.features = 4;
  d.hidden = 2;
  d.window = 4;
  d.kv = KvRowFormat{static_cast<int>(kDh), 8};
  d.markov_rank = kVocab;
  d.vocab = kVocab;
  d.noise_token = 4;
  return d;
}

// A key row whose rope part (stored as bf16 as is) names (stage, position or block row).
std::vector<bf16> key_row(int stage, int64_t tag) {
  std::vector<bf16> v(static_cast<size_t>(kDh), bf16::from_float(0.0f));
  v[kDh - 1] = bf16::from_float(static_cast<float>(stage * 100 + tag));
  return v;
}

std::vector<uint8_t> packed(const KvRowFormat& f, const std::vector<bf16>& v) {
  std::vector<uint8_t> row(static_cast<size_t>(f.bytes()));
  kv_pack_row(f, v.data(), row.data());
  return row;
}

struct DrafterFixture {
  Limits limits = test_limits();
  std::unique_ptr<SequenceState> seqs;
  DrafterState drafter{test_dims(), test_limits(), 2};
  std::vector<bf16> features = std::vector<bf16>(64 * 4);

  DrafterFixture() {
    auto r = SequenceState::create(limits, 8, 4, test_dims().kv.bytes());
    EXPECT_TRUE(r.ok()) << r.message();
    seqs = std::move(*r);
    EXPECT_TRUE(seqs->start(0).ok());
    EXPECT_TRUE(seqs->start(1).ok());
    for (size_t i = 0; i < features.size(); ++i) features[i] = bf16::from_float(static_cast<float>(i % 97));
  }
  // Commits positions [p0, p0 + n) of seq on rank 0: every stage's key rows tagged by position.
  void commit(int32_t seq, int64_t p0, int32_t n) {
    const DsparkCommit c{seq, p0, n, features.data() + p0 * 4, 0};
    Result<int64_t> rows = drafter.gather_commits({&c, 1}, 0, *seqs);
    ASSERT_TRUE(rows.ok()) << rows.message();
    for (int st = 0; st < 2; ++st) {
      std::vector<bf16> kv;
      for (int32_t i = 0; i < n; ++i) {
        const std::vector<bf16> r = key_row(st, p0 + i);
        kv.insert(kv.end(), r.begin(), r.end());
      }
      drafter.write_ring_rows({&c, 1}, 0, st, kv.data(), kDh);
    }
    drafter.mark_committed({&c, 1}, 0);
  }
};

TEST(DrafterState, CommitsAreCheckedGatheredAndMarked) {
  DrafterFixture f;
  DrafterState& d = f.drafter;
  const DsparkCommit inactive{2, 0, 1, f.features.data(), 0};
  EXPECT_NE(d.gather_commits({&inactive, 1}, 0, *f.seqs).message().find("slot 2 is not active"), std::string::npos);
  const DsparkCommit below{0, -1, 2, f.features.data(), 0};
  EXPECT_NE(d.gather_commits({&below, 1}, 0, *f.seqs).message().find("its start is 0"), std::string::npos);
  const DsparkCommit many[2] = {{0, 0, 5, f.features.data(), 0}, {1, 0, 4, f.features.data(), 0}};
  EXPECT_NE(d.gather_commits(many, 0, *f.seqs).message().find("exceed max_rows = 8"), std::string::npos);
  Result<int64_t> other = d.gather_commits(many, 1, *f.seqs);  // rank 1 owns none of them
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(*other, 0);

  const DsparkCommit two[2] = {{0, 0, 3, f.features.data(), 0}, {1, 5, 2, f.features.data() + 40, 0}};
  Result<int64_t> rows = d.gather_commits(two, 0, *f.seqs);
  ASSERT_TRUE(rows.ok()) << rows.message();
  ASSERT_EQ(*rows, 5);
  EXPECT_EQ(std::vector<int64_t>(d.pos.begin(), d.pos.begin() + 5), (std::vector<int64_t>{0, 1, 2, 5, 6}));
  EXPECT_EQ(std::memcmp(d.feat.data(), f.features.data(), 3 * 4 * sizeof(bf16)), 0);
  EXPECT_EQ(std::memcmp(d.feat.data() + 12, f.features.data() + 40, 2 * 4 * sizeof(bf16)), 0);
  EXPECT_FALSE(d.holds(0, 0));  // gathered, not yet committed
  d.mark_committed(two, 0);
  for (int64_t p : {0, 1, 2}) EXPECT_TRUE(d.holds(0, p));
  EXPECT_FALSE(d.holds(0, 3));
  EXPECT_TRUE(d.holds(1, 5) && d.holds(1, 6));
  EXPECT_FALSE(d.holds(1, 1));  // ring slot 1 holds position 5
  d.reset(0);
  EXPECT_FALSE(d.holds(0, 0));
  EXPECT_TRUE(d.holds(1, 5));
}

TEST(DrafterState, RoundsAreCheckedAndNeedTheirContext) {
  DrafterFixture f;
  DrafterState& d = f.drafter;
  f.commit(0, 0, 6);  // ring slots hold positions 4, 5, 2, 3
  const DsparkRound ok{0, 5, 1, 0};
  Result<int64_t> n = d.check_rounds({&ok, 1}, 3, 0, 0, *f.seqs);
  ASSERT_TRUE(n.ok()) << n.message();
  EXPECT_EQ(*n, 1);
  auto error = [&](DsparkRound r, int gamma = 3, int world = 0) {
    return d.check_rounds({&r, 1}, gamma, 0, world, *f.seqs).message();
  };
  EXPECT_NE(error(ok, 0).find("gamma = 0"), std::string::npos);
  EXPECT_NE(error(ok, 65).find("gamma = 65"), std::string::npos);
  EXPECT_NE(error(DsparkRound{0, 5, 1, 2}, 3, 2).find("owner rank 2"), std::string::npos);
  EXPECT_NE(error(DsparkRound{2, 5, 1, 0}).find("slot 2 is not active"), std::string::npos);
  EXPECT_NE(error(DsparkRound{0, 5, 5, 0}).find("anchor token 5"), std::string::npos);
  EXPECT_NE(error(DsparkRound{0, -1, 1, 0}).find("anchor -1 is negative"), std::string::npos);
  EXPECT_NE(error(DsparkRound{0, 6, 1, 0}).find("position 6"), std::string::npos);
  EXPECT_NE(error(DsparkRound{0, 1, 1, 0}).find("position 0"), std::string::npos);  // overwritten by 4
  const DsparkRound three[3] = {ok, ok, ok};
  EXPECT_NE(d.check_rounds(three, 3, 0, 0, *f.seqs).message().find("max_batch = 2"), std::string::npos);
  // Another rank's round is checked but not this rank's: its context need not be here. Its
  // slot is its owner's (rank 1's slot 1: job slot max_seqs + 1).
  EXPECT_NE(error(DsparkRound{1, 9, 2, 1}, 3, 2).find("outside its owner's slots"), std::string::npos);
  const DsparkRound theirs[2] = {{kMaxSeqs + 1, 9, 2, 1}, ok};
  n = d.check_rounds(theirs, 2, 0, 2, *f.seqs);
  ASSERT_TRUE(n.ok()) << n.message();
  EXPECT_EQ(*n, 1);
}

TEST(DrafterState, BlockRowsAndKeyListsInRingSlotOrder) {
  DrafterFixture f;
  DrafterState& d = f.drafter;
  f.commit(0, 0, 6);
  f.commit(1, 0, 2);
  const DsparkRound rounds[2] = {{1, 1, 3, 0}, {0, 5, 2, 0}};
  const int gamma = 3;
  Result<int64_t> n = d.check_rounds(rounds, gamma, 0, 0, *f.seqs);
  ASSERT_TRUE(n.ok()) << n.message();
  StepCapacity cap;
  cap.max_batch = 2;
  cap.max_rows = 8;
  cap.max_request_rows = 8;
  cap.max_seqs = 3;
  cap.max_context = 64;
  cap.window = 4;
  cap.vocab_size = kVocab;
  StepMetadata md(cap);
  d.plan_block_rows(rounds, *n, gamma, md);
  ASSERT_EQ(md.T, 6);
  EXPECT_EQ(md.B, 2);
  for (int64_t t = 0; t < 6; ++t) {
    const DsparkRound& q = rounds[t / gamma];
    EXPECT_EQ(md.row_seq[t], q.seq);
    EXPECT_EQ(md.pos[t], q.anchor + 1 + t % gamma);
    EXPECT_EQ(md.token[t], t % gamma == 0 ? q.x0 : 4);
  }
  std::vector<bf16> block;  // the block keys of stage 1: tag 50 + row
  for (int64_t t = 0; t < 6; ++t) {
    const std::vector<bf16> r = key_row(1, 50 + t);
    block.insert(block.end(), r.begin(), r.end());
  }
  d.build_key_lists(md, gamma, 1, block.data(), kDh);
  const kernels::AttnList list = d.key_list();
  const kernels::PackedAttnKeys keys = d.keys();
  const KvRowFormat fmt = test_dims().kv;
  // Round 0 (slot 1, anchor 1): context 0, 1; round 1 (slot 0, anchor 5): ring slots 4, 5, 2, 3.
  const std::vector<std::vector<int64_t>> context = {{0, 1}, {4, 5, 2, 3}};
  for (int64_t t = 0; t < 6; ++t) {
    const int64_t r = t / gamma, n_c = static_cast<int64_t>(context[r].size());
    ASSERT_EQ(list.len[t], n_c + gamma) << t;
    for (int64_t j = 0; j < n_c + gamma; ++j) {
      EXPECT_EQ(list.entries[t * list.stride + j], j);
      const std::vector<bf16> want = j < n_c ? key_row(1, context[r][j]) : key_row(1, 50 + r * gamma + j - n_c);
      EXPECT_EQ(std::memcmp(keys.win[t].row(j), packed(fmt, want).data(), static_cast<size_t>(fmt.bytes())), 0)
          << "row " << t << " key " << j;
    }
  }
}

TEST(DrafterState, MarkovChainFollowsTheProgrammedMapAndLogs) {
  DrafterFixture f;
  DrafterState& d = f.drafter;
  f.commit(0, 0, 3);
  f.commit(1, 0, 3);
  // W1 = identity, W2 = the map f(x) = (x + 2) mod V: β(prev) is one-hot at f(prev).
  std::vector<bf16> w1(kVocab * kVocab, bf16::from_float(0.0f)), w2(kVocab * kVocab, bf16::from_float(0.0f));
  for (int64_t x = 0; x < kVocab; ++x) {
    w1[x * kVocab + x] = bf16::from_float(1.0f);
    w2[((x + 2) % kVocab) * kVocab + x] = bf16::from_float(1.0f);
  }
  const DsparkRound rounds[2] = {{0, 2, 1, 0}, {1, 2, 4, 0}};
  const int gamma = 3;
  Result<int64_t> n = d.check_rounds(rounds, gamma, 0, 0, *f.seqs);
  ASSERT_TRUE(n.ok()) << n.message();
  std::vector<float> lambda(2 * gamma * kVocab, 0.0f);
  std::vector<int32_t> drafts(2 * gamma, -1);
  std::vector<Decision> log;
  ThreadPool pool(2);
  d.markov_chain(pool, w1.data(), w2.data(), rounds, *n, gamma, lambda.data(), drafts.data(), {nullptr, &log});
  EXPECT_EQ(drafts, (std::vector<int32_t>{3, 0, 2, 1, 3, 0}));
  EXPECT_EQ(lambda[0 * kVocab + 3], 1.0f);  // λ += β in place
  ASSERT_EQ(log.size(), 6u);  // block row by block row, rounds in order
  EXPECT_TRUE(log[1].dspark && log[1].draft);
  EXPECT_EQ(log[1].seq, 1);
  EXPECT_EQ(log[1].row, 0);
  EXPECT_EQ(log[1].selected, std::vector<int32_t>{1});
  EXPECT_EQ(log[4].row, 2);
  EXPECT_EQ(log[4].selected, std::vector<int32_t>{2});
}

}  // namespace
}  // namespace dsv4
