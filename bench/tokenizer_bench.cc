// Tokenizer encode / decode throughput on one core, in MB/s of UTF-8 text, over a
// deterministic ~1 MB mixed corpus (English prose, code with tabs and CRLF, numbers,
// CJK, Cyrillic, emoji, long whitespace runs). Vocabulary: --tokenizer=PATH to a
// tokenizer.json (e.g. the DeepSeek-V3 file of the npm conformance test), else the tiny
// tokenizer of text.md §5. Run: build/release/bench/tokenizer_bench [--tokenizer=PATH]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "text/tiny_tokenizer.h"
#include "text/tokenizer.h"

namespace dsv4 {
namespace {

const Tokenizer* g_tokenizer = nullptr;

std::string mixed_corpus(size_t bytes) {
  static const char* kParts[] = {
      "The committee reviewed the proposal on Tuesday, and it wasn't approved; members asked "
      "for a revised budget (about $1,250,000) before 2025-03-31. ",
      "def forward(self, x):\r\n\tif x is None:\r\n\t\treturn 0\r\n\ty = self.linear(x) * 2.5\r\n\t"
      "return torch.relu(y) + 1e-6\r\n",
      "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }\n",
      "深度求索发布了新的模型，它在推理任务上表现出色。我们今天去北京。",
      "これは日本語のテストです。カタカナとひらがな。",
      "Привет, мир! Это тестовое предложение на русском языке. ",
      "Emoji: 🙂 👩‍👩‍👧 🇫🇷 👍🏽 and accents: naïve café résumé. ",
      "Numbers 3.14159 2718281828 42 1000000 0x1F ",
      "                                \n\n\n",
  };
  bench::Rng rng{1};
  std::string s;
  while (s.size() < bytes) s += kParts[rng.next() % std::size(kParts)];
  return s;
}

void BM_Encode(benchmark::State& state) {
  const std::string text = mixed_corpus(1 << 20);
  std::vector<int32_t> ids;
  for (auto _ : state) {
    ids.clear();
    g_tokenizer->encode_append(text, true, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["bytes_per_token"] = static_cast<double>(text.size()) / static_cast<double>(ids.size());
}
BENCHMARK(BM_Encode)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_Decode(benchmark::State& state) {
  const std::string text = mixed_corpus(1 << 20);
  const std::vector<int32_t> ids = g_tokenizer->encode(text, true);
  for (auto _ : state) {
    Result<std::string> out = g_tokenizer->decode(ids);
    benchmark::DoNotOptimize(out.value().data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dsv4

int main(int argc, char** argv) {
  std::string path;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--tokenizer=", 12) == 0) path = argv[i] + 12;
    else rest.push_back(argv[i]);
  }
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  dsv4::Result<dsv4::Tokenizer> tok = [&]() -> dsv4::Result<dsv4::Tokenizer> {
    if (!path.empty()) return dsv4::Tokenizer::load(path);
    dsv4::Result<dsv4::TinyTokenizerFiles> files = dsv4::make_tiny_tokenizer();
    if (!files.ok()) return files.status();
    return dsv4::Tokenizer::from_json(files->tokenizer_json, "tiny");
  }();
  if (!tok.ok()) dsv4::bench::die("tokenizer_bench", tok.status());
  dsv4::g_tokenizer = &tok.value();
  std::printf("tokenizer: %s (%d ids)\n", path.empty() ? "tiny (text.md §5)" : path.c_str(),
              tok->n_vocab());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
