// float32 .npy writer and reader (layout in npy.h).
#include "io/npy.h"

#include <bit>
#include <cctype>
#include <cstring>
#include <limits>
#include <optional>

#include "base/check.h"
#include "io/file_util.h"

namespace dsv4 {
namespace {

static_assert(std::endian::native == std::endian::little, "npy '<f4' data is copied as is");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr uint64_t kMaxNpyHeader = 1 << 20;
constexpr uint64_t kMaxNpyFile = 1ull << 40;
constexpr uint64_t kMaxArrayBytes = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// A cursor over the header's Python dict literal, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
struct DictParser {
  std::string_view s;
  size_t pos = 0;

  void skip_ws() {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\n' || s[pos] == '\r')) ++pos;
  }
  bool eat(char c) {
    skip_ws();
    if (pos < s.size() && s[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  std::optional<std::string> string() {
    skip_ws();
    if (pos >= s.size() || (s[pos] != '\'' && s[pos] != '"')) return std::nullopt;
    const char q = s[pos++];
    const size_t end = s.find(q, pos);
    if (end == std::string_view::npos) return std::nullopt;
    std::string out(s.substr(pos, end - pos));
    pos = end + 1;
    return out;
  }
  bool word(std::string_view w) {
    skip_ws();
    if (s.substr(pos, w.size()) != w) return false;
    pos += w.size();
    return true;
  }
  std::optional<uint64_t> integer() {
    skip_ws();
    const size_t start = pos;
    uint64_t v = 0;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
      if (__builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, static_cast<uint64_t>(s[pos] - '0'), &v))
        return std::nullopt;
      ++pos;
    }
    if (pos == start) return std::nullopt;
    if (pos < s.size() && s[pos] == 'L') ++pos;  // Python 2 long suffix
    return v;
  }
};

}  // namespace

Status write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  uint64_t numel = 1;
  for (const int64_t d : shape) {
    DSV4_CHECK(d >= 0, "{}: negative dim {}", path, d);
    DSV4_CHECK(!__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel), "{}: shape overflows", path);
  }
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += fmt::format("{}{}", i ? ", " : "", shape[i]);
  if (shape.size() == 1) dims += ",";
  std::string header = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}", dims);
  // 6 magic + 2 version + 2 length + header + '\n' is a multiple of 64.
  while ((kMagicLen + 4 + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  DSV4_CHECK(header.size() <= 0xFFFF, "{}: npy header of {} bytes", path, header.size());
  uint8_t prefix[10];
  std::memcpy(prefix, kMagic, kMagicLen);
  prefix[6] = 1;
  prefix[7] = 0;
  prefix[8] = static_cast<uint8_t>(header.size() & 0xFF);
  prefix[9] = static_cast<uint8_t>(header.size() >> 8);
  return write_file_atomic(path, {{prefix, 10},
                                  {reinterpret_cast<const uint8_t*>(header.data()), header.size()},
                                  {reinterpret_cast<const uint8_t*>(data), numel * sizeof(float)}});
}

Result<NpyF32> parse_npy_f32(const uint8_t* bytes, size_t size, const std::string& display_name) {
  auto fail = [&](const std::string& what) { return Status::errorf("{}: {}", display_name, what); };
  if (size < 10 || std::memcmp(bytes, kMagic, kMagicLen) != 0)
    return fail("not a .npy file (missing the \\x93NUMPY magic)");
  const uint8_t major = bytes[6], minor = bytes[7];
  size_t prefix = 0;
  uint64_t hlen = 0;
  if (major == 1 && minor == 0) {
    prefix = 10;
    hlen = bytes[8] | (uint64_t{bytes[9]} << 8);
  } else if ((major == 2 || major == 3) && minor == 0) {
    if (size < 12) return fail(fmt::format("file is {} bytes, too short for a version {}.0 header", size, major));
    prefix = 12;
    for (int i = 3; i >= 0; --i) hlen = (hlen << 8) | bytes[8 + i];
  } else {
    return fail(fmt::format("unsupported .npy version {}.{} (1.0, 2.0 and 3.0 are read)", major, minor));
  }
  if (hlen > kMaxNpyHeader) return fail(fmt::format("header length {} exceeds the limit of {}", hlen, kMaxNpyHeader));
  if (hlen > size - prefix)
    return fail(fmt::format("header length {} runs past the end of the file ({} bytes)", hlen, size));

  DictParser p{std::string_view(reinterpret_cast<const char*>(bytes + prefix), hlen)};
  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<std::vector<int64_t>> shape;
  if (!p.eat('{')) return fail("header is not a Python dict literal");
  while (!p.eat('}')) {
    const std::optional<std::string> key = p.string();
    if (!key || !p.eat(':')) return fail(fmt::format("header: malformed entry at byte {}", p.pos));
    if ((*key == "descr" && descr) || (*key == "fortran_order" && fortran) || (*key == "shape" && shape))
      return fail(fmt::format("header: key '{}' given twice", *key));
    if (*key == "descr") {
      descr = p.string();
      if (!descr) return fail("header: 'descr' is not a string");
    } else if (*key == "fortran_order") {
      if (p.word("False")) fortran = false;
      else if (p.word("True")) fortran = true;
      else return fail("header: 'fortran_order' is not True or False");
    } else if (*key == "shape") {
      if (!p.eat('(')) return fail("header: 'shape' is not a tuple");
      std::vector<int64_t> dims;
      uint64_t numel = 1;
      while (!p.eat(')')) {
        const std::optional<uint64_t> d = p.integer();
        if (!d || *d > kMaxArrayBytes || __builtin_mul_overflow(numel, *d, &numel) || numel > kMaxArrayBytes / 4)
          return fail(fmt::format("header: 'shape' entry {} is not an integer or overflows", dims.size()));
        dims.push_back(static_cast<int64_t>(*d));
        if (!p.eat(',') && !(p.skip_ws(), p.pos < p.s.size() && p.s[p.pos] == ')'))
          return fail("header: malformed 'shape' tuple");
      }
      shape = std::move(dims);
    } else {
      return fail(fmt::format("header: unknown key '{}'", *key));
    }
    if (!p.eat(',')) {
      if (!p.eat('}')) return fail(fmt::format("header: expected ',' or '}}' at byte {}", p.pos));
      break;
    }
  }
  p.skip_ws();
  if (p.pos != p.s.size()) return fail(fmt::format("header: unexpected text after the dict at byte {}", p.pos));
  if (!descr || !fortran || !shape) return fail("header must give 'descr', 'fortran_order' and 'shape'");
  if (*descr != "<f4") return fail(fmt::format("descr '{}' is not '<f4' (little-endian float32)", *descr));
  if (*fortran) return fail("fortran_order True is not supported (C order only)");

  NpyF32 out;
  out.shape = std::move(*shape);
  uint64_t numel = 1;
  for (const int64_t d : out.shape) numel *= static_cast<uint64_t>(d);
  const uint64_t data_bytes = size - prefix - hlen;
  if (data_bytes != numel * 4)
    return fail(fmt::format("data is {} bytes but shape ({}) x float32 needs {}", data_bytes,
                            fmt::join(out.shape, ", "), numel * 4));
  out.data.resize(numel);
  if (numel > 0) std::memcpy(out.data.data(), bytes + prefix + hlen, numel * 4);
  return out;
}

Result<NpyF32> read_npy_f32(const std::string& path) {
  Result<std::vector<uint8_t>> bytes = read_file(path, kMaxNpyFile);
  if (!bytes.ok()) return bytes.status();
  return parse_npy_f32(bytes->data(), bytes->size(), path);
}

}  // namespace dsv4
