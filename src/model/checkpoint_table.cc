// The checkpoint tensor table (checkpoint.md §5): names, stored dtypes and shapes per layer kind.
#include "model/checkpoint_table.h"

#include "base/check.h"
#include "base/math.h"

namespace dsv4 {

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t TensorSpec::n_bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }

std::string layer_prefix(const ModelConfig& cfg, int l) {
  if (l < cfg.num_hidden_layers) return fmt::format("layers.{}.", l);
  return fmt::format("mtp.{}.", l - cfg.num_hidden_layers);
}

std::string scale_name_for(const std::string& weight_name) {
  static constexpr std::string_view kSuffix = ".weight";
  DSV4_CHECK(weight_name.size() > kSuffix.size() &&
                 weight_name.compare(weight_name.size() - kSuffix.size(), kSuffix.size(),
                                     kSuffix) == 0,
             "matrix name '{}' does not end in .weight", weight_name);
  return weight_name.substr(0, weight_name.size() - kSuffix.size()) + ".scale";
}

std::vector<TensorSpec> matrix_specs(const TensorSpec& like, StorageForm form) {
  TensorSpec w = like;
  w.role = TensorRole::kMatrix;
  w.form = form;
  w.scale_name.clear();
  w.scale_of.clear();
  const int64_t o = like.out, i = like.in;
  switch (form) {
    case StorageForm::kBF16:
      w.dtype = DType::kBF16;
      w.shape = {o, i};
      return {w};
    case StorageForm::kFP8:
      w.dtype = DType::kF8_E4M3;
      w.shape = {o, i};
      break;
    case StorageForm::kFP4:
      DSV4_CHECK(i % 32 == 0, "FP4 matrix '{}' input dim {} not a multiple of 32", like.name, i);
      w.dtype = DType::kI8;
      w.shape = {o, i / 2};
      break;
    default:
      DSV4_CHECK(false, "matrix '{}' cannot have form {}", like.name, storage_form_name(form));
  }
  TensorSpec s = w;
  s.name = scale_name_for(w.name);
  s.role = TensorRole::kScale;
  s.dtype = DType::kF8_E8M0;
  s.shape = form == StorageForm::kFP8 ? std::vector<int64_t>{ceil_div<int64_t>(o, 128),
                                                             ceil_div<int64_t>(i, 128)}
                                      : std::vector<int64_t>{o, i / 32};
  s.scale_of = w.name;
  s.actq = false;
  w.scale_name = s.name;
  return {w, s};
}

namespace {

// Appends tensors of one layer (or the globals) to a list.
class TableBuilder {
 public:
  TableBuilder(std::vector<TensorSpec>& out, std::string prefix, int layer)
      : out_(out), prefix_(std::move(prefix)), layer_(layer) {}

  void plain(const std::string& name, DType dtype, std::vector<int64_t> shape) {
    TensorSpec t;
    t.name = prefix_ + name;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.role = TensorRole::kPlain;
    t.form = dtype == DType::kF32 ? StorageForm::kF32
             : dtype == DType::kI64 ? StorageForm::kI64
                                    : StorageForm::kBF16;
    t.layer = layer_;
    out_.push_back(std::move(t));
  }
  // A BF16-only projection [out, in] (compressor, weights_proj, gate, embed, head).
  void bf16_matrix(const std::string& name, int64_t o, int64_t i) {
    plain(name, DType::kBF16, {o, i});
    out_.back().out = o;
    out_.back().in = i;
  }
  // A quantizable matrix in `form` (+ its scale).
  void matrix(const std::string& name, int64_t o, int64_t i, StorageForm form, bool actq = true,
              bool routed_expert = false) {
    TensorSpec like;
    like.name = prefix_ + name;
    like.out = o;
    like.in = i;
    like.layer = layer_;
    like.actq = actq;
    like.routed_expert = routed_expert;
    for (auto& t : matrix_specs(like, form)) out_.push_back(std::move(t));
  }

 private:
  std::vector<TensorSpec>& out_;
  std::string prefix_;
  int layer_;
};

void add_compressor(TableBuilder& b, const std::string& p, int ratio, int64_t dim, int64_t D) {
  const int64_t c = ratio == kCsaRatio ? 2 * dim : dim;
  b.bf16_matrix(p + "wkv.weight", c, D);
  b.bf16_matrix(p + "wgate.weight", c, D);
  b.plain(p + "ape", DType::kF32, {ratio, c});
  b.plain(p + "norm.weight", DType::kBF16, {dim});
}

void add_hc_head(TableBuilder& b, const ModelConfig& cfg) {
  b.plain("hc_head_fn", DType::kF32, {cfg.hc_mult, cfg.hc_dim()});
  b.plain("hc_head_base", DType::kF32, {cfg.hc_mult});
  b.plain("hc_head_scale", DType::kF32, {1});
}

}  // namespace

std::vector<TensorSpec> global_tensors(const ModelConfig& cfg) {
  std::vector<TensorSpec> out;
  TableBuilder b(out, "", -1);
  b.bf16_matrix("embed.weight", cfg.vocab_size, cfg.hidden_size);
  b.bf16_matrix("head.weight", cfg.vocab_size, cfg.hidden_size);
  b.plain("norm.weight", DType::kBF16, {cfg.hidden_size});
  add_hc_head(b, cfg);
  return out;
}

std::vector<TensorSpec> layer_tensors(const ModelConfig& cfg, int l) {
  DSV4_CHECK(l >= 0 && l < cfg.n_checkpoint_layers(), "layer {} of {}", l,
             cfg.n_checkpoint_layers());
  std::vector<TensorSpec> out;
  TableBuilder b(out, layer_prefix(cfg, l), l);
  const int64_t D = cfg.hidden_size, H = cfg.num_attention_heads, Dh = cfg.head_dim;
  const int64_t Rq = cfg.q_lora_rank, F = cfg.moe_intermediate_size, E = cfg.n_routed_experts;
  const int64_t M = cfg.hc_mix();
  const StorageForm dense = cfg.dense_storage(), expert = cfg.expert_storage();
  const bool mtp = cfg.is_mtp_layer(l);
  const bool stage = cfg.is_dspark_stage(l);

  b.plain("attn_norm.weight", DType::kBF16, {D});
  b.plain("ffn_norm.weight", DType::kBF16, {D});
  for (const char* which : {"attn", "ffn"}) {
    b.plain(fmt::format("hc_{}_fn", which), DType::kF32, {M, cfg.hc_dim()});
    b.plain(fmt::format("hc_{}_base", which), DType::kF32, {M});
    b.plain(fmt::format("hc_{}_scale", which), DType::kF32, {3});
  }
  // Attention.
  b.plain("attn.attn_sink", DType::kF32, {H});
  b.matrix("attn.wq_a.weight", Rq, D, dense);
  b.plain("attn.q_norm.weight", DType::kBF16, {Rq});
  b.matrix("attn.wq_b.weight", H * Dh, Rq, dense);
  b.matrix("attn.wkv.weight", Dh, D, dense);
  b.plain("attn.kv_norm.weight", DType::kBF16, {Dh});
  b.matrix("attn.wo_a.weight", cfg.wo_b_in(), cfg.wo_a_in(), dense, /*actq=*/false);
  b.matrix("attn.wo_b.weight", D, cfg.wo_b_in(), dense);
  const int ratio = cfg.layer_ratio(l);
  if (ratio != 0) add_compressor(b, "attn.compressor.", ratio, Dh, D);
  if (ratio == kCsaRatio) {
    b.matrix("attn.indexer.wq_b.weight", int64_t{cfg.index_n_heads} * cfg.index_head_dim, Rq,
             dense);
    b.bf16_matrix("attn.indexer.weights_proj.weight", cfg.index_n_heads, D);
    add_compressor(b, "attn.indexer.compressor.", ratio, cfg.index_head_dim, D);
  }
  // MoE.
  b.bf16_matrix("ffn.gate.weight", E, D);
  if (!mtp && !stage && cfg.is_hash_layer(l))
    b.plain("ffn.gate.tid2eid", DType::kI64, {cfg.vocab_size, cfg.num_experts_per_tok});
  else
    b.plain("ffn.gate.bias", DType::kF32, {E});
  b.matrix("ffn.shared_experts.w1.weight", F, D, dense);
  b.matrix("ffn.shared_experts.w2.weight", D, F, dense);
  b.matrix("ffn.shared_experts.w3.weight", F, D, dense);
  for (int64_t e = 0; e < E; ++e) {
    const std::string p = fmt::format("ffn.experts.{}.", e);
    b.matrix(p + "w1.weight", F, D, expert, true, true);
    b.matrix(p + "w2.weight", D, F, expert, true, true);
    b.matrix(p + "w3.weight", F, D, expert, true, true);
  }
  if (mtp) {
    b.matrix("e_proj.weight", D, D, dense);
    b.matrix("h_proj.weight", D, D, dense);
    b.plain("enorm.weight", DType::kBF16, {D});
    b.plain("hnorm.weight", DType::kBF16, {D});
    b.plain("norm.weight", DType::kBF16, {D});
    add_hc_head(b, cfg);
  }
  if (stage) {
    // dspark.md §1.4: stage 0 projects the target features; the last stage carries the head.
    const int s_idx = l - cfg.num_hidden_layers;
    const int64_t n_lt = static_cast<int64_t>(cfg.dspark->target_layer_ids.size());
    const int64_t Rm = cfg.dspark->markov_rank;
    if (s_idx == 0) {
      b.matrix("main_proj.weight", D, n_lt * D, dense);
      b.plain("main_norm.weight", DType::kBF16, {D});
    }
    if (s_idx == cfg.n_dspark_stages() - 1) {
      b.plain("norm.weight", DType::kBF16, {D});
      add_hc_head(b, cfg);
      b.bf16_matrix("markov_head.markov_w1.weight", cfg.vocab_size, Rm);
      b.bf16_matrix("markov_head.markov_w2.weight", cfg.vocab_size, Rm);
      b.bf16_matrix("confidence_head.proj.weight", 1, D + Rm);
    }
  }
  return out;
}

std::vector<TensorSpec> expected_tensors(const ModelConfig& cfg) {
  std::vector<TensorSpec> out = global_tensors(cfg);
  for (int l = 0; l < cfg.n_checkpoint_layers(); ++l) {
    auto t = layer_tensors(cfg, l);
    out.insert(out.end(), std::make_move_iterator(t.begin()), std::make_move_iterator(t.end()));
  }
  return out;
}

}  // namespace dsv4
