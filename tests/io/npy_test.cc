// .npy float32: exact header bytes of the writer (version 1.0, 64-byte
// aligned), round trips of several ranks, and the reader's errors.
#include "io/npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "support/tmp_dir.h"

namespace dsv4 {
namespace {

using test::read_bytes;
using test::TmpDir;
using test::write_bytes;

std::vector<uint8_t> npy_image(const std::string& header, size_t data_bytes, uint8_t major = 1) {
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', major, 0};
  const size_t n = header.size();
  out.push_back(static_cast<uint8_t>(n));
  out.push_back(static_cast<uint8_t>(n >> 8));
  if (major >= 2) {
    out.push_back(static_cast<uint8_t>(n >> 16));
    out.push_back(static_cast<uint8_t>(n >> 24));
  }
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + data_bytes, 0);
  return out;
}

std::string npy_error(const std::vector<uint8_t>& bytes) {
  auto r = parse_npy_f32(bytes.data(), bytes.size(), "x.npy");
  EXPECT_FALSE(r.ok());
  return r.ok() ? std::string() : r.message();
}

TEST(NpyTest, WriterHeaderBytes) {
  TmpDir tmp;
  const std::vector<float> v = {1.0f, -2.5f, 3.25f, 0.0f, 1e-30f, -7.0f};
  ASSERT_TRUE(write_npy_f32(tmp.file("a.npy"), v.data(), {2, 3}).ok());
  const std::vector<uint8_t> raw = read_bytes(tmp.file("a.npy"));
  ASSERT_GE(raw.size(), 10u);
  EXPECT_EQ(std::memcmp(raw.data(), "\x93NUMPY\x01\x00", 8), 0);
  const size_t hlen = raw[8] | (raw[9] << 8);
  EXPECT_EQ((10 + hlen) % 64, 0u);
  ASSERT_EQ(raw.size(), 10 + hlen + v.size() * 4);
  const std::string header(raw.begin() + 10, raw.begin() + 10 + static_cast<int64_t>(hlen));
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(header.substr(0, dict.size()), dict);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(header.find_first_not_of(' ', dict.size()), hlen - 1);
  EXPECT_EQ(std::memcmp(raw.data() + 10 + hlen, v.data(), v.size() * 4), 0);
}

TEST(NpyTest, RoundTripRanks) {
  TmpDir tmp;
  const std::vector<std::vector<int64_t>> shapes = {{2, 3}, {5}, {}, {0, 4}, {2, 1, 3}, {3, 1000}};
  for (const auto& shape : shapes) {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i) - 3.0f;
    ASSERT_TRUE(write_npy_f32(tmp.file("r.npy"), v.data(), shape).ok());
    auto r = read_npy_f32(tmp.file("r.npy"));
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r->shape, shape);
    EXPECT_EQ(r->data, v);
  }
  const std::vector<uint8_t> raw = read_bytes(tmp.file("r.npy"));
  EXPECT_NE(std::string(raw.begin(), raw.end()).find("'shape': (3, 1000), }"), std::string::npos);
  ASSERT_TRUE(write_npy_f32(tmp.file("one.npy"), nullptr, {0}).ok());
  const std::vector<uint8_t> one = read_bytes(tmp.file("one.npy"));
  EXPECT_EQ(one.size(), 128u);  // 59-byte dict + 10 > 64
  EXPECT_NE(std::string(one.begin(), one.end()).find("'shape': (0,), }"), std::string::npos);
}

TEST(NpyTest, ReaderAcceptsOtherValidHeaders) {
  // Version 2.0, keys in another order, double quotes, no trailing comma.
  auto img = npy_image("{\"shape\": (2,), 'fortran_order': False, 'descr': '<f4'}\n", 8, 2);
  auto r = parse_npy_f32(img.data(), img.size(), "x.npy");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->shape, (std::vector<int64_t>{2}));
}

TEST(NpyTest, ReaderErrors) {
  const std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n";
  EXPECT_EQ(npy_error({1, 2, 3}), "x.npy: not a .npy file (missing the \\x93NUMPY magic)");
  EXPECT_EQ(npy_error(npy_image(ok_dict, 20)), "x.npy: data is 20 bytes but shape (2, 3) x float32 needs 24");
  EXPECT_EQ(npy_error(npy_image("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 48)),
            "x.npy: descr '<f8' is not '<f4' (little-endian float32)");
  EXPECT_EQ(npy_error(npy_image("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24)),
            "x.npy: fortran_order True is not supported (C order only)");
  EXPECT_EQ(npy_error(npy_image("{'descr': '<f4', 'shape': (2, 3), }", 24)),
            "x.npy: header must give 'descr', 'fortran_order' and 'shape'");
  EXPECT_EQ(npy_error(npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", 24)),
            "x.npy: header: 'shape' entry 1 is not an integer or overflows");
  EXPECT_EQ(npy_error(npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }", 0)),
            "x.npy: header: 'shape' entry 1 is not an integer or overflows");
  EXPECT_EQ(npy_error(npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", 24)),
            "x.npy: header: malformed 'shape' tuple");
  EXPECT_EQ(npy_error(npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", 24)),
            "x.npy: header: unknown key 'x'");
  EXPECT_EQ(npy_error(npy_image("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", 24)),
            "x.npy: header: key 'descr' given twice");
  EXPECT_EQ(npy_error(npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} junk", 24)),
            "x.npy: header: unexpected text after the dict at byte 56");
  auto cut = npy_image(ok_dict, 24);
  cut.resize(30);
  EXPECT_EQ(npy_error(cut), "x.npy: header length 60 runs past the end of the file (30 bytes)");
  auto v9 = npy_image(ok_dict, 24);
  v9[6] = 9;
  EXPECT_EQ(npy_error(v9), "x.npy: unsupported .npy version 9.0 (1.0, 2.0 and 3.0 are read)");
  TmpDir tmp;
  auto missing = read_npy_f32(tmp.file("none.npy"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.message(), tmp.file("none.npy") + ": cannot open: No such file or directory");
}

}  // namespace
}  // namespace dsv4
