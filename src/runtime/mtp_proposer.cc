// MTP speculative decode (model.md §11, runtime.md §3.2, §4): after the main forward, the MTP
// layer runs on every position committed this step (its Xfinal from this step, its next token
// now known); the last one's argmax is the draft for the position after the next. The next step
// verifies it by exact match against the token the target samples there; rejected rows leave
// cache content behind that position-addressed writes later overwrite.
#include <cstring>

#include "model/runner.h"
#include "runtime/proposer.h"
#include "runtime/rank_wire.h"
#include "runtime/sampler.h"

namespace dsv4 {

namespace {

class MtpProposer final : public Proposer {
 public:
  explicit MtpProposer(const ProposerContext& ctx) : ctx_(ctx) {
    const int64_t T = ctx.limits.max_rows, V = ctx.cfg.vocab_size, ND = ctx.runner.stream_width();
    const size_t B = static_cast<size_t>(ctx.limits.max_batch);
    reqs_.reserve(B);
    row_begin_.resize(B);
    tokens_.resize(static_cast<size_t>(T));
    xfinal_.resize(static_cast<size_t>(T * ND));
    x_.resize(static_cast<size_t>(T * ND));
    logits_.resize(static_cast<size_t>(T * V));
    head_rows_.resize(B);
    drafts_.resize(B);
  }

  Taps taps() override { return Taps{xfinal_.data(), nullptr, 0}; }
  Status commit(const std::vector<PlannedRows>& plan, const int64_t* row_begin) override;
  Status propose(const std::vector<PlannedRows>& plan) override;

 private:
  // plan[i] is live and its next token is known: it gets a draft.
  bool drafts_for(size_t i) const {
    const Scheduler& s = ctx_.sched;
    return s.live(i) && s.cached(i) == static_cast<int64_t>(s.tokens(i).size()) - 1;
  }
  void build_rows(const std::vector<PlannedRows>& plan, const int64_t* row_begin);

  ProposerContext ctx_;
  std::vector<StepRequest> reqs_;  // [B_MAX] the MTP layer's rows per request
  std::vector<int64_t> row_begin_;  // [B_MAX] each request's first MTP row
  std::vector<int32_t> tokens_;     // [T_MAX] the next token of every MTP row
  std::vector<bf16> xfinal_;        // [T_MAX, N·D] the main forward's Xfinal
  std::vector<bf16> x_;             // [T_MAX, N·D] Xfinal of the MTP rows
  std::vector<float> logits_;       // [T_MAX, V] of the head rows
  std::vector<int32_t> head_rows_;  // [B_MAX] MTP rows whose draft is sampled
  std::vector<int32_t> drafts_;     // [B_MAX] per planned request (−1: none)
};

// MTP rows: the positions committed to the caches this step whose next token is known.
void MtpProposer::build_rows(const std::vector<PlannedRows>& plan, const int64_t* row_begin) {
  const int64_t ND = ctx_.runner.stream_width();
  reqs_.clear();
  int64_t T = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    if (!ctx_.sched.live(i)) continue;
    const PlannedRows& p = plan[i];
    const TokenSeq toks = ctx_.sched.tokens(i);
    const int64_t old = ctx_.sched.cached_before(i), n = ctx_.sched.cached(i) - old;
    for (int64_t j = 0; j < n; ++j) tokens_[T + j] = toks[old + j + 1];
    // Rows this rank did not compute hold stale values the MTP layer never reads.
    std::memcpy(x_.data() + T * ND, xfinal_.data() + row_begin[i] * ND, sizeof(bf16) * n * ND);
    reqs_.push_back(
        StepRequest{p.seq, old, static_cast<int32_t>(n), p.prompt_len, tokens_.data() + T, p.owner, p.split,
                    p.cp_slots});
    row_begin_[i] = T;
    T += n;
  }
}

Status MtpProposer::commit(const std::vector<PlannedRows>& plan, const int64_t* row_begin) {
  build_rows(plan, row_begin);
  if (reqs_.empty()) return Status();
  // The last MTP row (position len - 2) of each request that gets a draft predicts position len.
  int64_t n_head = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    if (!drafts_for(i) || plan[i].sampler != ctx_.rank) continue;
    head_rows_[n_head++] =
        static_cast<int32_t>(row_begin_[i] + (ctx_.sched.cached(i) - ctx_.sched.cached_before(i)) - 1);
  }
  return ctx_.runner.forward_mtp(reqs_, x_.data(), logits_.data(), {}, HeadRows{head_rows_.data(), n_head});
}

Status MtpProposer::propose(const std::vector<PlannedRows>& plan) {
  if (reqs_.empty()) return Status();
  const int64_t V = ctx_.cfg.vocab_size;
  int64_t k = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    drafts_[i] = -1;
    if (!drafts_for(i) || plan[i].sampler != ctx_.rank) continue;
    const kernels::SamplingParams greedy{0.0f, 1.0f, 0};
    const int64_t len = static_cast<int64_t>(ctx_.sched.tokens(i).size());
    float* row = logits_.data() + k++ * V;
    if (plan[i].request->adjust.any()) ctx_.sampler.adjust_row(plan[i], ctx_.sched.tokens(i), row);
    ctx_.sampler.add_sample(row, greedy, len, 1, &drafts_[i]);
  }
  ctx_.sampler.run_sample_tasks();
  DSV4_RETURN_IF_ERROR(ctx_.wire.exchange(plan, RankWire::Source::kSampler, drafts_.data(), 1));
  for (size_t i = 0; i < plan.size(); ++i) {
    if (!drafts_for(i)) continue;
    const int64_t len = static_cast<int64_t>(ctx_.sched.tokens(i).size());
    int32_t d = drafts_[i];
    if (ctx_.force_draft) {
      const int32_t forced = ctx_.force_draft(plan[i].id, len);
      if (forced >= 0) d = forced;
    }
    ctx_.sched.set_drafts(i, &d, 1);
  }
  return Status();
}

}  // namespace

std::unique_ptr<Proposer> make_mtp_proposer(const ProposerContext& ctx) { return std::make_unique<MtpProposer>(ctx); }

}  // namespace dsv4
