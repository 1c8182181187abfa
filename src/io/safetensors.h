// safetensors reader (mmap, zero-copy views) and writer. The file is untrusted:
// the header length is bounded, the JSON must be well formed, every dtype known,
// shape x dtype size must equal the byte range, ranges must lie inside the data
// section and must not overlap, and no size computation may overflow. Every
// failure is a Status naming the file, the tensor and what is wrong.
//
// Layout: u64 little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the data section; offsets are relative to the start of the data section.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace dsv4 {

enum class DType { kBF16, kF32, kF8_E4M3, kF8_E8M0, kI8, kI64, kI32, kU8, kF16 };

// Name as written in the header ("BF16", "F8_E4M3", ...) and element size.
std::string_view dtype_name(DType t);
size_t dtype_size(DType t);
Result<DType> parse_dtype(std::string_view name);

// Zero-copy view of one tensor inside a mapped file.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // points into the mapping
  size_t n_bytes = 0;
  int64_t numel() const;
  std::string shape_str() const;  // "[4, 128]"
};

// Largest header accepted (the released shards use well under 1 MiB).
constexpr uint64_t kMaxSafetensorsHeader = 100ull << 20;

// One mapped .safetensors file.
class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  // Parses a complete file image held in memory (used by tests and the fuzzer);
  // the buffer must outlive the object.
  static Result<std::unique_ptr<SafetensorsFile>> parse(const uint8_t* bytes, size_t size,
                                                        const std::string& display_name);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorView* find(const std::string& name) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint directory: model.safetensors, or the shards named by
// model.safetensors.index.json ({"metadata": ..., "weight_map": {name: file}}).
// Every tensor name resolves to exactly one view; a name in the index that is
// missing from its shard, or a tensor present in two shards, is an error.
class SafetensorsSet {
 public:
  static Result<SafetensorsSet> open_dir(const std::string& dir);
  const TensorView* find(const std::string& name) const;
  const std::map<std::string, const TensorView*>& tensors() const { return index_; }
  size_t n_files() const { return files_.size(); }

 private:
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
};

// Writer: collects tensors (copied) and writes one file, 8-byte aligned data.
class SafetensorsWriter {
 public:
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
           size_t n_bytes);
  void set_metadata(const std::string& key, const std::string& value);
  Status write(const std::string& path) const;
  size_t n_tensors() const { return entries_.size(); }

 private:
  struct Entry {
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace dsv4
