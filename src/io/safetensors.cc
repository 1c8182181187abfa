// safetensors reader and writer (rules in safetensors.h). Parsing order for
// one file image of `size` bytes:
//   N = u64le(bytes[0..8)), 0 < N <= min(kMaxSafetensorsHeader, size - 8)
//   header = JSON object over bytes[8, 8+N), no repeated key, nesting <= 3, at most 2^23 values
//   data section = bytes[8+N, size), D = size - 8 - N bytes
//   per tensor: numel = prod(shape) and numel * dtype_size <= 2^63-1 (checked
//   multiplication), begin <= end, end - begin == numel * dtype_size, end <= D
//   ranges sorted by begin: no non-empty range starts before the previous ends.
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/huge_pages.h"
#include "io/file_util.h"
#include "io/json_bounded.h"

namespace dsv4 {
namespace {

using json = nlohmann::json;

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::kBF16, "BF16", 2},       {DType::kF32, "F32", 4}, {DType::kF8_E4M3, "F8_E4M3", 1},
    {DType::kF8_E8M0, "F8_E8M0", 1}, {DType::kI8, "I8", 1},   {DType::kI64, "I64", 8},
    {DType::kI32, "I32", 4},         {DType::kU8, "U8", 1},   {DType::kF16, "F16", 2},
};

const DTypeInfo& dtype_info(DType t) {
  for (const DTypeInfo& d : kDTypes)
    if (d.dtype == t) return d;
  DSV4_CHECK(false, "invalid DType {}", static_cast<int>(t));
  __builtin_unreachable();
}

constexpr uint64_t kMaxBytes = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
// Header nesting: header object > tensor entry > shape / data_offsets array.
constexpr int kHeaderMaxDepth = 3;
// The index's "metadata" is free-form; only the nesting is bounded.
constexpr int kIndexMaxDepth = 64;
constexpr uint64_t kMaxIndexBytes = 256ull << 20;
// Values (containers and scalars) in a header or an index: a checkpoint has about 10 per tensor
// and fewer than 10^6 tensors; the bound keeps the parsed form of a 100 MiB header of tiny values
// ([0,0,...]: ~16 bytes each parsed against 2 as text) within a few hundred MiB.
constexpr int64_t kMaxJsonValues = int64_t{1} << 23;

// A JSON value for an error message: compact, at most ~64 characters.
std::string describe(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 64) s = s.substr(0, 61) + "...";
  return s;
}
std::string quote(const std::string& s) { return describe(json(s)); }

// Non-printable and non-ASCII bytes as \xNN (parser messages quote raw input).
std::string printable(std::string_view s) {
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) out.push_back(c);
    else out += fmt::format("\\x{:02X}", u);
  }
  return out;
}

// nlohmann's message without its "[json.exception.<kind>.<id>] " prefix.
std::string exception_text(const json::exception& e) {
  std::string what = e.what();
  const size_t p = what.find("] ");
  return printable(p == std::string::npos ? what : what.substr(p + 2));
}

// The bounded SAX parser (io/json_bounded.h) that also refuses a key repeated within one
// object (nlohmann would keep the last value silently). The parse ends at the first refusal.
class StrictHeaderParser : public detail::BoundedDomParser<json> {
  using Base = detail::BoundedDomParser<json>;

 public:
  struct Repeated {
    std::string message;
  };
  using Base::Base;

  bool start_object(std::size_t n) {
    if (!Base::start_object(n)) return false;
    open_.emplace_back();
    return true;
  }
  bool start_array(std::size_t n) {
    if (!Base::start_array(n)) return false;
    open_.emplace_back();
    return true;
  }
  bool end_object() {
    open_.pop_back();
    return Base::end_object();
  }
  bool end_array() {
    open_.pop_back();
    return Base::end_array();
  }
  bool key(json::string_t& k) {
    if (open_.size() == 1) top_key_ = k;
    if (!open_.back().insert(k).second)
      throw Repeated{open_.size() == 1 ? fmt::format("lists key {} twice", quote(k))
                                       : fmt::format("lists key {} twice inside {}", quote(k), quote(top_key_))};
    return Base::key(k);
  }

 private:
  std::vector<std::unordered_set<std::string>> open_;  // keys seen, one set per open container
  std::string top_key_;
};

// Parses JSON text strictly: whole input, valid UTF-8, no key repeated within one object,
// nesting <= max_depth, at most kMaxJsonValues values; linear in the text. The error message
// completes "<what> ...", e.g. "is not valid JSON ...".
Result<json> parse_json_strict(const uint8_t* begin, const uint8_t* end, int max_depth) {
  json out;
  StrictHeaderParser parser(out, max_depth, kMaxJsonValues);
  try {
    json::sax_parse(begin, end, &parser);
    return out;
  } catch (const StrictHeaderParser::Repeated& r) {
    return Status::error(r.message);
  } catch (const StrictHeaderParser::TooDeep&) {
    return Status::errorf("nests deeper than {} levels", max_depth);
  } catch (const StrictHeaderParser::TooMany&) {
    return Status::errorf("holds more than {} values (the limit)", kMaxJsonValues);
  } catch (const json::parse_error& e) {
    return Status::errorf("is not valid JSON (byte {} of {}): {}", e.byte, end - begin, exception_text(e));
  } catch (const json::exception& e) {  // e.g. a number beyond double range
    return Status::errorf("is not valid JSON: {}", exception_text(e));
  }
}

// A non-negative JSON integer ("-0" included), else nullopt.
std::optional<uint64_t> as_u64(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() == 0) return uint64_t{0};
  return std::nullopt;
}

std::string shape_text(const std::vector<uint64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

struct Entry {
  const std::string* name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin;
  uint64_t end;
};

// Validates one tensor entry against a data section of data_size bytes. Errors
// name the tensor; the caller adds the file.
Result<Entry> parse_entry(const std::string& name, const json& v, uint64_t data_size) {
  const std::string tensor = "tensor " + quote(name);
  auto fail = [&](const std::string& what) { return Status::errorf("{}: {}", tensor, what); };
  if (name.empty()) return fail("empty tensor name");
  if (!v.is_object()) return fail(fmt::format("entry is {}, not an object", describe(v)));
  for (const auto& [key, unused] : v.items()) {
    (void)unused;
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      return fail(fmt::format("unknown key {} (expected dtype, shape, data_offsets)", quote(key)));
  }
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!v.contains(key)) return fail(fmt::format("missing \"{}\"", key));

  const json& jd = v["dtype"];
  if (!jd.is_string()) return fail(fmt::format("\"dtype\" is {}, not a string", describe(jd)));
  Result<DType> dtype = parse_dtype(jd.get_ref<const std::string&>());
  if (!dtype.ok()) return fail(dtype.message());
  const size_t elem = dtype_size(*dtype);

  const json& js = v["shape"];
  if (!js.is_array()) return fail(fmt::format("\"shape\" is {}, not an array", describe(js)));
  if (js.size() > kMaxSafetensorsRank)
    return fail(fmt::format("shape has rank {}, more than {}", js.size(), kMaxSafetensorsRank));
  std::vector<uint64_t> dims;
  for (size_t i = 0; i < js.size(); ++i) {
    const std::optional<uint64_t> d = as_u64(js[i]);
    if (!d) return fail(fmt::format("shape[{}] is {}, not a non-negative integer", i, describe(js[i])));
    dims.push_back(*d);
  }
  // numel and bytes with checked multiplication, both bounded by 2^63-1.
  uint64_t need = elem;
  bool overflow = false;
  for (const uint64_t d : dims) overflow |= __builtin_mul_overflow(need, d, &need) || need > kMaxBytes;
  if (overflow)
    return fail(fmt::format("shape {} x {} needs more than 2^63-1 bytes", shape_text(dims),
                            dtype_name(*dtype)));

  const json& jo = v["data_offsets"];
  if (!jo.is_array() || jo.size() != 2)
    return fail(fmt::format("\"data_offsets\" is {}, not [begin, end]", describe(jo)));
  const std::optional<uint64_t> b = as_u64(jo[0]), e = as_u64(jo[1]);
  if (!b || !e)
    return fail(fmt::format("data_offsets {} must hold two non-negative integers", describe(jo)));
  if (*b > *e) return fail(fmt::format("data_offsets [{}, {}] have begin > end", *b, *e));
  if (*e - *b != need)
    return fail(fmt::format("data_offsets [{}, {}] hold {} bytes but shape {} x {} needs {}", *b, *e,
                            *e - *b, shape_text(dims), dtype_name(*dtype), need));
  if (*e > data_size)
    return fail(fmt::format("data_offsets [{}, {}] end past the data section of {} bytes", *b, *e,
                            data_size));
  Entry out{&name, *dtype, {}, *b, *e};
  for (const uint64_t d : dims) out.shape.push_back(static_cast<int64_t>(d));
  return out;
}

}  // namespace

std::string_view dtype_name(DType t) { return dtype_info(t).name; }
size_t dtype_size(DType t) { return dtype_info(t).size; }

Result<DType> parse_dtype(std::string_view name) {
  for (const DTypeInfo& d : kDTypes)
    if (d.name == name) return d.dtype;
  std::vector<std::string_view> known;
  for (const DTypeInfo& d : kDTypes) known.push_back(d.name);
  return Status::errorf("unknown dtype {} (known: {})", quote(std::string(name)), fmt::join(known, ", "));
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::shape_str() const { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// ---------------------------------------------------------------- reader

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::parse(const uint8_t* bytes, size_t size,
                                                                const std::string& display_name) {
  auto fail = [&](const std::string& what) { return Status::errorf("{}: {}", display_name, what); };
  if (size < 8)
    return fail(fmt::format("file is {} bytes, shorter than the 8-byte header length field", size));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n == 0) return fail("header length is 0");
  if (n > kMaxSafetensorsHeader)
    return fail(fmt::format("header length {} exceeds the limit of {} bytes", n, kMaxSafetensorsHeader));
  if (n > size - 8)
    return fail(fmt::format("header length {} runs past the end of the file ({} bytes, room for {})", n,
                            size, size - 8));
  Result<json> header = parse_json_strict(bytes + 8, bytes + 8 + n, kHeaderMaxDepth);
  if (!header.ok()) return fail("header " + header.message());
  if (!header->is_object())
    return fail(fmt::format("header is {}, not a JSON object", describe(*header)));

  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = display_name;
  f->bytes_ = bytes;
  f->size_ = size;
  const uint64_t data_size = size - 8 - n;
  const uint8_t* data = bytes + 8 + n;

  std::vector<Entry> entries;
  for (const auto& [name, value] : header->get_ref<const json::object_t&>()) {
    if (name == "__metadata__") {
      if (!value.is_object())
        return fail(fmt::format("\"__metadata__\" is {}, not an object", describe(value)));
      for (const auto& [key, s] : value.get_ref<const json::object_t&>()) {
        if (!s.is_string())
          return fail(fmt::format("\"__metadata__\" value of {} is {}, not a string", quote(key),
                                  describe(s)));
        f->metadata_[key] = s.get<std::string>();
      }
      continue;
    }
    Result<Entry> e = parse_entry(name, value, data_size);
    if (!e.ok()) return fail(e.message());
    entries.push_back(std::move(*e));
  }

  // Overlap: sorted by begin, each non-empty range must start at or after the
  // furthest end so far.
  std::vector<const Entry*> order;
  for (const Entry& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  const Entry* last = nullptr;
  for (const Entry* e : order) {
    if (e->begin == e->end) continue;
    if (last != nullptr && e->begin < last->end)
      return fail(fmt::format("tensor {}: data_offsets [{}, {}] overlap tensor {} [{}, {}]", quote(*e->name),
                              e->begin, e->end, quote(*last->name), last->begin, last->end));
    if (last == nullptr || e->end > last->end) last = e;
  }

  for (Entry& e : entries) {
    TensorView v;
    v.name = *e.name;
    v.dtype = e.dtype;
    v.shape = std::move(e.shape);
    v.data = data + e.begin;
    v.n_bytes = static_cast<size_t>(e.end - e.begin);
    f->tensors_.emplace(v.name, std::move(v));
  }
  return f;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::errorf("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::errorf("{}: not a readable regular file", path);
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {  // mmap rejects length 0; parse reports the short file
    ::close(fd);
    static const uint8_t kEmpty[8] = {};
    return parse(kEmpty, size, path);
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (map == MAP_FAILED) return Status::errorf("{}: mmap of {} bytes failed: {}", path, size, std::strerror(map_err));
  Result<std::unique_ptr<SafetensorsFile>> f = parse(static_cast<const uint8_t*>(map), size, path);
  if (!f.ok()) {
    ::munmap(map, size);
    return f;
  }
  (*f)->map_ = map;
  (*f)->map_size_ = size;
  advise_willneed(map, size);  // the loader reads every tensor: start the read-ahead now
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

// ---------------------------------------------------------------- set

Result<ShardIndex> parse_shard_index(std::string_view text, const std::string& source) {
  auto fail = [&](const std::string& what) { return Status::errorf("{}: {}", source, what); };
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  Result<json> index = parse_json_strict(bytes, bytes + text.size(), kIndexMaxDepth);
  if (!index.ok()) return fail(index.message());
  if (!index->is_object()) return fail(fmt::format("content is {}, not a JSON object", describe(*index)));
  if (!index->contains("weight_map")) return fail("missing \"weight_map\"");
  const json& wm = (*index)["weight_map"];
  if (!wm.is_object()) return fail(fmt::format("\"weight_map\" is {}, not an object", describe(wm)));

  ShardIndex out;
  for (const auto& [name, jfile] : wm.get_ref<const json::object_t&>()) {
    const std::string tensor = "tensor " + quote(name);
    if (!jfile.is_string())
      return fail(fmt::format("{} maps to {}, not a file name", tensor, describe(jfile)));
    const std::string& file = jfile.get_ref<const std::string&>();
    if (file.empty() || file.find('/') != std::string::npos || file.find("..") != std::string::npos ||
        file.find('\0') != std::string::npos)
      return fail(fmt::format("{} maps to {}: a shard must be a plain file name inside the directory",
                              tensor, quote(file)));
    out.emplace(name, file);
  }
  return out;
}

Result<SafetensorsSet> SafetensorsSet::open_dir(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::errorf("{}: not a directory", dir);
  const std::string index_path = dir + "/model.safetensors.index.json";
  const std::string single_path = dir + "/model.safetensors";
  SafetensorsSet set;

  if (::stat(index_path.c_str(), &st) != 0) {
    if (::stat(single_path.c_str(), &st) != 0)
      return Status::errorf("{}: neither model.safetensors.index.json nor model.safetensors exists", dir);
    Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::open(single_path);
    if (!f.ok()) return f.status();
    set.files_.push_back(std::shared_ptr<SafetensorsFile>(std::move(*f)));
    for (const auto& [name, view] : set.files_[0]->tensors()) set.index_[name] = &view;
    return set;
  }

  auto fail = [&](const std::string& what) { return Status::errorf("{}: {}", index_path, what); };
  Result<std::vector<uint8_t>> text = read_file(index_path, kMaxIndexBytes);
  if (!text.ok()) return text.status();
  Result<ShardIndex> index = parse_shard_index(
      std::string_view(reinterpret_cast<const char*>(text->data()), text->size()), index_path);
  if (!index.ok()) return index.status();

  std::map<std::string, SafetensorsFile*> shards;  // shard file name -> mapped file
  for (const auto& [name, file] : *index) {
    const std::string tensor = "tensor " + quote(name);
    auto it = shards.find(file);
    if (it == shards.end()) {
      Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::open(dir + "/" + file);
      if (!f.ok()) return fail(fmt::format("shard {} (listed for {}): {}", quote(file), tensor, f.message()));
      set.files_.push_back(std::shared_ptr<SafetensorsFile>(std::move(*f)));
      it = shards.emplace(file, set.files_.back().get()).first;
    }
    const TensorView* view = it->second->find(name);
    if (view == nullptr)
      return fail(fmt::format("{} is mapped to shard {}, which does not contain it", tensor, quote(file)));
    set.index_[name] = view;
  }
  // Every tensor of every opened shard must be the one the index points to.
  for (const auto& [file, shard] : shards) {
    for (const auto& [name, view] : shard->tensors()) {
      const auto it = set.index_.find(name);
      if (it == set.index_.end())
        return fail(fmt::format("shard {} holds tensor {}, which the weight_map does not list", quote(file),
                                quote(name)));
      if (it->second != &view)
        return fail(fmt::format("tensor {} is in shard {} and in shard {}", quote(name), quote(file),
                                quote(index->at(name))));
    }
  }
  return set;
}

const TensorView* SafetensorsSet::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

// ---------------------------------------------------------------- writer

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            const void* data, size_t n_bytes) {
  DSV4_CHECK(!name.empty() && name != "__metadata__", "invalid tensor name \"{}\"", name);
  DSV4_CHECK(entries_.count(name) == 0, "tensor \"{}\" added twice", name);
  DSV4_CHECK(shape.size() <= kMaxSafetensorsRank, "tensor \"{}\": rank {}", name, shape.size());
  uint64_t need = dtype_size(dtype);
  for (const int64_t d : shape) {
    DSV4_CHECK(d >= 0, "tensor \"{}\": negative dim {}", name, d);
    DSV4_CHECK(!__builtin_mul_overflow(need, static_cast<uint64_t>(d), &need) && need <= kMaxBytes,
               "tensor \"{}\": size overflows", name);
  }
  DSV4_CHECK(need == n_bytes, "tensor \"{}\": {} bytes given, shape x {} needs {}", name, n_bytes,
             dtype_name(dtype), need);
  Entry e{dtype, std::move(shape), {}};
  if (n_bytes > 0) {
    const auto* p = static_cast<const uint8_t*>(data);
    e.bytes.assign(p, p + n_bytes);
  }
  entries_.emplace(name, std::move(e));
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

Status SafetensorsWriter::write(const std::string& path) const {
  // Data order: element size descending, then name (map order, kept by the
  // stable sort), so every tensor starts aligned to its element size.
  std::vector<const std::pair<const std::string, Entry>*> order;
  for (const auto& kv : entries_) order.push_back(&kv);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return dtype_size(a->second.dtype) > dtype_size(b->second.dtype);
  });

  json header = json::object();
  json meta = json::object();
  meta["format"] = "pt";
  for (const auto& [k, v] : metadata_) meta[k] = v;
  header["__metadata__"] = std::move(meta);
  uint64_t offset = 0;
  for (const auto* kv : order) {
    const Entry& e = kv->second;
    header[kv->first] = {{"dtype", dtype_name(e.dtype)},
                         {"shape", e.shape},
                         {"data_offsets", {offset, offset + e.bytes.size()}}};
    offset += e.bytes.size();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& ex) {
    return Status::errorf("{}: cannot encode the header (tensor names and metadata must be UTF-8): {}",
                          path, ex.what());
  }
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));

  std::vector<std::span<const uint8_t>> parts;
  parts.emplace_back(len, 8);
  parts.emplace_back(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  for (const auto* kv : order) parts.emplace_back(kv->second.bytes);
  return write_file_atomic(path, parts);
}

}  // namespace dsv4
