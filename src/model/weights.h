// Model weights as views into the mapped checkpoint (checkpoint.md §4.6, §5, §7).
// Every tensor is taken from the table of checkpoint_table.h with its expected dtype and
// shape; FP8 / packed-FP4 matrices stay in their stored form (codes + ue8m0 scales), wo_a
// included, which runs without actq (model.md §0.4.4; its FP8 blocks decode exactly,
// checkpoint.md §4.5). The actq flag of every other linear follows its stored form.
//
// Shapes (D hidden, V vocab, H heads, Dh head_dim, Rq q_lora_rank, G o_groups,
// Ro o_lora_rank, E routed experts, K experts per token, F moe_intermediate_size,
// N hc_mult, M = (2+N)·N, Hi/Di indexer heads/dim, c compressor width):
//   Weights:         embed [V, D] bf16, head [V, D] bf16, norm [D] bf16,
//                    hc_head {fn [N, N·D], base [N], scale [1]} f32
//   LayerWeights:    attn_norm, ffn_norm [D] bf16; hc_attn, hc_ffn {fn [M, N·D], base [M],
//                    scale [3]} f32
//   AttentionWeights: attn_sink [H] f32; wq_a [Rq, D]; q_norm [Rq]; wq_b [H·Dh, Rq];
//                    wkv [Dh, D]; kv_norm [Dh]; wo_a [G·Ro, H·Dh/G]; wo_b [D, G·Ro]
//   CompressorWeights: wkv, wgate [c, D] bf16; ape [ratio, c] f32; norm [dim]; c = 2·dim
//                    for ratio 4 (overlap), dim otherwise (dim = Dh main, Di indexer)
//   IndexerWeights:  wq_b [Hi·Di, Rq]; weights_proj [Hi, D] bf16; compressor (ratio 4, Di)
//   MoeWeights:      gate [E, D] bf16; bias [E] f32 (score layers) | tid2eid [V, K] int32
//                    (hash layers); shared expert and E routed experts w1/w3 [F, D], w2 [D, F]
//   MtpWeights:      block (LayerWeights), e_proj/h_proj [D, D], enorm/hnorm/norm [D],
//                    hc_head as the globals
//   DSparkWeights:   (dspark.md §1.4; Rm markov rank, Lt target layers) main_proj
//                    [D, |Lt|·D], main_norm [D], NS stage blocks (LayerWeights, SWA,
//                    score-routed), norm [D], hc_head as the globals, markov_w1/w2 [V, Rm]
//                    bf16, confidence [D + Rm] bf16
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/huge_pages.h"
#include "base/status.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "numeric/bf16.h"
#include "numeric/linear_weight.h"

namespace dsv4 {

// One linear layer as the engine uses it.
struct Linear {
  LinearWeight w;                         // view into the file (or its realigned copy)
  StorageForm stored = StorageForm::kBF16;  // form in the checkpoint
  bool actq = false;  // input gets actq: stored FP8/FP4, never for wo_a (model.md §0.4.4)
};

struct HcParams {
  const float* fn = nullptr;     // [rows, N·D]; rows = M (block) or N (head)
  const float* base = nullptr;   // [rows]
  const float* scale = nullptr;  // [3] (block) or [1] (head)
};

struct CompressorWeights {
  bool present = false;
  int ratio = 0;
  int64_t dim = 0;      // entry width (Dh main, Di indexer)
  int64_t width = 0;    // c = 2·dim for ratio 4 (overlap), dim otherwise
  Linear wkv;           // [c, D] bf16
  Linear wgate;         // [c, D] bf16
  const float* ape = nullptr;   // [ratio, c]
  const bf16* norm = nullptr;   // [dim]
};

struct IndexerWeights {
  bool present = false;
  Linear wq_b;          // [Hi·Di, Rq]
  Linear weights_proj;  // [Hi, D] bf16
  CompressorWeights compressor;
};

struct AttentionWeights {
  const float* attn_sink = nullptr;  // [H]
  Linear wq_a;                       // [Rq, D]
  const bf16* q_norm = nullptr;      // [Rq]
  Linear wq_b;                       // [H·Dh, Rq]
  Linear wkv;                        // [Dh, D]
  const bf16* kv_norm = nullptr;     // [Dh]
  Linear wo_a;                       // [G·Ro, H·Dh/G], as stored (FP8 or BF16), actq false
  Linear wo_b;                       // [D, G·Ro]
  CompressorWeights compressor;      // CSA and HCA
  IndexerWeights indexer;            // CSA only
};

struct ExpertWeights {
  Linear w1;  // [F, D] gate projection
  Linear w2;  // [D, F] down projection
  Linear w3;  // [F, D] up projection
};

struct MoeWeights {
  Linear gate;                   // [E, D] bf16
  const float* bias = nullptr;   // [E] score layers; nullptr on hash layers
  std::vector<int32_t> tid2eid;  // [V, K] hash layers (validated ids); empty otherwise
  ExpertWeights shared;
  std::vector<ExpertWeights> experts;  // E entries
};

struct LayerWeights {
  int layer = 0;  // index l (MTP: num_hidden_layers + i)
  int ratio = 0;
  AttentionKind kind = AttentionKind::kSWA;
  bool hash = false;
  const bf16* attn_norm = nullptr;  // [D]
  const bf16* ffn_norm = nullptr;   // [D]
  HcParams hc_attn;
  HcParams hc_ffn;
  AttentionWeights attn;
  MoeWeights ffn;
};

struct MtpWeights {
  LayerWeights block;
  Linear e_proj;                  // [D, D]
  Linear h_proj;                  // [D, D]
  const bf16* enorm = nullptr;    // [D]
  const bf16* hnorm = nullptr;    // [D]
  const bf16* norm = nullptr;     // [D]
  HcParams hc_head;               // fn [N, N·D], base [N], scale [1]
};

// The DSpark drafter (dspark.md §1, §3): present exactly when the config has the dspark_* fields.
struct DSparkWeights {
  bool present = false;
  Linear main_proj;                   // [D, |Lt|·D] (mtp.0)
  const bf16* main_norm = nullptr;    // [D] (mtp.0)
  std::vector<LayerWeights> stages;   // NS blocks, layer index num_hidden_layers + s
  const bf16* norm = nullptr;         // [D] (last stage)
  HcParams hc_head;                   // fn [N, N·D], base [N], scale [1] (last stage)
  const bf16* markov_w1 = nullptr;    // [V, Rm]: row t = Markov embedding of token t
  const bf16* markov_w2 = nullptr;    // [V, Rm]: row v = weights of token v's bias
  const bf16* confidence = nullptr;   // [D + Rm] (confidence_head.proj row 0)
};

// Move-only: views point into `files` (kept alive here) and into owned buffers.
struct Weights {
  SafetensorsSet files;
  const bf16* embed = nullptr;  // [V, D]
  Linear head;                  // [V, D] bf16
  const bf16* norm = nullptr;   // [D]
  HcParams hc_head;
  std::vector<LayerWeights> layers;  // num_hidden_layers
  std::vector<MtpWeights> mtp;       // ModelConfig::n_mtp_layers()
  DSparkWeights dspark;              // the DSpark drafter, when the config has one
  // Aligned copies of BF16/F32 tensors whose bytes in the file are not aligned to their
  // element size (safetensors does not require it); views point here instead.
  std::vector<std::vector<uint8_t>> realigned;
  // The FP4 and FP8 matrices this process reads, rewritten into the linear kernels' dot
  // layouts (LinearWeight::fp4_dot, fp8_dot), which every kernel variant reads:
  // their views point here, and the file's pages of them are released after the copy.
  HugeBytes packed;

  Weights() = default;
  Weights(Weights&&) = default;
  Weights& operator=(Weights&&) = default;
  Weights(const Weights&) = delete;
  Weights& operator=(const Weights&) = delete;
};

// What the loader saw besides errors.
struct LoadReport {
  std::vector<std::string> unexpected;  // tensors in the files that the table does not name
  std::vector<std::string> warnings;    // e.g. FP4 experts detected without expert_dtype,
                                        // duplicate ids in a tid2eid row (layer, token)
  int64_t n_tensors = 0;                // tensors taken
  int64_t n_bytes = 0;                  // their stored bytes
  int64_t n_bf16_fallback = 0;          // matrices stored BF16 where the table gives FP8/FP4
  int64_t n_realigned = 0;              // tensors copied because their data was misaligned
  std::vector<std::string> drafter;     // the mtp.* tensors taken (scales included), sorted
};

// Loads and checks every tensor of expected_tensors(cfg) (cfg must pass validate()).
// Errors: a missing tensor (first few names and the count), wrong dtype or shape (both
// printed), a .scale next to a BF16 matrix, a scale byte outside 27..227 (tensor, byte,
// index), an FP8 NaN code 0x7F/0xFF, a tid2eid of wrong shape or with an id outside
// [0, n_routed_experts). Accepted per checkpoint.md §5.7: a matrix in BF16 form where the
// table gives FP8/FP4; FP4 experts when expert_dtype is absent (warning). `report` may be null.
// The drafter (dspark.md §1.3, §1.5): a DSpark config takes exactly the stages mtp.0 ..
// mtp.{NS-1}; MTP tensors in a DSpark checkpoint, DSpark tensors without the dspark_* fields,
// a stage count other than compress_ratios' and any mtp.* tensor left unused are errors naming
// the tensor or field.
struct LoadOptions {
  // Tensors whose data this process reads (nullptr: all). The others are checked for name,
  // dtype and shape only — their bytes (scale range, FP8 NaN codes) are never touched, so a
  // rank's resident memory holds only its share (model/placement.h rank_reads).
  std::function<bool(const std::string& name)> reads;
  // Rewrite FP4 and FP8 matrices of whole 16 x 128 tiles into the dot layouts, which every
  // kernel variant's FP4 and FP8 tiles read (same results; the stored layouts run on the
  // scalar tiles); false keeps every view on the file's bytes.
  bool dot_layouts = true;
};
Result<Weights> load_weights(const SafetensorsSet& files, const ModelConfig& cfg,
                             LoadReport* report, const LoadOptions& options = {});

}  // namespace dsv4
