// embed: engine vs reference (exact copies) at every T in [1, kCapacity] with 1
// and 2 threads, N = 4 streams and N = 1, tiny and tiny2 widths; out-of-range
// ids: the Status names id, row and vocabulary size; the engine's checked
// precondition aborts.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/embed/embed.h"
#include "support/poison.h"
#include "support/threads.h"
#include "support/quant_weights.h"
#include "support/tolerance.h"

namespace dsv4::kernels {
namespace {

using test::kCapacity;

using test::pool2;
using test::run;

TEST(Embed, EveryTMatchesRef) {
  for (int64_t D : {128, 256})
    for (int N : {4, 1}) {
      const EmbedParams p{512, D, N};
      std::mt19937 rng(static_cast<uint32_t>(D + N));
      const auto table = test::random_bf16(rng, 512 * D, 1.0f);
      std::vector<int32_t> tok(kCapacity);
      for (auto& t : tok) t = std::uniform_int_distribution<int32_t>(0, 511)(rng);
      tok[0] = 0;
      tok[1] = 511;
      ASSERT_TRUE(validate_token_ids(tok.data(), kCapacity, 512).ok());
      std::vector<bf16> want(kCapacity * N * D);
      embed_ref(p, table.data(), tok.data(), kCapacity, want.data());
      for (int64_t t = 0; t < kCapacity; ++t)  // the spec's definition, independently
        for (int k = 0; k < N; ++k)
          ASSERT_EQ(0, std::memcmp(&want[(t * N + k) * D], &table[tok[t] * D], D * sizeof(bf16)));
      test::RowBuffer<bf16> X(kCapacity, N * D);
      for (int nthreads : {1, 2})
        for (int T = 1; T <= kCapacity; ++T) {
          X.poison(T);
          run(nthreads, [&](int tid, int n) { embed(p, table.data(), tok.data(), T, X.data(), tid, n); });
          ASSERT_TRUE(X.sentinel_intact(T));
          ASSERT_TRUE(test::all_close(X.data(), want.data(), T * N * D, test::kExact)) << "T=" << T;
        }
    }
}

TEST(Embed, OutOfRangeIds) {
  const int32_t ok[3] = {0, 5, 511};
  EXPECT_TRUE(validate_token_ids(ok, 3, 512).ok());
  const int32_t high[3] = {0, 512, 3};
  Status s = validate_token_ids(high, 3, 512);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("512"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("row 1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[0, 512)"), std::string::npos) << s.message();
  const int32_t neg[2] = {-1, 0};
  s = validate_token_ids(neg, 2, 512);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("-1 at row 0"), std::string::npos) << s.message();
  // Rows >= T are not inspected.
  EXPECT_TRUE(validate_token_ids(high, 1, 512).ok());
  EXPECT_TRUE(validate_token_ids(high, 0, 512).ok());
}

TEST(EmbedDeathTest, EngineChecksPrecondition) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const EmbedParams p{4, 2, 1};
  const std::vector<bf16> table(8);
  const int32_t tok[1] = {4};
  bf16 X[2];
  EXPECT_DEATH(embed(p, table.data(), tok, 1, X, 0, 1), "DSV4_CHECK");
}

}  // namespace
}  // namespace dsv4::kernels
