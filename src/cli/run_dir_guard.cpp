#include "cli/run_dir_guard.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "train/checkpoint_dirs.h"

namespace zt::cli {
namespace fs = std::filesystem;

void check_run_dir_is_free(const fs::path& exp_dir, const fs::path& output_dir, bool resuming, bool overwrite) {
  if (resuming || overwrite) return;
  std::vector<std::string> found;
  for (const char* f : {"args.yaml", "metrics.jsonl"})
    if (fs::exists(exp_dir / f)) found.push_back((exp_dir / f).string());
  const bool in_exp = !found.empty();
  bool in_out = false;
  for (const char* f : {"model.safetensors", "model.safetensors.index.json"})
    if (fs::exists(output_dir / f)) found.push_back((output_dir / f).string()), in_out = true;
  if (found.empty()) return;
  std::string list;
  for (const auto& f : found) list += (list.empty() ? "" : ", ") + f;
  // Resuming is only a way out when the earlier run left a checkpoint.
  bool has_checkpoint = false;
  for (const fs::path& d : {exp_dir, output_dir}) {
    std::error_code ec;
    if (!fs::is_directory(d, ec)) continue;
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.is_directory() && e.path().filename().string().rfind("checkpoint-", 0) == 0) has_checkpoint = true;
  }
  // Which key to change: exp_dir when the earlier run's files are there, trainer.output_dir when
  // its model is there and output_dir is not inside exp_dir (a new exp_dir leaves it where it is:
  // `exp_dir=… trainer.output_dir=fixed` twice, or args.yaml re-run with only exp_dir changed).
  const fs::path rel = output_dir.lexically_normal().lexically_relative(exp_dir.lexically_normal());
  const bool out_inside = !rel.empty() && *rel.begin() != "..";
  const std::string new_exp = fmt::format("exp_dir (e.g. exp_dir={}_2)", exp_dir.string()),
                    new_out = fmt::format("trainer.output_dir (e.g. trainer.output_dir={}_2)",
                                          output_dir.string());
  const std::string change = in_exp
                                 ? (in_out && !out_inside ? new_exp + " and " + new_out : new_exp)
                                 : (out_inside ? new_exp + " or " + new_out : new_out);
  fail(
      "{} {} already holds an earlier run ({}); zerotune does not overwrite a run's outputs: give "
      "another "
      "{}, {}or replace it with trainer.overwrite_output_dir=true",
      in_exp ? "exp_dir" : "trainer.output_dir", in_exp ? exp_dir.string() : output_dir.string(),
      list, change,
      has_checkpoint ? "continue that run with trainer.resume_from_checkpoint=true, " : "");
}

void check_not_in_checkpoint(const std::string& source, const std::string& key, const fs::path& dir,
                             std::string_view where) {
  std::error_code ec;
  for (fs::path p : {fs::absolute(dir, ec).lexically_normal(), fs::weakly_canonical(dir, ec)}) {
    if (p.has_relative_path() && p.filename().empty()) p = p.parent_path();  // "a/b/" is "a/b"
    fs::path prefix;
    for (const fs::path& part : p) {
      prefix /= part;
      if (!train::parse_checkpoint_name(part.string())) continue;
      fail(
          "{}: {}: {} is {}checkpoint directory {}, which belongs to a run (resuming it reads the "
          "directory, its save_total_limit deletes it, a final model exported there replaces it "
          "whole); give a directory outside any checkpoint-<step> directory{}",
          source, key, dir.string(), prefix == p ? "" : "inside ", prefix.string(), where);
    }
  }
}

namespace {

// lstat(2) of `p`: 0 when it exists (a dangling symbolic link too), else the errno (ENOENT or
// ENOTDIR when it does not exist).
int lstat_errno(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 ? 0 : errno;
}

}  // namespace

void check_dir_creatable(const std::string& source, const std::string& key, const fs::path& dir,
                         std::string_view where) {
  // An empty path (`output_dir: ${oc.env:OUT}` with OUT set to nothing) names no directory: taken
  // for ".", the run trained and then failed to export its model.
  if (dir.empty()) fail("{}: {} is empty (expected a directory){}", source, key, where);
  // The directories `mkdir -p dir` would create, deepest first, and the nearest existing ancestor.
  std::vector<fs::path> missing;
  fs::path cur = dir;
  for (int e = lstat_errno(cur); e != 0; e = lstat_errno(cur)) {
    if (e != ENOENT && e != ENOTDIR)  // ENAMETOOLONG, EACCES, ELOOP: the path cannot be used
      fail("{}: {}: cannot create {}: {}{}", source, key, dir.string(), std::strerror(e), where);
    missing.push_back(cur);
    cur = cur.parent_path();
    if (cur.empty()) cur = ".";
  }
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(cur, ec)) && !fs::exists(fs::status(cur, ec)))
    fail("{}: {}: cannot create {}: {} is a dangling symbolic link{}", source, key, dir.string(),
         cur.string(), where);
  if (!fs::is_directory(fs::status(cur, ec)))
    fail("{}: {}: cannot create {}: {} ({} is {}){}", source, key, dir.string(),
         std::strerror(ENOTDIR), cur.string(),
         fs::is_regular_file(fs::status(cur, ec)) ? "a file" : "not a directory", where);
  // Each name to create must fit the file system's NAME_MAX.
  const long name_max = ::pathconf(cur.c_str(), _PC_NAME_MAX);
  for (const fs::path& m : missing) {
    const size_t len = m.filename().native().size();
    if (name_max > 0 && len > static_cast<size_t>(name_max))
      fail("{}: {}: cannot create {}: {} (a path component of {} bytes; {} allows at most {}){}",
           source, key, dir.string(), std::strerror(ENAMETOOLONG), len, cur.string(), name_max,
           where);
  }
  // A uniquely named probe directory made and removed in the nearest existing ancestor proves that
  // entries can be created there: only mkdir(2) itself knows every reason (permissions, a
  // read-only mount, a file system that refuses new entries such as sysfs, where access(2) passes
  // root). The run's own names are never made or removed here, so ranks or other jobs creating the
  // same directories at the same time are not disturbed, and nothing is left behind.
  std::string probe = (cur / ".zerotune-probe-XXXXXX").string();
  if (::mkdtemp(probe.data()) == nullptr) {
    const int e = errno;
    if (missing.empty())
      fail("{}: {}: cannot write in {}: {}{}", source, key, dir.string(), std::strerror(e), where);
    fail("{}: {}: cannot create {}: {} (in {}){}", source, key, dir.string(), std::strerror(e),
         cur.string(), where);
  }
  if (::rmdir(probe.c_str()) != 0)
    fail("{}: {}: could not remove the probe directory {} made to check {}: {}{}", source, key,
         probe, dir.string(), std::strerror(errno), where);
}

std::vector<fs::path> clear_earlier_run(const fs::path& exp_dir, const fs::path& events_dir) {
  std::vector<fs::path> removed;
  if (fs::exists(exp_dir / "metrics.jsonl")) removed.push_back(exp_dir / "metrics.jsonl");
  if (!events_dir.empty() && fs::is_directory(events_dir))
    for (const auto& e : fs::directory_iterator(events_dir))
      if (e.is_regular_file() && e.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
        removed.push_back(e.path());
  for (const auto& p : removed) fs::remove(p);
  return removed;
}

fs::path earlier_events_dir(const fs::path& exp_dir, const fs::path& logging_dir,
                            const std::optional<std::string>& configured) {
  if (!logging_dir.empty()) return logging_dir;
  const fs::path dir = configured ? fs::path(*configured) : exp_dir / "tensorboard";
  const fs::path rel = fs::absolute(dir).lexically_normal().lexically_relative(
      fs::absolute(exp_dir).lexically_normal());
  if (rel.empty() || *rel.begin() == "..") return {};
  return dir;
}

}  // namespace zt::cli
