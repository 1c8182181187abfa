// SipHash-1-3 (Aumasson and Bernstein) under a per-process random key.
#include "base/key_index.h"

#include <cstring>
#include <random>

namespace dsv4 {
namespace {

struct SipKey {
  uint64_t k0, k1;
};

// Drawn once: one process's tables all hash alike, and no client can predict them.
const SipKey& process_key() {
  static const SipKey key = [] {
    std::random_device device;
    auto draw = [&] { return (uint64_t{device()} << 32) ^ device(); };
    return SipKey{draw(), draw()};
  }();
  return key;
}

constexpr uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

struct SipState {
  uint64_t v0, v1, v2, v3;
  void round() {
    v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);
    v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;
    v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;
    v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);
  }
  void absorb(uint64_t m) {
    v3 ^= m;
    round();
    v0 ^= m;
  }
};

}  // namespace

uint64_t key_hash(std::string_view key) {
  const SipKey& k = process_key();
  SipState s{0x736f6d6570736575ULL ^ k.k0, 0x646f72616e646f6dULL ^ k.k1, 0x6c7967656e657261ULL ^ k.k0,
             0x7465646279746573ULL ^ k.k1};
  const size_t whole = key.size() - key.size() % 8;
  for (size_t i = 0; i < whole; i += 8) {
    uint64_t m;
    std::memcpy(&m, key.data() + i, 8);  // little-endian words (x86)
    s.absorb(m);
  }
  uint64_t last = uint64_t{key.size() & 0xff} << 56;
  for (size_t i = whole; i < key.size(); ++i) last |= uint64_t{static_cast<unsigned char>(key[i])} << (8 * (i - whole));
  s.absorb(last);
  s.v2 ^= 0xff;
  s.round();
  s.round();
  s.round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

}  // namespace dsv4
