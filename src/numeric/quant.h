// Level-A quantizers of model.md §0.2 / §0.4.3 on bf16 rows:
//   actq      per-128 block e4m3 codes + power-of-two scale (GEMM input)
//   fp8sim_b  in-place e4m3 quantize-dequantize in blocks of b (b = 64)
//   fp4sim_b  in-place e2m1 quantize-dequantize in blocks of b (b = 32)
// Scale rule: t = f32(amax · fp32(1/Q)); s = 2^(E(t) + (M(t) != 0)).
// amax = max(max|v|, floor); a NaN in a block propagates to the whole block
// (as torch's amax does), so poisoned data stays visibly poisoned.
#pragma once

#include <cstdint>

#include "numeric/bf16.h"

namespace dsv4 {

constexpr int kActqBlock = 128;
constexpr int kFp8SimBlock = 64;
constexpr int kFp4SimBlock = 32;
constexpr float kActqAmaxFloor = 1e-4f;               // fp32(1e-4)
constexpr float kFp4AmaxFloor = 6.0f * 0x1p-126f;     // fp32(6·2^-126)

// Exponent k of the power-of-two scale 2^k for a block maximum (already
// floored, finite and positive) and the format's reciprocal maximum fp32(1/Q).
int pow2_scale_exponent(float amax, float inv_qmax);
// Exponent for e4m3 (Q = 448) and e2m1 (Q = 6) from a block's raw amax, with
// the floor of the quantizer applied.
int e4m3_scale_exponent(float amax_raw, float floor = kActqAmaxFloor);
int e2m1_scale_exponent(float amax_raw, float floor = kFp4AmaxFloor);

// max|v| over n bf16 values; NaN if any value is NaN.
float block_amax(const bf16* v, int n);
float block_amax(const float* v, int n);

// actq of one row of n elements (n a multiple of 128): codes[n] e4m3 and
// scales[n/128] (fp32 powers of two, NaN for a poisoned block).
void actq_row(const bf16* x, int64_t n, uint8_t* codes, float* scales);
// actq followed by exact dequantization: xhat[i] = e4m3(code_i)·s (exact in bf16).
void actq_dequant_row(const bf16* x, int64_t n, bf16* xhat);

// One block of n values as codes and the ue8m0 byte of its power-of-two scale 2^k
// (255 = NaN: the block held a NaN; its codes are 0). e4m3: one code per byte; e2m1:
// packed two per byte (element 2c in the low nibble), n even. fp8sim / fp4sim are exactly
// these codes decoded and multiplied by 2^k.
uint8_t e4m3_block_encode(const bf16* v, int n, uint8_t* codes);
uint8_t e2m1_block_encode(const bf16* v, int n, uint8_t* packed);

// In-place simulations on n elements (n a multiple of the block size).
void fp8sim_row(bf16* v, int64_t n, int block = kFp8SimBlock);
void fp4sim_row(bf16* v, int64_t n, int block = kFp4SimBlock);

}  // namespace dsv4
