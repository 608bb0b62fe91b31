// Checkpoint directories `<output_dir>/checkpoint-<step>` (DESIGN §9): listing, the latest one for
// `resume_from_checkpoint: true`, rotation by `save_total_limit`, and the atomic commit of a new
// one (staged in `checkpoint-<step>.tmp-<id>`, fsync'd, renamed into place).
//
// HF semantics (transformers 5.x trainer_utils `get_last_checkpoint`, `sort_checkpoints`,
// `rotate_checkpoints`): a checkpoint is a directory named exactly `checkpoint-<digits>`; the
// latest is the largest step; rotation keeps at most `save_total_limit` (> 0) checkpoints,
// deleting the oldest first but never the most recent one nor the best model checkpoint (so
// max(limit, number protected) remain). The trainer does not use HF's rotation as it is: it
// rotates only its own run's checkpoints (train/run_checkpoints.h). **zerotune:** checkpoints are ordered by step, not by
// mtime (HF sorts by mtime and falls back to steps when the mtimes span < 1 s); staging
// directories (`.tmp-`) and set-aside ones (`.old-`) are never taken for checkpoints.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace zt::train {

struct CheckpointDir {
  int64_t step = 0;
  std::filesystem::path path;
};

// "checkpoint-<step>".
std::string checkpoint_name(int64_t step);
// The step of a directory name `checkpoint-<digits>`, else nullopt ("checkpoint-5.tmp-9" →
// nullopt).
std::optional<int64_t> parse_checkpoint_name(const std::string& name);

// Checkpoint directories directly inside `output_dir`, by step ascending. A missing `output_dir`
// gives an empty list; an unreadable one throws zt::Error naming it.
std::vector<CheckpointDir> list_checkpoints(const std::filesystem::path& output_dir);
// The one with the largest step, or nullopt.
std::optional<CheckpointDir> latest_checkpoint(const std::filesystem::path& output_dir);
// `resume_from_checkpoint: true`: the latest checkpoint. Throws zt::Error "No valid checkpoint
// found in output directory (<dir>)" (HF's message) when there is none.
CheckpointDir latest_checkpoint_or_fail(const std::filesystem::path& output_dir);

// Deletes checkpoints of `output_dir` so that at most `save_total_limit` remain (nothing when the
// limit is <= 0): oldest first, never the latest nor `best` (HF `rotate_checkpoints`). Returns the
// deleted paths, oldest first. Throws zt::Error naming a directory that cannot be removed.
std::vector<std::filesystem::path> rotate_checkpoints(
    const std::filesystem::path& output_dir, int64_t save_total_limit,
    const std::optional<std::filesystem::path>& best = std::nullopt);

// Deletes checkpoints of `candidates` (step ascending), oldest first, skipping those in `protect`,
// until at most `keep_count` of the candidates remain (the core of both rotations: HF's above and
// run_checkpoints.h's). Returns the deleted paths. Throws zt::Error naming a directory it cannot
// remove.
std::vector<std::filesystem::path> delete_oldest_checkpoints(
    const std::vector<CheckpointDir>& candidates, int64_t keep_count,
    const std::vector<std::filesystem::path>& protect);

// `<output_dir>/checkpoint-<step>.tmp-<owner>`: where checkpoint `step` is written before its
// commit. `owner` is the committing process's id (rank 0's pid, known to every rank, so all
// ranks write their files into the same staging directory).
std::filesystem::path staging_path(const std::filesystem::path& output_dir, int64_t step,
                                   int64_t owner);

// A checkpoint being written. The constructor creates the staging directory (removing a leftover
// one of the same name); commit() fsyncs every file and directory in it, renames it to
// `checkpoint-<step>` (an existing one is moved aside to `checkpoint-<step>.old-<owner>` first and
// deleted after), and fsyncs `output_dir`. Destroyed uncommitted: the staging directory is removed.
// Only the owner (rank 0) constructs and commits it; with several ranks the others write their
// files into staging_path(output_dir, step, owner) between a barrier after the construction and
// one before the commit. Errors: zt::Error naming the paths and the errno text.
class CheckpointStaging {
 public:
  CheckpointStaging(std::filesystem::path output_dir, int64_t step, int64_t owner = -1);
  ~CheckpointStaging();
  CheckpointStaging(const CheckpointStaging&) = delete;
  CheckpointStaging& operator=(const CheckpointStaging&) = delete;

  const std::filesystem::path& path() const { return staging_; }  // write files here
  std::filesystem::path final_path() const;                       // checkpoint-<step>
  int64_t step() const { return step_; }
  // Returns final_path(). Throws when called twice.
  std::filesystem::path commit();

 private:
  std::filesystem::path output_dir_, staging_;
  int64_t step_, owner_;
  bool committed_ = false;
};

// Removes what an interrupted run left in `output_dir`: `checkpoint-<step>.tmp-<id>` directories
// (never committed, so never a checkpoint) whose process `<id>` no longer runs on this host, the
// staging directories of the model export into one (`checkpoint-<step>.tmp-<id>.tmp.<pid>.<16 hex>`
// and `….old.<pid>.<16 hex>`, core/file_util.h StagingDir) whose process `<pid>` no longer runs,
// `checkpoint-<step>.old-<id>` ones (a replaced checkpoint: deleted when `checkpoint-<step>`
// exists, else renamed back to it, since the crash came between the two renames of a commit) whose
// process no longer runs either (a live one may still roll back to it).
// Returns the paths removed or restored. Throws zt::Error naming a path it cannot remove.
std::vector<std::filesystem::path> clean_stale_checkpoint_dirs(
    const std::filesystem::path& output_dir);

}  // namespace zt::train
