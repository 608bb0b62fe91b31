// File helpers: atomic writes (temp file + fsync + rename, DESIGN §1 promise 5 "nothing lost"),
// read-only memory mapping (safetensors, token cache), whole-file reads, and temporary directories
// that are renamed into place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zt {

namespace fs = std::filesystem;

// Writes `data` to `path` atomically: a temp file "<path>.tmp.<pid>.<random hex>" in the same
// directory is written, fsync'd, renamed over `path`, and the directory is fsync'd. A reader sees
// the old file or the whole new one, never a part. Throws zt::Error naming the path and errno text
// on failure (the temp file is removed).
void write_file_atomic(const fs::path& path, std::string_view data);

// Streaming form: `writer` receives a FILE-like sink and writes the content in pieces
// (sink(ptr, n) appends n bytes; throws zt::Error on a write failure). Same atomicity as above.
using ByteSink = std::function<void(const void* data, size_t n)>;
void write_file_atomic(const fs::path& path, const std::function<void(const ByteSink&)>& writer);

// What a file system entry is, for messages: "a regular file", "a directory", "a pipe", "a socket",
// "a device" (character or block) or "a special file"; from stat(2)'s st_mode.
std::string_view file_kind(unsigned mode);
// Same for `path` (links followed); "" when it does not exist or cannot be stat'ed.
std::string_view file_kind(const fs::path& path);

// Reads a whole file into a string: a regular file, or a pipe (`<(…)`, /dev/stdin) of at most
// 1 GiB. Throws zt::Error naming the path when it cannot be opened/read, when it is a directory or
// a device (/dev/zero would be read forever), or when a pipe gives more.
std::string read_file(const fs::path& path);

// `text` with "\r\n" and a lone "\r" as "\n": Python's universal newlines (open() in text mode,
// str.splitlines-style line ends as jinja2 and huggingface_hub's card reader see them).
std::string universal_newlines(std::string_view text);

// The HF model files `dir` holds (config.json, generation_config.json, model*.safetensors,
// model.safetensors.index.json), to tell later whether another process has exported a model
// there: one line per file, sorted, "name size mtime_ns inode"; "" when there is none (or no
// directory). Other entries (checkpoints, logs) are not looked at. Throws no error.
std::string model_files_fingerprint(const fs::path& dir);

// Holds an exclusive flock(2) on the directory `dir` while alive, waiting for it: a check and a
// write that must not interleave with another process doing the same (two runs' final exports to
// one output_dir: each checks what is there, then writes). Does nothing when `dir` cannot be
// opened or its file system has no flock. Throws no error.
class DirFlock {
 public:
  explicit DirFlock(const fs::path& dir);
  ~DirFlock();
  DirFlock(const DirFlock&) = delete;
  DirFlock& operator=(const DirFlock&) = delete;

 private:
  int fd_ = -1;
};

// fsyncs a directory (so a rename inside it is durable). Throws zt::Error naming it on failure.
void fsync_dir(const fs::path& dir);

// Read-only memory map of a whole file (RAII; move-only). An empty file maps to data()==nullptr,
// size()==0. Throws zt::Error naming the path and errno text when it cannot be opened or mapped.
class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const fs::path& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const fs::path& path() const { return path_; }

 private:
  void close();
  fs::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// A directory built in a temporary sibling "<final>.tmp.<pid>.<random hex>" and renamed to `final`
// by commit(), so `final` appears complete or not at all. Destroyed without commit(): the temp
// directory is removed. commit() on an existing `final`: when `replace` is true the old one is
// moved aside to "<final>.old.<pid>.<random hex>" and removed after the rename; otherwise
// zt::Error naming it. What a killed process leaves of either: clean_stale_staging_dirs.
class StagingDir {
 public:
  explicit StagingDir(fs::path final_dir);
  ~StagingDir();
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;

  // The temporary directory to write into (exists after construction).
  const fs::path& path() const { return tmp_; }
  const fs::path& final_path() const { return final_; }
  // fsyncs every file in the temp directory and the directory, renames it to final_path(), fsyncs
  // the parent. Throws zt::Error naming both paths on failure.
  void commit(bool replace = true);

 private:
  fs::path final_;
  fs::path tmp_;
  bool committed_ = false;
};

// A fresh unique name "<path>.<kind>.<pid>.<random hex>" next to `path` (not created); the random
// part is 16 lowercase hex digits.
fs::path temp_sibling(const fs::path& path, std::string_view kind = "tmp");

// Whether process `pid` runs on this host (kill(pid, 0) succeeds or is refused with EPERM).
bool process_running(int64_t pid);

// A temporary name "<base>.<kind>.<pid>.<hex>" taken apart.
struct TempName {
  std::string_view base;  // non-empty
  int64_t pid;
};
// `name` as "<base>.<kind>.<pid>.<`hex_digits` lowercase hex digits>" exactly (pid: 1 to 18
// decimal digits; base: at least one character), else nullopt.
std::optional<TempName> parse_temp_name(std::string_view name, std::string_view kind,
                                        size_t hex_digits);

// The pid in `name` when it is exactly "<final_name>.<kind>.<pid>.<16 lowercase hex digits>" (the
// name temp_sibling gives: a StagingDir's "tmp" or "old" directory), else nullopt.
std::optional<int64_t> staging_dir_pid(std::string_view name, std::string_view final_name,
                                       std::string_view kind);

// The rule that removes what a process left behind (SIGKILL, OOM kill, power loss): `pid` is set,
// is not this process's, and no process of that pid runs on this host.
bool left_by_dead_process(std::optional<int64_t> pid);

// The pid in `name` when it is exactly "<name>.tmp.<pid>.<16 lowercase hex digits>" (non-empty
// name): the temporary sibling write_file_atomic writes and renames (temp_sibling), else nullopt.
std::optional<int64_t> atomic_write_temp_pid(std::string_view name);

// Removes the regular files (not symlinks, not directories) directly in `dir` whose name `pid_of`
// reads a pid from (a writer's temporary name, e.g. atomic_write_temp_pid) that
// left_by_dead_process: what a killed process left of a write it never renamed into place. A
// running process's are kept (it may still rename them), and every other name. Returns the
// removed paths, in name order (one another process removed first is skipped); none when `dir`
// cannot be listed. A file it cannot remove (read-only mount, another user's) is warned about and
// left: the caller's run does not need it gone.
std::vector<fs::path> clean_stale_temp_files(
    const fs::path& dir, const std::function<std::optional<int64_t>(std::string_view)>& pid_of);

// A StagingDir's leftover that clean_stale_staging_dirs dealt with.
struct StaleStaging {
  fs::path path;
  bool restored = false;  // renamed back to `final` (else removed)
};

// Cleans up after StagingDirs for `final` whose process died before commit() or the destructor
// could (SIGKILL, OOM kill, power loss): the directories beside `final` named exactly
// "<final's name>.tmp.<pid>.<16 hex digits>" (never committed: removed) and
// "<final's name>.old.<pid>.<16 hex digits>" (the previous `final`, moved aside by a commit killed
// before its second rename: removed when `final` exists, else renamed back to it, so the previous
// directory is in place as if the interrupted commit had not begun) — only those whose process
// <pid> no longer runs on this host. Nothing else is touched: not `final`, no other name, no file,
// no directory of a process that still runs (a concurrent export to the same path; this process
// counts as running). Returns what it did, in name order. Throws zt::Error naming a directory it
// cannot remove or restore. `with_old` false: the ".tmp." kind only (for a staging directory that
// is never committed over an existing one, so that an ".old." name there is never ours).
std::vector<StaleStaging> clean_stale_staging_dirs(const fs::path& final, bool with_old = true);

}  // namespace zt
