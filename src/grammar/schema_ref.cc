#include "grammar/schema_ref.h"

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

}  // namespace

std::string local_ref(const Json& root, const std::string& ref) {
  if (ref.empty() || ref[0] == '#' || !root.is_object()) return ref;
  for (const char* key : {"$id", "id"}) {
    const auto it = root.find(key);
    if (it == root.end() || !it->is_string()) continue;
    std::string id = it->get<std::string>();
    if (!id.empty() && id.back() == '#') id.pop_back();
    if (id.empty() || ref.compare(0, id.size(), id) != 0) continue;
    if (ref.size() == id.size()) return "#";
    if (ref[id.size()] == '#') return ref.substr(id.size());
  }
  return ref;
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
