// Token cache file: atomic write, validated mmap read, flock-serialised build (see token_cache.h).
#include "data/token_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <random>

#include "core/error.h"
#include "core/file_util.h"
#include "core/log.h"
#include "io/json_check.h"

namespace zt::data {
namespace {

static_assert(std::endian::native == std::endian::little, "the cache format is little-endian");

constexpr char kMagic[8] = {'Z', 'T', 'T', 'O', 'K', 'C', 'A', 'C'};
constexpr uint32_t kVersion = 1;
constexpr uint64_t kAlign = 64;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t key_low, key_high;
  uint64_t num_tokens, num_examples, num_samples;
  uint64_t ids_offset, targets_offset, example_offsets_offset, example_rows_offset,
      sample_offsets_offset, report_offset, report_bytes;
  uint64_t file_bytes;
  uint64_t payload_checksum;  // XXH3-64 of bytes [header_bytes, file_bytes)
  uint64_t header_checksum;   // XXH3-64 of this header with this field set to 0
  uint8_t reserved[256 - 8 - 8 - 16 - 24 - 56 - 24];
};
static_assert(sizeof(Header) == 256);

uint64_t align_up(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

uint64_t header_checksum(Header h) {
  h.header_checksum = 0;
  return XXH3_64bits(&h, sizeof(h));
}

std::string errno_text() { return std::strerror(errno); }

// Closes a descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void write_all(int fd, const void* data, size_t n, const std::string& file) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail("{}: write failed: {}", file, errno_text());
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

std::string CacheKey::hex() const { return fmt::format("{:016x}{:016x}", high, low); }

KeyHasher::KeyHasher() : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}
KeyHasher::~KeyHasher() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void KeyHasher::update(const void* data, size_t n) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), data, n);
}

void KeyHasher::add(std::string_view name, std::string_view bytes) {
  const uint64_t sizes[2] = {name.size(), bytes.size()};
  update(sizes, sizeof(sizes));
  update(name.data(), name.size());
  update(bytes.data(), bytes.size());
}

void KeyHasher::add_file(std::string_view name, const std::filesystem::path& file) {
  Fd f{::open(file.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) fail("{}: cannot open: {}", file.string(), errno_text());
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) fail("{}: cannot stat: {}", file.string(), errno_text());
  // A device or a pipe has no size to check against, and /dev/zero never ends.
  if (!S_ISREG(st.st_mode))
    fail("{}: not a regular file ({}); expected a file", file.string(), file_kind(st.st_mode));
  const uint64_t sizes[2] = {name.size(), static_cast<uint64_t>(st.st_size)};
  update(sizes, sizeof(sizes));
  update(name.data(), name.size());
  std::vector<char> buf(1 << 20);
  uint64_t total = 0;
  for (;;) {
    const ssize_t r = ::read(f.fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail("{}: read failed: {}", file.string(), errno_text());
    if (r == 0) break;
    update(buf.data(), static_cast<size_t>(r));
    total += static_cast<uint64_t>(r);
    if (total > sizes[1]) break;  // growing: reported below
  }
  if (total != sizes[1]) fail("{}: file changed size while being hashed", file.string());
}

CacheKey KeyHasher::finish() const {
  const XXH128_hash_t h = XXH3_128bits_digest(static_cast<const XXH3_state_t*>(state_));
  return CacheKey{h.low64, h.high64};
}

void write_token_cache(const std::filesystem::path& file, const CacheKey& key, const TokenData& d) {
  const uint64_t num_tokens = d.ids.size();
  const uint64_t num_examples = d.example_rows.size();
  const uint64_t num_samples = d.sample_offsets.size() - 1;
  if (d.targets.size() != num_tokens || d.example_offsets.size() != num_examples + 1 ||
      d.sample_offsets.empty() || d.example_offsets.back() != static_cast<int64_t>(num_tokens) ||
      d.sample_offsets.back() != static_cast<int64_t>(num_examples)) {
    fail(
        "{}: inconsistent token data ({} ids, {} targets, {} example offsets, {} rows, sample "
        "offsets ending at {})",
        file.string(), num_tokens, d.targets.size(), d.example_offsets.size(), num_examples,
        d.sample_offsets.empty() ? -1 : d.sample_offsets.back());
  }
  const std::string report = d.report.dump();

  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.header_bytes = sizeof(Header);
  h.key_low = key.low;
  h.key_high = key.high;
  h.num_tokens = num_tokens;
  h.num_examples = num_examples;
  h.num_samples = num_samples;
  struct Section {
    const void* data;
    uint64_t bytes;
    uint64_t* offset;
  };
  const Section sections[] = {
      {d.ids.data(), num_tokens * 4, &h.ids_offset},
      {d.targets.data(), num_tokens, &h.targets_offset},
      {d.example_offsets.data(), (num_examples + 1) * 8, &h.example_offsets_offset},
      {d.example_rows.data(), num_examples * 8, &h.example_rows_offset},
      {d.sample_offsets.data(), (num_samples + 1) * 8, &h.sample_offsets_offset},
      {report.data(), report.size(), &h.report_offset},
  };
  uint64_t pos = sizeof(Header);
  for (const Section& s : sections) {
    pos = align_up(pos);
    *s.offset = pos;
    pos += s.bytes;
  }
  h.report_bytes = report.size();
  h.file_bytes = pos;

  // Payload checksum over exactly the bytes written after the header, padding included.
  static const char kZeros[kAlign] = {};
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  pos = sizeof(Header);
  for (const Section& s : sections) {
    XXH3_64bits_update(st, kZeros, *s.offset - pos);
    XXH3_64bits_update(st, s.data, s.bytes);
    pos = *s.offset + s.bytes;
  }
  h.payload_checksum = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  h.header_checksum = header_checksum(h);

  const std::filesystem::path dir = file.parent_path().empty() ? "." : file.parent_path();
  std::random_device rd;
  const std::filesystem::path tmp =
      dir / fmt::format(".{}.tmp.{}.{:08x}", file.filename().string(), ::getpid(), rd());
  Fd f{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)};
  if (f.fd < 0) fail("{}: cannot create: {}", tmp.string(), errno_text());
  try {
    write_all(f.fd, &h, sizeof(h), tmp.string());
    pos = sizeof(Header);
    for (const Section& s : sections) {
      write_all(f.fd, kZeros, *s.offset - pos, tmp.string());
      write_all(f.fd, s.data, s.bytes, tmp.string());
      pos = *s.offset + s.bytes;
    }
    if (::fsync(f.fd) != 0) fail("{}: fsync failed: {}", tmp.string(), errno_text());
    ::close(f.fd);
    f.fd = -1;
    if (::rename(tmp.c_str(), file.c_str()) != 0) {
      fail("{}: cannot rename {} onto it: {}", file.string(), tmp.string(), errno_text());
    }
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  Fd d_fd{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (d_fd.fd >= 0) ::fsync(d_fd.fd);  // makes the rename durable; best effort
}

PreparedDataset PreparedDataset::open(const std::filesystem::path& file,
                                      const CacheKey* expected_key, bool verify_payload) {
  const std::string name = file.string();
  Fd f{::open(file.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) fail("{}: cannot open token cache: {}", name, errno_text());
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) fail("{}: cannot stat: {}", name, errno_text());
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < sizeof(Header)) {
    fail("{}: not a token cache: {} bytes, shorter than the {}-byte header", name, size,
         sizeof(Header));
  }
  PreparedDataset ds;
  ds.path_ = file;
  ds.map_ = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, f.fd, 0);
  if (ds.map_ == MAP_FAILED) {
    ds.map_ = nullptr;
    fail("{}: mmap failed: {}", name, errno_text());
  }
  ds.map_bytes_ = size;
  const auto* base = static_cast<const uint8_t*>(ds.map_);
  Header h;
  std::memcpy(&h, base, sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) {
    fail("{}: not a zerotune token cache (bad magic)", name);
  }
  if (h.version != kVersion) {
    fail("{}: token cache version {}, this zerotune reads version {}", name, h.version, kVersion);
  }
  if (h.header_checksum != header_checksum(h) || h.header_bytes != sizeof(Header)) {
    fail("{}: corrupt token cache header (checksum mismatch)", name);
  }
  if (h.file_bytes != size) {
    fail("{}: token cache is {} bytes, its header says {} (truncated or overwritten)", name, size,
         h.file_bytes);
  }
  const auto in_file = [&](uint64_t off, uint64_t n, uint64_t elem) {
    return off % kAlign == 0 && off >= sizeof(Header) && off <= size && n <= (size - off) / elem;
  };
  if (!in_file(h.ids_offset, h.num_tokens, 4) || !in_file(h.targets_offset, h.num_tokens, 1) ||
      !in_file(h.example_offsets_offset, h.num_examples + 1, 8) ||
      !in_file(h.example_rows_offset, h.num_examples, 8) ||
      !in_file(h.sample_offsets_offset, h.num_samples + 1, 8) ||
      !in_file(h.report_offset, h.report_bytes, 1)) {
    fail("{}: corrupt token cache header (a section lies outside the file)", name);
  }
  if (verify_payload &&
      XXH3_64bits(base + sizeof(Header), size - sizeof(Header)) != h.payload_checksum) {
    fail("{}: corrupt token cache (payload checksum mismatch)", name);
  }
  ds.key_ = CacheKey{h.key_low, h.key_high};
  if (expected_key != nullptr && !(ds.key_ == *expected_key)) {
    fail("{}: token cache key {} does not match the inputs' key {}", name, ds.key_.hex(),
         expected_key->hex());
  }
  ds.num_tokens_ = static_cast<int64_t>(h.num_tokens);
  ds.num_examples_ = static_cast<int64_t>(h.num_examples);
  ds.num_samples_ = static_cast<int64_t>(h.num_samples);
  ds.ids_ = reinterpret_cast<const int32_t*>(base + h.ids_offset);
  ds.targets_ = base + h.targets_offset;
  ds.example_offsets_ = reinterpret_cast<const int64_t*>(base + h.example_offsets_offset);
  ds.example_rows_ = reinterpret_cast<const int64_t*>(base + h.example_rows_offset);
  ds.sample_offsets_ = reinterpret_cast<const int64_t*>(base + h.sample_offsets_offset);
  ds.report_ =
      std::string_view(reinterpret_cast<const char*>(base + h.report_offset), h.report_bytes);
  const auto monotonic = [](const int64_t* o, int64_t n, int64_t last) {
    if (o[0] != 0 || o[n] != last) return false;
    for (int64_t i = 0; i < n; ++i) {
      if (o[i + 1] < o[i]) return false;
    }
    return true;
  };
  if (!monotonic(ds.example_offsets_, ds.num_examples_, ds.num_tokens_) ||
      !monotonic(ds.sample_offsets_, ds.num_samples_, ds.num_examples_)) {
    fail("{}: corrupt token cache (offsets not increasing from 0 to the totals)", name);
  }
  return ds;
}

PreparedDataset::PreparedDataset(PreparedDataset&& o) noexcept { *this = std::move(o); }

PreparedDataset& PreparedDataset::operator=(PreparedDataset&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    key_ = o.key_;
    num_tokens_ = o.num_tokens_;
    num_examples_ = o.num_examples_;
    num_samples_ = o.num_samples_;
    ids_ = o.ids_;
    targets_ = o.targets_;
    example_offsets_ = o.example_offsets_;
    example_rows_ = o.example_rows_;
    sample_offsets_ = o.sample_offsets_;
    report_ = o.report_;
  }
  return *this;
}

PreparedDataset::~PreparedDataset() { release(); }

void PreparedDataset::release() noexcept {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
}

Json PreparedDataset::stored_report() const {
  return parse_json(report_, "the token cache's report");
}

std::optional<int64_t> token_cache_temp_pid(std::string_view name) {
  const std::optional<TempName> t = parse_temp_name(name, "tmp", 8);
  if (!t || !t->base.starts_with('.') || !t->base.ends_with(".ztc")) return std::nullopt;
  const std::string_view cache = t->base.substr(1, t->base.size() - 5);  // "<stem>-<32 hex>"
  if (cache.size() < 34 || cache[cache.size() - 33] != '-') return std::nullopt;
  for (char c : cache.substr(cache.size() - 32))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  return t->pid;
}

std::vector<std::filesystem::path> clean_stale_token_cache_temps(const std::filesystem::path& dir) {
  return clean_stale_temp_files(dir, [&](std::string_view name) -> std::optional<int64_t> {
    const std::optional<int64_t> pid = token_cache_temp_pid(name);
    if (!pid) return std::nullopt;
    // Removed only when this process takes its cache file's build lock (which every builder
    // creates and holds while its temporary file exists): a killed builder's lock is free. Where
    // the lock cannot be opened or taken (held by a builder at work, maybe on another host sharing
    // the directory, where the pid means nothing; or a file system without flock, where builders
    // run without it), the file is kept.
    const std::string_view base = name.substr(1, name.rfind(".tmp.") - 1);  // "<stem>-<hex>.ztc"
    Fd lock{::open((dir / (std::string(base) + ".lock")).c_str(), O_RDONLY | O_CLOEXEC)};
    if (lock.fd < 0 || ::flock(lock.fd, LOCK_EX | LOCK_NB) != 0) return std::nullopt;
    return pid;
  });
}

PreparedDataset open_or_build_cache(const std::filesystem::path& file, const CacheKey& key,
                                    const std::function<TokenData()>& build, bool* built,
                                    bool* existed) {
  if (built != nullptr) *built = false;
  if (existed != nullptr) *existed = false;
  // What a killed build left (its temporary file, never renamed into place).
  const std::filesystem::path dir = file.parent_path().empty() ? "." : file.parent_path();
  for (const auto& p : clean_stale_token_cache_temps(dir))
    log::info("removed {}, left by an interrupted tokenisation", p.string());
  const auto try_open = [&](bool warn) -> std::optional<PreparedDataset> {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) return std::nullopt;
    try {
      return PreparedDataset::open(file, &key);
    } catch (const Error& e) {
      if (warn) log::warn("rebuilding the token cache: {}", e.what());
      return std::nullopt;
    }
  };
  if (auto ds = try_open(true)) {
    if (existed != nullptr) *existed = true;
    return std::move(*ds);
  }

  std::error_code ec;
  if (!file.parent_path().empty()) std::filesystem::create_directories(file.parent_path(), ec);
  if (ec)
    fail("{}: cannot create the cache directory: {}", file.parent_path().string(), ec.message());
  const std::filesystem::path lock_path = file.string() + ".lock";
  Fd lock{::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)};
  if (lock.fd < 0) fail("{}: cannot create the lock file: {}", lock_path.string(), errno_text());
  int rc;
  do {
    rc = ::flock(lock.fd, LOCK_EX);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    // Some network file systems have no flock; the atomic rename still keeps the file whole.
    log::warn("{}: flock failed ({}); building without the lock", lock_path.string(), errno_text());
  }
  // The lock is released when `lock` closes, after the file is in place.
  if (auto ds = try_open(false)) return std::move(*ds);
  TokenData data = build();
  write_token_cache(file, key, data);
  if (built != nullptr) *built = true;
  return PreparedDataset::open(file, &key);
}

}  // namespace zt::data
