// Start-up self-test of the kernels' SIMD variants (base/cpu.h). The kernels with ISA
// variants (linear and actq, the lane dots of the router and hyper-connections, the
// indexer's score tiles and finish, sparse attention, the query heads' RMS) promise the same
// bits on every variant; this checks the promise on the machine that serves: small seeded
// problems covering each variant's code paths (FP8, FP4 stored and in the dot layout,
// partial K blocks and scale grids, BF16, fp32 in and out, the grouped K tree; 1 to 17
// rows, so the GEMV, transposed and GEMM tiles all run; 1 and 2 threads' splits) run on
// `isa` and on the portable scalar variant, and must agree bit for bit.
//
// A deployment runs one variant (every CLI command selects it before loading); a job's
// ranks may detect different ones and still agree, since each reproduces scalar.
// Runs in a few milliseconds, single-threaded; the caller's kernel_isas() are restored.
#pragma once

#include "base/cpu.h"
#include "base/status.h"

namespace dsv4 {

// The variant of each kernel with several: the one list of them (set one by one only by
// their own kernel tests).
struct KernelIsas {
  Isa linear, lane_dot, indexer, sparse_attn, q_path;
  bool operator==(const KernelIsas&) const = default;
};
KernelIsas kernel_isas();
void set_kernel_isas(const KernelIsas& isas);
// Every such kernel on `isa` (supported by this CPU).
void set_kernel_isa(Isa isa);

// OK, or an error naming the kernel, the case and the first differing element. `isa` must
// be supported by this CPU (isa_supported).
Status isa_self_test(Isa isa);

}  // namespace dsv4
