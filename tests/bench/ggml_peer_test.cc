// The ggml peer's CSV parsing and case names (bench/ggml_peer.h).
#include "ggml_peer.h"

#include <gtest/gtest.h>

namespace dsv4::bench {
namespace {

TEST(GgmlPeer, ParsesRowsSkippingCommentsHeaderAndLogLines) {
  const std::string csv =
      "# ggml repack=0 repack_buft=yes\n"
      "repack: repack tensor  with mxfp4_8x8\n"  // ggml's own log line under --repack
      "mode,case,type,rows,K,T,n_copies,weight_bytes,median_us,GBps,min_us,max_us,buft,relerr\n"
      "ggml,mxfp4_2048x4096,mxfp4,2048,4096,1,23,4456448,575.11,7.75,538.58,659.44,CPU,5.28e-03\n"
      "ggml,mxfp4_2048x4096,mxfp4,2048,4096,64,23,4456448,34115.69,0.13,32361.15,37750.53,CPU,5.28e-03\n";
  Result<std::vector<PeerRow>> rows = parse_peer_csv(csv);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].case_name, "mxfp4_2048x4096");
  EXPECT_EQ((*rows)[1].T, 64);
  EXPECT_DOUBLE_EQ((*rows)[0].weight_bytes, 4456448);
  EXPECT_DOUBLE_EQ((*rows)[1].median_us, 34115.69);
}

TEST(GgmlPeer, MalformedRowNamesItsLine) {
  Result<std::vector<PeerRow>> short_row = parse_peer_csv("mode,case\nggml,x,y\n");
  ASSERT_FALSE(short_row.ok());
  EXPECT_NE(short_row.status().message().find("line 2"), std::string::npos) << short_row.status().message();
  Result<std::vector<PeerRow>> bad_number = parse_peer_csv("ggml,c,t,1,1,one,1,10,5.0\n");
  ASSERT_FALSE(bad_number.ok());
  EXPECT_NE(bad_number.status().message().find("line 1"), std::string::npos);
  Result<std::vector<PeerRow>> zero_time = parse_peer_csv("ggml,c,t,1,1,4,1,10,0\n");
  ASSERT_FALSE(zero_time.ok());
  EXPECT_NE(zero_time.status().message().find("must be positive"), std::string::npos);
}

TEST(GgmlPeer, CaseNamesFollowTheHarness) {
  EXPECT_EQ(peer_case_name(GemmShape{"w1", StorageForm::kFP4, 2048, 4096}), "mxfp4_2048x4096");
  EXPECT_EQ(peer_case_name(GemmShape{"wq_a", StorageForm::kFP8, 1024, 4096}), "q8_0_1024x4096");
  EXPECT_EQ(peer_case_name(GemmShape{"x", StorageForm::kBF16, 4096, 4096}), "bf16_4096x4096");
}

}  // namespace
}  // namespace dsv4::bench
