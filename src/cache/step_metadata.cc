#include "cache/step_metadata.h"

#include <algorithm>

#include "base/check.h"

namespace dsv4 {

StepMetadata::StepMetadata(const StepCapacity& c)
    : cap(c),
      row_begin(c.max_batch + 1, 0),
      row_req(c.max_rows),
      row_seq(c.max_rows),
      row_key(c.max_rows),
      pos(c.max_rows),
      token(c.max_rows),
      window_len(c.max_rows),
      ori_slot(c.max_rows) {}

Status validate_step(std::span<const StepRequest> reqs, const StepCapacity& cap) {
  const int64_t B = static_cast<int64_t>(reqs.size());
  if (B > cap.max_batch)
    return Status::errorf("step has {} requests, limit max_batch (B_MAX) = {}", B, cap.max_batch);
  int64_t T = 0;
  for (int64_t r = 0; r < B; ++r) {
    const StepRequest& q = reqs[r];
    if (q.seq < 0 || q.seq >= cap.max_seqs)
      return Status::errorf("request {}: sequence slot {} outside [0, max_seqs = {})", r, q.seq, cap.max_seqs);
    for (int64_t e = 0; e < r; ++e)  // B is small; no allocation in the step
      if (reqs[e].seq == q.seq)
        return Status::errorf("request {}: sequence slot {} appears twice in one step", r, q.seq);
    if (q.n < 1 || q.n > cap.max_request_rows)
      return Status::errorf("request {}: {} rows, must be in [1, R_MAX = {}] (max of max_decode_rows and max_chunk)",
                            r, q.n, cap.max_request_rows);
    if (q.p0 < 0 || q.p0 + q.n > cap.max_context)
      return Status::errorf("request {}: positions [{}, {}) exceed max_context = {}", r, q.p0, q.p0 + q.n,
                            cap.max_context);
    if (q.prompt_len < 1)
      return Status::errorf("request {}: prompt_len = {} must be at least 1", r, q.prompt_len);
    if (q.tokens == nullptr) return Status::errorf("request {}: no tokens", r);
    for (int32_t s = 0; s < q.n; ++s)
      if (q.tokens[s] < 0 || q.tokens[s] >= cap.vocab_size)
        return Status::errorf("request {}: token id {} at row {} outside the vocabulary [0, {})", r,
                              q.tokens[s], s, cap.vocab_size);
    T += q.n;
  }
  if (T > cap.max_rows)
    return Status::errorf("step has {} rows, limit max_rows (T_MAX) = {}", T, cap.max_rows);
  return Status();
}

void build_step_metadata(std::span<const StepRequest> reqs, const CacheGroup& ori, StepMetadata& md) {
  const int32_t W = md.cap.window;
  md.B = static_cast<int32_t>(reqs.size());
  int32_t t = 0;
  for (int32_t r = 0; r < md.B; ++r) {
    const StepRequest& q = reqs[r];
    md.row_begin[r] = t;
    for (int32_t s = 0; s < q.n; ++s, ++t) {
      const int64_t p = q.p0 + s;
      md.row_req[t] = r;
      md.row_seq[t] = q.local >= 0 ? q.local : q.seq;
      md.row_key[t] = q.seq;
      md.pos[t] = p;
      md.token[t] = q.tokens[s];
      const int32_t wc = p < q.prompt_len ? static_cast<int32_t>(std::min<int64_t>(q.prompt_len, W)) : W;
      md.window_len[t] = wc;
      md.ori_slot[t] = ori.slot(md.row_seq[t], p);
    }
  }
  md.row_begin[md.B] = t;
  md.T = t;
}

}  // namespace dsv4
