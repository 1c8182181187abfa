// Discrete decisions of a forward (model.md §0.3 items 2-3): the routed experts of a token
// in a layer (kind moe) and the compressed entries the lightning indexer picked for a query
// (kind idx, CSA layers). Dumped by `dsv4 logits --decisions-out`, forced by
// `--decisions-in`: decision replay holds them equal on both sides of a Level-A comparison
// (engine vs the whole-model reference, or two engines) so that logits can be compared past
// a near-tie.
//
// Key: (block main|mtp, layer, seq, pos, kind). The MTP block is layer 0. `seq` is the
// sequence slot (0 in a teacher-forced run; JSON carries no slot).
// `selected`, in the order it is used:
//   moe  the K routed expert ids in router order (descending biased score; tid2eid row order
//        on hash layers); the combine adds them in ascending id, so only the set matters for
//        the output, but the order is kept as dumped;
//   idx  the min(index_topk, ⌊(pos+1)/4⌋) picked entries in descending score order, which is
//        their order in the attention list (model.md §0.4.7) and matters at Level A.
//
// The DSpark drafter (dspark.md §3.10), block "dspark": kind moe = the routed experts of block
// row `row` in stage `layer` of the round with anchor `pos`; kind draft = d_{row+1} of that
// round (selected = [the id]; forcing it continues the Markov chain with the forced token).
// Block positions repeat from round to round, so the anchor is part of every key.
//
// JSON (decisions_to_json / decisions_from_json):
//   {"decisions": [{"block": "main", "kind": "moe", "layer": 0, "pos": 0, "selected": [3, 5]},
//                  {"block": "dspark", "kind": "moe", "stage": 1, "anchor": 7, "row": 2, "selected": [0, 4]},
//                  {"block": "dspark", "kind": "draft", "anchor": 7, "row": 2, "selected": [311]},
//                  ...]}
// one entry per line; other fields of an entry (e.g. a "margin") are ignored when read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/config.h"

namespace dsv4 {

struct Decision {
  bool mtp = false;  // block "mtp" | "main"
  bool idx = false;  // kind "idx" | "moe"
  int layer = 0;     // dspark: the stage (0 for a draft)
  int32_t seq = 0;
  int64_t pos = 0;   // dspark: the anchor position
  std::vector<int32_t> selected;
  bool dspark = false;  // block "dspark"
  bool draft = false;   // kind "draft" (dspark)
  int32_t row = 0;      // dspark: the block row
};

// Sorts by (block main < mtp < dspark, layer, seq, pos, row, kind idx < moe < draft); stable.
void sort_decisions(std::vector<Decision>& d);

std::string decisions_to_json(const std::vector<Decision>& decisions);
// Parses the JSON above (seq = 0). Errors name the entry index and the field: not an object,
// a missing or mistyped field, an unknown block or kind, a negative layer or position.
Result<std::vector<Decision>> decisions_from_json(std::string_view text);

// Forced decisions, checked against the model once and looked up without allocation
// (a decode step may consult it).
class DecisionTable {
 public:
  DecisionTable() = default;
  // Every entry must fit the model; the error names the entry (index, block, kind, layer,
  // pos) and the rule: layer in range (main: [0, num_hidden_layers); mtp: [0,
  // n_mtp_layers()); dspark: a stage in [0, NS)); a draft: one id in [0, vocab_size); kind idx only on a CSA layer of the main block; moe: exactly
  // num_experts_per_tok ids in [0, n_routed_experts), distinct unless the layer is a hash
  // layer; idx: exactly min(index_topk, ⌊(pos+1)/4⌋) distinct ids in [0, ⌊(pos+1)/4⌋);
  // no key twice.
  static Result<DecisionTable> create(const ModelConfig& cfg, std::vector<Decision> entries);

  // The forced decision of this key, or nullptr.
  const Decision* find(bool mtp, bool idx, int layer, int32_t seq, int64_t pos) const;
  // The forced DSpark decision (stage = 0 for a draft), or nullptr.
  const Decision* find_dspark(bool draft, int stage, int32_t seq, int64_t anchor, int32_t row) const;
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<Decision> entries_;  // sorted by key
};

// What a forward obeys and records: forced decisions (nullptr: none) and a log that
// receives every decision used, forced or not (nullptr: none).
struct DecisionIO {
  const DecisionTable* forced = nullptr;
  std::vector<Decision>* log = nullptr;
};

}  // namespace dsv4
