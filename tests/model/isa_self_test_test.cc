// The start-up self-test passes for every variant this CPU runs (they all reproduce scalar),
// refuses an unsupported one, and restores the caller's selection.
#include "model/isa_self_test.h"

#include <gtest/gtest.h>

#include "kernels/indexer/indexer.h"
#include "kernels/lane_dot/lane_dot.h"
#include "kernels/linear/linear.h"
#include "kernels/sparse_attn/sparse_attn.h"

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
  kernels::set_linear_isa(Isa::kScalar);
  kernels::set_indexer_isa(Isa::kScalar);
  kernels::set_sparse_attn_isa(Isa::kScalar);
  kernels::set_lane_dot_isa(Isa::kScalar);
  ASSERT_TRUE(isa_self_test(detect_isa()).ok());
  EXPECT_EQ(kernels::linear_isa(), Isa::kScalar);
  EXPECT_EQ(kernels::indexer_isa(), Isa::kScalar);
  EXPECT_EQ(kernels::sparse_attn_isa(), Isa::kScalar);
  EXPECT_EQ(kernels::lane_dot_isa(), Isa::kScalar);
  kernels::set_linear_isa(detect_isa());
  kernels::set_indexer_isa(detect_isa());
  kernels::set_sparse_attn_isa(detect_isa());
  kernels::set_lane_dot_isa(detect_isa());
}

}  // namespace
}  // namespace dsv4
