// ggml peer beside the engine's GEMMs (ggml_peer.h).
#include "ggml_peer.h"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "roofline.h"

namespace dsv4::bench {
namespace {

// The peer builds found in DIR: program and the extra flags it runs with.
struct PeerBuild {
  std::string path, flags;
};

std::vector<PeerBuild> peer_builds(const std::string& dir) {
  std::vector<PeerBuild> b;
  namespace fs = std::filesystem;
  const fs::path plain = fs::path(dir) / "peer_plain", lf = fs::path(dir) / "peer_lf";
  if (fs::is_regular_file(plain)) b.push_back({plain.string(), ""});
  if (fs::is_regular_file(lf)) b.push_back({lf.string(), "--repack"});
  return b;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs one peer invocation for one case over the T set; its stdout.
Result<std::string> run_peer(const PeerBuild& b, const std::string& case_name, const PeerSets& sets, int threads) {
  const std::string cmd = fmt::format("{} {} --only {} --T {} --threads {} --reps {} --span-mib {} 2>&1", shell_quote(b.path),
                                      b.flags, case_name, fmt::join(sets.rows, ","), threads, sets.repeats,
                                      std::max<int64_t>(1, sets.span_bytes >> 20));
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return Status::errorf("--peer-ggml: cannot run {}", b.path);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int rc = ::pclose(p);
  if (rc != 0)
    return Status::errorf("--peer-ggml: {} exited with status {}: {}", b.path,
                          WIFEXITED(rc) ? WEXITSTATUS(rc) : rc, out.substr(0, 400));
  return out;
}

const char* peer_type(StorageForm f) {
  switch (f) {
    case StorageForm::kFP4: return "mxfp4";
    case StorageForm::kFP8: return "q8_0";
    default: return "bf16";
  }
}

}  // namespace

std::string peer_case_name(const GemmShape& s) { return fmt::format("{}_{}x{}", peer_type(s.form), s.out, s.in); }

Result<std::vector<PeerRow>> parse_peer_csv(const std::string& text) {
  std::vector<PeerRow> rows;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    // ggml's own log lines (e.g. "repack: repack tensor ... with mxfp4_8x8" under --repack)
    // have no comma; the rows are comma-separated.
    if (line.empty() || line[0] == '#' || line.rfind("mode,", 0) == 0 || line.find(',') == std::string::npos)
      continue;
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string cell; std::getline(ls, cell, ',');) f.push_back(cell);
    // mode,case,type,rows,K,T,n_copies,weight_bytes,median_us,...
    PeerRow r;
    try {
      if (f.size() < 9) throw std::invalid_argument("fields");
      r.case_name = f[1];
      r.T = std::stoi(f[5]);
      r.weight_bytes = std::stod(f[7]);
      r.median_us = std::stod(f[8]);
    } catch (const std::exception&) {
      return Status::errorf("--peer-ggml: line {} of the peer's output is not a CSV row of 9+ fields "
                            "(mode,case,type,rows,K,T,n_copies,weight_bytes,median_us,...): '{}'",
                            n, line.substr(0, 200));
    }
    if (r.T < 1 || r.median_us <= 0 || r.weight_bytes <= 0)
      return Status::errorf("--peer-ggml: line {}: T {}, median_us {}, weight_bytes {} must be positive", n, r.T,
                            r.median_us, r.weight_bytes);
    rows.push_back(r);
  }
  return rows;
}

Result<std::vector<CaseResult>> run_gemm_with_peer(const std::vector<GemmShape>& shapes, const PeerSets& sets,
                                                   int threads, std::vector<std::string>& notes) {
  const std::vector<PeerBuild> builds = peer_builds(sets.dir);
  if (builds.empty())
    return Status::errorf("--peer-ggml {}: no peer_plain or peer_lf executable there (build them from ggml's source "
                          "with ../shared/tools/ggml_peer/README.md)",
                          sets.dir);
  // Per (shape index, T): per-round medians of the engine and of ggml (the faster build).
  std::map<std::pair<size_t, int>, std::vector<double>> engine_ms, ggml_ms;
  std::map<std::pair<size_t, int>, double> ggml_bytes;
  std::vector<bool> offered(shapes.size(), true);
  for (int round = 0; round < sets.rounds; ++round) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      const GemmSets one{sets.rows, sets.repeats, sets.span_bytes};
      for (const CaseResult& c : run_gemm_cases({shapes[i]}, one, threads)) engine_ms[{i, c.T}].push_back(c.step_ms);
      if (!offered[i]) continue;
      std::map<int, double> best_us;
      for (const PeerBuild& b : builds) {
        Result<std::string> out = run_peer(b, peer_case_name(shapes[i]), sets, threads);
        if (!out.ok()) return out.status();
        Result<std::vector<PeerRow>> rows = parse_peer_csv(out.value());
        if (!rows.ok()) return rows.status();
        for (const PeerRow& r : rows.value()) {
          if (r.case_name != peer_case_name(shapes[i])) continue;
          if (!best_us.count(r.T) || r.median_us < best_us[r.T]) best_us[r.T] = r.median_us;
          ggml_bytes[{i, r.T}] = r.weight_bytes;
        }
      }
      if (best_us.empty()) {
        offered[i] = false;
        notes.push_back(fmt::format("ggml peer: no case {} for {} (engine timed alone)", peer_case_name(shapes[i]),
                                    shapes[i].label()));
        continue;
      }
      for (const auto& [T, us] : best_us) ggml_ms[{i, T}].push_back(us / 1e3);
    }
  }
  std::vector<CaseResult> out;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const GemmShape& s = shapes[i];
    for (int T : sets.rows) {
      const char* name = s.form == StorageForm::kFP4 ? "gemm-fp4" : s.form == StorageForm::kFP8 ? "gemm-fp8" : "gemm-bf16";
      CaseResult e = timed_case(name, "gemm", s.label(), T, 1, threads, engine_ms[{i, T}], matrix_cost(s.form, s.out, s.in, T));
      e.extra.emplace_back("rounds", sets.rounds);
      out.push_back(e);
      auto g = ggml_ms.find({i, T});
      if (g == ggml_ms.end()) continue;
      Cost cost = matrix_cost(s.form, s.out, s.in, T);
      cost.bytes = ggml_bytes[{i, T}];  // ggml's own format (q8_0 carries a scale per 32)
      CaseResult c = timed_case(fmt::format("ggml-{}", peer_type(s.form)), "gemm", s.label(), T, 1, threads, g->second, cost);
      c.extra.emplace_back("rounds", static_cast<double>(g->second.size()));
      c.extra.emplace_back("engine_speedup", c.step_ms > 0 && e.step_ms > 0 ? c.step_ms / e.step_ms : 0);
      out.push_back(c);
    }
  }
  return out;
}

void print_peer_comparison(const std::vector<CaseResult>& cases, int rounds) {
  std::map<std::pair<std::string, int>, const CaseResult*> engine, peer;
  for (const CaseResult& c : cases) {
    if (c.phase != "gemm") continue;
    if (c.name.rfind("ggml-", 0) == 0) peer[{c.shape, c.T}] = &c;
    else if (c.name.rfind("gemm-", 0) == 0) engine[{c.shape, c.T}] = &c;
  }
  if (peer.empty()) return;
  std::printf("\nengine vs ggml (same run, medians of %d interleaved rounds; x = ggml time / engine time)\n", rounds);
  std::printf("%-18s %5s %10s %10s %9s %9s %8s\n", "shape", "T", "engine ms", "ggml ms", "eng GB/s", "ggml GB/s", "x");
  for (const auto& [key, p] : peer) {
    auto e = engine.find(key);
    if (e == engine.end()) continue;
    const CaseResult& en = *e->second;
    std::printf("%-18s %5d %10.3f %10.3f %9.2f %9.2f %7.2fx\n", key.first.c_str(), key.second, en.step_ms, p->step_ms,
                en.cost.bytes / (en.step_ms * 1e6), p->cost.bytes / (p->step_ms * 1e6), p->step_ms / en.step_ms);
  }
}

}  // namespace dsv4::bench
