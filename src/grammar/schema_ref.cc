#include "grammar/schema_ref.h"

#include <cctype>
#include <utility>
#include <vector>

namespace dsv4::grammar {
namespace {

using Json = OrderedJson;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX -> the byte XX; false on a '%' without two hex digits.
bool percent_decode(const std::string& in, std::string& out) {
  out.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

// One reference token: ~1 -> '/', ~0 -> '~'; false on any other '~'.
bool unescape_token(const std::string& in, std::string& out) {
  out.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '~') {
      out += in[i];
      continue;
    }
    if (i + 1 >= in.size() || (in[i + 1] != '0' && in[i + 1] != '1')) return false;
    out += in[i + 1] == '1' ? '/' : '~';
    ++i;
  }
  return true;
}

// A reference token for a key ('~' -> "~0", '/' -> "~1").
std::string escape_token(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
  return out;
}

// An array index: "0" or digits without a leading zero, within the array.
bool array_index(const std::string& token, size_t size, size_t& index) {
  if (token.empty() || token.size() > 9 || (token.size() > 1 && token[0] == '0')) return false;
  index = 0;
  for (char c : token) {
    if (c < '0' || c > '9') return false;
    index = index * 10 + static_cast<size_t>(c - '0');
  }
  return index < size;
}

// The document part of a URI (before '#').
std::string document_of(const std::string& uri) { return uri.substr(0, uri.find('#')); }

// Whether a URI reference begins with a scheme ("https:", "urn:").
bool has_scheme(const std::string& ref) {
  const size_t colon = ref.find(':');
  if (colon == std::string::npos || colon == 0 || !std::isalpha(static_cast<unsigned char>(ref[0]))) return false;
  for (size_t i = 1; i < colon; ++i)
    if (!std::isalnum(static_cast<unsigned char>(ref[i])) && ref[i] != '+' && ref[i] != '-' && ref[i] != '.')
      return false;
  return true;
}

// RFC 3986 section 5.2, for the forms schemas use: an absolute reference, "//host/path", "/path",
// and a relative path (with leading "./" segments) against the base's directory.
std::string resolve_against(const std::string& base, const std::string& ref) {
  if (has_scheme(ref) || base.empty()) return ref;
  const size_t scheme_end = base.find("://");
  if (ref.rfind("//", 0) == 0) return scheme_end == std::string::npos ? ref : base.substr(0, scheme_end + 1) + ref;
  if (ref[0] == '/') {
    const size_t path = scheme_end == std::string::npos ? std::string::npos : base.find('/', scheme_end + 3);
    return (path == std::string::npos ? base : base.substr(0, path)) + ref;
  }
  std::string rest = ref;
  while (rest.rfind("./", 0) == 0) rest = rest.substr(2);
  const size_t slash = base.rfind('/');
  return (slash == std::string::npos ? std::string() : base.substr(0, slash + 1)) + rest;
}

// The JSON Pointer ("#/a/b") of the schema in root that declares the plain-name fragment
// `name`: "$anchor": name (2019-09 on), or "$id"/"id": "#name" (up to draft-07); "" if none.
std::string anchor_pointer(const Json& root, const std::string& name) {
  std::vector<std::pair<const Json*, std::string>> pending = {{&root, "#"}};
  while (!pending.empty()) {
    const auto [x, pointer] = pending.back();
    pending.pop_back();
    if (x->is_object()) {
      for (const char* key : {"$anchor", "$id", "id"}) {
        const auto it = x->find(key);
        if (it != x->end() && it->is_string() &&
            it->get_ref<const std::string&>() == (key[1] == 'a' ? name : "#" + name))
          return pointer;
      }
      for (auto it = x->begin(); it != x->end(); ++it)
        if (it->is_structured()) pending.emplace_back(&it.value(), pointer + "/" + escape_token(it.key()));
    } else if (x->is_array()) {
      for (size_t i = 0; i < x->size(); ++i) pending.emplace_back(&(*x)[i], pointer + "/" + std::to_string(i));
    }
  }
  return "";
}

}  // namespace

std::string local_ref(const Json& root, const std::string& ref) {
  if (ref.empty() || !root.is_object()) return ref;
  std::string fragment = ref;
  if (ref[0] != '#') {
    std::string base;
    for (const char* key : {"$id", "id"})
      if (const auto it = root.find(key); base.empty() && it != root.end() && it->is_string())
        base = document_of(it->get<std::string>());
    const std::string resolved = resolve_against(base, ref);
    if (base.empty() || document_of(resolved) != base) return ref;
    const size_t hash = resolved.find('#');
    fragment = hash == std::string::npos ? "#" : resolved.substr(hash);
  }
  if (fragment.size() > 1 && fragment[1] != '/') {  // a plain-name fragment: an anchor
    const std::string pointer = anchor_pointer(root, fragment.substr(1));
    return pointer.empty() ? ref : pointer;
  }
  return fragment;
}

Result<const Json*> resolve_local_ref(const Json& root, const std::string& ref) {
  if (ref.empty() || ref[0] != '#')
    return Status::errorf("$ref '{}' is not local (only '#' and '#/...' pointers into this schema)", ref);
  std::string pointer;
  if (!percent_decode(ref.substr(1), pointer)) return Status::errorf("$ref '{}': a '%' without two hex digits", ref);
  if (pointer.empty()) return &root;
  if (pointer[0] != '/') return Status::errorf("$ref '{}': not a JSON Pointer (anchors are not supported)", ref);
  const Json* at = &root;
  std::string token;
  for (size_t begin = 1; begin <= pointer.size();) {
    size_t end = pointer.find('/', begin);
    if (end == std::string::npos) end = pointer.size();
    if (!unescape_token(pointer.substr(begin, end - begin), token))
      return Status::errorf("$ref '{}': '~' must be followed by 0 or 1", ref);
    size_t index = 0;
    if (at->is_object()) {
      const auto it = at->find(token);
      if (it == at->end()) return Status::errorf("$ref '{}': no member '{}' in this schema", ref, token);
      at = &*it;
    } else if (at->is_array() && array_index(token, at->size(), index)) {
      at = &(*at)[index];
    } else {
      return Status::errorf("$ref '{}': '{}' names nothing in this schema", ref, token);
    }
    begin = end + 1;
  }
  return at;
}

}  // namespace dsv4::grammar
