// libFuzzer target: the `dsv4 bench --json` file of `dsv4 plan --bench`
// (parse_bench_fractions) on arbitrary bytes. Invariants: errors name --bench and the
// file; a parsed file has fractions in (0, 100] at ascending B >= 1, and nearest() picks
// one of them for any B.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "model/bench_fractions.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto f = dsv4::parse_bench_fractions(text, "fuzz.json");
  if (!f.ok()) {
    if (f.message().rfind("--bench fuzz.json: ", 0) != 0) std::abort();
    return 0;
  }
  if (f->by_batch.empty() || f->threads < 1) std::abort();
  int64_t prev = 0;
  for (const dsv4::BenchFraction& b : f->by_batch) {
    if (b.batch <= prev || !(b.fraction > 0 && b.fraction <= 100)) std::abort();
    prev = b.batch;
  }
  for (int64_t b : {int64_t{1}, int64_t{8}, int64_t{64}, int64_t{1} << 40}) {
    const dsv4::BenchFraction& n = f->nearest(b);
    if (&n < f->by_batch.data() || &n >= f->by_batch.data() + f->by_batch.size()) std::abort();
  }
  return 0;
}
