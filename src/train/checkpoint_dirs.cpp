#include "train/checkpoint_dirs.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/file_util.h"

namespace zt::train {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kPrefix = "checkpoint-";

// Parses "<digits>" exactly (no sign, no spaces); nullopt on anything else or overflow.
std::optional<int64_t> parse_digits(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

// "checkpoint-<step><sep><id>" → (step, id), for sep ".tmp-" / ".old-".
std::optional<std::pair<int64_t, int64_t>> parse_suffixed(const std::string& name,
                                                          std::string_view sep) {
  if (!name.starts_with(kPrefix)) return std::nullopt;
  const size_t at = name.find(sep, kPrefix.size());
  if (at == std::string::npos) return std::nullopt;
  auto step = parse_digits(std::string_view(name).substr(kPrefix.size(), at - kPrefix.size()));
  auto id = parse_digits(std::string_view(name).substr(at + sep.size()));
  if (!step || !id) return std::nullopt;
  return std::make_pair(*step, *id);
}

// "checkpoint-<step>.tmp-<id>.<kind>.<pid>.<16 hex>", kind tmp or old: the StagingDir of the model
// export into that checkpoint staging directory (built beside it, and the empty directory it
// replaces moved aside; core/file_util.h) → pid; nullopt for any other name.
std::optional<int64_t> export_staging_pid(const std::string& name) {
  for (std::string_view kind : {"tmp", "old"}) {
    const size_t at = name.find(fmt::format(".{}.", kind), kPrefix.size());
    if (at == std::string::npos) continue;
    const std::string base = name.substr(0, at);
    if (!parse_suffixed(base, ".tmp-")) continue;
    if (auto pid = staging_dir_pid(name, base, kind)) return pid;
  }
  return std::nullopt;
}

void fsync_file(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open to fsync: {}", p.string(), std::strerror(errno));
  const int rc = ::fsync(fd);
  const int e = errno;
  ::close(fd);
  if (rc != 0) fail("{}: fsync failed: {}", p.string(), std::strerror(e));
}

void remove_tree(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  if (ec) fail("{}: cannot remove: {}", p.string(), ec.message());
}

}  // namespace

std::string checkpoint_name(int64_t step) { return fmt::format("checkpoint-{}", step); }

std::optional<int64_t> parse_checkpoint_name(const std::string& name) {
  if (!name.starts_with(kPrefix)) return std::nullopt;
  return parse_digits(std::string_view(name).substr(kPrefix.size()));
}

std::vector<CheckpointDir> list_checkpoints(const fs::path& output_dir) {
  std::vector<CheckpointDir> out;
  std::error_code ec;
  if (!fs::exists(output_dir, ec)) return out;
  fs::directory_iterator it(output_dir, ec);
  if (ec) fail("{}: cannot list the output directory: {}", output_dir.string(), ec.message());
  for (const auto& e : it) {
    auto step = parse_checkpoint_name(e.path().filename().string());
    if (step && e.is_directory(ec)) out.push_back({*step, e.path()});
  }
  std::sort(out.begin(), out.end(),
            [](const CheckpointDir& a, const CheckpointDir& b) { return a.step < b.step; });
  return out;
}

std::optional<CheckpointDir> latest_checkpoint(const fs::path& output_dir) {
  auto all = list_checkpoints(output_dir);
  if (all.empty()) return std::nullopt;
  return all.back();
}

CheckpointDir latest_checkpoint_or_fail(const fs::path& output_dir) {
  auto latest = latest_checkpoint(output_dir);
  if (!latest) fail("No valid checkpoint found in output directory ({})", output_dir.string());
  return *latest;
}

std::vector<fs::path> delete_oldest_checkpoints(const std::vector<CheckpointDir>& candidates,
                                               int64_t keep_count,
                                               const std::vector<fs::path>& protect) {
  std::vector<fs::path> removed;
  std::vector<fs::path> kept;
  for (const auto& p : protect) kept.push_back(p.lexically_normal());
  int64_t remaining = static_cast<int64_t>(candidates.size());
  for (const auto& cp : candidates) {
    if (remaining <= keep_count) break;
    if (std::find(kept.begin(), kept.end(), cp.path.lexically_normal()) != kept.end()) continue;
    remove_tree(cp.path);
    removed.push_back(cp.path);
    --remaining;
  }
  return removed;
}

std::vector<fs::path> rotate_checkpoints(const fs::path& output_dir, int64_t save_total_limit,
                                         const std::optional<fs::path>& best) {
  if (save_total_limit <= 0) return {};
  const auto all = list_checkpoints(output_dir);
  if (static_cast<int64_t>(all.size()) <= save_total_limit) return {};
  const fs::path latest = all.back().path.lexically_normal();
  std::vector<fs::path> protect = {latest};
  // HF: protected = {latest, best}; keep max(limit, |protected|).
  if (best && best->lexically_normal() != latest) protect.push_back(*best);
  const int64_t keep = std::max(save_total_limit, static_cast<int64_t>(protect.size()));
  return delete_oldest_checkpoints(all, keep, protect);
}

fs::path staging_path(const fs::path& output_dir, int64_t step, int64_t owner) {
  return output_dir / fmt::format("{}.tmp-{}", checkpoint_name(step), owner);
}

CheckpointStaging::CheckpointStaging(fs::path output_dir, int64_t step, int64_t owner)
    : output_dir_(std::move(output_dir)),
      step_(step),
      owner_(owner >= 0 ? owner : static_cast<int64_t>(::getpid())) {
  if (step < 0) fail("checkpoint step must be >= 0, got {}", step);
  staging_ = staging_path(output_dir_, step_, owner_);
  std::error_code ec;
  fs::create_directories(output_dir_, ec);
  if (ec) fail("{}: cannot create the output directory: {}", output_dir_.string(), ec.message());
  remove_tree(staging_);
  fs::create_directory(staging_, ec);
  if (ec) fail("{}: cannot create the staging directory: {}", staging_.string(), ec.message());
}

CheckpointStaging::~CheckpointStaging() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(staging_, ec);
  }
}

fs::path CheckpointStaging::final_path() const { return output_dir_ / checkpoint_name(step_); }

fs::path CheckpointStaging::commit() {
  if (committed_) fail("{}: committed twice", final_path().string());
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(staging_)) {
    if (e.is_regular_file(ec))
      fsync_file(e.path());
    else if (e.is_directory(ec))
      fsync_dir(e.path());
  }
  fsync_dir(staging_);
  const fs::path final = final_path();
  fs::path aside;
  if (fs::exists(final, ec)) {
    aside = output_dir_ / fmt::format("{}.old-{}", checkpoint_name(step_), owner_);
    remove_tree(aside);
    if (::rename(final.c_str(), aside.c_str()) != 0)
      fail("{}: cannot move the existing checkpoint aside to {}: {}", final.string(),
           aside.string(), std::strerror(errno));
  }
  if (::rename(staging_.c_str(), final.c_str()) != 0) {
    const int e = errno;
    if (!aside.empty()) ::rename(aside.c_str(), final.c_str());
    fail("{}: cannot rename {} into place: {}", final.string(), staging_.string(),
         std::strerror(e));
  }
  committed_ = true;
  fsync_dir(output_dir_);
  if (!aside.empty()) remove_tree(aside);
  return final;
}

std::vector<fs::path> clean_stale_checkpoint_dirs(const fs::path& output_dir) {
  std::vector<fs::path> done;
  std::error_code ec;
  if (!fs::exists(output_dir, ec)) return done;
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(output_dir, ec))
    if (e.is_directory(ec)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  for (const auto& p : entries) {
    const std::string name = p.filename().string();
    if (auto tmp = parse_suffixed(name, ".tmp-")) {
      if (process_running(tmp->second) && tmp->second != static_cast<int64_t>(::getpid())) continue;
      remove_tree(p);
      done.push_back(p);
    } else if (auto pid = export_staging_pid(name)) {
      // Part of a checkpoint never committed (kill -9 during its model export): removed whole,
      // as the staging directory it belongs to, by the same rule.
      if (process_running(*pid) && *pid != static_cast<int64_t>(::getpid())) continue;
      remove_tree(p);
      done.push_back(p);
    } else if (auto old = parse_suffixed(name, ".old-")) {
      // A live process's: it is between its commit's two renames and may still roll back to it.
      if (process_running(old->second) && old->second != static_cast<int64_t>(::getpid())) continue;
      const fs::path final = output_dir / checkpoint_name(old->first);
      if (fs::exists(final, ec)) {
        remove_tree(p);
      } else if (::rename(p.c_str(), final.c_str()) != 0) {
        fail("{}: cannot restore it to {}: {}", p.string(), final.string(), std::strerror(errno));
      }
      done.push_back(p);
    }
  }
  return done;
}

}  // namespace zt::train
