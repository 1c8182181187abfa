// The start-up self-test passes for every variant this CPU runs (they all reproduce scalar),
// refuses an unsupported one, and restores the caller's selection.
#include "model/isa_self_test.h"

#include <gtest/gtest.h>

namespace dsv4 {
namespace {

TEST(IsaSelfTest, EverySupportedVariantReproducesScalar) {
  int ran = 0;
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) {
      const Status st = isa_self_test(isa);
      EXPECT_NE(st.message().find("not supported by this CPU"), std::string::npos) << st.message();
      continue;
    }
    const Status st = isa_self_test(isa);
    EXPECT_TRUE(st.ok()) << isa_name(isa) << ": " << st.message();
    ++ran;
  }
  EXPECT_GE(ran, 1);
}

TEST(IsaSelfTest, RestoresTheSelection) {
  set_kernel_isa(Isa::kScalar);
  ASSERT_TRUE(isa_self_test(detect_isa()).ok());
  EXPECT_EQ(kernel_isas(), (KernelIsas{Isa::kScalar, Isa::kScalar, Isa::kScalar, Isa::kScalar, Isa::kScalar}));
  const Isa best = detect_isa();
  set_kernel_isa(best);
  EXPECT_EQ(kernel_isas(), (KernelIsas{best, best, best, best, best}));
}

}  // namespace
}  // namespace dsv4
