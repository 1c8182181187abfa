// <immintrin.h> for the ISA translation units of kernels outside linear/; in the emulated test
// build (DSV4_ISA_EMULATED, tests/CMakeLists.txt) the portable emulation of the same names
// (kernels/linear/isa_emulation.h and isa_emulation_extra.h), so every ISA path runs on any host.
#pragma once

#if defined(DSV4_ISA_EMULATED)
#include "kernels/common/isa_emulation_extra.h"
#else
#include "kernels/linear/isa_intrinsics.h"  // <immintrin.h> behind GCC 12's warning guard
#endif
