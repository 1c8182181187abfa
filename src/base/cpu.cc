// __builtin_cpu_supports consults CPUID and XGETBV (OS support of the AVX and
// AVX-512 register state).
#include "base/cpu.h"

#include <unistd.h>

#include "base/check.h"

namespace dsv4 {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Bf16: return "avx512bf16";
  }
  return "?";
}

bool isa_supported(Isa isa) {
#if defined(DSV4_ISA_EMULATED)
  // The emulated test build (tests/CMakeLists.txt dsv4_linear_emulated) runs every variant
  // on portable code (kernels/linear/isa_emulation.h), whatever the CPU.
  return true;
#endif
  __builtin_cpu_init();  // idempotent; needed when called before libgcc's constructor
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
    case Isa::kAvx512Bf16: return isa_supported(Isa::kAvx512) && __builtin_cpu_supports("avx512bf16");
  }
  return false;
}

Isa detect_isa() {
  if (isa_supported(Isa::kAvx512Bf16)) return Isa::kAvx512Bf16;
  if (isa_supported(Isa::kAvx512)) return Isa::kAvx512;
  if (isa_supported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

Result<Isa> parse_isa(std::string_view s) {
  if (s == "auto") return detect_isa();
  for (Isa isa : kAllIsas) {
    if (s != isa_name(isa)) continue;
    if (!isa_supported(isa))
      return Status::errorf("isa '{}' is not supported by this CPU (best: '{}')", s, isa_name(detect_isa()));
    return isa;
  }
  return Status::errorf("isa '{}' unknown (accepted: auto, scalar, avx2, avx512, avx512bf16)", s);
}

Isa IsaChoice::get() {
  int v = v_.load(std::memory_order_relaxed);
  if (v < 0) v_.store(v = static_cast<int>(detect_isa()), std::memory_order_relaxed);
  return static_cast<Isa>(v);
}

void IsaChoice::set(Isa isa) {
  DSV4_CHECK(isa_supported(isa), "{} isa {} not supported by this CPU", kernel_, isa_name(isa));
  v_.store(static_cast<int>(isa), std::memory_order_relaxed);
}

int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? static_cast<int64_t>(pages) * size : 0;
}

}  // namespace dsv4
