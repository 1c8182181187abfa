#include "model/bench_fractions.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/check.h"

namespace dsv4 {

const BenchFraction& BenchFractions::nearest(int64_t b) const {
  DSV4_CHECK(!by_batch.empty() && b > 0);
  const auto distance = [&](const BenchFraction& f) {
    return std::abs(std::log(static_cast<double>(f.batch) / static_cast<double>(b)));
  };
  const BenchFraction* best = &by_batch[0];
  for (const BenchFraction& f : by_batch)
    if (distance(f) < distance(*best)) best = &f;
  return *best;
}

namespace {
bool step_record(const nlohmann::json& c) {
  const std::string name = c.value("case", "");
  return c.value("phase", "") == "decode" && c.value("S", 0) == 1 && (name == "head" || name.rfind("layer-", 0) == 0);
}
}  // namespace

Result<BenchFractions> read_bench_fractions(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::errorf("--bench {}: cannot open the file", path);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::errorf("--bench {}: not JSON (a `dsv4 bench --json` file)", path);
  if (!j.is_object() || !j.contains("cases") || !j["cases"].is_array())
    return Status::errorf("--bench {}: no \"cases\" list (a `dsv4 bench --json` file)", path);

  BenchFractions out;
  out.path = path;
  std::vector<const nlohmann::json*> used;
  for (size_t i = 0; i < j["cases"].size(); ++i) {
    const nlohmann::json& c = j["cases"][i];
    if (!c.is_object()) return Status::errorf("--bench {}: cases[{}] is not an object", path, i);
    if (!step_record(c)) continue;
    for (const char* key : {"B", "threads", "step_ms", "bandwidth_fraction"})
      if (!c.contains(key) || !c[key].is_number())
        return Status::errorf("--bench {}: cases[{}] ({}) has no number \"{}\"", path, i, c.value("case", ""), key);
    if (c["B"].get<int64_t>() < 1 || !(c["step_ms"].get<double>() > 0) ||
        !(c["bandwidth_fraction"].get<double>() > 0))
      return Status::errorf("--bench {}: cases[{}] ({}) needs B >= 1, step_ms > 0 and bandwidth_fraction > 0", path,
                            i, c.value("case", ""));
    used.push_back(&c);
    out.threads = std::max(out.threads, c["threads"].get<int>());
  }
  if (used.empty())
    return Status::errorf("--bench {}: no decode records at S = 1 of the head or a layer-* case", path);

  std::map<int64_t, std::pair<double, double>> sums;  // B -> (Σ f·t, Σ t)
  for (const nlohmann::json* c : used) {
    if ((*c)["threads"].get<int>() != out.threads) continue;
    const double t = (*c)["step_ms"].get<double>();
    auto& [ft, total] = sums[(*c)["B"].get<int64_t>()];
    ft += (*c)["bandwidth_fraction"].get<double>() * t;
    total += t;
  }
  for (const auto& [b, s] : sums) out.by_batch.push_back({b, s.first / s.second});
  return out;
}

}  // namespace dsv4
