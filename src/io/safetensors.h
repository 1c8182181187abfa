// safetensors reader (mmap, zero-copy views) and writer. The file is untrusted:
// the header length is bounded, the JSON must be well formed, every dtype known,
// shape x dtype size must equal the byte range, ranges must lie inside the data
// section and must not overlap, and no size computation may overflow. Every
// failure is a Status naming the file, the tensor and what is wrong.
//
// Layout: u64 little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the data section; offsets are relative to the start of the data section.
//
// Reader rules beyond the format: a JSON key repeated in one object (a tensor
// listed twice, or "dtype" twice in an entry) is an error; unknown entry keys
// are an error; rank <= kMaxRank; gaps between tensor ranges and trailing bytes
// after the last range are allowed (they hold no tensor). A view's data pointer
// is aligned to its element size only if the writer aligned it (SafetensorsWriter
// and the Python safetensors library do); readers of wider types must not assume
// it. The mapping must not be truncated by another process while in use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
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
  size_t n_bytes = 0;             // == numel() * dtype_size(dtype)
  int64_t numel() const;
  std::string shape_str() const;  // "[4, 128]"
};

// Largest header accepted (the released shards use well under 1 MiB).
constexpr uint64_t kMaxSafetensorsHeader = 100ull << 20;
// Largest tensor rank accepted (the checkpoint uses rank <= 2).
constexpr size_t kMaxSafetensorsRank = 8;

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
  // The whole file image (every view lies inside it).
  std::span<const uint8_t> bytes() const { return {bytes_, size_}; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  const uint8_t* bytes_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;  // owned mapping (open) or null (parse)
  size_t map_size_ = 0;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// model.safetensors.index.json text ({"metadata": ..., "weight_map": {name: file}})
// -> tensor name -> shard file name. Strict JSON (valid UTF-8, no repeated key,
// nesting <= 64); every file a plain name (non-empty, no '/', "..", NUL).
// Errors are prefixed with `source`.
using ShardIndex = std::map<std::string, std::string>;
Result<ShardIndex> parse_shard_index(std::string_view text, const std::string& source);

// A checkpoint directory: model.safetensors, or the shards named by
// model.safetensors.index.json ({"metadata": ..., "weight_map": {name: file}}).
// Every tensor name resolves to exactly one view; a name in the index that is
// missing from its shard, a tensor present in two shards, or a tensor in a
// shard that the index does not list is an error. Shard file names must be
// plain names inside `dir` (no '/', no ".."). Each shard is mapped once.
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

// Writer: collects tensors (copied) and writes one file. Output is a pure
// function of the added tensors and metadata: header keys sorted by name,
// header padded with spaces so the data section starts 8-byte aligned, data
// laid out contiguously by (element size descending, name) so every tensor is
// aligned to its element size. __metadata__ holds {"format": "pt"} unless
// overridden. write() goes through a temporary file and rename(), so `path`
// either keeps its old content or holds the complete new file.
// add() with a size that does not match shape x dtype, an empty or repeated
// name, or the name "__metadata__" is a caller bug (DSV4_CHECK).
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
