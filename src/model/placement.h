// Weight placement over ranks (runtime.md §6.2) and the model's topology constraints
// (§6.1, model.md §14.2). Per rank: everything replicated except
//   attn.wo_a   row shard: the rank's output groups [tp_rank·G_o/tp, …)
//   attn.wo_b   column shard: the input columns of those groups (copied once at load)
//   ffn.experts.{e}.*  expert-parallel: experts [ep_rank·E/ep, …) of the rank's EP group
//   head.weight vocabulary shard: rows [tp_rank·V/tp, …)
// (scales follow their matrices).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/config.h"
#include "parallel/topology.h"

namespace dsv4 {

// o_groups and vocab_size divisible by tp; o_lora_rank a multiple of 128 when tp > 1;
// n_routed_experts divisible by ep. Errors name the field and the flag.
Status validate_topology(const ModelConfig& cfg, const Topology& t);

enum class Placement { kReplicated, kOutputGroups, kInputGroups, kExperts, kVocab };
const char* placement_name(Placement p);

// Placement of one checkpoint tensor by name (and, for experts, whether rank holds it).
Placement placement_of(const std::string& tensor_name);

struct RankWeights {
  int64_t bytes[5] = {};  // by Placement, this rank's share
  int64_t total() const;
};

// Bytes of a tensor of `bytes` in all that rank t.rank holds (its share by placement_of).
int64_t rank_share(const std::string& tensor_name, int64_t bytes, const ModelConfig& cfg, const Topology& t);

// Weight bytes rank t.rank holds (checkpoint form; the wo_b shard at its stored width).
RankWeights rank_weights(const ModelConfig& cfg, const Topology& t);

// Whether rank t.rank reads any of the tensor's data: false only for the routed experts
// outside its EP share (sharded matrices are read in part).
bool rank_reads(const std::string& tensor_name, const ModelConfig& cfg, const Topology& t);

}  // namespace dsv4
