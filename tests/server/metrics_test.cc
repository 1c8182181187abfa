// Prometheus text of the service metrics: every family has HELP and TYPE, histograms are
// cumulative with +Inf equal to _count, label values as given.
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

namespace dsv4::server {
namespace {

// name{labels} -> value, for every sample line.
std::map<std::string, double> samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    EXPECT_NE(space, std::string::npos) << line;
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

TEST(Metrics, PrometheusText) {
  ServiceMetrics m;
  m.finished[static_cast<int>(FinishReason::kStop)] = 5;
  m.finished[static_cast<int>(FinishReason::kCancelled)] = 2;
  m.rejected = 3;
  m.prompt_tokens = 100;
  m.completion_tokens = 40;
  m.running = 4;
  m.queued = 1;
  m.steps = 10;
  m.batch_hist[0] = 6;  // batch 1
  m.batch_hist[2] = 3;  // batch 3..4
  m.batch_hist[ServiceMetrics::kBatchBuckets] = 1;  // > 128
  m.step_time_hist[1] = 10;  // (1, 2] ms
  m.step_seconds_sum = 0.015;
  m.drafts = 8;
  m.accepted = 6;
  m.spec_rounds = 4;
  m.spec_accepted_at[0] = 1;
  m.spec_accepted_at[2] = 2;
  m.spec_accepted_at[5] = 1;
  m.prefix_prompt_tokens = {300, 120};
  m.prefix_hit_tokens = {250, 0};
  HttpMetrics http;
  http.count("/v1/completions", 200);
  http.count("/v1/completions", 200);
  http.count("/v1/chat/completions", 400);
  const std::string text = format_metrics(m, http.snapshot());

  std::map<std::string, double> s = samples(text);
  EXPECT_EQ(s["dsv4_requests_finished_total{reason=\"stop\"}"], 5);
  EXPECT_EQ(s["dsv4_requests_finished_total{reason=\"cancelled\"}"], 2);
  EXPECT_EQ(s["dsv4_requests_finished_total{reason=\"error\"}"], 0);
  EXPECT_EQ(s.count("dsv4_requests_finished_total{reason=\"none\"}"), 0u);
  EXPECT_EQ(s["dsv4_requests_rejected_total"], 3);
  EXPECT_EQ(s["dsv4_http_requests_total{route=\"/v1/completions\",code=\"200\"}"], 2);
  EXPECT_EQ(s["dsv4_http_requests_total{route=\"/v1/chat/completions\",code=\"400\"}"], 1);
  EXPECT_EQ(s["dsv4_prompt_tokens_total"], 100);
  EXPECT_EQ(s["dsv4_generation_tokens_total"], 40);
  EXPECT_EQ(s["dsv4_requests_running"], 4);
  EXPECT_EQ(s["dsv4_requests_queued"], 1);
  EXPECT_EQ(s["dsv4_engine_steps_total"], 10);
  EXPECT_EQ(s["dsv4_prefix_cache_queries_total{rank=\"0\"}"], 300);
  EXPECT_EQ(s["dsv4_prefix_cache_queries_total{rank=\"1\"}"], 120);
  EXPECT_EQ(s["dsv4_prefix_cache_hits_total{rank=\"0\"}"], 250);
  EXPECT_EQ(s["dsv4_prefix_cache_hits_total{rank=\"1\"}"], 0);
  // Cumulative buckets.
  EXPECT_EQ(s["dsv4_batch_size_bucket{le=\"1\"}"], 6);
  EXPECT_EQ(s["dsv4_batch_size_bucket{le=\"2\"}"], 6);
  EXPECT_EQ(s["dsv4_batch_size_bucket{le=\"4\"}"], 9);
  EXPECT_EQ(s["dsv4_batch_size_bucket{le=\"128\"}"], 9);
  EXPECT_EQ(s["dsv4_batch_size_bucket{le=\"+Inf\"}"], 10);
  EXPECT_EQ(s["dsv4_batch_size_count"], 10);
  EXPECT_EQ(s["dsv4_step_seconds_bucket{le=\"0.001\"}"], 0);
  EXPECT_EQ(s["dsv4_step_seconds_bucket{le=\"0.002\"}"], 10);
  EXPECT_EQ(s["dsv4_step_seconds_bucket{le=\"0.512\"}"], 10);
  EXPECT_EQ(s["dsv4_step_seconds_bucket{le=\"+Inf\"}"], 10);
  EXPECT_DOUBLE_EQ(s["dsv4_step_seconds_sum"], 0.015);
  EXPECT_EQ(s["dsv4_mtp_draft_tokens_total"], 8);
  EXPECT_EQ(s["dsv4_mtp_accepted_tokens_total"], 6);
  EXPECT_DOUBLE_EQ(s["dsv4_mtp_acceptance_ratio"], 0.75);
  EXPECT_EQ(s["dsv4_spec_rounds_total"], 4);
  EXPECT_EQ(s["dsv4_spec_rounds_accepted_total{accepted=\"0\"}"], 1);
  EXPECT_EQ(s["dsv4_spec_rounds_accepted_total{accepted=\"2\"}"], 2);
  EXPECT_EQ(s["dsv4_spec_rounds_accepted_total{accepted=\"5\"}"], 1);
  EXPECT_EQ(s.count("dsv4_spec_rounds_accepted_total{accepted=\"1\"}"), 0u);

  // Every sample's family has HELP and TYPE lines before it.
  std::istringstream in(text);
  std::string line, family;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      family = line.substr(7, line.find(' ', 7) - 7);
      continue;
    }
    if (line[0] == '#') continue;
    EXPECT_EQ(line.rfind(family, 0), 0u) << line << " outside family " << family;
  }
}

}  // namespace
}  // namespace dsv4::server
