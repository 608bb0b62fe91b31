#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "io/json_check.h"
#include "io/unique_keys.h"

namespace zt {
namespace {

// Every dtype string of the safetensors format with its element size in bytes, in the order of
// the format's `Dtype` enum (which decides the data order when writing: larger rank first).
// Sub-byte dtypes (F4, F6_*) have no whole-byte size and are listed with 0.
struct StDtype {
  std::string_view name;
  size_t size;
};
constexpr StDtype kStDtypes[] = {{"BOOL", 1},    {"F4", 0},  {"F6_E2M3", 0}, {"F6_E3M2", 0},
                                 {"U8", 1},      {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
                                 {"F8_E8M0", 1}, {"I16", 2}, {"U16", 2},     {"F16", 2},
                                 {"BF16", 2},    {"I32", 4}, {"U32", 4},     {"F32", 4},
                                 {"F64", 8},     {"I64", 8}, {"U64", 8},     {"C64", 8}};

// Position of a zerotune dtype in the safetensors Dtype enum order (U8 < F16 < BF16 < I32 < F32 <
// I64), used to sort tensors as the Rust writer does: rank descending, then name ascending.
int write_rank(DType t) {
  switch (t) {
    case DType::kU8:
      return 0;
    case DType::kF16:
      return 1;
    case DType::kBF16:
      return 2;
    case DType::kI32:
      return 3;
    case DType::kF32:
      return 4;
    case DType::kI64:
      return 5;
  }
  return 0;
}

uint64_t read_le64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

std::string supported_list() { return "F32, BF16, F16, I32, I64, U8"; }

}  // namespace

std::optional<DType> dtype_from_safetensors(std::string_view s) {
  if (s == "F32") return DType::kF32;
  if (s == "BF16") return DType::kBF16;
  if (s == "F16") return DType::kF16;
  if (s == "I32") return DType::kI32;
  if (s == "I64") return DType::kI64;
  if (s == "U8") return DType::kU8;
  return std::nullopt;
}

std::string_view dtype_to_safetensors(DType t) {
  switch (t) {
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
    case DType::kU8:
      return "U8";
  }
  return "?";
}

std::optional<size_t> safetensors_dtype_size(std::string_view s) {
  for (const StDtype& d : kStDtypes)
    if (d.name == s) return d.size;
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Reading

std::optional<Json> config_transformers_weights(const fs::path& config) {
  std::error_code ec;
  if (!fs::is_regular_file(config, ec)) return std::nullopt;
  Json cfg;
  try {
    cfg = parse_json_unique_keys(read_file(config), config.string());
  } catch (const Error&) {
    return std::nullopt;  // load_model_config() reports a bad config.json, naming it
  }
  if (!cfg.is_object() || !cfg.contains("transformers_weights") ||
      cfg["transformers_weights"].is_null())
    return std::nullopt;
  return cfg["transformers_weights"];
}

fs::path resolve_weights_file(const fs::path& dir, bool log_choice) {
  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  std::error_code ec;
  // config.json's "transformers_weights" names the file explicitly (transformers 5).
  const fs::path config = dir / "config.json";
  if (const std::optional<Json> named = config_transformers_weights(config)) {
    const Json& v = *named;
    if (!v.is_string())
      fail("{}: transformers_weights must be a file name string, got {}", config.string(),
           v.dump());
    const std::string name = v.get<std::string>();
    if (!name.ends_with(".safetensors") && !name.ends_with(".safetensors.index.json"))
      fail(
          "{}: transformers_weights '{}' is neither a safetensors file (*.safetensors) nor a "
          "safetensors index (*.safetensors.index.json)",
          config.string(), name);
    const fs::path rel = fs::path(name).lexically_normal();
    if (rel.is_absolute() || rel.empty() || *rel.begin() == "..")
      fail("{}: transformers_weights '{}' must name a file inside {}", config.string(), name,
           dir.string());
    const fs::path file = dir / rel;
    if (!fs::is_regular_file(file, ec))
      fail("{}: transformers_weights names {}, which does not exist", config.string(),
           file.string());
    if (log_choice && file != single && file != index &&
        (fs::exists(single, ec) || fs::exists(index, ec)))
      log::info("{}: reading {} (config.json transformers_weights), as transformers does",
                dir.string(), rel.string());
    return file;
  }
  const bool has_single = fs::is_regular_file(single, ec);
  const bool has_index = fs::is_regular_file(index, ec);
  if (has_single) {
    if (has_index && log_choice)
      log::warn(
          "{}: holds both model.safetensors and model.safetensors.index.json; reading "
          "model.safetensors, as transformers' from_pretrained does, and ignoring the index and "
          "its shards (remove one of them to silence this warning)",
          dir.string());
    return single;
  }
  if (has_index) return index;
  std::string others;
  for (const char* f : {"pytorch_model.bin", "pytorch_model.bin.index.json"})
    if (fs::exists(dir / f, ec))
      others += fmt::format(" (it has {}, which zerotune cannot read)", f);
  fail("{}: directory holds neither model.safetensors nor model.safetensors.index.json{}",
       dir.string(), others);
}

SafetensorsReader::SafetensorsReader(const fs::path& path) : path_(path) {
  fs::path p = path;
  std::error_code ec;
  if (fs::is_directory(p, ec)) p = resolve_weights_file(p);
  source_ = p;
  const std::string fname = p.filename().string();
  if (fname.size() > 5 && fname.ends_with(".json")) {
    const std::string text = read_file(p);
    Json index = parse_json_unique_keys(text, p.string());
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      fail("{}: no \"weight_map\" object (expected a safetensors index)", p.string());
    if (index.contains("metadata") && index["metadata"].is_object())
      index_metadata_ = index["metadata"];
    // Shards in sorted file-name order (= 00001, 00002, …).
    std::map<std::string, std::pair<std::string, size_t>> shards;  // file → a tensor, count
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string())
        fail("{}: weight_map[\"{}\"] is {}, expected a file name string", p.string(), name,
             file.dump());
      auto& [first, count] = shards[file.get<std::string>()];
      if (count++ == 0) first = name;
    }
    for (const auto& [s, use] : shards) {
      const fs::path shard = p.parent_path() / s;
      if (!fs::exists(shard, ec))
        fail(
            "{}: weight_map puts {} tensor(s) ('{}'{}) in {}, which does not exist (a shard not "
            "downloaded or copied?)",
            p.string(), use.second, use.first, use.second > 1 ? ", …" : "", shard.string());
      open_file(shard);
    }
    for (const auto& [name, file] : index["weight_map"].items()) {
      auto it = by_name_.find(name);
      if (it == by_name_.end())
        fail("{}: weight_map lists tensor '{}' in {}, which does not contain it", p.string(), name,
             file.get<std::string>());
      const fs::path& actual = maps_[static_cast<size_t>(infos_[it->second].file)].path();
      if (actual.filename().string() != file.get<std::string>())
        fail("{}: weight_map puts tensor '{}' in {}, but it is in {}", p.string(), name,
             file.get<std::string>(), actual.filename().string());
    }
  } else {
    open_file(p);
  }
  names_.reserve(infos_.size());
  for (const auto& i : infos_) names_.push_back(i.name);
  std::sort(names_.begin(), names_.end());
}

void SafetensorsReader::open_file(const fs::path& file) {
  MappedFile map(file);
  const std::string fn = file.string();
  if (map.size() < 8)
    fail("{}: file is {} bytes, shorter than the 8-byte header length; truncated?", fn, map.size());
  const uint64_t n = read_le64(map.data());
  if (n > map.size() - 8)
    fail("{}: header length {} exceeds the file size {} bytes; truncated?", fn, n, map.size());
  const size_t data_start = 8 + static_cast<size_t>(n);
  const size_t data_size = map.size() - data_start;
  const std::string_view header_text(reinterpret_cast<const char*>(map.data()) + 8,
                                     static_cast<size_t>(n));
  check_json_text(header_text, fn + " (header)");
  Json header;
  try {
    header = Json::parse(reinterpret_cast<const char*>(map.data()) + 8,
                         reinterpret_cast<const char*>(map.data()) + data_start);
  } catch (const std::exception& e) {
    fail("{}: header is not valid JSON: {}", fn, json_error_reason(e));
  }
  if (!header.is_object()) fail("{}: header is not a JSON object", fn);
  const int file_index = static_cast<int>(maps_.size());
  std::vector<size_t> mine;
  for (const auto& [key, v] : header.items()) {
    if (key == "__metadata__") {
      if (!v.is_object()) fail("{}: __metadata__ is not an object", fn);
      for (const auto& [mk, mv] : v.items()) {
        if (!mv.is_string())
          fail("{}: __metadata__[\"{}\"] is {}, expected a string", fn, mk, mv.dump());
        metadata_.emplace(mk, mv.get<std::string>());
      }
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      fail("{}: tensor '{}': header entry {} lacks dtype/shape/data_offsets", fn, key, v.dump());
    SafetensorsTensorInfo info;
    info.name = key;
    info.file = file_index;
    if (!v["dtype"].is_string()) fail("{}: tensor '{}': dtype is not a string", fn, key);
    info.dtype_str = v["dtype"].get<std::string>();
    info.dtype = dtype_from_safetensors(info.dtype_str);
    const std::optional<size_t> esize = safetensors_dtype_size(info.dtype_str);
    if (!esize) fail("{}: tensor '{}': unknown dtype \"{}\"", fn, key, info.dtype_str);
    if (!v["shape"].is_array()) fail("{}: tensor '{}': shape is not an array", fn, key);
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned())
        fail("{}: tensor '{}': shape {} has a non-integer or negative dimension", fn, key,
             v["shape"].dump());
      info.shape.push_back(d.get<int64_t>());
    }
    const Json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      fail("{}: tensor '{}': data_offsets {} is not [begin, end]", fn, key, off.dump());
    info.begin = off[0].get<size_t>();
    info.end = off[1].get<size_t>();
    if (info.end < info.begin)
      fail("{}: tensor '{}': data_offsets [{}, {}] end before begin", fn, key, info.begin,
           info.end);
    if (info.end > data_size)
      fail(
          "{}: tensor '{}': data_offsets [{}, {}] end past the data section ({} bytes); truncated?",
          fn, key, info.begin, info.end, data_size);
    // Bytes the shape needs, refused when it overflows (a shape like [2^62] F32 wraps to 0 bytes
    // and would pass the size check below, then be read past the mapping).
    uint64_t elems = 1;
    for (int64_t d : info.shape)
      if (__builtin_mul_overflow(elems, static_cast<uint64_t>(d), &elems) ||
          elems > static_cast<uint64_t>(INT64_MAX))
        fail("{}: tensor '{}': shape {} has more elements than a file can hold", fn, key,
             shape_to_string(info.shape));
    if (uint64_t bytes = 0; __builtin_mul_overflow(elems, uint64_t{*esize}, &bytes))
      fail("{}: tensor '{}': shape {} has more elements than a file can hold", fn, key,
           shape_to_string(info.shape));
    if (*esize != 0) {
      const size_t want = static_cast<size_t>(shape_numel(info.shape)) * *esize;
      if (info.nbytes() != want)
        fail("{}: tensor '{}': data_offsets [{}, {}] hold {} bytes, shape {} {} needs {}", fn, key,
             info.begin, info.end, info.nbytes(), shape_to_string(info.shape), info.dtype_str,
             want);
    }
    if (by_name_.count(key))
      fail("{}: tensor '{}' also appears in {}", fn, key,
           maps_[static_cast<size_t>(infos_[by_name_[key]].file)].path().string());
    by_name_.emplace(key, infos_.size());
    mine.push_back(infos_.size());
    infos_.push_back(std::move(info));
  }
  // No two tensors may share bytes.
  std::sort(mine.begin(), mine.end(), [&](size_t a, size_t b) {
    return std::pair(infos_[a].begin, infos_[a].end) < std::pair(infos_[b].begin, infos_[b].end);
  });
  for (size_t i = 1; i < mine.size(); ++i) {
    const auto& a = infos_[mine[i - 1]];
    const auto& b = infos_[mine[i]];
    if (b.begin < a.end)
      fail("{}: tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", fn, a.name, a.begin, a.end,
           b.name, b.begin, b.end);
  }
  data_start_.push_back(data_start);
  maps_.push_back(std::move(map));
}

bool SafetensorsReader::contains(std::string_view name) const {
  return by_name_.count(std::string(name)) != 0;
}

const SafetensorsTensorInfo& SafetensorsReader::info(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end())
    fail("{}: tensor '{}' not found ({} tensors in the checkpoint)", path_.string(), name,
         infos_.size());
  return infos_[it->second];
}

std::span<const std::byte> SafetensorsReader::raw(std::string_view name) const {
  const SafetensorsTensorInfo& i = info(name);
  const size_t f = static_cast<size_t>(i.file);
  return {maps_[f].data() + data_start_[f] + i.begin, i.nbytes()};
}

void SafetensorsReader::load(std::string_view name, DType want,
                             std::span<const int64_t> expected_shape, void* dst) const {
  const SafetensorsTensorInfo& i = info(name);
  const std::string& fn = maps_[static_cast<size_t>(i.file)].path().string();
  if (!std::equal(i.shape.begin(), i.shape.end(), expected_shape.begin(), expected_shape.end()))
    fail("{}: tensor '{}' has shape {} in the file, expected {}", fn, name,
         shape_to_string(i.shape), shape_to_string(expected_shape));
  if (!i.dtype)
    fail("{}: tensor '{}' has dtype {}, which zerotune cannot load ({} are supported)", fn, name,
         i.dtype_str, supported_list());
  if (!can_convert(*i.dtype, want))
    fail("{}: tensor '{}' is {} in the file and cannot be loaded as {}", fn, name, i.dtype_str,
         dtype_to_safetensors(want));
  const std::span<const std::byte> bytes = raw(name);
  const size_t n = static_cast<size_t>(i.numel());
  const size_t esz = dtype_size(*i.dtype);
  if (reinterpret_cast<uintptr_t>(bytes.data()) % esz == 0) {
    convert_dtype(bytes.data(), *i.dtype, dst, want, n);
    return;
  }
  // Misaligned in the mapping (a header length that is not a multiple of 8): go through an
  // aligned bounce buffer, in chunks.
  constexpr size_t kChunk = 1 << 16;
  std::vector<uint64_t> bounce(kChunk * esz / 8 + 1);
  for (size_t done = 0; done < n; done += kChunk) {
    const size_t m = std::min(kChunk, n - done);
    std::memcpy(bounce.data(), bytes.data() + done * esz, m * esz);
    convert_dtype(bounce.data(), *i.dtype, static_cast<std::byte*>(dst) + done * dtype_size(want),
                  want, m);
  }
}

void SafetensorsReader::load(std::string_view name, const Tensor& dst) const {
  if (dst.device != Device::kCPU)
    fail("{}: tensor '{}': load() needs a host destination, got device memory", path_.string(),
         name);
  load(name, dst.dtype, dst.dims(), dst.data);
}

std::vector<float> SafetensorsReader::load_f32(std::string_view name) const {
  const SafetensorsTensorInfo& i = info(name);
  std::vector<float> out(static_cast<size_t>(i.numel()));
  load(name, DType::kF32, i.shape, out.data());
  return out;
}

std::vector<fs::path> SafetensorsReader::files() const {
  std::vector<fs::path> out;
  for (const auto& m : maps_) out.push_back(m.path());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writing

size_t NamedTensor::file_bytes() const {
  return static_cast<size_t>(shape_numel(shape)) * dtype_size(file_dtype());
}

NamedTensor NamedTensor::from(std::string name, const Tensor& t, std::optional<DType> store_as) {
  if (t.device != Device::kCPU)
    fail("tensor '{}': writing safetensors needs host memory, got device memory", name);
  NamedTensor n;
  n.name = std::move(name);
  n.dtype = t.dtype;
  n.shape.assign(t.dims().begin(), t.dims().end());
  n.data = t.data;
  n.store_as = store_as;
  return n;
}

namespace {

// Tensor indices in safetensors' data order, after validating names and dtypes.
std::vector<size_t> write_order(std::span<const NamedTensor> tensors) {
  std::set<std::string_view> seen;
  for (const NamedTensor& t : tensors) {
    if (t.name.empty()) fail("safetensors: a tensor has an empty name");
    if (t.name == "__metadata__") fail("safetensors: \"__metadata__\" cannot name a tensor");
    if (!seen.insert(t.name).second) fail("safetensors: tensor '{}' given twice", t.name);
    if (!can_convert(t.dtype, t.file_dtype()))
      fail("safetensors: tensor '{}' is {} and cannot be stored as {}", t.name,
           dtype_to_safetensors(t.dtype), dtype_to_safetensors(t.file_dtype()));
    if (t.data == nullptr && shape_numel(t.shape) != 0)
      fail("safetensors: tensor '{}' has no data pointer", t.name);
  }
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int ra = write_rank(tensors[a].file_dtype()), rb = write_rank(tensors[b].file_dtype());
    if (ra != rb) return ra > rb;
    return tensors[a].name < tensors[b].name;
  });
  return order;
}

std::string header_for(std::span<const NamedTensor> tensors, const std::vector<size_t>& order,
                       const std::map<std::string, std::string>& metadata) {
  Json h = Json::object();
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    h["__metadata__"] = std::move(m);
  }
  size_t off = 0;
  for (size_t i : order) {
    const NamedTensor& t = tensors[i];
    const size_t nb = t.file_bytes();
    Json e = Json::object();
    e["dtype"] = dtype_to_safetensors(t.file_dtype());
    e["shape"] = t.shape;
    e["data_offsets"] = Json::array({off, off + nb});
    h[t.name] = std::move(e);
    off += nb;
  }
  try {
    return h.dump();
  } catch (const std::exception& e) {
    fail("safetensors: cannot encode the header (tensor names and metadata must be UTF-8): {}",
         e.what());
  }
}

// Streams the data of tensor `t` in its file dtype, converting in bounded chunks.
void write_data(const NamedTensor& t, const ByteSink& sink) {
  const size_t n = static_cast<size_t>(shape_numel(t.shape));
  if (n == 0) return;
  const DType out = t.file_dtype();
  if (out == t.dtype) {
    sink(t.data, n * dtype_size(out));
    return;
  }
  constexpr size_t kChunk = 1 << 20;  // elements per conversion round
  std::vector<std::byte> buf(std::min(n, kChunk) * dtype_size(out));
  const auto* src = static_cast<const std::byte*>(t.data);
  for (size_t done = 0; done < n; done += kChunk) {
    const size_t m = std::min(kChunk, n - done);
    convert_dtype(src + done * dtype_size(t.dtype), t.dtype, buf.data(), out, m);
    sink(buf.data(), m * dtype_size(out));
  }
}

}  // namespace

std::string safetensors_header(std::span<const NamedTensor> tensors,
                               const std::map<std::string, std::string>& metadata) {
  return header_for(tensors, write_order(tensors), metadata);
}

void write_safetensors(const fs::path& path, std::span<const NamedTensor> tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::vector<size_t> order = write_order(tensors);
  std::string header = header_for(tensors, order, metadata);
  header.append((8 - header.size() % 8) % 8, ' ');  // the format pads the header to 8 bytes
  write_file_atomic(path, [&](const ByteSink& sink) {
    uint8_t len[8];
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
    sink(len, 8);
    sink(header.data(), header.size());
    for (size_t i : order) write_data(tensors[i], sink);
  });
}

std::vector<std::vector<size_t>> plan_shards(std::span<const NamedTensor> tensors,
                                             size_t max_shard_size) {
  // huggingface_hub split_state_dict_into_shards_factory: greedy in state_dict order; a tensor
  // above the limit is appended as its own shard at once (before the shard being filled).
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> current;
  size_t current_size = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const size_t sz = tensors[i].file_bytes();
    if (sz > max_shard_size) {
      shards.push_back({i});
      continue;
    }
    if (current_size + sz > max_shard_size) {
      shards.push_back(std::move(current));
      current.clear();
      current_size = 0;
    }
    current.push_back(i);
    current_size += sz;
  }
  if (!current.empty()) shards.push_back(std::move(current));
  return shards;
}

ShardedWriteResult write_safetensors_sharded(const fs::path& dir,
                                             std::span<const NamedTensor> tensors,
                                             size_t max_shard_size,
                                             const Json& extra_index_metadata,
                                             const std::map<std::string, std::string>& metadata,
                                             std::string_view prefix) {
  write_order(tensors);  // validate everything before writing anything
  const auto shards = plan_shards(tensors, max_shard_size);
  ShardedWriteResult r;
  for (const NamedTensor& t : tensors) r.total_size += t.file_bytes();
  r.sharded = shards.size() > 1;
  if (!r.sharded) {
    r.files.push_back(fmt::format("{}.safetensors", prefix));
    write_safetensors(dir / r.files[0], tensors, metadata);
    return r;
  }
  nlohmann::json weight_map = nlohmann::json::object();  // std::map: sorted keys
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file =
        fmt::format("{}-{:05d}-of-{:05d}.safetensors", prefix, s + 1, shards.size());
    std::vector<NamedTensor> part;
    for (size_t i : shards[s]) {
      part.push_back(tensors[i]);
      weight_map[tensors[i].name] = file;
    }
    write_safetensors(dir / file, part, metadata);
    r.files.push_back(file);
  }
  nlohmann::json meta = nlohmann::json::object();
  for (const auto& [k, v] : extra_index_metadata.items()) meta[k] = v;
  meta["total_size"] = r.total_size;
  nlohmann::json index = {{"metadata", meta}, {"weight_map", weight_map}};
  // json.dumps(index, indent=2, sort_keys=True) + "\n" (ensure_ascii like Python's default)
  write_file_atomic(dir / fmt::format("{}.safetensors.index.json", prefix),
                    index.dump(2, ' ', true) + "\n");
  return r;
}

}  // namespace zt
