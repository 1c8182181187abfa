#include "choices.h"

#include <algorithm>
#include <numeric>

namespace dsv4::server {

namespace {

using Json = OrderedJson;

std::string json_text(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace

ChoicesBuilder::ChoicesBuilder(std::shared_ptr<const ApiRequest> request, const ModelCard& model,
                               const std::string& id, int64_t created, int64_t first_id)
    : request_(std::move(request)), first_id_(first_id) {
  const int32_t n = std::max(request_->gen.n, 1);
  for (int32_t k = 0; k < n; ++k) {
    // Logprobs raised only to rank best_of are not shown.
    choices_.push_back(std::make_unique<ResponseBuilder>(request_, request_->shown_logprobs, model, id, created));
    choices_.back()->set_choice(k, n == 1);
  }
  cumulative_.assign(static_cast<size_t>(n), 0.0);
  model_id_ = model.id;
  fingerprint_ = system_fingerprint(model.id);
  id_ = id;
  created_ = created;
}

std::string ChoicesBuilder::add(const RequestUpdate& u) {
  const int64_t k = u.id - first_id_;
  if (k < 0 || k >= static_cast<int64_t>(choices_.size())) return {};
  ResponseBuilder& b = *choices_[static_cast<size_t>(k)];
  if (b.finished()) return {};
  for (const TokenLogprob& lp : u.logprobs) cumulative_[static_cast<size_t>(k)] += lp.logprob;
  std::string out = b.add(u);
  if (!b.finished()) return out;
  ++n_finished_;
  if (choices_.size() == 1 || !finished() || !request_->stream) return out;
  if (request_->include_usage) {
    Json usage = envelope();
    usage["choices"] = Json::array();
    usage["usage"] = usage_json();
    out += "data: " + json_text(usage) + "\n\n";
  }
  return out + "data: [DONE]\n\n";
}

Json ChoicesBuilder::envelope() const {
  Json j;
  j["id"] = id_;
  j["object"] = request_->endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion";
  j["created"] = created_;
  j["model"] = model_id_;
  j["system_fingerprint"] = fingerprint_;
  return j;
}

Json ChoicesBuilder::usage_json() const {
  Json total = choices_[0]->usage_json();
  int64_t completion = 0, reasoning = 0;
  for (const auto& c : choices_) {
    const Json u = c->usage_json();
    completion += u["completion_tokens"].get<int64_t>();
    reasoning += u["completion_tokens_details"]["reasoning_tokens"].get<int64_t>();
  }
  total["completion_tokens"] = completion;
  total["total_tokens"] = total["prompt_tokens"].get<int64_t>() + completion;
  total["completion_tokens_details"]["reasoning_tokens"] = reasoning;
  return total;
}

ApiResult<std::string> ChoicesBuilder::response() const {
  if (choices_.size() == 1) return choices_[0]->response();
  // The n returned: every choice in order, or with best_of > n the highest cumulative logprobs
  // (ties: the lower index).
  std::vector<size_t> order(choices_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  const size_t n = static_cast<size_t>(std::max(request_->n, 1));
  if (n < choices_.size()) {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cumulative_[a] > cumulative_[b]; });
    order.resize(n);
  }
  Json body;
  Json choices = Json::array();
  for (size_t i = 0; i < order.size(); ++i) {
    ApiResult<std::string> one = choices_[order[i]]->response();
    if (!one.ok()) return one.error();
    Json j = Json::parse(*one);
    Json choice = std::move(j["choices"][0]);
    choice["index"] = static_cast<int64_t>(i);
    choices.push_back(std::move(choice));
    if (i == 0) body = std::move(j);
  }
  body["choices"] = std::move(choices);
  body["usage"] = usage_json();
  return json_text(body);
}

}  // namespace dsv4::server
