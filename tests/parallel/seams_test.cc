// Each seam of parallel/ alone, on 1, 2 and 4 ranks, against the one-process kernels on
// the whole group's rows (every rank computes that reference): per-rank row counts at
// capacity, capacity − 1, 1 and 0, unequal counts, one rank alone; input rows past a rank's
// count poisoned (NaN) and output rows past it sentinel-filled and unchanged. Bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/lm_head/lm_head.h"
#include "kernels/moe_combine/moe_combine.h"
#include "kernels/moe_expert/moe_expert.h"
#include "kernels/out_proj/out_proj.h"
#include "parallel/attn_output_seam.h"
#include "parallel/communicator.h"
#include "parallel/head_seam.h"
#include "parallel/moe_seam.h"
#include "support/poison.h"
#include "support/quant_weights.h"

namespace dsv4 {

Communicator& comm();  // main.cc: MPI under mpirun, else one rank

namespace {

constexpr int64_t kRankCap = 6;  // rows per rank at most

std::vector<std::vector<int64_t>> patterns(int n) {
  std::vector<std::vector<int64_t>> p = {std::vector<int64_t>(n, kRankCap), std::vector<int64_t>(n, kRankCap - 1),
                                         std::vector<int64_t>(n, 1), std::vector<int64_t>(n, 0)};
  std::vector<int64_t> uneven(n), alone(n, 0);
  for (int r = 0; r < n; ++r) uneven[r] = (r * 5 + 3) % (kRankCap + 1);
  alone[n - 1] = kRankCap;
  p.push_back(uneven);
  p.push_back(alone);
  return p;
}

int64_t offset_of(const std::vector<int64_t>& rows, int r) {
  int64_t o = 0;
  for (int q = 0; q < r; ++q) o += rows[q];
  return o;
}

template <class T>
bool same_bits(const T* a, const T* b, int64_t n) {
  return std::memcmp(a, b, sizeof(T) * n) == 0;
}

TEST(Seams, AttnOutputEqualsOneRank) {
  Communicator& c = comm();
  const int G = c.size(), me = c.rank();
  kernels::OutProjParams p{8, 64, 0, 4, 128, 192};  // H, Dh, no RoPE, G_o, Ro, D
  if (p.o_groups % G != 0) GTEST_SKIP() << "o_groups " << p.o_groups << " on " << G << " ranks";
  ThreadPool pool(2);
  // BF16 wo_b; FP8 wo_b; both FP8 in the kernels' tile layout (LinearWeight::fp8_dot: the
  // row shard of wo_a and the column copy of wo_b keep whole tiles).
  for (int form = 0; form < 3; ++form) {
    const WeightFormat fb = form == 0 ? WeightFormat::kBF16 : WeightFormat::kFP8;
    const bool tiles = form == 2;
    std::mt19937 rng(11);
    test::OwnedWeight wo_a = test::quantize_weight(tiles ? WeightFormat::kFP8 : WeightFormat::kBF16, p.u_width(),
                                                   p.group_in(), test::random_f32(rng, p.u_width() * p.group_in(), 0.1f));
    test::OwnedWeight wo_b =
        test::quantize_weight(fb, p.hidden, p.u_width(), test::random_f32(rng, p.hidden * p.u_width(), 0.05f));
    auto view = [tiles](test::OwnedWeight& ow) {
      if (!tiles) return ow.view();
      return pack_tiles_in_place(ow.view());
    };
    const LinearWeight wa = view(wo_a), wb = view(wo_b);
    Result<OutProjShard> shard = make_out_proj_shard(p, wa, wb, G, me);
    ASSERT_TRUE(shard.ok()) << shard.message();
    AttnOutputSeam seam(p, G, me, G * kRankCap);
    const int64_t hd = int64_t{p.n_heads} * p.head_dim, D = p.hidden;
    for (const auto& rows : patterns(G)) {
      const int64_t T = offset_of(rows, G), mine = rows[me], off = offset_of(rows, me);
      std::vector<bf16> o = test::random_bf16(rng, std::max<int64_t>(T, 1) * hd, 1.0f);
      std::vector<bf16> ref(std::max<int64_t>(T, 1) * D);
      std::vector<bf16> o_ref = o;
      const std::vector<int64_t> pos(std::max<int64_t>(T, 1), 0);  // no RoPE dims: unused
      const kernels::OutProjWeights w{wa, wb, nullptr};
      if (T > 0) kernels::out_proj_ref(p, w, o_ref.data(), T, pos.data(), ref.data());
      std::vector<bf16> in(kRankCap * hd, test::nan_value<bf16>()), out(kRankCap * D);
      for (auto& x : out) x = bf16::from_bits(test::kSentinelBf16Bits);
      std::memcpy(in.data(), o.data() + off * hd, sizeof(bf16) * mine * hd);
      const Status st = seam.run(c, pool, *shard, in.data(), rows, out.data());
      ASSERT_TRUE(st.ok()) << st.message();
      EXPECT_TRUE(same_bits(out.data(), ref.data() + off * D, mine * D)) << "form " << form << ", rows " << mine << " of " << T;
      for (int64_t i = mine * D; i < kRankCap * D; ++i)
        ASSERT_EQ(out[i].bits, test::kSentinelBf16Bits) << "row past the rank's count written";
    }
  }
}

TEST(Seams, MoeEqualsOneRank) {
  Communicator& c = comm();
  const int P = c.size(), me = c.rank();
  const int64_t D = 128, F = 128, E = 8, K = 3;
  ThreadPool pool(2);
  for (WeightFormat fe : {WeightFormat::kBF16, WeightFormat::kFP4}) {
    std::mt19937 rng(5);
    std::vector<test::OwnedWeight> owned;
    auto mk = [&](int64_t out, int64_t in) {
      owned.push_back(test::quantize_weight(fe, out, in, test::random_f32(rng, out * in, 0.1f)));
    };
    for (int64_t e = 0; e <= E; ++e) {  // E routed, then the shared expert
      mk(F, D);
      mk(F, D);
      mk(D, F);
    }
    std::vector<kernels::ExpertWeights> experts(E + 1);
    for (int64_t e = 0; e <= E; ++e)
      experts[e] = {owned[3 * e].view(), owned[3 * e + 1].view(), owned[3 * e + 2].view()};
    const kernels::MoeExpertParams ep{D, F, 1.5f};
    MoeSeamParams mp{ep, E, K, P * kRankCap};
    MoeSeam seam(mp, P, me);
    for (const auto& rows : patterns(P)) {
      const int64_t T = offset_of(rows, P), mine = rows[me], off = offset_of(rows, me);
      const int64_t Tr = std::max<int64_t>(T, 1);
      std::vector<bf16> f = test::random_bf16(rng, Tr * D, 1.0f);
      std::vector<int32_t> ids(Tr * K);
      std::vector<float> w(Tr * K);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < K; ++k) {  // a repeated id now and then (hash layers)
          ids[t * K + k] = (t % 4 == 3 && k == 2) ? ids[t * K] : static_cast<int32_t>(rng() % E);
          w[t * K + k] = 0.25f + 0.1f * static_cast<float>(k);
        }
      // One-process reference: every expert here.
      std::vector<bf16> ref(Tr * D);
      if (T > 0) {
        const kernels::MoeDispatchParams dp{K, 0, E, Tr};
        std::vector<uint8_t> buf(kernels::moe_expert_scratch_bytes(ep, dp) + 64);
        void* base = buf.data();
        size_t space = buf.size();
        const int64_t bytes = kernels::moe_expert_scratch_bytes(ep, dp);
        kernels::MoeWork wk = kernels::moe_expert_scratch_carve(ep, dp, std::align(64, bytes, base, space), bytes);
        kernels::moe_dispatch_build(ids.data(), T, dp, &wk);
        kernels::moe_experts_in(f.data(), experts.data(), experts[E], ep, dp, wk, 0, 1);
        kernels::moe_experts_up(experts.data(), experts[E], ep, dp, wk, 0, 1);
        kernels::moe_experts_act(w.data(), experts.data(), experts[E], ep, dp, wk, 0, 1);
        kernels::moe_experts_down(experts.data(), experts[E], ep, dp, wk, 0, 1);
        kernels::moe_combine(wk.x, wk.slot_entry, ids.data(), kernels::shared_out(wk, ep), {D, K}, T, ref.data(),
                             0, 1);
      }
      std::vector<bf16> out(kRankCap * D);
      for (auto& x : out) x = bf16::from_bits(test::kSentinelBf16Bits);
      // The own rows into the seam's batch (the runner's ffn_norm and router write them there).
      std::memcpy(seam.rows(), f.data() + off * D, sizeof(bf16) * mine * D);
      std::memcpy(seam.ids(), ids.data() + off * K, sizeof(int32_t) * mine * K);
      std::memcpy(seam.route_w(), w.data() + off * K, sizeof(float) * mine * K);
      seam.overlap = !seam.overlap;  // patterns alternate: collectives overlapped or waited for at once
      const Status st = seam.run(c, pool, mine, experts.data() + me * (E / P), experts[E], out.data());
      ASSERT_TRUE(st.ok()) << st.message();
      // The seam copies exactly what it sends (the dispatch and combine packs), nothing else.
      EXPECT_EQ(seam.copied_bytes, seam.dispatch_bytes + seam.combine_bytes);
      EXPECT_TRUE(same_bits(out.data(), ref.data() + off * D, mine * D)) << "rows " << mine << " of " << T;
      for (int64_t i = mine * D; i < kRankCap * D; ++i)
        ASSERT_EQ(out[i].bits, test::kSentinelBf16Bits) << "row past the rank's count written";
    }
  }
}

TEST(Seams, HeadEqualsOneRank) {
  Communicator& c = comm();
  const int G = c.size(), me = c.rank();
  const int64_t D = 96, V = 256;
  ThreadPool pool(2);
  std::mt19937 rng(3);
  const test::OwnedWeight head =
      test::quantize_weight(WeightFormat::kBF16, V, D, test::random_f32(rng, V * D, 0.1f));
  HeadSeam seam(D, V, G, me, G * kRankCap);
  for (const auto& rows : patterns(G)) {
    const int64_t T = offset_of(rows, G), mine = rows[me], off = offset_of(rows, me);
    std::vector<bf16> y = test::random_bf16(rng, std::max<int64_t>(T, 1) * D, 1.0f);
    std::vector<float> ref(std::max<int64_t>(T, 1) * V);
    if (T > 0) kernels::lm_head_ref({0, V, V}, head.view(), y.data(), T, ref.data());
    std::vector<bf16> in(kRankCap * D, test::nan_value<bf16>());
    std::memcpy(in.data(), y.data() + off * D, sizeof(bf16) * mine * D);
    // Own rows land at scattered output rows (the step's numbering); the rest keep the sentinel.
    std::vector<int32_t> out_row(kRankCap);
    for (int64_t t = 0; t < kRankCap; ++t) out_row[t] = static_cast<int32_t>(2 * t + 1);
    std::vector<float> out(2 * kRankCap * V + V, test::kSentinelF32);
    const Status st = seam.run(c, pool, head.view(), in.data(), rows, out_row.data(), out.data());
    ASSERT_TRUE(st.ok()) << st.message();
    for (int64_t t = 0; t < kRankCap; ++t) {
      if (t < mine)
        EXPECT_TRUE(same_bits(out.data() + out_row[t] * V, ref.data() + (off + t) * V, V)) << "row " << t;
      else
        EXPECT_EQ(out[out_row[t] * V], test::kSentinelF32);
      EXPECT_EQ(out[2 * t * V], test::kSentinelF32) << "a row between own rows was written";
    }
  }
}

}  // namespace
}  // namespace dsv4
