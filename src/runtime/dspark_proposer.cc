// DSpark (dspark.md §4.2, §4.4): every position committed this step (prompt rows, and the
// verified rows 0..n_acc of a round) goes to the drafter's rings; each request whose next anchor
// token is known then gets a round: anchor a = committed length − 1, x0 = the token at a + 1, γ
// drafts (fewer near max_context), verified by the next step. With ranks each request's owner
// commits and drafts (the stages join the seams on every rank); the drafts then go to every
// rank's scheduler. Mode rejection (dspark.md §4.3): a round at temperature > 0 draws its drafts
// from λ, which its owner keeps until the verify step.
#include <algorithm>

#include "model/runner.h"
#include "runtime/proposer.h"
#include "runtime/rank_wire.h"

namespace dsv4 {

namespace {

class DsparkProposer final : public Proposer {
 public:
  DsparkProposer(const ProposerContext& ctx, int32_t gamma, bool rejection)
      : ctx_(ctx), gamma_(gamma), rejection_(rejection) {
    const int64_t T = ctx.limits.max_rows, V = ctx.cfg.vocab_size;
    const size_t B = static_cast<size_t>(ctx.limits.max_batch);
    features_width_ = static_cast<int64_t>(ctx.cfg.dspark->target_layer_ids.size()) * ctx.cfg.hidden_size;
    features_.resize(static_cast<size_t>(T * features_width_));
    commits_.reserve(B);
    rounds_.reserve(B);
    round_of_.resize(B);
    lambda_.resize(static_cast<size_t>(T * V));
    round_drafts_.resize(static_cast<size_t>(T));
    drafts_.resize(B * static_cast<size_t>(gamma));
    if (rejection) kept_lambda_.resize(static_cast<size_t>(ctx.limits.max_seqs * static_cast<int64_t>(gamma) * V));
  }

  Taps taps() override { return Taps{nullptr, features_.data(), features_width_}; }
  Verification verify(const PlannedRows& p) const override {
    if (!rejection_ || p.n_drafts == 0 || p.sampling->temperature <= 0.0f) return {};
    return {kept_lambda_.data() + static_cast<int64_t>(local_slot(p.seq)) * gamma_ * ctx_.cfg.vocab_size};
  }
  Status commit(const std::vector<PlannedRows>& plan, const int64_t* row_begin) override;
  Status propose(const std::vector<PlannedRows>& plan) override;

 private:
  // Its owner's index of a job slot (λ is kept on the owner, for its rank's slots).
  int32_t local_slot(int32_t seq) const { return ctx_.limits.local_slot(seq); }
  void plan_rounds(const std::vector<PlannedRows>& plan);
  Status draft_rounds();
  void hand_drafts(const std::vector<PlannedRows>& plan);

  ProposerContext ctx_;
  int32_t gamma_;
  bool rejection_;
  int64_t features_width_;                             // |Lt|·D
  std::vector<bf16> features_;                         // [T_MAX, |Lt|·D] of every row
  std::vector<ModelRunner::DsparkCommit> commits_;     // the step's commits
  std::vector<ModelRunner::DsparkRound> rounds_;       // the step's rounds
  std::vector<int32_t> round_of_;                      // [B_MAX] each round's plan index
  std::vector<float> lambda_;                          // [T_MAX, V] the drafter's λ of a call
  std::vector<int32_t> round_drafts_;                  // [T_MAX] the drafts of a call
  std::vector<int32_t> drafts_;                        // [B_MAX, γ] per planned request (−1: none)
  std::vector<float> kept_lambda_;                     // rejection: [max_seqs, γ, V] λ per slot
};

Status DsparkProposer::commit(const std::vector<PlannedRows>& plan, const int64_t* row_begin) {
  commits_.clear();
  for (size_t i = 0; i < plan.size(); ++i) {
    if (!ctx_.sched.live(i)) continue;
    const int64_t old = ctx_.sched.cached_before(i), n = ctx_.sched.cached(i) - old;
    if (n > 0)
      commits_.push_back({plan[i].seq, old, static_cast<int32_t>(n), features_.data() + row_begin[i] * features_width_,
                          plan[i].owner});
  }
  return ctx_.runner.dspark_commit(commits_);
}

Status DsparkProposer::propose(const std::vector<PlannedRows>& plan) {
  plan_rounds(plan);
  if (rounds_.empty()) return Status();  // the same on every rank (replicated schedulers)
  std::fill_n(drafts_.data(), plan.size() * gamma_, -1);
  DSV4_RETURN_IF_ERROR(draft_rounds());
  DSV4_RETURN_IF_ERROR(ctx_.wire.exchange(plan, RankWire::Source::kOwner, drafts_.data(), gamma_));
  hand_drafts(plan);
  return Status();
}

// A round for each live request whose next anchor token is known.
void DsparkProposer::plan_rounds(const std::vector<PlannedRows>& plan) {
  const Scheduler& s = ctx_.sched;
  rounds_.clear();
  for (size_t i = 0; i < plan.size(); ++i) {
    const int64_t len = s.live(i) ? static_cast<int64_t>(s.tokens(i).size()) : 0;
    if (!s.live(i) || s.cached(i) != len - 1) continue;
    // After a prefix hit the rings hold positions from the slot's start only (dspark.md §4.9).
    const int64_t anchor = len - 2, context_start = ctx_.runner.dspark_context_start(plan[i].seq);
    if (context_start > 0 && anchor - ctx_.cfg.sliding_window + 1 < context_start) continue;
    round_of_[rounds_.size()] = static_cast<int32_t>(i);
    ModelRunner::DsparkRound round{plan[i].seq, anchor, s.tokens(i)[len - 1], plan[i].owner};
    if (rejection_) round.sample = *plan[i].sampling;  // drafts drawn at T > 0
    rounds_.push_back(round);
  }
}

// The rounds in groups that fit max_rows (γ block rows each); each round's drafts to drafts_
// [planned, γ] on its owner.
Status DsparkProposer::draft_rounds() {
  const int32_t G = gamma_;
  const int64_t V = ctx_.cfg.vocab_size, per_call = std::max<int64_t>(1, ctx_.limits.max_rows / G);
  for (size_t r0 = 0; r0 < rounds_.size(); r0 += per_call) {
    const size_t n = std::min<size_t>(per_call, rounds_.size() - r0);
    DSV4_RETURN_IF_ERROR(ctx_.runner.dspark_propose(std::span<const ModelRunner::DsparkRound>(rounds_.data() + r0, n),
                                                    G, lambda_.data(), round_drafts_.data()));
    for (size_t r = 0; r < n; ++r) {
      const ModelRunner::DsparkRound& q = rounds_[r0 + r];
      if (q.owner != ctx_.rank) continue;
      std::copy_n(round_drafts_.data() + r * G, G, drafts_.data() + round_of_[r0 + r] * G);
      if (q.sample.temperature > 0.0f)  // λ_0 .. λ_{γ−1} until the verify step (mode rejection)
        std::copy_n(lambda_.data() + r * G * V, G * V,
                    kept_lambda_.data() + static_cast<int64_t>(local_slot(q.seq)) * G * V);
    }
  }
  return Status();
}

// The (forced) drafts to the scheduler: verify rows len-1 .. len-1+ℓ must stay inside
// max_context.
void DsparkProposer::hand_drafts(const std::vector<PlannedRows>& plan) {
  const int32_t G = gamma_;
  for (size_t r = 0; r < rounds_.size(); ++r) {
    const size_t i = static_cast<size_t>(round_of_[r]);
    const int64_t len = static_cast<int64_t>(ctx_.sched.tokens(i).size());
    int32_t* d = drafts_.data() + i * G;
    const int32_t ell = static_cast<int32_t>(std::clamp<int64_t>(ctx_.limits.max_context - len, 0, G));
    if (ctx_.force_draft)
      for (int32_t k = 0; k < ell; ++k)
        if (const int32_t f = ctx_.force_draft(plan[i].id, len + k); f >= 0) d[k] = f;
    ctx_.sched.set_drafts(i, d, ell);
  }
}

}  // namespace

std::unique_ptr<Proposer> make_dspark_proposer(const ProposerContext& ctx, int32_t gamma, bool rejection) {
  return std::make_unique<DsparkProposer>(ctx, gamma, rejection);
}

}  // namespace dsv4
