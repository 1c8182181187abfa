// base/cpu.h: ISA names round-trip through parse_isa, "auto" is detect_isa(),
// detect_isa() is supported and the widest supported variant, unknown and
// unsupported names are errors that name the value.
#include <gtest/gtest.h>

#include "base/cpu.h"

namespace dsv4 {
namespace {

TEST(Cpu, ParseIsa) {
  for (Isa isa : kAllIsas) {
    const auto r = parse_isa(isa_name(isa));
    if (isa_supported(isa)) {
      ASSERT_TRUE(r.ok()) << r.message();
      EXPECT_EQ(*r, isa);
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_NE(r.message().find(isa_name(isa)), std::string::npos) << r.message();
    }
  }
  const auto a = parse_isa("auto");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, detect_isa());
  const auto bad = parse_isa("sse9");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("sse9"), std::string::npos) << bad.message();
}

TEST(Cpu, DetectIsWidestSupported) {
  EXPECT_TRUE(isa_supported(Isa::kScalar));
  EXPECT_TRUE(isa_supported(detect_isa()));
  for (Isa isa : kAllIsas) {
    if (isa_supported(isa)) {
      EXPECT_GE(static_cast<int>(detect_isa()), static_cast<int>(isa));
    }
  }
  // The wider variants need the narrower ones.
  if (isa_supported(Isa::kAvx512Bf16)) {
    EXPECT_TRUE(isa_supported(Isa::kAvx512));
  }
}

}  // namespace
}  // namespace dsv4
