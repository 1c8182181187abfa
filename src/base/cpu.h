// CPU instruction-set selection for the SIMD kernel variants (DESIGN.md "SIMD"):
// each kernel with ISA-specific translation units picks one variant at start-up
// from what the CPU and OS support, and an override (--isa) lets every variant
// run on one machine.
//   kScalar: the portable x86-64-v2 code (always available)
//   kAvx2  : AVX2 + FMA
//   kAvx512: AVX-512 F + BW + VL
//   kAvx512Bf16: the same plus AVX512_BF16 (VDPBF16PS)
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace dsv4 {

enum class Isa { kScalar, kAvx2, kAvx512, kAvx512Bf16 };

inline constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16};

// "scalar", "avx2", "avx512", "avx512bf16".
const char* isa_name(Isa isa);
// True when this CPU (and the OS's saved register state) runs the variant.
bool isa_supported(Isa isa);
// The widest supported variant.
Isa detect_isa();
// Parses an --isa value: a name of isa_name, or "auto" (detect_isa()). Errors
// name the value and the accepted or supported set.
Result<Isa> parse_isa(std::string_view s);

// One kernel's ISA choice: detect_isa() until set; set() checks the CPU runs it.
// Set between steps, not while the kernel runs.
class IsaChoice {
 public:
  explicit IsaChoice(const char* kernel) : kernel_(kernel) {}
  Isa get();
  void set(Isa isa);

 private:
  const char* kernel_;
  std::atomic<int> v_{-1};
};

// Physical memory of the machine in bytes (0 if unknown).
int64_t physical_memory_bytes();

}  // namespace dsv4
