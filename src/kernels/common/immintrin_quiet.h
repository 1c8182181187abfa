// <immintrin.h> for the ISA translation units of kernels outside linear/.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns on its own _mm512_undefined_* inside the AVX-512 intrinsics (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif
