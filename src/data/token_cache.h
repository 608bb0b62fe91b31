// The token cache: one binary file holding a prepared (tokenised, masked, truncated, packed)
// dataset, keyed by a 128-bit hash of everything that produced it, read back by mmap with zero
// copies. File layout (little-endian; every section starts at a multiple of 64 bytes):
//   header (256 bytes): magic "ZTTOKCAC", version, header size, key (XXH3-128 of the inputs),
//     counts, section offsets, file size, XXH3-64 of the payload, XXH3-64 of the header
//   ids            int32 [num_tokens]        token ids, all examples back to back
//   targets        uint8 [num_tokens]        1 where HF's label is the token, 0 where it is -100
//   example_offsets int64 [num_examples + 1] token offset of each example (0 … num_tokens)
//   example_rows   int64 [num_examples]      0-based dataset row each example came from
//   sample_offsets int64 [num_samples + 1]   example offset of each sample (0 … num_examples);
//                                            a sample is a contiguous range of examples (a packed
//                                            bin), or exactly one example without packing
//   report         UTF-8 JSON                the PrepareReport of the build
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/json.h"

namespace zt::data {

// 128-bit XXH3 digest identifying a cache's inputs.
struct CacheKey {
  uint64_t low = 0, high = 0;
  std::string hex() const;  // 32 lowercase hex digits, high word first
  bool operator==(const CacheKey&) const = default;
};

// Streams named inputs into an XXH3-128 digest. Each part is framed by its name and byte length,
// so different splits of the same bytes give different keys.
class KeyHasher {
 public:
  KeyHasher();
  KeyHasher(const KeyHasher&) = delete;
  KeyHasher& operator=(const KeyHasher&) = delete;
  ~KeyHasher();
  void add(std::string_view name, std::string_view bytes);
  // Hashes the file's bytes in 1 MiB chunks; throws zt::Error naming the file if unreadable.
  void add_file(std::string_view name, const std::filesystem::path& file);
  CacheKey finish() const;

 private:
  void update(const void* data, size_t n);
  void* state_;  // XXH3_state_t
};

// What a cache build produces (shapes as in the file layout above).
struct TokenData {
  std::vector<int32_t> ids;
  std::vector<uint8_t> targets;
  std::vector<int64_t> example_offsets{0};
  std::vector<int64_t> example_rows;
  std::vector<int64_t> sample_offsets{0};
  Json report = Json::object();
};

// Writes `data` to `file` atomically: a temporary file in the same directory, fsync, rename, fsync
// of the directory. Throws zt::Error (naming the file and errno's text) on I/O failure; a failed
// write leaves no file behind.
void write_token_cache(const std::filesystem::path& file, const CacheKey& key,
                       const TokenData& data);

// A read-only, memory-mapped token cache. Spans point into the mapping (no copies) and stay
// valid as long as the PreparedDataset lives. Move-only.
class PreparedDataset {
 public:
  // Maps `file` and validates it: magic, version, header checksum, file size, section bounds,
  // offsets monotonic, and (verify_payload) the payload checksum; with `expected_key`, the key.
  // Throws zt::Error "FILE: …" saying what is wrong.
  static PreparedDataset open(const std::filesystem::path& file,
                              const CacheKey* expected_key = nullptr, bool verify_payload = true);

  PreparedDataset(PreparedDataset&& o) noexcept;
  PreparedDataset& operator=(PreparedDataset&& o) noexcept;
  PreparedDataset(const PreparedDataset&) = delete;
  PreparedDataset& operator=(const PreparedDataset&) = delete;
  ~PreparedDataset();

  int64_t num_examples() const { return num_examples_; }
  int64_t num_samples() const { return num_samples_; }
  int64_t num_tokens() const { return num_tokens_; }

  // Example e in [0, num_examples): its token ids and target flags, [len] each.
  std::span<const int32_t> tokens(int64_t e) const {
    return {ids_ + example_offsets_[e], ids_ + example_offsets_[e + 1]};
  }
  std::span<const uint8_t> targets(int64_t e) const {
    return {targets_ + example_offsets_[e], targets_ + example_offsets_[e + 1]};
  }
  int64_t example_length(int64_t e) const { return example_offsets_[e + 1] - example_offsets_[e]; }
  int64_t source_row(int64_t e) const { return example_rows_[e]; }

  // Sample s in [0, num_samples): examples [first, last), and all their tokens back to back.
  struct ExampleRange {
    int64_t first, last;
  };
  ExampleRange sample_examples(int64_t s) const {
    return {sample_offsets_[s], sample_offsets_[s + 1]};
  }
  std::span<const int32_t> sample_tokens(int64_t s) const {
    return {ids_ + example_offsets_[sample_offsets_[s]],
            ids_ + example_offsets_[sample_offsets_[s + 1]]};
  }
  std::span<const uint8_t> sample_targets(int64_t s) const {
    return {targets_ + example_offsets_[sample_offsets_[s]],
            targets_ + example_offsets_[sample_offsets_[s + 1]]};
  }

  // The whole arrays ([num_tokens], [num_examples + 1], [num_samples + 1]).
  std::span<const int32_t> all_tokens() const { return {ids_, static_cast<size_t>(num_tokens_)}; }
  std::span<const int64_t> example_offsets() const {
    return {example_offsets_, static_cast<size_t>(num_examples_ + 1)};
  }
  std::span<const int64_t> sample_offsets() const {
    return {sample_offsets_, static_cast<size_t>(num_samples_ + 1)};
  }

  const CacheKey& key() const { return key_; }
  const std::filesystem::path& path() const { return path_; }
  // The build's report as stored in the file (parsed on each call).
  Json stored_report() const;

 private:
  PreparedDataset() = default;
  void release() noexcept;

  std::filesystem::path path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  CacheKey key_;
  int64_t num_tokens_ = 0, num_examples_ = 0, num_samples_ = 0;
  const int32_t* ids_ = nullptr;
  const uint8_t* targets_ = nullptr;
  const int64_t* example_offsets_ = nullptr;
  const int64_t* example_rows_ = nullptr;
  const int64_t* sample_offsets_ = nullptr;
  std::string_view report_;
};

// Returns the cache `file` for `key`, building it with `build` when it is missing, stale (another
// key) or invalid. Safe for several processes (ranks) at once: builders serialise on an flock'd
// `<file>.lock` beside it (left in place), a process that waited re-checks and maps the file the
// winner wrote, so the dataset is built once and the file is never seen half-written. `built`
// (optional) says whether this call ran `build`; `existed` (optional) whether the file was there
// and valid at the call's first look, before any wait for the lock (false where another process
// built it meanwhile). Errors from `build` propagate; no cache file is left behind then. First it
// removes what killed builds left in the file's directory (clean_stale_token_cache_temps).
PreparedDataset open_or_build_cache(const std::filesystem::path& file, const CacheKey& key,
                                    const std::function<TokenData()>& build, bool* built = nullptr,
                                    bool* existed = nullptr);

// The pid in `name` when it is exactly the temporary name the token cache writer gives cache file
// "<stem>-<32 hex>.ztc": ".<stem>-<32 hex>.ztc.tmp.<pid>.<8 hex>", else nullopt.
std::optional<int64_t> token_cache_temp_pid(std::string_view name);

// Removes the token cache temporary files in `dir` (token_cache_temp_pid) a killed build left: by
// the staging directories' rule (core/file_util.h left_by_dead_process: the pid no longer runs on
// this host), and only where no process holds the cache file's build lock ("<file>.lock": a
// builder on another host sharing the directory keeps its file). Returns the removed paths.
std::vector<std::filesystem::path> clean_stale_token_cache_temps(const std::filesystem::path& dir);

}  // namespace zt::data
