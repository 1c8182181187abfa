// Error exits shared by the benchmark programs: a failed step ends the run with its message.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "base/status.h"

namespace dsv4::bench {

[[noreturn]] inline void die(const char* program, const Status& st) {
  std::fprintf(stderr, "%s: %s\n", program, st.message().c_str());
  std::exit(1);
}

}  // namespace dsv4::bench
