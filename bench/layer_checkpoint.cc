// Random one-layer checkpoints (layer_checkpoint.h).
#include "layer_checkpoint.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/math.h"
#include "model/checkpoint_table.h"
#include "numeric/bf16.h"
#include "oracle/tiny_checkpoint.h"

#include "bench_util.h"

namespace dsv4::bench {
namespace {

namespace fs = std::filesystem;

constexpr int kStampVersion = 2;  // 2: one layer, no MTP layer (dsv4 bench)
constexpr const char* kStampFile = "bench_layer.stamp";
constexpr uint64_t kSeed = 1;
constexpr int64_t kBigTensor = int64_t{1} << 20;  // BF16 matrices above this get the fast fill

// Fills `out` with the stored bytes of `spec` (values: layer_checkpoint.h).
Status generate_tensor(const ModelConfig& cfg, const TensorSpec& spec, uint64_t stream, std::vector<uint8_t>& out) {
  out.resize(spec.n_bytes());
  Rng rng{kSeed * 0x100000001b3ull + stream};
  if (spec.role == TensorRole::kScale) {
    std::fill(out.begin(), out.end(), spec.form == StorageForm::kFP4 ? uint8_t{120} : uint8_t{119});
    return Status();
  }
  if (spec.role == TensorRole::kMatrix && spec.form == StorageForm::kFP4) {
    for (size_t i = 0; i < out.size(); i += 8) {
      const uint64_t r = rng.next();
      std::memcpy(&out[i], &r, std::min<size_t>(8, out.size() - i));
    }
    return Status();
  }
  if (spec.role == TensorRole::kMatrix && spec.form == StorageForm::kFP8) {
    for (size_t i = 0; i < out.size(); i += 8) {
      const uint64_t r = rng.next();
      for (size_t j = 0; j < 8 && i + j < out.size(); ++j) {
        const uint8_t b = static_cast<uint8_t>(r >> (8 * j));
        out[i + j] = static_cast<uint8_t>((b & 0x80) | (((b & 0x7F) * 0x50) >> 7));
      }
    }
    return Status();
  }
  if (spec.dtype == DType::kBF16 && spec.shape.size() == 2 && spec.numel() > kBigTensor) {
    const float a = std::sqrt(3.0f / static_cast<float>(spec.shape[1]));  // variance a^2/3 = 1/in
    for (int64_t i = 0; i < spec.numel(); ++i) {
      const uint16_t b = bf16::from_float(rng.uniform() * a).bits;
      std::memcpy(&out[2 * i], &b, 2);
    }
    return Status();
  }
  Result<std::vector<float>> sample = tiny_tensor_sample(cfg, spec, kSeed);
  if (!sample.ok()) return sample.status();
  const std::vector<float>& v = sample.value();
  if (static_cast<int64_t>(v.size()) != spec.numel())
    return Status::errorf("tensor {}: {} values sampled, {} expected", spec.name, v.size(), spec.numel());
  for (size_t i = 0; i < v.size(); ++i) {
    if (spec.dtype == DType::kBF16) {
      const uint16_t b = bf16::from_float(v[i]).bits;
      std::memcpy(&out[2 * i], &b, 2);
    } else if (spec.dtype == DType::kF32) {
      std::memcpy(&out[4 * i], &v[i], 4);
    } else if (spec.dtype == DType::kI64) {
      const int64_t id = static_cast<int64_t>(v[i]);
      std::memcpy(&out[8 * i], &id, 8);
    } else {
      return Status::errorf("tensor {}: cannot generate dtype {}", spec.name, dtype_name(spec.dtype));
    }
  }
  return Status();
}

// Streams model.safetensors tensor by tensor: header with 64-byte aligned data offsets,
// then each tensor's bytes.
Status write_safetensors(const ModelConfig& cfg, const std::string& path) {
  const std::vector<TensorSpec> table = expected_tensors(cfg);
  std::vector<uint64_t> begin(table.size());
  std::string header = "{\"__metadata__\":{\"format\":\"pt\",\"dsv4_generator\":\"dsv4 bench\"}";
  uint64_t offset = 0;
  for (size_t i = 0; i < table.size(); ++i) {
    const TensorSpec& s = table[i];
    offset = ceil_div<uint64_t>(offset, 64) * 64;
    begin[i] = offset;
    header += fmt::format(",\"{}\":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}", s.name,
                          dtype_name(s.dtype), fmt::join(s.shape, ","), offset, offset + s.n_bytes());
    offset += s.n_bytes();
  }
  header += "}";
  while (header.size() % 8 != 0) header.push_back(' ');

  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::errorf("{}: cannot open for writing: {}", path, std::strerror(errno));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> guard(f, &std::fclose);
  auto put = [&](const void* p, size_t n) -> Status {
    if (n > 0 && std::fwrite(p, 1, n, f) != n) return Status::errorf("{}: write failed: {}", path, std::strerror(errno));
    return Status();
  };
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  DSV4_RETURN_IF_ERROR(put(len, 8));
  DSV4_RETURN_IF_ERROR(put(header.data(), header.size()));
  std::vector<uint8_t> bytes;
  const std::vector<uint8_t> zeros(64, 0);
  uint64_t pos = 0;
  for (size_t i = 0; i < table.size(); ++i) {
    DSV4_RETURN_IF_ERROR(put(zeros.data(), begin[i] - pos));
    DSV4_RETURN_IF_ERROR(generate_tensor(cfg, table[i], i, bytes));
    DSV4_RETURN_IF_ERROR(put(bytes.data(), bytes.size()));
    pos = begin[i] + bytes.size();
  }
  if (std::fflush(f) != 0) return Status::errorf("{}: flush failed: {}", path, std::strerror(errno));
  return Status();
}

std::string stamp_text(const ModelConfig& cfg) {
  return fmt::format("dsv4 bench layer checkpoint v{}\n{}\n", kStampVersion, to_config_json_text(cfg));
}

Status write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  return out ? Status() : Status::errorf("{}: cannot write", path);
}

// Reads one byte per 4 KiB page of every tensor.
uint64_t touch_pages(const SafetensorsSet& files) {
  uint64_t s = 0;
  for (const auto& [name, view] : files.tensors()) {
    const auto* p = static_cast<const uint8_t*>(view->data);
    for (size_t i = 0; i < view->n_bytes; i += 4096) s += p[i];
  }
  return s;
}

int64_t statm_field(int index) {
  std::ifstream in("/proc/self/statm");
  int64_t v = 0;
  for (int i = 0; i <= index && in; ++i) in >> v;
  return in ? v * sysconf(_SC_PAGESIZE) : 0;
}

}  // namespace

const char* layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::kCsa: return "csa";
    case LayerKind::kHca: return "hca";
    case LayerKind::kDspark: return "dspark";
  }
  return "";
}

Result<ModelConfig> bench_preset_config(const std::string& preset, LayerKind kind) {
  const bool ds = kind == LayerKind::kDspark;
  if (preset == "flash") return preset_config(ds ? "flash-0731" : "flash", true);
  if (preset == "tiny") return tiny_config(ds ? "tiny-ds" : "tiny", TinyQuant::kFp8);
  return Status::errorf("--preset {}: unknown (known: flash, tiny)", preset);
}

Result<ModelConfig> bench_layer_config(const std::string& preset, LayerKind kind) {
  Result<ModelConfig> c = bench_preset_config(preset, kind);
  if (!c.ok()) return c.status();
  ModelConfig cfg = std::move(c.value());
  const bool ds = kind == LayerKind::kDspark;
  int ratio = 0;
  for (int l = 0; l < cfg.num_hidden_layers; ++l) {
    const int r = cfg.compress_ratios[static_cast<size_t>(l)];
    if (kind == LayerKind::kHca ? r > kCsaRatio : r == kCsaRatio) {
      ratio = r;
      break;
    }
  }
  if (ratio == 0) return Status::errorf("--preset {}: has no {} layer", preset, ds ? "csa" : layer_kind_name(kind));
  cfg.num_hidden_layers = 1;
  cfg.compress_ratios = {ratio};
  cfg.num_hash_layers = 0;
  if (ds) {
    cfg.compress_ratios.push_back(0);  // one stage (num_nextn_predict_layers stays the stale 1)
    cfg.dspark->target_layer_ids = {0};
  } else {
    cfg.num_nextn_predict_layers = 0;
  }
  DSV4_RETURN_IF_ERROR(validate_level_a(cfg));
  return cfg;
}

Status ensure_layer_checkpoint(const ModelConfig& cfg, const std::string& dir) {
  const std::string stamp = stamp_text(cfg);
  {
    std::ifstream in(dir + "/" + kStampFile, std::ios::binary);
    std::stringstream ss;
    if (in) ss << in.rdbuf();
    std::error_code ec;
    if (in && ss.str() == stamp && fs::is_regular_file(dir + "/model.safetensors", ec)) return Status();
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::errorf("cache directory {}: cannot create: {}", dir, ec.message());
  fs::remove(dir + "/" + kStampFile, ec);
  fs::remove(dir + "/model.safetensors.index.json", ec);
  std::printf("writing random layer checkpoint %s (once)\n", dir.c_str());
  std::fflush(stdout);
  const auto t0 = std::chrono::steady_clock::now();
  DSV4_RETURN_IF_ERROR(write_text(dir + "/config.json", to_config_json_text(cfg) + "\n"));
  const std::string tmp = dir + "/model.safetensors.partial";
  DSV4_RETURN_IF_ERROR(write_safetensors(cfg, tmp));
  fs::rename(tmp, dir + "/model.safetensors", ec);
  if (ec) return Status::errorf("{}: cannot rename: {}", tmp, ec.message());
  DSV4_RETURN_IF_ERROR(write_text(dir + "/" + kStampFile, stamp));
  std::printf("  written in %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return Status();
}

Result<std::unique_ptr<MappedLayer>> MappedLayer::open(const std::string& dir, const ModelConfig& cfg) {
  std::unique_ptr<MappedLayer> m(new MappedLayer());
  m->file_ = dir + "/model.safetensors";
  Result<SafetensorsSet> files = SafetensorsSet::open_dir(dir);
  if (!files.ok()) return files.status();
  m->files_ = std::make_unique<SafetensorsSet>(std::move(files.value()));
  // Touched before the load: the loader then copies the FP4 / FP8 matrices it packs (Weights::packed)
  // and releases their file pages, as it does for the engine.
  volatile uint64_t sink = touch_pages(*m->files_);
  static_cast<void>(sink);
  Result<Weights> w = load_weights(*m->files_, cfg, nullptr);
  if (!w.ok()) return w.status();
  m->weights_ = std::make_unique<Weights>(std::move(w.value()));
  return m;
}

MappedLayer::~MappedLayer() {
  weights_.reset();
  files_.reset();  // munmap
  const int fd = ::open(file_.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

int64_t current_rss_bytes() { return statm_field(1); }

}  // namespace dsv4::bench
