#include "grammar_paths.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "grammar/json_schema.h"
#include "grammar/text_constraint.h"

namespace dsv4::bench {
namespace grammar_paths {  // named: dsv4_bench builds as unity translation units

constexpr int kMaxPathTokens = 400;
constexpr int kCloseOdds = 6;  // strings of about 6 tokens

using grammar::MatchState;

double thread_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

// The issue's test schemas and a few of the shapes real clients send (kTool: the parameters
// of a forced DSML tool call; kRegex / kChoice / kGbnf: vLLM's whole-output constraints).
enum class PathShape { kJson, kTool, kRegex, kChoice, kGbnf };
struct Schema {
  const char* name;
  PathShape shape;
  const char* text;
};
const Schema kPathSchemas[] = {
    {"flat", PathShape::kJson, R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
        "ok": {"type": "boolean"}}, "required": ["name", "age"], "additionalProperties": false})"},
    {"nested", PathShape::kJson, R"({"type": "object", "properties": {"id": {"type": "string", "maxLength": 32},
        "items": {"type": "array", "maxItems": 8, "items": {"type": "object", "properties": {
          "sku": {"type": "string"}, "qty": {"type": "integer"}, "unit": {"enum": ["kg", "g", "l", "piece"]},
          "price": {"type": "number"}}, "required": ["sku", "qty"]}},
        "notes": {"type": ["string", "null"]}}, "required": ["id", "items"]})"},
    {"recursive", PathShape::kJson, R"({"$defs": {"node": {"type": "object", "properties": {"value": {"anyOf": [
        {"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]}, "children": {"type": "array",
        "items": {"$ref": "#/$defs/node"}, "maxItems": 3}}, "required": ["value"]}}, "$ref": "#/$defs/node"})"},
    {"scalars", PathShape::kJson, R"({"type": "object", "properties": {"day": {"type": "string", "format": "date"},
        "code": {"type": "string", "pattern": "^[a-z ]+$", "maxLength": 64}, "tag": {"type": "string",
        "pattern": "x"}, "score": {"type": "number", "minimum": 0, "maximum": 100, "multipleOf": 0.5}},
        "required": ["day", "code", "tag", "score"], "additionalProperties": false})"},
    {"short-str", PathShape::kJson, R"({"type": "object", "properties": {"title": {"type": "string", "maxLength": 20},
        "summary": {"type": "string", "minLength": 10, "maxLength": 100}, "note": {"type": "string", "maxLength": 60}},
        "required": ["title", "summary", "note"], "additionalProperties": false})"},
    {"patterns", PathShape::kJson, R"({"type": "object", "properties": {"phone": {"type": "string",
        "pattern": "^\\+?[0-9]{7,14}$"}, "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
        "slug": {"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$", "maxLength": 40}},
        "required": ["phone", "sku", "slug"], "additionalProperties": false})"},
    {"formats", PathShape::kJson, R"({"type": "object", "properties": {"at": {"type": "string", "format": "date-time"},
        "mail": {"type": "string", "format": "email"}, "id": {"type": "string", "format": "uuid"},
        "host": {"type": "string", "format": "hostname"}, "ip": {"type": "string", "format": "ipv4"}},
        "required": ["at", "mail", "id", "host", "ip"], "additionalProperties": false})"},
    {"numbers", PathShape::kJson, R"({"type": "object", "properties": {"age": {"type": "integer", "minimum": 1,
        "maximum": 120}, "price": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000000, "multipleOf": 0.01},
        "step": {"type": "integer", "multipleOf": 5}, "ratio": {"type": "number"}},
        "required": ["age", "price", "step", "ratio"], "additionalProperties": false})"},
    {"enums", PathShape::kJson, R"({"type": "object", "properties": {"color": {"enum": ["red", "green", "blue",
        "light goldenrod yellow"]}, "level": {"enum": [1, 2, 3, "max", null, true]}, "kind": {"const": "event"}},
        "required": ["color", "level", "kind"], "additionalProperties": false})"},
    {"anyof", PathShape::kJson, R"({"type": "array", "maxItems": 4, "items": {"anyOf": [
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": false},
        {"type": "object", "properties": {"image": {"type": "string", "format": "uuid"}}, "required": ["image"],
         "additionalProperties": false}, {"type": "number"}, {"type": "null"}]}})"},
    {"open", PathShape::kJson, R"({"type": "object", "properties": {"meta": {"type": "object"}, "labels": {"type": "object",
        "additionalProperties": {"type": "string", "maxLength": 30}}}, "required": ["meta", "labels"]})"},
    {"tool-call", PathShape::kTool, R"([{"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14}}, "required": ["city"]}},
        {"name": "search", "parameters": {"type": "object", "properties": {"query": {"type": "string", "maxLength": 80},
        "lang": {"type": "string", "pattern": "^[a-z]{2}(-[A-Z]{2})?$"}}, "required": ["query"]}}])"},
    {"regex", PathShape::kRegex, R"([A-Z][a-z]{2,12}( [A-Z][a-z]{2,12}){0,3}, [0-9]{5}(-[0-9]{4})?)"},
    {"choice", PathShape::kChoice, R"(["positive", "negative", "neutral", "mixed feelings", "not applicable"])"},
    {"gbnf", PathShape::kGbnf, "root ::= item (\", \" item){0,5}\nitem ::= [a-z]{1,8} \"=\" [0-9]{1,4}"},
};

Result<grammar::Grammar> compile(const Schema& s) {
  if (s.shape == PathShape::kRegex) return grammar::compile_regex_output(s.text);
  if (s.shape == PathShape::kGbnf) return grammar::compile_gbnf_output(s.text);
  const auto doc = OrderedJson::parse(s.text);
  if (s.shape == PathShape::kChoice) return grammar::compile_choice_output(doc.get<std::vector<std::string>>());
  if (s.shape == PathShape::kJson) return grammar::compile_json_schema(doc);
  std::vector<grammar::ToolSpec> tools;
  for (const auto& t : doc) tools.push_back({t["name"].get<std::string>(), t["parameters"]});
  return grammar::compile_tool_call(tools);
}

struct Costs {
  std::vector<double> us;  // per token
  std::vector<double> mask_us, row_us, advance_us;  // its parts
  int64_t misses = 0, miss_tokens = 0, paths_done = 0, paths = 0;
  double prepare_ms = 0;  // TokenMasker::prepare at the schema's start (thread CPU)
  int64_t prepared = 0;   // the masks it added
  int64_t prepare_steps = 0;  // its (state, trie node) steps (TokenMasker::kPrepareBudget bounds them)
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

void print_costs(const char* name, const Costs& c) {
  std::printf("%-10s %6lld/%-4lld %7zu %10.1f %10.1f %10.1f %9lld %9lld %6.1f %6.1f %6.1f %8.1f %6lld %9.2f\n", name,
              static_cast<long long>(c.paths_done), static_cast<long long>(c.paths), c.us.size(), percentile(c.us, 0.5),
              percentile(c.us, 0.99), c.us.empty() ? 0.0 : *std::max_element(c.us.begin(), c.us.end()),
              static_cast<long long>(c.miss_tokens), static_cast<long long>(c.misses), percentile(c.mask_us, 0.5),
              percentile(c.row_us, 0.5), percentile(c.advance_us, 0.5), c.prepare_ms, static_cast<long long>(c.prepared),
              static_cast<double>(c.prepare_steps) / 1e6);
}

// The allowed ids in mask; the pick prefers (one time in kCloseOdds) those holding a closing byte.
int32_t pick_token(const Tokenizer& tok, const std::vector<uint64_t>& mask, std::mt19937_64& rng,
                   std::vector<int32_t>& allowed, std::vector<int32_t>& closing) {
  allowed.clear();
  closing.clear();
  for (size_t w = 0; w < mask.size(); ++w)
    for (uint64_t bits = mask[w]; bits != 0; bits &= bits - 1) {
      const auto id = static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits)));
      allowed.push_back(id);
      if (tok.token_bytes(id).find_first_of("\"}]<") != std::string::npos) closing.push_back(id);
    }
  if (allowed.empty()) return -1;
  const std::vector<int32_t>& from = !closing.empty() && rng() % kCloseOdds == 0 ? closing : allowed;
  return from[rng() % from.size()];
}

// One sampled path through m's grammar; its per-token costs go to c.
void run_path(const Tokenizer& tok, grammar::TokenMasker& masker, const grammar::JsonMatcher& m, uint64_t seed,
              const std::vector<float>& logits, Costs& c) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> mask(static_cast<size_t>((tok.n_vocab() + 63) / 64));
  std::vector<float> row = logits;
  std::vector<int32_t> allowed, closing;
  auto st = std::make_unique<MatchState>(), out = std::make_unique<MatchState>(), tmp = std::make_unique<MatchState>();
  m.start(*st);
  ++c.paths;
  for (int step = 0; step < kMaxPathTokens; ++step) {
    const int64_t misses = masker.cache().misses();
    const double t0 = thread_us();
    masker.fill(m, *st, mask.data());
    const double t_mask = thread_us();
    grammar::apply_token_mask(mask.data(), tok.n_vocab(), row.data(), static_cast<int64_t>(row.size()));
    const double t_row = thread_us();
    const bool accepting = m.accepting(*st);
    const double t1 = thread_us();
    c.mask_us.push_back(t_mask - t0);
    c.row_us.push_back(t_row - t_mask);
    c.misses += masker.cache().misses() - misses;
    c.miss_tokens += masker.cache().misses() > misses;
    std::memcpy(row.data(), logits.data(), sizeof(float) * row.size());
    const int32_t id = accepting ? -1 : pick_token(tok, mask, rng, allowed, closing);
    if (id < 0) {
      c.us.push_back(t1 - t0);
      c.paths_done += accepting;
      return;
    }
    const std::string& bytes = tok.token_bytes(id);
    const double t2 = thread_us();
    m.feed(*st, bytes.data(), static_cast<int64_t>(bytes.size()), *out, *tmp);
    std::swap(st, out);
    const double t3 = thread_us();
    c.advance_us.push_back(t3 - t2);
    c.us.push_back(t1 - t0 + t3 - t2);
  }
}

// The schemas' paths with masker, one table.
Costs run_schemas(const Tokenizer& tok, grammar::TokenMasker& masker, int paths) {
  std::vector<float> logits(static_cast<size_t>(tok.n_vocab()));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-8.f, 8.f);
  for (float& x : logits) x = uniform(rng);
  std::printf("%-10s %11s %7s %10s %10s %10s %9s %9s %6s %6s %6s %8s %6s %9s\n", "schema", "done/paths", "tokens", "median", "p99",
              "worst", "miss tok", "misses", "mask", "row", "adv", "prep ms", "masks", "M steps");
  Costs all, warm;  // warm: each schema's paths after its first quarter
  for (size_t s = 0; s < std::size(kPathSchemas); ++s) {
    Result<grammar::Grammar> g = compile(kPathSchemas[s]);
    if (!g.ok()) {
      std::printf("%-10s %s\n", kPathSchemas[s].name, g.message().c_str());
      continue;
    }
    const grammar::JsonMatcher m(*g);
    Costs c;
    const double p0 = thread_us();
    c.prepared = masker.prepare(*g);
    c.prepare_ms = (thread_us() - p0) / 1e3;
    c.prepare_steps = masker.prepare_steps();
    for (int p = 0; p < paths; ++p) {
      const size_t before = c.us.size();
      run_path(tok, masker, m, 1000 * s + static_cast<uint64_t>(p), logits, c);
      if (p >= paths / 4) warm.us.insert(warm.us.end(), c.us.begin() + static_cast<std::ptrdiff_t>(before), c.us.end());
    }
    print_costs(kPathSchemas[s].name, c);
    all.us.insert(all.us.end(), c.us.begin(), c.us.end());
    all.mask_us.insert(all.mask_us.end(), c.mask_us.begin(), c.mask_us.end());
    all.row_us.insert(all.row_us.end(), c.row_us.begin(), c.row_us.end());
    all.advance_us.insert(all.advance_us.end(), c.advance_us.begin(), c.advance_us.end());
    all.misses += c.misses;
    all.miss_tokens += c.miss_tokens;
    all.paths += c.paths;
    all.paths_done += c.paths_done;
    all.prepare_ms += c.prepare_ms;
    all.prepared += c.prepared;
    all.prepare_steps += c.prepare_steps;
  }
  print_costs("overall", all);
  std::printf("%-10s %11s %7zu %10.1f %10.1f %10.1f  (each schema's paths after its first quarter)\n", "warm", "",
              warm.us.size(), percentile(warm.us, 0.5), percentile(warm.us, 0.99),
              warm.us.empty() ? 0.0 : *std::max_element(warm.us.begin(), warm.us.end()));
  return all;
}

}  // namespace grammar_paths

Status run_grammar_paths(const Tokenizer& tok, const grammar::MaskVocab& vocab, int paths) {
  std::printf("\ngrammar paths: per-token cost (mask + row of %d logits + EOS test + advance), thread CPU us, "
              "seeded sampled paths per schema\n", tok.n_vocab());
  grammar::TokenMasker masker(vocab);
  std::printf("mask cache of %lld masks at most, shared by the schemas; %d paths per schema; prep ms: TokenMasker::prepare's\n"
              "masks of the schema's small automata before its first token (thread CPU, not in the per-token figures):\n",
              static_cast<long long>(masker.cache().capacity()), paths);
  grammar_paths::run_schemas(tok, masker, paths);
  std::printf("mask cache: %lld masks, %.1f MiB, %lld hits, %lld misses\n", static_cast<long long>(masker.cache().size()),
              static_cast<double>(masker.cache().bytes()) / (1 << 20), static_cast<long long>(masker.cache().hits()),
              static_cast<long long>(masker.cache().misses()));
  return Status();
}

}  // namespace dsv4::bench
