#include "grammar_cases.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>

#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "grammar_paths.h"
#include "text/tokenizer.h"

namespace dsv4::bench {
namespace {

using Clock = std::chrono::steady_clock;
using grammar::MatchState;

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

// Schemas of growing size: a flat object, a nested record with arrays and enums, an
// anyOf-heavy one with $ref recursion, and string/number keywords (a format, a pattern that
// never loops on text, one that does after its match, numeric bounds).
const char* kSchemas[][2] = {
    {"flat", R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
        "ok": {"type": "boolean"}}, "required": ["name", "age"], "additionalProperties": false})"},
    {"nested", R"({"type": "object", "properties": {"id": {"type": "string", "maxLength": 32},
        "items": {"type": "array", "maxItems": 8, "items": {"type": "object", "properties": {
          "sku": {"type": "string"}, "qty": {"type": "integer"}, "unit": {"enum": ["kg", "g", "l", "piece"]},
          "price": {"type": "number"}}, "required": ["sku", "qty"]}},
        "notes": {"type": ["string", "null"]}}, "required": ["id", "items"]})"},
    {"recursive", R"({"$defs": {"node": {"type": "object", "properties": {"value": {"anyOf": [{"type": "string"},
        {"type": "number"}, {"type": "boolean"}, {"type": "null"}]}, "children": {"type": "array",
        "items": {"$ref": "#/$defs/node"}}}, "required": ["value"]}}, "$ref": "#/$defs/node"})"},
    {"scalars", R"({"type": "object", "properties": {"day": {"type": "string", "format": "date"},
        "code": {"type": "string", "pattern": "^[a-z ]+$", "maxLength": 64}, "tag": {"type": "string",
        "pattern": "x"}, "score": {"type": "number", "minimum": 0, "maximum": 100, "multipleOf": 0.5}},
        "required": ["day", "code", "tag", "score"], "additionalProperties": false})"},
};

// Extrapolated Flash decode step at B = 1 from this run's layer and head cases (0: not run).
double flash_step_ms(const std::vector<CaseResult>& cases) {
  double csa = 0, hca = 0, head = 0;
  for (const CaseResult& c : cases) {
    if (c.B != 1 || c.S != 1 || c.phase != "decode" || c.threads < 2) continue;
    if (c.name == "layer-csa") csa = c.step_ms;
    if (c.name == "layer-hca") hca = c.step_ms;
    if (c.name == "head") head = c.step_ms;
  }
  return csa > 0 && hca > 0 && head > 0 ? 21 * csa + 22 * hca + head : 0;
}

}  // namespace

Status run_grammar_cases(const std::string& tokenizer_path, int repeats, const std::vector<CaseResult>& layer_cases) {
  Result<Tokenizer> tok = Tokenizer::load(tokenizer_path);
  if (!tok.ok()) return tok.status().with_context("grammar: --tokenizer");
  const Clock::time_point t0 = Clock::now();
  const grammar::MaskVocab vocab(
      tok->n_vocab(), [&](int32_t id) { return std::string_view(tok->token_bytes(id)); },
      [&](int32_t id) { return tok->is_special(id); });
  const double prepare_ms = us_since(t0) / 1e3;
  std::printf("\ngrammar: structured output on %s (%d ids; trie %zu nodes, quote trie %zu nodes; prepared once in %.0f ms)\n",
              tokenizer_path.c_str(), tok->n_vocab(), vocab.all.nodes().size(), vocab.quoted.nodes().size(), prepare_ms);
  const double step = flash_step_ms(layer_cases);
  std::printf("%-10s %-34s %10s %10s %12s %10s\n", "schema", "state (after)", "compile us", "allowed", "mask us",
              step > 0 ? "% of step" : "");
  grammar::TokenMasker masker(vocab);
  std::vector<uint64_t> mask(static_cast<size_t>((tok->n_vocab() + 63) / 64));
  auto st = std::make_unique<MatchState>(), out = std::make_unique<MatchState>(), tmp = std::make_unique<MatchState>();
  struct Prefix {
    int schema;
    const char* text;
  };
  const Prefix prefixes[] = {
      {0, ""}, {0, "{"}, {0, "{\"name\": \"Ada Lovel"}, {0, "{\"name\": \"Ada\", \"age\": 3"}, {0, "{\"name\": \"Ada\", \"age\": 36, "},
      {1, "{\"id\": \"A-1\", \"items\": [{\"sku\": \"x\", \"qty\": 2, \"unit\": \"k"},
      {1, "{\"id\": \"A-1\", \"items\": [{\"sku\": \"x\", \"qty\": 2}, "},
      {2, "{\"value\": "}, {2, "{\"value\": 1, \"children\": [{\"value\": \"dee"},
      {3, "{\"day\": \"2024-0"}, {3, "{\"day\": \"2024-01-31\", \"code\": \"ab c"},
      {3, "{\"day\": \"2024-01-31\", \"code\": \"ab\", \"tag\": \"ax y"},
      {3, "{\"day\": \"2024-01-31\", \"code\": \"ab\", \"tag\": \"x\", \"score\": 4"},
  };
  for (int s = 0; s < static_cast<int>(std::size(kSchemas)); ++s) {
    const auto schema = dsv4::OrderedJson::parse(kSchemas[s][1]);
    double compile_us = 1e30;
    Result<grammar::Grammar> g = grammar::compile_json_schema(schema);
    for (int r = 0; r < repeats; ++r) {
      const Clock::time_point c0 = Clock::now();
      g = grammar::compile_json_schema(schema);
      compile_us = std::min(compile_us, us_since(c0));
    }
    if (!g.ok()) return g.status();
    const grammar::JsonMatcher m(*g);
    for (const Prefix& p : prefixes) {
      if (p.schema != s) continue;
      m.start(*st);
      if (!m.feed(*st, p.text, static_cast<int64_t>(std::strlen(p.text)), *out, *tmp))
        return Status::errorf("grammar bench: '{}' is not a prefix of schema {}", p.text, kSchemas[s][0]);
      double best = 1e30;
      int64_t allowed = 0;
      for (int r = 0; r < repeats; ++r) {
        const Clock::time_point m0 = Clock::now();
        allowed = masker.fill(m, *out, mask.data());
        best = std::min(best, us_since(m0));
      }
      const std::string state = std::string("'") + p.text + "'";
      std::printf("%-10s %-34s %10.0f %10lld %12.1f %10s\n", kSchemas[s][0],
                  state.size() > 34 ? ("..." + state.substr(state.size() - 31)).c_str() : state.c_str(), compile_us,
                  static_cast<long long>(allowed), best, step > 0 ? fmt::format("{:.3f}", 100 * best / 1e3 / step).c_str() : "");
    }
  }
  if (step > 0) std::printf("Flash decode step at B = 1, EXTRAPOLATED (21 CSA + 22 HCA layers + head): %.1f ms\n", step);
  else std::printf("(run with --cases layer-csa,layer-hca,head,grammar for the share of a Flash decode step)\n");
  return run_grammar_paths(*tok, vocab, std::max(16, 4 * repeats));
}

}  // namespace dsv4::bench
