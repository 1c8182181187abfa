// Checkpoint loader: takes every tensor of the table with its dtype and shape, checks the
// contents the checklist of checkpoint.md §7 names, and builds the Weights views.
#include "model/weights.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <set>
#include <thread>
#include <unordered_map>

#include "base/check.h"
#include "base/huge_pages.h"
#include "base/math.h"
#include "kernels/linear/linear.h"
#include "model/checkpoint_table.h"
#include "numeric/e4m3.h"
#include "numeric/ue8m0.h"

namespace dsv4 {

namespace {

std::string describe(DType dtype, const std::vector<int64_t>& shape) {
  return fmt::format("{} [{}]", dtype_name(dtype), fmt::join(shape, ", "));
}

std::string describe(const TensorView& v) { return describe(v.dtype, v.shape); }

// Index (row, col) of a flat position in a 2-D tensor, for messages.
std::string position(const std::vector<int64_t>& shape, int64_t i) {
  if (shape.size() != 2 || shape[1] == 0) return fmt::format("index {}", i);
  return fmt::format("index {} (row {}, column {})", i, i / shape[1], i % shape[1]);
}

// A matrix as found in the file: its form and the views of weight and scale.
struct FoundMatrix {
  StorageForm form = StorageForm::kBF16;
  const TensorView* weight = nullptr;
  const TensorView* scale = nullptr;
};

// True when any byte of [p, p+n) is 0x7F or 0xFF (e4m3 NaN). Returns its index in *at.
bool find_fp8_nan(const uint8_t* p, size_t n, size_t* at) {
  constexpr uint64_t k7f = 0x7F7F7F7F7F7F7F7Full, k01 = 0x0101010101010101ull,
                     k80 = 0x8080808080808080ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    const uint64_t z = (w & k7f) ^ k7f;  // a zero byte where the low 7 bits are all set
    if (((z - k01) & ~z & k80) != 0) break;
  }
  for (; i < n; ++i) {
    if ((p[i] & 0x7F) == 0x7F) {
      *at = i;
      return true;
    }
  }
  return false;
}

class Loader {
 public:
  Loader(const SafetensorsSet& files, const ModelConfig& cfg, LoadReport& report, const LoadOptions& options)
      : files_(files), cfg_(cfg), report_(report), options_(options) {}

  Result<Weights> run() {
    DSV4_RETURN_IF_ERROR(check_drafter_kind());
    const std::vector<TensorSpec> table = expected_tensors(cfg_);
    std::vector<std::string> missing;
    for (const TensorSpec& spec : table) {
      if (spec.role == TensorRole::kScale) continue;  // taken with its matrix
      const TensorView* v = files_.find(spec.name);
      if (!v) {
        missing.push_back(spec.name);
        continue;
      }
      if (spec.role == TensorRole::kPlain) {
        DSV4_RETURN_IF_ERROR(take_plain(spec, *v));
      } else {
        DSV4_RETURN_IF_ERROR(take_matrix(spec, *v));
      }
    }
    if (!missing.empty()) {
      std::string first;
      const size_t n_show = std::min<size_t>(missing.size(), 5);
      for (size_t i = 0; i < n_show; ++i) first += (i ? ", " : "") + missing[i];
      return Status::errorf("checkpoint is missing {} of the {} expected tensors (first: {}{})",
                            missing.size(), table.size(), first,
                            missing.size() > n_show ? ", ..." : "");
    }
    for (const auto& [name, view] : files_.tensors()) {
      if (used_.count(name)) {
        if (name.starts_with("mtp.")) report_.drafter.push_back(name);
        continue;
      }
      if (name.starts_with("mtp.") && cfg_.dspark) return unused_drafter_tensor(name);
      report_.unexpected.push_back(name);
    }
    std::sort(report_.drafter.begin(), report_.drafter.end());
    return build();
  }

 private:
  // dspark.md §1.3: which drafter the tensors hold must agree with config.json, and a DSpark
  // checkpoint's stage prefixes must be exactly mtp.0 .. mtp.{NS-1}.
  Status check_drafter_kind() const {
    static constexpr std::string_view kMtpOnly[] = {".e_proj.weight", ".h_proj.weight",
                                                    ".enorm.weight", ".hnorm.weight"};
    static constexpr std::string_view kDsparkOnly[] = {".main_proj.weight", ".main_norm.weight",
                                                       ".markov_head.", ".confidence_head."};
    std::set<int> stages;
    for (const auto& [name, view] : files_.tensors()) {
      if (!name.starts_with("mtp.")) continue;
      const size_t dot = name.find('.', 4);
      int s = -1;
      if (dot != std::string::npos && dot > 4) {
        try {
          s = std::stoi(name.substr(4, dot - 4));
        } catch (...) {
          s = -1;
        }
      }
      if (s < 0 || std::to_string(s) != name.substr(4, dot - 4))
        return Status::errorf("tensor '{}': not a drafter tensor name mtp.{{stage}}.… (dspark.md "
                              "§1.4)",
                              name);
      stages.insert(s);
      const std::string_view rest(name.data() + dot, name.size() - dot);
      if (cfg_.dspark) {
        for (std::string_view m : kMtpOnly)
          if (rest == m)
            return Status::errorf("tensor '{}' in a DSpark checkpoint: config.json has the "
                                  "dspark_* fields, so mtp.* holds DSpark stages, which have no "
                                  "MTP projections (dspark.md §1.3)",
                                  name);
      } else {
        for (std::string_view m : kDsparkOnly)
          if (rest.starts_with(m))
            return Status::errorf("tensor '{}' is a DSpark drafter tensor, but config.json has "
                                  "none of the dspark_* fields (dspark_block_size, "
                                  "dspark_noise_token_id, dspark_target_layer_ids, "
                                  "dspark_markov_rank missing; dspark.md §1.3)",
                                  name);
      }
    }
    if (!cfg_.dspark) return Status();
    const int ns = cfg_.n_dspark_stages();
    std::vector<int> found(stages.begin(), stages.end());
    const bool contiguous = !found.empty() && found.front() == 0 &&
                            found.back() == static_cast<int>(found.size()) - 1;
    if (!contiguous)
      return Status::errorf("the mtp.* tensors hold stages {{{}}}: a DSpark checkpoint has the "
                            "stages mtp.0 .. mtp.{{NS-1}} (dspark.md §1.3)",
                            fmt::join(found, ", "));
    if (static_cast<int>(found.size()) != ns)
      return Status::errorf("the mtp.* tensors hold {} DSpark stages (mtp.0 .. mtp.{}), but "
                            "compress_ratios has {} entries = num_hidden_layers {} + {} stages "
                            "(dspark.md §1.3)",
                            found.size(), found.size() - 1, cfg_.compress_ratios.size(),
                            cfg_.num_hidden_layers, ns);
    return Status();
  }

  // An mtp.* tensor of a DSpark checkpoint that the table does not take (dspark.md §1.5.4).
  Status unused_drafter_tensor(const std::string& name) const {
    if (name.ends_with(".scale")) {
      const std::string weight = name.substr(0, name.size() - 6) + ".weight";
      if (used_.count(weight))
        return Status::errorf("tensor '{}': a scale next to '{}', which is BF16 in every variant "
                              "(dspark.md §1.4)",
                              name, weight);
    }
    return Status::errorf("tensor '{}': not a tensor of this DSpark checkpoint (stage {} of {}; "
                          "dspark.md §1.4 lists each stage's set, the main_proj set on stage 0 "
                          "and the head set on the last stage only)",
                          name, name.substr(4, name.find('.', 4) - 4), cfg_.n_dspark_stages());
  }

  void use(const TensorView& v) {
    used_.insert(v.name);
    ++report_.n_tensors;
    report_.n_bytes += static_cast<int64_t>(v.n_bytes);
  }

  Status take_plain(const TensorSpec& spec, const TensorView& v) {
    if (v.dtype != spec.dtype || v.shape != spec.shape)
      return Status::errorf("tensor '{}': expected {}, found {}", spec.name,
                            describe(spec.dtype, spec.shape), describe(v));
    use(v);
    plain_[spec.name] = &v;
    if (spec.dtype == DType::kI64 && spec.name.ends_with("ffn.gate.tid2eid"))
      return check_tid2eid(spec, v);
    return Status();
  }

  // Accepted forms per checkpoint.md §5.7: the table's form; BF16 in place of FP8/FP4;
  // FP4 experts when expert_dtype is absent (with a warning).
  Status take_matrix(const TensorSpec& spec, const TensorView& v) {
    StorageForm form;
    const bool fp4_detect = spec.routed_expert && spec.form == StorageForm::kFP8 &&
                            !cfg_.expert_dtype && spec.in % 32 == 0;
    if (v.dtype == DType::kBF16) {
      form = StorageForm::kBF16;
    } else if (v.dtype == DType::kF8_E4M3 && spec.form == StorageForm::kFP8) {
      form = StorageForm::kFP8;
    } else if (v.dtype == DType::kI8 && (spec.form == StorageForm::kFP4 || fp4_detect)) {
      form = StorageForm::kFP4;
    } else {
      return Status::errorf("tensor '{}': expected {}, found {}", spec.name,
                            expected_forms(spec), describe(v));
    }
    const std::vector<TensorSpec> want = matrix_specs(spec, form);
    if (v.shape != want[0].shape)
      return Status::errorf("tensor '{}': expected {}, found {}", spec.name,
                            expected_forms(spec), describe(v));
    FoundMatrix m;
    m.form = form;
    m.weight = &v;
    const std::string sname = scale_name_for(spec.name);
    const TensorView* s = files_.find(sname);
    if (form == StorageForm::kBF16) {
      if (s)
        return Status::errorf("tensor '{}': a scale tensor next to the BF16 matrix '{}' (a BF16 "
                              "matrix has no .scale, checkpoint.md §5.7)",
                              sname, spec.name);
      if (spec.form != StorageForm::kBF16) ++report_.n_bf16_fallback;
    } else {
      if (!s)
        return Status::errorf("tensor '{}': missing; the {} matrix '{}' needs it", sname,
                              storage_form_name(form), spec.name);
      if (s->dtype != want[1].dtype || s->shape != want[1].shape)
        return Status::errorf("tensor '{}': expected {}, found {}", sname,
                              describe(want[1].dtype, want[1].shape), describe(*s));
      const bool read = reads(spec.name);
      if (read) DSV4_RETURN_IF_ERROR(check_scale(*s));
      if (read && form == StorageForm::kFP8) {
        size_t at = 0;
        if (find_fp8_nan(v.data, v.n_bytes, &at))
          return Status::errorf("tensor '{}': FP8 NaN code 0x{:02X} at {} (checkpoint.md §7)",
                                spec.name, v.data[at], position(v.shape, static_cast<int64_t>(at)));
      }
      if (form == StorageForm::kFP4 && spec.form != StorageForm::kFP4 && !warned_fp4_) {
        warned_fp4_ = true;
        report_.warnings.push_back(fmt::format(
            "config.json has quantization_config but no expert_dtype; the routed experts are "
            "stored as packed FP4 (I8 with [O, I/32] scales, first: '{}') and are read as FP4 "
            "(checkpoint.md §5.7)",
            spec.name));
      }
      m.scale = s;
      use(*s);
    }
    use(v);
    matrices_[spec.name] = m;
    return Status();
  }

  std::string expected_forms(const TensorSpec& spec) const {
    std::string r;
    auto add = [&](StorageForm f) {
      const auto w = matrix_specs(spec, f);
      r += fmt::format("{}{} ({})", r.empty() ? "" : " or ", describe(w[0].dtype, w[0].shape),
                       storage_form_name(f));
    };
    add(spec.form);
    if (spec.routed_expert && spec.form == StorageForm::kFP8 && !cfg_.expert_dtype &&
        spec.in % 32 == 0)
      add(StorageForm::kFP4);
    if (spec.form != StorageForm::kBF16) add(StorageForm::kBF16);
    return r;
  }

  static Status check_scale(const TensorView& s) {
    for (size_t i = 0; i < s.n_bytes; ++i) {
      const uint8_t b = s.data[i];
      if (!ue8m0_checkpoint_ok(b))
        return Status::errorf("tensor '{}': scale byte {} at {} is outside the accepted range "
                              "{}..{} (checkpoint.md §4.5)",
                              s.name, b, position(s.shape, static_cast<int64_t>(i)),
                              kUe8m0CheckpointMin, kUe8m0CheckpointMax);
    }
    return Status();
  }

  Status check_tid2eid(const TensorSpec& spec, const TensorView& v) {
    const int64_t V = spec.shape[0], K = spec.shape[1], E = cfg_.n_routed_experts;
    std::vector<int32_t> ids(static_cast<size_t>(V * K));
    int64_t n_dup_rows = 0;
    constexpr int64_t kMaxListed = 5;
    for (int64_t t = 0; t < V; ++t) {
      bool dup = false;
      for (int64_t k = 0; k < K; ++k) {
        int64_t id;
        std::memcpy(&id, v.data + (t * K + k) * 8, 8);
        if (id < 0 || id >= E)
          return Status::errorf("tensor '{}': expert id {} at token {}, slot {} is outside "
                                "[0, n_routed_experts = {})",
                                spec.name, id, t, k, E);
        ids[t * K + k] = static_cast<int32_t>(id);
        for (int64_t k2 = 0; k2 < k; ++k2) dup |= ids[t * K + k2] == ids[t * K + k];
      }
      if (dup) {
        if (n_dup_rows < kMaxListed)
          report_.warnings.push_back(fmt::format(
              "layer {}: tid2eid row of token {} repeats an expert id ([{}]); the repeated "
              "expert's output is added once (model.md §9.1)",
              spec.layer, t, fmt::join(ids.begin() + t * K, ids.begin() + (t + 1) * K, ", ")));
        ++n_dup_rows;
      }
    }
    if (n_dup_rows > kMaxListed)
      report_.warnings.push_back(fmt::format("layer {}: {} tid2eid rows repeat an expert id in "
                                             "total ({} listed)",
                                             spec.layer, n_dup_rows, kMaxListed));
    tid2eid_[spec.name] = std::move(ids);
    return Status();
  }

  // ---- building the Weights views (every name below was checked above) ----

  const uint8_t* aligned(Weights& w, const TensorView& v) {
    const size_t align = dtype_size(v.dtype);
    if (reinterpret_cast<uintptr_t>(v.data) % align == 0) return v.data;
    w.realigned.emplace_back(v.data, v.data + v.n_bytes);
    ++report_.n_realigned;
    return w.realigned.back().data();
  }

  template <class T>
  const T* ptr(Weights& w, const std::string& name) {
    auto it = plain_.find(name);
    DSV4_CHECK(it != plain_.end(), "tensor '{}' not loaded", name);
    return reinterpret_cast<const T*>(aligned(w, *it->second));
  }

  // A BF16-only projection (kPlain in the table).
  Linear bf16_linear(Weights& w, const std::string& name) {
    auto it = plain_.find(name);
    DSV4_CHECK(it != plain_.end(), "tensor '{}' not loaded", name);
    const TensorView& v = *it->second;
    Linear l;
    l.w = LinearWeight{WeightFormat::kBF16, v.shape[0], v.shape[1], aligned(w, v), nullptr};
    l.stored = StorageForm::kBF16;
    l.actq = false;
    if (packs_bf16(name, v)) pack(w, name, l.w, v.n_bytes);
    return l;
  }

  Linear linear(Weights& w, const std::string& name) {
    auto it = matrices_.find(name);
    DSV4_CHECK(it != matrices_.end(), "matrix '{}' not loaded", name);
    const FoundMatrix& m = it->second;
    Linear l;
    l.stored = m.form;
    l.actq = m.form != StorageForm::kBF16;
    const int64_t out = m.weight->shape[0];
    switch (m.form) {
      case StorageForm::kBF16:
        l.w = LinearWeight{WeightFormat::kBF16, out, m.weight->shape[1], aligned(w, *m.weight),
                           nullptr};
        break;
      case StorageForm::kFP8:
        l.w = LinearWeight{WeightFormat::kFP8, out, m.weight->shape[1], m.weight->data,
                           m.scale->data};
        if (packs(name, m)) pack(w, name, l.w, m.weight->n_bytes);
        break;
      case StorageForm::kFP4:
        l.w = LinearWeight{WeightFormat::kFP4, out, 2 * m.weight->shape[1], m.weight->data,
                           m.scale->data};
        if (packs(name, m)) pack(w, name, l.w, m.weight->n_bytes);
        break;
      default: DSV4_CHECK(false, "matrix '{}' in form {}", name, storage_form_name(m.form));
    }
    return l;
  }

  bool reads(const std::string& name) const { return !options_.reads || options_.reads(name); }

  // Whether matrix `name` is rewritten into a tile layout at load (LinearWeight::fp4_dot,
  // fp8_dot): FP4 and FP8 of whole 16 x 128 tiles; only those this process reads, and
  // on every variant (each reads the layouts; the FP4 and FP8 tiles read only them).
  bool packs(const std::string& name, const FoundMatrix& m) const {
    if (!options_.dot_layouts || !reads(name)) return false;
    if (m.form == StorageForm::kFP4) return dot_tiles_fit(m.weight->shape[0], 2 * m.weight->shape[1]);
    return m.form == StorageForm::kFP8 && dot_tiles_fit(m.weight->shape[0], m.weight->shape[1]);
  }
  // Whether BF16 tensor `name` (read by bf16_linear) is rewritten into the BF16 tile layout
  // (LinearWeight::bf16_tiles): the compressors' and the indexer's projections, which only the
  // linear engine reads (the router and the LM head have kernels of their own), where the
  // engine's variant reads that layout faster (kernels::linear_prefers_bf16_tiles).
  bool packs_bf16(const std::string& name, const TensorView& v) const {
    static constexpr std::string_view kSuffixes[] = {"compressor.wkv.weight", "compressor.wgate.weight",
                                                     "indexer.weights_proj.weight"};
    if (!options_.dot_layouts || !kernels::linear_prefers_bf16_tiles() || !reads(name) || v.shape.size() != 2 ||
        !dot_tiles_fit(v.shape[0], v.shape[1]))
      return false;
    return std::any_of(std::begin(kSuffixes), std::end(kSuffixes),
                       [&](std::string_view s) { return name.ends_with(s); });
  }
  // Bytes of matrix m in its tile layout (FP4: codes and scales).
  static size_t tile_bytes(const FoundMatrix& m) {
    const int64_t out = m.weight->shape[0];
    return m.form == StorageForm::kFP4 ? static_cast<size_t>(fp4_packed_bytes(out, 2 * m.weight->shape[1]))
                                       : m.weight->n_bytes;
  }
  // Bytes of the matrices packs() takes, each 64-byte aligned.
  size_t packed_bytes() const {
    size_t n = 0;
    for (const auto& [name, m] : matrices_)
      if (packs(name, m)) n += ceil_div<size_t>(tile_bytes(m), 64) * 64;
    for (const auto& [name, v] : plain_)
      if (packs_bf16(name, *v)) n += ceil_div<size_t>(v->n_bytes, 64) * 64;
    return n;
  }

  // Copies a matrix into the arena in its dot layout, points the view there and lets the
  // kernel reclaim the file's pages of it.
  // n_bytes: the stored codes' bytes (released after the copy).
  void pack(Weights& w, const std::string& name, LinearWeight& lw, size_t n_bytes) {
    if (auto it = packed_.find(name); it != packed_.end()) {  // taken before: the same copy
      lw = it->second;
      return;
    }
    const size_t size = static_cast<size_t>(dsv4::packed_bytes(lw));
    DSV4_CHECK(packed_used_ + size <= w.packed.size(), "packed-weight arena of {} bytes overrun", w.packed.size());
    uint8_t* dst = w.packed.data() + packed_used_;
    packed_used_ += ceil_div<size_t>(size, 64) * 64;
    pack_jobs_.push_back(PackJob{lw, dst, n_bytes});
    bool& tiles = lw.format == WeightFormat::kFP4    ? lw.fp4_dot
                  : lw.format == WeightFormat::kBF16 ? lw.bf16_tiles
                                                     : lw.fp8_dot;
    tiles = true;
    lw.data = dst;
    if (lw.format == WeightFormat::kFP4) lw.scale = dst + lw.out * lw.in / 2;
    packed_[name] = lw;
  }

  // The copies pack() queued, on every core (a matrix at a time, largest first: the
  // experts of a real checkpoint are hundreds of GB), each source's pages released after.
  void run_pack_jobs() {
    std::sort(pack_jobs_.begin(), pack_jobs_.end(), [](const PackJob& a, const PackJob& b) { return a.n_bytes > b.n_bytes; });
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t j; (j = next.fetch_add(1)) < pack_jobs_.size();) {
        const PackJob& p = pack_jobs_[j];
        pack_tiles(p.stored, p.dst);
        advise_pageout(p.stored.data, p.n_bytes);
      }
    };
    const size_t n = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), pack_jobs_.size());
    std::vector<std::thread> threads;
    for (size_t t = 1; t < n; ++t) threads.emplace_back(work);
    work();
    for (std::thread& t : threads) t.join();
    pack_jobs_.clear();
  }

  // wo_a: used without actq (model.md §0.4.4) in its stored form, FP8 or BF16, never
  // expanded: the linear kernels decode an FP8 block exactly (checkpoint.md §4.5), so the
  // stored FP8 gives the bits of its bf16 dequantization from half the bytes.
  Linear wo_a(Weights& w, const std::string& name) {
    Linear l = linear(w, name);
    l.actq = false;
    return l;
  }

  HcParams hc(Weights& w, const std::string& p, const std::string& which) {
    return HcParams{ptr<float>(w, p + which + "_fn"), ptr<float>(w, p + which + "_base"),
                    ptr<float>(w, p + which + "_scale")};
  }

  CompressorWeights compressor(Weights& w, const std::string& p, int ratio, int64_t dim) {
    CompressorWeights c;
    c.present = true;
    c.ratio = ratio;
    c.dim = dim;
    c.width = ratio == kCsaRatio ? 2 * dim : dim;
    c.wkv = bf16_linear(w, p + "wkv.weight");
    c.wgate = bf16_linear(w, p + "wgate.weight");
    c.ape = ptr<float>(w, p + "ape");
    c.norm = ptr<bf16>(w, p + "norm.weight");
    return c;
  }

  ExpertWeights expert(Weights& w, const std::string& p) {
    return ExpertWeights{linear(w, p + "w1.weight"), linear(w, p + "w2.weight"),
                         linear(w, p + "w3.weight")};
  }

  LayerWeights layer(Weights& w, int l) {
    const std::string p = layer_prefix(cfg_, l);
    LayerWeights L;
    L.layer = l;
    L.ratio = cfg_.layer_ratio(l);
    L.kind = cfg_.attention_kind(l);
    L.hash = l < cfg_.num_hidden_layers && cfg_.is_hash_layer(l);
    L.attn_norm = ptr<bf16>(w, p + "attn_norm.weight");
    L.ffn_norm = ptr<bf16>(w, p + "ffn_norm.weight");
    L.hc_attn = hc(w, p, "hc_attn");
    L.hc_ffn = hc(w, p, "hc_ffn");
    AttentionWeights& a = L.attn;
    a.attn_sink = ptr<float>(w, p + "attn.attn_sink");
    a.wq_a = linear(w, p + "attn.wq_a.weight");
    a.q_norm = ptr<bf16>(w, p + "attn.q_norm.weight");
    a.wq_b = linear(w, p + "attn.wq_b.weight");
    a.wkv = linear(w, p + "attn.wkv.weight");
    a.kv_norm = ptr<bf16>(w, p + "attn.kv_norm.weight");
    a.wo_a = wo_a(w, p + "attn.wo_a.weight");
    a.wo_b = linear(w, p + "attn.wo_b.weight");
    if (L.ratio != 0) a.compressor = compressor(w, p + "attn.compressor.", L.ratio, cfg_.head_dim);
    if (L.ratio == kCsaRatio) {
      a.indexer.present = true;
      a.indexer.wq_b = linear(w, p + "attn.indexer.wq_b.weight");
      a.indexer.weights_proj = bf16_linear(w, p + "attn.indexer.weights_proj.weight");
      a.indexer.compressor =
          compressor(w, p + "attn.indexer.compressor.", L.ratio, cfg_.index_head_dim);
    }
    MoeWeights& f = L.ffn;
    f.gate = bf16_linear(w, p + "ffn.gate.weight");
    if (L.hash) {
      auto it = tid2eid_.find(p + "ffn.gate.tid2eid");
      DSV4_CHECK(it != tid2eid_.end(), "tid2eid of layer {} not loaded", l);
      f.tid2eid = std::move(it->second);
    } else {
      f.bias = ptr<float>(w, p + "ffn.gate.bias");
    }
    f.shared = expert(w, p + "ffn.shared_experts.");
    f.experts.reserve(cfg_.n_routed_experts);
    for (int e = 0; e < cfg_.n_routed_experts; ++e)
      f.experts.push_back(expert(w, fmt::format("{}ffn.experts.{}.", p, e)));
    return L;
  }

  Result<Weights> build() {
    Weights w;
    w.files = files_;
    if (const size_t n = packed_bytes(); n > 0) w.packed = HugeBytes(n);
    w.embed = ptr<bf16>(w, "embed.weight");
    w.head = bf16_linear(w, "head.weight");
    w.norm = ptr<bf16>(w, "norm.weight");
    w.hc_head = hc(w, "", "hc_head");
    w.layers.reserve(cfg_.num_hidden_layers);
    for (int l = 0; l < cfg_.num_hidden_layers; ++l) w.layers.push_back(layer(w, l));
    w.mtp.reserve(cfg_.n_mtp_layers());
    for (int i = 0; i < cfg_.n_mtp_layers(); ++i) {
      const int l = cfg_.num_hidden_layers + i;
      const std::string p = layer_prefix(cfg_, l);
      MtpWeights m;
      m.block = layer(w, l);
      m.e_proj = linear(w, p + "e_proj.weight");
      m.h_proj = linear(w, p + "h_proj.weight");
      m.enorm = ptr<bf16>(w, p + "enorm.weight");
      m.hnorm = ptr<bf16>(w, p + "hnorm.weight");
      m.norm = ptr<bf16>(w, p + "norm.weight");
      m.hc_head = hc(w, p, "hc_head");
      w.mtp.push_back(std::move(m));
    }
    if (cfg_.dspark) {
      DSparkWeights& d = w.dspark;
      const int L = cfg_.num_hidden_layers, ns = cfg_.n_dspark_stages();
      const std::string first = layer_prefix(cfg_, L), last = layer_prefix(cfg_, L + ns - 1);
      d.present = true;
      d.main_proj = linear(w, first + "main_proj.weight");
      d.main_norm = ptr<bf16>(w, first + "main_norm.weight");
      for (int s = 0; s < ns; ++s) d.stages.push_back(layer(w, L + s));
      d.norm = ptr<bf16>(w, last + "norm.weight");
      d.hc_head = hc(w, last, "hc_head");
      d.markov_w1 = ptr<bf16>(w, last + "markov_head.markov_w1.weight");
      d.markov_w2 = ptr<bf16>(w, last + "markov_head.markov_w2.weight");
      d.confidence = ptr<bf16>(w, last + "confidence_head.proj.weight");
    }
    run_pack_jobs();
    return w;
  }

  const SafetensorsSet& files_;
  const ModelConfig& cfg_;
  LoadReport& report_;
  std::set<std::string> used_;
  std::unordered_map<std::string, const TensorView*> plain_;
  std::unordered_map<std::string, FoundMatrix> matrices_;
  std::unordered_map<std::string, std::vector<int32_t>> tid2eid_;
  bool warned_fp4_ = false;
  LoadOptions options_;
  size_t packed_used_ = 0;                                // arena bytes handed out
  struct PackJob {  // a matrix to copy into the arena in its tile layout
    LinearWeight stored;  // the view on the file's bytes
    uint8_t* dst;
    size_t n_bytes;
  };
  std::vector<PackJob> pack_jobs_;
  std::unordered_map<std::string, LinearWeight> packed_;  // matrices in the arena
};

}  // namespace

Result<Weights> load_weights(const SafetensorsSet& files, const ModelConfig& cfg,
                             LoadReport* report, const LoadOptions& options) {
  DSV4_RETURN_IF_ERROR(validate(cfg));
  LoadReport local;
  LoadReport& r = report ? *report : local;
  r = LoadReport{};
  Loader loader(files, cfg, r, options);
  return loader.run();
}

}  // namespace dsv4
