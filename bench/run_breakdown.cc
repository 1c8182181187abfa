// Per-run breakdown of a decode step (run_breakdown.h).
#include "run_breakdown.h"

#include <algorithm>

#include <fmt/format.h>

#include "numeric/cache_rows.h"

namespace dsv4::bench {

namespace {

std::string key_of(const RunRecord& r) {
  if (r.name) return r.name;
  std::string f = r.function ? r.function : "?";
  const size_t paren = f.find('(');
  if (paren != std::string::npos) f.resize(paren);
  const size_t space = f.rfind(' ');
  if (space != std::string::npos) f.erase(0, space + 1);
  return fmt::format("{}:{}", f, r.line);
}

bool starts(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

double RunBreakdown::run_bytes(const std::string& name, std::span<const RequestRows> rows, int64_t experts_hit) const {
  const ModelConfig& c = cfg_;
  const int64_t D = c.hidden_size, Dh = c.head_dim, Rq = c.q_lora_rank, F = c.moe_intermediate_size;
  const int64_t Hi = c.index_n_heads, Di = c.index_head_dim;
  const int ratio = c.layer_ratio(0);
  const StorageForm dense = c.dense_storage(), bf = StorageForm::kBF16;
  int64_t T = 0;
  for (const RequestRows& r : rows) T += r.n;
  const double stream = static_cast<double>(T * c.hc_dim() * 2);
  auto m = [](StorageForm f, int64_t out, int64_t in) { return static_cast<double>(matrix_bytes(f, out, in)); };
  if (starts(name, "attn.hc_mix") || starts(name, "ffn.hc_mix")) return m(StorageForm::kF32, c.hc_mix(), c.hc_dim()) + stream;
  if (starts(name, "attn.hc_pre") || starts(name, "ffn.hc_pre")) return stream;
  if (starts(name, "attn.B")) {
    double b = m(dense, Rq, D) + m(dense, Dh, D);
    if (ratio > 0) b += m(bf, 2 * c.compressor_out(0), D);
    if (ratio == kCsaRatio) b += m(bf, 2 * 2 * Di, D);
    return b;
  }
  if (starts(name, "attn.D"))
    return m(dense, c.num_attention_heads * Dh, Rq) + (ratio == kCsaRatio ? m(dense, Hi * Di, Rq) + m(bf, Hi, D) : 0);
  if (starts(name, "attn.wo_a")) return m(dense, int64_t{c.o_groups} * c.o_lora_rank, c.wo_a_in());
  if (starts(name, "attn.wo_b")) return m(dense, D, c.wo_b_in());
  if (starts(name, "moe.gate")) return m(bf, c.n_routed_experts, D);
  const double expert = m(c.expert_storage(), F, D) * static_cast<double>(experts_hit);
  const double shared = m(dense, F, D) * c.n_shared_experts;
  if (starts(name, "moe.up")) return 2 * (expert + shared);
  if (starts(name, "moe.down")) return expert + shared;
  const bool idx = starts(name, "attn.F idx_select"), attn = starts(name, "attn.H");
  if (!idx && !attn) return 0;
  const KvRowFormat kv{static_cast<int>(Dh), static_cast<int>(c.qk_rope_head_dim)};
  const IndexKeyFormat key{static_cast<int>(Di)};
  double b = 0;
  for (const RequestRows& r : rows)
    for (int64_t p = r.p0; p < r.p0 + r.n; ++p) {
      const int64_t index_keys = ratio == kCsaRatio ? (p + 1) / ratio : 0;
      int64_t keys = std::min<int64_t>(p + 1, c.sliding_window);
      if (ratio == kCsaRatio) keys += std::min<int64_t>(index_keys, c.index_topk);
      else if (ratio > 0) keys += (p + 1) / ratio;
      b += idx ? static_cast<double>(index_keys * key.bytes()) : static_cast<double>(keys * kv.bytes());
    }
  return b;
}

void RunBreakdown::add_step(std::span<const RunRecord> records, std::span<const RequestRows> rows,
                            int64_t experts_hit, double step_ms, uint64_t dropped) {
  ++steps_;
  step_ms_ += step_ms;
  dropped_ += dropped;
  for (const RunRecord& r : records) {
    const std::string key = key_of(r);
    auto [it, fresh] = sums_.try_emplace(key);
    Sum& s = it->second;
    if (fresh) s.order = static_cast<int>(sums_.size());
    s.runs += 1;
    s.wall_ms += static_cast<double>(r.wall_ns) * 1e-6;
    s.busy_max_ms += static_cast<double>(r.busy_max_ns) * 1e-6;
    s.busy_min_ms += static_cast<double>(r.busy_min_ns) * 1e-6;
    s.wake_max_us += static_cast<double>(r.wake_max_ns) * 1e-3;
    s.bytes += run_bytes(key, rows, experts_hit);
  }
}

std::string RunBreakdown::table(const std::string& title, double read_gbps) const {
  const double n = std::max(1, steps_);
  std::vector<std::pair<std::string, Sum>> rows(sums_.begin(), sums_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
  std::string out = fmt::format("{} (per step, mean of {} steps; probe {:.1f} GB/s)\n", title, steps_, read_gbps);
  out += fmt::format("  {:<28} {:>5} {:>8} {:>6} {:>8} {:>7} {:>6} {:>9} {:>9} {:>8} {:>9}\n", "run", "runs", "ms", "%",
                     "MB", "GB/s", "% bw", "busy max", "busy min", "wake us", "busy GB/s");
  double in_runs = 0, bytes = 0;
  for (const auto& [name, s] : rows) {
    const double ms = s.wall_ms / n, mb = s.bytes / n * 1e-6, gbps = ms > 0 ? mb / ms : 0;
    in_runs += ms;
    bytes += mb;
    const double busy_gbps = s.busy_max_ms > 0 ? s.bytes / s.busy_max_ms * 1e-6 : 0;
    out += fmt::format("  {:<28} {:>5.0f} {:>8.3f} {:>6.1f} {:>8.2f} {:>7.1f} {:>6.1f} {:>9.3f} {:>9.3f} {:>8.1f} {:>9.1f}\n",
                       name, s.runs / n, ms, 100 * ms / (step_ms_ / n), mb, gbps,
                       read_gbps > 0 ? 100 * gbps / read_gbps : 0, s.busy_max_ms / n, s.busy_min_ms / n,
                       s.wake_max_us / std::max(1.0, s.runs), busy_gbps);
  }
  const double caller = step_ms_ / n - in_runs;
  out += fmt::format("  {:<28} {:>5} {:>8.3f} {:>6.1f}\n", "caller (outside runs)", "", caller,
                     100 * caller / (step_ms_ / n));
  out += fmt::format("  {:<28} {:>5} {:>8.3f} {:>6.1f} {:>8.2f} {:>7.1f}\n", "step", "", step_ms_ / n, 100.0, bytes,
                     bytes / (step_ms_ / n));
  if (dropped_ > 0)
    out += fmt::format("  ({} runs past the profile's capacity are not listed: their time is in \"caller\")\n",
                       dropped_);
  return out;
}

}  // namespace dsv4::bench
