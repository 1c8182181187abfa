// Speculation projected onto the whole model (spec_flash.h).
#include "spec_flash.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "roofline.h"

namespace dsv4::bench {
namespace {

using nlohmann::json;

// Time and roofline time (ms) of one piece.
struct Timed {
  double ms = 0, roof_ms = 0;
  Timed& operator+=(const Timed& o) {
    ms += o.ms;
    roof_ms += o.roof_ms;
    return *this;
  }
};
Timed operator*(double k, Timed p) { return Timed{k * p.ms, k * p.roof_ms}; }

double roof_ms(const Cost& c, const Machine& m, int threads) {
  return 1e3 * roofline_seconds(c, m.read(threads), m.peak(threads));
}

class StepModel {
 public:
  StepModel(const std::vector<CaseResult>& cases, const Machine& m, int threads) : m_(m), threads_(threads) {
    for (const CaseResult& c : cases) {
      if (c.threads != threads) continue;
      if (c.phase == "decode" && c.name.rfind("layer-", 0) == 0) layer_[c.name][c.B][c.S] = &c;
      if (c.name == "head") head_[c.B] = &c;
      if (c.name == "dspark-share") dspark_[{c.B, static_cast<int>(c.extra_value("gamma"))}] = &c;
      if (c.name == "dspark-target" || c.name == "dspark-thead") piece_[{c.name, c.B, c.S}] = &c;
    }
  }
  bool has_layer(const std::string& kind, int B) const { return layer_.count(kind) && layer_.at(kind).count(B); }
  std::set<int> layer_batches(const std::string& kind) const {
    std::set<int> b;
    if (layer_.count(kind))
      for (const auto& [B, _] : layer_.at(kind)) b.insert(B);
    return b;
  }

  // One layer of `kind` at (B, S): measured, or linear in S through the two nearest measured S
  // (floored: never below a measured neighbour it lies beyond).
  std::optional<Timed> layer(const std::string& kind, int B, int S, bool* estimated) const {
    if (!has_layer(kind, B)) return std::nullopt;
    const std::map<int, const CaseResult*>& by_s = layer_.at(kind).at(B);
    const auto at = [&](const CaseResult* c) { return Timed{c->step_ms, roof_ms(c->cost, m_, threads_)}; };
    if (auto it = by_s.find(S); it != by_s.end()) return at(it->second);
    if (by_s.size() < 2) return std::nullopt;
    *estimated = true;
    auto hi = by_s.upper_bound(S);
    if (hi == by_s.end()) --hi;
    if (hi == by_s.begin()) ++hi;
    auto lo = std::prev(hi);
    const Timed a = at(lo->second), b = at(hi->second);
    const double f = static_cast<double>(S - lo->first) / (hi->first - lo->first);
    // More rows never make a step faster: noisy timings may slope down, so beyond the measured
    // S the line is floored at the slower of the two, between them at the faster.
    const auto line = [&](double x, double y) {
      return std::max(x + f * (y - x), S > hi->first ? std::max(x, y) : std::min(x, y));
    };
    return Timed{line(a.ms, b.ms), line(a.roof_ms, b.roof_ms)};
  }

  // The LM head over T rows: the nearest measured row count, scaled by the roofline ratio
  // (bytes fixed: the matrix; FLOPs in proportion to the rows).
  std::optional<Timed> head(int T, bool* estimated) const {
    if (head_.empty()) return std::nullopt;
    auto it = head_.lower_bound(T);
    if (it == head_.end()) --it;
    const CaseResult& c = *it->second;
    const Timed p{c.step_ms, roof_ms(c.cost, m_, threads_)};
    if (c.T == T) return p;
    *estimated = true;
    const double r = roof_ms(Cost{c.cost.bytes, c.cost.flops * T / std::max(1, c.T)}, m_, threads_);
    return Timed{p.roof_ms > 0 ? p.ms * r / p.roof_ms : p.ms, r};
  }

  // DSpark's drafter per round at (B, γ): dspark-share's drafter_ms; its roofline from the
  // share's cost less the extrapolated target's (n_layers target layers + the verify head).
  std::optional<Timed> dspark_drafter(int B, int gamma) const {
    auto it = dspark_.find({B, gamma});
    if (it == dspark_.end()) return std::nullopt;
    const CaseResult& s = *it->second;
    Cost drafter = s.cost;
    auto t = piece_.find({"dspark-target", B, 1 + gamma});
    auto h = piece_.find({"dspark-thead", B, 1 + gamma});
    if (t != piece_.end() && h != piece_.end()) {
      const double L = s.extra_value("n_layers");
      drafter.bytes -= L * t->second->cost.bytes + h->second->cost.bytes;
      drafter.flops -= L * t->second->cost.flops + h->second->cost.flops;
    }
    return Timed{s.extra_value("drafter_ms"), roof_ms(Cost{std::max(0.0, drafter.bytes), std::max(0.0, drafter.flops)}, m_, threads_)};
  }

  double roof(const Cost& c) const { return roof_ms(c, m_, threads_); }

 private:
  const Machine& m_;
  int threads_;
  std::map<std::string, std::map<int, std::map<int, const CaseResult*>>> layer_;  // kind -> B -> S
  std::map<int, const CaseResult*> head_;                                          // rows -> record
  std::map<std::pair<int, int>, const CaseResult*> dspark_;                        // (B, γ)
  std::map<std::tuple<std::string, int, int>, const CaseResult*> piece_;
};

// The layer record a compress ratio is timed by: CSA (4) its own; HCA and SWA (0, not timed)
// the HCA layer's, an upper bound for SWA.
const char* kind_case(int ratio) { return ratio == 4 ? "layer-csa" : "layer-hca"; }

struct Profile {
  std::string name;
  std::vector<double> at;  // at[k - 1] = P(at least k drafts accepted), k = 1 .. size
};

double expected_tokens(const Profile& p, int gamma) {
  double e = 1;
  for (int k = 0; k < gamma && k < static_cast<int>(p.at.size()); ++k) e += p.at[static_cast<size_t>(k)];
  return e;
}

}  // namespace

Result<BenchRecords> read_bench_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::errorf("--from {}: cannot open", path);
  json j;
  try {
    j = json::parse(in);
  } catch (const std::exception& e) {
    return Status::errorf("--from {}: not JSON: {}", path, e.what());
  }
  if (!j.is_object() || !j.contains("cases") || !j["cases"].is_array() || !j.contains("machine"))
    return Status::errorf("--from {}: not a dsv4 bench JSON (needs \"machine\" and a \"cases\" array)", path);
  BenchRecords r;
  try {
    const json& m = j["machine"];
    for (const auto& [t, v] : m.at("read_gbps").items()) r.machine.read_gbps[std::stoi(t)] = v.get<double>();
    for (const auto& [t, v] : m.at("peak_gflops").items()) r.machine.peak_gflops[std::stoi(t)] = v.get<double>();
    r.machine.isa = m.value("isa", "");
    static const std::set<std::string> kFixed = {"case", "phase", "shape", "B", "S", "T", "threads", "step_ms",
                                                 "bytes", "flops", "experts_hit", "pool_runs"};
    for (const json& c : j["cases"]) {
      CaseResult x;
      x.name = c.at("case").get<std::string>();
      x.phase = c.at("phase").get<std::string>();
      x.shape = c.value("shape", "");
      x.B = c.at("B").get<int>();
      x.S = c.at("S").get<int>();
      x.T = c.at("T").get<int>();
      x.threads = c.at("threads").get<int>();
      x.step_ms = c.at("step_ms").get<double>();
      x.cost = Cost{c.at("bytes").get<double>(), c.at("flops").get<double>()};
      x.experts_hit = c.value("experts_hit", -1.0);
      x.pool_runs = c.value("pool_runs", -1.0);
      for (const auto& [k, v] : c.items()) {
        if (kFixed.count(k)) continue;
        if (v.is_number()) x.extra.emplace_back(k, v.get<double>());
        else if (v.is_array() && std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_number(); }))
          x.extra_lists.emplace_back(k, v.get<std::vector<double>>());
      }
      r.cases.push_back(std::move(x));
    }
  } catch (const std::exception& e) {
    return Status::errorf("--from {}: malformed record: {}", path, e.what());
  }
  return r;
}

namespace {

// The batches to project: B 1 and 8 where both layer kinds were measured, else every B <= 8.
std::set<int> projection_batches(const StepModel& model) {
  std::set<int> batches;
  for (int B : model.layer_batches("layer-csa"))
    if (model.has_layer("layer-hca", B) && (B == 1 || B == 8)) batches.insert(B);
  if (batches.empty())
    for (int B : model.layer_batches("layer-csa"))
      if (model.has_layer("layer-hca", B) && B <= 8) batches.insert(B);
  return batches;
}

struct Profiles {
  std::vector<Profile> mtp, dspark;
  std::map<int, Profile> dspark_measured;  // γ -> profile
};

// Acceptance profiles: measured (spec-e2e, the lowest B per variant), published, hypothetical.
Profiles acceptance_profiles(const std::vector<CaseResult>& cases, std::vector<std::string>& notes) {
  Profiles out;
  std::set<std::string> seen;
  std::vector<const CaseResult*> e2e;
  for (const CaseResult& c : cases)
    if (c.name == "spec-e2e") e2e.push_back(&c);
  std::stable_sort(e2e.begin(), e2e.end(), [](const CaseResult* a, const CaseResult* b) { return a->B < b->B; });
  for (const CaseResult* c : e2e) {
    if (!seen.insert(c->shape).second) continue;
    for (const auto& [k, v] : c->extra_lists) {
      if (k != "acceptance_at" || v.empty()) continue;
      Profile p{fmt::format("built-in {} (measured, B {})", c->shape, c->B), v};
      if (c->shape == "mtp") out.mtp.push_back(p);
      else if (c->shape.rfind("dspark", 0) == 0) out.dspark_measured[static_cast<int>(v.size())] = p;
    }
  }
  if (e2e.empty()) notes.push_back("spec-flash: no spec-e2e records: no measured acceptance profiles");
  out.mtp.push_back(Profile{"DeepSeek-V3 MTP (published: 0.85-0.90)", {0.85}});
  for (double p : {0.6, 0.8}) {
    Profile q{fmt::format("i.i.d. p = {:.1f} (hypothetical)", p), {}};
    for (int k = 1; k <= 7; ++k) q.at.push_back(std::pow(p, k));
    out.mtp.push_back(q);
    out.dspark.push_back(q);
  }
  return out;
}

}  // namespace

std::vector<CaseResult> project_spec_flash(const std::vector<CaseResult>& cases, const Machine& m,
                                           const ModelConfig& full, int threads, std::vector<std::string>& notes) {
  const StepModel model(cases, m, threads);
  std::map<std::string, int> layers;  // case name -> layers of that kind
  for (int l = 0; l < full.num_hidden_layers; ++l) layers[kind_case(full.layer_ratio(l))] += 1;
  const std::string mtp_kind = full.n_mtp_layers() > 0 ? kind_case(full.layer_ratio(full.num_hidden_layers)) : "";
  // e_proj and h_proj: two FP8 [D, D] matrices per MTP draft, at their roofline.
  const double D = static_cast<double>(full.hidden_size);
  const auto mtp_proj = [&](int B) {
    const double ms = model.roof(Cost{2 * D * D * (1 + 1.0 / (128 * 128)), 2 * 2 * B * D * D});
    return Timed{ms, ms};
  };

  const std::set<int> batches = projection_batches(model);
  if (batches.empty()) {
    notes.push_back("spec-flash: no layer-csa and layer-hca decode records at the same B (run those cases, or --from "
                    "a JSON that has them)");
    return {};
  }
  const Profiles profiles = acceptance_profiles(cases, notes);
  const std::vector<Profile>& mtp_profiles = profiles.mtp;
  const std::vector<Profile>& dspark_profiles = profiles.dspark;
  const std::map<int, Profile>& dspark_measured = profiles.dspark_measured;

  std::vector<CaseResult> out;
  for (int B : batches) {
    bool est = false;
    // The target step over S rows per request.
    const auto target = [&](int S) -> std::optional<Timed> {
      Timed t;
      for (const auto& [kind, n] : layers) {
        std::optional<Timed> l = model.layer(kind, B, S, &est);
        if (!l) return std::nullopt;
        t += n * *l;
      }
      std::optional<Timed> h = model.head(B * S, &est);
      if (!h) return std::nullopt;
      t += *h;
      return t;
    };
    const std::optional<Timed> plain = target(1);
    if (!plain) {
      notes.push_back(fmt::format("spec-flash: B {}: no head records", B));
      continue;
    }
    const auto add = [&](const std::string& method, int gamma, const std::string& profile, double e, Timed round,
                         bool estimated) {
      CaseResult c = timed_case("spec-flash", "projection", fmt::format("{} g={} {}", method, gamma, profile), B,
                                1 + gamma, threads, {round.ms}, Cost{});
      c.measured_tokens_per_s = B * e / (round.ms / 1e3);
      c.extra = {{"gamma", gamma},
                 {"expected_tokens", e},
                 {"roofline_ms", round.roof_ms},
                 {"roofline_tokens_per_s", B * e / (round.roof_ms / 1e3)},
                 {"speedup", (B * e / round.ms) / (B / plain->ms)},
                 {"roofline_speedup", (B * e / round.roof_ms) / (B / plain->roof_ms)},
                 {"estimated", estimated ? 1 : 0}};
      out.push_back(c);
    };
    add("plain", 0, "", 1, *plain, est);
    // MTP: one draft per round (the engine's MTP).
    if (!mtp_kind.empty()) {
      bool e2 = est;
      std::optional<Timed> verify = target(2);
      std::optional<Timed> layer = model.layer(mtp_kind, B, 1, &e2);
      std::optional<Timed> head = model.head(B, &e2);
      if (verify && layer && head) {
        Timed round = *verify;
        round += *layer;
        round += *head;
        round += mtp_proj(B);
        for (const Profile& p : mtp_profiles) add("mtp", 1, p.name, expected_tokens(p, 1), round, e2);
      }
    }
    // DSpark γ = 1..7 where the drafter was measured.
    bool any = false;
    for (int gamma = 1; gamma <= 7; ++gamma) {
      std::optional<Timed> drafter = model.dspark_drafter(B, gamma);
      if (!drafter) continue;
      bool e2 = est;
      std::optional<Timed> verify = target(1 + gamma);
      if (!verify) continue;
      any = true;
      Timed round = *verify;
      round += *drafter;
      std::vector<Profile> ps = dspark_profiles;
      if (auto it = dspark_measured.find(gamma); it != dspark_measured.end()) ps.insert(ps.begin(), it->second);
      for (const Profile& p : ps) add("dspark", gamma, p.name, expected_tokens(p, gamma), round, e2 || est);
    }
    if (!any) notes.push_back(fmt::format("spec-flash: B {}: no dspark-share records (run --cases dspark)", B));
  }
  return out;
}

void print_spec_flash(const std::vector<CaseResult>& rows, const std::string& model) {
  if (rows.empty()) return;
  std::printf(
      "\nspec-flash: PROJECTION for %s decode (not a measurement): t_round = t_target(B, 1 + g) + t_draft(B, g), "
      "t_target = sum of layers x t_layer + t_head(B(1 + g)); tokens/s = B E / t_round, E = 1 + sum_k<=g "
      "P(>= k accepted); roofline = every term at max(bytes / bandwidth, FLOPs / peak); ~ = some term "
      "interpolated or scaled\n",
      model.c_str());
  std::printf("%4s %-52s %6s %10s %11s %7s %10s %11s %7s\n", "B", "method g profile", "E", "round ms", "tokens/s",
              "x plain", "roof ms", "roof tok/s", "x plain");
  for (const CaseResult& c : rows)
    std::printf("%4d %-52s %6.2f %10.2f %10.3g%s %6.2fx %10.2f %11.3g %6.2fx\n", c.B, c.shape.c_str(),
                c.extra_value("expected_tokens"), c.step_ms, c.tokens_per_s(), c.extra_value("estimated") > 0 ? "~" : " ",
                c.extra_value("speedup"), c.extra_value("roofline_ms"), c.extra_value("roofline_tokens_per_s"),
                c.extra_value("roofline_speedup"));
}

}  // namespace dsv4::bench
