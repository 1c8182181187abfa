// Teacher-forced logits over one sequence: demo numerics through ModelRunner
// (chunked prefill or one-token decode steps), float numerics through
// float_forward; decisions gathered from either and sorted one way.
#include "runtime/teacher_forced.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <memory>
#include <span>
#include <tuple>

#include <fmt/format.h>

#include "base/check.h"
#include "cache/step_metadata.h"
#include "model/float_forward.h"
#include "model/limits.h"
#include "model/reference_model.h"
#include "model/runner.h"
#include "numeric/bf16.h"

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
    return Status::error("mtp requested but the model has no MTP layer (num_nextn_predict_layers = 0)");
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

// Level A, reference: ReferenceModel.
Status run_reference(const ModelConfig& cfg, const Weights& w, const std::vector<int32_t>& tokens,
                     const TeacherForcedOptions& opt, TeacherForcedOutput& out) {
  auto created = ReferenceModel::create(cfg, w);
  if (!created.ok()) return created.status().with_context("reference model");
  return feed(**created, tokens, opt, out);
}

// Level B: float_forward over the whole sequence.
Status run_float(const ModelConfig& cfg, const Weights& w, const std::vector<int32_t>& tokens,
                 const TeacherForcedOptions& opt, TeacherForcedOutput& out) {
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
  out.rows = opt.mtp ? n - 1 : n;
  out.vocab = cfg.vocab_size;
  if (opt.numerics == Numerics::kDemo) {
    out.logits.assign(static_cast<size_t>(out.rows * out.vocab), 0.0f);
    DSV4_RETURN_IF_ERROR(run_demo(cfg, w, tokens, opt, out));
  } else if (opt.numerics == Numerics::kReference) {
    out.logits.assign(static_cast<size_t>(out.rows * out.vocab), 0.0f);
    DSV4_RETURN_IF_ERROR(run_reference(cfg, w, tokens, opt, out));
  } else {
    DSV4_RETURN_IF_ERROR(run_float(cfg, w, tokens, opt, out));
  }
  sort_decisions(out.decisions);
  return out;
}

Result<std::vector<int32_t>> parse_token_ids(std::string_view text) {
  if (text.empty()) return Status::error("token list is empty (expected comma-separated ids, e.g. 5,17,42)");
  std::vector<int32_t> ids;
  size_t begin = 0;
  for (int64_t index = 0;; ++index) {
    const size_t comma = text.find(',', begin);
    const std::string_view item = text.substr(begin, comma == std::string_view::npos ? std::string_view::npos
                                                                                     : comma - begin);
    if (item.empty()) return Status::errorf("token list item {} is empty", index);
    int64_t v = 0;
    for (char ch : item) {
      if (ch < '0' || ch > '9')
        return Status::errorf("token list item {} '{}' is not a non-negative decimal integer", index, item);
      v = v * 10 + (ch - '0');
      if (v > std::numeric_limits<int32_t>::max())
        return Status::errorf("token list item {} '{}' exceeds the largest token id {}", index, item,
                              std::numeric_limits<int32_t>::max());
    }
    ids.push_back(static_cast<int32_t>(v));
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  return ids;
}

}  // namespace dsv4
