// Whole-output text constraints in the engine (grammar/text_constraint.h: vLLM's regex, choice
// and grammar): on the random tiny model, at temperature 0.9 over several seeds, every output
// that ends with EOS is in the language, checked by an independent oracle (std::regex for the
// regex and the GBNF grammar's equivalent pattern, set membership for the choices); outputs cut
// by max_tokens are prefixes the matcher takes; compile errors name the request field.
#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "grammar/json_matcher.h"
#include "runtime/engine.h"
#include "runtime/grammar_cache.h"
#include "support/tiny_model.h"
#include "text/tiny_tokenizer.h"
#include "text/tokenizer.h"

namespace dsv4 {
namespace text_constraint_engine_test {  // named: the runtime tests build as one unity translation unit

const Tokenizer& tokenizer() {
  static const Tokenizer tok = [] {
    auto files = make_tiny_tokenizer();
    auto t = Tokenizer::from_json(files->tokenizer_json, "tiny");
    return std::move(*t);
  }();
  return tok;
}

Limits limits() {
  Limits l;
  l.max_batch = l.max_seqs = 4;
  l.max_rows = 64;
  l.max_chunk = 16;
  l.max_decode_rows = 4;
  l.max_context = 512;
  l.n_threads = 2;
  return l;
}

struct Output {
  std::string text;
  FinishReason reason = FinishReason::kLength;
};

std::vector<Output> generate(const std::vector<GenerationRequest>& reqs) {
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8, 2);
  EngineOptions opt;
  opt.tokenizer = &tokenizer();
  auto e = Engine::create(m.cfg, *m.w, limits(), opt);
  EXPECT_TRUE(e.ok()) << e.message();
  std::vector<Output> out(reqs.size());
  if (!e.ok()) return out;
  for (const GenerationRequest& g : reqs) {
    GenerationRequest prepared = g;
    Status st = (*e)->prepare(prepared);
    EXPECT_TRUE(st.ok()) << st.message();
    auto id = (*e)->add_request(prepared);
    EXPECT_TRUE(id.ok()) << id.message();
  }
  const auto eos = static_cast<int32_t>(m.cfg.eos_token_id);
  while (!(*e)->idle()) {
    auto rep = (*e)->step();
    EXPECT_TRUE(rep.ok()) << rep.message();
    if (!rep.ok()) break;
    for (RequestUpdate& u : (*e)->updates()) {
      Output& o = out[static_cast<size_t>(u.id)];
      for (int32_t t : u.tokens)
        if (t != eos) o.text += tokenizer().token_bytes(t);
      if (u.finished) o.reason = u.reason;
    }
  }
  return out;
}

std::vector<GenerationRequest> requests(TextConstraint kind, const std::string& text, int count) {
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < count; ++i) {
    GenerationRequest g;
    g.prompt = {static_cast<int32_t>(5 + 7 * i), static_cast<int32_t>(11 + 3 * i), 40};
    g.max_tokens = 40;
    g.sampling = {0.9f, 1.0f, static_cast<uint64_t>(1000 + i)};
    g.constraint.text_kind = kind;
    g.constraint.text = text;
    g.constraint.field = "structured_outputs";
    reqs.push_back(g);
  }
  return reqs;
}

// EOS-ended outputs satisfy `in_language`; cut ones are prefixes the matcher takes. Returns how
// many ended with EOS.
template <class Oracle>
int check(TextConstraint kind, const std::string& text, Oracle in_language) {
  const auto reqs = requests(kind, text, 8);
  const std::vector<Output> outs = generate(reqs);
  int stopped = 0;
  for (const Output& o : outs) {
    if (o.reason == FinishReason::kStop) {
      ++stopped;
      EXPECT_TRUE(in_language(o.text)) << "'" << o.text << "' for " << text;
    } else {
      EXPECT_EQ(o.reason, FinishReason::kLength) << o.text;
      Result<grammar::Grammar> g = compile_constraint(reqs[0].constraint);
      EXPECT_TRUE(g.ok()) << g.message();
      if (!g.ok()) continue;
      grammar::JsonMatcher m(*g);
      auto st = std::make_unique<grammar::MatchState>(), out = std::make_unique<grammar::MatchState>(),
           tmp = std::make_unique<grammar::MatchState>();
      m.start(*st);
      EXPECT_TRUE(m.feed(*st, o.text.data(), static_cast<int64_t>(o.text.size()), *out, *tmp)) << o.text;
    }
  }
  static const char* const kKinds[] = {"none", "regex", "choice", "grammar"};
  std::printf("%s: %d of %zu ended with EOS in the language\n", kKinds[static_cast<int>(kind)], stopped, outs.size());
  return stopped;
}

TEST(TextConstraintEngine, RegexOutputsMatchWhole) {
  const std::string pattern = "[0-9]{3}-[a-z]{2,4}(!|\\?)";
  const std::regex oracle(pattern, std::regex::ECMAScript);
  EXPECT_GT(check(TextConstraint::kRegex, pattern, [&](const std::string& s) { return std::regex_match(s, oracle); }), 4);
}

// An unbounded language: outputs may run to max_tokens (then prefixes the matcher takes).
TEST(TextConstraintEngine, UnboundedRegexStopsOrIsAPrefix) {
  const std::string pattern = "([a-z]+ )*[a-z]+";
  const std::regex oracle(pattern, std::regex::ECMAScript);
  check(TextConstraint::kRegex, pattern, [&](const std::string& s) { return std::regex_match(s, oracle); });
}

TEST(TextConstraintEngine, ChoiceOutputsAreOneOfTheStrings) {
  const std::set<std::string> choices = {"red", "green", "greenish blue", "yellow"};
  const int stopped = check(TextConstraint::kChoice, R"(["red", "green", "greenish blue", "yellow"])",
                            [&](const std::string& s) { return choices.count(s) > 0; });
  EXPECT_EQ(stopped, 8);  // every choice is short: all end
}

TEST(TextConstraintEngine, GbnfOutputsParse) {
  const std::string gbnf = R"(# a tiny key=value list
root ::= pair ("," pair){0,3} "."
pair ::= key "=" value
key ::= [a-z] [a-z0-9_]{0,5}
value ::= [0-9]{1,3} | "\"" [A-Za-z ]{0,6} "\""
)";
  const std::regex oracle(R"(([a-z][a-z0-9_]{0,5}=([0-9]{1,3}|"[A-Za-z ]{0,6}"))(,([a-z][a-z0-9_]{0,5}=([0-9]{1,3}|"[A-Za-z ]{0,6}"))){0,3}\.)");
  EXPECT_GT(check(TextConstraint::kGbnf, gbnf, [&](const std::string& s) { return std::regex_match(s, oracle); }), 4);
}

TEST(TextConstraintEngine, CompileErrorsNameTheField) {
  GenerationRequest g;
  g.prompt = {5};
  g.constraint.text_kind = TextConstraint::kGbnf;
  g.constraint.text = "root ::= x\nx ::= \"(\" x \")\" | \"\"\n";
  g.constraint.field = "structured_outputs.grammar";
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8, 2);
  EngineOptions opt;
  opt.tokenizer = &tokenizer();
  auto e = Engine::create(m.cfg, *m.w, limits(), opt);
  ASSERT_TRUE(e.ok());
  Status st = (*e)->validate(g);
  EXPECT_NE(st.message().find("structured_outputs.grammar: line 2 column 11: rule 'x' is recursive"), std::string::npos)
      << st.message();
  g.constraint.text_kind = TextConstraint::kChoice;
  g.constraint.text = R"(["a", 1])";
  g.constraint.field = "guided_choice";
  EXPECT_NE((*e)->validate(g).message().find("guided_choice[1]: expected a string"), std::string::npos);
  g.constraint.text = R"({"a": 1})";
  EXPECT_NE((*e)->validate(g).message().find("guided_choice: expected an array of strings"), std::string::npos);
  g.constraint.text_kind = TextConstraint::kRegex;
  g.constraint.text = "(?<=a)b";
  g.constraint.field = "guided_regex";
  EXPECT_NE((*e)->validate(g).message().find("guided_regex: pattern:"), std::string::npos);
}

}  // namespace text_constraint_engine_test
}  // namespace dsv4
