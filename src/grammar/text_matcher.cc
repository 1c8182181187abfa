// JsonMatcher's whole-output text (Kind::kText, text_constraint.h): raw UTF-8 stepped through
// the node's automaton one code point at a time (json_scalar.h's pattern_raw_byte takes a byte
// only where some code point it may begin keeps the automaton live: no dead end); the text may
// end wherever the automaton accepts.
#include "grammar/json_matcher.h"
#include "grammar/json_scalar.h"

namespace dsv4::grammar {

bool JsonMatcher::text_byte(Frame& f, const Node& n, uint8_t c) const {
  const StringPattern p{g_.regexes[n.regex].get(), 0, -1};
  if (f.phase == kSOpen) {
    f.phase = kSBody;
    f.j = p.re->start();
  }
  return pattern_raw_byte(f, c, p);
}

bool JsonMatcher::text_accepts_empty() const {
  const Node& root = g_.nodes[g_.root];
  if (root.kind != Kind::kText) return false;
  const Regex& re = *g_.regexes[root.regex];
  return re.accepting(re.start());
}

}  // namespace dsv4::grammar
