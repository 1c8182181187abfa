// Teacher-forced logits over one sequence: demo numerics through ModelRunner
// (chunked prefill or one-token decode steps), float numerics through
// float_forward; decisions gathered from either and sorted one way.
#include "oracle/teacher_forced.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <span>
#include <tuple>

#include <fmt/format.h>

#include "base/check.h"
#include "cache/step_metadata.h"
#include "model/limits.h"
#include "model/runner.h"
#include "numeric/bf16.h"
#include "oracle/float_forward.h"
#include "oracle/reference_model.h"

namespace dsv4 {

Result<Numerics> parse_numerics(std::string_view name) {
  if (name == "demo") return Numerics::kDemo;
  if (name == "reference") return Numerics::kReference;
  if (name == "float") return Numerics::kFloat;
  return Status::errorf("numerics '{}' unknown (known: demo, reference, float)", name);
}

std::string_view numerics_name(Numerics n) {
  return n == Numerics::kDemo ? "demo" : n == Numerics::kReference ? "reference" : "float";
}

namespace {

Status validate(const ModelConfig& cfg, const Weights& w, const std::vector<int32_t>& tokens,
                const TeacherForcedOptions& opt) {
  if (tokens.empty()) return Status::error("token list is empty: at least one token is needed");
  if (opt.chunk < 0) return Status::errorf("chunk = {} must not be negative (0 = whole prompt)", opt.chunk);
  if (opt.chunk > kMaxTeacherForcedCall)
    return Status::errorf("chunk = {} exceeds the largest prefill call of {} rows", opt.chunk,
                          kMaxTeacherForcedCall);
  if (opt.decode && opt.chunk > 0)
    return Status::errorf("decode and chunk = {} contradict each other: decode feeds every token after "
                          "the first as its own step",
                          opt.chunk);
  if (opt.n_threads < 1) return Status::errorf("n_threads = {} must be at least 1", opt.n_threads);
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= cfg.vocab_size)
      return Status::errorf("token id {} at index {} outside the vocabulary [0, {})", tokens[i], i,
                            cfg.vocab_size);
  if (opt.mtp && tokens.size() < 2)
    return Status::errorf("mtp needs at least 2 tokens (row p uses token p+1), got {}", tokens.size());
  if (opt.mtp && w.mtp.empty())
    return Status::errorf("mtp requested, but {}", cfg.no_mtp_reason());
  if (opt.dspark_gamma != 0) {
    if (opt.mtp) return Status::error("dspark and mtp exclude each other (one drafter per checkpoint)");
    if (!w.dspark.present)
      return Status::error("dspark requested, but the checkpoint has no DSpark drafter (config.json "
                           "has no dspark_* fields; dspark.md §1.3)");
    if (tokens.size() < 2)
      return Status::errorf("dspark needs at least 2 tokens (anchor a uses token a+1), got {}", tokens.size());
    if (opt.dspark_gamma < 1 || opt.dspark_gamma > kMaxDsparkGamma)
      return Status::errorf("gamma = {} must lie in [1, {}]", opt.dspark_gamma, kMaxDsparkGamma);
  }
  return Status();
}

// Rows per main call of a Level-A feeding.
int32_t call_rows(int64_t n, const TeacherForcedOptions& opt) {
  return opt.decode ? 1
         : opt.chunk > 0 ? static_cast<int32_t>(std::min<int64_t>(opt.chunk, n))
                         : static_cast<int32_t>(std::min<int64_t>(n, kMaxTeacherForcedCall));
}

// Level A: the feeding of teacher_forced.h through one sequence slot of `model`
// (ModelRunner or ReferenceModel: the same calls).
template <class Model>
Status feed(Model& model, const std::vector<int32_t>& tokens, const TeacherForcedOptions& opt,
            TeacherForcedOutput& out) {
  const int64_t n = static_cast<int64_t>(tokens.size()), V = model.vocab_size();
  const int32_t call = call_rows(n, opt);
  DSV4_RETURN_IF_ERROR(model.start_sequence(0));
  const int64_t prompt_len = opt.decode ? 1 : n;
  std::vector<bf16> xfinal(opt.mtp ? static_cast<size_t>(call) * model.stream_width() : 0);  // [call, N·D]
  const DecisionIO dec{opt.forced, opt.collect_decisions ? &out.decisions : nullptr};
  for (int64_t p0 = 0; p0 < n; p0 += call) {
    const int32_t c = static_cast<int32_t>(std::min<int64_t>(call, n - p0));
    const StepRequest q{0, p0, c, prompt_len, tokens.data() + p0};
    float* main_logits = opt.mtp ? nullptr : out.logits.data() + p0 * V;  // [c, V]
    Status st = model.forward({&q, 1}, main_logits, opt.mtp ? xfinal.data() : nullptr, dec);
    if (!st.ok()) return st.with_context(fmt::format("main step at positions [{}, {})", p0, p0 + c));
    if (!opt.mtp) continue;
    // MTP rows p in [p0, min(p0 + c, n - 1)) with tokens t[p+1]; Xfinal rows are the first m of the call.
    const int32_t m = static_cast<int32_t>(std::min<int64_t>(p0 + c, n - 1) - p0);
    if (m <= 0) continue;
    const StepRequest qm{0, p0, m, prompt_len, tokens.data() + p0 + 1};
    st = model.forward_mtp({&qm, 1}, xfinal.data(), out.logits.data() + p0 * V, dec);
    if (!st.ok()) return st.with_context(fmt::format("MTP step at positions [{}, {})", p0, p0 + m));
  }
  model.end_sequence(0);
  return Status();
}

// Level A, engine: ModelRunner sized to this run.
Status run_demo(const ModelConfig& cfg, const Weights& w, const std::vector<int32_t>& tokens,
                const TeacherForcedOptions& opt, TeacherForcedOutput& out) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int32_t call = call_rows(n, opt);
  Limits lim;
  lim.max_batch = 1;
  lim.max_seqs = 1;
  lim.max_rows = call;
  lim.max_chunk = call;
  lim.max_decode_rows = 1;
  lim.max_context = n;
  lim.n_threads = opt.n_threads;
  auto created = ModelRunner::create(cfg, w, lim, opt.ranks);
  if (!created.ok()) return created.status().with_context("model runner");
  return feed(**created, tokens, opt, out);
}

// Level A, engine, DSpark: the target's whole-sequence prefill (calls of up to
// kMaxTeacherForcedCall rows) keeps every row's features; then, as decoding does, each
// position is committed to the rings and the round of its anchor runs.
Status run_demo_dspark(const ModelConfig& cfg, const Weights& w, const std::vector<int32_t>& tokens,
                       const TeacherForcedOptions& opt, TeacherForcedOutput& out) {
  const int64_t n = static_cast<int64_t>(tokens.size()), G = opt.dspark_gamma, V = cfg.vocab_size;
  const int32_t call = static_cast<int32_t>(std::min<int64_t>(n, kMaxTeacherForcedCall));
  Limits lim;
  lim.max_batch = 1;
  lim.max_seqs = 1;
  lim.max_rows = std::max<int32_t>(call, static_cast<int32_t>(G));
  lim.max_chunk = call;
  lim.max_decode_rows = 1;
  lim.max_context = n + G;
  lim.n_threads = opt.n_threads;
  auto created = ModelRunner::create(cfg, w, lim, opt.ranks);  // with ranks rank 0 owns the sequence
  if (!created.ok()) return created.status().with_context("model runner");
  ModelRunner& r = **created;
  const DecisionIO dec{opt.forced, opt.collect_decisions ? &out.decisions : nullptr};
  const int64_t F = static_cast<int64_t>(cfg.dspark->target_layer_ids.size()) * cfg.hidden_size;
  std::vector<bf16> features(static_cast<size_t>(n * F));
  DSV4_RETURN_IF_ERROR(r.start_sequence(0));
  for (int64_t p0 = 0; p0 < n; p0 += call) {
    const int32_t c = static_cast<int32_t>(std::min<int64_t>(call, n - p0));
    const StepRequest q{0, p0, c, n, tokens.data() + p0};
    DSV4_RETURN_IF_ERROR(r.forward({&q, 1}, nullptr, nullptr, dec, {}, features.data() + p0 * F));
  }
  out.drafts.resize(static_cast<size_t>((n - 1) * G));
  for (int64_t a = 0; a + 1 < n; ++a) {
    const ModelRunner::DsparkCommit commit{0, a, 1, features.data() + a * F};
    DSV4_RETURN_IF_ERROR(r.dspark_commit({&commit, 1}));
    const ModelRunner::DsparkRound round{0, a, tokens[a + 1]};
    DSV4_RETURN_IF_ERROR(r.dspark_propose({&round, 1}, static_cast<int>(G), out.logits.data() + a * G * V,
                                          out.drafts.data() + a * G, dec));
  }
  return Status();
}

// Level A, reference: ReferenceModel. With dspark: one whole-sequence prefill for the target
// features (dspark.md §4.2), every position committed to the drafter, one round per anchor.
Status run_reference(const ModelConfig& cfg, const Weights& w, const std::vector<int32_t>& tokens,
                     const TeacherForcedOptions& opt, TeacherForcedOutput& out) {
  auto created = ReferenceModel::create(cfg, w);
  if (!created.ok()) return created.status().with_context("reference model");
  if (opt.dspark_gamma == 0) return feed(**created, tokens, opt, out);
  ReferenceModel& m = **created;
  const int64_t n = static_cast<int64_t>(tokens.size()), G = opt.dspark_gamma, V = cfg.vocab_size;
  DSV4_RETURN_IF_ERROR(m.start_sequence(0));
  std::vector<bf16> features(static_cast<size_t>(n * m.feature_width()));
  StepRequest req;
  req.seq = 0;
  req.p0 = 0;
  req.n = static_cast<int32_t>(n);
  req.prompt_len = n;
  req.tokens = tokens.data();
  const DecisionIO dec{opt.forced, opt.collect_decisions ? &out.decisions : nullptr};
  DSV4_RETURN_IF_ERROR(m.forward(std::span<const StepRequest>(&req, 1), nullptr, nullptr, dec, features.data()));
  DSV4_RETURN_IF_ERROR(m.dspark_commit(0, 0, n, features.data()));
  out.drafts.resize(static_cast<size_t>((n - 1) * G));
  for (int64_t a = 0; a + 1 < n; ++a)
    DSV4_RETURN_IF_ERROR(m.dspark_propose(0, a, tokens[a + 1], static_cast<int>(G), out.logits.data() + a * G * V,
                                          out.drafts.data() + a * G, dec));
  return Status();
}

// Level B: float_forward over the whole sequence.
Status run_float(const ModelConfig& cfg, const Weights& w, const std::vector<int32_t>& tokens,
                 const TeacherForcedOptions& opt, TeacherForcedOutput& out) {
  if (opt.dspark_gamma > 0) {
    auto d = float_dspark(cfg, w, tokens, opt.dspark_gamma, opt.forced);
    if (!d.ok()) return d.status();
    out.logits = std::move(d->logits);
    out.drafts = std::move(d->drafts);
    if (opt.collect_decisions) out.decisions = std::move(d->decisions);
    return Status();
  }
  auto r = float_forward(cfg, w, tokens, opt.mtp, opt.forced);
  if (!r.ok()) return r.status();
  FloatForwardOutput& f = *r;
  out.logits = opt.mtp ? std::move(f.mtp_logits) : std::move(f.logits);
  DSV4_CHECK(static_cast<int64_t>(out.logits.size()) == out.rows * out.vocab, "float logits {} for [{}, {}]",
             out.logits.size(), out.rows, out.vocab);
  if (opt.collect_decisions) out.decisions = std::move(f.decisions);
  return Status();
}

}  // namespace

Result<TeacherForcedOutput> teacher_forced_logits(const ModelConfig& cfg, const Weights& w,
                                                  const std::vector<int32_t>& tokens,
                                                  const TeacherForcedOptions& opt) {
  DSV4_RETURN_IF_ERROR(validate(cfg, w, tokens, opt));
  const int64_t n = static_cast<int64_t>(tokens.size());
  TeacherForcedOutput out;
  out.rows = opt.mtp || opt.dspark_gamma > 0 ? n - 1 : n;
  out.gamma = opt.dspark_gamma;
  out.vocab = cfg.vocab_size;
  if (opt.numerics == Numerics::kDemo && opt.dspark_gamma > 0) {
    out.logits.assign(static_cast<size_t>(out.rows * out.gamma * out.vocab), 0.0f);
    DSV4_RETURN_IF_ERROR(run_demo_dspark(cfg, w, tokens, opt, out));
  } else if (opt.numerics == Numerics::kDemo) {
    out.logits.assign(static_cast<size_t>(out.rows * out.vocab), 0.0f);
    DSV4_RETURN_IF_ERROR(run_demo(cfg, w, tokens, opt, out));
  } else if (opt.numerics == Numerics::kReference) {
    out.logits.assign(static_cast<size_t>(out.rows * std::max<int64_t>(1, out.gamma) * out.vocab), 0.0f);
    DSV4_RETURN_IF_ERROR(run_reference(cfg, w, tokens, opt, out));
  } else {
    DSV4_RETURN_IF_ERROR(run_float(cfg, w, tokens, opt, out));
  }
  sort_decisions(out.decisions);
  return out;
}

}  // namespace dsv4
