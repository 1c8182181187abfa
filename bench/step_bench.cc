// Real-size decode step (STYLE.md 15): one DeepSeek-V4-Flash layer plus the
// head, timed through ModelRunner::forward at B = 1, 4, 16 decode rows.
//
// Model: preset flash (quantized) with num_hidden_layers = 1, compress_ratios
// = {4, 0} (one CSA layer + the MTP entry, which the main forward never reads),
// num_hash_layers = 0 (score routing). A checkpoint of random weights is
// written once into --dir (default /tmp/dsv4_flash1, ~9 GB, mostly the FP4
// experts of both layers) and reused while its stamp names this generator:
//   FP8 matrices: codes with sign random and |code| < 0x50 (|v| < 4), block
//                 scale byte 119 (2^-8); FP4 experts: random nibbles, scale
//                 byte 120 (2^-7); BF16 matrices over 1 Mi elements uniform
//                 with variance 1/in; every other tensor tiny_tensor_sample.
// Speed, not accuracy, matters: the values only need to stay finite.
//
// Each of 16 sequences is prefilled with a --prompt token prompt; then per B,
// warm-up steps and --steps timed decode steps of one row per request with
// logits. Per B: median step time and the weight bytes a step reads:
//   attention = every Linear of the layer's attention (wo_a as its bf16 copy),
//   moe       = gate + shared expert + (distinct routed experts of the step)·(w1+w2+w3),
//   head      = head + hc_head_fn, plus hc_{attn,ffn}_fn and the B embed rows;
// GB/s = mean bytes / median time, and its fraction of the measured 2-thread
// read bandwidth (bench/bandwidth.h). KV-cache reads are not counted. runs/step: thread-pool
// runs (each one barrier) per step.
//
// Then: a prefill chunk of --prompt rows with the head on every row (teacher-forced logits)
// and on the last row only (HeadRows: what the engine asks for); sampling of 1, 4, 16 rows of
// the 129,280-entry vocabulary (temperature 0.8, top-p 0.9) serially and in the runner's pool;
// and the pool runs of one decode step of the tiny preset (B = 1).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/math.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "kernels/sample/sample.h"
#include "cache/step_metadata.h"
#include "io/safetensors.h"
#include "model/checkpoint_table.h"
#include "model/config.h"
#include "model/limits.h"
#include "model/runner.h"
#include "model/tiny_checkpoint.h"
#include "model/weights.h"
#include "numeric/bf16.h"

#include "bandwidth.h"
#include "bench_util.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;

constexpr int kStampVersion = 1;
constexpr const char* kStampFile = "step_bench.stamp";
constexpr uint64_t kSeed = 1;
constexpr int kMaxBatch = 16;
constexpr int kWarmup = 2;
constexpr int64_t kBigTensor = int64_t{1} << 20;  // BF16 matrices above this get the fast fill

struct Args {
  std::string dir = "/tmp/dsv4_flash1";
  int steps = 10;
  int prompt = 64;
  int threads = 2;
};

[[noreturn]] void die(const Status& st) { bench::die("step_bench", st); }

template <typename T>
T value_or_die(Result<T> r) {
  if (!r.ok()) die(r.status());
  return std::move(r.value());
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) die(Status::errorf("{}: missing value (flags: --dir --steps --prompt --threads)", k));
    const std::string v = argv[++i];
    if (k == "--dir") a.dir = v;
    else if (k == "--steps") a.steps = std::max(1, std::atoi(v.c_str()));
    else if (k == "--prompt") a.prompt = std::max(1, std::atoi(v.c_str()));
    else if (k == "--threads") a.threads = std::max(1, std::atoi(v.c_str()));
    else die(Status::errorf("unknown flag {} (flags: --dir --steps --prompt --threads)", k));
  }
  return a;
}

ModelConfig bench_config() {
  ModelConfig cfg = value_or_die(preset_config("flash", true));
  cfg.num_hidden_layers = 1;
  cfg.compress_ratios = {kCsaRatio, 0};
  cfg.num_hash_layers = 0;
  if (Status st = validate_level_a(cfg); !st.ok()) die(st);
  return cfg;
}

using bench::Rng;

// Fills `out` with the stored bytes of `spec` (see the file header for the values).
Status generate_tensor(const ModelConfig& cfg, const TensorSpec& spec, uint64_t stream,
                       std::vector<uint8_t>& out) {
  out.resize(spec.n_bytes());
  Rng rng{kSeed * 0x100000001b3ull + stream};
  if (spec.role == TensorRole::kScale) {
    std::fill(out.begin(), out.end(), spec.form == StorageForm::kFP4 ? uint8_t{120} : uint8_t{119});
    return Status();
  }
  if (spec.role == TensorRole::kMatrix && spec.form == StorageForm::kFP4) {
    for (size_t i = 0; i < out.size(); i += 8) {
      const uint64_t r = rng.next();
      std::memcpy(&out[i], &r, std::min<size_t>(8, out.size() - i));
    }
    return Status();
  }
  if (spec.role == TensorRole::kMatrix && spec.form == StorageForm::kFP8) {
    for (size_t i = 0; i < out.size(); i += 8) {
      const uint64_t r = rng.next();
      for (size_t j = 0; j < 8 && i + j < out.size(); ++j) {
        const uint8_t b = static_cast<uint8_t>(r >> (8 * j));
        out[i + j] = static_cast<uint8_t>((b & 0x80) | (((b & 0x7F) * 0x50) >> 7));
      }
    }
    return Status();
  }
  if (spec.dtype == DType::kBF16 && spec.shape.size() == 2 && spec.numel() > kBigTensor) {
    // Uniform in [-a, a] has variance a^2/3 = 1/in.
    const float a = std::sqrt(3.0f / static_cast<float>(spec.shape[1]));
    for (int64_t i = 0; i < spec.numel(); ++i) {
      const float u = static_cast<float>(rng.next() >> 40) * 0x1p-24f;  // [0, 1)
      const uint16_t b = bf16::from_float((2.0f * u - 1.0f) * a).bits;
      std::memcpy(&out[2 * i], &b, 2);
    }
    return Status();
  }
  Result<std::vector<float>> sample = tiny_tensor_sample(cfg, spec, kSeed);
  if (!sample.ok()) return sample.status();
  const std::vector<float>& v = sample.value();
  if (static_cast<int64_t>(v.size()) != spec.numel())
    return Status::errorf("tensor {}: {} values sampled, {} expected", spec.name, v.size(), spec.numel());
  for (size_t i = 0; i < v.size(); ++i) {
    if (spec.dtype == DType::kBF16) {
      const uint16_t b = bf16::from_float(v[i]).bits;
      std::memcpy(&out[2 * i], &b, 2);
    } else if (spec.dtype == DType::kF32) {
      std::memcpy(&out[4 * i], &v[i], 4);
    } else if (spec.dtype == DType::kI64) {
      const int64_t id = static_cast<int64_t>(v[i]);
      std::memcpy(&out[8 * i], &id, 8);
    } else {
      return Status::errorf("tensor {}: cannot generate dtype {}", spec.name, dtype_name(spec.dtype));
    }
  }
  return Status();
}

// Streams model.safetensors tensor by tensor (never the whole file in memory):
// header with 64-byte aligned data offsets, then each tensor's bytes.
Status write_safetensors(const ModelConfig& cfg, const std::string& path) {
  const std::vector<TensorSpec> table = expected_tensors(cfg);
  std::vector<uint64_t> begin(table.size());
  std::string header = "{\"__metadata__\":{\"format\":\"pt\",\"dsv4_generator\":\"step_bench\"}";
  uint64_t offset = 0;
  for (size_t i = 0; i < table.size(); ++i) {
    const TensorSpec& s = table[i];
    offset = ceil_div<uint64_t>(offset, 64) * 64;
    begin[i] = offset;
    header += fmt::format(",\"{}\":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}", s.name,
                          dtype_name(s.dtype), fmt::join(s.shape, ","), offset, offset + s.n_bytes());
    offset += s.n_bytes();
  }
  header += "}";
  while (header.size() % 8 != 0) header.push_back(' ');

  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::errorf("{}: cannot open for writing: {}", path, std::strerror(errno));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> guard(f, &std::fclose);
  auto put = [&](const void* p, size_t n) -> Status {
    if (n > 0 && std::fwrite(p, 1, n, f) != n)
      return Status::errorf("{}: write failed: {}", path, std::strerror(errno));
    return Status();
  };
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  DSV4_RETURN_IF_ERROR(put(len, 8));
  DSV4_RETURN_IF_ERROR(put(header.data(), header.size()));
  std::vector<uint8_t> bytes;
  const std::vector<uint8_t> zeros(64, 0);
  uint64_t pos = 0;
  for (size_t i = 0; i < table.size(); ++i) {
    DSV4_RETURN_IF_ERROR(put(zeros.data(), begin[i] - pos));
    DSV4_RETURN_IF_ERROR(generate_tensor(cfg, table[i], i, bytes));
    DSV4_RETURN_IF_ERROR(put(bytes.data(), bytes.size()));
    pos = begin[i] + bytes.size();
    if (i % 200 == 0) {
      std::printf("  writing %zu/%zu tensors, %.2f GB\r", i, table.size(), static_cast<double>(pos) / 1e9);
      std::fflush(stdout);
    }
  }
  std::printf("\n");
  if (std::fflush(f) != 0) return Status::errorf("{}: flush failed: {}", path, std::strerror(errno));
  return Status();
}

std::string stamp_text(const ModelConfig& cfg) {
  return fmt::format("dsv4 step_bench checkpoint v{}\n{}\n", kStampVersion, to_config_json_text(cfg));
}

Status write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  return out ? Status() : Status::errorf("{}: cannot write", path);
}

// Reuses dir when its stamp matches; else writes config.json, model.safetensors, then the stamp.
Status ensure_checkpoint(const ModelConfig& cfg, const std::string& dir) {
  const std::string stamp = stamp_text(cfg);
  {
    std::ifstream in(dir + "/" + kStampFile, std::ios::binary);
    std::stringstream ss;
    if (in) ss << in.rdbuf();
    std::error_code ec;
    if (in && ss.str() == stamp && fs::is_regular_file(dir + "/model.safetensors", ec)) {
      std::printf("reusing checkpoint %s\n", dir.c_str());
      return Status();
    }
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::errorf("--dir {}: cannot create: {}", dir, ec.message());
  fs::remove(dir + "/" + kStampFile, ec);
  fs::remove(dir + "/model.safetensors.index.json", ec);
  std::printf("writing checkpoint %s (once)\n", dir.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  DSV4_RETURN_IF_ERROR(write_text(dir + "/config.json", to_config_json_text(cfg) + "\n"));
  const std::string tmp = dir + "/model.safetensors.partial";
  DSV4_RETURN_IF_ERROR(write_safetensors(cfg, tmp));
  fs::rename(tmp, dir + "/model.safetensors", ec);
  if (ec) return Status::errorf("{}: cannot rename: {}", tmp, ec.message());
  DSV4_RETURN_IF_ERROR(write_text(dir + "/" + kStampFile, stamp));
  std::printf("written in %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return Status();
}

// Bytes one pass over a linear reads: codes + scales as the engine holds them.
int64_t linear_bytes(const Linear& l) {
  const LinearWeight& w = l.w;
  switch (w.format) {
    case WeightFormat::kBF16: return w.out * w.in * 2;
    case WeightFormat::kF32: return w.out * w.in * 4;
    case WeightFormat::kFP8: return w.out * w.in + ceil_div<int64_t>(w.out, 128) * ceil_div<int64_t>(w.in, 128);
    case WeightFormat::kFP4: return w.out * w.in / 2 + w.out * w.in / 32;
  }
  return 0;
}

int64_t attention_bytes(const AttentionWeights& a) {
  int64_t b = linear_bytes(a.wq_a) + linear_bytes(a.wq_b) + linear_bytes(a.wkv) + linear_bytes(a.wo_a) +
              linear_bytes(a.wo_b);
  if (a.compressor.present) b += linear_bytes(a.compressor.wkv) + linear_bytes(a.compressor.wgate);
  if (a.indexer.present)
    b += linear_bytes(a.indexer.wq_b) + linear_bytes(a.indexer.weights_proj) +
         linear_bytes(a.indexer.compressor.wkv) + linear_bytes(a.indexer.compressor.wgate);
  return b;
}

int64_t expert_bytes(const ExpertWeights& e) { return linear_bytes(e.w1) + linear_bytes(e.w2) + linear_bytes(e.w3); }

// Reads one byte per 4 KiB page of a linear (codes, then scales), so the timed
// steps see no first-touch faults of the mapping.
uint64_t touch(const Linear& l) {
  const auto* p = static_cast<const uint8_t*>(l.w.data);
  const int64_t data_n = l.w.format == WeightFormat::kFP4   ? l.w.out * l.w.in / 2
                         : l.w.format == WeightFormat::kFP8 ? l.w.out * l.w.in
                                                            : linear_bytes(l);
  const int64_t scale_n = linear_bytes(l) - data_n;
  uint64_t s = 0;
  for (int64_t i = 0; i < data_n; i += 4096) s += p[i];
  for (int64_t i = 0; l.w.scale != nullptr && i < scale_n; i += 4096) s += l.w.scale[i];
  return s;
}

uint64_t touch_experts(const ExpertWeights& e) { return touch(e.w1) + touch(e.w2) + touch(e.w3); }

uint64_t touch_model(const Weights& w) {
  uint64_t s = touch(w.head);
  for (const LayerWeights& lw : w.layers) {
    const AttentionWeights& a = lw.attn;
    for (const Linear* l : {&a.wq_a, &a.wq_b, &a.wkv, &a.wo_a, &a.wo_b, &a.compressor.wkv, &a.compressor.wgate,
                            &a.indexer.wq_b, &a.indexer.weights_proj, &a.indexer.compressor.wkv,
                            &a.indexer.compressor.wgate, &lw.ffn.gate})
      if (l->w.data != nullptr) s += touch(*l);
    s += touch_experts(lw.ffn.shared);
    for (const ExpertWeights& e : lw.ffn.experts) s += touch_experts(e);
  }
  return s;
}

struct Row {
  int B = 0;
  double ms = 0, gb = 0, gbps = 0, frac = 0, experts = 0, attn_gb = 0, moe_gb = 0, head_gb = 0;
  uint64_t runs = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Prefill chunk of the sequence slot `seq` with logits of every row, then of the last row only,
// interleaved; medians in ms.
void prefill_case(ModelRunner& runner, int seq, int prompt, int steps, Rng& rng) {
  const ModelConfig& cfg = runner.config();
  std::vector<int32_t> toks(prompt);
  std::vector<float> logits(static_cast<size_t>(prompt) * cfg.vocab_size);
  std::vector<double> all_ms, last_ms;
  const int32_t last = prompt - 1;
  for (int it = 0; it < kWarmup + steps; ++it)
    for (const bool only_last : {false, true}) {
      for (int32_t& t : toks) t = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(cfg.vocab_size));
      if (Status st = runner.start_sequence(seq); !st.ok()) die(st);
      const StepRequest req{seq, 0, prompt, prompt, toks.data()};
      const HeadRows head = only_last ? HeadRows{&last, 1} : HeadRows{};
      const auto t0 = std::chrono::steady_clock::now();
      if (Status st = runner.forward(std::span(&req, 1), logits.data(), nullptr, {}, head); !st.ok()) die(st);
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      runner.end_sequence(seq);
      if (it >= kWarmup) (only_last ? last_ms : all_ms).push_back(t);
    }
  std::printf("\nprefill chunk of %d rows (median of %d): head on every row %.2f ms, on the last row %.2f ms\n",
              prompt, steps, median(all_ms), median(last_ms));
}

// Per-row sampling time: T rows of V logits, serially on one thread, then in the pool.
void sampling_case(ThreadPool& pool, int64_t V, int steps, Rng& rng) {
  std::printf("\nsampling, V = %lld, temperature 0.8, top-p 0.9 (median of %d): ms per row\n%3s %9s %9s\n",
              static_cast<long long>(V), steps, "T", "serial", "pool");
  for (const int T : {1, 4, 16}) {
    std::vector<float> logits(static_cast<size_t>(T * V));
    for (float& l : logits) l = static_cast<float>(rng.next() >> 40) * 0x1p-24f * 8.0f;
    std::vector<kernels::SampleRow> rows(T);
    for (int t = 0; t < T; ++t) rows[t] = kernels::SampleRow{{0.8f, 0.9f, 7}, 100 + t, 0};
    std::vector<int32_t> serial(T), pooled(T);
    std::vector<uint64_t> scratch(static_cast<size_t>(kernels::sample_scratch_bytes(V, pool.size()) / 8 + 1));
    const int64_t bytes = static_cast<int64_t>(scratch.size() * 8);
    std::vector<double> s_ms, p_ms;
    for (int it = 0; it < kWarmup + steps; ++it) {
      auto t0 = std::chrono::steady_clock::now();
      kernels::sample(logits.data(), T, V, rows.data(), serial.data(), scratch.data(), bytes, 0, 1);
      auto t1 = std::chrono::steady_clock::now();
      pool.run([&](int tid, int n) {
        kernels::sample(logits.data(), T, V, rows.data(), pooled.data(), scratch.data(), bytes, tid, n);
      });
      auto t2 = std::chrono::steady_clock::now();
      if (serial != pooled) die(Status::error("pool sampling differs from serial sampling"));
      if (it < kWarmup) continue;
      s_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count() / T);
      p_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count() / T);
    }
    std::printf("%3d %9.3f %9.3f\n", T, median(s_ms), median(p_ms));
  }
}

// Pool runs of one B = 1 decode step of the tiny preset (after an 8-token prompt).
void tiny_runs_case(int threads) {
  const std::string dir = "/tmp/dsv4_step_bench_tiny";
  if (Status st = make_tiny_checkpoint(dir, "tiny", 0, TinyQuant::kFp8); !st.ok()) die(st);
  const ModelConfig cfg = value_or_die(load_config(dir));
  SafetensorsSet files = value_or_die(SafetensorsSet::open_dir(dir));
  const Weights w = value_or_die(load_weights(files, cfg, nullptr));
  const Limits lim{.max_batch = 1, .max_rows = 8, .max_decode_rows = 1, .max_chunk = 8, .max_seqs = 1,
                   .max_context = 64, .n_threads = threads};
  std::unique_ptr<ModelRunner> runner = value_or_die(ModelRunner::create(cfg, w, lim));
  std::vector<int32_t> toks = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> logits(static_cast<size_t>(cfg.vocab_size));
  if (Status st = runner->start_sequence(0); !st.ok()) die(st);
  const StepRequest pre{0, 0, 8, 8, toks.data()};
  if (Status st = runner->forward(std::span(&pre, 1), nullptr, nullptr); !st.ok()) die(st);
  const StepRequest dec{0, 8, 1, 8, toks.data() + 8};
  const uint64_t r0 = runner->pool().runs();
  if (Status st = runner->forward(std::span(&dec, 1), logits.data(), nullptr); !st.ok()) die(st);
  std::printf("\ntiny preset (%d layers), one B = 1 decode step: %llu pool runs\n", cfg.num_hidden_layers,
              static_cast<unsigned long long>(runner->pool().runs() - r0));
}

int run(const Args& a) {
  const ModelConfig cfg = bench_config();
  if (Status st = ensure_checkpoint(cfg, a.dir); !st.ok()) die(st);

  ThreadPool bw_pool(a.threads);
  const double read_gbps = bench::measure_read_bandwidth(bw_pool);
  std::printf("read bandwidth (%d threads, 1 GiB sum, best of 7): %.1f GB/s\n", a.threads, read_gbps);

  const auto t_load = std::chrono::steady_clock::now();
  SafetensorsSet files = value_or_die(SafetensorsSet::open_dir(a.dir));
  const Weights w = value_or_die(load_weights(files, cfg, nullptr));
  volatile uint64_t sink = touch_model(w);
  static_cast<void>(sink);
  std::printf("loaded and touched in %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count());

  Limits lim;
  lim.max_batch = kMaxBatch;
  lim.max_seqs = kMaxBatch + 1;  // the last slot: the prefill case
  lim.max_chunk = a.prompt;
  lim.max_rows = std::max(a.prompt, kMaxBatch);
  lim.max_decode_rows = 1;
  lim.max_context = a.prompt + (kWarmup + a.steps) * 3 + 16;
  lim.n_threads = a.threads;
  std::unique_ptr<ModelRunner> runner = value_or_die(ModelRunner::create(cfg, w, lim));

  // Prefill every sequence with its own random prompt.
  Rng rng{12345};
  auto token = [&] { return static_cast<int32_t>(rng.next() % static_cast<uint64_t>(cfg.vocab_size)); };
  std::vector<int64_t> pos(kMaxBatch, 0);
  const auto t_pre = std::chrono::steady_clock::now();
  for (int s = 0; s < kMaxBatch; ++s) {
    if (Status st = runner->start_sequence(s); !st.ok()) die(st);
    std::vector<int32_t> prompt(a.prompt);
    for (int32_t& t : prompt) t = token();
    const StepRequest req{s, 0, a.prompt, a.prompt, prompt.data()};
    if (Status st = runner->forward(std::span(&req, 1), nullptr, nullptr); !st.ok()) die(st);
    pos[s] = a.prompt;
  }
  std::printf("prefilled %d x %d tokens in %.1f s\n", kMaxBatch, a.prompt,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t_pre).count());

  const LayerWeights& lw = w.layers[0];
  const int64_t D = cfg.hidden_size;
  const int64_t attn_b = attention_bytes(lw.attn);
  const int64_t hc_b = 2 * int64_t{cfg.hc_mix()} * cfg.hc_dim() * 4;
  const int64_t moe_fixed_b = linear_bytes(lw.ffn.gate) + expert_bytes(lw.ffn.shared);
  const int64_t expert_b = expert_bytes(lw.ffn.experts[0]);
  const int64_t head_b = linear_bytes(w.head) + int64_t{cfg.hc_mult} * cfg.hc_dim() * 4;

  std::vector<float> logits(static_cast<size_t>(kMaxBatch * cfg.vocab_size));
  std::vector<int32_t> tokens(kMaxBatch);
  std::vector<StepRequest> reqs(kMaxBatch);
  std::vector<Decision> dec;
  std::vector<Row> rows;
  for (const int B : {1, 4, 16}) {
    std::vector<double> ms;
    double bytes_sum = 0, experts_sum = 0;
    uint64_t runs = 0;
    for (int it = 0; it < kWarmup + a.steps; ++it) {
      for (int r = 0; r < B; ++r) {
        tokens[r] = token();
        reqs[r] = StepRequest{r, pos[r], 1, a.prompt, &tokens[r]};
      }
      dec.clear();
      const uint64_t runs0 = runner->pool().runs();
      const auto t0 = std::chrono::steady_clock::now();
      if (Status st = runner->forward(std::span(reqs.data(), B), logits.data(), nullptr, DecisionIO{nullptr, &dec}); !st.ok()) die(st);
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      for (int r = 0; r < B; ++r) ++pos[r];
      runs = runner->pool().runs() - runs0;
      if (it < kWarmup) continue;
      for (int r = 0; r < B; ++r)
        if (!std::isfinite(logits[static_cast<size_t>(r * cfg.vocab_size)]))
          die(Status::errorf("non-finite logits at B={}", B));
      std::set<int32_t> distinct;
      for (const Decision& e : dec)
        if (!e.idx && !e.mtp && e.layer == 0) distinct.insert(e.selected.begin(), e.selected.end());
      ms.push_back(t);
      experts_sum += static_cast<double>(distinct.size());
      bytes_sum += static_cast<double>(attn_b + hc_b + moe_fixed_b + head_b + B * D * 2 +
                                       static_cast<int64_t>(distinct.size()) * expert_b);
    }
    std::sort(ms.begin(), ms.end());
    Row row;
    row.B = B;
    row.runs = runs;
    row.ms = ms[ms.size() / 2];
    row.experts = experts_sum / a.steps;
    row.gb = bytes_sum / a.steps / 1e9;
    row.gbps = row.gb / (row.ms / 1e3);
    row.frac = row.gbps / read_gbps;
    row.attn_gb = static_cast<double>(attn_b) / 1e9;
    row.moe_gb = (static_cast<double>(moe_fixed_b) + row.experts * static_cast<double>(expert_b)) / 1e9;
    row.head_gb = static_cast<double>(head_b) / 1e9;
    rows.push_back(row);
  }

  std::printf("\nFlash 1 layer (CSA) + head, %d threads, decode of 1 row per request after a %d-token prompt,\n"
              "median of %d steps; GB = weight bytes read per step (mean over the steps)\n",
              a.threads, a.prompt, a.steps);
  std::printf("%3s %9s %8s %8s %7s %8s | %8s %8s %8s | %9s\n", "B", "step_ms", "GB", "GB/s", "%bw", "experts",
              "attn_GB", "moe_GB", "head_GB", "runs/step");
  for (const Row& r : rows)
    std::printf("%3d %9.2f %8.3f %8.2f %6.1f%% %8.1f | %8.3f %8.3f %8.3f | %9llu\n", r.B, r.ms, r.gb, r.gbps,
                100.0 * r.frac, r.experts, r.attn_gb, r.moe_gb, r.head_gb, static_cast<unsigned long long>(r.runs));
  std::fflush(stdout);
  prefill_case(*runner, kMaxBatch, a.prompt, a.steps, rng);
  sampling_case(runner->pool(), cfg.vocab_size, a.steps, rng);
  tiny_runs_case(a.threads);
  return 0;
}

}  // namespace
}  // namespace dsv4

int main(int argc, char** argv) { return dsv4::run(dsv4::parse_args(argc, argv)); }
