// Rotary position embedding (model.md §4, §0.4.5 A5): fp32 frequency table per
// profile (rope_theta without YaRN, or compress_rope_theta with YaRN),
// interleaved adjacent pairs on the last Dr dims of each head vector; results
// rounded to bf16. The inverse rotation (s -> -s) de-rotates attention output.
#pragma once

#include <cstdint>
#include <vector>

#include "numeric/bf16.h"

namespace dsv4::kernels {

struct RopeParams {
  int rope_dim = 0;              // Dr (even)
  double theta = 10000.0;
  bool yarn = false;
  double yarn_factor = 16.0;
  double original_max_pos = 65536.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

// Largest Dr the engine supports (stack tables of Dr/2 cos/sin).
constexpr int kRopeMaxDim = 256;

// inv[i], i = 0 .. Dr/2-1, in the Level-A fp32 op order. Setup-time (allocates).
std::vector<float> rope_inv_freq(const RopeParams& p);
// YaRN ramp bounds lo, hi of §4.1 (double, as the demo; hi += 0.001 when equal).
void yarn_ramp_bounds(const RopeParams& p, double* lo, double* hi);

// Rotates the last Dr dims of each of n_vec vectors of length dim (stride dim)
// of row t, at position pos[t], for t in [0, T). inverse = de-rotation.
// x: [T, n_vec, dim] bf16, in place. angle = f32(fp32(p)·inv[i]); cos/sin are
// std::cos/std::sin of the fp32 angle; a' = bf16(a·c − b·s), b' = bf16(a·s + b·c)
// with s -> −s for the inverse. The engine splits the T·n_vec vectors over threads.
void rope_ref(const float* inv_freq, int rope_dim, bf16* x, int64_t T, int n_vec, int dim,
              const int64_t* pos, bool inverse);
void rope(const float* inv_freq, int rope_dim, bf16* x, int64_t T, int n_vec, int dim,
          const int64_t* pos, bool inverse, int tid, int nthreads);

// The engine's pieces, for kernels that rotate inside a fused loop (same bits as rope):
// one row's tables cs[i] = cos(angle), sn[i] = ±sin(angle) [Dr/2] at position pos ...
void rope_tables(const float* inv_freq, int rope_dim, int64_t pos, bool inverse, float* cs, float* sn);
// ... and the rotation of one vector's last Dr dims (dims points at them) with them.
void rope_rotate(bf16* dims, int rope_dim, const float* cs, const float* sn);

}  // namespace dsv4::kernels
