#include "runtime/grammar_cache.h"

#include "base/ordered_json.h"
#include "grammar/text_constraint.h"
#include "io/json_bounded.h"

namespace dsv4 {

namespace {

// The whole-output text constraints (grammar/text_constraint.h); errors name c.field.
Result<grammar::Grammar> compile_text(const OutputConstraint& c) {
  Result<grammar::Grammar> g = Status::error("no text constraint");
  if (c.text_kind == TextConstraint::kRegex) {
    g = grammar::compile_regex_output(c.text);
  } else if (c.text_kind == TextConstraint::kGbnf) {
    g = grammar::compile_gbnf_output(c.text);
  } else if (c.text_kind == TextConstraint::kChoice) {
    Result<OrderedJson> list = parse_json_bounded<OrderedJson>(c.text);
    std::vector<std::string> choices;
    if (!list.ok() || !list->is_array()) return Status::error(c.field + ": expected an array of strings");
    for (const auto& v : *list) {
      if (!v.is_string()) return Status::errorf("{}[{}]: expected a string", c.field, choices.size());
      choices.push_back(v.get<std::string>());
    }
    g = grammar::compile_choice_output(choices);
  }
  if (!g.ok()) return g.status().with_context(c.field);
  return g;
}

}  // namespace

Result<grammar::Grammar> compile_constraint(const OutputConstraint& c) {
  if (c.text_kind != TextConstraint::kNone) return compile_text(c);
  if (!c.tool_calls.empty()) {
    Result<OrderedJson> tools = parse_json_bounded<OrderedJson>(c.tool_calls);
    if (!tools.ok() || !tools->is_array()) return Status::error("tool_choice: the tools are not a JSON array");
    std::vector<grammar::ToolSpec> specs;
    for (const auto& t : *tools) {
      if (!t.is_object() || !t.contains("name") || !t["name"].is_string())
        return Status::error("tool_choice: each tool needs a name");
      specs.push_back({t["name"].get<std::string>(), t.value("parameters", OrderedJson())});
    }
    grammar::JsonLayout layout;
    layout.whitespace_flexible = c.whitespace_flexible;
    Result<grammar::Grammar> g = grammar::compile_tool_call(specs, layout);
    if (!g.ok()) return g.status().with_context("tool_choice");
    return g;
  }
  const std::string field = c.field_name();
  std::string why;
  Result<OrderedJson> schema = parse_json_bounded<OrderedJson>(c.json_schema, kMaxJsonDepth, &why);
  if (!schema.ok()) {
    if (why.find("number overflow") != std::string::npos)  // valid JSON whose number no double holds
      return Status::errorf("{}: the JSON schema holds a number out of a double's range ({})", field, why);
    return Status::error(field + (schema.message() == "not valid JSON" ? ": the JSON schema is not JSON"
                                                                       : ": the JSON schema " + schema.message()));
  }
  grammar::CompileOptions options;
  options.strict = c.strict;
  options.layout.whitespace_flexible = c.whitespace_flexible;
  Result<grammar::Grammar> g = grammar::compile_json_schema(*schema, options);
  if (!g.ok()) return g.status().with_context(field);
  return g;
}

Result<std::shared_ptr<const grammar::Grammar>> GrammarCache::get(const OutputConstraint& c) {
  // The options that change the grammar lead the key: strict (s/r) and the whitespace (f/c).
  static constexpr const char* kTextKinds[] = {"", "regex ", "choice ", "gbnf "};
  std::string key = std::string(c.strict ? "s" : "r") + (c.whitespace_flexible ? "f " : "c ") +
                    (c.text_kind != TextConstraint::kNone ? kTextKinds[static_cast<int>(c.text_kind)] + c.text
                     : c.tool_calls.empty()               ? "schema " + c.json_schema
                                                          : "tools " + c.tool_calls);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      recent_.splice(recent_.begin(), recent_, it->second.recent);
      return it->second.grammar;
    }
  }
  Result<grammar::Grammar> compiled = compile_constraint(c);  // unlocked: others look up meanwhile
  if (!compiled.ok()) return compiled.status();
  auto grammar = std::make_shared<const grammar::Grammar>(std::move(*compiled));
  const auto bytes = static_cast<int64_t>(key.size());
  if (bytes > max_text_bytes_) return grammar;  // never cached
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = entries_.find(key); it != entries_.end()) return it->second.grammar;  // compiled twice at once
  evict_to(max_text_bytes_ - bytes);
  const auto it = entries_.emplace(std::move(key), Entry{grammar, {}}).first;
  recent_.push_front(&it->first);
  it->second.recent = recent_.begin();
  text_bytes_ += bytes;
  return grammar;
}

void GrammarCache::evict_to(int64_t bytes) {
  while (text_bytes_ > bytes && !recent_.empty()) {
    text_bytes_ -= static_cast<int64_t>(recent_.back()->size());
    entries_.erase(*recent_.back());
    recent_.pop_back();
  }
}

int64_t GrammarCache::text_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return text_bytes_;
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace dsv4
