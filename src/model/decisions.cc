#include "model/decisions.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/json_bounded.h"

namespace dsv4 {
namespace {

int block_rank(const Decision& d) { return d.dspark ? 2 : d.mtp ? 1 : 0; }
int kind_rank(const Decision& d) { return d.draft ? 2 : d.idx ? 0 : 1; }
auto key_of(const Decision& d) { return std::make_tuple(block_rank(d), d.layer, d.seq, d.pos, d.row, kind_rank(d)); }

const char* block_name(const Decision& d) { return d.dspark ? "dspark" : d.mtp ? "mtp" : "main"; }
const char* kind_name(const Decision& d) { return d.draft ? "draft" : d.idx ? "idx" : "moe"; }

std::string describe(size_t i, const Decision& d) {
  if (d.dspark)
    return fmt::format("decisions[{}] (block dspark, kind {}, stage {}, anchor {}, row {})", i, kind_name(d),
                       d.layer, d.pos, d.row);
  return fmt::format("decisions[{}] (block {}, kind {}, layer {}, pos {})", i, block_name(d), kind_name(d), d.layer,
                     d.pos);
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
  if (d.dspark) {
    if (!cfg.dspark) return Status::error("block dspark, but the checkpoint has no DSpark drafter");
    if (d.pos < 0 || d.row < 0) return Status::errorf("anchor {} and row {} must not be negative", d.pos, d.row);
    if (d.draft) {
      if (d.selected.size() != 1) return Status::errorf("{} ids selected, a draft is one token", d.selected.size());
      return check_ids(d.selected, cfg.vocab_size, false, "vocab_size");
    }
    if (d.layer < 0 || d.layer >= cfg.n_dspark_stages())
      return Status::errorf("stage {} outside [0, {})", d.layer, cfg.n_dspark_stages());
    if (static_cast<int64_t>(d.selected.size()) != cfg.num_experts_per_tok)
      return Status::errorf("{} ids selected, num_experts_per_tok = {}", d.selected.size(), cfg.num_experts_per_tok);
    return check_ids(d.selected, cfg.n_routed_experts, false, "n_routed_experts");
  }
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
    s += i == 0 ? "\n  {" : ",\n  {";
    if (d.dspark && d.draft)
      fmt::format_to(it, "\"block\": \"dspark\", \"kind\": \"draft\", \"anchor\": {}, \"row\": {}, \"selected\": [", d.pos,
                     d.row);
    else if (d.dspark)
      fmt::format_to(it, "\"block\": \"dspark\", \"kind\": \"moe\", \"stage\": {}, \"anchor\": {}, \"row\": {}, \"selected\": [",
                     d.layer, d.pos, d.row);
    else
      fmt::format_to(it, "\"block\": \"{}\", \"kind\": \"{}\", \"layer\": {}, \"pos\": {}, \"selected\": [", block_name(d),
                     kind_name(d), d.layer, d.pos);
    for (size_t k = 0; k < d.selected.size(); ++k) fmt::format_to(it, "{}{}", k == 0 ? "" : ", ", d.selected[k]);
    s += "]}";
  }
  s += decisions.empty() ? "]}\n" : "\n]}\n";
  return s;
}

Result<std::vector<Decision>> decisions_from_json(std::string_view text) {
  using nlohmann::json;
  std::string parser_message;
  Result<json> parsed = parse_json_bounded(text, kMaxJsonDepth, &parser_message);
  if (!parsed.ok())
    return Status::errorf("decisions: not valid JSON: {}", parser_message.empty() ? parsed.message() : parser_message);
  json& j = *parsed;
  if (!j.is_object() || !j.contains("decisions") || !j["decisions"].is_array())
    return Status::error("decisions: expected an object with an array \"decisions\"");
  std::vector<Decision> out;
  const json& arr = j["decisions"];
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& e = arr[i];
    auto bad = [&](std::string_view why) { return Status::errorf("decisions[{}]: {}", i, why); };
    if (!e.is_object()) return bad("not an object");
    if (!e.contains("block")) return bad("missing field \"block\"");
    const json& block = e["block"];
    if (!block.is_string() || (block != "main" && block != "mtp" && block != "dspark"))
      return bad("\"block\" must be \"main\", \"mtp\" or \"dspark\"");
    Decision d;
    d.dspark = block == "dspark";
    d.mtp = block == "mtp";
    if (!e.contains("kind")) return bad("missing field \"kind\"");
    const json& kind = e["kind"];
    if (d.dspark) {
      if (!kind.is_string() || (kind != "moe" && kind != "draft")) return bad("\"kind\" of block dspark must be \"moe\" or \"draft\"");
      d.draft = kind == "draft";
    } else {
      if (!kind.is_string() || (kind != "moe" && kind != "idx")) return bad("\"kind\" must be \"moe\" or \"idx\"");
      d.idx = kind == "idx";
    }
    std::vector<const char*> fields;
    if (!d.dspark) fields = {"layer", "pos"};
    else if (d.draft) fields = {"anchor", "row"};
    else fields = {"stage", "anchor", "row"};
    fields.push_back("selected");
    for (const char* f : fields)
      if (!e.contains(f)) return bad(fmt::format("missing field \"{}\"", f));
    auto index = [&](const char* f, int64_t max, int64_t* out) {
      const json& v = e[f];
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > max) return false;
      *out = v.get<int64_t>();
      return true;
    };
    int64_t layer = 0, pos = 0, row = 0;
    const char* layer_field = d.dspark ? "stage" : "layer";
    const char* pos_field = d.dspark ? "anchor" : "pos";
    if (!(d.dspark && d.draft) && !index(layer_field, 1 << 20, &layer))
      return bad(fmt::format("\"{}\" must be a non-negative integer", layer_field));
    if (!index(pos_field, std::numeric_limits<int64_t>::max(), &pos))
      return bad(fmt::format("\"{}\" must be a non-negative integer", pos_field));
    if (d.dspark && !index("row", 1 << 20, &row)) return bad("\"row\" must be a non-negative integer");
    const json& sel = e["selected"];
    if (!sel.is_array()) return bad("\"selected\" must be an array of integers");
    d.layer = static_cast<int>(layer);
    d.pos = pos;
    d.row = static_cast<int32_t>(row);
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

const Decision* DecisionTable::find_dspark(bool draft, int stage, int32_t seq, int64_t anchor, int32_t row) const {
  const auto key = std::make_tuple(2, draft ? 0 : stage, seq, anchor, row, draft ? 2 : 1);
  auto it = std::lower_bound(entries_.begin(), entries_.end(), key,
                             [](const Decision& d, const auto& k) { return key_of(d) < k; });
  return it != entries_.end() && key_of(*it) == key ? &*it : nullptr;
}

const Decision* DecisionTable::find(bool mtp, bool idx, int layer, int32_t seq, int64_t pos) const {
  const auto key = std::make_tuple(mtp ? 1 : 0, layer, seq, pos, int32_t{0}, idx ? 0 : 1);
  auto it = std::lower_bound(entries_.begin(), entries_.end(), key,
                             [](const Decision& d, const auto& k) { return key_of(d) < k; });
  return it != entries_.end() && key_of(*it) == key ? &*it : nullptr;
}

}  // namespace dsv4
