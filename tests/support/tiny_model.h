// Tiny checkpoints for model-level tests: made with make_tiny_checkpoint into
// $DSV4_TEST_TMP (or /tmp) once per test binary and (preset, quant, seed), then
// loaded and kept for the binary's lifetime; and the committed models (DSV4_MODELS_DIR).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <vector>
#include <string>

#include "io/safetensors.h"
#include "model/config.h"
#include "model/weights.h"
#include "oracle/tiny_checkpoint.h"

namespace dsv4::test {

struct TinyModel {
  std::string dir;
  ModelConfig cfg;
  std::unique_ptr<Weights> w;
};

// n token ids drawn uniformly from [0, vocab) by mt19937(seed).
inline std::vector<int32_t> random_tokens(int n, uint32_t seed, int64_t vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

// The config and weights of m.dir into m (failures are test failures).
inline void load_model_dir(TinyModel& m) {
  Result<ModelConfig> cfg = load_config(m.dir);
  EXPECT_TRUE(cfg.ok()) << cfg.message();
  if (cfg.ok()) m.cfg = *cfg;
  Result<SafetensorsSet> files = SafetensorsSet::open_dir(m.dir);
  EXPECT_TRUE(files.ok()) << files.message();
  if (files.ok()) {
    Result<Weights> w = load_weights(*files, m.cfg, nullptr);
    EXPECT_TRUE(w.ok()) << w.message();
    if (w.ok()) m.w = std::make_unique<Weights>(std::move(*w));
  }
}

// max_position > 0 overrides max_position_embeddings (long-context tests).
inline const TinyModel& tiny_model(const std::string& preset, TinyQuant quant, uint64_t seed = 1,
                                   int64_t max_position = 0) {
  static std::map<std::string, std::unique_ptr<TinyModel>> cache;
  const std::string key = preset + "-" + std::string(tiny_quant_name(quant)) + "-seed" + std::to_string(seed) +
                          (max_position > 0 ? "-pos" + std::to_string(max_position) : "");
  if (auto it = cache.find(key); it != cache.end()) return *it->second;
  const char* env = std::getenv("DSV4_TEST_TMP");
  auto m = std::make_unique<TinyModel>();
  m->dir = std::string(env != nullptr && *env ? env : "/tmp/dsv4_test") + "/" + key;
  std::filesystem::create_directories(m->dir);
  TinyOverrides over;
  if (max_position > 0) over.max_position_embeddings = max_position;
  const Status st = make_tiny_checkpoint(m->dir, preset, seed, quant, over);
  EXPECT_TRUE(st.ok()) << st.message();
  load_model_dir(*m);
  return *(cache[key] = std::move(m));
}

#ifdef DSV4_MODELS_DIR
// A committed model of models/ (e.g. "kjv-9m-dspark"), loaded once per test binary.
inline const TinyModel& committed_model(const std::string& name) {
  static std::map<std::string, std::unique_ptr<TinyModel>> cache;
  if (auto it = cache.find(name); it != cache.end()) return *it->second;
  auto m = std::make_unique<TinyModel>();
  m->dir = std::string(DSV4_MODELS_DIR) + "/" + name;
  load_model_dir(*m);
  return *(cache[name] = std::move(m));
}
#endif

// The short names tests use: the tiny model of a preset at seed 1, and n random token ids.
inline const TinyModel& model(const std::string& preset, TinyQuant q) { return tiny_model(preset, q, 1); }
inline std::vector<int32_t> tokens(int n, uint32_t seed, int64_t vocab) { return random_tokens(n, seed, vocab); }

}  // namespace dsv4::test
