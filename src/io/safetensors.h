// safetensors read (mmap) and write, in HF's layout (huggingface/safetensors format spec):
//   [u64 little-endian N][N bytes of JSON header, padded with spaces to a multiple of 8][data]
//   header = {"__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape": [..],
//             "data_offsets": [begin, end]}, …}; offsets are relative to the data section.
// Sharded checkpoints: "model-00001-of-00003.safetensors" … plus "model.safetensors.index.json"
// {"metadata": {"total_size": bytes, …}, "weight_map": {"<tensor>": "<file>", …}}, as written by
// transformers' `save_pretrained` (huggingface_hub `split_torch_state_dict_into_shards`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/file_util.h"
#include "core/tensor.h"
#include "io/json.h"

namespace zt {

// HF's default `max_shard_size` ("5GB" = 5 * 10^9 bytes, decimal, as transformers parses it).
inline constexpr size_t kDefaultMaxShardSize = 5'000'000'000ull;

// safetensors dtype string ("F32", "BF16", "F16", "I32", "I64", "U8") -> DType; nullopt for any
// other string (including valid safetensors dtypes zerotune does not handle: "F8_E4M3", "I8", …).
std::optional<DType> dtype_from_safetensors(std::string_view s);
// DType -> safetensors dtype string ("F32", "BF16", …).
std::string_view dtype_to_safetensors(DType t);
// Element size in bytes of any dtype string of the safetensors format (BOOL, U8, I8, F8_E5M2,
// F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64, …); nullopt when unknown to the
// format.
std::optional<size_t> safetensors_dtype_size(std::string_view s);

// One tensor of a safetensors header.
struct SafetensorsTensorInfo {
  std::string name;
  std::string dtype_str;       // as written in the file: "F32", "BF16", "F8_E4M3", …
  std::optional<DType> dtype;  // dtype_from_safetensors(dtype_str)
  std::vector<int64_t> shape;  // [] for a scalar
  size_t begin = 0;            // data_offsets[0], bytes from the start of the data section
  size_t end = 0;              // data_offsets[1]
  int file = 0;                // index into SafetensorsReader::files()
  size_t nbytes() const { return end - begin; }
  int64_t numel() const { return shape_numel(shape); }
};

// The weight file of model directory `dir` that transformers' `from_pretrained` loads
// (modeling_utils `_get_resolved_checkpoint_files`, local directory, safetensors): config.json's
// "transformers_weights" when set (a *.safetensors or *.safetensors.index.json inside `dir`), else
// "model.safetensors", else "model.safetensors.index.json" — the single file wins over an index
// beside it. With `log_choice`, a directory holding both logs a warning naming both files (and an
// explicit transformers_weights beside them an info line). Throws zt::Error naming the file for a
// transformers_weights that is not a string, not a safetensors name, outside `dir` or missing, and
// naming `dir` when it has neither file (mentioning a pytorch_model.bin, which zerotune cannot
// read).
fs::path resolve_weights_file(const fs::path& dir, bool log_choice = true);

// The value of config.json's "transformers_weights" (transformers 5) in `config`, when the file is
// a JSON object that sets it to anything but null; nullopt otherwise, also for a missing or
// unparsable config.json (load_model_config names that problem). Unchecked: resolve_weights_file
// validates it.
std::optional<Json> config_transformers_weights(const fs::path& config);

// Read access to one safetensors file or a sharded set, memory-mapped (no copy until load()).
// Opening validates every header entry (JSON, dtype string known to the format, shape, offsets
// inside the file, byte count = numel × element size, no overlaps); errors name the file and
// tensor:
//   "model.safetensors: tensor 'w' data_offsets [0, 4096] end past the data section (2048 bytes);
//    file truncated?"
class SafetensorsReader {
 public:
  // `path`: a .safetensors file; a "*.safetensors.index.json"; or a model directory, whose weight
  // file resolve_weights_file() picks. Throws zt::Error naming the path for a missing file, bad
  // JSON, a tensor listed in the index but absent from its shard (or vice versa), and every header
  // problem above.
  explicit SafetensorsReader(const fs::path& path);

  // All tensor names, sorted (byte order).
  const std::vector<std::string>& names() const { return names_; }
  bool contains(std::string_view name) const;
  // Header entry of `name`; zt::Error "<path>: tensor 'x' not found (N tensors in file)" if absent.
  const SafetensorsTensorInfo& info(std::string_view name) const;
  // The stored bytes of `name` (in its file dtype), a view into the mapping.
  std::span<const std::byte> raw(std::string_view name) const;

  // Copies tensor `name` into host memory `dst` as dtype `want`, converting F32/BF16/F16 through
  // convert_dtype() (bf16/f16 -> f32 exact, f32 -> bf16 RNE). Errors (zt::Error, naming the file):
  //   missing tensor; shape mismatch "tensor 'x' has shape [2, 3] in the file, expected [3, 2]";
  //   unsupported dtype "tensor 'x' has dtype F8_E4M3, which zerotune cannot load (F32, BF16, F16,
  //   I32, I64, U8 are supported)"; a conversion not in can_convert().
  void load(std::string_view name, DType want, std::span<const int64_t> expected_shape,
            void* dst) const;
  // Same with the dtype, shape and pointer of `dst` (dst.device must be kCPU).
  void load(std::string_view name, const Tensor& dst) const;
  // Convenience for tests and small tensors: the tensor as fp32 values (any float dtype) together
  // with its shape from info().
  std::vector<float> load_f32(std::string_view name) const;

  // "__metadata__" of the (first) file; for a sharded set, the union over the shards.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // "metadata" object of the index json (empty object for a single file).
  const Json& index_metadata() const { return index_metadata_; }
  // Files of the set: one for a single file, the shards in index order otherwise.
  std::vector<fs::path> files() const;
  // The path given to the constructor.
  const fs::path& path() const { return path_; }
  // The file it was read from: the .safetensors file or the index (for a directory, the one
  // resolve_weights_file() picked).
  const fs::path& source() const { return source_; }

 private:
  void open_file(const fs::path& file);
  fs::path path_;
  fs::path source_;
  std::vector<MappedFile> maps_;
  std::vector<size_t> data_start_;  // per file: 8 + header length
  std::vector<SafetensorsTensorInfo> infos_;
  std::unordered_map<std::string, size_t> by_name_;
  std::vector<std::string> names_;
  std::map<std::string, std::string> metadata_;
  Json index_metadata_ = Json::object();
};

// A tensor to write: host `data`, row-major, `shape`, elements of `dtype`. `store_as` (when set
// and different) converts on the fly while writing (F32 -> BF16 RNE, BF16 -> F32, …; see
// can_convert); the file records the stored dtype.
struct NamedTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  std::optional<DType> store_as{};

  DType file_dtype() const { return store_as.value_or(dtype); }
  // Bytes this tensor takes in the file.
  size_t file_bytes() const;
  // A NamedTensor for a host Tensor view.
  static NamedTensor from(std::string name, const Tensor& t, std::optional<DType> store_as = {});
};

// The header JSON (before padding) that write_safetensors() produces for `tensors`: metadata first
// (omitted when empty), then tensors in data order = safetensors' order (element alignment
// descending: I64, F32, I32, BF16, F16, U8; then name ascending), compact JSON. Throws zt::Error
// on duplicate or empty names, "__metadata__" as a tensor name, or a negative dimension.
std::string safetensors_header(std::span<const NamedTensor> tensors,
                               const std::map<std::string, std::string>& metadata);

// Writes one safetensors file atomically (temp + fsync + rename), byte-identical to Python
// `safetensors.torch.save_file(tensors, path, metadata)` for the same tensors and metadata
// (header padded with spaces to 8 bytes). transformers writes metadata {"format": "pt"}.
void write_safetensors(const fs::path& path, std::span<const NamedTensor> tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// What write_safetensors_sharded() wrote.
struct ShardedWriteResult {
  std::vector<std::string> files;  // file names (no directory), in shard order
  size_t total_size = 0;           // sum of tensor bytes (index "total_size")
  bool sharded = false;            // false: a single "<prefix>.safetensors", no index
};

// Splits `tensors` (in the caller's order, i.e. the model's state_dict order) into shards of at
// most `max_shard_size` bytes exactly like huggingface_hub's `split_torch_state_dict_into_shards`
// (greedy in order; a tensor bigger than the limit gets a shard of its own) and writes them into
// `dir` (which must exist): one shard -> "<prefix>.safetensors"; N>1 ->
// "<prefix>-0000i-of-0000N.safetensors" + "<prefix>.safetensors.index.json" = {"metadata":
// {"total_size": …} ∪ extra_index_metadata, "weight_map": {name: file}} with sorted keys and
// indent 2 (transformers' json.dumps(index, indent=2, sort_keys=True) + "\n"). Each file is written
// atomically. Returns the file list.
ShardedWriteResult write_safetensors_sharded(
    const fs::path& dir, std::span<const NamedTensor> tensors,
    size_t max_shard_size = kDefaultMaxShardSize, const Json& extra_index_metadata = Json::object(),
    const std::map<std::string, std::string>& metadata = {{"format", "pt"}},
    std::string_view prefix = "model");

// The shard assignment alone: for each shard, the indices into `tensors` it holds (see above).
std::vector<std::vector<size_t>> plan_shards(std::span<const NamedTensor> tensors,
                                             size_t max_shard_size);

}  // namespace zt
