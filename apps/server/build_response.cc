// OpenAI response building (protocol.h): engine updates -> response JSON and server-sent-event
// chunks (ResponseBuilder), finish reasons, token texts. Requests: parse_request.cc.
#include "protocol.h"

#include <algorithm>
#include <cmath>
#include <span>

#include <fmt/format.h>

#include "chat/markers.h"
#include "text/utf8.h"

namespace dsv4::server {
namespace {

using Json = OrderedJson;

constexpr float kLogprobFloor = -9999.0f;  // JSON has no -inf

std::string response_text(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace

std::string system_fingerprint(const std::string& model_id) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : model_id + "\n" + __DATE__ " " __TIME__) h = (h ^ c) * 0x100000001b3ull;
  return fmt::format("fp_dsv4_{:012x}", h & 0xffffffffffffull);
}

const char* api_finish_reason(FinishReason reason, bool tool_calls) {
  switch (reason) {
    case FinishReason::kStop: return tool_calls ? "tool_calls" : "stop";
    case FinishReason::kLength:
    case FinishReason::kContext:
    case FinishReason::kTimeout: return "length";
    case FinishReason::kCancelled:
    case FinishReason::kError:  // never a choice's: the response is an error
    case FinishReason::kNone: break;
  }
  return "stop";
}

std::string token_text(const Tokenizer& tokenizer, int32_t id) {
  if (id < 0 || id >= tokenizer.n_vocab()) return "";
  const std::string& bytes = tokenizer.token_bytes(id);
  if (utf8_valid_prefix(bytes) == bytes.size()) return bytes;
  std::string out = "bytes:";
  for (unsigned char b : bytes) out += fmt::format("\\x{:02x}", b);
  return out;
}

namespace {

float finite_logprob(float lp) { return std::isfinite(lp) ? lp : kLogprobFloor; }

Json bytes_json(const std::string& bytes) {
  Json arr = Json::array();
  for (unsigned char b : bytes) arr.push_back(static_cast<int>(b));
  return arr;
}

std::string sse(const Json& j) { return "data: " + response_text(j) + "\n\n"; }

// Completions logprobs: four parallel arrays, one entry per token.
Json completion_logprobs_shape() {
  return Json{{"tokens", Json::array()}, {"token_logprobs", Json::array()},
              {"top_logprobs", Json::array()}, {"text_offset", Json::array()}};
}

}  // namespace

ResponseBuilder::ResponseBuilder(std::shared_ptr<const ApiRequest> request, int32_t shown_logprobs,
                                 const ModelCard& model, std::string id, int64_t created)
    : request_(std::move(request)), shown_logprobs_(shown_logprobs), model_(model), id_(std::move(id)),
      created_(created), parser_(request_->opens_reasoning),
      in_reasoning_(request_->endpoint == Endpoint::kChat && request_->opens_reasoning),
      fingerprint_(system_fingerprint(model.id)) {
  logprobs_ = request_->endpoint == Endpoint::kCompletions ? completion_logprobs_shape() : Json::array();
}

Json ResponseBuilder::envelope(const char* object) const {
  Json j;
  j["id"] = id_;
  j["object"] = object;
  j["created"] = created_;
  j["model"] = model_.id;
  j["system_fingerprint"] = fingerprint_;
  return j;
}

Json ResponseBuilder::chunk_envelope() const {
  return envelope(request_->endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion");
}

Json ResponseBuilder::usage_json() const {
  return Json{{"prompt_tokens", prompt_tokens_},
              {"completion_tokens", completion_tokens_},
              {"total_tokens", prompt_tokens_ + completion_tokens_},
              {"prompt_tokens_details", Json{{"cached_tokens", cached_tokens_}}},
              {"completion_tokens_details", Json{{"reasoning_tokens", reasoning_tokens_}}}};
}

Json ResponseBuilder::chat_logprob_entry(const TokenLogprob& lp) const {
  const Tokenizer& tok = model_.text->tokenizer;
  auto one = [&](int32_t id, float logprob) {
    Json e;
    e["token"] = utf8_lossy(id >= 0 && id < tok.n_vocab() ? tok.token_bytes(id) : std::string());
    e["logprob"] = finite_logprob(logprob);
    e["bytes"] = bytes_json(id >= 0 && id < tok.n_vocab() ? tok.token_bytes(id) : std::string());
    return e;
  };
  Json e = one(lp.token, lp.logprob);
  Json top = Json::array();
  for (const auto& [id, l] : lp.top) top.push_back(one(id, l));
  e["top_logprobs"] = std::move(top);
  return e;
}

void ResponseBuilder::append_completion_logprobs(Json& out, const std::vector<int32_t>& ids,
                                                 const std::vector<const TokenLogprob*>& lps) {
  const Tokenizer& tok = model_.text->tokenizer;
  for (size_t i = 0; i < ids.size(); ++i) {
    out["tokens"].push_back(token_text(tok, ids[i]));
    out["text_offset"].push_back(text_offset_);
    if (ids[i] >= 0 && ids[i] < tok.n_vocab()) text_offset_ += static_cast<int64_t>(tok.token_bytes(ids[i]).size());
    const TokenLogprob* lp = lps[i];
    if (!lp) {
      out["token_logprobs"].push_back(nullptr);
      out["top_logprobs"].push_back(nullptr);
      continue;
    }
    out["token_logprobs"].push_back(finite_logprob(lp->logprob));
    Json top = Json::object();
    for (const auto& [id, l] : lp->top) {
      const std::string t = token_text(tok, id);
      if (!top.contains(t)) top[t] = finite_logprob(l);
    }
    out["top_logprobs"].push_back(std::move(top));
  }
}

std::optional<ApiError> ResponseBuilder::update_error(const RequestUpdate& u) const {
  if (!u.finished) return std::nullopt;
  ApiError e;
  e.type = "server_error";
  if (u.reason == FinishReason::kError) {
    e.http_status = 500;
    e.message = "generation failed: " + (u.error.empty() ? std::string("engine error") : u.error);
    e.code = "engine_error";
    return e;
  }
  return std::nullopt;
}

void ResponseBuilder::count_reasoning(const std::vector<int32_t>& tokens) {
  const Tokenizer& tok = model_.text->tokenizer;
  for (int32_t id : tokens) {
    if (!in_reasoning_) return;
    const size_t from = reasoning_bytes_.size();
    reasoning_starts_.push_back(from);
    if (id >= 0 && id < tok.n_vocab()) reasoning_bytes_ += tok.token_bytes(id);
    // The marker may span tokens: look from where it could begin.
    const size_t look = from >= chat::kThinkClose.size() ? from - chat::kThinkClose.size() + 1 : 0;
    const size_t at = reasoning_bytes_.find(chat::kThinkClose, look);
    if (at == std::string::npos) continue;
    // Tokens starting at or after the marker's start are the marker (or after it).
    reasoning_tokens_ = std::lower_bound(reasoning_starts_.begin(), reasoning_starts_.end(), at) -
                        reasoning_starts_.begin();
    in_reasoning_ = false;
    reasoning_bytes_.clear();
    reasoning_starts_.clear();
  }
  if (in_reasoning_) reasoning_tokens_ = static_cast<int64_t>(reasoning_starts_.size());
}

void ResponseBuilder::record(const RequestUpdate& u) {
  completion_tokens_ += static_cast<int64_t>(u.tokens.size());
  count_reasoning(u.tokens);
  if (u.finished) {
    finished_ = true;
    reason_ = u.reason;
    stop_id_ = u.stop_id;
    stop_string_ = u.stop_string;
    if (u.prompt_tokens > 0) prompt_tokens_ = u.prompt_tokens;
    if (u.completion_tokens > 0) completion_tokens_ = u.completion_tokens;
    cached_tokens_ = u.cached_tokens;
    error_ = update_error(u);
  }
  if (prompt_tokens_ == 0) prompt_tokens_ = static_cast<int64_t>(request_->gen.prompt.size());
}

std::string ResponseBuilder::add(const RequestUpdate& u) {
  if (finished_) return {};
  const bool first = !started_;
  started_ = true;
  record(u);
  return request_->endpoint == Endpoint::kCompletions ? add_completion(u, first) : add_chat(u, first);
}

// vLLM's stop_reason beside OpenAI's finish_reason: "timeout" or "cancelled", the stop string
// or stop id that matched; null for EOS, max_tokens and the context limit.
Json ResponseBuilder::stop_reason() const {
  if (reason_ == FinishReason::kTimeout) return "timeout";
  if (reason_ == FinishReason::kCancelled) return "cancelled";
  if (reason_ != FinishReason::kStop) return nullptr;
  if (request_->first_call_only && stop_string_ == chat::kFirstCallStop) return nullptr;  // the server's own
  if (!stop_string_.empty()) return stop_string_;
  if (stop_id_ >= 0) return stop_id_;
  return nullptr;
}

// Completions: the update's text (after the echoed prompt on the first) and the logprobs of its
// tokens (and, with echo, of the prompt first), appended to the whole response (complete form)
// or sent as one chunk (stream form).
std::string ResponseBuilder::add_completion(const RequestUpdate& u, bool first) {
  std::string text;
  if (first && request_->echo) {
    const std::vector<int32_t>& prompt = request_->gen.prompt;
    const std::span<const int32_t> shown(prompt.data() + request_->prompt_skip, prompt.size() - request_->prompt_skip);
    Result<std::string> echo = model_.text->tokenizer.decode(shown);
    if (echo.ok()) text = *echo;
  }
  text += u.text;
  const bool want_lp = shown_logprobs_ >= 0;
  Json chunk_lp = completion_logprobs_shape();
  Json& lp = request_->stream ? chunk_lp : logprobs_;
  if (want_lp) {
    if (first && request_->echo) {
      const std::vector<int32_t>& prompt = request_->gen.prompt;
      std::vector<int32_t> ids(prompt.begin() + request_->prompt_skip, prompt.end());
      std::vector<const TokenLogprob*> lps;
      for (size_t i = request_->prompt_skip; i < prompt.size(); ++i)
        lps.push_back(i >= 1 && i - 1 < u.prompt_logprobs.size() ? &u.prompt_logprobs[i - 1] : nullptr);
      append_completion_logprobs(lp, ids, lps);
    }
    std::vector<const TokenLogprob*> lps;
    for (size_t i = 0; i < u.tokens.size(); ++i) lps.push_back(i < u.logprobs.size() ? &u.logprobs[i] : nullptr);
    append_completion_logprobs(lp, u.tokens, lps);
  }
  if (!request_->stream) {
    text_ += text;
    return {};
  }
  std::string out;
  if (!text.empty() || (want_lp && !chunk_lp["tokens"].empty()))
    out += chunk_event(completion_choice(text, want_lp ? chunk_lp : Json(), nullptr, nullptr));
  if (u.finished) out += end_events(completion_choice("", nullptr, api_finish_reason(reason_, false), stop_reason()));
  return out;
}

// Chat: the parser's delta of the update's text (all that is held back, on the last) and its
// tokens' logprobs, appended to the whole message (complete form) or sent as chunks (stream
// form: the role first, then the delta).
std::string ResponseBuilder::add_chat(const RequestUpdate& u, bool first) {
  chat::ChatDelta delta = parser_.feed(u.text);
  if (u.finished) {
    auto append = [&delta](chat::ChatDelta rest) {
      delta.reasoning += rest.reasoning;
      delta.content += rest.content;
      for (chat::ToolCallPiece& p : rest.calls) delta.calls.push_back(std::move(p));
    };
    if (first_call_stop(u)) append(parser_.end_at_stop());
    append(parser_.finish());
  }
  const bool want_lp = shown_logprobs_ >= 0;
  Json chunk_lp = Json::array();
  Json& lp = request_->stream ? chunk_lp : logprobs_;
  if (want_lp)
    for (const TokenLogprob& t : u.logprobs) lp.push_back(chat_logprob_entry(t));
  if (!request_->stream) {
    message_.reasoning_content += delta.reasoning;
    message_.content += delta.content;
    for (const chat::ToolCallPiece& p : delta.calls) calls_.add(p);
    return {};
  }
  std::string out;
  if (first) out += chunk_event(chat_choice(Json{{"role", "assistant"}, {"content", ""}}, nullptr, nullptr, nullptr));
  Json d = Json::object();
  if (!delta.reasoning.empty()) d["reasoning_content"] = delta.reasoning;
  if (!delta.content.empty()) d["content"] = delta.content;
  if (!d.empty() || !chunk_lp.empty())
    out += chunk_event(chat_choice(std::move(d), want_lp && !chunk_lp.empty() ? Json{{"content", chunk_lp}} : Json(),
                                   nullptr, nullptr));
  for (const chat::ToolCallPiece& p : delta.calls) out += tool_call_events(p);
  if (u.finished)
    out += end_events(
        chat_choice(Json::object(), nullptr, api_finish_reason(reason_, n_tool_calls_ > 0), stop_reason()));
  return out;
}

// A call's pieces as OpenAI streams them, one chunk each: the opening entry {index, id, type,
// function: {name, arguments: ""}}, then {index, function: {arguments: fragment}}.
std::string ResponseBuilder::tool_call_events(const chat::ToolCallPiece& piece) {
  std::string out;
  auto event = [&](Json entry) {
    return chunk_event(chat_choice(Json{{"tool_calls", Json::array({std::move(entry)})}}, nullptr, nullptr, nullptr));
  };
  if (piece.opens) {
    Json call{{"index", piece.index}};
    call.update(chat::tool_call_json(chat::ToolCall{piece.name, ""}, fmt::format("call_{}_{}", id_, piece.index)));
    out += event(std::move(call));
  }
  if (!piece.arguments.empty())
    out += event(Json{{"index", piece.index}, {"function", Json{{"arguments", piece.arguments}}}});
  if (piece.closes) ++n_tool_calls_;
  return out;
}

bool ResponseBuilder::first_call_stop(const RequestUpdate& u) const {
  return request_->first_call_only && u.reason == FinishReason::kStop && u.stop_string == chat::kFirstCallStop;
}

Json ResponseBuilder::completion_choice(const std::string& text, Json logprobs, Json finish_reason, Json stop_reason) {
  Json choice;
  choice["text"] = text;
  choice["index"] = 0;
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = std::move(finish_reason);
  choice["stop_reason"] = std::move(stop_reason);
  return choice;
}

Json ResponseBuilder::chat_choice(Json delta, Json logprobs, Json finish_reason, Json stop_reason) {
  Json choice;
  choice["index"] = 0;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = std::move(finish_reason);
  choice["stop_reason"] = std::move(stop_reason);
  return choice;
}

// One chunk of a stream holding `choice` (and "usage": null when the usage chunk is asked for).
std::string ResponseBuilder::chunk_event(Json choice) const {
  choice["index"] = index_;
  Json chunk = chunk_envelope();
  chunk["choices"] = Json::array({std::move(choice)});
  if (request_->include_usage) chunk["usage"] = nullptr;
  return sse(chunk);
}

// The end of a stream: the error event, or the last chunk (`last_choice`, with the finish
// reason) and the usage chunk when asked; then [DONE].
std::string ResponseBuilder::end_events(Json last_choice) const {
  std::string out;
  if (error_) {
    out += "data: " + error_body(*error_) + "\n\n";
  } else {
    out += chunk_event(std::move(last_choice));
    if (!ends_stream_) return out;
    if (request_->include_usage) {
      Json usage = chunk_envelope();
      usage["choices"] = Json::array();
      usage["usage"] = usage_json();
      out += sse(usage);
    }
  }
  return ends_stream_ ? out + "data: [DONE]\n\n" : out;
}

ApiResult<std::string> ResponseBuilder::response() const {
  if (!finished_) {
    ApiError e;
    e.http_status = 500;
    e.type = "server_error";
    e.message = "the request ended without a result";
    return e;
  }
  if (error_) return *error_;
  Json body = envelope(request_->endpoint == Endpoint::kChat ? "chat.completion" : "text_completion");
  Json choice;
  choice["index"] = 0;
  const bool want_lp = shown_logprobs_ >= 0;
  if (request_->endpoint == Endpoint::kChat) {
    Json message;
    message["role"] = "assistant";
    const bool calls = !calls_.calls.empty();
    message["content"] = calls && message_.content.empty() ? Json() : Json(message_.content);
    if (request_->mode == chat::ThinkingMode::kThinking || !message_.reasoning_content.empty())
      message["reasoning_content"] = message_.reasoning_content;
    if (calls) {
      Json arr = Json::array();
      for (size_t i = 0; i < calls_.calls.size(); ++i)
        arr.push_back(chat::tool_call_json(calls_.calls[i], fmt::format("call_{}_{}", id_, i)));
      message["tool_calls"] = std::move(arr);
    }
    choice["message"] = std::move(message);
    choice["logprobs"] = want_lp ? Json{{"content", logprobs_}} : Json();
    choice["finish_reason"] = api_finish_reason(reason_, calls);
  } else {
    choice["text"] = text_;
    choice["logprobs"] = want_lp ? logprobs_ : Json();
    choice["finish_reason"] = api_finish_reason(reason_, false);
  }
  choice["stop_reason"] = stop_reason();
  body["choices"] = Json::array({std::move(choice)});
  body["usage"] = usage_json();
  return response_text(body);
}

}  // namespace dsv4::server
