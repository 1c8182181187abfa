// Packed cache rows: the exact storage form of the Level-A cache values
// (model.md §0.2; runtime.md §2.2-§2.4). Every cached value is already the image
// of an FP8 or FP4 simulation, so codes + one power-of-two scale byte per block
// hold it exactly and decoding gives back the same bits.
//
//   KV row (window KV and compressed KV, width Dh = Dn + Dr):
//     values [0, Dn) are fp8sim_64 images, values [Dn, Dh) (RoPE dims) plain bf16
//     bytes: [Dr bf16 rope dims][Dn e4m3 codes][Dn/64 ue8m0 scales][pad to 8]
//   Index key row (indexer keys, width Di): fp4sim_32 images of all Di values
//     bytes: [Di/2 packed e2m1 codes (element 2c low nibble)][Di/32 ue8m0 scales][pad to 4]
// A scale byte of 255 (NaN) marks a block that held a NaN (poison stays visible).
// Flash: 1024 → 584 bytes per KV row, 256 → 68 bytes per index key.
#pragma once

#include <cstdint>

#include "numeric/bf16.h"

namespace dsv4 {

struct KvRowFormat {
  int dim = 0;       // Dh
  int rope_dim = 0;  // Dr (last Dr values, bf16)
  int nope() const { return dim - rope_dim; }  // Dn, a multiple of 64
  int blocks() const { return nope() / 64; }
  int64_t bytes() const { return (2 * rope_dim + nope() + blocks() + 7) / 8 * 8; }
};

struct IndexKeyFormat {
  int dim = 0;  // Di, a multiple of 32
  int blocks() const { return dim / 32; }
  int64_t bytes() const { return (dim / 2 + blocks() + 3) / 4 * 4; }
};

// v [Dh] bf16 whose first Dn values are fp8sim_64 images -> row [bytes()] (the codes of
// numeric/quant.h's block encoder, so the row decodes to v exactly).
void kv_pack_row(const KvRowFormat& f, const bf16* v, uint8_t* row);
// row -> out [Dh] fp32, exactly the packed values.
void kv_unpack_row(const KvRowFormat& f, const uint8_t* row, float* out);

// v [Di] bf16 fp4sim_32 images -> row [bytes()]; and back to fp32.
void index_key_pack(const IndexKeyFormat& f, const bf16* v, uint8_t* row);
void index_key_unpack(const IndexKeyFormat& f, const uint8_t* row, float* out);

}  // namespace dsv4
