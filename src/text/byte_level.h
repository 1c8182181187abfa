// The GPT-2 byte <-> character table of the ByteLevel step (text.md §1.6):
// printable bytes 0x21..0x7E, 0xA1..0xAC, 0xAE..0xFF map to the same code
// point; the other 68 bytes, in ascending order, to U+0100 + n.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace dsv4 {

// Code point of byte b.
uint32_t byte_to_char(uint8_t b);

// Byte of code point cp, or -1 when cp is outside the 256-character alphabet.
int char_to_byte(uint32_t cp);

// UTF-8 of the byte-level symbol of each byte of `bytes`.
std::string bytes_to_symbols(std::string_view bytes);

// Inverse of bytes_to_symbols for a valid UTF-8 string made only of alphabet
// characters; false (out untouched) if any character is outside the alphabet.
bool symbols_to_bytes(std::string_view symbols, std::string& out);

}  // namespace dsv4
