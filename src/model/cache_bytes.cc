#include "model/cache_bytes.h"

#include <fmt/format.h>

#include "numeric/cache_rows.h"

namespace dsv4 {

std::vector<CacheFamilyBytes> cache_bytes_per_token(const ModelConfig& cfg) {
  const KvRowFormat kv{static_cast<int>(cfg.head_dim), static_cast<int>(cfg.qk_rope_head_dim)};
  const IndexKeyFormat ik{static_cast<int>(cfg.index_head_dim)};
  int all = 0, csa = 0, hca = 0, hca_ratio = 0;
  int64_t state_bytes = 0;  // fp32 A and B rows of every compressor, one position
  for (int l = 0; l < cfg.n_layers_total(); ++l) {
    ++all;
    const int r = cfg.layer_ratio(l);
    if (r == kCsaRatio) {
      ++csa;
      state_bytes += 2 * 4 * (2 * cfg.head_dim + 2 * cfg.index_head_dim);  // κ = 2 halves each
    } else if (r > 0) {
      ++hca;
      hca_ratio = r;
      state_bytes += 2 * 4 * cfg.head_dim;
    }
  }
  std::vector<CacheFamilyBytes> v;
  v.push_back({"window KV", all, kv.bytes(), 2 * cfg.head_dim, 1, false});
  if (csa > 0) {
    v.push_back({"CSA KV", csa, kv.bytes(), 2 * cfg.head_dim, kCsaRatio, true});
    v.push_back({"indexer keys", csa, ik.bytes(), 2 * cfg.index_head_dim, kCsaRatio, true});
  }
  if (hca > 0) v.push_back({"HCA KV", hca, kv.bytes(), 2 * cfg.head_dim, hca_ratio, true});
  if (state_bytes > 0) v.push_back({"compressor states", 1, state_bytes, state_bytes, 1, false});
  return v;
}

std::string cache_bytes_table(const ModelConfig& cfg) {
  std::string out;
  double packed = 0, plain = 0;
  for (const CacheFamilyBytes& f : cache_bytes_per_token(cfg)) {
    if (f.per_token) {
      out += fmt::format("  {:<18} {:>3} layers, row {} B (bf16 {} B), 1 row per {} positions: {:.1f} B per token "
                         "(bf16 {:.1f}, {:.2f}x)\n",
                         f.family, f.layers, f.row_bytes, f.row_bytes_bf16, f.ratio, f.packed_per_token(),
                         f.bf16_per_token(), f.bf16_per_token() / f.packed_per_token());
      packed += f.packed_per_token();
      plain += f.bf16_per_token();
    } else {
      out += fmt::format("  {:<18} {:>3} layers, {} B per ring position (bf16 {} B): a per-sequence ring, not "
                         "per token\n",
                         f.family, f.layers, f.row_bytes * f.layers, f.row_bytes_bf16 * f.layers);
    }
  }
  out += fmt::format("  {:<18} {:.1f} B per token of context (bf16 {:.1f}, {:.2f}x); {:.2f} GiB at 1M tokens\n",
                     "total", packed, plain, plain / packed, packed * 1048576.0 / (1 << 30));
  return out;
}

}  // namespace dsv4
