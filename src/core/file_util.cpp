#include "core/file_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <system_error>
#include <utility>

#include "core/error.h"
#include "core/log.h"

namespace zt {
namespace {

std::string errno_text(int e) { return std::system_category().message(e); }

// An fd closed on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

void write_all(int fd, const void* data, size_t n, const fs::path& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("{}: write failed: {}", path.string(), errno_text(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void fsync_path(const fs::path& path, bool dir) {
  Fd fd(::open(path.c_str(), (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC));
  if (fd.fd < 0) fail("{}: cannot open to fsync: {}", path.string(), errno_text(errno));
  if (::fsync(fd.fd) != 0) fail("{}: fsync failed: {}", path.string(), errno_text(errno));
}

fs::path parent_or_dot(const fs::path& p) {
  fs::path d = p.parent_path();
  return d.empty() ? fs::path(".") : d;
}

}  // namespace

fs::path temp_sibling(const fs::path& path, std::string_view kind) {
  std::random_device rd;
  const uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  fs::path p = path;
  p += fmt::format(".{}.{}.{:016x}", kind, static_cast<long>(::getpid()), r);
  return p;
}

bool process_running(int64_t pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

std::optional<TempName> parse_temp_name(std::string_view name, std::string_view kind,
                                        size_t hex_digits) {
  // From the end: "<hex>", then ".<pid>" (1 to 18 digits), then ".<kind>", then the base.
  if (name.size() < hex_digits + 1) return std::nullopt;
  const std::string_view hex = name.substr(name.size() - hex_digits);
  for (char c : hex)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  std::string_view rest = name.substr(0, name.size() - hex_digits);
  if (!rest.ends_with('.')) return std::nullopt;
  rest.remove_suffix(1);
  const size_t dot = rest.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::string_view digits = rest.substr(dot + 1);
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  int64_t pid = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    pid = pid * 10 + (c - '0');
  }
  // No pid of this host (pid_t is 32-bit): kill() would see it truncated, maybe as a group.
  if (pid > std::numeric_limits<pid_t>::max()) return std::nullopt;
  rest = rest.substr(0, dot);
  if (!rest.ends_with(kind) || rest.size() < kind.size() + 2) return std::nullopt;
  rest.remove_suffix(kind.size());
  if (!rest.ends_with('.')) return std::nullopt;
  rest.remove_suffix(1);
  return TempName{rest, pid};
}

std::optional<int64_t> staging_dir_pid(std::string_view name, std::string_view final_name,
                                       std::string_view kind) {
  const std::optional<TempName> t = parse_temp_name(name, kind, 16);
  if (!t || t->base != final_name) return std::nullopt;
  return t->pid;
}

bool left_by_dead_process(std::optional<int64_t> pid) {
  return pid && *pid != static_cast<int64_t>(::getpid()) && !process_running(*pid);
}

std::vector<fs::path> clean_stale_temp_files(
    const fs::path& dir, const std::function<std::optional<int64_t>(std::string_view)>& pid_of) {
  std::vector<fs::path> stale;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::error_code fec;
    if (e.is_symlink(fec) || !e.is_regular_file(fec)) continue;
    if (left_by_dead_process(pid_of(e.path().filename().string()))) stale.push_back(e.path());
  }
  std::sort(stale.begin(), stale.end());
  std::vector<fs::path> removed;
  for (const auto& p : stale) {
    // Another process cleaning the same directory may have removed it first.
    // Best effort: a read-only mount or another user's file in a shared directory is left (the
    // run does not need it gone), with a warning.
    const bool gone = fs::remove(p, ec);
    if (ec && ec != std::errc::no_such_file_or_directory)
      log::warn("{}: left by an interrupted run, but it cannot be removed: {}", p.string(),
                ec.message());
    if (gone) removed.push_back(p);
  }
  return removed;
}

std::optional<int64_t> atomic_write_temp_pid(std::string_view name) {
  const std::optional<TempName> t = parse_temp_name(name, "tmp", 16);
  if (!t) return std::nullopt;
  return t->pid;
}

std::vector<StaleStaging> clean_stale_staging_dirs(const fs::path& final, bool with_old) {
  fs::path f = final;
  if (!f.has_filename()) f = f.parent_path();  // "out/" -> "out"
  const std::string name = f.filename().string();
  auto pid_of = [&](std::string_view n, std::string_view kind) {
    return staging_dir_pid(n, name, kind);
  };
  const auto gone = left_by_dead_process;
  std::vector<fs::path> stale_tmp, stale_old;
  std::error_code ec;
  const fs::path dir = parent_or_dot(f);
  if (!fs::is_directory(dir, ec)) return {};
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_symlink(ec) || !e.is_directory(ec)) continue;
    const std::string n = e.path().filename().string();
    if (gone(pid_of(n, "tmp"))) stale_tmp.push_back(e.path());
    if (with_old && gone(pid_of(n, "old"))) stale_old.push_back(e.path());
  }
  std::sort(stale_tmp.begin(), stale_tmp.end());
  std::sort(stale_old.begin(), stale_old.end());
  std::vector<StaleStaging> done;
  auto remove = [&](const fs::path& p) {
    fs::remove_all(p, ec);
    if (ec) fail("{}: cannot remove it: {}", p.string(), ec.message());
    done.push_back({p, false});
  };
  for (const auto& p : stale_old) {
    if (fs::exists(fs::symlink_status(f, ec))) {
      remove(p);
    } else {
      if (::rename(p.c_str(), f.c_str()) != 0)
        fail("{}: cannot restore it to {}: {}", p.string(), f.string(), errno_text(errno));
      done.push_back({p, true});
    }
  }
  for (const auto& p : stale_tmp) remove(p);
  std::sort(done.begin(), done.end(),
            [](const StaleStaging& a, const StaleStaging& b) { return a.path < b.path; });
  return done;
}

void fsync_dir(const fs::path& dir) { fsync_path(dir, true); }

DirFlock::DirFlock(const fs::path& dir) {
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) return;
  int rc;
  do {
    rc = ::flock(fd_, LOCK_EX);
  } while (rc != 0 && errno == EINTR);
}

DirFlock::~DirFlock() {
  if (fd_ >= 0) ::close(fd_);
}

void write_file_atomic(const fs::path& path, const std::function<void(const ByteSink&)>& writer) {
  const fs::path tmp = temp_sibling(path);
  int raw = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (raw < 0)
    fail("{}: cannot create temporary file {}: {}", path.string(), tmp.string(), errno_text(errno));
  try {
    {
      Fd fd(raw);
      raw = -1;
      const ByteSink sink = [&](const void* data, size_t n) { write_all(fd.fd, data, n, tmp); };
      writer(sink);
      if (::fsync(fd.fd) != 0) fail("{}: fsync failed: {}", tmp.string(), errno_text(errno));
      const int c = ::close(fd.fd);
      fd.fd = -1;
      if (c != 0) fail("{}: close failed: {}", tmp.string(), errno_text(errno));
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      fail("{}: cannot rename {} into place: {}", path.string(), tmp.string(), errno_text(errno));
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  fsync_dir(parent_or_dot(path));
}

void write_file_atomic(const fs::path& path, std::string_view data) {
  write_file_atomic(path, [&](const ByteSink& sink) { sink(data.data(), data.size()); });
}

std::string_view file_kind(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a pipe";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "a special file";
}

std::string_view file_kind(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? file_kind(st.st_mode) : "";
}

std::string universal_newlines(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

std::string read_file(const fs::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) fail("{}: cannot open: {}", path.string(), errno_text(errno));
  // A regular file, or a pipe of at most kMaxPipeBytes; a device (/dev/zero) could be read
  // forever.
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) fail("{}: cannot stat: {}", path.string(), errno_text(errno));
  const bool pipe = S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
  if (!S_ISREG(st.st_mode) && !pipe)
    fail("{}: not a regular file ({}); expected a file", path.string(), file_kind(st.st_mode));
  constexpr size_t kMaxPipeBytes = size_t{1} << 30;
  std::string out;
  char buf[1 << 16];
  for (;;) {
    if (pipe && out.size() > kMaxPipeBytes)
      fail("{}: a pipe that gave more than {} bytes; expected a file", path.string(),
           kMaxPipeBytes);
    const ssize_t r = ::read(fd.fd, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail("{}: read failed: {}", path.string(), errno_text(errno));
    }
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

std::string model_files_fingerprint(const fs::path& dir) {
  std::error_code ec;
  std::vector<std::string> lines;
  struct stat st {};
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool model = name == "config.json" || name == "generation_config.json" ||
                       (name.starts_with("model") && (name.ends_with(".safetensors") ||
                                                      name.ends_with(".safetensors.index.json")));
    if (!model || ::stat(e.path().c_str(), &st) != 0) continue;
    lines.push_back(fmt::format("{} {} {} {}", name, st.st_size,
                                int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec,
                                st.st_ino));
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// ---- MappedFile

MappedFile::MappedFile(const fs::path& path) : path_(path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) fail("{}: cannot open: {}", path.string(), errno_text(errno));
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) fail("{}: cannot stat: {}", path.string(), errno_text(errno));
  if (!S_ISREG(st.st_mode)) fail("{}: not a regular file", path.string());
  size_ = static_cast<size_t>(st.st_size);
  if (size_ == 0) return;
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (p == MAP_FAILED)
    fail("{}: mmap of {} bytes failed: {}", path.string(), size_, errno_text(errno));
  data_ = static_cast<const std::byte*>(p);
}

MappedFile::~MappedFile() { close(); }

void MappedFile::close() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)),
      data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    close();
    path_ = std::move(o.path_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

// ---- StagingDir

StagingDir::StagingDir(fs::path final_dir) : final_(std::move(final_dir)) {
  if (final_.has_filename() == false) final_ = final_.parent_path();  // "out/" -> "out"
  tmp_ = temp_sibling(final_);
  std::error_code ec;
  fs::create_directories(parent_or_dot(final_), ec);
  if (ec) fail("{}: cannot create parent directory: {}", final_.string(), ec.message());
  if (!fs::create_directory(tmp_, ec) || ec)
    fail("{}: cannot create temporary directory {}: {}", final_.string(), tmp_.string(),
         ec ? ec.message() : std::string("already exists"));
}

StagingDir::~StagingDir() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
}

void StagingDir::commit(bool replace) {
  if (committed_) fail("{}: staging directory committed twice", final_.string());
  for (const auto& e : fs::recursive_directory_iterator(tmp_))
    if (e.is_regular_file()) fsync_path(e.path(), false);
  fsync_dir(tmp_);
  std::error_code ec;
  fs::path old;
  if (fs::exists(final_, ec)) {
    if (!replace) fail("{}: already exists (refusing to replace it)", final_.string());
    old = temp_sibling(final_, "old");
    if (::rename(final_.c_str(), old.c_str()) != 0)
      fail("{}: cannot move the existing directory aside to {}: {}", final_.string(), old.string(),
           errno_text(errno));
  }
  if (::rename(tmp_.c_str(), final_.c_str()) != 0) {
    const int e = errno;
    if (!old.empty()) ::rename(old.c_str(), final_.c_str());  // put the old one back
    fail("{}: cannot rename {} into place: {}", final_.string(), tmp_.string(), errno_text(e));
  }
  committed_ = true;
  fsync_dir(parent_or_dot(final_));
  if (!old.empty()) fs::remove_all(old, ec);
}

}  // namespace zt
