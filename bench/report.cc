// Tables, JSON and the PNG of report.h.
#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace dsv4::bench {

CaseResult timed_case(std::string name, std::string phase, std::string shape, int B, int S, int threads,
                      const std::vector<double>& ms, const Cost& cost) {
  CaseResult c;
  c.name = std::move(name);
  c.phase = std::move(phase);
  c.shape = std::move(shape);
  c.B = B;
  c.S = S;
  c.T = B * S;
  c.threads = threads;
  c.step_ms = median(ms);
  c.cost = cost;
  return c;
}

void finish(CaseResult& c, const Machine& m) {
  c.frac = fractions(c.cost, c.step_ms / 1e3, m.read(c.threads), m.peak(c.threads));
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void annotate_verify_overhead(std::vector<CaseResult>& cases, const Machine& m) {
  std::map<std::tuple<std::string, int, int>, const CaseResult*> one;
  for (const CaseResult& c : cases)
    if (c.phase == "decode" && c.S == 1) one[{c.name, c.B, c.threads}] = &c;
  const auto roof = [&](const CaseResult& c) { return roofline_seconds(c.cost, m.read(c.threads), m.peak(c.threads)); };
  for (CaseResult& c : cases) {
    if (c.phase != "decode" || c.S <= 1) continue;
    auto it = one.find({c.name, c.B, c.threads});
    if (it == one.end()) continue;
    const CaseResult& b = *it->second;
    const double r1 = roof(b), rs = roof(c);
    if (b.step_ms <= 0 || r1 <= 0 || rs <= 0) continue;
    c.extra.emplace_back("verify_time_ratio", c.step_ms / b.step_ms);
    c.extra.emplace_back("verify_overhead", (c.step_ms / b.step_ms) / (rs / r1));
  }
}

void print_verify_overhead(const std::vector<CaseResult>& cases) {
  bool header = false;
  for (const CaseResult& c : cases) {
    const double v = c.extra_value("verify_overhead");
    if (v <= 0) continue;
    if (!header) {
      std::printf("\nverify overhead: (t_S / t_1) / (roofline_S / roofline_1), roofline = max(bytes / bandwidth, "
                  "FLOPs / peak)\n%-12s %4s %2s %3s %10s %8s\n",
                  "case", "B", "S", "thr", "t_S/t_1", "overhead");
      header = true;
    }
    std::printf("%-12s %4d %2d %3d %9.2fx %8.2f\n", c.name.c_str(), c.B, c.S, c.threads,
                c.extra_value("verify_time_ratio"), v);
  }
}

void print_step_barriers(const std::vector<CaseResult>& cases, const std::vector<LayerCount>& layers,
                         const std::string& model) {
  // (B, S, threads) -> runs per case name.
  std::map<std::tuple<int, int, int>, std::map<std::string, double>> runs;
  for (const CaseResult& c : cases)
    if (c.phase == "decode" && c.pool_runs >= 0) runs[{c.B, c.S, c.threads}][c.name] = c.pool_runs;
  std::map<std::pair<int, int>, double> head;  // (B, threads) -> the head's runs
  for (const CaseResult& c : cases)
    if (c.name == "head" && c.pool_runs >= 0) head[{c.B, c.threads}] = c.pool_runs;
  bool header = false;
  for (const auto& [key, by_name] : runs) {
    const auto [B, S, threads] = key;
    double total = 0;
    std::string terms;
    bool complete = true;
    // Each layer case times a whole forward of a one-layer model: its runs hold the embedding's
    // run (runner.cc forward), which a whole model's step runs once.
    constexpr double kEmbedRuns = 1;
    total += kEmbedRuns;
    terms += fmt::format("embed {:.0f}", kEmbedRuns);
    for (const LayerCount& l : layers) {
      const std::string& from = l.stand_in.empty() ? l.case_name : l.stand_in;
      auto it = by_name.find(from);
      if (it == by_name.end()) {
        complete = false;
        break;
      }
      total += l.layers * (it->second - kEmbedRuns);
      terms += fmt::format(" + {} x {:.0f}{}", l.layers, it->second - kEmbedRuns,
                           l.stand_in.empty() ? "" : fmt::format(" ({} as {})", l.case_name, l.stand_in));
    }
    if (!complete) continue;
    auto h = head.find({B * S, threads});
    if (h != head.end()) {
      total += h->second;
      terms += fmt::format(" + head {:.0f}", h->second);
    }
    if (!header) {
      std::printf("\nbarriers (thread-pool runs) per %s decode step\n", model.c_str());
      header = true;
    }
    std::printf("  B %3d S %d, %d threads: %6.0f  = %s\n", B, S, threads, total, terms.c_str());
  }
}

void print_machine(const Machine& m) {
  std::printf("machine: isa %s; read probe %s; dot probe %s\n", m.isa.c_str(), m.read_probe.c_str(),
              m.dot_probe.c_str());
  for (const Machine::BandwidthRow& r : m.bandwidth)
    std::printf("  read bandwidth %d thread%s, %7.0f MiB buffer: %6.1f GB/s\n", r.threads, r.threads > 1 ? "s" : " ",
                static_cast<double>(r.bytes) / (1 << 20), r.gbps);
  for (const auto& [t, gbps] : m.read_gbps)
    std::printf("  %d thread%s: read bandwidth %.1f GB/s (best of the sizes), dot peak %.1f GFLOP/s\n", t,
                t > 1 ? "s" : " ", gbps, m.peak(t));
  std::printf("FP4 paths of this build: instructions per 64 weight bytes in the hot loop at T = 1 and 16 (not a\n"
              "judgement: with a core's issue width, a bound on the GB/s of a host with that ISA; scripts/isa_budget.py)\n%s",
              kIsaBudgetTable);
  std::fflush(stdout);
}

void print_cases(const std::string& title, const std::vector<CaseResult>& cases) {
  if (cases.empty()) return;
  std::printf("\n%s\n", title.c_str());
  std::printf("%-13s %-7s %-18s %4s %2s %5s %3s %10s %11s %9s %7s %6s %8s %6s %6s %7s %5s\n", "case", "phase", "shape", "B",
              "S", "T", "thr", "step_ms", "tokens/s", "MB", "GB/s", "%bw", "GFLOP/s", "%peak", "%roof", "experts", "runs");
  for (const CaseResult& c : cases) {
    const std::string experts = c.experts_hit >= 0 ? fmt::format("{:.1f}", c.experts_hit) : "";
    const std::string runs = c.pool_runs >= 0 ? fmt::format("{:.0f}", c.pool_runs) : "";
    std::printf("%-13s %-7s %-18s %4d %2d %5d %3d %10.3f %11.1f %9.2f %7.2f %5.1f%% %8.1f %5.1f%% %5.1f%% %7s %5s\n",
                c.name.c_str(), c.phase.c_str(), c.shape.c_str(), c.B, c.S, c.T, c.threads, c.step_ms, c.tokens_per_s(),
                c.cost.bytes / 1e6, c.frac.gbps, 100 * c.frac.bandwidth_fraction, c.frac.gflops,
                100 * c.frac.compute_fraction, 100 * c.frac.roofline_fraction, experts.c_str(), runs.c_str());
  }
  std::fflush(stdout);
}

namespace {
nlohmann::json by_threads(const std::map<int, double>& m) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [t, v] : m) j[std::to_string(t)] = v;
  return j;
}
}  // namespace

Status write_json(const std::string& path, const Machine& m, const std::vector<CaseResult>& cases, int64_t peak_rss,
                  const std::vector<std::string>& notes) {
  nlohmann::json j;
  nlohmann::json bw = nlohmann::json::array();
  for (const Machine::BandwidthRow& r : m.bandwidth)
    bw.push_back({{"threads", r.threads}, {"bytes", r.bytes}, {"gbps", r.gbps}});
  j["machine"] = {{"isa", m.isa},
                  {"read_probe", m.read_probe},
                  {"dot_probe", m.dot_probe},
                  {"read_bandwidth", bw},
                  {"read_gbps", by_threads(m.read_gbps)},
                  {"peak_gflops", by_threads(m.peak_gflops)}};
  j["peak_rss_bytes"] = peak_rss;
  j["notes"] = notes;
  nlohmann::json arr = nlohmann::json::array();
  for (const CaseResult& c : cases) {
    nlohmann::json r = {{"case", c.name},
                        {"phase", c.phase},
                        {"shape", c.shape},
                        {"B", c.B},
                        {"S", c.S},
                        {"T", c.T},
                        {"threads", c.threads},
                        {"step_ms", c.step_ms},
                        {"tokens_per_s", c.tokens_per_s()},
                        {"bytes", c.cost.bytes},
                        {"gbps", c.frac.gbps},
                        {"bandwidth_fraction", c.frac.bandwidth_fraction},
                        {"flops", c.cost.flops},
                        {"gflops", c.frac.gflops},
                        {"compute_fraction", c.frac.compute_fraction},
                        {"roofline_fraction", c.frac.roofline_fraction},
                        {"experts_hit", c.experts_hit},
                        {"pool_runs", c.pool_runs}};
    for (const auto& [key, v] : c.extra) r[key] = v;
    for (const auto& [key, v] : c.extra_lists) r[key] = v;
    arr.push_back(std::move(r));
  }
  j["cases"] = arr;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << j.dump(2) << "\n";
  out.close();
  return out ? Status() : Status::errorf("--json {}: cannot write", path);
}

std::string find_gnuplot() {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    const std::filesystem::path p = std::filesystem::path(dir.empty() ? "." : dir) / "gnuplot";
    std::error_code ec;
    if (std::filesystem::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

bool plottable(const CaseResult& c, int threads) { return c.phase == "decode" && c.S == 1 && c.threads == threads; }

Status plot_throughput(const std::string& gnuplot, const std::string& png_path, const std::vector<CaseResult>& cases,
                       int threads) {
  std::map<std::string, std::vector<std::pair<int, double>>> series;
  for (const CaseResult& c : cases)
    if (plottable(c, threads)) series[c.name].push_back({c.B, c.tokens_per_s()});
  if (series.empty()) return Status::errorf("no decode rows at S = 1 and {} threads to plot", threads);
  const std::string stem = std::filesystem::path(png_path).replace_extension("").string();
  const std::string dat = stem + ".dat", gp = stem + ".gp";
  std::ofstream d(dat, std::ios::trunc);
  for (auto& [name, pts] : series) {
    std::sort(pts.begin(), pts.end());
    d << "# " << name << "\n";
    for (auto [b, tps] : pts) d << b << " " << tps << "\n";
    d << "\n\n";
  }
  d.close();
  std::ofstream g(gp, std::ios::trunc);
  g << "set terminal png size 900,600\n"
    << "set output '" << png_path << "'\n"
    << "set title 'dsv4 bench: decode throughput vs batch (S = 1, " << threads << " threads)'\n"
    << "set xlabel 'requests per step (B)'\nset ylabel 'tokens/s'\n"
    << "set logscale xy 2\nset grid\nset key left top\n"
    << "plot ";
  int i = 0;
  for (const auto& [name, pts] : series) {
    if (i > 0) g << ", ";
    g << "'" << dat << "' index " << i << " with linespoints title '" << name << "'";
    ++i;
  }
  g << "\n";
  g.close();
  if (!d || !g) return Status::errorf("{}: cannot write the plot data", stem);
  const std::string cmd = fmt::format("'{}' '{}' 2>&1", gnuplot, gp);
  if (std::system(cmd.c_str()) != 0) return Status::errorf("gnuplot failed on {}", gp);
  return Status();
}

}  // namespace dsv4::bench
