// Structured output in the engine (grammar/, issue 29): on a random tiny model that would
// otherwise emit garbage, every request that ends with EOS spells a JSON value its schema
// accepts (an independent validator), one cut by max_tokens is a prefix the matcher still
// takes; each request's tokens equal its tokens alone, with MTP and with DSpark (exact and
// rejection); the constraint starts after start_after; bad schemas are refused naming the field.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/json_matcher.h"
#include "runtime/engine.h"
#include "runtime/grammar_cache.h"
#include "runtime/sampler.h"
#include "support/json_schema_check.h"
#include "support/tiny_model.h"
#include "text/tiny_tokenizer.h"
#include "text/tokenizer.h"

namespace dsv4 {
namespace {

const Tokenizer& tiny_tokenizer() {
  static const Tokenizer tok = [] {
    auto files = make_tiny_tokenizer();
    auto t = Tokenizer::from_json(files->tokenizer_json, "tiny");
    return std::move(*t);
  }();
  return tok;
}

Limits structured_limits(int batch) {
  Limits l;
  l.max_batch = l.max_seqs = batch;
  l.max_rows = 64;
  l.max_chunk = 16;
  l.max_decode_rows = 4;
  l.max_context = 512;
  l.n_threads = 2;
  return l;
}

struct Outputs {
  std::vector<std::vector<int32_t>> tokens;  // by request id
  std::vector<FinishReason> reasons;
};

Outputs run(const test::TinyModel& m, EngineOptions opt, int batch, const std::vector<GenerationRequest>& reqs) {
  opt.tokenizer = &tiny_tokenizer();
  auto e = Engine::create(m.cfg, *m.w, structured_limits(batch), opt);
  EXPECT_TRUE(e.ok()) << e.message();
  Outputs o;
  if (!e.ok()) return o;
  for (const GenerationRequest& g : reqs) {
    auto id = (*e)->add_request(g);
    EXPECT_TRUE(id.ok()) << id.message();
  }
  o.tokens.resize(reqs.size());
  o.reasons.resize(reqs.size());
  while (!(*e)->idle()) {
    auto rep = (*e)->step();
    EXPECT_TRUE(rep.ok()) << rep.message();
    if (!rep.ok()) break;
    for (RequestUpdate& u : (*e)->updates()) {
      auto& out = o.tokens[static_cast<size_t>(u.id)];
      out.insert(out.end(), u.tokens.begin(), u.tokens.end());
      if (u.finished) o.reasons[static_cast<size_t>(u.id)] = u.reason;
    }
  }
  return o;
}

std::string bytes_of(const std::vector<int32_t>& ids, int32_t eos) {
  std::string s;
  for (int32_t id : ids)
    if (id != eos) s += tiny_tokenizer().token_bytes(id);
  return s;
}

std::vector<GenerationRequest> schema_requests(uint64_t seed, int count, float temperature) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < count; ++i) {
    GenerationRequest g;
    g.prompt = {static_cast<int32_t>(3 + rng() % 250), static_cast<int32_t>(3 + rng() % 250), 40};
    g.max_tokens = 48;
    g.sampling = {temperature, 1.0f, seed * 100 + static_cast<uint64_t>(i)};
    g.constraint.json_schema = test::random_schema(rng).dump();
    reqs.push_back(g);
  }
  return reqs;
}

// Every output: EOS-ended ones validate; max_tokens-cut ones are prefixes the matcher takes.
void check_outputs(const std::vector<GenerationRequest>& reqs, const Outputs& o, int32_t eos, int* stopped, int* cut) {
  for (size_t i = 0; i < reqs.size(); ++i) {
    const std::string text = bytes_of(o.tokens[i], eos);
    const auto schema = test::Json::parse(reqs[i].constraint.json_schema);
    if (o.reasons[i] == FinishReason::kStop) {
      ++*stopped;
      const auto v = test::Json::parse(text, nullptr, false);
      ASSERT_FALSE(v.is_discarded()) << text << " for " << schema.dump();
      EXPECT_TRUE(test::schema_valid(v, schema)) << text << " for " << schema.dump();
    } else {
      ++*cut;
      auto g = grammar::compile_json_schema(schema);
      ASSERT_TRUE(g.ok());
      grammar::JsonMatcher m(*g);
      auto st = std::make_unique<grammar::MatchState>(), out = std::make_unique<grammar::MatchState>(),
           tmp = std::make_unique<grammar::MatchState>();
      m.start(*st);
      EXPECT_TRUE(m.feed(*st, text.data(), static_cast<int64_t>(text.size()), *out, *tmp))
          << "not a prefix: " << text << " for " << schema.dump();
    }
  }
}

TEST(StructuredOutput, OutputsValidateAndDoNotDependOnTheBatch) {
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8, 2);
  const int32_t eos = static_cast<int32_t>(m.cfg.eos_token_id);
  int stopped = 0, cut = 0;
  for (float temp : {0.0f, 0.9f}) {
    const auto reqs = schema_requests(temp == 0.0f ? 1 : 2, 24, temp);
    EngineOptions mtp;
    mtp.mtp = true;
    const Outputs together = run(m, mtp, 4, reqs);
    check_outputs(reqs, together, eos, &stopped, &cut);
    for (size_t i = 0; i < reqs.size(); i += 3) {
      const Outputs alone = run(m, EngineOptions{}, 1, {reqs[i]});
      ASSERT_EQ(alone.tokens[0], together.tokens[i]) << "request " << i << " alone";
    }
  }
  std::printf("structured output on tiny: %d ended with EOS and validate, %d cut by max_tokens (valid prefixes)\n",
              stopped, cut);
  EXPECT_GT(stopped, 10);
}

TEST(StructuredOutput, DsparkStaysExact) {
  const test::TinyModel& ds = test::tiny_model("tiny-ds", TinyQuant::kFp8, 2);
  const int32_t eos = static_cast<int32_t>(ds.cfg.eos_token_id);
  int stopped = 0, cut = 0;
  for (float temp : {0.0f, 0.9f}) {
    const auto reqs = schema_requests(7, 8, temp);
    const Outputs plain = run(ds, EngineOptions{}, 3, reqs);
    for (bool rejection : {false, true}) {
      if (rejection && temp == 0.0f) continue;
      EngineOptions o;
      o.dspark_gamma = 3;
      o.dspark_rejection = rejection;
      const Outputs spec = run(ds, o, 3, reqs);
      check_outputs(reqs, spec, eos, &stopped, &cut);
      if (!rejection) {
        EXPECT_EQ(spec.tokens, plain.tokens) << "DSpark exact match = plain decoding";
      }
      for (size_t i = 0; i < reqs.size(); i += 2) {
        const Outputs alone = run(ds, o, 1, {reqs[i]});
        ASSERT_EQ(alone.tokens[0], spec.tokens[i]) << "rejection " << rejection << " request " << i;
      }
    }
  }
  EXPECT_GT(stopped, 0);
}

// The constraint starts after start_after: the tokens before it are free; the value follows.
TEST(StructuredOutput, StartsAfterTheMarker) {
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8, 2);
  GenerationRequest g;
  g.prompt = {5, 17, 42};
  g.max_tokens = 40;
  g.constraint.json_schema = R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})";
  const Outputs free_run = run(m, EngineOptions{}, 1, {[&] {
                                 GenerationRequest f = g;
                                 f.constraint = {};
                                 return f;
                               }()});
  g.constraint.start_after = free_run.tokens[0][2];  // the third free token starts the value
  const Outputs o = run(m, EngineOptions{}, 1, {g});
  ASSERT_GE(o.tokens[0].size(), 3u);
  EXPECT_TRUE(std::equal(free_run.tokens[0].begin(), free_run.tokens[0].begin() + 3, o.tokens[0].begin()));
  const std::vector<int32_t> rest(o.tokens[0].begin() + 3, o.tokens[0].end());
  const std::string text = bytes_of(rest, static_cast<int32_t>(m.cfg.eos_token_id));
  ASSERT_EQ(o.reasons[0], FinishReason::kStop) << text;
  const auto v = test::Json::parse(text, nullptr, false);
  ASSERT_TRUE(v.is_object() && v.contains("a") && v["a"].is_number_integer()) << text;
}

// A row whose mask allows nothing ends the request with an error naming the grammar, never a
// sampled token (it was id 0, with finish reason stop). Here the vocabulary cannot spell the
// value: '~' is made a special token, which no mask allows.
TEST(StructuredOutput, EmptyMaskEndsWithAnErrorNamingTheGrammar) {
  static const Tokenizer no_tilde = [] {
    auto files = make_tiny_tokenizer();
    auto j = nlohmann::json::parse(files->tokenizer_json);
    const int64_t id = j["model"]["vocab"]["~"];
    j["added_tokens"].push_back({{"id", id}, {"content", "~"}, {"single_word", false}, {"lstrip", false},
                                 {"rstrip", false}, {"normalized", false}, {"special", true}});
    auto t = Tokenizer::from_json(j.dump(), "tiny without ~");
    return std::move(*t);
  }();
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8, 2);
  for (const bool mtp : {false, true}) {
    EngineOptions opt;
    opt.tokenizer = &no_tilde;
    opt.mtp = mtp;
    auto e = Engine::create(m.cfg, *m.w, structured_limits(1), opt);
    ASSERT_TRUE(e.ok()) << e.message();
    GenerationRequest g;
    g.prompt = {5, 6, 7};
    g.max_tokens = 8;
    g.constraint.json_schema = R"({"const": "~"})";
    ASSERT_TRUE((*e)->add_request(g).ok());
    std::vector<int32_t> tokens;
    RequestUpdate last;
    while (!(*e)->idle()) {
      auto rep = (*e)->step();
      ASSERT_TRUE(rep.ok()) << rep.message();
      for (RequestUpdate& u : (*e)->updates()) {
        tokens.insert(tokens.end(), u.tokens.begin(), u.tokens.end());
        if (u.finished) last = u;
      }
    }
    EXPECT_EQ(last.reason, FinishReason::kError);
    EXPECT_NE(last.error.find("response_format"), std::string::npos) << last.error;
    EXPECT_NE(last.error.find("no next token"), std::string::npos) << last.error;
    std::string text;
    for (int32_t id : tokens) text += no_tilde.token_bytes(id);
    EXPECT_EQ(text, "\"") << "only what the grammar allowed was committed (mtp " << mtp << ")";
  }
}

TEST(StructuredOutput, BadSchemasAreRefusedNamingTheField) {
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8, 2);
  EngineOptions opt;
  opt.tokenizer = &tiny_tokenizer();
  auto e = Engine::create(m.cfg, *m.w, structured_limits(1), opt);
  ASSERT_TRUE(e.ok());
  GenerationRequest g;
  g.prompt = {5};
  for (const auto& [schema, want] : std::vector<std::pair<std::string, std::string>>{
           {"{not json", "not JSON"},
           {R"({"type": "string", "pattern": "(?=x)y"})", "'pattern'"},
           {R"({"enum": [1e400]})", "out of a double's range"}}) {
    g.constraint.json_schema = schema;
    Status st = (*e)->validate(g);
    EXPECT_NE(st.message().find("response_format"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(want), std::string::npos) << st.message();
  }
  g.constraint.json_schema = R"({"type": "object"})";
  g.stop_at_eos = false;
  EXPECT_NE((*e)->validate(g).message().find("EOS"), std::string::npos);
  auto bare = Engine::create(m.cfg, *m.w, structured_limits(1), EngineOptions{});
  g.stop_at_eos = true;
  EXPECT_NE((*bare)->validate(g).message().find("tokenizer"), std::string::npos);
}

// strict false relaxes what cannot be enforced (and names it); the whitespace flag reaches the
// grammar's layout; both travel with the request (rank_wire).
TEST(StructuredOutput, StrictAndLayoutReachTheCompiler) {
  OutputConstraint c;
  c.json_schema = R"({"type": "object", "properties": {"a": {"not": {}}}})";
  EXPECT_NE(compile_constraint(c).status().message().find("'not'"), std::string::npos);
  c.strict = false;
  Result<grammar::Grammar> g = compile_constraint(c);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(g->relaxed, std::vector<std::string>{"/properties/a: not"});
  EXPECT_FALSE(g->layout.whitespace_flexible);
  c.whitespace_flexible = true;
  EXPECT_TRUE(compile_constraint(c)->layout.whitespace_flexible);
  c.json_schema.clear();
  c.tool_calls = R"([{"name": "f", "parameters": {}}])";
  EXPECT_TRUE(compile_constraint(c)->layout.whitespace_flexible);
}

}  // namespace
}  // namespace dsv4
