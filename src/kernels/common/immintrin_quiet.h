// <immintrin.h> for the ISA translation units of kernels outside linear/; in the emulated test
// build (DSV4_ISA_EMULATED, tests/CMakeLists.txt) the portable emulation of the same names
// (kernels/linear/isa_emulation.h and isa_emulation_extra.h), so every ISA path runs on any host.
#pragma once

#if defined(DSV4_ISA_EMULATED)
#include "kernels/common/isa_emulation_extra.h"
#elif defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns on its own _mm512_undefined_* inside the AVX-512 intrinsics (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif
