// safetensors: writer -> reader round trip of every dtype (single file and
// sharded sets), the writer's layout guarantees, and the exact error for each
// kind of malformed file or directory.
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "support/tmp_dir.h"

namespace dsv4 {
namespace {

using test::read_bytes;
using test::TmpDir;
using test::write_bytes;

constexpr DType kAllDTypes[] = {DType::kBF16, DType::kF32, DType::kF8_E4M3, DType::kF8_E8M0, DType::kI8,
                                DType::kI64,  DType::kI32, DType::kU8,      DType::kF16};

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// A file image: u64le header length (or `len` if given), header text, data.
std::vector<uint8_t> image(const std::string& header, size_t data_bytes, std::optional<uint64_t> len = {}) {
  const uint64_t n = len.value_or(header.size());
  std::vector<uint8_t> out(8 + header.size() + data_bytes, 0xAB);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  if (!header.empty()) std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

std::string parse_error(const std::vector<uint8_t>& bytes, const std::string& name = "t.safetensors") {
  auto r = SafetensorsFile::parse(bytes.data(), bytes.size(), name);
  EXPECT_FALSE(r.ok()) << "parsed although malformed";
  return r.ok() ? std::string() : r.message();
}

// Expects `msg` to contain every part.
void expect_parts(const std::string& msg, std::initializer_list<std::string> parts) {
  for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing \"" << p << "\" in: " << msg;
}

struct Written {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// One tensor per dtype plus a scalar and an empty tensor.
std::vector<Written> sample_tensors() {
  std::vector<Written> out;
  uint64_t seed = 1;
  for (const DType t : kAllDTypes) {
    const std::vector<int64_t> shape = {3, static_cast<int64_t>(5 + seed)};
    const size_t n = static_cast<size_t>(shape[0] * shape[1]) * dtype_size(t);
    out.push_back({"layers.0." + std::string(dtype_name(t)) + ".weight", t, shape, random_bytes(n, seed++)});
  }
  out.push_back({"scalar", DType::kF32, {}, random_bytes(4, 100)});
  out.push_back({"empty", DType::kBF16, {0, 7}, {}});
  out.push_back({"rank3", DType::kI64, {2, 1, 3}, random_bytes(48, 101)});
  return out;
}

void add_all(SafetensorsWriter& w, const std::vector<Written>& ts) {
  for (const Written& t : ts) w.add(t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size());
}

void expect_view(const TensorView* v, const Written& t, std::span<const uint8_t> image) {
  ASSERT_NE(v, nullptr) << t.name;
  EXPECT_EQ(v->name, t.name);
  EXPECT_EQ(v->dtype, t.dtype) << t.name;
  EXPECT_EQ(v->shape, t.shape) << t.name;
  EXPECT_EQ(v->n_bytes, t.bytes.size()) << t.name;
  EXPECT_EQ(static_cast<size_t>(v->numel()) * dtype_size(v->dtype), v->n_bytes) << t.name;
  EXPECT_GE(v->data, image.data()) << t.name;
  EXPECT_LE(v->data + v->n_bytes, image.data() + image.size()) << t.name;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v->data) % dtype_size(v->dtype), 0u) << t.name << " misaligned";
  if (!t.bytes.empty()) {
    EXPECT_EQ(std::memcmp(v->data, t.bytes.data(), t.bytes.size()), 0) << t.name;
  }
}

TEST(DTypeTest, NamesSizesAndParse) {
  const size_t sizes[] = {2, 4, 1, 1, 1, 8, 4, 1, 2};
  const char* names[] = {"BF16", "F32", "F8_E4M3", "F8_E8M0", "I8", "I64", "I32", "U8", "F16"};
  for (size_t i = 0; i < std::size(kAllDTypes); ++i) {
    EXPECT_EQ(dtype_name(kAllDTypes[i]), names[i]);
    EXPECT_EQ(dtype_size(kAllDTypes[i]), sizes[i]);
    auto p = parse_dtype(names[i]);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, kAllDTypes[i]);
  }
  auto bad = parse_dtype("F64");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "unknown dtype \"F64\" (known: BF16, F32, F8_E4M3, F8_E8M0, I8, I64, I32, U8, F16)");
  EXPECT_FALSE(parse_dtype("bf16").ok());  // case matters
}

TEST(SafetensorsTest, RoundTripEveryDType) {
  TmpDir tmp;
  const auto ts = sample_tensors();
  SafetensorsWriter w;
  add_all(w, ts);
  w.set_metadata("producer", "dsv4-test");
  EXPECT_EQ(w.n_tensors(), ts.size());
  const std::string path = tmp.file("model.safetensors");
  ASSERT_TRUE(w.write(path).ok());

  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ((*f)->path(), path);
  EXPECT_EQ((*f)->tensors().size(), ts.size());
  EXPECT_EQ((*f)->metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"producer", "dsv4-test"}}));
  for (const Written& t : ts) expect_view((*f)->find(t.name), t, (*f)->bytes());
  EXPECT_EQ((*f)->find("absent"), nullptr);

  // Layout: header padded with spaces to 8-byte alignment, data contiguous.
  const std::vector<uint8_t> raw = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_EQ(raw[0], static_cast<uint8_t>(n));
  size_t total = 0;
  for (const Written& t : ts) total += t.bytes.size();
  EXPECT_EQ(raw.size(), 8 + n + total);
  const std::string header(raw.begin() + 8, raw.begin() + 8 + static_cast<int64_t>(n));
  EXPECT_EQ(header.find('\n'), std::string::npos);
  EXPECT_EQ(header.substr(0, 16), "{\"__metadata__\":");
  EXPECT_EQ(header.find_last_not_of(' '), header.find_last_of('}'));
  // No stray temporary file.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(tmp.path()), {}), 1);
}

TEST(SafetensorsTest, WriterIsDeterministicAndOverwritesAtomically) {
  TmpDir tmp;
  auto ts = sample_tensors();
  SafetensorsWriter a, b;
  add_all(a, ts);
  std::reverse(ts.begin(), ts.end());
  add_all(b, ts);
  ASSERT_TRUE(a.write(tmp.file("a.safetensors")).ok());
  ASSERT_TRUE(b.write(tmp.file("b.safetensors")).ok());
  EXPECT_EQ(read_bytes(tmp.file("a.safetensors")), read_bytes(tmp.file("b.safetensors")));
  // Rewriting the same path replaces the content.
  SafetensorsWriter c;
  const std::vector<uint8_t> one = {1, 2, 3, 4};
  c.add("x", DType::kF32, {1}, one.data(), one.size());
  ASSERT_TRUE(c.write(tmp.file("a.safetensors")).ok());
  auto f = SafetensorsFile::open(tmp.file("a.safetensors"));
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ((*f)->tensors().size(), 1u);
  // A path in a missing directory is an error naming it.
  auto st = c.write(tmp.file("no/such/dir.safetensors"));
  ASSERT_FALSE(st.ok());
  expect_parts(st.message(), {"no/such/dir.safetensors", "cannot create"});
}

TEST(SafetensorsTest, ZeroTensorsFile) {
  TmpDir tmp;
  SafetensorsWriter w;
  ASSERT_TRUE(w.write(tmp.file("e.safetensors")).ok());
  auto f = SafetensorsFile::open(tmp.file("e.safetensors"));
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_TRUE((*f)->tensors().empty());
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
}

TEST(SafetensorsTest, AcceptsUnpaddedHeaderGapsAndTrailingBytes) {
  // Written by hand: header not padded, a 4-byte gap, 3 trailing bytes.
  const std::string h =
      R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[6,8]},"a":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}})";
  auto bytes = image(h, 11);
  auto f = SafetensorsFile::parse(bytes.data(), bytes.size(), "h.safetensors");
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ((*f)->find("a")->data, bytes.data() + 8 + h.size());
  EXPECT_EQ((*f)->find("b")->data, bytes.data() + 8 + h.size() + 6);
  EXPECT_TRUE((*f)->metadata().empty());
}

// ------------------------------------------------------------ sets

void write_index(const std::string& path, const std::string& weight_map_json) {
  const std::string s = R"({"metadata": {"total_size": 123}, "weight_map": )" + weight_map_json + "}";
  write_bytes(path, std::vector<uint8_t>(s.begin(), s.end()));
}

TEST(SafetensorsSetTest, SingleFile) {
  TmpDir tmp;
  const auto ts = sample_tensors();
  SafetensorsWriter w;
  add_all(w, ts);
  ASSERT_TRUE(w.write(tmp.file("model.safetensors")).ok());
  auto set = SafetensorsSet::open_dir(tmp.path());
  ASSERT_TRUE(set.ok()) << set.message();
  EXPECT_EQ(set->n_files(), 1u);
  EXPECT_EQ(set->tensors().size(), ts.size());
  for (const Written& t : ts) {
    const TensorView* v = set->find(t.name);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->shape, t.shape);
    if (!t.bytes.empty()) {
      EXPECT_EQ(std::memcmp(v->data, t.bytes.data(), t.bytes.size()), 0);
    }
  }
  EXPECT_EQ(set->find("absent"), nullptr);
}

TEST(SafetensorsSetTest, ShardedEveryDType) {
  TmpDir tmp;
  const auto ts = sample_tensors();
  std::vector<SafetensorsWriter> shards(3);
  std::string wm = "{";
  for (size_t i = 0; i < ts.size(); ++i) {
    const size_t s = i % 3;
    shards[s].add(ts[i].name, ts[i].dtype, ts[i].shape, ts[i].bytes.data(), ts[i].bytes.size());
    wm += (i ? ", \"" : "\"") + ts[i].name + "\": \"model-0000" + std::to_string(s + 1) + "-of-00003.safetensors\"";
  }
  wm += "}";
  for (size_t s = 0; s < 3; ++s)
    ASSERT_TRUE(shards[s].write(tmp.file("model-0000" + std::to_string(s + 1) + "-of-00003.safetensors")).ok());
  write_index(tmp.file("model.safetensors.index.json"), wm);
  // A stray single file is ignored when the index exists; so is an unlisted shard.
  SafetensorsWriter stray;
  ASSERT_TRUE(stray.write(tmp.file("model.safetensors")).ok());
  write_bytes(tmp.file("model-00009-of-00009.safetensors"), {1, 2, 3});

  auto set = SafetensorsSet::open_dir(tmp.path());
  ASSERT_TRUE(set.ok()) << set.message();
  EXPECT_EQ(set->n_files(), 3u);
  EXPECT_EQ(set->tensors().size(), ts.size());
  for (const Written& t : ts) {
    const TensorView* v = set->find(t.name);
    ASSERT_NE(v, nullptr) << t.name;
    EXPECT_EQ(v->dtype, t.dtype);
    EXPECT_EQ(v->shape, t.shape);
    ASSERT_EQ(v->n_bytes, t.bytes.size());
    if (!t.bytes.empty()) {
      EXPECT_EQ(std::memcmp(v->data, t.bytes.data(), t.bytes.size()), 0) << t.name;
    }
  }
  // The set stays valid after a move (views live in the shared files).
  SafetensorsSet moved = std::move(*set);
  EXPECT_NE(moved.find(ts[0].name), nullptr);
}

// Two shards: shard 1 holds a, b; shard 2 holds c.
void write_two_shards(const TmpDir& tmp) {
  const std::vector<uint8_t> four = {1, 2, 3, 4};
  SafetensorsWriter s1, s2;
  s1.add("a", DType::kF32, {1}, four.data(), 4);
  s1.add("b", DType::kI8, {4}, four.data(), 4);
  s2.add("c", DType::kU8, {2, 2}, four.data(), 4);
  ASSERT_TRUE(s1.write(tmp.file("s1.safetensors")).ok());
  ASSERT_TRUE(s2.write(tmp.file("s2.safetensors")).ok());
}

std::string set_error(const TmpDir& tmp) {
  auto set = SafetensorsSet::open_dir(tmp.path());
  EXPECT_FALSE(set.ok());
  return set.ok() ? std::string() : set.message();
}

TEST(SafetensorsSetTest, NeitherFileExists) {
  TmpDir tmp;
  EXPECT_EQ(set_error(tmp), tmp.path() + ": neither model.safetensors.index.json nor model.safetensors exists");
  auto missing = SafetensorsSet::open_dir(tmp.file("nope"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.message(), tmp.file("nope") + ": not a directory");
}

TEST(SafetensorsSetTest, MissingShard) {
  TmpDir tmp;
  write_two_shards(tmp);
  write_index(tmp.file("model.safetensors.index.json"),
              R"({"a": "s1.safetensors", "b": "s1.safetensors", "c": "s3.safetensors"})");
  expect_parts(set_error(tmp), {"model.safetensors.index.json", "shard \"s3.safetensors\" (listed for tensor \"c\")",
                                tmp.file("s3.safetensors"), "cannot open", "No such file"});
}

TEST(SafetensorsSetTest, NameMissingFromItsShard) {
  TmpDir tmp;
  write_two_shards(tmp);
  write_index(tmp.file("model.safetensors.index.json"),
              R"({"a": "s1.safetensors", "b": "s1.safetensors", "c": "s1.safetensors"})");
  EXPECT_EQ(set_error(tmp), tmp.file("model.safetensors.index.json") +
                                ": tensor \"c\" is mapped to shard \"s1.safetensors\", which does not contain it");
}

TEST(SafetensorsSetTest, TensorInTwoShards) {
  TmpDir tmp;
  const std::vector<uint8_t> four = {1, 2, 3, 4};
  SafetensorsWriter s1, s2;
  s1.add("a", DType::kF32, {1}, four.data(), 4);
  s2.add("a", DType::kF32, {1}, four.data(), 4);
  s2.add("c", DType::kF32, {1}, four.data(), 4);
  ASSERT_TRUE(s1.write(tmp.file("s1.safetensors")).ok());
  ASSERT_TRUE(s2.write(tmp.file("s2.safetensors")).ok());
  write_index(tmp.file("model.safetensors.index.json"), R"({"a": "s1.safetensors", "c": "s2.safetensors"})");
  EXPECT_EQ(set_error(tmp), tmp.file("model.safetensors.index.json") +
                                ": tensor \"a\" is in shard \"s2.safetensors\" and in shard \"s1.safetensors\"");
}

TEST(SafetensorsSetTest, TensorNotListedInIndex) {
  TmpDir tmp;
  write_two_shards(tmp);
  write_index(tmp.file("model.safetensors.index.json"), R"({"a": "s1.safetensors", "c": "s2.safetensors"})");
  expect_parts(set_error(tmp), {"shard \"s1.safetensors\" holds tensor \"b\", which the weight_map does not list"});
}

TEST(SafetensorsSetTest, ShardNamesMustStayInDirectory) {
  TmpDir tmp;
  write_two_shards(tmp);
  for (const char* bad : {"../s1.safetensors", "sub/s1.safetensors", "/etc/passwd", "..", ""}) {
    write_index(tmp.file("model.safetensors.index.json"),
                std::string(R"({"a": ")") + bad + R"(", "b": "s1.safetensors", "c": "s2.safetensors"})");
    expect_parts(set_error(tmp),
                 {"tensor \"a\" maps to \"" + std::string(bad) + "\": a shard must be a plain file name"});
  }
}

TEST(SafetensorsSetTest, MalformedIndex) {
  TmpDir tmp;
  write_two_shards(tmp);
  const std::string index = tmp.file("model.safetensors.index.json");
  auto check = [&](const std::string& text, const std::string& part) {
    write_bytes(index, std::vector<uint8_t>(text.begin(), text.end()));
    expect_parts(set_error(tmp), {index + ": ", part});
  };
  check("{\"weight_map\": {\"a\": \"s1.safetensors\",}}", "is not valid JSON (byte");
  check("[1]", "content is [1], not a JSON object");
  check("{\"metadata\": {}}", "missing \"weight_map\"");
  check("{\"weight_map\": [\"a\"]}", "\"weight_map\" is [\"a\"], not an object");
  check("{\"weight_map\": {\"a\": 7}}", "tensor \"a\" maps to 7, not a file name");
  check("{\"weight_map\": {\"a\": \"s1.safetensors\", \"a\": \"s2.safetensors\"}}",
        "lists key \"a\" twice inside \"weight_map\"");
}

// The index parser on its own (the fuzz target's entry point): no files touched.
TEST(SafetensorsSetTest, ParseShardIndexInMemory) {
  auto index = parse_shard_index(R"({"metadata": {"total_size": 1}, "weight_map": {"b": "s2", "a": "s1"}})", "idx");
  ASSERT_TRUE(index.ok()) << index.message();
  EXPECT_EQ(*index, (ShardIndex{{"a", "s1"}, {"b", "s2"}}));
  auto bad = parse_shard_index(R"({"weight_map": {"a": "x/../y"}})", "idx");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "idx: tensor \"a\" maps to \"x/../y\": a shard must be a plain file name inside the directory");
  EXPECT_FALSE(parse_shard_index("{\"weight_map\": {\"\xC3\": \"s1\"}}", "idx").ok());  // not UTF-8
}

// ------------------------------------------------------------ file errors

TEST(SafetensorsErrorTest, TruncatedFile) {
  TmpDir tmp;
  write_bytes(tmp.file("short.safetensors"), {1, 2, 3, 4, 5});
  auto f = SafetensorsFile::open(tmp.file("short.safetensors"));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.message(), tmp.file("short.safetensors") + ": file is 5 bytes, shorter than the 8-byte header length field");
  write_bytes(tmp.file("zero.safetensors"), {});
  auto z = SafetensorsFile::open(tmp.file("zero.safetensors"));
  ASSERT_FALSE(z.ok());
  expect_parts(z.message(), {"zero.safetensors: file is 0 bytes"});

  // A valid file cut inside its data section: the last tensor ends past it.
  const std::vector<uint8_t> data(64, 7);
  SafetensorsWriter w;
  w.add("a", DType::kF32, {4}, data.data(), 16);
  w.add("b", DType::kF32, {4, 4}, data.data(), 64);
  ASSERT_TRUE(w.write(tmp.file("cut.safetensors")).ok());
  auto raw = read_bytes(tmp.file("cut.safetensors"));
  raw.resize(raw.size() - 10);
  write_bytes(tmp.file("cut.safetensors"), raw);
  auto c = SafetensorsFile::open(tmp.file("cut.safetensors"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.message(), tmp.file("cut.safetensors") +
                             ": tensor \"b\": data_offsets [16, 80] end past the data section of 70 bytes");
}

TEST(SafetensorsErrorTest, MissingOrNonRegularFile) {
  TmpDir tmp;
  auto f = SafetensorsFile::open(tmp.file("none.safetensors"));
  ASSERT_FALSE(f.ok());
  expect_parts(f.message(), {"none.safetensors: cannot open: No such file or directory"});
  auto d = SafetensorsFile::open(tmp.path());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.message(), tmp.path() + ": not a readable regular file");
}

TEST(SafetensorsErrorTest, HeaderLength) {
  const std::string h = R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  EXPECT_EQ(parse_error(image(h, 1, 1000)),
            "t.safetensors: header length 1000 runs past the end of the file (" + std::to_string(8 + h.size() + 1) +
                " bytes, room for " + std::to_string(h.size() + 1) + ")");
  EXPECT_EQ(parse_error(image(h, 1, 0)), "t.safetensors: header length is 0");
  EXPECT_EQ(parse_error(image(h, 1, (100 << 20) + 1)),
            "t.safetensors: header length 104857601 exceeds the limit of 104857600 bytes");
  EXPECT_EQ(parse_error(image(h, 1, ~uint64_t{1})), "t.safetensors: header length 18446744073709551614 exceeds the limit of 104857600 bytes");
  // One byte short: the JSON is cut.
  expect_parts(parse_error(image(h, 1, h.size() - 1)),
               {"t.safetensors: header is not valid JSON (byte"});
}

TEST(SafetensorsErrorTest, BadJson) {
  expect_parts(parse_error(image(R"({"a": {"dtype": "U8",, }})", 0)),
               {"t.safetensors: header is not valid JSON (byte 22 of 25): ", "syntax error"});
  expect_parts(parse_error(image("{\"a\xff\": 1}", 0)), {"header is not valid JSON", "\\xFF"});
  expect_parts(parse_error(image("{} x", 0)), {"header is not valid JSON"});
  EXPECT_EQ(parse_error(image("[1, 2]", 0)), "t.safetensors: header is [1,2], not a JSON object");
  EXPECT_EQ(parse_error(image("\"x\"", 0)), "t.safetensors: header is \"x\", not a JSON object");
  EXPECT_EQ(parse_error(image(R"({"a": [[[[1]]]]})", 0)), "t.safetensors: header nests deeper than 3 levels");
}

// The header goes through the bounded SAX parser: a value count past the limit is refused by
// name before the DOM grows (2^23 + 1 values here, a 16 MiB header). The callback parser
// before it had no value bound, and scanned the parent array at every object's end
// ({"a": [{}, {}, ...]}: quadratic).
TEST(SafetensorsErrorTest, HeaderValueLimit) {
  std::string h = R"({"a": {"shape": [0)";
  h.reserve(h.size() + 2 * (size_t{1} << 23) + 8);
  for (int64_t i = 0; i < (int64_t{1} << 23); ++i) h += ",0";
  h += "]}}";
  EXPECT_EQ(parse_error(image(h, 0)), "t.safetensors: header holds more than 8388608 values (the limit)");
  std::string objects = R"({"a": [{})";
  for (int i = 0; i < 200000; ++i) objects += ",{}";
  objects += "]}";
  expect_parts(parse_error(image(objects, 0)), {"t.safetensors: tensor \"a\": entry is [{},{},", "not an object"});
}

TEST(SafetensorsErrorTest, UnknownDType) {
  EXPECT_EQ(parse_error(image(R"({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", 8)),
            "t.safetensors: tensor \"w\": unknown dtype \"F64\" (known: BF16, F32, F8_E4M3, F8_E8M0, I8, I64, I32, "
            "U8, F16)");
}

TEST(SafetensorsErrorTest, OffsetsOutOfRange) {
  EXPECT_EQ(parse_error(image(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})", 20)),
            "t.safetensors: tensor \"w\": data_offsets [8, 24] end past the data section of 20 bytes");
  EXPECT_EQ(parse_error(image(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [21, 21]}})", 20)),
            "t.safetensors: tensor \"w\": data_offsets [21, 21] end past the data section of 20 bytes");
  EXPECT_EQ(parse_error(image(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [24, 8]}})", 20)),
            "t.safetensors: tensor \"w\": data_offsets [24, 8] have begin > end");
  EXPECT_EQ(parse_error(image(
                R"({"w": {"dtype": "U8", "shape": [16], "data_offsets": [18446744073709551615, 15]}})", 20)),
            "t.safetensors: tensor \"w\": data_offsets [18446744073709551615, 15] have begin > end");
}

TEST(SafetensorsErrorTest, OverlappingOffsets) {
  EXPECT_EQ(parse_error(image(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                  "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
                              24)),
            "t.safetensors: tensor \"b\": data_offsets [8, 24] overlap tensor \"a\" [0, 16]");
  // Contained range, reported against the enclosing tensor.
  EXPECT_EQ(parse_error(image(R"({"big": {"dtype": "U8", "shape": [32], "data_offsets": [0, 32]},
                                  "mid": {"dtype": "U8", "shape": [4], "data_offsets": [20, 24]},
                                  "x": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}})",
                              32)),
            "t.safetensors: tensor \"x\": data_offsets [4, 8] overlap tensor \"big\" [0, 32]");
  // Identical ranges; empty ranges overlap nothing.
  expect_parts(parse_error(image(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                                     "b": {"dtype": "I8", "shape": [4], "data_offsets": [0, 4]}})",
                                 4)),
               {"overlap tensor"});
  const auto ok = image(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                            "e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [2, 2]}})",
                        4);
  EXPECT_TRUE(SafetensorsFile::parse(ok.data(), ok.size(), "t").ok());
}

TEST(SafetensorsErrorTest, ShapeByteSizeMismatch) {
  EXPECT_EQ(
      parse_error(image(R"({"layers.0.attn.wkv.weight": {"dtype": "F8_E4M3", "shape": [4, 16], "data_offsets": [0, 100]}})",
                        100),
                  "model.safetensors"),
      "model.safetensors: tensor \"layers.0.attn.wkv.weight\": data_offsets [0, 100] hold 100 bytes but shape [4, 16] "
      "x F8_E4M3 needs 64");
  EXPECT_EQ(parse_error(image(R"({"s": {"dtype": "BF16", "shape": [], "data_offsets": [0, 4]}})", 4)),
            "t.safetensors: tensor \"s\": data_offsets [0, 4] hold 4 bytes but shape [] x BF16 needs 2");
}

TEST(SafetensorsErrorTest, OverflowingShape) {
  EXPECT_EQ(parse_error(image(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})", 0)),
            "t.safetensors: tensor \"w\": shape [4294967296, 4294967296] x F32 needs more than 2^63-1 bytes");
  // Fits in u64 bytes but not in 2^63-1; and wraps to a small value modulo 2^64.
  EXPECT_EQ(parse_error(image(R"({"w": {"dtype": "I64", "shape": [1152921504606846976, 2], "data_offsets": [0, 0]}})", 0)),
            "t.safetensors: tensor \"w\": shape [1152921504606846976, 2] x I64 needs more than 2^63-1 bytes");
  EXPECT_EQ(parse_error(image(R"({"w": {"dtype": "U8", "shape": [18446744073709551615], "data_offsets": [0, 0]}})", 0)),
            "t.safetensors: tensor \"w\": shape [18446744073709551615] x U8 needs more than 2^63-1 bytes");
  EXPECT_EQ(parse_error(image(
                R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 4, 0], "data_offsets": [0, 0]}})", 0)),
            "t.safetensors: tensor \"w\": shape [4611686018427387904, 4, 0] x F32 needs more than 2^63-1 bytes");
}

TEST(SafetensorsErrorTest, MalformedEntries) {
  auto err = [](const std::string& entry) {
    return parse_error(image("{\"w\": " + entry + "}", 16));
  };
  const std::string pre = "t.safetensors: tensor \"w\": ";
  EXPECT_EQ(err("[1]"), pre + "entry is [1], not an object");
  EXPECT_EQ(err(R"({"shape": [4], "data_offsets": [0, 4]})"), pre + "missing \"dtype\"");
  EXPECT_EQ(err(R"({"dtype": "U8", "data_offsets": [0, 4]})"), pre + "missing \"shape\"");
  EXPECT_EQ(err(R"({"dtype": "U8", "shape": [4]})"), pre + "missing \"data_offsets\"");
  EXPECT_EQ(err(R"({"dtype": 3, "shape": [4], "data_offsets": [0, 4]})"), pre + "\"dtype\" is 3, not a string");
  EXPECT_EQ(err(R"({"dtype": "U8", "shape": 4, "data_offsets": [0, 4]})"), pre + "\"shape\" is 4, not an array");
  EXPECT_EQ(err(R"({"dtype": "U8", "shape": [2, -2], "data_offsets": [0, 4]})"),
            pre + "shape[1] is -2, not a non-negative integer");
  EXPECT_EQ(err(R"({"dtype": "U8", "shape": [4.0], "data_offsets": [0, 4]})"),
            pre + "shape[0] is 4.0, not a non-negative integer");
  EXPECT_EQ(err(R"({"dtype": "U8", "shape": [1e30], "data_offsets": [0, 4]})"),
            pre + "shape[0] is 1e+30, not a non-negative integer");
  EXPECT_EQ(err(R"({"dtype": "U8", "shape": [18446744073709551616], "data_offsets": [0, 4]})"),
            pre + "shape[0] is 1.8446744073709552e+19, not a non-negative integer");
  EXPECT_EQ(err(R"({"dtype": "U8", "shape": ["4"], "data_offsets": [0, 4]})"),
            pre + "shape[0] is \"4\", not a non-negative integer");
  EXPECT_EQ(err(R"({"dtype": "U8", "shape": [1,1,1,1,1,1,1,1,4], "data_offsets": [0, 4]})"),
            pre + "shape has rank 9, more than 8");
  EXPECT_EQ(err(R"({"dtype": "U8", "shape": [4], "data_offsets": [0]})"),
            pre + "\"data_offsets\" is [0], not [begin, end]");
  EXPECT_EQ(err(R"({"dtype": "U8", "shape": [4], "data_offsets": [0, -4]})"),
            pre + "data_offsets [0,-4] must hold two non-negative integers");
  EXPECT_EQ(err(R"({"dtype": "U8", "shape": [4], "data_offsets": [0, 4], "extra": 1})"),
            pre + "unknown key \"extra\" (expected dtype, shape, data_offsets)");
  EXPECT_EQ(err(R"({"dtype": "U8", "dtype": "I8", "shape": [4], "data_offsets": [0, 4]})"),
            "t.safetensors: header lists key \"dtype\" twice inside \"w\"");
  // "-0" is a valid zero.
  const auto ok = image(R"({"w": {"dtype": "U8", "shape": [-0], "data_offsets": [-0, 0]}})", 0);
  EXPECT_TRUE(SafetensorsFile::parse(ok.data(), ok.size(), "t").ok());
}

TEST(SafetensorsErrorTest, DuplicateNamesAndMetadata) {
  EXPECT_EQ(parse_error(image(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                                  "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                              2)),
            "t.safetensors: header lists key \"a\" twice");
  EXPECT_EQ(parse_error(image(R"({"": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})", 1)),
            "t.safetensors: tensor \"\": empty tensor name");
  EXPECT_EQ(parse_error(image(R"({"__metadata__": ["pt"]})", 0)),
            "t.safetensors: \"__metadata__\" is [\"pt\"], not an object");
  EXPECT_EQ(parse_error(image(R"({"__metadata__": {"format": "pt", "n": 3}})", 0)),
            "t.safetensors: \"__metadata__\" value of \"n\" is 3, not a string");
  const auto ok = image(R"({"__metadata__": {"format": "pt", "k": "v"}})", 0);
  auto f = SafetensorsFile::parse(ok.data(), ok.size(), "t");
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ((*f)->metadata().at("k"), "v");
}

}  // namespace
}  // namespace dsv4
