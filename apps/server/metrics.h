// GET /metrics: the service's counters and the HTTP responses in Prometheus text format
// (exposition format 0.0.4). Names start with dsv4_; histograms are cumulative with le labels.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "runtime/service.h"

namespace dsv4::server {

// HTTP responses by route and status code (thread-safe; the routes are the server's fixed set,
// anything else counts as "other", so label values stay bounded).
class HttpMetrics {
 public:
  using Counts = std::map<std::pair<std::string, int>, int64_t>;
  void count(const std::string& route, int status);
  Counts snapshot() const;

 private:
  mutable std::mutex mu_;
  Counts counts_;
};

std::string format_metrics(const ServiceMetrics& service, const HttpMetrics::Counts& http);

}  // namespace dsv4::server
