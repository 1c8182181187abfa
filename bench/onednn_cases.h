// The gemm_cases.h shapes through oneDNN's bf16 matmul (bench only; the engine never
// links oneDNN): y[T, out] bf16 = x[T, in] bf16 · W^T, W [out, in] bf16 row-major as a
// checkpoint stores it (memory tag ba of the [in, out] weight), copies spanning
// span_bytes like the engine cases; oneDNN threads = `threads` (its OpenMP runtime).
// Built from onednn_cases.cc when CMake finds libdnnl-dev, else onednn_absent.cc.
#pragma once

#include <vector>

#include "base/status.h"
#include "gemm_cases.h"
#include "report.h"

namespace dsv4::bench {

// False when the bench was built without oneDNN.
bool onednn_available();
// Cases "onednn-bf16" (phase "gemm"), bytes out·in·2.
Result<std::vector<CaseResult>> run_onednn_cases(const std::vector<GemmShape>& shapes, const GemmSets& sets,
                                                 int threads);

}  // namespace dsv4::bench
