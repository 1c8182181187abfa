// Bounded random mutation of a valid safetensors image (deterministic seed):
// byte flips, truncations, header-length edits, JSON token edits. parse must
// never crash; it either fails with a message naming the file, or succeeds
// with every view inside the buffer, sized numel x dtype size, and no two
// non-empty views overlapping. Buffers are allocated at their exact length so
// ASan catches any read past the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace dsv4 {
namespace {

constexpr int kMutations = 3000;

std::vector<uint8_t> valid_image() {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]},)"
      R"("c":{"dtype":"F8_E4M3","shape":[3,1],"data_offsets":[32,35]},)"
      R"("d":{"dtype":"I64","shape":[],"data_offsets":[40,48]}})";
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  for (int i = 0; i < 48; ++i) out.push_back(static_cast<uint8_t>(i * 37));
  return out;
}

// Replacement tokens: numbers at the edges of every check, dtype names (known
// and unknown), structural JSON.
const char* const kNumbers[] = {"0", "1", "2", "3", "-1", "-0", "7", "8", "23", "24", "25", "32", "35", "40",
                                "48", "49", "4096", "4294967296", "4611686018427387904", "9223372036854775807",
                                "9223372036854775808", "18446744073709551615", "18446744073709551616", "1e400",
                                "1.5", "1e2", "00"};
const char* const kDTypeNames[] = {"F32", "BF16", "F16", "F8_E4M3", "F8_E8M0", "I8", "U8", "I32", "I64", "F64",
                                   "BOOL", "", "f32"};
const char* const kTokens[] = {
    "null", "true", "\"\"", "[]", "[0]", "[0,0]", "{}", "[", "]", "{", "}", ",", ":", "\"", "\\", "\"a\"",
    "\"__metadata__\"", "\"dtype\"", "\"shape\"", "\"data_offsets\"", "[[[[", "\xff", "\xc3\x28", " ", "\"\\u0000\""};

uint64_t read_len(const std::vector<uint8_t>& m) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | m[i];
  return n;
}
void write_len(std::vector<uint8_t>& m, uint64_t n) {
  for (int i = 0; i < 8; ++i) m[i] = static_cast<uint8_t>(n >> (8 * i));
}

std::vector<uint8_t> mutate(const std::vector<uint8_t>& base, std::mt19937_64& rng) {
  std::vector<uint8_t> m = base;
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  // Replaces m[s, t) (inside the header) by `tok`; usually keeps the header
  // length consistent so the edit reaches the checks behind the JSON parser.
  auto splice = [&](size_t s, size_t t, const std::string& tok) {
    m.erase(m.begin() + static_cast<int64_t>(s), m.begin() + static_cast<int64_t>(t));
    m.insert(m.begin() + static_cast<int64_t>(s), tok.begin(), tok.end());
    if (pick(10) != 0) write_len(m, read_len(m) + tok.size() - (t - s));
  };
  // Header span [8, 8 + len) clipped to the buffer.
  auto header_end = [&] { return m.size() < 8 ? size_t{0} : 8 + std::min<uint64_t>(read_len(m), m.size() - 8); };
  // Start/end of every run of characters satisfying `in_run` inside the header.
  auto runs = [&](auto in_run) {
    std::vector<std::pair<size_t, size_t>> out;
    const size_t end = header_end();
    for (size_t i = 8; i < end;) {
      if (!in_run(m[i])) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < end && in_run(m[j])) ++j;
      out.emplace_back(i, j);
      i = j;
    }
    return out;
  };
  const int n_edits = 1 + static_cast<int>(pick(3));
  for (int e = 0; e < n_edits; ++e) {
    const size_t kind = pick(20);
    if (m.size() < 8 && kind != 0) break;
    if (kind < 2) {  // flip bits of a random byte anywhere
      if (!m.empty()) m[pick(m.size())] ^= static_cast<uint8_t>(1 + pick(255));
    } else if (kind < 3) {  // truncate
      m.resize(pick(m.size() + 1));
    } else if (kind < 5) {  // header-length edit
      const uint64_t hl = read_len(m);
      const uint64_t choices[] = {0, 1, hl - 1, hl + 1, hl + 8, m.size() - 8, m.size() - 7, kMaxSafetensorsHeader,
                                  kMaxSafetensorsHeader + 1, ~uint64_t{0}, rng()};
      write_len(m, choices[pick(std::size(choices))]);
    } else if (kind < 11) {  // number edit
      const auto r = runs([](uint8_t c) { return std::isdigit(c) != 0; });
      if (!r.empty()) {
        const auto [s, t] = r[pick(r.size())];
        splice(s, t, kNumbers[pick(std::size(kNumbers))]);
      }
    } else if (kind < 13) {  // dtype edit: replace an upper-case word
      const auto r = runs([](uint8_t c) { return std::isupper(c) != 0 || std::isdigit(c) != 0 || c == '_'; });
      if (!r.empty()) {
        const auto [s, t] = r[pick(r.size())];
        splice(s, t, kDTypeNames[pick(std::size(kDTypeNames))]);
      }
    } else if (kind < 16) {  // structural token edit at a random header position
      const size_t end = header_end();
      if (end > 8) {
        const size_t s = 8 + pick(end - 8);
        splice(s, s + pick(std::min<size_t>(3, end - s) + 1), kTokens[pick(std::size(kTokens))]);
      }
    } else if (kind < 18) {  // delete or duplicate a short span of the header
      const size_t end = header_end();
      if (end > 8) {
        const size_t s = 8 + pick(end - 8), len = 1 + pick(std::min<size_t>(24, end - s));
        if (rng() & 1) {
          splice(s, s + len, "");
        } else {
          splice(s, s, std::string(m.begin() + static_cast<int64_t>(s), m.begin() + static_cast<int64_t>(s + len)));
        }
      }
    } else {  // data-section edit: grow or shrink
      if (rng() & 1) m.resize(m.size() + 1 + pick(16), 0x5A);
      else m.resize(std::max<size_t>(header_end(), m.size() - std::min<size_t>(m.size(), 1 + pick(16))));
    }
  }
  return m;
}

TEST(SafetensorsMutationTest, ParseNeverCrashesAndViewsStayInside) {
  const std::vector<uint8_t> base = valid_image();
  {
    auto f = SafetensorsFile::parse(base.data(), base.size(), "base");
    ASSERT_TRUE(f.ok()) << f.message();
    ASSERT_EQ((*f)->tensors().size(), 4u);
  }
  std::mt19937_64 rng(20240531);
  int n_ok = 0, n_err = 0;
  for (int it = 0; it < kMutations; ++it) {
    const std::vector<uint8_t> m = mutate(base, rng);
    // Exact-size heap copy: ASan flags any byte read past the end.
    std::unique_ptr<uint8_t[]> buf(new uint8_t[std::max<size_t>(m.size(), 1)]);
    if (!m.empty()) std::memcpy(buf.get(), m.data(), m.size());
    auto f = SafetensorsFile::parse(buf.get(), m.size(), "mut.safetensors");
    if (!f.ok()) {
      ++n_err;
      ASSERT_EQ(f.message().rfind("mut.safetensors: ", 0), 0u) << f.message();
      continue;
    }
    ++n_ok;
    std::vector<std::pair<const uint8_t*, const uint8_t*>> ranges;
    for (const auto& [name, v] : (*f)->tensors()) {
      ASSERT_EQ(v.name, name);
      ASSERT_GE(v.data, buf.get()) << "iteration " << it << " tensor " << name;
      ASSERT_LE(v.data + v.n_bytes, buf.get() + m.size()) << "iteration " << it << " tensor " << name;
      ASSERT_EQ(static_cast<size_t>(v.numel()) * dtype_size(v.dtype), v.n_bytes) << "iteration " << it;
      ASSERT_LE(v.shape.size(), kMaxSafetensorsRank);
      uint64_t sum = 0;
      for (size_t i = 0; i < v.n_bytes; ++i) sum += v.data[i];  // touch every byte
      (void)sum;
      if (v.n_bytes > 0) ranges.emplace_back(v.data, v.data + v.n_bytes);
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i) ASSERT_LE(ranges[i - 1].second, ranges[i].first) << "iteration " << it;
  }
  // Both outcomes must be exercised for the test to mean anything.
  EXPECT_GT(n_ok, 50);
  EXPECT_GT(n_err, 1000);
  std::printf("mutations: %d parsed, %d rejected\n", n_ok, n_err);
}

}  // namespace
}  // namespace dsv4
