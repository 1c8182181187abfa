// Tiny checkpoint generator (see tiny_checkpoint.h for the value and storage rules).
#include "oracle/tiny_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <numbers>
#include <span>

#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/math.h"
#include "io/file_util.h"
#include "io/safetensors.h"
#include "numeric/bf16.h"
#include "numeric/e2m1.h"
#include "numeric/e4m3.h"
#include "numeric/quant.h"
#include "numeric/ue8m0.h"
#include "text/tiny_tokenizer.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;

// splitmix64 (Steele, Lea, Flood 2014): a 64-bit counter through a bijective mixer.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// Per-tensor stream: splitmix64 seeded from (seed, name); normals by Box-Muller.
class Rng {
 public:
  Rng(uint64_t seed, std::string_view name) : state_(mix64(seed) ^ fnv1a64(name)) {}
  uint64_t next() { return mix64(state_ += 0x9e3779b97f4a7c15ull); }
  // Uniform in (0, 1].
  double uniform() { return static_cast<double>((next() >> 11) + 1) * 0x1p-53; }
  // Uniform integer in [0, n) (modulo bias below 2^-50 for the sizes used here).
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    const double t = 2.0 * std::numbers::pi * uniform();
    spare_ = r * std::sin(t);
    has_spare_ = true;
    return r * std::cos(t);
  }

 private:
  uint64_t state_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Name without its layer prefix ("layers.3.attn.wkv.weight" -> "attn.wkv.weight").
std::string_view local_name(const ModelConfig& cfg, const TensorSpec& spec) {
  std::string_view n = spec.name;
  if (spec.layer >= 0) {
    const std::string prefix = layer_prefix(cfg, spec.layer);
    if (n.substr(0, prefix.size()) == prefix) n.remove_prefix(prefix.size());
  }
  return n;
}

void fill_normal(std::vector<float>& v, Rng& rng, double mean, double variance) {
  const double sd = std::sqrt(variance);
  for (float& x : v) x = static_cast<float>(mean + sd * rng.normal());
}

void fill_tid2eid(std::vector<float>& v, Rng& rng, int64_t rows, int64_t k, int64_t n_experts) {
  DSV4_CHECK(k <= n_experts, "tid2eid: {} ids per row from {} experts", k, n_experts);
  std::vector<int64_t> ids(static_cast<size_t>(n_experts));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t e = 0; e < n_experts; ++e) ids[e] = e;
    // Partial Fisher-Yates: the first k entries are k distinct uniform ids.
    for (int64_t j = 0; j < k; ++j) {
      std::swap(ids[j], ids[j + rng.below(n_experts - j)]);
      v[r * k + j] = static_cast<float>(ids[j]);
    }
  }
}

std::vector<uint8_t> to_bf16_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t b = bf16::from_float(v[i]).bits;
    std::memcpy(&out[2 * i], &b, 2);
  }
  return out;
}

std::vector<uint8_t> to_f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<uint8_t> to_i64_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 8);
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t id = static_cast<int64_t>(v[i]);
    std::memcpy(&out[8 * i], &id, 8);
  }
  return out;
}

Status write_text(const std::string& path, const std::string& text) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  return write_file_atomic(path, {std::span<const uint8_t>(p, text.size())});
}

std::string generation_config_text(const ModelConfig& cfg) {
  nlohmann::ordered_json j;
  j["bos_token_id"] = cfg.bos_token_id;
  j["eos_token_id"] = cfg.eos_token_id;
  j["do_sample"] = true;
  j["temperature"] = 1.0;
  j["top_p"] = 1.0;
  return j.dump(2) + "\n";
}

}  // namespace

Result<TinyQuant> parse_tiny_quant(std::string_view name) {
  if (name == "none") return TinyQuant::kNone;
  if (name == "fp8") return TinyQuant::kFp8;
  return Status::errorf("--quant: unknown value \"{}\" (expected none or fp8)", name);
}

std::string_view tiny_quant_name(TinyQuant q) { return q == TinyQuant::kFp8 ? "fp8" : "none"; }

Result<ModelConfig> tiny_config(const std::string& preset, TinyQuant quant,
                                const TinyOverrides& overrides) {
  static constexpr std::string_view kPresets[] = {"tiny", "tiny2", "tiny-ds", "tiny-ds-w80",
                                                  "tiny2-ds"};
  if (std::find(std::begin(kPresets), std::end(kPresets), preset) == std::end(kPresets))
    return Status::errorf("--preset: unknown tiny preset \"{}\" (expected tiny, tiny2, tiny-ds, "
                          "tiny-ds-w80 or tiny2-ds)",
                          preset);
  Result<ModelConfig> cfg = preset_config(preset, quant == TinyQuant::kFp8);
  if (!cfg.ok()) return cfg.status();
  if (overrides.max_position_embeddings)
    cfg->max_position_embeddings = *overrides.max_position_embeddings;
  DSV4_RETURN_IF_ERROR(validate(cfg.value()).with_context("preset " + preset));
  return cfg;
}

Result<std::vector<float>> tiny_tensor_sample(const ModelConfig& cfg, const TensorSpec& spec,
                                              uint64_t seed) {
  if (spec.role == TensorRole::kScale)
    return Status::errorf("tensor {}: a scale has no sample (it is derived from {})", spec.name,
                          spec.scale_of);
  Rng rng(seed, spec.name);
  const std::string_view n = local_name(cfg, spec);
  if (spec.role == TensorRole::kMatrix) {
    std::vector<float> v(static_cast<size_t>(spec.out * spec.in));
    fill_normal(v, rng, 0.0, 1.0 / static_cast<double>(spec.in));
    return v;
  }
  std::vector<float> v(static_cast<size_t>(spec.numel()));
  if (spec.layer < 0 && (n == "embed.weight" || n == "head.weight")) {
    fill_normal(v, rng, 0.0, 1.0 / static_cast<double>(cfg.hidden_size));
  } else if (ends_with(n, "norm.weight")) {
    fill_normal(v, rng, 1.0, 0.1);
  } else if (n == "attn.attn_sink") {
    fill_normal(v, rng, 0.0, 1.0);
  } else if (ends_with(n, "compressor.ape")) {
    fill_normal(v, rng, 0.0, 0.03);
  } else if (n == "ffn.gate.bias") {
    fill_normal(v, rng, 0.0, 0.1);
  } else if (n == "ffn.gate.tid2eid") {
    if (spec.shape.size() != 2)
      return Status::errorf("tensor {}: expected a 2-D shape", spec.name);
    fill_tid2eid(v, rng, spec.shape[0], spec.shape[1], cfg.n_routed_experts);
  } else if (n.substr(0, 3) == "hc_" && ends_with(n, "_fn")) {
    fill_normal(v, rng, 0.0, 0.05);
  } else if (n.substr(0, 3) == "hc_" && ends_with(n, "_base")) {
    fill_normal(v, rng, 0.0, 3.0);
  } else if (n == "hc_head_scale" && v.size() == 1) {
    v = {0.08f};
  } else if ((n == "hc_attn_scale" || n == "hc_ffn_scale") && v.size() == 3) {
    v = {0.08f, 0.03f, 0.2f};
  } else if (n == "markov_head.markov_w1.weight") {
    // dspark.md §5: unit-scale Markov embeddings, so that the bias W2·W1[t] has unit scale.
    fill_normal(v, rng, 0.0, 1.0);
  } else if (ends_with(n, ".weight") && spec.shape.size() == 2) {
    // Projections kept BF16 in every variant (compressor, weights_proj, gate).
    fill_normal(v, rng, 0.0, 1.0 / static_cast<double>(spec.shape[1]));
  } else {
    return Status::errorf("tensor {}: no initialization rule for it", spec.name);
  }
  return v;
}

QuantizedMatrix quantize_fp8_blocks(const float* w, int64_t out, int64_t in) {
  constexpr int64_t kB = 128;
  const int64_t n_bo = ceil_div(out, kB), n_bi = ceil_div(in, kB);
  QuantizedMatrix q;
  q.data.resize(static_cast<size_t>(out * in));
  q.scale.resize(static_cast<size_t>(n_bo * n_bi));
  for (int64_t bo = 0; bo < n_bo; ++bo) {
    const int64_t o0 = bo * kB, o1 = std::min(out, o0 + kB);
    for (int64_t bi = 0; bi < n_bi; ++bi) {
      const int64_t i0 = bi * kB, i1 = std::min(in, i0 + kB);
      float amax = 0.0f;
      for (int64_t o = o0; o < o1; ++o)
        amax = std::max(amax, block_amax(w + o * in + i0, static_cast<int>(i1 - i0)));
      DSV4_CHECK(std::isfinite(amax), "non-finite weight in block ({}, {})", bo, bi);
      const int e = e4m3_scale_exponent(amax);
      const uint8_t byte = ue8m0_encode_exp(e);
      DSV4_CHECK(ue8m0_checkpoint_ok(byte), "FP8 block scale byte {} outside 27..227", byte);
      q.scale[bo * n_bi + bi] = byte;
      const float inv_s = std::ldexp(1.0f, -e);  // exact: s is a power of two
      for (int64_t o = o0; o < o1; ++o)
        for (int64_t i = i0; i < i1; ++i) q.data[o * in + i] = e4m3_encode(w[o * in + i] * inv_s);
    }
  }
  return q;
}

QuantizedMatrix quantize_fp4_rows(const float* w, int64_t out, int64_t in) {
  constexpr int64_t kG = 32;
  DSV4_CHECK(in % kG == 0, "FP4 input dim {} is not a multiple of 32", in);
  QuantizedMatrix q;
  q.data.assign(static_cast<size_t>(out * in / 2), 0);
  q.scale.resize(static_cast<size_t>(out * in / kG));
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t g = 0; g < in / kG; ++g) {
      const float* v = w + o * in + g * kG;
      const float amax = block_amax(v, static_cast<int>(kG));
      DSV4_CHECK(std::isfinite(amax), "non-finite weight in row {} group {}", o, g);
      const int e = e2m1_scale_exponent(amax);
      const uint8_t byte = ue8m0_encode_exp(e);
      DSV4_CHECK(ue8m0_checkpoint_ok(byte), "FP4 group scale byte {} outside 27..227", byte);
      q.scale[o * (in / kG) + g] = byte;
      const float inv_s = std::ldexp(1.0f, -e);
      uint8_t* packed = q.data.data() + (o * in + g * kG) / 2;
      for (int64_t i = 0; i < kG; ++i) {
        const uint8_t nib = e2m1_encode(v[i] * inv_s);
        packed[i / 2] |= static_cast<uint8_t>((i & 1) ? nib << 4 : nib);
      }
    }
  }
  return q;
}

Status make_tiny_checkpoint(const std::string& out_dir, const std::string& preset, uint64_t seed,
                            TinyQuant quant, const TinyOverrides& overrides) {
  Result<ModelConfig> cfg_r = tiny_config(preset, quant, overrides);
  if (!cfg_r.ok()) return cfg_r.status();
  const ModelConfig& cfg = cfg_r.value();

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return Status::errorf("--out {}: cannot create directory: {}", out_dir, ec.message());

  SafetensorsWriter writer;
  std::map<std::string, std::vector<int64_t>> scales_written;  // name -> shape
  const std::vector<TensorSpec> table = expected_tensors(cfg);
  for (const TensorSpec& spec : table) {
    if (spec.role == TensorRole::kScale) continue;  // written with its matrix
    Result<std::vector<float>> sample = tiny_tensor_sample(cfg, spec, seed);
    if (!sample.ok()) return sample.status();
    const std::vector<float>& v = sample.value();
    std::vector<uint8_t> bytes;
    if (spec.role == TensorRole::kMatrix && spec.form == StorageForm::kFP8) {
      QuantizedMatrix q = quantize_fp8_blocks(v.data(), spec.out, spec.in);
      const std::vector<int64_t> sshape = {ceil_div<int64_t>(spec.out, 128),
                                           ceil_div<int64_t>(spec.in, 128)};
      writer.add(spec.scale_name, DType::kF8_E8M0, sshape, q.scale.data(), q.scale.size());
      scales_written[spec.scale_name] = sshape;
      bytes = std::move(q.data);
    } else if (spec.role == TensorRole::kMatrix && spec.form == StorageForm::kFP4) {
      QuantizedMatrix q = quantize_fp4_rows(v.data(), spec.out, spec.in);
      const std::vector<int64_t> sshape = {spec.out, spec.in / 32};
      writer.add(spec.scale_name, DType::kF8_E8M0, sshape, q.scale.data(), q.scale.size());
      scales_written[spec.scale_name] = sshape;
      bytes = std::move(q.data);
    } else if (spec.dtype == DType::kBF16) {
      bytes = to_bf16_bytes(v);
    } else if (spec.dtype == DType::kF32) {
      bytes = to_f32_bytes(v);
    } else if (spec.dtype == DType::kI64) {
      bytes = to_i64_bytes(v);
    } else {
      return Status::errorf("tensor {}: cannot generate dtype {} in form {}", spec.name,
                            dtype_name(spec.dtype), storage_form_name(spec.form));
    }
    DSV4_CHECK(bytes.size() == spec.n_bytes(), "tensor {}: {} bytes generated, table says {}",
               spec.name, bytes.size(), spec.n_bytes());
    writer.add(spec.name, spec.dtype, spec.shape, bytes.data(), bytes.size());
  }
  // Every scale of the table was produced with its matrix, in the table's shape and dtype.
  size_t n_scales = 0;
  for (const TensorSpec& spec : table) {
    if (spec.role != TensorRole::kScale) continue;
    ++n_scales;
    const auto it = scales_written.find(spec.name);
    DSV4_CHECK(it != scales_written.end() && it->second == spec.shape &&
                   spec.dtype == DType::kF8_E8M0,
               "scale {} does not match the table", spec.name);
  }
  DSV4_CHECK(n_scales == scales_written.size(), "{} scales written, table lists {}",
             scales_written.size(), n_scales);
  std::string generator = fmt::format("make-tiny v{} preset={} seed={} quant={}",
                                      kTinyCheckpointVersion, preset, seed, tiny_quant_name(quant));
  if (overrides.max_position_embeddings)
    generator += fmt::format(" max_position_embeddings={}", *overrides.max_position_embeddings);
  writer.set_metadata("dsv4_generator", generator);

  // A shard index left from another checkpoint would take precedence over model.safetensors.
  fs::remove(out_dir + "/model.safetensors.index.json", ec);
  if (ec)
    return Status::errorf("--out {}: cannot remove the old shard index: {}", out_dir, ec.message());
  DSV4_RETURN_IF_ERROR(write_text(out_dir + "/config.json", to_config_json_text(cfg) + "\n"));
  DSV4_RETURN_IF_ERROR(
      write_text(out_dir + "/generation_config.json", generation_config_text(cfg)));
  DSV4_RETURN_IF_ERROR(write_tiny_tokenizer(out_dir));
  return writer.write(out_dir + "/model.safetensors");
}

}  // namespace dsv4
