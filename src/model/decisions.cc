#include "model/decisions.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace dsv4 {
namespace {

auto key_of(const Decision& d) { return std::make_tuple(d.mtp, d.layer, d.seq, d.pos, !d.idx); }

std::string describe(size_t i, const Decision& d) {
  return fmt::format("decisions[{}] (block {}, kind {}, layer {}, pos {})", i, d.mtp ? "mtp" : "main",
                     d.idx ? "idx" : "moe", d.layer, d.pos);
}

// Ids in [0, bound), distinct unless `repeats`.
Status check_ids(const std::vector<int32_t>& ids, int64_t bound, bool repeats, const char* what) {
  for (size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] < 0 || ids[k] >= bound)
      return Status::errorf("selected[{}] = {} outside [0, {}) ({})", k, ids[k], bound, what);
    if (!repeats)
      for (size_t j = 0; j < k; ++j)
        if (ids[j] == ids[k]) return Status::errorf("selected[{}] = {} repeats selected[{}]", k, ids[k], j);
  }
  return Status();
}

Status check_entry(const ModelConfig& cfg, const Decision& d) {
  const int n_layers = d.mtp ? cfg.n_mtp_layers() : cfg.num_hidden_layers;
  if (d.layer < 0 || d.layer >= n_layers)
    return Status::errorf("layer {} outside [0, {}) of block {}", d.layer, n_layers, d.mtp ? "mtp" : "main");
  if (d.pos < 0) return Status::errorf("pos {} is negative", d.pos);
  const int l = d.mtp ? cfg.num_hidden_layers + d.layer : d.layer;
  if (d.idx) {
    if (cfg.attention_kind(l) != AttentionKind::kCSA)
      return Status::errorf("kind idx needs a CSA layer (compress ratio 4), layer has ratio {}", cfg.layer_ratio(l));
    const int64_t visible = (d.pos + 1) / kCsaRatio;
    const int64_t want = std::min<int64_t>(cfg.index_topk, visible);
    if (static_cast<int64_t>(d.selected.size()) != want)
      return Status::errorf("{} ids selected, the indexer picks min(index_topk = {}, (pos + 1) / 4 = {}) = {}",
                            d.selected.size(), cfg.index_topk, visible, want);
    return check_ids(d.selected, visible, false, "entries visible at pos");
  }
  if (static_cast<int64_t>(d.selected.size()) != cfg.num_experts_per_tok)
    return Status::errorf("{} ids selected, num_experts_per_tok = {}", d.selected.size(), cfg.num_experts_per_tok);
  return check_ids(d.selected, cfg.n_routed_experts, !d.mtp && cfg.is_hash_layer(d.layer), "n_routed_experts");
}

}  // namespace

void sort_decisions(std::vector<Decision>& d) {
  std::stable_sort(d.begin(), d.end(), [](const Decision& a, const Decision& b) { return key_of(a) < key_of(b); });
}

std::string decisions_to_json(const std::vector<Decision>& decisions) {
  std::string s = "{\"decisions\": [";
  auto it = std::back_inserter(s);
  for (size_t i = 0; i < decisions.size(); ++i) {
    const Decision& d = decisions[i];
    fmt::format_to(it, "{}\n  {{\"block\": \"{}\", \"kind\": \"{}\", \"layer\": {}, \"pos\": {}, \"selected\": [",
                   i == 0 ? "" : ",", d.mtp ? "mtp" : "main", d.idx ? "idx" : "moe", d.layer, d.pos);
    for (size_t k = 0; k < d.selected.size(); ++k) fmt::format_to(it, "{}{}", k == 0 ? "" : ", ", d.selected[k]);
    s += "]}";
  }
  s += decisions.empty() ? "]}\n" : "\n]}\n";
  return s;
}

Result<std::vector<Decision>> decisions_from_json(std::string_view text) {
  using nlohmann::json;
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    return Status::errorf("decisions: not valid JSON: {}", e.what());
  }
  if (!j.is_object() || !j.contains("decisions") || !j["decisions"].is_array())
    return Status::error("decisions: expected an object with an array \"decisions\"");
  std::vector<Decision> out;
  const json& arr = j["decisions"];
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& e = arr[i];
    auto bad = [&](std::string_view why) { return Status::errorf("decisions[{}]: {}", i, why); };
    if (!e.is_object()) return bad("not an object");
    for (const char* f : {"block", "kind", "layer", "pos", "selected"})
      if (!e.contains(f)) return bad(fmt::format("missing field \"{}\"", f));
    Decision d;
    const json &block = e["block"], &kind = e["kind"], &layer = e["layer"], &pos = e["pos"], &sel = e["selected"];
    if (!block.is_string() || (block != "main" && block != "mtp")) return bad("\"block\" must be \"main\" or \"mtp\"");
    if (!kind.is_string() || (kind != "moe" && kind != "idx")) return bad("\"kind\" must be \"moe\" or \"idx\"");
    if (!layer.is_number_integer() || layer.get<int64_t>() < 0 || layer.get<int64_t>() > (1 << 20))
      return bad("\"layer\" must be a non-negative integer");
    if (!pos.is_number_integer() || pos.get<int64_t>() < 0) return bad("\"pos\" must be a non-negative integer");
    if (!sel.is_array()) return bad("\"selected\" must be an array of integers");
    d.mtp = block == "mtp";
    d.idx = kind == "idx";
    d.layer = static_cast<int>(layer.get<int64_t>());
    d.pos = pos.get<int64_t>();
    for (size_t k = 0; k < sel.size(); ++k) {
      constexpr int64_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
      if (!sel[k].is_number_integer() || sel[k].get<int64_t>() < lo || sel[k].get<int64_t>() > hi)
        return bad(fmt::format("\"selected\"[{}] is not a 32-bit integer", k));
      d.selected.push_back(static_cast<int32_t>(sel[k].get<int64_t>()));
    }
    out.push_back(std::move(d));
  }
  return out;
}

Result<DecisionTable> DecisionTable::create(const ModelConfig& cfg, std::vector<Decision> entries) {
  for (size_t i = 0; i < entries.size(); ++i) {
    Status st = check_entry(cfg, entries[i]);
    if (!st.ok()) return st.with_context(describe(i, entries[i]));
  }
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return key_of(entries[a]) < key_of(entries[b]); });
  for (size_t k = 1; k < order.size(); ++k)
    if (key_of(entries[order[k - 1]]) == key_of(entries[order[k]]))
      return Status::errorf("{}: the same key as decisions[{}]", describe(order[k], entries[order[k]]), order[k - 1]);
  DecisionTable t;
  t.entries_ = std::move(entries);
  sort_decisions(t.entries_);
  return t;
}

const Decision* DecisionTable::find(bool mtp, bool idx, int layer, int32_t seq, int64_t pos) const {
  const auto key = std::make_tuple(mtp, layer, seq, pos, !idx);
  auto it = std::lower_bound(entries_.begin(), entries_.end(), key,
                             [](const Decision& d, const auto& k) { return key_of(d) < k; });
  return it != entries_.end() && key_of(*it) == key ? &*it : nullptr;
}

}  // namespace dsv4
