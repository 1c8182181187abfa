// The rank wire format (runtime/rank_wire.h): a sync message carries every field of every request
// (each filled with a non-default value) and the cancels; truncated or overlong messages are
// refused; logprob records round-trip; the step deltas put each request's entries from its
// source rank, on two ranks simulated in one process.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <tuple>
#include <utility>

#include "parallel/communicator.h"
#include "runtime/rank_wire.h"

namespace dsv4 {
namespace {

// Every field, named (the binding stops compiling when GenerationRequest gains a field: then
// the codec and this test take it too).
auto fields(const GenerationRequest& g) {
  const auto& [prompt, sampling, adjust, max_tokens, stop_at_eos, stop_ids, stop_strings, logprobs,
               prompt_logprobs, timeout_seconds, n, constraint, cache_salt] = g;
  const auto& [temperature, top_p, seed, top_k, min_p] = sampling;
  const auto& [presence, frequency, repetition, logit_bias] = adjust;
  // compiled: each rank's own
  const auto& [json_schema, tool_calls, strict, whitespace_flexible, start_after, text_kind, text, field, compiled] =
      constraint;
  return std::tie(prompt, temperature, top_p, seed, top_k, min_p, presence, frequency, repetition, logit_bias,
                  max_tokens, stop_at_eos, stop_ids, stop_strings, logprobs, prompt_logprobs, timeout_seconds, n,
                  json_schema, tool_calls, strict, whitespace_flexible, start_after, text_kind, text, field, cache_salt);
}

template <class Tuple, size_t... I>
void expect_all_differ(const Tuple& a, const Tuple& b, std::index_sequence<I...>) {
  auto differ = [](const auto& x, const auto& y, size_t i) { EXPECT_NE(x, y) << "field " << i << " keeps its default"; };
  (differ(std::get<I>(a), std::get<I>(b), I), ...);
}

GenerationRequest filled(int k) {
  GenerationRequest g;
  g.prompt = {3 + k, 1, 4, 1, 5};
  g.sampling = {0.7f + static_cast<float>(k), 0.25f, 0x1234'5678'9abc'def0ull + static_cast<uint64_t>(k),
                40 + k, 0.05f + 0.01f * static_cast<float>(k)};
  g.adjust = {0.5f + 0.125f * static_cast<float>(k), -1.25f, 1.5f, {{2, -100.0f}, {7 + k, 3.5f}}};
  g.max_tokens = 77 + k;
  g.stop_at_eos = false;
  g.stop_ids = {9, 2 + k};
  g.stop_strings = {"\n\n", "", "end" + std::to_string(k)};
  g.logprobs = 5 + k;
  g.prompt_logprobs = true;
  g.timeout_seconds = 12.5 + k;
  g.n = 3 + k;
  g.constraint = {R"({"type": "object", "properties": {"k": {"const": )" + std::to_string(k) + "}}}",
                  R"([{"name": "f)" + std::to_string(k) + R"(", "parameters": {}}])", false, true, 500 + k,
                  TextConstraint::kGbnf, "root ::= \"" + std::to_string(k) + "\"", "guided_grammar " + std::to_string(k),
                  nullptr};
  g.cache_salt = "tenant " + std::to_string(k);
  return g;
}

TEST(RankWire, SyncCarriesEveryRequestField) {
  const std::vector<GenerationRequest> reqs = {filled(0), filled(1), GenerationRequest{}};
  expect_all_differ(fields(reqs[0]), fields(GenerationRequest{}),
                    std::make_index_sequence<std::tuple_size_v<decltype(fields(reqs[0]))>>());
  const std::vector<Cancel> cancels = {{7, FinishReason::kCancelled}, {int64_t{1} << 40, FinishReason::kTimeout},
                                       {0, FinishReason::kStop}};
  for (bool stop : {false, true}) {
    std::vector<uint8_t> bytes = {1, 2, 3};  // cleared by encode
    encode_sync(stop, reqs, cancels, bytes);
    RankSync got;
    got.requests.resize(5);  // replaced by decode
    ASSERT_TRUE(decode_sync(bytes, got).ok());
    EXPECT_EQ(got.stop, stop);
    ASSERT_EQ(got.requests.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(fields(got.requests[i]), fields(reqs[i])) << i;
    EXPECT_EQ(got.cancels, cancels);
  }
  std::vector<uint8_t> bytes;
  encode_sync(false, {}, {}, bytes);
  RankSync empty;
  ASSERT_TRUE(decode_sync(bytes, empty).ok());
  EXPECT_TRUE(empty.requests.empty() && empty.cancels.empty() && !empty.stop);
}

TEST(RankWire, SyncRefusesTruncatedAndOverlongMessages) {
  std::vector<uint8_t> bytes;
  encode_sync(false, std::vector<GenerationRequest>{filled(0)}, std::vector<Cancel>{{3, FinishReason::kError}}, bytes);
  RankSync got;
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(decode_sync(std::span<const uint8_t>(bytes.data(), n), got).ok()) << n << " bytes";
  bytes.push_back(0);
  EXPECT_FALSE(decode_sync(bytes, got).ok());
}

// A constraint kind byte past the last kind is a malformed message, not a kind.
TEST(RankWire, SyncRefusesAnUnknownTextKind) {
  GenerationRequest g = filled(0);
  g.constraint.text = "\x7f\x7e";  // a marker after the kind byte, found in the bytes below
  g.constraint.field = "";
  g.cache_salt = "";
  std::vector<uint8_t> bytes;
  encode_sync(false, std::vector<GenerationRequest>{g}, {}, bytes);
  RankSync got;
  ASSERT_TRUE(decode_sync(bytes, got).ok());
  const std::string marker = "\x7f\x7e";
  const auto at = std::search(bytes.begin(), bytes.end(), marker.begin(), marker.end());
  ASSERT_NE(at, bytes.end());
  // kind byte, then the text's count (4 bytes, Writer::put_count) before the marker
  uint8_t& kind = *(at - 1 - static_cast<std::ptrdiff_t>(sizeof(uint32_t)));
  ASSERT_EQ(kind, static_cast<uint8_t>(TextConstraint::kGbnf));
  kind = static_cast<uint8_t>(TextConstraint::kGbnf) + 1;
  EXPECT_FALSE(decode_sync(bytes, got).ok());
}

TEST(RankWire, LogprobRecordsRoundTrip) {
  TokenLogprob full;
  full.token = 42;
  full.logprob = -1.25f;
  for (int k = 0; k < kMaxTopLogprobs; ++k) full.top.push_back({100 - k, -0.5f * static_cast<float>(k)});
  TokenLogprob none;
  none.token = 3;
  none.logprob = -7.0f;
  for (const TokenLogprob& lp : {full, none}) {
    TokenLogprob got;
    got.top = {{1, 1.0f}};  // replaced
    decode_logprob(encode_logprob(lp), got);
    EXPECT_EQ(got.token, lp.token);
    EXPECT_EQ(got.logprob, lp.logprob);
    EXPECT_EQ(got.top, lp.top);
  }
  EXPECT_EQ(LogprobRecord{}.token, -1) << "the empty record";
}

// Two ranks in one process: all_gather_rows keeps each rank's last contribution and hands out
// everyone's; broadcasts and step headers queue from rank 0 to rank 1. Each call is made by rank 0, then rank 1,
// then (gathers) both again, which then see both contributions.
struct Wires {
  std::map<int64_t, std::vector<uint8_t>> sent[2];  // per rank, by row width (one kind of exchange each)
  std::deque<std::vector<uint8_t>> broadcasts;
};

class TwoRanks final : public Communicator {
 public:
  TwoRanks(Wires& w, int rank) : w_(w), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  Status all_gather_rows(const void* send, std::span<const int64_t> rows, int64_t row_bytes, void* recv) override {
    const auto* s = static_cast<const uint8_t*>(send);
    w_.sent[rank_][row_bytes].assign(s, s + rows[rank_] * row_bytes);
    auto* out = static_cast<uint8_t*>(recv);
    for (int r = 0; r < 2; ++r) {
      const size_t n = static_cast<size_t>(rows[r] * row_bytes);
      const std::vector<uint8_t>& theirs = w_.sent[r][row_bytes];
      if (theirs.size() == n && n > 0) std::memcpy(out, theirs.data(), n);
      out += n;
    }
    return Status();
  }
  Status all_to_all_rows(const void*, std::span<const int64_t>, void*, std::span<const int64_t>, int64_t) override {
    return Status::error("not used");
  }
  Status broadcast(void* data, int64_t bytes, int root) override {
    EXPECT_EQ(root, 0);
    auto* d = static_cast<uint8_t*>(data);
    if (rank_ == 0) {
      w_.broadcasts.emplace_back(d, d + bytes);
    } else {
      EXPECT_EQ(w_.broadcasts.front().size(), static_cast<size_t>(bytes));
      std::memcpy(d, w_.broadcasts.front().data(), static_cast<size_t>(bytes));
      w_.broadcasts.pop_front();
    }
    return Status();
  }
  Status barrier() override { return Status(); }
  Result<std::unique_ptr<Communicator>> split(int, int) override { return Status::error("not used"); }
  [[noreturn]] void abort(int code) override { std::exit(code); }
  Status send_header(std::span<const uint8_t> bytes) override {
    EXPECT_EQ(rank_, 0);
    w_.broadcasts.emplace_back(bytes.begin(), bytes.end());
    return Status();
  }
  Status receive_header(std::vector<uint8_t>& bytes) override {
    EXPECT_EQ(rank_, 1);
    bytes = w_.broadcasts.front();
    w_.broadcasts.pop_front();
    return Status();
  }
  void report_failure(const std::string&) override {}
  Status job_status() const override { return Status(); }

 private:
  Wires& w_;
  int rank_;
};

TEST(RankWire, SyncFromRankZero) {
  Wires w;
  TwoRanks c0(w, 0), c1(w, 1);
  RankWire r0(&c0, 2, 0, 8, 8), r1(&c1, 2, 1, 8, 8);
  const std::vector<GenerationRequest> reqs = {filled(3)};
  const std::vector<Cancel> cancels = {{2, FinishReason::kCancelled}};
  RankSync got0, got1;
  ASSERT_TRUE(r0.sync(true, reqs, cancels, got0).ok());
  ASSERT_TRUE(r1.sync(false, {}, {}, got1).ok());
  EXPECT_TRUE(got0.stop && got0.requests.empty()) << "rank 0 keeps its own requests";
  EXPECT_TRUE(got1.stop);
  ASSERT_EQ(got1.requests.size(), 1u);
  EXPECT_EQ(fields(got1.requests[0]), fields(reqs[0]));
  EXPECT_EQ(got1.cancels, cancels);
}

TEST(RankWire, StepDeltasComeFromEachRequestsSource) {
  // Four requests: samplers 0 1 1 0, owners 1 0 1 0; requests 1 and 2 ask for logprobs, 2 and 3
  // for prompt logprobs (3 rows each).
  std::vector<GenerationRequest> reqs(4);
  reqs[1].logprobs = 2;
  reqs[2].logprobs = 0;
  reqs[2].prompt_logprobs = reqs[3].prompt_logprobs = true;
  std::vector<PlannedRows> plan(4);
  const int sampler[4] = {0, 1, 1, 0}, owner[4] = {1, 0, 1, 0};
  for (int i = 0; i < 4; ++i) {
    plan[i].n = 3;
    plan[i].sampler = sampler[i];
    plan[i].owner = owner[i];
    plan[i].request = &reqs[static_cast<size_t>(i)];
    plan[i].sampling = &reqs[static_cast<size_t>(i)].sampling;
    plan[i].prompt_logprobs = reqs[static_cast<size_t>(i)].prompt_logprobs;
  }
  constexpr int S = 2;
  auto value = [](int i, int j) { return 100 * i + j; };
  auto logprob = [](int i, int j) {
    TokenLogprob lp;
    lp.token = 10 * i + j;
    lp.logprob = -static_cast<float>(i + j);
    for (int k = 0; k < j; ++k) lp.top.push_back({k, -1.0f * k});
    return lp;
  };
  for (RankWire::Source by : {RankWire::Source::kSampler, RankWire::Source::kOwner}) {
    Wires w;
    TwoRanks c[2] = {{w, 0}, {w, 1}};
    std::vector<RankWire> wire;
    wire.reserve(2);
    for (int r = 0; r < 2; ++r) wire.emplace_back(&c[r], 2, r, 4 * S, 4 * S + 12);
    for (int round = 0; round < 2; ++round)
      for (int r = 0; r < 2; ++r) {
        std::vector<int32_t> values(4 * S, -1);
        std::vector<TokenLogprob> lps(4 * S);
        std::vector<std::vector<TokenLogprob>> prompt_lps(4);
        for (int i = 0; i < 4; ++i) {
          if ((by == RankWire::Source::kOwner ? owner[i] : sampler[i]) == r)
            for (int j = 0; j < S; ++j) values[i * S + j] = value(i, j);
          if (sampler[i] != r) continue;
          for (int j = 0; j < S; ++j) lps[i * S + j] = logprob(i, j);
          if (reqs[i].prompt_logprobs) prompt_lps[i] = {logprob(i, 5), logprob(i, 6)};  // 2 of 3 rows
        }
        ASSERT_TRUE(wire[r].exchange(plan, by, values.data(), S).ok());
        ASSERT_TRUE(wire[r].exchange_logprobs(plan, S, lps.data(), prompt_lps.data()).ok());
        if (round == 0) continue;
        for (int i = 0; i < 4; ++i) {
          for (int j = 0; j < S; ++j) EXPECT_EQ(values[i * S + j], value(i, j)) << "rank " << r << " request " << i;
          if (reqs[i].logprobs >= 0)
            for (int j = 0; j < S; ++j) {
              EXPECT_EQ(lps[i * S + j].token, logprob(i, j).token) << "rank " << r << " request " << i;
              EXPECT_EQ(lps[i * S + j].top, logprob(i, j).top);
            }
          if (!reqs[i].prompt_logprobs) continue;
          ASSERT_EQ(prompt_lps[i].size(), 2u) << "rank " << r << " request " << i;
          EXPECT_EQ(prompt_lps[i][1].token, logprob(i, 6).token);
          EXPECT_EQ(prompt_lps[i][1].top, logprob(i, 6).top);
        }
      }
  }
}

TEST(RankWire, GatherLayoutPlacesRanksInOrder) {
  GatherLayout layout(3);
  layout.add(2, 4);
  layout.add(0, 1);
  layout.add(2, 1);
  layout.add(1, 2);
  EXPECT_EQ(std::vector<int64_t>(layout.rows().begin(), layout.rows().end()), (std::vector<int64_t>{1, 2, 5}));
  layout.start_reading();
  EXPECT_EQ(layout.next(2, 4), 3);
  EXPECT_EQ(layout.next(0, 1), 0);
  EXPECT_EQ(layout.next(2, 1), 7);
  EXPECT_EQ(layout.next(1, 2), 1);
  layout.clear();
  EXPECT_EQ(std::vector<int64_t>(layout.rows().begin(), layout.rows().end()), (std::vector<int64_t>{0, 0, 0}));
}

}  // namespace
}  // namespace dsv4
