// Long-context benchmark (issue 8 item 6; STYLE.md 15): three parts, each with a time
// budget, one markdown table per part. Reported, not asserted.
//
// 1. Flash kernels at long context, caches filled synthetically (random packed codes,
//    not by prefill). Shapes of preset flash: indexer Hi = 64, Di = 128, topk 512;
//    attention H = 64, Dh = 512 (Dr = 64), W = 128. One decode row per request at
//    position p = ctx − 1, B requests each with its own caches laid out as the runner
//    lays them (one block table of page_tokens = 128 positions per block; indexer and
//    CSA KV pages of 32 rows, HCA KV pages of 1 row; window KV a ring of 16-row pages):
//      indexer  indexer_select + indexer_select_merge over n = ctx/4 packed keys (68 B)
//      CSA attn sparse_attn over 128 window + min(512, n) picks (the indexer's picks)
//      HCA attn sparse_attn over 128 window + a dense tail of ctx/128 entries (n_dense)
//    Before each timed repetition a 128 MiB buffer is read so the caches come from DRAM,
//    as in a real step where the other layers' weights pass through the CPU caches in
//    between. Bytes = packed cache rows read per step (index keys n·68 B; KV rows 584 B);
//    % bw against the same-run read bandwidth (bench/bandwidth.h, same thread count).
//    MACs per step: indexer n·Hi·Di (the scores); attention keys·H·Dh·2 (q·k and p·v).
//    The rest of a layer (projections, compressor, MoE) is weight-bound and measured by
//    dsv4 bench; a roofline from the layer's weight bytes is printed for reference.
// 2. Tiny model (preset tiny, FP8, max_position_embeddings 1,048,576, written to a
//    temporary directory): per context ctx a runner with max_context = ctx, one sequence
//    prefilled with ctx − (warm-up + decode steps) random tokens in chunks, then decode
//    steps of B = 1 up to position ctx − 1 (greedy: the next token is the argmax). Prefill
//    tokens/s over the whole prompt and over its last 4 chunks; decode tokens/s from the
//    median step; cache memory resident vs reserved (ModelRunner::cache_memory) at the end.
//    A context is skipped (with a note) when its time, extrapolated by t = a·n + b·n²
//    through the contexts already run, exceeds what is left of the part's budget.
// 3. Time to first token on tiny with prefix caching (page_tokens 128): per repetition a
//    fresh 4096-token system prompt; request A = prompt + 64 tokens starts cold
//    (start_sequence_cached misses), registers its blocks as it runs; request B = the same
//    prompt + 64 other tokens hits (starts at the cut − 4). Time from start_sequence_cached
//    to the logits of the last prompt row, median over repetitions.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "base/cpu.h"
#include "base/math.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "io/safetensors.h"
#include "kernels/attn_select/attn_select.h"
#include "kernels/indexer/indexer.h"
#include "kernels/sparse_attn/sparse_attn.h"
#include "model/cache_bytes.h"
#include "model/checkpoint_table.h"
#include "model/config.h"
#include "model/limits.h"
#include "model/runner.h"
#include "model/weights.h"
#include "numeric/bf16.h"
#include "numeric/cache_rows.h"
#include "numeric/paged_rows.h"
#include "oracle/tiny_checkpoint.h"

#include "bandwidth.h"
#include "bench_util.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;
namespace k = kernels;
using Clock = std::chrono::steady_clock;

constexpr int kPageTokens = 128;   // source positions per block (runner default, runtime.md §7.1)
constexpr int kWinPageRows = 16;   // window-KV ring page (Limits::page_rows default)
constexpr int64_t kFlushBytes = int64_t{128} << 20;
constexpr int kDecodeWarmup = 5;
constexpr int kSystemPrompt = 4096;
constexpr int kSuffix = 64;

struct Args {
  int threads = 2;
  std::vector<int64_t> flash_contexts = {4096, 65536, 1048576};
  std::vector<int> batches = {1, 4};
  double flash_case_s = 3.0;  // per (context, B, kernel)
  std::vector<int64_t> tiny_contexts = {4096, 65536, 262144, 1048576};
  double tiny_budget_s = 600.0;
  int decode_steps = 200;
  int chunk = 512;
  int ttft_reps = 5;
  std::string parts = "123";
};

[[noreturn]] void die(const Status& st) { bench::die("context_bench", st); }

template <typename T>
T value_or_die(Result<T> r) {
  if (!r.ok()) die(r.status());
  return std::move(r.value());
}

void check_ok(const Status& st) {
  if (!st.ok()) die(st);
}

constexpr const char* kFlags =
    "flags: --threads N --flash-contexts A,B,.. --batches A,B,.. --flash-case-s S --tiny-contexts A,B,.. "
    "--tiny-budget-s S --decode-steps N --chunk N --ttft-reps N --parts 123";

std::vector<int64_t> parse_list(const std::string& flag, const std::string& v) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i <= v.size()) {
    const size_t j = std::min(v.find(',', i), v.size());
    char* end = nullptr;
    const std::string item = v.substr(i, j - i);
    const long long x = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || x <= 0) die(Status::errorf("{} {}: expected positive integers", flag, v));
    out.push_back(x);
    i = j + 1;
  }
  return out;
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (i + 1 >= argc) die(Status::errorf("{}: missing value ({})", key, kFlags));
    const std::string v = argv[++i];
    if (key == "--threads") a.threads = std::max(1, std::atoi(v.c_str()));
    else if (key == "--flash-contexts") a.flash_contexts = parse_list(key, v);
    else if (key == "--batches") {
      a.batches.clear();
      for (int64_t b : parse_list(key, v)) a.batches.push_back(static_cast<int>(b));
    } else if (key == "--flash-case-s") a.flash_case_s = std::max(0.0, std::atof(v.c_str()));
    else if (key == "--tiny-contexts") a.tiny_contexts = parse_list(key, v);
    else if (key == "--tiny-budget-s") a.tiny_budget_s = std::max(0.0, std::atof(v.c_str()));
    else if (key == "--decode-steps") a.decode_steps = std::max(1, std::atoi(v.c_str()));
    else if (key == "--chunk") a.chunk = std::max(1, std::atoi(v.c_str()));
    else if (key == "--ttft-reps") a.ttft_reps = std::max(1, std::atoi(v.c_str()));
    else if (key == "--parts") a.parts = v;
    else die(Status::errorf("unknown flag {} ({})", key, kFlags));
  }
  for (int64_t c : a.flash_contexts)
    if (c % kPageTokens != 0) die(Status::errorf("--flash-contexts: {} is not a multiple of {}", c, kPageTokens));
  return a;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

using bench::Rng;

// Reads a buffer larger than the last-level cache with every thread (not timed).
class CacheFlusher {
 public:
  CacheFlusher() : buf_(static_cast<size_t>(kFlushBytes / 8), 1) {}
  void run(ThreadPool& pool) {
    const int64_t n = static_cast<int64_t>(buf_.size());
    std::vector<uint64_t> sums(static_cast<size_t>(pool.size()));
    pool.run([&](int tid, int nt) {
      const Range r = split_range(n, tid, nt);
      uint64_t s = 0;
      for (int64_t i = r.begin; i < r.end; ++i) s += buf_[static_cast<size_t>(i)];
      sums[static_cast<size_t>(tid)] = s;
    });
    uint64_t total = 0;
    for (uint64_t s : sums) total += s;
    sink_ = total;
  }

 private:
  std::vector<uint64_t> buf_;
  volatile uint64_t sink_ = 0;
};

// Times fn() (after an untimed prep()) at least min_reps times, then until budget_s has
// passed or max_reps; returns the times in ms.
template <class Prep, class Fn>
std::vector<double> time_reps(double budget_s, int min_reps, int max_reps, Prep&& prep, Fn&& fn) {
  std::vector<double> ms;
  const auto t_start = Clock::now();
  while (static_cast<int>(ms.size()) < min_reps ||
         (static_cast<int>(ms.size()) < max_reps && seconds_since(t_start) < budget_s)) {
    prep();
    const auto t0 = Clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return ms;
}

// ------------------------------------------------------------------------------------------
// Part 1: Flash kernels over synthetic caches.

// Random packed KV rows: bf16 RoPE dims in [-1, 1), e4m3 codes (no NaN code), scale
// bytes 118..122 (2^-9..2^-5), zero padding.
void fill_kv_rows(const KvRowFormat& f, uint8_t* rows, int64_t n, Rng& rng) {
  const int64_t rb = f.bytes();
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* row = rows + i * rb;
    std::memset(row, 0, static_cast<size_t>(rb));
    for (int d = 0; d < f.rope_dim; ++d) {
      const uint16_t b = bf16::from_float(rng.uniform()).bits;
      std::memcpy(row + 2 * d, &b, 2);
    }
    uint8_t* codes = row + 2 * f.rope_dim;
    for (int c = 0; c < f.nope(); c += 8) {
      const uint64_t r = rng.next();
      for (int j = 0; j < 8; ++j) {
        uint8_t b = static_cast<uint8_t>(r >> (8 * j));
        if ((b & 0x7F) == 0x7F) b ^= 1;  // 0x7F / 0xFF are NaN
        codes[c + j] = b;
      }
    }
    for (int s = 0; s < f.blocks(); ++s) codes[f.nope() + s] = static_cast<uint8_t>(118 + rng.next() % 5);
  }
}

// Random packed index keys: any e2m1 nibbles, scale bytes 125..129.
void fill_index_keys(const IndexKeyFormat& f, uint8_t* rows, int64_t n, Rng& rng) {
  const int64_t rb = f.bytes();
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* row = rows + i * rb;
    std::memset(row, 0, static_cast<size_t>(rb));
    for (int c = 0; c < f.dim / 2; c += 8) {
      const uint64_t r = rng.next();
      std::memcpy(row + c, &r, 8);
    }
    for (int s = 0; s < f.blocks(); ++s) row[f.dim / 2 + s] = static_cast<uint8_t>(125 + rng.next() % 5);
  }
}

std::vector<bf16> random_bf16(int64_t n, float amp, Rng& rng) {
  std::vector<bf16> v(static_cast<size_t>(n));
  for (bf16& x : v) x = bf16::from_float(amp * rng.uniform());
  return v;
}

struct FlashShapes {
  int Hi = 0, Di = 0, Ki = 0, H = 0, Dh = 0, W = 0;
  KvRowFormat kv;
  IndexKeyFormat idx;
};

FlashShapes flash_shapes(const ModelConfig& c) {
  FlashShapes s;
  s.Hi = c.index_n_heads;
  s.Di = static_cast<int>(c.index_head_dim);
  s.Ki = static_cast<int>(c.index_topk);
  s.H = c.num_attention_heads;
  s.Dh = static_cast<int>(c.head_dim);
  s.W = static_cast<int>(c.sliding_window);
  s.kv = KvRowFormat{s.Dh, static_cast<int>(c.qk_rope_head_dim)};
  s.idx = IndexKeyFormat{s.Di};
  return s;
}

// The caches of n_seq sequences at context ctx, as the runner lays them out.
struct SyntheticCaches {
  int64_t ctx = 0, blocks = 0;  // blocks per sequence (kPageTokens positions each)
  std::vector<int32_t> table;   // [n_seq, blocks] block ids (in allocation order)
  std::vector<int32_t> ring;    // window ring pages, [n_seq, ring_pages]
  int32_t ring_pages = 0;
  std::vector<uint8_t> idx, csa, hca, win;  // pools
  std::vector<PagedBytes> idx_rows, csa_rows, hca_rows, win_rows;  // [n_seq]
};

SyntheticCaches make_caches(const FlashShapes& s, int64_t ctx, int n_seq, uint64_t seed) {
  SyntheticCaches c;
  c.ctx = ctx;
  c.blocks = ceil_div<int64_t>(ctx, kPageTokens);
  const int64_t idx_page = kPageTokens / kCsaRatio, hca_page = kPageTokens / 128;
  const int64_t kvb = s.kv.bytes(), ib = s.idx.bytes();
  c.table.resize(static_cast<size_t>(n_seq * c.blocks));
  for (size_t i = 0; i < c.table.size(); ++i) c.table[i] = static_cast<int32_t>(i);
  c.ring_pages = static_cast<int32_t>(ceil_div<int64_t>(s.W - 1, kWinPageRows) + 1);
  c.ring.resize(static_cast<size_t>(n_seq * c.ring_pages));
  for (size_t i = 0; i < c.ring.size(); ++i) c.ring[i] = static_cast<int32_t>(i);
  const int64_t pages = n_seq * c.blocks;
  c.idx.resize(static_cast<size_t>(pages * idx_page * ib));
  c.csa.resize(static_cast<size_t>(pages * idx_page * kvb));
  c.hca.resize(static_cast<size_t>(pages * hca_page * kvb));
  c.win.resize(static_cast<size_t>(n_seq * c.ring_pages * kWinPageRows * kvb));
  Rng rng{seed};
  fill_index_keys(s.idx, c.idx.data(), pages * idx_page, rng);
  fill_kv_rows(s.kv, c.csa.data(), pages * idx_page, rng);
  fill_kv_rows(s.kv, c.hca.data(), pages * hca_page, rng);
  fill_kv_rows(s.kv, c.win.data(), n_seq * c.ring_pages * kWinPageRows, rng);
  for (int r = 0; r < n_seq; ++r) {
    const int32_t* tab = c.table.data() + r * c.blocks;
    c.idx_rows.push_back(PagedBytes{c.idx.data(), tab, static_cast<int32_t>(idx_page), 0, ib});
    c.csa_rows.push_back(PagedBytes{c.csa.data(), tab, static_cast<int32_t>(idx_page), 0, kvb});
    c.hca_rows.push_back(PagedBytes{c.hca.data(), tab, static_cast<int32_t>(hca_page), 0, kvb});
    c.win_rows.push_back(
        PagedBytes{c.win.data(), c.ring.data() + r * c.ring_pages, kWinPageRows, c.ring_pages, kvb});
  }
  return c;
}

void check_finite(const bf16* v, int64_t n, const char* what) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i].to_float())) die(Status::errorf("{}: non-finite output at {}", what, i));
}

struct KernelRow {
  int64_t ctx = 0;
  int B = 0;
  std::string part;
  double ms = 0;
  int reps = 0;
  double bytes = 0, macs = 0;
};

// 64-byte aligned scratch.
struct AlignedBytes {
  std::vector<uint8_t> raw;
  void* base = nullptr;
  explicit AlignedBytes(int64_t n) : raw(static_cast<size_t>(n + 64)) {
    void* p = raw.data();
    size_t space = raw.size();
    base = std::align(64, static_cast<size_t>(n), p, space);
  }
};

std::vector<KernelRow> run_flash(const Args& a, ThreadPool& pool, CacheFlusher& flush, const FlashShapes& s) {
  const int max_b = *std::max_element(a.batches.begin(), a.batches.end());
  Rng rng{7};
  const std::vector<bf16> qi = random_bf16(int64_t{max_b} * s.Hi * s.Di, 1.0f, rng);
  const std::vector<bf16> wgt = random_bf16(int64_t{max_b} * s.Hi, 0.1f, rng);
  const std::vector<bf16> q = random_bf16(int64_t{max_b} * s.H * s.Dh, 1.0f, rng);
  std::vector<float> sink(static_cast<size_t>(s.H));
  for (float& x : sink) x = rng.uniform();
  std::vector<bf16> o(q.size());

  const k::IndexerParams ip{s.Hi, s.Di, s.kv.rope_dim, s.Ki};
  AlignedBytes select_scratch(k::indexer_select_scratch_bytes(ip, pool.size()));
  const k::SparseAttnParams ap{s.H, s.Dh};
  std::vector<float> attn_scratch(static_cast<size_t>(k::sparse_attn_scratch_floats(ap, pool.size())));
  const int64_t stride = s.W + s.Ki;
  std::vector<int32_t> picks(static_cast<size_t>(max_b * s.Ki)), n_picks(static_cast<size_t>(max_b));
  std::vector<int32_t> count(static_cast<size_t>(max_b)), wc(static_cast<size_t>(max_b), s.W);
  std::vector<int32_t> dense(static_cast<size_t>(max_b));
  std::vector<int32_t> list(static_cast<size_t>(max_b * stride)), len(static_cast<size_t>(max_b));
  std::vector<int64_t> pos(static_cast<size_t>(max_b));

  std::vector<KernelRow> rows;
  for (const int64_t ctx : a.flash_contexts) {
    const auto t_fill = Clock::now();
    const SyntheticCaches c = make_caches(s, ctx, max_b, 1000 + static_cast<uint64_t>(ctx));
    std::fprintf(stderr, "  flash ctx %lld: %.2f GB of synthetic caches filled in %.1f s\n",
                 static_cast<long long>(ctx),
                 static_cast<double>(c.idx.size() + c.csa.size() + c.hca.size() + c.win.size()) / 1e9,
                 seconds_since(t_fill));
    const int64_t p = ctx - 1;
    const int64_t n_idx = k::visible_entries(p, kCsaRatio), n_hca = k::visible_entries(p, 128);
    std::fill(pos.begin(), pos.end(), p);
    std::fill(count.begin(), count.end(), static_cast<int32_t>(n_idx));
    std::fill(dense.begin(), dense.end(), static_cast<int32_t>(n_hca));
    const double kvb = static_cast<double>(s.kv.bytes());
    for (const int B : a.batches) {
      const auto prep = [&] { flush.run(pool); };
      const int max_reps = 25;
      // Indexer: streaming top-k over the packed keys.
      const k::IndexKeys keys{c.idx_rows.data(), count.data(), s.idx};
      std::vector<double> ms = time_reps(a.flash_case_s, 3, max_reps, prep, [&] {
        pool.run([&](int tid, int n) {
          k::indexer_select(ip, qi.data(), wgt.data(), keys, B, picks.data(), n_picks.data(), select_scratch.base,
                            tid, n);
        });
        pool.run([&](int tid, int n) {
          k::indexer_select_merge(ip, keys, B, picks.data(), n_picks.data(), select_scratch.base, tid, n);
        });
      });
      for (int t = 0; t < B; ++t)
        if (n_picks[static_cast<size_t>(t)] != std::min<int64_t>(s.Ki, n_idx))
          die(Status::errorf("indexer: row {} has {} picks, expected {}", t, n_picks[static_cast<size_t>(t)],
                             std::min<int64_t>(s.Ki, n_idx)));
      rows.push_back({ctx, B, "indexer select", median(ms), static_cast<int>(ms.size()),
                      static_cast<double>(B * n_idx * s.idx.bytes()), static_cast<double>(B * n_idx) * s.Hi * s.Di});

      // CSA attention: window + the indexer's picks.
      const k::AttnSelectParams csa_sel{k::AttnKind::kCSA, s.W, kCsaRatio, stride};
      k::attn_select(csa_sel, B, pos.data(), wc.data(), picks.data(), s.Ki, n_picks.data(), list.data(), len.data(),
                     0, 1);
      const k::AttnList csa_list{list.data(), stride, len.data(), wc.data(), nullptr};
      const k::PackedAttnKeys csa_keys{c.win_rows.data(), c.csa_rows.data(), s.kv};
      ms = time_reps(a.flash_case_s, 3, max_reps, prep, [&] {
        pool.run([&](int tid, int n) {
          k::sparse_attn(ap, q.data(), B, csa_list, csa_keys, sink.data(), o.data(), attn_scratch.data(), tid, n);
        });
      });
      const double csa_keys_n = static_cast<double>(s.W + std::min<int64_t>(s.Ki, n_idx));
      check_finite(o.data(), int64_t{B} * s.H * s.Dh, "CSA attention");
      rows.push_back({ctx, B, "CSA attention", median(ms), static_cast<int>(ms.size()), B * csa_keys_n * kvb,
                      B * csa_keys_n * s.H * s.Dh * 2.0});

      // HCA attention: window part (an SWA list) + dense tail of every compressed entry.
      const k::AttnSelectParams hca_sel{k::AttnKind::kSWA, s.W, 128, stride};
      k::attn_select(hca_sel, B, pos.data(), wc.data(), nullptr, 0, nullptr, list.data(), len.data(), 0, 1);
      const k::AttnList hca_list{list.data(), stride, len.data(), wc.data(), dense.data()};
      const k::PackedAttnKeys hca_keys{c.win_rows.data(), c.hca_rows.data(), s.kv};
      ms = time_reps(a.flash_case_s, 3, max_reps, prep, [&] {
        pool.run([&](int tid, int n) {
          k::sparse_attn(ap, q.data(), B, hca_list, hca_keys, sink.data(), o.data(), attn_scratch.data(), tid, n);
        });
      });
      const double hca_keys_n = static_cast<double>(s.W + n_hca);
      check_finite(o.data(), int64_t{B} * s.H * s.Dh, "HCA attention");
      rows.push_back({ctx, B, "HCA attention", median(ms), static_cast<int>(ms.size()), B * hca_keys_n * kvb,
                      B * hca_keys_n * s.H * s.Dh * 2.0});
      for (size_t i = rows.size() - 3; i < rows.size(); ++i)
        std::fprintf(stderr, "  flash ctx %lld B %d %s: %.3f ms\n", static_cast<long long>(ctx), B,
                     rows[i].part.c_str(), rows[i].ms);
    }
  }
  return rows;
}

// Weight bytes one decode row of layer l reads, in checkpoint form: every tensor of the
// layer except the routed experts, plus num_experts_per_tok routed experts.
double layer_weight_bytes(const ModelConfig& cfg, int l) {
  double fixed = 0, routed = 0;
  for (const TensorSpec& t : layer_tensors(cfg, l)) (t.routed_expert ? routed : fixed) += static_cast<double>(t.n_bytes());
  return fixed + routed / cfg.n_routed_experts * cfg.num_experts_per_tok;
}

void print_flash(const std::vector<KernelRow>& rows, double bw, const ModelConfig& cfg, int threads) {
  std::printf("\n### Part 1: Flash CSA/HCA layer attention at long context (kernels, synthetic packed caches)\n\n");
  std::printf("Decode row at position ctx − 1, %d threads, caches read cold (128 MiB flush before each rep); "
              "median of reps; %% bw of %.1f GB/s.\n\n", threads, bw);
  std::printf("| context | B | part | ms (median) | reps | cache MB read | GB/s | %% bw | GMAC/s |\n");
  std::printf("|---:|---:|---|---:|---:|---:|---:|---:|---:|\n");
  for (const KernelRow& r : rows) {
    const double gbps = r.bytes / (r.ms * 1e-3) / 1e9;
    std::printf("| %lld | %d | %s | %.3f | %d | %.2f | %.2f | %.1f %% | %.1f |\n", static_cast<long long>(r.ctx), r.B,
                r.part.c_str(), r.ms, r.reps, r.bytes / 1e6, gbps, 100.0 * gbps / bw, r.macs / (r.ms * 1e-3) / 1e9);
  }
  // Rest of a layer: weight-bound; measured by dsv4 bench with the real checkpoint.
  int csa = -1, hca = -1;
  for (int l = 0; l < cfg.num_hidden_layers; ++l) {
    if (csa < 0 && cfg.layer_ratio(l) == kCsaRatio) csa = l;
    if (hca < 0 && cfg.layer_ratio(l) == 128) hca = l;
  }
  if (csa >= 0 && hca >= 0) {
    const double wc = layer_weight_bytes(cfg, csa), wh = layer_weight_bytes(cfg, hca);
    std::printf("\nRest of the layer (projections, compressor, MoE; weight-bound, not measured here — see "
                "dsv4 bench): a B = 1 row reads %.0f MB of weights for a CSA layer, %.0f MB for an HCA layer "
                "(checkpoint form, %d of %d routed experts) = %.2f / %.2f ms at %.1f GB/s.\n",
                wc / 1e6, wh / 1e6, cfg.num_experts_per_tok, cfg.n_routed_experts, wc / bw / 1e6, wh / bw / 1e6, bw);
  }
  std::printf("\nFlash cache bytes per token of context (model/cache_bytes.h):\n\n%s", cache_bytes_table(cfg).c_str());
}

// ------------------------------------------------------------------------------------------
// Part 2 and 3: tiny model.

struct TinyModel {
  std::string dir;
  ModelConfig cfg;
  std::unique_ptr<SafetensorsSet> files;
  std::unique_ptr<Weights> w;
};

std::unique_ptr<TinyModel> make_tiny_model() {
  auto m = std::make_unique<TinyModel>();
  TinyOverrides ov;
  ov.max_position_embeddings = int64_t{1} << 20;
  std::string tmpl = (fs::temp_directory_path() / "context_bench_XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) die(Status::errorf("{}: cannot create a temporary directory", tmpl));
  m->dir = tmpl;
  check_ok(make_tiny_checkpoint(m->dir, "tiny", 0, TinyQuant::kFp8, ov));
  m->cfg = value_or_die(tiny_config("tiny", TinyQuant::kFp8, ov));
  m->files = std::make_unique<SafetensorsSet>(value_or_die(SafetensorsSet::open_dir(m->dir)));
  m->w = std::make_unique<Weights>(value_or_die(load_weights(*m->files, m->cfg, nullptr)));
  return m;
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, Rng& rng) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(vocab));
  return t;
}

int32_t argmax(const float* v, int64_t n) {
  return static_cast<int32_t>(std::max_element(v, v + n) - v);
}

struct TinyRow {
  int64_t ctx = 0, prompt = 0;
  bool skipped = false;
  std::string note;
  double prefill_s = 0, prefill_tps = 0, tail_tps = 0, decode_ms = 0, decode_tps = 0;
  int steps = 0;
  ModelRunner::CacheMemory mem;
};

TinyRow run_tiny_context(const Args& a, const TinyModel& m, int64_t ctx) {
  TinyRow row;
  row.ctx = ctx;
  const int n_decode = kDecodeWarmup + a.decode_steps;
  row.prompt = ctx - n_decode;
  if (row.prompt < 1) die(Status::errorf("--tiny-contexts: {} leaves no prompt before {} decode steps", ctx, n_decode));
  Limits lim;
  lim.max_batch = 1;
  lim.max_seqs = 1;
  lim.max_chunk = a.chunk;
  lim.max_rows = a.chunk;
  lim.max_decode_rows = 1;
  lim.max_context = ctx;
  lim.n_threads = a.threads;
  std::unique_ptr<ModelRunner> r = value_or_die(ModelRunner::create(m.cfg, *m.w, lim));
  const int64_t V = r->vocab_size();
  Rng rng{static_cast<uint64_t>(ctx)};
  const std::vector<int32_t> prompt = random_tokens(row.prompt, V, rng);
  std::vector<float> logits(static_cast<size_t>(a.chunk * V));
  check_ok(r->start_sequence(0));

  // Prefill in chunks; the last chunk computes logits.
  std::vector<double> chunk_s;
  const auto t0 = Clock::now();
  auto t_report = t0;
  int32_t next = 0;
  for (int64_t p0 = 0; p0 < row.prompt; p0 += a.chunk) {
    const int32_t n = static_cast<int32_t>(std::min<int64_t>(a.chunk, row.prompt - p0));
    const bool last = p0 + n == row.prompt;
    const StepRequest q{0, p0, n, row.prompt, prompt.data() + p0};
    const auto tc = Clock::now();
    check_ok(r->forward({&q, 1}, last ? logits.data() : nullptr, nullptr));
    chunk_s.push_back(seconds_since(tc));
    if (last) next = argmax(logits.data() + (n - 1) * V, V);
    if (seconds_since(t_report) > 20.0) {
      t_report = Clock::now();
      std::fprintf(stderr, "  tiny ctx %lld: prefill at %lld / %lld, %.0f s\n", static_cast<long long>(ctx),
                   static_cast<long long>(p0 + n), static_cast<long long>(row.prompt), seconds_since(t0));
    }
  }
  row.prefill_s = seconds_since(t0);
  row.prefill_tps = static_cast<double>(row.prompt) / row.prefill_s;
  // Last full chunks (up to 4): the rate at the end of the context.
  {
    const size_t n_tail = std::min<size_t>(4, chunk_s.size());
    double s = 0;
    int64_t toks = 0;
    for (size_t i = chunk_s.size() - n_tail; i < chunk_s.size(); ++i) {
      s += chunk_s[i];
      toks += std::min<int64_t>(a.chunk, row.prompt - static_cast<int64_t>(i) * a.chunk);
    }
    row.tail_tps = static_cast<double>(toks) / s;
  }

  // Decode B = 1, greedy.
  std::vector<double> step_ms;
  for (int i = 0; i < n_decode; ++i) {
    const StepRequest q{0, row.prompt + i, 1, row.prompt, &next};
    const auto tc = Clock::now();
    check_ok(r->forward({&q, 1}, logits.data(), nullptr));
    next = argmax(logits.data(), V);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - tc).count();
    if (i >= kDecodeWarmup) step_ms.push_back(ms);
  }
  row.steps = a.decode_steps;
  row.decode_ms = median(step_ms);
  row.decode_tps = 1e3 / row.decode_ms;
  row.mem = r->cache_memory();
  return row;
}

// Seconds to run context n, from the contexts run so far: t = a·n + b·n² through the last
// two (b ≥ 0), or b·n² through the only one (an upper bound: prefill is at most quadratic).
double estimate_seconds(const std::vector<std::pair<double, double>>& done, double n) {
  if (done.size() == 1) return done[0].second * (n / done[0].first) * (n / done[0].first);
  const auto [n1, t1] = done[done.size() - 2];
  const auto [n2, t2] = done.back();
  double b = (t2 / n2 - t1 / n1) / (n2 - n1);
  double lin = t1 / n1 - b * n1;
  if (b < 0) {
    b = 0;
    lin = t2 / n2;
  } else if (lin < 0) {
    lin = 0;
    b = t2 / (n2 * n2);
  }
  return lin * n + b * n * n;
}

std::vector<TinyRow> run_tiny(const Args& a, const TinyModel& m) {
  std::vector<TinyRow> rows;
  const auto t_part = Clock::now();
  std::vector<std::pair<double, double>> done;  // (context, seconds)
  for (const int64_t ctx : a.tiny_contexts) {
    const double left = a.tiny_budget_s - seconds_since(t_part);
    if (ctx > m.cfg.max_position_embeddings) {
      TinyRow s;
      s.ctx = ctx;
      s.skipped = true;
      s.note = fmt::format("is above max_position_embeddings {}", m.cfg.max_position_embeddings);
      rows.push_back(s);
      continue;
    }
    if (!done.empty()) {
      const double est = estimate_seconds(done, static_cast<double>(ctx));
      if (est > left) {
        TinyRow s;
        s.ctx = ctx;
        s.skipped = true;
        s.note = fmt::format("skipped: estimated {:.0f} s (fit a·n + b·n² to the contexts run) > {:.0f} s left of "
                             "--tiny-budget-s {:.0f}", est, std::max(0.0, left), a.tiny_budget_s);
        std::fprintf(stderr, "  tiny ctx %lld: %s\n", static_cast<long long>(ctx), s.note.c_str());
        rows.push_back(s);
        continue;
      }
    }
    const auto t0 = Clock::now();
    rows.push_back(run_tiny_context(a, m, ctx));
    const double took = seconds_since(t0);
    done.emplace_back(static_cast<double>(ctx), took);
    const TinyRow& r = rows.back();
    std::fprintf(stderr, "  tiny ctx %lld: prefill %.1f s (%.0f tok/s), decode %.3f ms/step, total %.1f s\n",
                 static_cast<long long>(ctx), r.prefill_s, r.prefill_tps, r.decode_ms, took);
  }
  return rows;
}

void print_tiny(const Args& a, const std::vector<TinyRow>& rows, const ModelConfig& cfg) {
  std::printf("\n### Part 2: tiny model (max_position_embeddings %lld) prefill and decode at long context\n\n",
              static_cast<long long>(cfg.max_position_embeddings));
  std::string kinds;
  for (int l = 0; l < cfg.num_hidden_layers; ++l)
    kinds += fmt::format("{}{}({})", l ? ", " : "", attention_kind_name(cfg.attention_kind(l)), cfg.layer_ratio(l));
  std::printf("Layers %s; %d threads; prefill chunks of %d rows (no logits but the last chunk), then %d + %d "
              "decode steps of B = 1 ending at position ctx − 1 (warm-up, then median step).\n\n",
              kinds.c_str(), a.threads, a.chunk, kDecodeWarmup, a.decode_steps);
  std::printf("| context | prompt | prefill s | prefill tok/s (whole prompt) | prefill tok/s (last 4 chunks) | "
              "decode ms/step | decode tok/s | cache resident MB | cache reserved MB |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const TinyRow& r : rows) {
    if (r.skipped) {
      std::printf("| %lld | — | — | — | — | — | — | — | — |\n", static_cast<long long>(r.ctx));
      continue;
    }
    std::printf("| %lld | %lld | %.1f | %.0f | %.0f | %.3f | %.0f | %.1f | %.1f |\n", static_cast<long long>(r.ctx),
                static_cast<long long>(r.prompt), r.prefill_s, r.prefill_tps, r.tail_tps, r.decode_ms, r.decode_tps,
                static_cast<double>(r.mem.resident) / 1e6, static_cast<double>(r.mem.reserved) / 1e6);
  }
  for (const TinyRow& r : rows)
    if (r.skipped) std::printf("\nNote: context %lld %s.\n", static_cast<long long>(r.ctx), r.note.c_str());
}

struct TtftResult {
  std::vector<double> cold_ms, hit_ms;
  int64_t hit_start = 0;
};

// Feeds prompt[start, n) into slot seq in chunks, registering blocks after each step;
// returns the argmax of the last row's logits.
int32_t feed_prompt(ModelRunner& r, int32_t seq, const std::vector<int32_t>& toks, int64_t start, int chunk,
                    std::vector<float>& logits) {
  const int64_t n = static_cast<int64_t>(toks.size()), V = r.vocab_size();
  int32_t next = -1;
  for (int64_t p0 = start; p0 < n; p0 += chunk) {
    const int32_t c = static_cast<int32_t>(std::min<int64_t>(chunk, n - p0));
    const bool last = p0 + c == n;
    const StepRequest q{seq, p0, c, n, toks.data() + p0};
    check_ok(r.forward({&q, 1}, last ? logits.data() : nullptr, nullptr));
    r.register_prefix(seq, toks.data(), n, false);
    if (last) next = argmax(logits.data() + (c - 1) * V, V);
  }
  return next;
}

TtftResult run_ttft(const Args& a, const TinyModel& m) {
  const int64_t n = kSystemPrompt + kSuffix;
  Limits lim;
  lim.max_batch = 1;
  lim.max_seqs = 2;
  lim.max_chunk = a.chunk;
  lim.max_rows = a.chunk;
  lim.max_decode_rows = 1;
  lim.max_context = n;
  lim.n_threads = a.threads;
  lim.page_tokens = kPageTokens;
  lim.prefix_blocks = 2 * static_cast<int32_t>(ceil_div<int64_t>(n, kPageTokens));
  std::unique_ptr<ModelRunner> r = value_or_die(ModelRunner::create(m.cfg, *m.w, lim));
  std::vector<float> logits(static_cast<size_t>(a.chunk * r->vocab_size()));
  TtftResult res;
  Rng rng{99};
  for (int rep = 0; rep < a.ttft_reps + 1; ++rep) {  // rep 0: warm-up
    const std::vector<int32_t> system = random_tokens(kSystemPrompt, r->vocab_size(), rng);
    std::vector<int32_t> pa = system, pb = system;
    for (const int32_t t : random_tokens(kSuffix, r->vocab_size(), rng)) pa.push_back(t);
    for (const int32_t t : random_tokens(kSuffix, r->vocab_size(), rng)) pb.push_back(t);
    auto t0 = Clock::now();
    const int64_t sa = value_or_die(r->start_sequence_cached(0, pa.data(), n, false, ""));
    feed_prompt(*r, 0, pa, sa, a.chunk, logits);
    const double cold = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    r->end_sequence(0);
    t0 = Clock::now();
    const int64_t sb = value_or_die(r->start_sequence_cached(1, pb.data(), n, false, ""));
    feed_prompt(*r, 1, pb, sb, a.chunk, logits);
    const double hit = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    r->end_sequence(1);
    if (sa != 0) die(Status::errorf("TTFT: the cold request started at {}, expected 0", sa));
    res.hit_start = sb;
    if (rep == 0) continue;
    res.cold_ms.push_back(cold);
    res.hit_ms.push_back(hit);
  }
  return res;
}

void print_ttft(const Args& a, const TtftResult& t) {
  const double cold = median(t.cold_ms), hit = median(t.hit_ms);
  std::printf("\n### Part 3: time to first token, repeated %d-token system prompt + %d-token suffix (tiny)\n\n",
              kSystemPrompt, kSuffix);
  std::printf("%d threads, page_tokens %d, chunks of %d; time from start_sequence_cached to the logits of the "
              "last prompt row; median of %d (after 1 warm-up); the hit starts at position %lld.\n\n",
              a.threads, kPageTokens, a.chunk, a.ttft_reps, static_cast<long long>(t.hit_start));
  std::printf("| request | rows computed | TTFT ms (median) | min | max |\n|---|---:|---:|---:|---:|\n");
  const auto line = [](const char* name, int64_t rows, const std::vector<double>& v) {
    std::printf("| %s | %lld | %.2f | %.2f | %.2f |\n", name, static_cast<long long>(rows), median(v),
                *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
  };
  line("cold (no prefix hit)", kSystemPrompt + kSuffix, t.cold_ms);
  line("prefix hit", kSystemPrompt + kSuffix - t.hit_start, t.hit_ms);
  std::printf("\nSpeed-up cold / hit: %.1fx\n", cold / hit);
}

// 1, 5 and 15 minute load averages from /proc/loadavg ("?" when unreadable): the machine is shared.
std::string load_average() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return "?";
  double l1 = 0, l5 = 0, l15 = 0;
  const int n = std::fscanf(f, "%lf %lf %lf", &l1, &l5, &l15);
  std::fclose(f);
  return n == 3 ? fmt::format("{:.2f} {:.2f} {:.2f}", l1, l5, l15) : "?";
}

int run(const Args& a) {
  const auto t_all = Clock::now();
  ThreadPool pool(a.threads);
  const double bw = bench::measure_read_bandwidth(pool);
  std::printf("machine: %u hardware threads, %d used; read bandwidth %.1f GB/s (bench/bandwidth.h: %d threads, "
              "1 GiB sum, best of 7); widest ISA %s; load average %s\n",
              std::thread::hardware_concurrency(), a.threads, bw, a.threads, isa_name(detect_isa()),
              load_average().c_str());
  std::fflush(stdout);

  if (a.parts.find('1') != std::string::npos) {
    const auto t0 = Clock::now();
    const ModelConfig flash = value_or_die(preset_config("flash", true));
    CacheFlusher flush;
    const std::vector<KernelRow> rows = run_flash(a, pool, flush, flash_shapes(flash));
    print_flash(rows, bw, flash, a.threads);
    std::printf("\n(part 1: %.0f s)\n", seconds_since(t0));
    std::fflush(stdout);
  }
  if (a.parts.find('2') != std::string::npos || a.parts.find('3') != std::string::npos) {
    const auto t0 = Clock::now();
    std::unique_ptr<TinyModel> m = make_tiny_model();
    std::fprintf(stderr, "  tiny checkpoint in %s (%.1f s)\n", m->dir.c_str(), seconds_since(t0));
    if (a.parts.find('2') != std::string::npos) {
      const auto t2 = Clock::now();
      print_tiny(a, run_tiny(a, *m), m->cfg);
      std::printf("\n(part 2: %.0f s)\n", seconds_since(t2));
      std::fflush(stdout);
    }
    if (a.parts.find('3') != std::string::npos) {
      const auto t3 = Clock::now();
      print_ttft(a, run_ttft(a, *m));
      std::printf("\n(part 3: %.0f s)\n", seconds_since(t3));
    }
    std::error_code ec;
    fs::remove_all(m->dir, ec);
  }
  std::printf("\n(total: %.0f s; load average at the end %s)\n", seconds_since(t_all), load_average().c_str());
  return 0;
}

}  // namespace
}  // namespace dsv4

int main(int argc, char** argv) { return dsv4::run(dsv4::parse_args(argc, argv)); }
