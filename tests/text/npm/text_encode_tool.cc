// Test helper of the npm conformance tests: loads a tokenizer.json once, then for
// each line of a corpus file ("S <hex>" = encode with added tokens, "P <hex>" =
// plain text, "M <hex> <begin>:<size>,..." = encode_spans with those byte spans) prints
// "<ids comma-separated>;<hex of decode(ids)>".
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: text_encode_tool TOKENIZER_JSON CORPUS\n");
    return 2;
  }
  dsv4::Result<dsv4::Tokenizer> tok = dsv4::Tokenizer::load(argv[1]);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.message().c_str());
    return 1;
  }
  std::ifstream in(argv[2]);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() < 2 || (line[0] != 'S' && line[0] != 'P' && line[0] != 'M') || line[1] != ' ') {
      std::fprintf(stderr, "bad corpus line: %s\n", line.c_str());
      return 2;
    }
    std::string bytes;
    size_t i = 2;
    for (; i + 1 < line.size() && line[i] != ' '; i += 2)
      bytes += static_cast<char>(hex_value(line[i]) * 16 + hex_value(line[i + 1]));
    std::vector<dsv4::Span> spans;
    for (const char* p = line.c_str() + i; *p == ' ' || *p == ',';) {
      char* end = nullptr;
      const auto begin = static_cast<uint32_t>(std::strtoul(p + 1, &end, 10));
      const auto size = static_cast<uint32_t>(std::strtoul(end + 1, &end, 10));  // after ':'
      spans.push_back({begin, size});
      p = end;
    }
    const std::vector<int32_t> ids =
        line[0] == 'M' ? tok->encode_spans(bytes, spans) : tok->encode(bytes, line[0] == 'S');
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out += ',';
      out += std::to_string(ids[i]);
    }
    out += ';';
    const std::string text = tok->decode(ids).value();
    static const char kHex[] = "0123456789abcdef";
    for (unsigned char c : text) {
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
    std::printf("%s\n", out.c_str());
  }
  return 0;
}
