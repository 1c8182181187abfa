// OpenAI request parsing and response building (protocol.h).
#include "protocol.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <set>
#include <span>

#include <fmt/format.h>

#include "chat/markers.h"
#include "io/json_bounded.h"
#include "text/utf8.h"

namespace dsv4::server {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxStops = 4;                 // OpenAI: up to 4 stop sequences
constexpr int kMaxCompletionLogprobs = 5;    // OpenAI: completions logprobs 0..5
constexpr double kMaxTemperature = 2.0;      // OpenAI: temperature 0..2
constexpr float kLogprobFloor = -9999.0f;    // JSON has no -inf
constexpr size_t kMaxMetadataKeys = 16;      // OpenAI: metadata bounds
constexpr size_t kMaxMetadataKey = 64;
constexpr size_t kMaxMetadataValue = 512;

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// The fields one endpoint knows. Any other field is rejected by name.
const std::set<std::string, std::less<>> kCommonFields = {
    "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "n", "stream", "stream_options",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "logit_bias", "user", "logprobs", "ignore_eos",
    // Sent by the SDKs; they do not change generation (check_passive validates their types).
    "store", "metadata", "service_tier"};
const std::set<std::string, std::less<>> kCompletionFields = {"prompt", "echo", "best_of", "suffix"};
const std::set<std::string, std::less<>> kChatFields = {
    "messages", "max_completion_tokens", "top_logprobs", "response_format", "tools", "tool_choice",
    "parallel_tool_calls", "thinking", "chat_template_kwargs", "reasoning_effort"};

ApiError wrong_type(const std::string& name, const char* expected, const Json& got) {
  return bad_request(name, fmt::format("{}: expected {}, got {}", name, expected, json_kind(got)));
}

// Optional typed fields: nullopt when absent or null; an ApiError for a wrong type.
ApiResult<std::optional<bool>> get_bool(const Json& obj, const std::string& name) {
  const Json* v = json_optional(obj, name);
  bool b = false;
  if (!v) return std::optional<bool>();
  if (json_read(*v, b) != JsonRead::kOk) return wrong_type(name, "a boolean", *v);
  return std::optional<bool>(b);
}

ApiResult<std::optional<double>> get_number(const Json& obj, const std::string& name) {
  const Json* v = json_optional(obj, name);
  double d = 0;
  if (!v) return std::optional<double>();
  if (json_read(*v, d) != JsonRead::kOk) return wrong_type(name, "a number", *v);
  if (!std::isfinite(d)) return bad_request(name, fmt::format("{}: must be finite", name));
  return std::optional<double>(d);
}

ApiResult<std::optional<int64_t>> get_int(const Json& obj, const std::string& name) {
  const Json* v = json_optional(obj, name);
  if (!v) return std::optional<int64_t>();
  // 3.0 is an integer to a JSON client; 3.5 is not.
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (d == std::floor(d) && std::fabs(d) < 9e15) return std::optional<int64_t>(static_cast<int64_t>(d));
    return wrong_type(name, "an integer", *v);
  }
  int64_t i = 0;
  switch (json_read(*v, i)) {
    case JsonRead::kOk: return std::optional<int64_t>(i);
    case JsonRead::kOutOfRange: return bad_request(name, fmt::format("{}: {} is out of range", name, dump(*v)));
    case JsonRead::kWrongType: break;
  }
  return wrong_type(name, "an integer", *v);
}

// Bounded nesting: a body nested thousands deep would overflow the stack as soon as an error
// message dump()s part of it (io/json_bounded.h).
ApiResult<Json> parse_body(std::string_view body, const ModelCard& model) {
  Result<Json> parsed = parse_json_bounded<Json>(body, kMaxJsonDepth, nullptr, model.max_json_values());
  if (!parsed.ok()) {
    if (parsed.message() == "not valid JSON") return bad_request("", "the request body is not valid JSON", "invalid_json");
    return bad_request("", "the request body " + parsed.message(), "request_too_complex");
  }
  Json j = std::move(*parsed);
  if (!j.is_object()) return bad_request("", fmt::format("the request body must be a JSON object, got {}", json_kind(j)));
  return j;
}

std::optional<ApiError> check_fields(const Json& obj, const std::set<std::string, std::less<>>& own) {
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (!kCommonFields.count(it.key()) && !own.count(it.key()))
      return bad_request(it.key(), fmt::format("Unrecognized request argument supplied: {}", it.key()),
                         "unsupported_parameter");
  return std::nullopt;
}

// Fields accepted only with their neutral value.
std::optional<ApiError> check_neutral(const Json& obj) {
  if (const Json* v = json_optional(obj, "suffix"); v && !(v->is_string() && v->get_ref<const std::string&>().empty()))
    return bad_request("suffix", "suffix: not supported by this server", "unsupported_parameter");
  return std::nullopt;
}

// tool_choice "required" (any of the tools) or {"type": "function", "function": {"name"}} (that
// tool): the constraint's tool list; "auto" and "none" leave it empty.
std::optional<ApiError> parse_forced_call(const Json& obj, const Json& tc, OutputConstraint& out) {
  if (tc.is_string() && (tc == "auto" || tc == "none")) return std::nullopt;
  std::string name;
  if (tc.is_object()) {
    const Json* type = json_optional(tc, "type");
    const Json* fn = json_optional(tc, "function");
    const Json* n = fn && fn->is_object() ? json_optional(*fn, "name") : nullptr;
    if (!type || *type != "function" || !n || !n->is_string())
      return bad_request("tool_choice", "tool_choice: expected {\"type\": \"function\", \"function\": {\"name\": ...}}");
    name = n->get<std::string>();
  } else if (!(tc.is_string() && tc == "required")) {
    return bad_request("tool_choice", fmt::format("tool_choice: {} is not \"auto\", \"none\", \"required\" or a "
                                                  "named function", dump(tc)));
  }
  const Json* tools = json_optional(obj, "tools");
  if (!tools || !tools->is_array() || tools->empty())
    return bad_request("tool_choice", "tool_choice: a forced call needs tools");
  Json chosen = Json::array();
  for (const Json& t : *tools) {
    const Json* fn = t.is_object() ? json_optional(t, "function") : nullptr;
    const Json* n = fn && fn->is_object() ? json_optional(*fn, "name") : nullptr;
    if (!n || !n->is_string() || (!name.empty() && *n != name)) continue;
    const Json* params = json_optional(*fn, "parameters");
    chosen.push_back(Json{{"name", *n}, {"parameters", params ? *params : Json::object()}});
  }
  if (chosen.empty()) return bad_request("tool_choice", fmt::format("tool_choice: no tool named {}", dump(Json(name))));
  out.tool_calls = chosen.dump();
  return std::nullopt;
}

// response_format (chat): {"type": "text"}, {"type": "json_object"} (any object) or
// {"type": "json_schema", "json_schema": {"name", "schema", "strict", "description"}} (the
// engine compiles the schema and names what it does not support; strict false or absent, as
// OpenAI's default: what it cannot enforce is relaxed and named in X-Relaxed-Keywords).
std::optional<ApiError> parse_response_format(const Json& obj, OutputConstraint& out) {
  const Json* v = json_optional(obj, "response_format");
  if (!v) return std::nullopt;
  if (!v->is_object()) return wrong_type("response_format", "an object", *v);
  const Json* type = json_optional(*v, "type");
  if (!type || !type->is_string())
    return bad_request("response_format", "response_format: type must be \"text\", \"json_object\" or \"json_schema\"");
  for (auto it = v->begin(); it != v->end(); ++it)
    if (it.key() != "type" && !(it.key() == "json_schema" && *type == "json_schema"))
      return bad_request("response_format", fmt::format("response_format: unknown member {}", it.key()));
  if (*type == "text") return std::nullopt;
  if (*type == "json_object") {
    out.json_schema = R"({"type":"object"})";
    return std::nullopt;
  }
  if (*type != "json_schema")
    return bad_request("response_format", "response_format: type must be \"text\", \"json_object\" or \"json_schema\"");
  const Json* js = json_optional(*v, "json_schema");
  if (!js || !js->is_object())
    return bad_request("response_format", "response_format: json_schema must be an object with name and schema");
  for (auto it = js->begin(); it != js->end(); ++it) {
    const std::string& k = it.key();
    const bool ok = (k == "name" && it->is_string()) || (k == "description" && it->is_string()) ||
                    (k == "strict" && (it->is_boolean() || it->is_null())) || k == "schema";
    if (!ok) return bad_request("response_format", fmt::format("response_format: json_schema.{} is not expected here", k));
  }
  const Json* name = json_optional(*js, "name");
  if (!name) return bad_request("response_format", "response_format: json_schema.name is required");
  const Json* schema = json_optional(*js, "schema");
  out.json_schema = schema ? schema->dump() : "true";  // no schema: any JSON value
  const Json* strict = json_optional(*js, "strict");
  out.strict = strict && strict->is_boolean() && strict->get<bool>();
  return std::nullopt;
}

// Fields that do not change generation, checked for their type only (OpenAI's bounds for
// metadata: at most 16 keys of at most 64 characters, string values of at most 512).
std::optional<ApiError> check_passive(const Json& obj) {
  if (const Json* v = json_optional(obj, "user"); v && !v->is_string()) return wrong_type("user", "a string", *v);
  if (const Json* v = json_optional(obj, "service_tier"); v && !v->is_string())
    return wrong_type("service_tier", "a string", *v);
  auto store = get_bool(obj, "store");
  if (!store.ok()) return store.error();
  if (const Json* v = json_optional(obj, "metadata")) {
    if (!v->is_object()) return wrong_type("metadata", "an object of strings", *v);
    if (v->size() > kMaxMetadataKeys)
      return bad_request("metadata", fmt::format("metadata: at most {} keys, got {}", kMaxMetadataKeys, v->size()));
    for (auto it = v->begin(); it != v->end(); ++it) {
      if (it.key().size() > kMaxMetadataKey)
        return bad_request("metadata", fmt::format("metadata: keys are at most {} characters", kMaxMetadataKey));
      if (!it.value().is_string()) return wrong_type("metadata." + it.key(), "a string", it.value());
      if (it.value().get_ref<const std::string&>().size() > kMaxMetadataValue)
        return bad_request("metadata." + it.key(),
                           fmt::format("metadata.{}: at most {} characters", it.key(), kMaxMetadataValue));
    }
  }
  return std::nullopt;
}

std::optional<ApiError> check_model(const Json& obj, const ModelCard& model) {
  const Json* v = json_optional(obj, "model");
  if (!v) return std::nullopt;  // absent: the one served model
  if (!v->is_string()) return wrong_type("model", "a string", *v);
  if (v->get_ref<const std::string&>() != model.id) {
    ApiError e = bad_request("model", fmt::format("The model `{}` does not exist (this server serves `{}`)",
                                                  v->get_ref<const std::string&>(), model.id),
                             "model_not_found");
    e.http_status = 404;
    return e;
  }
  return std::nullopt;
}

// Penalties and logit_bias (docs/numerics.md "Penalties and logit_bias"): OpenAI's
// frequency/presence in [-2, 2], vLLM's repetition_penalty > 0, logit_bias an object of
// token-id strings to biases in [-100, 100], at most 300 (sorted by id for the engine).
std::optional<ApiError> parse_adjustments(const Json& obj, int32_t n_vocab, LogitAdjustments& a) {
  for (auto [name, field] : {std::pair{"frequency_penalty", &a.frequency_penalty},
                             std::pair{"presence_penalty", &a.presence_penalty}}) {
    auto v = get_number(obj, name);
    if (!v.ok()) return v.error();
    if (!v.value()) continue;
    if (!(*v.value() >= -2 && *v.value() <= 2))
      return bad_request(name, fmt::format("{}: {} is outside [-2, 2]", name, *v.value()));
    *field = static_cast<float>(*v.value());
  }
  auto r = get_number(obj, "repetition_penalty");
  if (!r.ok()) return r.error();
  if (r.value()) {
    if (!(*r.value() > 0 && std::isfinite(static_cast<float>(*r.value()))))
      return bad_request("repetition_penalty", fmt::format("repetition_penalty: {} must be greater than 0 (1 = off)",
                                                           *r.value()));
    a.repetition_penalty = static_cast<float>(*r.value());
  }
  const Json* bias = json_optional(obj, "logit_bias");
  if (!bias) return std::nullopt;
  if (!bias->is_object()) return wrong_type("logit_bias", "an object of token ids to numbers", *bias);
  if (bias->size() > static_cast<size_t>(kMaxLogitBias))
    return bad_request("logit_bias", fmt::format("logit_bias: {} entries, at most {}", bias->size(), kMaxLogitBias));
  for (auto it = bias->begin(); it != bias->end(); ++it) {
    const std::string& key = it.key();
    int64_t id = -1;
    const bool digits = !key.empty() && key.size() <= 9 && std::all_of(key.begin(), key.end(), [](char c) {
      return c >= '0' && c <= '9';
    });
    if (digits) id = std::stoll(key);
    if (id < 0 || id >= n_vocab)
      return bad_request("logit_bias", fmt::format("logit_bias: key \"{}\" is not a token id in [0, {})",
                                                   utf8_lossy(key.substr(0, 32)), n_vocab));
    double b = 0;
    if (json_read(it.value(), b) != JsonRead::kOk || !(b >= -100 && b <= 100))
      return bad_request("logit_bias", fmt::format("logit_bias[\"{}\"]: expected a number in [-100, 100]", id));
    a.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
  }
  std::sort(a.logit_bias.begin(), a.logit_bias.end());
  for (size_t i = 1; i < a.logit_bias.size(); ++i)
    if (a.logit_bias[i].first == a.logit_bias[i - 1].first)
      return bad_request("logit_bias", fmt::format("logit_bias: token id {} appears twice", a.logit_bias[i].first));
  return std::nullopt;
}

// Sampling, stream flags, stops and max_tokens (given; the context check comes later).
struct Common {
  std::optional<int64_t> max_tokens;
};

ApiResult<Common> parse_common(const Json& obj, const ModelCard& model, uint64_t default_seed, ApiRequest& out) {
  Common c;
  kernels::SamplingParams& s = out.gen.sampling;
  s.temperature = model.temperature;
  s.top_p = model.top_p;
  s.seed = default_seed;
  auto t = get_number(obj, "temperature");
  if (!t.ok()) return t.error();
  if (t.value()) {
    if (*t.value() < 0 || *t.value() > kMaxTemperature)
      return bad_request("temperature", fmt::format("temperature: {} is outside [0, 2]", *t.value()));
    s.temperature = static_cast<float>(*t.value());
  }
  auto p = get_number(obj, "top_p");
  if (!p.ok()) return p.error();
  if (p.value()) {
    if (!(*p.value() > 0 && *p.value() <= 1))
      return bad_request("top_p", fmt::format("top_p: {} is outside (0, 1]", *p.value()));
    s.top_p = static_cast<float>(*p.value());
  }
  // top_k as vLLM: -1 or 0 = off, else ≥ 1 (the kernel takes 0 = off; a top_k ≥ V is off too).
  auto k = get_int(obj, "top_k");
  if (!k.ok()) return k.error();
  if (k.value()) {
    if (*k.value() < -1)
      return bad_request("top_k", fmt::format("top_k: {} must be -1 or 0 (off) or a positive integer", *k.value()));
    const int64_t top_k = std::min<int64_t>(*k.value(), std::numeric_limits<int32_t>::max());
    s.top_k = top_k == -1 ? 0 : static_cast<int32_t>(top_k);
  }
  auto min_p = get_number(obj, "min_p");
  if (!min_p.ok()) return min_p.error();
  if (min_p.value()) {
    if (!(*min_p.value() >= 0 && *min_p.value() <= 1))
      return bad_request("min_p", fmt::format("min_p: {} is outside [0, 1]", *min_p.value()));
    s.min_p = static_cast<float>(*min_p.value());
  }
  if (auto e = parse_adjustments(obj, model.text->tokenizer.n_vocab(), out.gen.adjust)) return *e;
  auto seed = get_int(obj, "seed");
  if (!seed.ok()) return seed.error();
  if (seed.value()) s.seed = static_cast<uint64_t>(*seed.value());

  auto ignore_eos = get_bool(obj, "ignore_eos");  // vLLM's extension (benchmarks, tests)
  if (!ignore_eos.ok()) return ignore_eos.error();
  out.gen.stop_at_eos = !ignore_eos.value().value_or(false);

  auto stream = get_bool(obj, "stream");
  if (!stream.ok()) return stream.error();
  out.stream = stream.value().value_or(false);
  if (const Json* so = json_optional(obj, "stream_options")) {
    if (!so->is_object()) return wrong_type("stream_options", "an object", *so);
    if (!out.stream)
      return bad_request("stream_options", "stream_options: only allowed when stream is true");
    // Members other than include_usage (continuous_usage_stats, ...) are accepted and ignored
    // when they are booleans, as the SDKs and vLLM send them.
    for (auto it = so->begin(); it != so->end(); ++it)
      if (!it.value().is_boolean() && !it.value().is_null())
        return wrong_type("stream_options." + it.key(), "a boolean", it.value());
    auto usage = get_bool(*so, "include_usage");
    if (!usage.ok()) return usage.error();
    out.include_usage = usage.value().value_or(false);
  }

  if (const Json* stop = json_optional(obj, "stop")) {
    std::vector<std::string> stops;
    if (stop->is_string()) {
      stops.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      if (stop->size() > kMaxStops)
        return bad_request("stop", fmt::format("stop: at most {} sequences, got {}", kMaxStops, stop->size()));
      for (size_t i = 0; i < stop->size(); ++i) {
        if (!(*stop)[i].is_string()) return wrong_type(fmt::format("stop[{}]", i), "a string", (*stop)[i]);
        stops.push_back((*stop)[i].get<std::string>());
      }
    } else {
      return wrong_type("stop", "a string or an array of strings", *stop);
    }
    for (const std::string& st : stops)
      if (st.empty()) return bad_request("stop", "stop: empty stop sequences are not allowed");
    out.gen.stop_strings = std::move(stops);
  }

  auto mt = get_int(obj, "max_tokens");
  if (!mt.ok()) return mt.error();
  c.max_tokens = mt.value();
  if (c.max_tokens && *c.max_tokens < 0)
    return bad_request("max_tokens", fmt::format("max_tokens: {} is negative", *c.max_tokens));
  return c;
}

// Bias -inf (never sampled) for `id` in a logit_bias sorted by id.
void forbid_token(std::vector<std::pair<int32_t, float>>& bias, int32_t id) {
  auto at = std::lower_bound(bias.begin(), bias.end(), id,
                             [](const std::pair<int32_t, float>& e, int32_t v) { return e.first < v; });
  if (at != bias.end() && at->first == id) {
    at->second = -INFINITY;
  } else {
    bias.insert(at, {id, -INFINITY});
  }
}

// Sets gen.max_tokens: the given value, else the smallest of --max-tokens-limit, the rest of
// the context and what the cache holds; the prompt and the completion must fit in max_context positions, and a given
// value must not exceed the limit.
std::optional<ApiError> fit_context(const ModelCard& model, const std::string& prompt_param,
                                    const std::string& max_param, std::optional<int64_t> max_tokens,
                                    bool zero_ok, ApiRequest& out) {
  const int64_t n_prompt = static_cast<int64_t>(out.gen.prompt.size());
  const int64_t room = model.max_context - n_prompt;
  if (room < (zero_ok ? 0 : 1)) {
    return bad_request(prompt_param,
                       fmt::format("This model's maximum context length is {} tokens; the prompt has {} tokens, "
                                   "leaving no room for a completion",
                                   model.max_context, n_prompt),
                       "context_length_exceeded");
  }
  const int64_t limit = model.max_tokens_limit > 0 ? model.max_tokens_limit : INT32_MAX;
  if (!max_tokens) {
    // At least 1: a prompt the cache cannot hold at all is refused at submission, naming the cache.
    const int64_t fit = model.max_tokens_fit ? std::max<int64_t>(model.max_tokens_fit(n_prompt), 1) : room;
    out.gen.max_tokens = static_cast<int32_t>(std::min<int64_t>({room, limit, fit, INT32_MAX}));
    return std::nullopt;
  }
  if (*max_tokens == 0 && !zero_ok)
    return bad_request(max_param, fmt::format("{}: must be at least 1{}", max_param,
                                              out.endpoint == Endpoint::kCompletions
                                                  ? " (0 only with echo and logprobs)" : ""));
  if (*max_tokens > room) {
    return bad_request(max_param,
                       fmt::format("This model's maximum context length is {} tokens; the prompt has {} tokens, "
                                   "so {} = {} exceeds the {} that remain",
                                   model.max_context, n_prompt, max_param, *max_tokens, room),
                       "context_length_exceeded");
  }
  if (*max_tokens > limit)
    return bad_request(max_param, fmt::format("{} = {} exceeds the server's limit of {} (--max-tokens-limit)",
                                              max_param, *max_tokens, limit), "max_tokens_exceeded");
  out.gen.max_tokens = static_cast<int32_t>(*max_tokens);
  return std::nullopt;
}

// One prompt of a completions request: a string, [string], [ids] or [[ids]].
ApiResult<bool> completion_prompt(const Json& obj, const ModelCard& model, ApiRequest& out) {
  const Json* p = json_optional(obj, "prompt");
  if (!p) return bad_request("prompt", "prompt: required", "missing_required_parameter");
  const Json* one = p;
  if (p->is_array() && !p->empty() && ((*p)[0].is_string() || (*p)[0].is_array())) {
    if (p->size() != 1)
      return bad_request("prompt", fmt::format("prompt: only one prompt per request is supported, got {}", p->size()),
                         "unsupported_parameter");
    one = &(*p)[0];
  }
  if (one->is_string()) {
    // A raw prompt is the caller's own token stream: special-token strings in it become their
    // ids, as in HF (the chat endpoint keeps request text plain instead).
    out.gen.prompt = encode_prompt(*model.text, one->get_ref<const std::string&>(), /*allow_special=*/true);
    out.prompt_skip = model.text->config.add_bos_token ? 1 : 0;
  } else if (one->is_array()) {
    if (one->empty()) return bad_request("prompt", "prompt: empty token array");
    if (static_cast<int64_t>(one->size()) > model.max_context)
      return bad_request("prompt",
                         fmt::format("This model's maximum context length is {} tokens; the prompt has {} tokens",
                                     model.max_context, one->size()),
                         "context_length_exceeded");
    const int32_t n_vocab = model.text->tokenizer.n_vocab();
    out.gen.prompt.reserve(one->size());
    for (size_t i = 0; i < one->size(); ++i) {
      const Json& id = (*one)[i];
      if (!id.is_number_integer())
        return wrong_type(fmt::format("prompt[{}]", i), "a token id (integer)", id);
      const int64_t v = id.is_number_unsigned() && id.get<uint64_t>() > INT64_MAX ? INT64_MAX : id.get<int64_t>();
      if (v < 0 || v >= n_vocab)
        return bad_request("prompt", fmt::format("prompt[{}]: token id {} is outside [0, {})", i, v, n_vocab));
      out.gen.prompt.push_back(static_cast<int32_t>(v));
    }
  } else {
    return wrong_type("prompt", "a string, an array of token ids, or an array with one of them", *p);
  }
  if (out.gen.prompt.empty()) return bad_request("prompt", "prompt: encodes to no tokens");
  return true;
}

}  // namespace

std::string message_param(std::string_view message) {
  const size_t end = message.find_first_of(":.[");
  return end == std::string_view::npos ? std::string() : std::string(message.substr(0, end));
}

ApiError bad_request(std::string param, std::string message, std::string code) {
  ApiError e;
  e.http_status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

std::string error_body(const ApiError& e) {
  Json err;
  err["message"] = e.message;
  err["type"] = e.type;
  err["param"] = e.param.empty() ? Json() : Json(e.param);
  err["code"] = e.code.empty() ? Json() : Json(e.code);
  Json body;
  body["error"] = std::move(err);
  return dump(body);
}

Result<GenerationDefaults> parse_generation_config(std::string_view json_text, const std::string& source) {
  Result<Json> parsed = parse_json_bounded<Json>(json_text);
  if (!parsed.ok() || !parsed->is_object()) return Status::errorf("{}: not a JSON object", source);
  const Json& j = *parsed;
  GenerationDefaults d;
  if (const Json* t = json_optional(j, "temperature")) {
    if (!t->is_number() || !(t->get<double>() >= 0) || !std::isfinite(t->get<double>()))
      return Status::errorf("{}: temperature = {} must be a number >= 0", source, dump(*t));
    d.temperature = t->get<float>();
  }
  if (const Json* p = json_optional(j, "top_p")) {
    if (!p->is_number() || !(p->get<double>() > 0 && p->get<double>() <= 1))
      return Status::errorf("{}: top_p = {} must be a number in (0, 1]", source, dump(*p));
    d.top_p = p->get<float>();
  }
  return d;
}

// n (both endpoints) and best_of (completions): out.n choices returned of gen.n = best_of
// generated (runtime/request.h: choice seeds); best_of > n ranks them by cumulative logprob,
// for which the engine scores every token (gen.logprobs >= 0; shown_logprobs what the client
// asked).
std::optional<ApiError> parse_choices(const Json& obj, const ModelCard& model, ApiRequest& out) {
  auto n = get_int(obj, "n");
  if (!n.ok()) return n.error();
  auto best_of = get_int(obj, "best_of");
  if (!best_of.ok()) return best_of.error();
  const int64_t want = n.value().value_or(1);
  if (want < 1 || want > model.max_n)
    return bad_request("n", fmt::format("n: {} is outside [1, {}] (--max-n)", want, model.max_n));
  const int64_t gen = best_of.value().value_or(want);
  if (gen < want) return bad_request("best_of", fmt::format("best_of: {} is less than n = {}", gen, want));
  if (gen > model.max_n)
    return bad_request("best_of", fmt::format("best_of: {} is outside [n, {}] (--max-n)", gen, model.max_n));
  if (gen > want && out.stream)
    return bad_request("best_of", "best_of: greater than n cannot be streamed (the best choices are known at the end)");
  if (gen > 1 && out.gen.prompt_logprobs)
    return bad_request("echo", "echo: with logprobs needs n = best_of = 1 (the prompt's logprobs are scored once)",
                       "unsupported_parameter");
  out.n = static_cast<int32_t>(want);
  out.gen.n = static_cast<int32_t>(gen);
  out.shown_logprobs = out.gen.logprobs;
  if (gen > want) out.gen.logprobs = std::max(out.gen.logprobs, 0);
  return std::nullopt;
}

ApiResult<ApiRequest> parse_completions_request(std::string_view body, const ModelCard& model,
                                                uint64_t default_seed) {
  ApiResult<Json> parsed = parse_body(body, model);
  if (!parsed.ok()) return parsed.error();
  const Json& obj = *parsed;
  ApiRequest out;
  out.endpoint = Endpoint::kCompletions;
  if (auto e = check_fields(obj, kCompletionFields)) return *e;
  if (auto e = check_model(obj, model)) return *e;
  if (auto e = check_neutral(obj)) return *e;
  if (auto e = check_passive(obj)) return *e;
  ApiResult<Common> common = parse_common(obj, model, default_seed, out);
  if (!common.ok()) return common.error();

  auto echo = get_bool(obj, "echo");
  if (!echo.ok()) return echo.error();
  out.echo = echo.value().value_or(false);
  auto lp = get_int(obj, "logprobs");
  if (!lp.ok()) {
    if (const Json* v = json_optional(obj, "logprobs"); v && v->is_boolean())
      return bad_request("logprobs", "logprobs: expected an integer 0..5 for /v1/completions (a boolean is the "
                                     "chat form)");
    return lp.error();
  }
  if (lp.value()) {
    if (*lp.value() < 0 || *lp.value() > kMaxCompletionLogprobs)
      return bad_request("logprobs", fmt::format("logprobs: {} is outside [0, {}]", *lp.value(), kMaxCompletionLogprobs));
    out.gen.logprobs = static_cast<int32_t>(*lp.value());
    out.gen.prompt_logprobs = out.echo;
  }
  ApiResult<bool> prompt = completion_prompt(obj, model, out);
  if (!prompt.ok()) return prompt.error();
  const bool zero_ok = out.echo && out.gen.logprobs >= 0;  // scoring a prompt
  if (auto e = fit_context(model, "prompt", "max_tokens", common->max_tokens, zero_ok, out)) return *e;
  if (auto e = parse_choices(obj, model, out)) return *e;
  return out;
}

ApiResult<ApiRequest> parse_chat_request(std::string_view body, const ModelCard& model, uint64_t default_seed) {
  ApiResult<Json> parsed = parse_body(body, model);
  if (!parsed.ok()) return parsed.error();
  const Json& obj = *parsed;
  ApiRequest out;
  out.endpoint = Endpoint::kChat;
  if (auto e = check_fields(obj, kChatFields)) return *e;
  if (auto e = check_model(obj, model)) return *e;
  if (auto e = check_neutral(obj)) return *e;
  if (auto e = check_passive(obj)) return *e;
  ApiResult<Common> common = parse_common(obj, model, default_seed, out);
  if (!common.ok()) return common.error();

  auto mct = get_int(obj, "max_completion_tokens");
  if (!mct.ok()) return mct.error();
  std::string max_param = "max_tokens";
  if (mct.value()) {
    if (*mct.value() < 0)
      return bad_request("max_completion_tokens", fmt::format("max_completion_tokens: {} is negative", *mct.value()));
    if (common->max_tokens && *common->max_tokens != *mct.value())
      return bad_request("max_completion_tokens", "max_completion_tokens: disagrees with max_tokens");
    common->max_tokens = mct.value();
    max_param = "max_completion_tokens";
  }

  auto lp = get_bool(obj, "logprobs");
  if (!lp.ok()) return lp.error();
  auto top = get_int(obj, "top_logprobs");
  if (!top.ok()) return top.error();
  if (top.value()) {
    if (*top.value() < 0 || *top.value() > kMaxTopLogprobs)
      return bad_request("top_logprobs", fmt::format("top_logprobs: {} is outside [0, {}]", *top.value(), kMaxTopLogprobs));
    if (!lp.value().value_or(false))
      return bad_request("top_logprobs", "top_logprobs: requires logprobs to be true");
  }
  if (lp.value().value_or(false)) out.gen.logprobs = static_cast<int32_t>(top.value().value_or(0));

  // Tools: the renderer writes `tools`. tool_choice "none" forbids a call: ｜DSML｜, the special
  // token that opens every DSML tag, gets bias -inf (merged into the sorted logit_bias).
  // parallel_tool_calls false ends the generation at the first call's end tag: a stop string
  // (the engine matches it on the text and ends the request in that step, no cancel needed);
  // the response completes the call block (ChatStreamParser::end_at_stop). "required" and a
  // named function force one call by constrained decoding (OutputConstraint::tool_calls: the
  // DSML block of one call to one of the tools, its arguments to the tool's parameters).
  if (const Json* tc = json_optional(obj, "tool_choice")) {
    if (auto e = parse_forced_call(obj, *tc, out.gen.constraint)) return *e;
    if (*tc == "none") {
      if (std::optional<int32_t> dsml = model.text->tokenizer.token_id("｜DSML｜"))
        forbid_token(out.gen.adjust.logit_bias, *dsml);
      if (out.gen.adjust.logit_bias.size() > static_cast<size_t>(kMaxLogitBias))
        return bad_request("logit_bias", fmt::format("logit_bias: at most {} entries with tool_choice \"none\" (which "
                                                     "adds one)", kMaxLogitBias - 1));
    }
  }
  auto parallel = get_bool(obj, "parallel_tool_calls");
  if (!parallel.ok()) return parallel.error();
  if (parallel.value() && !*parallel.value()) {
    out.first_call_only = true;
    out.gen.stop_strings.emplace_back(chat::kFirstCallStop);
  }

  Result<chat::ChatOptions> options = chat::chat_options_from_request(obj);
  if (!options.ok()) return bad_request(message_param(options.message()), options.message());
  const Json* messages = json_optional(obj, "messages");
  if (!messages) return bad_request("messages", "messages: required", "missing_required_parameter");
  if (!messages->is_array()) return wrong_type("messages", "an array", *messages);
  if (messages->empty()) return bad_request("messages", "messages: must not be empty");
  Result<chat::ChatPrompt> prompt = chat::render_chat(*messages, *options);
  if (!prompt.ok()) return bad_request(message_param(prompt.message()), prompt.message());
  out.mode = options->mode;
  out.opens_reasoning = chat::prompt_opens_reasoning(*prompt);
  if (auto e = parse_response_format(obj, out.gen.constraint)) return *e;
  if (!out.gen.constraint.json_schema.empty() && !out.gen.constraint.tool_calls.empty())
    return bad_request("response_format", "response_format: a JSON answer and a forced tool call exclude each other");
  if (out.gen.constraint.active() && out.opens_reasoning)  // the value comes after the reasoning
    out.gen.constraint.start_after = model.text->tokenizer.token_id(chat::kThinkClose).value_or(-1);
  // BOS and the markers become ids only where the template wrote them; special-token strings
  // in the request's text stay text (text.md §3.13's safe mode).
  out.gen.prompt = model.text->tokenizer.encode_spans(prompt->text, prompt->template_spans);
  out.prompt_text = std::move(prompt->text);
  if (auto e = fit_context(model, "messages", max_param, common->max_tokens, false, out)) return *e;
  if (auto e = parse_choices(obj, model, out)) return *e;
  return out;
}

namespace {

std::optional<ApiError> check_only(const Json& obj, std::initializer_list<const char*> names) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool known = false;
    for (const char* n : names) known = known || it.key() == n;
    if (!known)
      return bad_request(it.key(), fmt::format("Unrecognized request argument supplied: {}", it.key()),
                         "unsupported_parameter");
  }
  return std::nullopt;
}

}  // namespace

ApiResult<std::string> tokenize_response(std::string_view body, const ModelCard& model) {
  ApiResult<Json> parsed = parse_body(body, model);
  if (!parsed.ok()) return parsed.error();
  const Json& obj = *parsed;
  if (auto e = check_model(obj, model)) return *e;
  auto special = get_bool(obj, "add_special_tokens");
  if (!special.ok()) return special.error();
  auto strs = get_bool(obj, "return_token_strs");
  if (!strs.ok()) return strs.error();
  std::vector<int32_t> ids;
  const Json* prompt = json_optional(obj, "prompt");
  const Json* messages = json_optional(obj, "messages");
  if (prompt && messages)
    return bad_request("messages", "messages: give either prompt or messages, not both");
  if (prompt) {
    if (auto e = check_only(obj, {"model", "prompt", "add_special_tokens", "return_token_strs"})) return *e;
    if (!prompt->is_string()) return wrong_type("prompt", "a string", *prompt);
    ids = encode_prompt(*model.text, prompt->get_ref<const std::string&>(), /*allow_special=*/true);
    // Without special tokens: no BOS of ours (a BOS string in the text stays its id).
    if (!special.value().value_or(true) && model.text->config.add_bos_token && !ids.empty()) ids.erase(ids.begin());
  } else if (messages) {
    if (auto e = check_only(obj, {"model", "messages", "add_special_tokens", "add_generation_prompt", "return_token_strs",
                                  "thinking", "chat_template_kwargs", "reasoning_effort", "tools"}))
      return *e;
    auto gen_prompt = get_bool(obj, "add_generation_prompt");
    if (!gen_prompt.ok()) return gen_prompt.error();
    if (!gen_prompt.value().value_or(true))
      return bad_request("add_generation_prompt", "add_generation_prompt: only true is supported (the encoding "
                                                  "ends a user turn with the assistant's prompt)",
                         "unsupported_parameter");
    Result<chat::ChatOptions> options = chat::chat_options_from_request(obj);
    if (!options.ok()) return bad_request(message_param(options.message()), options.message());
    if (!messages->is_array()) return wrong_type("messages", "an array", *messages);
    if (messages->empty()) return bad_request("messages", "messages: must not be empty");
    Result<chat::ChatPrompt> rendered = chat::render_chat(*messages, *options);
    if (!rendered.ok()) return bad_request(message_param(rendered.message()), rendered.message());
    ids = model.text->tokenizer.encode_spans(rendered->text, rendered->template_spans);
  } else {
    return bad_request("prompt", "prompt: required (or messages)", "missing_required_parameter");
  }
  Json out;
  out["count"] = ids.size();
  out["max_model_len"] = model.max_context;
  out["tokens"] = ids;
  Json token_strs;
  if (strs.value().value_or(false)) {
    token_strs = Json::array();
    for (int32_t id : ids) token_strs.push_back(token_text(model.text->tokenizer, id));
  }
  out["token_strs"] = std::move(token_strs);
  return dump(out);
}

ApiResult<std::string> detokenize_response(std::string_view body, const ModelCard& model) {
  ApiResult<Json> parsed = parse_body(body, model);
  if (!parsed.ok()) return parsed.error();
  const Json& obj = *parsed;
  if (auto e = check_only(obj, {"model", "tokens"})) return *e;
  if (auto e = check_model(obj, model)) return *e;
  const Json* tokens = json_optional(obj, "tokens");
  if (!tokens) return bad_request("tokens", "tokens: required", "missing_required_parameter");
  if (!tokens->is_array()) return wrong_type("tokens", "an array of token ids", *tokens);
  const int32_t n_vocab = model.text->tokenizer.n_vocab();
  std::vector<int32_t> ids;
  ids.reserve(tokens->size());
  for (size_t i = 0; i < tokens->size(); ++i) {
    const Json& id = (*tokens)[i];
    const std::string name = fmt::format("tokens[{}]", i);
    if (!id.is_number_integer()) return wrong_type(name, "a token id (integer)", id);
    const int64_t v = id.is_number_unsigned() && id.get<uint64_t>() > INT64_MAX ? INT64_MAX : id.get<int64_t>();
    if (v < 0 || v >= n_vocab)
      return bad_request(name, fmt::format("{}: token id {} is outside [0, {})", name, v, n_vocab));
    ids.push_back(static_cast<int32_t>(v));
  }
  Result<std::string> text = model.text->tokenizer.decode(ids);
  if (!text.ok()) return bad_request("tokens", "tokens: " + text.message());
  return dump(Json{{"prompt", *text}});
}

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

std::string sse(const Json& j) { return "data: " + dump(j) + "\n\n"; }

// Completions logprobs: four parallel arrays, one entry per token.
Json completion_logprobs_shape() {
  return Json{{"tokens", Json::array()}, {"token_logprobs", Json::array()},
              {"top_logprobs", Json::array()}, {"text_offset", Json::array()}};
}

}  // namespace

ResponseBuilder::ResponseBuilder(const ApiRequest& request, const ModelCard& model, std::string id, int64_t created)
    : request_(request), model_(model), id_(std::move(id)), created_(created), parser_(request.opens_reasoning),
      in_reasoning_(request.endpoint == Endpoint::kChat && request.opens_reasoning),
      fingerprint_(system_fingerprint(model.id)) {
  logprobs_ = request_.endpoint == Endpoint::kCompletions ? completion_logprobs_shape() : Json::array();
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
  return envelope(request_.endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion");
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
  if (prompt_tokens_ == 0) prompt_tokens_ = static_cast<int64_t>(request_.gen.prompt.size());
}

std::string ResponseBuilder::add(const RequestUpdate& u) {
  if (finished_) return {};
  const bool first = !started_;
  started_ = true;
  record(u);
  return request_.endpoint == Endpoint::kCompletions ? add_completion(u, first) : add_chat(u, first);
}

// vLLM's stop_reason beside OpenAI's finish_reason: "timeout" or "cancelled", the stop string
// or stop id that matched; null for EOS, max_tokens and the context limit.
Json ResponseBuilder::stop_reason() const {
  if (reason_ == FinishReason::kTimeout) return "timeout";
  if (reason_ == FinishReason::kCancelled) return "cancelled";
  if (reason_ != FinishReason::kStop) return nullptr;
  if (request_.first_call_only && stop_string_ == chat::kFirstCallStop) return nullptr;  // the server's own
  if (!stop_string_.empty()) return stop_string_;
  if (stop_id_ >= 0) return stop_id_;
  return nullptr;
}

// Completions: the update's text (after the echoed prompt on the first) and the logprobs of its
// tokens (and, with echo, of the prompt first), appended to the whole response (complete form)
// or sent as one chunk (stream form).
std::string ResponseBuilder::add_completion(const RequestUpdate& u, bool first) {
  std::string text;
  if (first && request_.echo) {
    const std::vector<int32_t>& prompt = request_.gen.prompt;
    const std::span<const int32_t> shown(prompt.data() + request_.prompt_skip, prompt.size() - request_.prompt_skip);
    Result<std::string> echo = model_.text->tokenizer.decode(shown);
    if (echo.ok()) text = *echo;
  }
  text += u.text;
  const bool want_lp = request_.gen.logprobs >= 0;
  Json chunk_lp = completion_logprobs_shape();
  Json& lp = request_.stream ? chunk_lp : logprobs_;
  if (want_lp) {
    if (first && request_.echo) {
      const std::vector<int32_t>& prompt = request_.gen.prompt;
      std::vector<int32_t> ids(prompt.begin() + request_.prompt_skip, prompt.end());
      std::vector<const TokenLogprob*> lps;
      for (size_t i = request_.prompt_skip; i < prompt.size(); ++i)
        lps.push_back(i >= 1 && i - 1 < u.prompt_logprobs.size() ? &u.prompt_logprobs[i - 1] : nullptr);
      append_completion_logprobs(lp, ids, lps);
    }
    std::vector<const TokenLogprob*> lps;
    for (size_t i = 0; i < u.tokens.size(); ++i) lps.push_back(i < u.logprobs.size() ? &u.logprobs[i] : nullptr);
    append_completion_logprobs(lp, u.tokens, lps);
  }
  if (!request_.stream) {
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
  const bool want_lp = request_.gen.logprobs >= 0;
  Json chunk_lp = Json::array();
  Json& lp = request_.stream ? chunk_lp : logprobs_;
  if (want_lp)
    for (const TokenLogprob& t : u.logprobs) lp.push_back(chat_logprob_entry(t));
  if (!request_.stream) {
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
  return request_.first_call_only && u.reason == FinishReason::kStop && u.stop_string == chat::kFirstCallStop;
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
  if (request_.include_usage) chunk["usage"] = nullptr;
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
    if (request_.include_usage) {
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
  Json body = envelope(request_.endpoint == Endpoint::kChat ? "chat.completion" : "text_completion");
  Json choice;
  choice["index"] = 0;
  const bool want_lp = request_.gen.logprobs >= 0;
  if (request_.endpoint == Endpoint::kChat) {
    Json message;
    message["role"] = "assistant";
    const bool calls = !calls_.calls.empty();
    message["content"] = calls && message_.content.empty() ? Json() : Json(message_.content);
    if (request_.mode == chat::ThinkingMode::kThinking || !message_.reasoning_content.empty())
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
  return dump(body);
}

}  // namespace dsv4::server
