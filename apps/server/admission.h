// The admission budget (--max-pending-bytes): the bytes that the requests being parsed, queued
// and running may hold together. A request is charged when its body arrives, before any parsing
// (kChargePerBodyByte), then, parsed, what it holds (request_footprint) until its response ends
// (the Ticket goes). Above the budget the request is refused with 503 + Retry-After, so that
// many large bodies at once cannot exhaust memory (256 queued bodies of 8 MiB were allowed
// before; docs/serving.md "Limits").
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include "base/cpu.h"
#include "protocol.h"

namespace dsv4::server {

// While its body is parsed, a request is charged this many bytes per body byte: the body and its
// parsed JSON (its values bounded by ModelCard::max_json_values).
constexpr int64_t kChargePerBodyByte = 4;
// The smallest charge: a small body still takes a request's fixed state.
constexpr int64_t kMinRequestCharge = 64 << 10;

// Once parsed, a request is charged what it holds until its response ends (request_footprint).
// Its output is bounded apart: n x max_tokens tokens, with their logprobs when asked.
int64_t request_footprint(const ApiRequest& request);

// The default budget: an eighth of the physical memory, between 256 MiB and 8 GiB.
inline int64_t default_pending_bytes() {
  const int64_t ram = physical_memory_bytes();
  return std::clamp<int64_t>(ram > 0 ? ram / 8 : int64_t{1} << 30, int64_t{256} << 20, int64_t{8} << 30);
}

class AdmissionBudget {
 public:
  explicit AdmissionBudget(int64_t limit_bytes) : limit_(limit_bytes) {}

  // The charge of a request whose body has `body_bytes`.
  static int64_t charge_for(int64_t body_bytes) {
    return body_bytes * kChargePerBodyByte > kMinRequestCharge ? body_bytes * kChargePerBodyByte : kMinRequestCharge;
  }

  // Held while the request lives; gives the charge back when the last copy goes.
  using Ticket = std::shared_ptr<void>;

  // A ticket for `bytes`, or null when they do not fit beside what is held.
  Ticket take(int64_t bytes) {
    int64_t held = held_.load(std::memory_order_relaxed);
    do {
      if (held + bytes > limit_) return nullptr;
    } while (!held_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
    return Ticket(this, [bytes](AdmissionBudget* b) { b->held_.fetch_sub(bytes, std::memory_order_relaxed); });
  }

  int64_t held() const { return held_.load(std::memory_order_relaxed); }
  int64_t limit() const { return limit_; }

 private:
  const int64_t limit_;
  std::atomic<int64_t> held_{0};
};

}  // namespace dsv4::server
