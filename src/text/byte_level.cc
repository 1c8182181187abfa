#include "text/byte_level.h"

#include "text/utf8.h"

namespace dsv4 {
namespace {

bool printable(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

struct Tables {
  std::array<uint32_t, 256> to_char{};
  std::array<int16_t, 0x144> to_byte{};  // code points U+0000..U+0143
  Tables() {
    to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      to_char[b] = printable(b) ? static_cast<uint32_t>(b) : 0x100u + n++;
      to_byte[to_char[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t byte_to_char(uint8_t b) { return tables().to_char[b]; }

int char_to_byte(uint32_t cp) { return cp < 0x144 ? tables().to_byte[cp] : -1; }

std::string bytes_to_symbols(std::string_view bytes) {
  std::string out;
  for (char c : bytes) utf8_append(out, byte_to_char(static_cast<uint8_t>(c)));
  return out;
}

bool symbols_to_bytes(std::string_view symbols, std::string& out) {
  std::string bytes;
  size_t i = 0;
  while (i < symbols.size()) {
    const int b = char_to_byte(utf8_next(symbols, i));
    if (b < 0) return false;
    bytes += static_cast<char>(b);
  }
  out += bytes;
  return true;
}

}  // namespace dsv4
