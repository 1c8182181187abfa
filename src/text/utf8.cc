#include "text/utf8.h"

namespace dsv4 {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";

// Sequence length of a lead byte and the allowed range of the second byte;
// n = 0 for bytes that cannot start a character.
struct Lead {
  int n;
  uint8_t lo, hi;
};

Lead lead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Length of the valid prefix of the character at s[i] (1..n, or n when complete).
// Returns the count of bytes that continue it validly, counting the lead byte.
int valid_run(const uint8_t* s, size_t size, size_t i, const Lead& l) {
  int j = 1;
  while (j < l.n && i + j < size) {
    const uint8_t c = s[i + j];
    const bool ok = j == 1 ? (c >= l.lo && c <= l.hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) break;
    ++j;
  }
  return j;
}

}  // namespace

size_t utf8_valid_prefix(std::string_view sv) {
  const auto* s = reinterpret_cast<const uint8_t*>(sv.data());
  const size_t n = sv.size();
  size_t i = 0;
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      __builtin_memcpy(&w, s + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    const Lead l = lead(s[i]);
    if (l.n == 0 || valid_run(s, n, i, l) != l.n) return i;
    i += l.n;
  }
  return n;
}

std::string utf8_lossy(std::string_view sv) {
  size_t valid = utf8_valid_prefix(sv);
  if (valid == sv.size()) return std::string(sv);
  std::string out(sv.substr(0, valid));
  Utf8Assembler a;
  a.push(sv.substr(valid), out);
  a.finish(out);
  return out;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint32_t utf8_next(std::string_view s, size_t& i) {
  const auto b = static_cast<uint8_t>(s[i]);
  if (b < 0x80) {
    ++i;
    return b;
  }
  const int n = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  uint32_t cp = b & (0x7F >> n);
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

void Utf8Assembler::push(std::string_view bytes, std::string& out) {
  // Complete the pending character first (byte by byte: at most 3 pending).
  size_t i = 0;
  while (n_pending_ > 0 && i < bytes.size()) {
    pending_[n_pending_++] = bytes[i++];
    const auto* p = reinterpret_cast<const uint8_t*>(pending_);
    const Lead l = lead(p[0]);
    const int run = valid_run(p, n_pending_, 0, l);
    if (run == l.n) {
      out.append(pending_, l.n);
      n_pending_ = 0;
    } else if (run < n_pending_) {
      // Invalid: one U+FFFD for the valid prefix; the offending byte is re-read.
      out += kReplacement;
      n_pending_ = 0;
      --i;
    }
  }
  const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  while (i < n) {
    if (s[i] < 0x80) {
      out += static_cast<char>(s[i++]);
      continue;
    }
    const Lead l = lead(s[i]);
    if (l.n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    const int run = valid_run(s, n, i, l);
    if (run == l.n) {
      out.append(bytes.data() + i, l.n);
      i += l.n;
    } else if (i + run == n) {
      for (int k = 0; k < run && k < 3; ++k) pending_[k] = bytes[i + k];  // run <= 3 here
      n_pending_ = run;
      return;
    } else {
      out += kReplacement;
      i += run;
    }
  }
}

void Utf8Assembler::finish(std::string& out) {
  if (n_pending_ > 0) out += kReplacement;
  n_pending_ = 0;
}

}  // namespace dsv4
