#include "model/bench_fractions.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/check.h"
#include "io/file_util.h"

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
// A string field, or "" when absent or not a string.
std::string text_of(const nlohmann::json& c, const char* key) {
  const auto it = c.find(key);
  return it != c.end() && it->is_string() ? it->get<std::string>() : "";
}
bool step_record(const nlohmann::json& c) {
  const std::string name = text_of(c, "case");
  const auto s = c.find("S");
  return text_of(c, "phase") == "decode" && s != c.end() && s->is_number_integer() && s->get<int64_t>() == 1 &&
         (name == "head" || name.rfind("layer-", 0) == 0);
}
bool within(const nlohmann::json& v, double lo, double hi) {  // lo < v <= hi
  return v.is_number() && v.get<double>() > lo && v.get<double>() <= hi;
}
}  // namespace

Result<BenchFractions> read_bench_fractions(const std::string& path) {
  constexpr uint64_t kMaxBenchBytes = 64 << 20;  // a bench --json file is a few hundred KiB
  Result<std::vector<uint8_t>> bytes = read_file(path, kMaxBenchBytes);
  if (!bytes.ok()) return Status::errorf("--bench {}", bytes.message());  // "--bench PATH: cannot open: ..."
  return parse_bench_fractions(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()), path);
}

Result<BenchFractions> parse_bench_fractions(std::string_view text, const std::string& path) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::errorf("--bench {}: not JSON (a `dsv4 bench --json` file)", path);
  if (!j.is_object() || !j.contains("cases") || !j["cases"].is_array())
    return Status::errorf("--bench {}: no \"cases\" list (a `dsv4 bench --json` file)", path);

  BenchFractions out;
  out.path = path;
  std::vector<const nlohmann::json*> used;
  constexpr double kMaxCount = 1 << 20;
  for (size_t i = 0; i < j["cases"].size(); ++i) {
    const nlohmann::json& c = j["cases"][i];
    if (!c.is_object()) return Status::errorf("--bench {}: cases[{}] is not an object", path, i);
    if (!step_record(c)) continue;
    const std::string name = text_of(c, "case");
    for (const char* key : {"B", "threads", "step_ms", "bandwidth_fraction"})
      if (!c.contains(key) || !c[key].is_number())
        return Status::errorf("--bench {}: cases[{}] ({}) has no number \"{}\"", path, i, name, key);
    if (!c["B"].is_number_integer() || !within(c["B"], 0, kMaxCount) || !c["threads"].is_number_integer() ||
        !within(c["threads"], 0, kMaxCount) || !within(c["step_ms"], 0, 1e9) ||
        !within(c["bandwidth_fraction"], 0, 100))
      return Status::errorf("--bench {}: cases[{}] ({}) needs B and threads integers in [1, {}], step_ms in "
                            "(0, 1e9] and bandwidth_fraction in (0, 100]",
                            path, i, name, kMaxCount);
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
