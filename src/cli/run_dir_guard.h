// zerotune never silently overwrites an earlier run's outputs (the users' sft.py suffixes its
// exp_dir with a timestamp for the same reason). zerotune's choice: a run refuses to start when
// its exp_dir already holds another run's args.yaml or metrics.jsonl, or its output_dir already
// holds a model, unless it resumes (trainer.resume_from_checkpoint) or replaces the earlier run
// (trainer.overwrite_output_dir: true, transformers 4.x's name for exactly this). Checkpoint
// directories of other runs are the trainer's business (reported at start; train/checkpoint_dirs).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zt::cli {

// Throws zt::Error naming exp_dir / output_dir, what they hold and the ways out (another exp_dir,
// overwrite_output_dir, and resume_from_checkpoint when a checkpoint-* directory exists in either),
// unless `resuming` or `overwrite`. Touches nothing.
void check_run_dir_is_free(const std::filesystem::path& exp_dir, const std::filesystem::path& output_dir,
                           bool resuming, bool overwrite);

// Refuses a run directory `dir` (the value of config key `key`: exp_dir, trainer.output_dir) that
// is, or lies inside, a checkpoint directory `checkpoint-<digits>` (by name, as transformers'
// get_last_checkpoint finds checkpoints; the path as given and with its symbolic links resolved):
// such a directory belongs to a run, whose resume reads it and whose save_total_limit deletes it,
// and the final export replaces output_dir whole. Throws zt::Error
//   "SOURCE: KEY: DIR is (inside) checkpoint directory CKPT …WHERE". SOURCE is where the key was
// written (RunConfig::key_at), WHERE RunConfig::where's note (" (given on the command line)").
// Touches nothing.
void check_not_in_checkpoint(const std::string& source, const std::string& key,
                             const std::filesystem::path& dir, std::string_view where = {});

// Proves that directory `dir` (the value of config key `key`) can be created, or written in when
// it exists, leaving nothing behind: walks up to the nearest existing ancestor, which must be a
// directory (not a file, not a dangling symbolic link); checks every name still to create against
// the file system's NAME_MAX; then makes and removes a `.zerotune-probe-XXXXXX` directory
// (mkdtemp) in that ancestor (`dir` itself when it exists), never the run's own names, so
// permissions, read-only mounts and file systems that refuse new entries (sysfs) fail here, not
// when the run writes its outputs, and ranks or jobs creating the same directories at once are
// not disturbed. Throws zt::Error
//   "SOURCE: KEY: cannot create DIR: REASON" (e.g. "Not a directory (runs/afile is a file)",
//   "Read-only file system (in runs)", "Operation not permitted (in /sys)", "File name too long
//   (a path component of 300 bytes; runs allows at most 255)"), or "SOURCE: KEY: cannot write in
//   DIR: REASON" when DIR itself exists but is not writable, or "SOURCE: KEY is empty (expected a
//   directory)"; each followed by `where` (as check_not_in_checkpoint).
void check_dir_creatable(const std::string& source, const std::string& key,
                         const std::filesystem::path& dir, std::string_view where = {});

// trainer.overwrite_output_dir: removes the earlier run's metrics.jsonl (which a new run would
// otherwise append to) and its TensorBoard event files in `events_dir` ("" = none; see
// earlier_events_dir); args.yaml and the final model are rewritten by the run itself. Returns the
// paths removed. Checkpoint directories are left to the trainer (it reports those of other runs).
std::vector<std::filesystem::path> clear_earlier_run(const std::filesystem::path& exp_dir,
                                                     const std::filesystem::path& events_dir);

// The directory whose TensorBoard event files trainer.overwrite_output_dir removes: `logging_dir`,
// the run's own, when it writes TensorBoard (non-empty); else (report_to none) `configured` —
// trainer.logging_dir, or its default exp_dir/tensorboard when absent — but only when it lies
// inside exp_dir (compared lexically): the earlier run's events there would otherwise stay beside
// the new run's metrics.jsonl, while a logging_dir elsewhere (perhaps shared by several runs) is
// not touched by a run that writes nothing to it ("" then).
std::filesystem::path earlier_events_dir(const std::filesystem::path& exp_dir,
                                         const std::filesystem::path& logging_dir,
                                         const std::optional<std::string>& configured);

}  // namespace zt::cli
