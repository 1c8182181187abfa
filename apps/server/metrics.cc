// Prometheus text formatting of ServiceMetrics and HTTP counters (metrics.h).
#include "metrics.h"

#include <fmt/format.h>

namespace dsv4::server {
namespace {

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void scalar(std::string& out, const char* name, const char* type, const char* help, double value) {
  header(out, name, type, help);
  out += fmt::format("{} {}\n", name, value);
}

// A histogram from per-bucket counts (buckets[i] = observations in (le[i-1], le[i]]; the last
// bucket is +Inf), written cumulatively.
void histogram(std::string& out, const char* name, const char* help, const int64_t* buckets, int n_finite,
               const std::string (&le)[16], const double* sum) {
  header(out, name, "histogram", help);
  int64_t total = 0;
  for (int i = 0; i < n_finite; ++i) {
    total += buckets[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, le[i], total);
  }
  total += buckets[n_finite];
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, total);
  if (sum) out += fmt::format("{}_sum {}\n", name, *sum);
  out += fmt::format("{}_count {}\n", name, total);
}

}  // namespace

void HttpMetrics::count(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[{route, status}];
}

HttpMetrics::Counts HttpMetrics::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

std::string format_metrics(const ServiceMetrics& m, const HttpMetrics::Counts& http) {
  std::string out;
  header(out, "dsv4_requests_finished_total", "counter", "Requests the engine finished, by finish reason.");
  for (int r = 1; r < 7; ++r)  // index = FinishReason value; kNone is never counted
    out += fmt::format("dsv4_requests_finished_total{{reason=\"{}\"}} {}\n",
                       finish_reason_name(static_cast<FinishReason>(r)), m.finished[r]);
  scalar(out, "dsv4_requests_rejected_total", "counter",
         "Requests refused at submission (invalid, queue full, shutting down).", static_cast<double>(m.rejected));
  header(out, "dsv4_http_requests_total", "counter", "HTTP responses by route and status code.");
  for (const auto& [key, n] : http)
    out += fmt::format("dsv4_http_requests_total{{route=\"{}\",code=\"{}\"}} {}\n", key.first, key.second, n);
  scalar(out, "dsv4_prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
         static_cast<double>(m.prompt_tokens));
  scalar(out, "dsv4_generation_tokens_total", "counter", "Generated tokens of finished requests.",
         static_cast<double>(m.completion_tokens));
  scalar(out, "dsv4_requests_running", "gauge", "Requests holding a sequence slot.", static_cast<double>(m.running));
  scalar(out, "dsv4_requests_queued", "gauge", "Requests waiting for admission.", static_cast<double>(m.queued));
  scalar(out, "dsv4_engine_steps_total", "counter", "Engine steps run.", static_cast<double>(m.steps));

  std::string le[16];
  for (int i = 0; i < ServiceMetrics::kBatchBuckets; ++i) le[i] = std::to_string(1 << i);
  const double batch_sum = static_cast<double>(m.batch_sum);
  histogram(out, "dsv4_batch_size", "Requests per engine step.", m.batch_hist, ServiceMetrics::kBatchBuckets, le,
            &batch_sum);
  for (int i = 0; i < ServiceMetrics::kTimeBuckets; ++i) le[i] = fmt::format("{}", 0.001 * (1 << i));
  histogram(out, "dsv4_step_seconds", "Wall time of one engine step.", m.step_time_hist,
            ServiceMetrics::kTimeBuckets, le, &m.step_seconds_sum);

  scalar(out, "dsv4_mtp_draft_tokens_total", "counter", "Draft tokens verified (MTP or DSpark).", static_cast<double>(m.drafts));
  scalar(out, "dsv4_mtp_accepted_tokens_total", "counter", "Draft tokens accepted (MTP or DSpark).",
         static_cast<double>(m.accepted));
  scalar(out, "dsv4_mtp_acceptance_ratio", "gauge", "Accepted / verified drafts since start (0 without drafts).",
         m.drafts > 0 ? static_cast<double>(m.accepted) / static_cast<double>(m.drafts) : 0.0);
  // Speculative rounds (MTP or DSpark) by drafts accepted: acceptance by draft position k is
  // the share of rounds with at least k accepted (dspark.md §4; buckets with rounds only).
  scalar(out, "dsv4_spec_rounds_total", "counter", "Verify steps of requests that carried drafts.",
         static_cast<double>(m.spec_rounds));
  header(out, "dsv4_spec_rounds_accepted_total", "counter", "Speculative rounds by drafts accepted.");
  for (int k = 0; k < ServiceMetrics::kMaxAcceptedAt; ++k)
    if (m.spec_accepted_at[k] > 0)
      out += fmt::format("dsv4_spec_rounds_accepted_total{{accepted=\"{}\"}} {}\n", k, m.spec_accepted_at[k]);
  scalar(out, "dsv4_preemptions_total", "counter", "Running requests preempted for pages (recomputed later).",
         static_cast<double>(m.preempted));
  header(out, "dsv4_prefix_cache_queries_total", "counter",
         "Prompt tokens of admitted requests, by the rank owning them (the prefix cache's lookups).");
  for (size_t q = 0; q < m.prefix_prompt_tokens.size(); ++q)
    out += fmt::format("dsv4_prefix_cache_queries_total{{rank=\"{}\"}} {}\n", q, m.prefix_prompt_tokens[q]);
  header(out, "dsv4_prefix_cache_hits_total", "counter",
         "Prompt tokens the prefix cache held (not computed), by owner rank; hit rate = hits / queries.");
  for (size_t q = 0; q < m.prefix_hit_tokens.size(); ++q)
    out += fmt::format("dsv4_prefix_cache_hits_total{{rank=\"{}\"}} {}\n", q, m.prefix_hit_tokens[q]);
  if (m.cache_pages_total >= 0) {
    scalar(out, "dsv4_cache_pages_free", "gauge",
           "Compressed-cache pages free after the last step (prefix-cache entries nobody uses count as free).",
           static_cast<double>(m.cache_pages_free));
    scalar(out, "dsv4_cache_pages_total", "gauge", "Compressed-cache pages in all (--cache-blocks).",
           static_cast<double>(m.cache_pages_total));
  }
  return out;
}

}  // namespace dsv4::server
