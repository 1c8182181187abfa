#include "grammar/text_constraint.h"

#include <map>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "grammar/gbnf.h"

namespace dsv4::grammar {

// Named, not anonymous: the grammar sources build as one unity translation unit.
namespace text_constraint {

int32_t add_node(RegexSyntax& syntax, RegexNode node) {
  syntax.nodes.push_back(std::move(node));
  return static_cast<int32_t>(syntax.nodes.size()) - 1;
}

// A node of one code point; equal sets shared.
int32_t code_point_node(RegexSyntax& syntax, std::map<uint32_t, int32_t>& set_of, uint32_t cp) {
  auto [it, fresh] = set_of.try_emplace(cp, static_cast<int32_t>(syntax.sets.size()));
  if (fresh) syntax.sets.push_back({{cp, cp}});
  RegexNode n;
  n.kind = RegexNodeKind::kSet;
  n.set = it->second;
  return add_node(syntax, std::move(n));
}

// The literal text as a concatenation of its code points (the empty text: kEmpty).
int32_t literal_node(RegexSyntax& syntax, std::map<uint32_t, int32_t>& set_of, const std::u32string& text) {
  RegexNode n;
  n.kind = text.empty() ? RegexNodeKind::kEmpty : RegexNodeKind::kConcat;
  for (uint32_t cp : text) n.kids.push_back(code_point_node(syntax, set_of, cp));
  if (n.kids.size() == 1) return n.kids[0];
  return add_node(syntax, std::move(n));
}

}  // namespace text_constraint

void anchor_whole(RegexSyntax& syntax) {
  RegexNode start, end, whole;
  start.kind = RegexNodeKind::kLineStart;
  end.kind = RegexNodeKind::kLineEnd;
  whole.kind = RegexNodeKind::kConcat;
  whole.kids = {text_constraint::add_node(syntax, start), syntax.root, text_constraint::add_node(syntax, end)};
  syntax.root = text_constraint::add_node(syntax, std::move(whole));
}

Result<Grammar> text_grammar(Regex re) {
  if (re.start() < 0) return Status::errorf("'{}' matches no text at all", re.pattern());
  Grammar g;
  Node text;
  text.kind = Kind::kText;
  text.regex = 0;
  g.nodes.push_back(std::move(text));
  g.root = 0;
  g.min_depth = {0};
  g.regexes.push_back(std::make_shared<const Regex>(std::move(re)));
  return g;
}

Result<Grammar> compile_regex_output(std::string_view pattern) {
  Result<RegexSyntax> syntax = parse_regex(pattern);
  if (!syntax.ok()) return syntax.status();
  anchor_whole(*syntax);
  Result<Regex> re = compile_regex_syntax(std::move(*syntax), std::string(pattern));
  if (!re.ok()) return re.status();
  return text_grammar(std::move(*re));
}

Result<Grammar> compile_choice_output(const std::vector<std::string>& choices) {
  if (choices.empty()) return Status::error("the choice list is empty");
  if (choices.size() > kMaxChoices)
    return Status::errorf("{} choices, above the limit {}", choices.size(), kMaxChoices);
  size_t bytes = 0;
  for (const std::string& c : choices) bytes += c.size();
  if (bytes > kMaxChoiceBytes)
    return Status::errorf("the choices hold {} bytes, above the limit {}", bytes, kMaxChoiceBytes);
  RegexSyntax syntax;
  std::map<uint32_t, int32_t> set_of;
  RegexNode any;
  any.kind = RegexNodeKind::kAlt;
  for (size_t i = 0; i < choices.size(); ++i) {
    std::u32string text;
    if (!regex_automaton::decode_utf8(choices[i], text)) return Status::errorf("choice[{}] is not valid UTF-8", i);
    any.kids.push_back(text_constraint::literal_node(syntax, set_of, text));
  }
  syntax.root = text_constraint::add_node(syntax, std::move(any));
  anchor_whole(syntax);
  Result<Regex> re = compile_regex_syntax(std::move(syntax), fmt::format("choice of {}", choices.size()));
  if (!re.ok()) return re.status();
  return text_grammar(std::move(*re));
}

Result<Grammar> compile_gbnf_output(std::string_view gbnf) {
  Result<RegexSyntax> syntax = parse_gbnf(gbnf);
  if (!syntax.ok()) return syntax.status();
  anchor_whole(*syntax);
  Result<Regex> re = compile_regex_syntax(std::move(*syntax), "grammar");
  if (!re.ok()) return re.status();
  return text_grammar(std::move(*re));
}

}  // namespace dsv4::grammar
