#include "model/placement.h"

#include <cstdlib>

#include "model/checkpoint_table.h"

namespace dsv4 {

Status validate_topology(const ModelConfig& cfg, const Topology& t) {
  if (cfg.o_groups % t.tp != 0)
    return Status::errorf("--tp {} does not divide o_groups = {} (the output projection is sharded by group)", t.tp,
                          cfg.o_groups);
  if (cfg.vocab_size % t.tp != 0)
    return Status::errorf("--tp {} does not divide vocab_size = {} (the LM head is sharded by vocabulary)", t.tp,
                          cfg.vocab_size);
  if (t.tp > 1 && cfg.o_lora_rank % 128 != 0)
    return Status::errorf("o_lora_rank = {} must be a multiple of 128 with --tp {} (wo_b input blocks per group)",
                          cfg.o_lora_rank, t.tp);
  if (cfg.n_routed_experts % t.ep != 0)
    return Status::errorf("--ep {} does not divide n_routed_experts = {}", t.ep, cfg.n_routed_experts);
  return Status();
}

const char* placement_name(Placement p) {
  switch (p) {
    case Placement::kReplicated: return "replicated";
    case Placement::kOutputGroups: return "wo_a (output groups)";
    case Placement::kInputGroups: return "wo_b (input columns)";
    case Placement::kExperts: return "routed experts";
    case Placement::kVocab: return "head (vocabulary)";
  }
  return "?";
}

namespace {
bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }
// Expert index of "…ffn.experts.{e}.…" (-1 if none).
int64_t expert_index(const std::string& name) {
  const size_t at = name.find("ffn.experts.");
  if (at == std::string::npos) return -1;
  return std::strtoll(name.c_str() + at + 12, nullptr, 10);
}
}  // namespace

Placement placement_of(const std::string& n) {
  if (has(n, "ffn.experts.")) return Placement::kExperts;
  if (has(n, "attn.wo_a.")) return Placement::kOutputGroups;
  if (has(n, "attn.wo_b.")) return Placement::kInputGroups;
  if (n.rfind("head.", 0) == 0) return Placement::kVocab;
  return Placement::kReplicated;
}

int64_t RankWeights::total() const {
  int64_t s = 0;
  for (int64_t b : bytes) s += b;
  return s;
}

bool rank_reads(const std::string& name, const ModelConfig& cfg, const Topology& t) {
  if (placement_of(name) != Placement::kExperts) return true;
  const Share experts = share_of(cfg.n_routed_experts, t.ep_rank(), t.ep);
  const int64_t e = expert_index(name);
  return e >= experts.begin && e < experts.end;
}

int64_t rank_share(const std::string& tensor_name, int64_t bytes, const ModelConfig& cfg, const Topology& t) {
  switch (placement_of(tensor_name)) {
    case Placement::kReplicated: return bytes;
    case Placement::kExperts: return rank_reads(tensor_name, cfg, t) ? bytes : 0;
    case Placement::kOutputGroups:
    case Placement::kInputGroups:
    case Placement::kVocab: return share_of(bytes, t.tp_rank(), t.tp).size();  // 1/tp of the rows / columns
  }
  return bytes;
}

RankWeights rank_weights(const ModelConfig& cfg, const Topology& t) {
  RankWeights w;
  for (const TensorSpec& s : expected_tensors(cfg))
    w.bytes[static_cast<int>(placement_of(s.name))] += rank_share(s.name, static_cast<int64_t>(s.n_bytes()), cfg, t);
  return w;
}

}  // namespace dsv4
