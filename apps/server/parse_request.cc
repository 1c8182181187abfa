// OpenAI request parsing (protocol.h): request bodies -> ApiRequest or ApiError, and the
// tokenizer routes. Responses: build_response.cc.
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
#include "structured_fields.h"
#include "text/utf8.h"

namespace dsv4::server {
namespace {

using Json = OrderedJson;

constexpr int kMaxStops = 4;                 // OpenAI: up to 4 stop sequences
constexpr int kMaxCompletionLogprobs = 5;    // OpenAI: completions logprobs 0..5
constexpr double kMaxTemperature = 2.0;      // OpenAI: temperature 0..2
constexpr size_t kMaxMetadataKeys = 16;      // OpenAI: metadata bounds
constexpr size_t kMaxMetadataKey = 64;
constexpr size_t kMaxMetadataValue = 512;
constexpr size_t kMaxCacheSaltBytes = 256;

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

bool client_left(const ClientGone* gone) { return gone && gone->load(std::memory_order_relaxed); }

ApiError client_gone_error() {
  ApiError e = bad_request("", "the client closed the connection", "client_closed_request");
  e.http_status = kClientGoneStatus;
  return e;
}

// The fields one endpoint knows. Any other field is rejected by name.
const std::set<std::string, std::less<>> kCommonFields = {
    "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "n", "stream", "stream_options",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "logit_bias", "user", "logprobs", "ignore_eos",
    // Sent by the SDKs; they do not change generation (check_passive validates their types).
    "store", "metadata", "service_tier", "cache_salt",
    // vLLM's structured output (structured_fields.h)
    "structured_outputs", "guided_json", "guided_regex", "guided_choice", "guided_grammar"};
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
  if (out.json_schema.size() > kMaxSchemaBytes)
    return bad_request("response_format", fmt::format("response_format: json_schema.schema of {} bytes exceeds the "
                                                      "limit of {}", out.json_schema.size(), kMaxSchemaBytes),
                       "field_too_large");
  const Json* strict = json_optional(*js, "strict");
  out.strict = strict && strict->is_boolean() && strict->get<bool>();
  return std::nullopt;
}

// The caps on tools and on the arguments of the tool calls in messages (protocol.h).
std::optional<ApiError> check_tool_caps(const Json& obj) {
  if (const Json* tools = json_optional(obj, "tools"); tools && tools->is_array()) {
    if (tools->size() > kMaxTools)
      return bad_request("tools", fmt::format("tools: {} tools exceed the limit of {}", tools->size(), kMaxTools),
                         "field_too_large");
    if (const size_t bytes = tools->dump().size(); bytes > kMaxToolsBytes)
      return bad_request("tools", fmt::format("tools: {} bytes of tool definitions exceed the limit of {}", bytes,
                                              kMaxToolsBytes), "field_too_large");
  }
  const Json* messages = json_optional(obj, "messages");
  if (!messages || !messages->is_array()) return std::nullopt;
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const Json* calls = m.is_object() ? json_optional(m, "tool_calls") : nullptr;
    if (!calls || !calls->is_array()) continue;
    for (size_t k = 0; k < calls->size(); ++k) {
      const Json& call = (*calls)[k];
      const Json* fn = call.is_object() ? json_optional(call, "function") : nullptr;
      const Json* args = fn && fn->is_object() ? json_optional(*fn, "arguments") : nullptr;
      if (args && args->is_string() && args->get_ref<const std::string&>().size() > kMaxArgumentsBytes) {
        const std::string name = fmt::format("messages[{}].tool_calls[{}].function.arguments", i, k);
        return bad_request("messages", fmt::format("{}: {} bytes exceed the limit of {}", name,
                                                   args->get_ref<const std::string&>().size(), kMaxArgumentsBytes),
                           "field_too_large");
      }
    }
  }
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

// cache_salt as vLLM takes it: a non-empty string; requests with different salts share no
// prefix-cache blocks (GenerationRequest::cache_salt).
std::optional<ApiError> parse_cache_salt(const Json& obj, GenerationRequest& g) {
  const Json* v = json_optional(obj, "cache_salt");
  if (!v) return std::nullopt;
  if (!v->is_string()) return wrong_type("cache_salt", "a string", *v);
  const std::string& salt = v->get_ref<const std::string&>();
  if (salt.empty()) return bad_request("cache_salt", "cache_salt: must be a non-empty string when given");
  if (salt.size() > kMaxCacheSaltBytes)
    return bad_request("cache_salt", fmt::format("cache_salt: {} bytes, the limit is {}", salt.size(),
                                                 kMaxCacheSaltBytes));
  g.cache_salt = salt;
  return std::nullopt;
}

ApiResult<Common> parse_common(const Json& obj, const ModelCard& model, uint64_t default_seed, ApiRequest& out) {
  if (auto e = parse_cache_salt(obj, out.gen)) return *e;
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
    for (const std::string& st : stops) {
      if (st.empty()) return bad_request("stop", "stop: empty stop sequences are not allowed");
      if (st.size() > kMaxStopBytes)
        return bad_request("stop", fmt::format("stop: a stop sequence of {} bytes exceeds the limit of {}", st.size(),
                                               kMaxStopBytes), "field_too_large");
    }
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
                                                uint64_t default_seed, const ClientGone* gone) {
  ApiResult<Json> parsed = parse_body(body, model);
  if (!parsed.ok()) return parsed.error();
  if (client_left(gone)) return client_gone_error();
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
  if (client_left(gone)) return client_gone_error();
  const bool zero_ok = out.echo && out.gen.logprobs >= 0;  // scoring a prompt
  if (auto e = fit_context(model, "prompt", "max_tokens", common->max_tokens, zero_ok, out)) return *e;
  if (auto e = parse_structured_fields(obj, out.gen.constraint)) return *e;
  if (auto e = parse_choices(obj, model, out)) return *e;
  return out;
}

ApiResult<ApiRequest> parse_chat_request(std::string_view body, const ModelCard& model, uint64_t default_seed,
                                         const ClientGone* gone) {
  ApiResult<Json> parsed = parse_body(body, model);
  if (!parsed.ok()) return parsed.error();
  if (client_left(gone)) return client_gone_error();
  const Json& obj = *parsed;
  ApiRequest out;
  out.endpoint = Endpoint::kChat;
  if (auto e = check_fields(obj, kChatFields)) return *e;
  if (auto e = check_tool_caps(obj)) return *e;
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
  if (client_left(gone)) return client_gone_error();
  out.mode = options->mode;
  out.opens_reasoning = chat::prompt_opens_reasoning(*prompt);
  if (auto e = parse_response_format(obj, out.gen.constraint)) return *e;
  if (auto e = parse_structured_fields(obj, out.gen.constraint)) return *e;
  if (!out.gen.constraint.json_schema.empty() && !out.gen.constraint.tool_calls.empty())
    return bad_request("response_format", "response_format: a JSON answer and a forced tool call exclude each other");
  if (out.gen.constraint.active() && out.opens_reasoning)  // the value comes after the reasoning
    out.gen.constraint.start_after = model.text->tokenizer.token_id(chat::kThinkClose).value_or(-1);
  // BOS and the markers become ids only where the template wrote them; special-token strings
  // in the request's text stay text (text.md §3.13's safe mode).
  out.gen.prompt = model.text->tokenizer.encode_spans(prompt->text, prompt->template_spans);
  out.prompt_text = std::move(prompt->text);
  if (client_left(gone)) return client_gone_error();
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

// The /tokenize body {"count", "max_model_len", "tokens", "token_strs"} (compact, as dump()
// writes it), written directly: a JSON DOM of the ids costs 16 bytes per id, and at 8 MiB of
// prompt its fresh pages (page faults) were most of the route's time.
std::string tokenize_body(const std::vector<int32_t>& ids, int64_t max_model_len, const Tokenizer* strs) {
  std::string out;
  out.reserve(64 + 8 * ids.size());
  fmt::format_to(std::back_inserter(out), R"({{"count":{},"max_model_len":{},"tokens":[)", ids.size(), max_model_len);
  for (size_t i = 0; i < ids.size(); ++i) fmt::format_to(std::back_inserter(out), "{}{}", i ? "," : "", ids[i]);
  out += R"(],"token_strs":)";
  if (strs == nullptr) {
    out += "null";
  } else {
    out += '[';
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ',';
      out += dump(Json(token_text(*strs, ids[i])));
    }
    out += ']';
  }
  out += '}';
  return out;
}

ApiResult<std::string> tokenize_response(std::string_view body, const ModelCard& model, const ClientGone* gone) {
  ApiResult<Json> parsed = parse_body(body, model);
  if (!parsed.ok()) return parsed.error();
  if (client_left(gone)) return client_gone_error();
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
    if (auto e = check_tool_caps(obj)) return *e;
    Result<chat::ChatPrompt> rendered = chat::render_chat(*messages, *options);
    if (!rendered.ok()) return bad_request(message_param(rendered.message()), rendered.message());
    if (client_left(gone)) return client_gone_error();
    ids = model.text->tokenizer.encode_spans(rendered->text, rendered->template_spans);
  } else {
    return bad_request("prompt", "prompt: required (or messages)", "missing_required_parameter");
  }
  return tokenize_body(ids, model.max_context, strs.value().value_or(false) ? &model.text->tokenizer : nullptr);
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

}  // namespace dsv4::server
