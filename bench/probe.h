// Machine probes every fraction of `dsv4 bench` divides by (STYLE.md 15, 19):
//   read bandwidth: each thread of the pool sums its contiguous share of a buffer
//     (first-touched by that thread) with the widest vector loads the CPU runs
//     (AVX-512, else AVX2, else 64-bit scalar; chosen at run time from base/cpu.h);
//     GB/s = 1e9 bytes / s, best of `reps` timed passes. Buffers >= 1 GiB span far
//     more than the last-level cache: the DRAM read roofline of a decode step.
//   dot peak: each thread runs independent accumulator chains of the widest dot
//     instruction (VDPBF16PS: 32 bf16 multiply-adds = 64 FLOP per instruction; else
//     fp32 FMA on 512 or 256 bits; else SSE mul + add) for a fixed time; GFLOP/s summed
//     over the threads, best of `reps`. The compute roofline of bf16 GEMM work.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/cpu.h"
#include "base/thread_pool.h"

namespace dsv4::bench {

// "avx512 (64-byte loads)", "avx2 (32-byte loads)" or "scalar (8-byte loads)".
const char* read_probe_name(Isa isa);
// "VDPBF16PS (avx512bf16)", "FMA fp32 (avx512)", "FMA fp32 (avx2)", "mul+add fp32 (sse)".
const char* dot_probe_name(Isa isa);

// Best GB/s reading a buffer of `bytes` (rounded down to 4 KiB) with the pool's threads.
double read_bandwidth_gbps(ThreadPool& pool, int64_t bytes, int reps, Isa isa);
// Best GFLOP/s of the dot loop, each pass about `seconds` long.
double dot_peak_gflops(ThreadPool& pool, int reps, double seconds, Isa isa);

// The kernels (probe_kernels_*.cc; each built with its own ISA flags).
namespace probe {
uint64_t read_sum_scalar(const uint8_t* p, int64_t bytes);  // bytes % 4096 == 0
uint64_t read_sum_avx2(const uint8_t* p, int64_t bytes);
uint64_t read_sum_avx512(const uint8_t* p, int64_t bytes);
// `iters` iterations of the unrolled chains; returns a value of the accumulators (keeps
// them live) and sets flops to the FLOPs executed.
float dot_loop_sse(int64_t iters, double* flops);
float dot_loop_fma256(int64_t iters, double* flops);
float dot_loop_fma512(int64_t iters, double* flops);
float dot_loop_bf16(int64_t iters, double* flops);
}  // namespace probe

}  // namespace dsv4::bench
