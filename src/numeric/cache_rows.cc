#include "numeric/cache_rows.h"

#include "numeric/e2m1.h"
#include "numeric/e4m3.h"
#include "numeric/quant.h"
#include "numeric/ue8m0.h"

namespace dsv4 {

void kv_pack_row(const KvRowFormat& f, const bf16* v, uint8_t* row) {
  const int Dn = f.nope(), Dr = f.rope_dim;
  auto* rope = reinterpret_cast<bf16*>(row);
  for (int i = 0; i < Dr; ++i) rope[i] = v[Dn + i];
  uint8_t* codes = row + 2 * Dr;
  uint8_t* scales = codes + Dn;
  for (int b = 0; b < f.blocks(); ++b) scales[b] = e4m3_block_encode(v + b * 64, 64, codes + b * 64);
  for (int64_t i = 2 * Dr + Dn + f.blocks(); i < f.bytes(); ++i) row[i] = 0;
}

void kv_unpack_row(const KvRowFormat& f, const uint8_t* row, float* out) {
  const int Dn = f.nope(), Dr = f.rope_dim;
  const auto* rope = reinterpret_cast<const bf16*>(row);
  const uint8_t* codes = row + 2 * Dr;
  const uint8_t* scales = codes + Dn;
  for (int b = 0; b < f.blocks(); ++b) {
    const float s = ue8m0_decode(scales[b]);
    for (int i = 0; i < 64; ++i) out[b * 64 + i] = e4m3_decode(codes[b * 64 + i]) * s;
  }
  for (int i = 0; i < Dr; ++i) out[Dn + i] = rope[i].to_float();
}

void index_key_pack(const IndexKeyFormat& f, const bf16* v, uint8_t* row) {
  uint8_t* scales = row + f.dim / 2;
  for (int b = 0; b < f.blocks(); ++b) scales[b] = e2m1_block_encode(v + b * 32, 32, row + b * 16);
  for (int64_t i = f.dim / 2 + f.blocks(); i < f.bytes(); ++i) row[i] = 0;
}

void index_key_unpack(const IndexKeyFormat& f, const uint8_t* row, float* out) {
  const uint8_t* scales = row + f.dim / 2;
  for (int b = 0; b < f.blocks(); ++b) {
    // The block's 16 values e2m1(nibble)·s (exact products), then two lookups per byte.
    const float s = ue8m0_decode(scales[b]);
    float lut[16];
    for (int c = 0; c < 16; ++c) lut[c] = e2m1_decode(static_cast<uint8_t>(c)) * s;
    const uint8_t* codes = row + b * 16;
    float* o = out + b * 32;
    for (int i = 0; i < 16; ++i) {
      o[2 * i] = lut[codes[i] & 0xF];
      o[2 * i + 1] = lut[codes[i] >> 4];
    }
  }
}

}  // namespace dsv4
