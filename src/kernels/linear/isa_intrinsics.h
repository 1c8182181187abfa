// The x86 intrinsics of the linear ISA translation units (linear_tile.h): the compiler's
// own (<immintrin.h>), or, in the emulated test build (DSV4_ISA_EMULATED), portable
// emulations of the same names (isa_emulation.h), so every ISA path runs on any host.
#pragma once

#if defined(DSV4_ISA_EMULATED)
#include "kernels/linear/isa_emulation.h"
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
