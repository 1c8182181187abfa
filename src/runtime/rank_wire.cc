#include "runtime/rank_wire.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "parallel/communicator.h"

namespace dsv4 {

namespace {

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  template <class T>
  void put(const T& v) {
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  void put_bool(bool v) { put<uint8_t>(v ? 1 : 0); }
  void put_count(size_t n) { put<uint32_t>(static_cast<uint32_t>(n)); }
  void put_ids(const std::vector<int32_t>& ids) {
    put_count(ids.size());
    for (int32_t t : ids) put(t);
  }
  void put_string(const std::string& s) {
    put_count(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }

 private:
  std::vector<uint8_t>& out_;
};

// Reads what Writer wrote; past the end it reads zeros and ok() turns false.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  template <class T>
  T take() {
    T v{};
    if (!fits(sizeof(T))) return v;
    std::memcpy(&v, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  bool take_bool() { return take<uint8_t>() != 0; }
  uint32_t take_count(size_t element_bytes) {
    const uint32_t n = take<uint32_t>();
    return fits(static_cast<size_t>(n) * element_bytes) ? n : 0;
  }
  void take_ids(std::vector<int32_t>& ids) {
    ids.resize(take_count(sizeof(int32_t)));
    for (int32_t& t : ids) t = take<int32_t>();
  }
  void take_string(std::string& s) {
    const uint32_t n = take_count(1);
    s.assign(reinterpret_cast<const char*>(in_.data() + at_), n);
    at_ += n;
  }
  bool ok() const { return ok_; }
  void fail() { ok_ = false; }
  bool done() const { return at_ == in_.size(); }

 private:
  bool fits(size_t n) {
    ok_ = ok_ && n <= in_.size() - at_;
    return ok_;
  }
  std::span<const uint8_t> in_;
  size_t at_ = 0;
  bool ok_ = true;
};

// Every field of the request, in this order. The structured bindings name all of them: a field
// added to GenerationRequest or SamplingParams stops this from compiling until it is on the wire.
void put_request(Writer& w, const GenerationRequest& g) {
  const auto& [prompt, sampling, adjust, max_tokens, stop_at_eos, stop_ids, stop_strings, logprobs,
               prompt_logprobs, timeout_seconds, n, constraint, cache_salt] = g;
  const auto& [temperature, top_p, seed, top_k, min_p] = sampling;
  const auto& [presence, frequency, repetition, logit_bias] = adjust;
  // compiled: not on the wire; each follower compiles the text once (Engine::sync_ranks) with the
  // same strict and whitespace_flexible as rank 0, so its grammar is rank 0's.
  const auto& [json_schema, tool_calls, strict, whitespace_flexible, start_after, text_kind, text, field, compiled] =
      constraint;
  w.put_ids(prompt);
  w.put(temperature);
  w.put(top_p);
  w.put(seed);
  w.put(top_k);
  w.put(min_p);
  w.put(presence);
  w.put(frequency);
  w.put(repetition);
  w.put_count(logit_bias.size());
  for (const auto& [id, bias] : logit_bias) {
    w.put(id);
    w.put(bias);
  }
  w.put(max_tokens);
  w.put_bool(stop_at_eos);
  w.put_ids(stop_ids);
  w.put_count(stop_strings.size());
  for (const std::string& s : stop_strings) w.put_string(s);
  w.put(logprobs);
  w.put_bool(prompt_logprobs);
  w.put(timeout_seconds);
  w.put(n);
  w.put_string(json_schema);
  w.put_string(tool_calls);
  w.put_bool(strict);
  w.put_bool(whitespace_flexible);
  w.put(start_after);
  w.put(static_cast<uint8_t>(text_kind));
  w.put_string(text);
  w.put_string(field);
  w.put_string(cache_salt);
}

void take_request(Reader& r, GenerationRequest& g) {
  auto& [prompt, sampling, adjust, max_tokens, stop_at_eos, stop_ids, stop_strings, logprobs, prompt_logprobs,
         timeout_seconds, n, constraint, cache_salt] = g;
  auto& [temperature, top_p, seed, top_k, min_p] = sampling;
  auto& [presence, frequency, repetition, logit_bias] = adjust;
  auto& [json_schema, tool_calls, strict, whitespace_flexible, start_after, text_kind, text, field, compiled] =
      constraint;
  compiled.reset();
  r.take_ids(prompt);
  temperature = r.take<float>();
  top_p = r.take<float>();
  seed = r.take<uint64_t>();
  top_k = r.take<int32_t>();
  min_p = r.take<float>();
  presence = r.take<float>();
  frequency = r.take<float>();
  repetition = r.take<float>();
  logit_bias.resize(r.take_count(sizeof(int32_t) + sizeof(float)));
  for (auto& [id, bias] : logit_bias) {
    id = r.take<int32_t>();
    bias = r.take<float>();
  }
  max_tokens = r.take<int32_t>();
  stop_at_eos = r.take_bool();
  r.take_ids(stop_ids);
  stop_strings.resize(r.take_count(sizeof(uint32_t)));
  for (std::string& s : stop_strings) r.take_string(s);
  logprobs = r.take<int32_t>();
  prompt_logprobs = r.take_bool();
  timeout_seconds = r.take<double>();
  n = r.take<int32_t>();
  r.take_string(json_schema);
  r.take_string(tool_calls);
  strict = r.take_bool();
  whitespace_flexible = r.take_bool();
  start_after = r.take<int32_t>();
  const auto kind = r.take<uint8_t>();
  if (kind > static_cast<uint8_t>(TextConstraint::kGbnf)) r.fail();  // not a kind: a malformed message
  text_kind = static_cast<TextConstraint>(kind);
  r.take_string(text);
  r.take_string(field);
  r.take_string(cache_salt);
}

}  // namespace

void encode_sync(bool stop, std::span<const GenerationRequest> requests, std::span<const Cancel> cancels,
                 std::vector<uint8_t>& out) {
  out.clear();
  Writer w(out);
  w.put_bool(stop);
  w.put_count(requests.size());
  w.put_count(cancels.size());
  for (const GenerationRequest& g : requests) put_request(w, g);
  for (const auto& [id, why] : cancels) {
    w.put<int64_t>(id);
    w.put<uint8_t>(static_cast<uint8_t>(why));
  }
}

Status decode_sync(std::span<const uint8_t> bytes, RankSync& out) {
  Reader r(bytes);
  out.stop = r.take_bool();
  const uint32_t n_requests = r.take<uint32_t>(), n_cancels = r.take<uint32_t>();
  out.requests.clear();
  out.cancels.clear();
  for (uint32_t i = 0; i < n_requests && r.ok(); ++i) take_request(r, out.requests.emplace_back());
  for (uint32_t i = 0; i < n_cancels && r.ok(); ++i) {
    const int64_t id = r.take<int64_t>();
    out.cancels.push_back({id, static_cast<FinishReason>(r.take<uint8_t>())});
  }
  if (!r.ok()) return Status::errorf("rank sync: message of {} bytes ends early", bytes.size());
  if (!r.done()) return Status::errorf("rank sync: bytes after the message of {} bytes", bytes.size());
  return Status();
}

LogprobRecord encode_logprob(const TokenLogprob& lp) {
  LogprobRecord r;
  r.token = lp.token;
  r.logprob = lp.logprob;
  r.n_top = static_cast<int32_t>(lp.top.size());
  for (int32_t k = 0; k < r.n_top; ++k) {
    r.top_id[k] = lp.top[k].first;
    r.top_lp[k] = lp.top[k].second;
  }
  return r;
}

void decode_logprob(const LogprobRecord& r, TokenLogprob& lp) {
  lp.token = r.token;
  lp.logprob = r.logprob;
  lp.top.resize(static_cast<size_t>(r.n_top));
  for (int32_t k = 0; k < r.n_top; ++k) lp.top[k] = {r.top_id[k], r.top_lp[k]};
}

void GatherLayout::clear() { std::fill(rows_.begin(), rows_.end(), 0); }

void GatherLayout::start_reading() {
  int64_t at = 0;
  for (size_t q = 0; q < rows_.size(); ++q) {
    next_[q] = at;
    at += rows_[q];
  }
}

int64_t GatherLayout::next(int source, int64_t records) {
  int64_t& at = next_[static_cast<size_t>(source)];
  const int64_t first = at;
  at += records;
  return first;
}

RankWire::RankWire(Communicator* world, int n_ranks, int rank, int64_t max_values, int64_t max_records)
    : world_(world), rank_(rank), layout_(n_ranks) {
  if (!world) return;
  own_values_.resize(static_cast<size_t>(max_values));
  gathered_values_.resize(own_values_.size());
  own_records_.resize(static_cast<size_t>(max_records));
  gathered_records_.resize(own_records_.size());
}

Status RankWire::sync(bool stop, std::span<const GenerationRequest> requests, std::span<const Cancel> cancels,
                      RankSync& out) {
  if (!world_) return Status();
  if (rank_ != 0) {
    DSV4_RETURN_IF_ERROR(world_->receive_header(sync_bytes_));
    return decode_sync(sync_bytes_, out);
  }
  sync_bytes_.clear();
  encode_sync(stop, requests, cancels, sync_bytes_);
  DSV4_RETURN_IF_ERROR(world_->send_header(sync_bytes_));
  out.stop = stop;
  out.requests.clear();
  out.cancels.clear();
  return Status();
}

Status RankWire::exchange(const std::vector<PlannedRows>& plan, Source by, int32_t* values, int per_request) {
  if (!world_) return Status();
  auto source = [by](const PlannedRows& p) { return by == Source::kOwner ? p.owner : p.sampler; };
  layout_.clear();
  int64_t mine = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const int from = source(plan[i]);
    layout_.add(from, 1);
    if (from == rank_) std::copy_n(values + i * per_request, per_request, own_values_.data() + mine++ * per_request);
  }
  DSV4_RETURN_IF_ERROR(world_->all_gather_rows(own_values_.data(), layout_.rows(), per_request * sizeof(int32_t),
                                               gathered_values_.data()));
  layout_.start_reading();
  for (size_t i = 0; i < plan.size(); ++i) {
    const int64_t at = layout_.next(source(plan[i]), 1);
    std::copy_n(gathered_values_.data() + at * per_request, per_request, values + i * per_request);
  }
  return Status();
}

Status RankWire::exchange_logprobs(const std::vector<PlannedRows>& plan, int32_t S, TokenLogprob* logprobs,
                                   std::vector<TokenLogprob>* prompt_logprobs) {
  if (!world_) return Status();
  auto records = [S](const PlannedRows& p) -> int64_t {
    return (p.request->logprobs >= 0 ? S : 0) + (p.prompt_logprobs ? p.n : 0);
  };
  int64_t total = 0;
  for (const PlannedRows& p : plan) total += records(p);
  if (total == 0) return Status();  // the same on every rank (replicated schedulers)
  layout_.clear();
  int64_t mine = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedRows& p = plan[i];
    layout_.add(p.sampler, records(p));
    if (p.sampler != rank_) continue;
    if (p.request->logprobs >= 0)
      for (int32_t j = 0; j < S; ++j) own_records_[mine++] = encode_logprob(logprobs[S * i + j]);
    if (p.prompt_logprobs)
      for (int32_t j = 0; j < p.n; ++j) {
        const std::vector<TokenLogprob>& lps = prompt_logprobs[i];
        own_records_[mine++] = j < static_cast<int32_t>(lps.size()) ? encode_logprob(lps[j]) : LogprobRecord{};
      }
  }
  DSV4_RETURN_IF_ERROR(world_->all_gather_rows(own_records_.data(), layout_.rows(), sizeof(LogprobRecord),
                                               gathered_records_.data()));
  layout_.start_reading();
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedRows& p = plan[i];
    int64_t at = layout_.next(p.sampler, records(p));
    if (p.request->logprobs >= 0)
      for (int32_t j = 0; j < S; ++j) decode_logprob(gathered_records_[at++], logprobs[S * i + j]);
    if (!p.prompt_logprobs) continue;
    prompt_logprobs[i].clear();
    for (int32_t j = 0; j < p.n; ++j, ++at)
      if (gathered_records_[at].token >= 0) decode_logprob(gathered_records_[at], prompt_logprobs[i].emplace_back());
  }
  return Status();
}

}  // namespace dsv4
