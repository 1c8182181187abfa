// Python-style JSON: see py_json.h.
#include "chat/py_json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "base/key_index.h"
#include "text/utf8.h"

namespace dsv4::chat {

void py_json_escape_append(std::string& out, std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        if (u < 0x20) {
          out += "\\u00";
          out += kHex[u >> 4];
          out += kHex[u & 15];
        } else {
          out += c;
        }
    }
  }
}

namespace {

// The object delimiters, named (a brace in a character literal reads as a block to tools).
constexpr char kObjectOpen = '{';
constexpr char kObjectClose = '}';

void append_escaped(std::string& out, std::string_view s) {
  out += '"';
  py_json_escape_append(out, s);
  out += '"';
}

void dump(const OrderedJson& v, std::string& out) {
  using T = OrderedJson::value_t;
  switch (v.type()) {
    case T::null: out += "null"; break;
    case T::boolean: out += v.get<bool>() ? "true" : "false"; break;
    case T::number_integer: out += std::to_string(v.get<std::int64_t>()); break;
    case T::number_unsigned: out += std::to_string(v.get<std::uint64_t>()); break;
    case T::number_float: out += py_float_repr(v.get<double>()); break;
    case T::string: append_escaped(out, v.get_ref<const std::string&>()); break;
    case T::array: {
      out += '[';
      bool first = true;
      for (const auto& item : v) {
        if (!first) out += ", ";
        first = false;
        dump(item, out);
      }
      out += ']';
      break;
    }
    case T::object: {
      out += kObjectOpen;
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first) out += ", ";
        first = false;
        append_escaped(out, key);
        out += ": ";
        dump(item, out);
      }
      out += kObjectClose;
      break;
    }
    default: out += "null"; break;  // binary / discarded: never produced by parse
  }
}

// A parsed value with numbers kept as Python would print them.
struct Node {
  PyParsed::Kind kind = PyParsed::Kind::kNull;
  std::string text;  // string value, or the printed scalar
  std::vector<std::string> keys;
  std::vector<Node> items;  // array items or object values
};

void dump(const Node& n, std::string& out) {
  switch (n.kind) {
    case PyParsed::Kind::kString: append_escaped(out, n.text); break;
    case PyParsed::Kind::kArray:
      out += '[';
      for (size_t i = 0; i < n.items.size(); ++i) {
        if (i) out += ", ";
        dump(n.items[i], out);
      }
      out += ']';
      break;
    case PyParsed::Kind::kObject:
      out += kObjectOpen;
      for (size_t i = 0; i < n.items.size(); ++i) {
        if (i) out += ", ";
        append_escaped(out, n.keys[i]);
        out += ": ";
        dump(n.items[i], out);
      }
      out += kObjectClose;
      break;
    default: out += n.text; break;
  }
}

// Recursive-descent reader with Python json.loads's grammar (strict strings,
// NaN/Infinity/-Infinity literals). Every method returns false on a syntax error.
class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}

  bool document(Node& out) {
    skip_ws();
    if (!value(out, 0)) return false;
    skip_ws();
    return pos_ == s_.size();
  }
  uint64_t key_comparisons() const { return key_comparisons_; }

 private:
  static constexpr int kMaxDepth = 500;

  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  bool value(Node& out, int depth) {
    if (depth > kMaxDepth || pos_ >= s_.size()) return false;
    char c = s_[pos_];
    if (c == kObjectOpen) return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      out.kind = PyParsed::Kind::kString;
      return string(out.text);
    }
    if (literal("null")) { out.kind = PyParsed::Kind::kNull; out.text = "null"; return true; }
    if (literal("true")) { out.kind = PyParsed::Kind::kBool; out.text = "true"; return true; }
    if (literal("false")) { out.kind = PyParsed::Kind::kBool; out.text = "false"; return true; }
    if (literal("NaN")) { out.kind = PyParsed::Kind::kNumber; out.text = "NaN"; return true; }
    if (literal("Infinity")) { out.kind = PyParsed::Kind::kNumber; out.text = "Infinity"; return true; }
    if (literal("-Infinity")) { out.kind = PyParsed::Kind::kNumber; out.text = "-Infinity"; return true; }
    return number(out);
  }

  bool number(Node& out) {
    size_t start = pos_;
    auto digits = [&] {
      size_t d = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - d;
    };
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '0') {
      ++pos_;
    } else if (digits() == 0) {
      return false;
    }
    bool is_float = false;
    if (pos_ + 1 < s_.size() && s_[pos_] == '.' && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9') {
      ++pos_;
      digits();
      is_float = true;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      size_t save = pos_++;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) {
        pos_ = save;  // Python's regex stops before a bare 'e'
      } else {
        is_float = true;
      }
    }
    std::string text(s_.substr(start, pos_ - start));
    out.kind = PyParsed::Kind::kNumber;
    if (is_float) {
      out.text = py_float_repr(std::strtod(text.c_str(), nullptr));
    } else {
      out.text = (text == "-0") ? "0" : text;
    }
    return true;
  }

  bool hex4(uint32_t& v) {
    if (pos_ + 4 > s_.size()) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return false;
    }
    return true;
  }

  bool string(std::string& out) {
    ++pos_;  // opening quote
    while (pos_ < s_.size()) {
      unsigned char c = static_cast<unsigned char>(s_[pos_++]);
      if (c == '"') return true;
      if (c < 0x20) return false;  // strict: raw control characters
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (pos_ >= s_.size()) return false;
      char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00) {
            uint32_t lo;
            if (s_.substr(pos_, 2) != "\\u") return false;  // lone surrogate: not representable in UTF-8
            pos_ += 2;
            if (!hex4(lo) || lo < 0xDC00 || lo >= 0xE000) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            return false;
          }
          utf8_append(out, cp);
          break;
        }
        default: return false;
      }
    }
    return false;
  }

  bool array(Node& out, int depth) {
    out.kind = PyParsed::Kind::kArray;
    ++pos_;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') { ++pos_; return true; }
    while (true) {
      skip_ws();
      out.items.emplace_back();
      if (!value(out.items.back(), depth + 1)) return false;
      skip_ws();
      if (pos_ >= s_.size()) return false;
      char c = s_[pos_++];
      if (c == ']') return true;
      if (c != ',') return false;
    }
  }

  // Duplicate keys are found through a hash index: linear in the key count.
  bool object(Node& out, int depth) {
    out.kind = PyParsed::Kind::kObject;
    ++pos_;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == kObjectClose) { ++pos_; return true; }
    KeyIndex index;
    const auto key_at = [&out](size_t i) -> std::string_view { return out.keys[i]; };
    struct Tally {  // the index's comparisons, added to the reader's however the object ends
      KeyIndex& index;
      uint64_t& total;
      ~Tally() { total += index.comparisons(); }
    } tally{index, key_comparisons_};
    while (true) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') return false;
      std::string key;
      if (!string(key)) return false;
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_++] != ':') return false;
      skip_ws();
      Node item;
      if (!value(item, depth + 1)) return false;
      const size_t at = index.find(key, out.keys.size(), key_at);
      if (at != KeyIndex::kNotFound) {
        out.items[at] = std::move(item);  // dict: last value, first position
      } else {
        out.keys.push_back(std::move(key));
        out.items.push_back(std::move(item));
        index.appended(out.keys.size(), key_at);
      }
      skip_ws();
      if (pos_ >= s_.size()) return false;
      char c = s_[pos_++];
      if (c == kObjectClose) return true;
      if (c != ',') return false;
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
  uint64_t key_comparisons_ = 0;  // over every object read
};

}  // namespace

std::string py_json_string(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  append_escaped(out, s);
  return out;
}

std::string py_float_repr(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
  std::string_view s(buf, static_cast<size_t>(res.ptr - buf));  // "-d.ddde+XX", shortest digits
  std::string out;
  if (s.front() == '-') {
    out += '-';
    s.remove_prefix(1);
  }
  size_t e = s.find('e');
  std::string digits;
  for (char c : s.substr(0, e)) {
    if (c != '.') digits += c;
  }
  int exp = 0;
  std::string_view es = s.substr(e + 1);
  if (es.front() == '+') es.remove_prefix(1);
  std::from_chars(es.data(), es.data() + es.size(), exp);
  const int n = static_cast<int>(digits.size());
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (n > 1) {
      out += '.';
      out += digits.substr(1);
    }
    out += 'e';
    out += exp < 0 ? '-' : '+';
    int a = exp < 0 ? -exp : exp;
    if (a < 10) out += '0';
    out += std::to_string(a);
  } else if (exp < 0) {
    out += "0.";
    out.append(static_cast<size_t>(-exp - 1), '0');
    out += digits;
  } else if (exp + 1 >= n) {
    out += digits;
    out.append(static_cast<size_t>(exp + 1 - n), '0');
    out += ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(exp + 1));
    out += '.';
    out += digits.substr(static_cast<size_t>(exp + 1));
  }
  return out;
}

std::string py_json(const OrderedJson& value) {
  std::string out;
  dump(value, out);
  return out;
}

int json_depth(const OrderedJson& value) {
  int deepest = 0;
  std::vector<std::pair<const OrderedJson*, int>> stack{{&value, 0}};
  while (!stack.empty()) {
    auto [v, d] = stack.back();
    stack.pop_back();
    if (!v->is_structured()) continue;
    deepest = std::max(deepest, d + 1);
    for (const auto& item : *v) stack.push_back({&item, d + 1});
  }
  return deepest;
}

std::optional<PyParsed> py_json_reparse(std::string_view text) {
  Node root;
  Reader reader(text);
  if (!reader.document(root)) return std::nullopt;
  PyParsed out;
  out.kind = root.kind;
  out.key_comparisons = reader.key_comparisons();
  dump(root, out.dumped);
  if (root.kind == PyParsed::Kind::kObject) {
    for (size_t i = 0; i < root.keys.size(); ++i) {
      const Node& item = root.items[i];
      bool is_string = item.kind == PyParsed::Kind::kString;
      std::string value;
      if (is_string) {
        value = item.text;
      } else {
        dump(item, value);
      }
      out.members.push_back({root.keys[i], std::move(value), is_string});
    }
  }
  return out;
}

}  // namespace dsv4::chat
