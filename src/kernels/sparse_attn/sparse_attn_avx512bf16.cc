// Sparse attention's loops on VDPBF16PS (CMakeLists.txt: -mavx512bf16): each instruction adds,
// per fp32 lane, the odd then the even product of a bf16 pair, each step rounded: the order of
// sparse_attn.h, 32 multiply-adds an instruction against 16 of the fp32 variants' separate
// products and sums. The operands are bf16 values (FP8 KV images, bf16 rope dims, q, bf16(p)),
// so packing them into pairs is exact.
//   unpack: kb [n, Dh/2] each key's pair words (dims 2i, 2i + 1), decoded straight from the row;
//   layout: kt [Dh/2, kBlock] kb transposed (the logits' lanes are keys),
//           kv [ceil(n/2), Dh] pair words per dim (entries 2i, 2i + 1; P·V's lanes are dims).
// The scratch is float storage holding words: accessed through may_alias types or intrinsics.
// Four heads a pass: 16 zmm accumulators and 4 key vectors.
#include <bit>

#include "kernels/common/immintrin_quiet.h"
#include "kernels/sparse_attn/sparse_attn_tile.h"

namespace dsv4::kernels::attn_tile {
namespace {

using Word = uint32_t __attribute__((may_alias));
using Half = uint16_t __attribute__((may_alias));


// A pair word's halves with attn_operand applied: a bf16 below 2^-56 has a biased exponent below 71.
inline VecU32 operand_halves(VecU32 w) {
  const auto keep = [](VecU32 h) { return ((h >> 7) & 0xFFu) < 71u ? VecU32{} : h; };
  return keep(w & 0xFFFFu) | (keep(w >> 16) << 16);
}

// Key c's operands as pair words (dims 2i, 2i + 1), row c of kb [kBlock, Dh/2]: the FP8 dims
// decoded in fp32 (exact: e4m3·2^k is a bf16 value) and their high halves packed in pairs.
void unpack_pairs(const KvRowFormat& f, const uint8_t* row, const Block& blk, int c) {
  const int Dn = f.nope(), Dr = f.rope_dim;
  auto* out = reinterpret_cast<Word*>(blk.kb) + static_cast<int64_t>(c) * (blk.Dh / 2);
  const uint8_t* codes = row + 2 * Dr;
  const uint8_t* scales = codes + Dn;
  const __m512i high_halves = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29,
                                               27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  for (int b = 0; b < f.blocks(); ++b) {
    const Vec s = splat(ue8m0_decode(scales[b]));
    for (int i = b * 64; i < b * 64 + 64; i += 32) {
      alignas(64) float v[32];  // one zmm pair natively (kLanes = 16); 8 vectors when emulated
      for (int k = 0; k < 32; k += kLanes) storev(v + k, decode_e4m3_v(codes + i + k, s));
      _mm512_storeu_si512(out + i / 2, _mm512_permutex2var_epi16(_mm512_load_si512(v), high_halves,
                                                                  _mm512_load_si512(v + 16)));
    }
  }
  const auto* rope = reinterpret_cast<const uint32_t*>(row);  // bf16 pairs already
  int i = 0;
  for (; 2 * i + 2 * kLanes <= Dr; i += kLanes) {
    VecU32 w;
    __builtin_memcpy(&w, rope + i, sizeof w);
    const VecU32 o = operand_halves(w);
    __builtin_memcpy(out + Dn / 2 + i, &o, sizeof o);
  }
  const auto* rope16 = reinterpret_cast<const bf16*>(row);
  for (; 2 * i < Dr; ++i)
    out[Dn / 2 + i] = pair_word(attn_operand(rope16[2 * i].to_float()), attn_operand(rope16[2 * i + 1].to_float()));
}

// kt [Dh/2, kBlock]: kb's pair words transposed (the logits' lanes are keys); kv [ceil(n/2), Dh]:
// the words of entries 2i, 2i + 1 per dim (an odd n's last pair with a zero odd entry).
void layout_pairs(const Block& b) {
  const int Dh = b.Dh, half = Dh / 2, n = b.n;
  transpose_impl(b.kb, half, n, b.kt);
  const auto* rows = reinterpret_cast<const Half*>(b.kb);  // [n, Dh] bf16
  auto* kv = reinterpret_cast<Word*>(b.kv);
  __m512i lo_idx, hi_idx;  // word k of 16: even row's dim k, odd row's dim k (then k + 16)
  {
    alignas(64) uint16_t lo[32], hi[32];
    for (int k = 0; k < 16; ++k) {
      lo[2 * k] = static_cast<uint16_t>(k), lo[2 * k + 1] = static_cast<uint16_t>(32 + k);
      hi[2 * k] = static_cast<uint16_t>(16 + k), hi[2 * k + 1] = static_cast<uint16_t>(48 + k);
    }
    lo_idx = _mm512_load_si512(lo);
    hi_idx = _mm512_load_si512(hi);
  }
  for (int i = 0; 2 * i < n; ++i) {
    const Half* even = rows + static_cast<int64_t>(2 * i) * Dh;
    const Half* odd = 2 * i + 1 < n ? even + Dh : nullptr;
    Word* dst = kv + static_cast<int64_t>(i) * Dh;
    int d = 0;
    for (; d + 32 <= Dh; d += 32) {
      const __m512i e = _mm512_loadu_si512(even + d), o = odd ? _mm512_loadu_si512(odd + d) : _mm512_setzero_si512();
      _mm512_storeu_si512(dst + d, _mm512_permutex2var_epi16(e, lo_idx, o));
      _mm512_storeu_si512(dst + d + 16, _mm512_permutex2var_epi16(e, hi_idx, o));
    }
    for (; d < Dh; ++d) dst[d] = uint32_t{even[d]} | (odd ? uint32_t{odd[d]} << 16 : 0u);
  }
}

// The query's pair words, each bf16 half with attn_operand applied.
void prep_q_pairs(const bf16* q, int64_t n, float*, uint32_t* qw) {
  int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    VecU32 w;
    __builtin_memcpy(&w, q + i, sizeof w);
    const VecU32 out = operand_halves(w);
    __builtin_memcpy(qw + i / 2, &out, sizeof out);
  }
  for (; i < n; i += 2) qw[i / 2] = pair_word(attn_operand(q[i].to_float()), attn_operand(q[i + 1].to_float()));
}

template <int G, int NV>
void logits_pairs(const uint32_t* __restrict qw, const float* __restrict kt, int half, float* __restrict s) {
  __m512 acc[G][NV];
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < NV; ++c) acc[g][c] = _mm512_setzero_ps();
  for (int i = 0; i < half; ++i) {
    const float* row = kt + static_cast<int64_t>(i) * kBlock;
    __m512i k[NV];
    for (int c = 0; c < NV; ++c) k[c] = _mm512_loadu_si512(row + 16 * c);
    for (int g = 0; g < G; ++g) {
      const __m512bh qp = (__m512bh)_mm512_set1_epi32(static_cast<int>(qw[static_cast<int64_t>(g) * half + i]));
      for (int c = 0; c < NV; ++c) acc[g][c] = _mm512_dpbf16_ps(acc[g][c], (__m512bh)k[c], qp);
    }
  }
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < NV; ++c) _mm512_storeu_ps(s + g * kBlock + 16 * c, acc[g][c]);
}

template <int G, int G1 = G>
void logits_g(const uint32_t* qw, int g, int nv, const float* kt, int half, float* s) {
  if constexpr (G1 > 1)
    if (g < G1) return logits_g<G, G1 - 1>(qw, g, nv, kt, half, s);
  switch (nv) {
    case 1: return logits_pairs<G1, 1>(qw, kt, half, s);
    case 2: return logits_pairs<G1, 2>(qw, kt, half, s);
    case 3: return logits_pairs<G1, 3>(qw, kt, half, s);
    default: return logits_pairs<G1, 4>(qw, kt, half, s);
  }
}

void logits(const float*, const uint32_t* qw, int G, const Block& b, float* s) {
  logits_g<kMaxHeads>(qw, G, (b.n + 15) / 16, b.kt, b.Dh / 2, s);
}

// P·V of G heads over NV vectors of dims [d0, d0 + 16·NV): pw [G, kBlock/2] the heads' p pairs.
template <int G, int NV>
void pv_chunk_pairs(const uint32_t* __restrict pw, const float* __restrict alpha, const float* __restrict kv, int Dh,
                    int pairs, int d0, float* __restrict acc) {
  __m512 u[G][NV];
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < NV; ++c) u[g][c] = _mm512_setzero_ps();
  for (int i = 0; i < pairs; ++i) {
    const float* row = kv + static_cast<int64_t>(i) * Dh + d0;
    __m512i k[NV];
    for (int c = 0; c < NV; ++c) k[c] = _mm512_loadu_si512(row + 16 * c);
    for (int g = 0; g < G; ++g) {
      const __m512bh pp = (__m512bh)_mm512_set1_epi32(static_cast<int>(pw[g * (kBlock / 2) + i]));
      for (int c = 0; c < NV; ++c) u[g][c] = _mm512_dpbf16_ps(u[g][c], (__m512bh)k[c], pp);
    }
  }
  for (int g = 0; g < G; ++g) {
    const __m512 a = _mm512_set1_ps(alpha[g]);
    for (int c = 0; c < NV; ++c) {
      float* dst = acc + static_cast<int64_t>(g) * Dh + d0 + 16 * c;
      _mm512_storeu_ps(dst, _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(dst), a), u[g][c]));
    }
  }
}

template <int G>
void pv_heads_pairs(const uint32_t* pw, const float* p, const float* alpha, const Block& b, float* acc) {
  const int Dh = b.Dh, pairs = (b.n + 1) / 2;
  int d0 = 0;
  for (; d0 + 64 <= Dh; d0 += 64) pv_chunk_pairs<G, 4>(pw, alpha, b.kv, Dh, pairs, d0, acc);
  for (; d0 + 16 <= Dh; d0 += 16) pv_chunk_pairs<G, 1>(pw, alpha, b.kv, Dh, pairs, d0, acc);
  // Dims past the last 16: the same steps in fp32, the keys read from kv's words (entry j in the
  // low half of word j/2 when even, the high half when odd).
  const auto* kv = reinterpret_cast<const Word*>(b.kv);
  pv_tail(
      p, alpha, G,
      [&](int j, int d) {
        const uint32_t w = kv[static_cast<int64_t>(j / 2) * Dh + d];
        return std::bit_cast<float>(j % 2 ? w & 0xFFFF0000u : w << 16);
      },
      Dh, b.n, d0, acc);
}

template <int G = kMaxHeads>
void pv_g(const uint32_t* pw, const float* p, const float* alpha, int g, const Block& b, float* acc) {
  if constexpr (G > 1)
    if (g < G) return pv_g<G - 1>(pw, p, alpha, g, b, acc);
  pv_heads_pairs<G>(pw, p, alpha, b, acc);
}

void accumulate_pv(const float* p, const float* alpha, int G, const Block& b, float* acc) {
  uint32_t pw[kMaxHeads * kBlock / 2];
  for (int g = 0; g < G; ++g)
    for (int i = 0; 2 * i < b.n; ++i) pw[g * (kBlock / 2) + i] = pair_word(p[g * kBlock + 2 * i], p[g * kBlock + 2 * i + 1]);
  pv_g(pw, p, alpha, G, b, acc);
}

}  // namespace

Fns fns_avx512bf16() {
  return Fns{kMaxHeads, unpack_pairs, prep_q_pairs, layout_pairs, logits, softmax_impl, accumulate_pv, finish_impl};
}

}  // namespace dsv4::kernels::attn_tile
