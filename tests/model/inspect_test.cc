// `dsv4 inspect` report (model/inspect.h): config summary, one schedule line per layer
// with its kind / router / RoPE profile, tensor tallies by dtype, validation results, and
// FAILED reports for a missing config, an invalid config and a missing tensor.
#include "model/inspect.h"

#include <cstdio>
#include <map>

#include "model/cache_bytes.h"
#include "model/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "oracle/tiny_checkpoint.h"
#include "support/tmp_dir.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;


std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The schedule line of layer l ("  <l>  <name> ...").
std::string schedule_line(const std::string& text, int l, const std::string& name) {
  for (const std::string& line : lines_of(text)) {
    std::istringstream in(line);
    int idx = -1;
    std::string n;
    if ((in >> idx >> n) && idx == l && n == name) return line;
  }
  return "";
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

TEST(Inspect, TinyFp8Report) {
  test::TmpDir tmp;
  ASSERT_TRUE(make_tiny_checkpoint(tmp.path(), "tiny", 0, TinyQuant::kFp8).ok());
  const InspectReport r = inspect_checkpoint(tmp.path());
  EXPECT_TRUE(r.ok) << r.text;
  const std::string& t = r.text;
  // Schedule of model.md §14.1: ratios [0, 4, 8, 4, 0], hash layers 0 and 1.
  struct Row {
    int l;
    const char* name;
    const char* ratio;
    const char* kind;
    const char* router;
    const char* rope;
  };
  const Row rows[] = {{0, "layers.0", " 0 ", "SWA", "hash", "main"},
                      {1, "layers.1", " 4 ", "CSA", "hash", "compress"},
                      {2, "layers.2", " 8 ", "HCA", "score", "compress"},
                      {3, "layers.3", " 4 ", "CSA", "score", "compress"},
                      {4, "mtp.0", " 0 ", "SWA", "score", "main"}};
  for (const Row& row : rows) {
    const std::string line = schedule_line(t, row.l, row.name);
    ASSERT_FALSE(line.empty()) << "no schedule line for layer " << row.l << "\n" << t;
    for (const char* want : {row.ratio, row.kind, row.router, row.rope})
      EXPECT_TRUE(has(line, want)) << "layer " << row.l << ": '" << want << "' not in '" << line
                                   << "'";
  }
  for (const char* want :
       {"hidden_size 128", "8 routed (top 2) + 1 shared", "dense matrices FP8",
        "routed experts FP4",
        "expert_dtype fp4", "F8_E4M3", "F8_E8M0", "I8", "BF16", "F32", "I64",
        "validate: ok", "validate_level_a: ok", "load_weights: ok", "0 unexpected", "result: OK"})
    EXPECT_TRUE(has(t, want)) << "'" << want << "' missing from\n" << t;
}

TEST(Inspect, Tiny2BF16Report) {
  test::TmpDir tmp;
  ASSERT_TRUE(make_tiny_checkpoint(tmp.path(), "tiny2", 0, TinyQuant::kNone).ok());
  const InspectReport r = inspect_checkpoint(tmp.path());
  EXPECT_TRUE(r.ok) << r.text;
  EXPECT_TRUE(has(schedule_line(r.text, 2, "layers.2"), "HCA"));
  EXPECT_TRUE(has(schedule_line(r.text, 2, "layers.2"), "128"));
  for (const char* want : {"quantization_config absent", "dense matrices BF16",
                           "routed experts BF16", "result: OK"})
    EXPECT_TRUE(has(r.text, want)) << "'" << want << "' missing from\n" << r.text;
  for (const char* absent : {"F8_E4M3", "F8_E8M0", "I8 "})
    EXPECT_FALSE(has(r.text, absent)) << absent << "\n" << r.text;
}

TEST(Inspect, MissingDirectoryFails) {
  const InspectReport r = inspect_checkpoint("/nonexistent/dsv4/model");
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(has(r.text, "config: ERROR")) << r.text;
  EXPECT_TRUE(has(r.text, "result: FAILED")) << r.text;
}

TEST(Inspect, InvalidConfigNamesTheField) {
  test::TmpDir tmp;
  ASSERT_TRUE(make_tiny_checkpoint(tmp.path(), "tiny", 0, TinyQuant::kNone).ok());
  const std::string path = tmp.path() + "/config.json";
  nlohmann::json j;
  std::ifstream(path) >> j;
  j["o_groups"] = 3;  // 4 heads are not divisible into 3 groups
  std::ofstream(path, std::ios::trunc) << j.dump(2);
  const InspectReport r = inspect_checkpoint(tmp.path());
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(has(r.text, "validate: ERROR")) << r.text;
  EXPECT_TRUE(has(r.text, "o_groups")) << r.text;
  EXPECT_TRUE(has(r.text, "load_weights: skipped")) << r.text;
  EXPECT_TRUE(has(r.text, "result: FAILED")) << r.text;
}

// Rewrites model.safetensors without `drop` and with an extra tensor `extra` (if non-empty).
void rewrite_checkpoint(const std::string& dir, const std::string& drop, const std::string& extra) {
  std::vector<uint8_t> keep;
  SafetensorsWriter w;
  {
    Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::open(dir + "/model.safetensors");
    ASSERT_TRUE(f.ok()) << f.message();
    for (const auto& [name, v] : f.value()->tensors())
      if (name != drop) w.add(name, v.dtype, v.shape, v.data, v.n_bytes);
  }
  if (!extra.empty()) {
    const float x[2] = {1.0f, 2.0f};
    w.add(extra, DType::kF32, {2}, x, sizeof(x));
  }
  ASSERT_TRUE(w.write(dir + "/model.safetensors").ok());
}

TEST(Inspect, ReportsUnexpectedTensor) {
  test::TmpDir tmp;
  ASSERT_TRUE(make_tiny_checkpoint(tmp.path(), "tiny", 0, TinyQuant::kFp8).ok());
  rewrite_checkpoint(tmp.path(), "", "layers.0.attn.bogus");
  const InspectReport r = inspect_checkpoint(tmp.path());
  EXPECT_TRUE(r.ok) << r.text;  // reported, not fatal (checkpoint.md §7)
  EXPECT_TRUE(has(r.text, "1 unexpected")) << r.text;
  EXPECT_TRUE(has(r.text, "unexpected: layers.0.attn.bogus")) << r.text;
}

TEST(Inspect, MissingTensorFails) {
  test::TmpDir tmp;
  ASSERT_TRUE(make_tiny_checkpoint(tmp.path(), "tiny", 0, TinyQuant::kFp8).ok());
  rewrite_checkpoint(tmp.path(), "layers.2.attn.compressor.ape", "");
  const InspectReport r = inspect_checkpoint(tmp.path());
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(has(r.text, "load_weights: ERROR")) << r.text;
  EXPECT_TRUE(has(r.text, "layers.2.attn.compressor.ape")) << r.text;
  EXPECT_TRUE(has(r.text, "result: FAILED")) << r.text;
}

}  // namespace
}  // namespace dsv4

namespace dsv4 {
namespace {

// Cache bytes per token of context for the real Flash config (model.md §1.1): KV rows
// 584 B packed vs 1024 B bf16 (1.75x), indexer keys 68 vs 256 B (3.8x).
TEST(CacheBytes, FlashPerFamily) {
  const Result<ModelConfig> flash = preset_config("flash", true);
  ASSERT_TRUE(flash.ok()) << flash.message();
  const std::vector<CacheFamilyBytes> fams = cache_bytes_per_token(*flash);
  std::map<std::string, CacheFamilyBytes> by;
  for (const auto& f : fams) by[f.family] = f;
  ASSERT_EQ(by.count("CSA KV"), 1u);
  EXPECT_EQ(by["CSA KV"].row_bytes, 584);
  EXPECT_EQ(by["CSA KV"].row_bytes_bf16, 1024);
  EXPECT_EQ(by["indexer keys"].row_bytes, 68);
  EXPECT_EQ(by["indexer keys"].row_bytes_bf16, 256);
  EXPECT_EQ(by["HCA KV"].ratio, 128);
  EXPECT_FALSE(by["window KV"].per_token);
  std::printf("%s", cache_bytes_table(*flash).c_str());
}

}  // namespace
}  // namespace dsv4
