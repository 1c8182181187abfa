// Key/value path (model.md §6.2, §0.4.5 A6), per row t at position pos[t]:
//   kv = Linear(wkv, a)             [T, Dh] bf16 (actq on a when wkv is stored FP8/FP4)
//   kv = RMSNorm(kv; kv_norm)       bf16 (A3)
//   RoPE on the last Dr dims        bf16 (A5, the layer's profile table)
//   kv[0:Dn] = fp8sim_64(kv[0:Dn])  Dn = Dh − Dr; blocks [0,64), [64,128), …; RoPE dims untouched
// kv[t] is the key and the value of token t (written to the window cache by the caller).
//
// Engine: kKvPathPhases phases, each its own ThreadPool::run:
//   0 actq(a) -> aq     rows split (skipped when wkv is BF16 or io.aq is given)
//   1 wkv: aq -> kv     columns split
//   2 kv_norm, RoPE, fp8sim_64 in place      rows split
#pragma once

#include <cstdint>

#include "numeric/bf16.h"
#include "numeric/linear_weight.h"

namespace dsv4::kernels {

struct KvPathParams {
  int64_t hidden = 0;  // D
  int head_dim = 0;    // Dh
  int rope_dim = 0;    // Dr; Dh − Dr must be a multiple of 64 (Level A, model.md §0.2)
  float eps = 1e-6f;   // fp32(rms_norm_eps)
  int nope_dim() const { return head_dim - rope_dim; }
};

struct KvPathWeights {
  LinearWeight wkv;                 // [Dh, D]
  const bf16* kv_norm = nullptr;    // [Dh]
  const float* inv_freq = nullptr;  // [Dr/2]
};

struct KvPathIO {
  int64_t T = 0;
  const bf16* a = nullptr;       // [T, D]
  const int64_t* pos = nullptr;  // [T]
  bf16* kv = nullptr;            // [T, Dh] out
  bf16* scratch = nullptr;       // kv_path_scratch_elems(p, capacity) bf16
  // actq(a) [T, D] made elsewhere (q_path's phase 0 on the same rows): phase 0 leaves it and
  // phase 1 reads it; nullptr: phase 0 makes it in scratch.
  const bf16* aq = nullptr;
};

// bf16 elements of scratch for T <= capacity rows: aq [T, D].
int64_t kv_path_scratch_elems(const KvPathParams& p, int64_t capacity);

void kv_path_ref(const KvPathParams& p, const KvPathWeights& w, const bf16* a, int64_t T,
                 const int64_t* pos, bf16* kv);

constexpr int kKvPathPhases = 3;
void kv_path(int phase, const KvPathParams& p, const KvPathWeights& w, const KvPathIO& io, int tid,
             int nthreads);

}  // namespace dsv4::kernels
