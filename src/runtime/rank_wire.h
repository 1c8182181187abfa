// The rank wire format (runtime.md §6): what ranks exchange so that every rank runs the same
// scheduler on the same state. Per step:
//
//   Sync (rank 0's step header, one message to every other rank: Communicator::send_header),
//   at the start of a step that has news or rows (none while rank 0 idles):
//     stop u8, request count u32, cancel count u32,
//     per request: every field of GenerationRequest (encode order in rank_wire.cc),
//     per cancel: id i64, reason u8.
//     The requests take the next ids in order on every rank.
//   Step deltas (all_gather_rows), after sampling and after drafting: per planned request the
//     records of the one rank it comes from (its sampler: sampled tokens and logprobs; its
//     owner: DSpark drafts; its sampler: MTP drafts). Each rank sends the records of its requests
//     in plan order; the gather concatenates them rank after rank (GatherLayout).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "base/status.h"
#include "runtime/request.h"
#include "runtime/scheduler.h"

namespace dsv4 {

class Communicator;

using Cancel = std::pair<int64_t, FinishReason>;

// A decoded sync message.
struct RankSync {
  bool stop = false;
  std::vector<GenerationRequest> requests;
  std::vector<Cancel> cancels;
};

// Appends the sync message to out (cleared first).
void encode_sync(bool stop, std::span<const GenerationRequest> requests, std::span<const Cancel> cancels,
                 std::vector<uint8_t>& out);
// The message of encode_sync; an error when the bytes end early or run past it.
Status decode_sync(std::span<const uint8_t> bytes, RankSync& out);

// One TokenLogprob on the wire (fixed size, for all_gather_rows): token -1 marks an empty record.
struct LogprobRecord {
  int32_t token = -1;
  float logprob = 0;
  int32_t n_top = 0;
  int32_t top_id[kMaxTopLogprobs] = {};
  float top_lp[kMaxTopLogprobs] = {};
};
LogprobRecord encode_logprob(const TokenLogprob& lp);
// Into lp (no allocation while lp.top holds kMaxTopLogprobs).
void decode_logprob(const LogprobRecord& r, TokenLogprob& lp);

// Where each planned request's records sit in an all-gather: add() the records of every request
// in plan order (from its source rank), gather with rows(), then start_reading() and next() in the
// same order.
class GatherLayout {
 public:
  explicit GatherLayout(int n_ranks) : rows_(static_cast<size_t>(n_ranks)), next_(rows_.size()) {}
  void clear();
  void add(int source, int64_t records) { rows_[static_cast<size_t>(source)] += records; }
  std::span<const int64_t> rows() const { return rows_; }  // [ranks] records per rank
  void start_reading();
  // The gathered index of the source's next `records` records.
  int64_t next(int source, int64_t records);

 private:
  std::vector<int64_t> rows_;  // [ranks] records each rank sends
  std::vector<int64_t> next_;  // [ranks] each rank's next unread record in the gathered buffer
};

// The wire of one engine: its buffers, sized once; every call is a no-op on one rank
// (world nullptr).
class RankWire {
 public:
  // max_values: int32 entries per exchange (planned requests × entries each); max_records:
  // logprob records per step.
  RankWire(Communicator* world, int n_ranks, int rank, int64_t max_values, int64_t max_records);
  bool active() const { return world_ != nullptr; }

  // Rank 0's stop flag, requests and cancels to every rank. out: rank 0 gets stop only (the
  // requests and cancels are its own); the other ranks the decoded message.
  Status sync(bool stop, std::span<const GenerationRequest> requests, std::span<const Cancel> cancels,
              RankSync& out);
  // values [planned, per_request]: the entries of the requests this rank is the source of are
  // set; after the call every entry is its source's.
  enum class Source { kSampler, kOwner };
  Status exchange(const std::vector<PlannedRows>& plan, Source source, int32_t* values, int per_request);
  // Each sampler's logprobs of its requests to every rank: logprobs [planned, S] (S records per
  // request that asks for logprobs), prompt_logprobs [planned] (one record per row of a request
  // that asks for prompt logprobs; rows without one are empty records).
  Status exchange_logprobs(const std::vector<PlannedRows>& plan, int32_t S, TokenLogprob* logprobs,
                           std::vector<TokenLogprob>* prompt_logprobs);

 private:
  Communicator* world_;
  int rank_;
  GatherLayout layout_;
  std::vector<uint8_t> sync_bytes_;
  std::vector<int32_t> own_values_, gathered_values_;      // [max_values]
  std::vector<LogprobRecord> own_records_, gathered_records_;  // [max_records]
};

}  // namespace dsv4
