// Which checkpoints of an exp_dir belong to which run (issue 7 §3): a run's own checkpoints are
// the only ones it rotates (`save_total_limit`) and the only ones `resume_from_checkpoint: true`
// picks; the others are reported at start and left alone.
//
// How a checkpoint is tied to a run:
//   - a run id (32 hex digits, random) is drawn when a run starts fresh; a run resumed from a
//     checkpoint keeps that checkpoint's id (it is the same run, continued);
//   - every checkpoint's `zerotune_state.json` records it as "run_id" (its `trainer_state.json`
//     in checkpoints written before zerotune_state.json existed: train/checkpoint_state.h);
//   - `<exp_dir>/zerotune_run.json` names the run that last started in the directory
//     ({"run_id", "started", "resumed_from"}), written by rank 0 before the first step.
// A checkpoint without either file, without a "run_id" (HF's, or an older zerotune's) or with
// another id belongs to another run; one whose zerotune_state.json is missing (trainer_state.json
// alone, or neither) beside zerotune's zero_state_rank*.bin is a damaged zerotune checkpoint
// (corrupt). Below, "trainer_state.json" stands for the file that holds the run id.
//
// **zerotune, not HF:** transformers' `rotate_checkpoints` sorts every `checkpoint-*` of the
// output directory by step and deletes the oldest, so a directory reused from a longer run (its
// checkpoint-1000 left there) makes a new run delete each checkpoint right after writing it, and
// `resume_from_checkpoint=True` picks the other run's checkpoint-1000. zerotune's rotation only
// ever considers this run's checkpoints and never deletes the one just written.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "train/checkpoint_dirs.h"

namespace zt::train {

// The file in exp_dir naming the run that last started there.
inline constexpr const char* kRunRecordName = "zerotune_run.json";

// A checkpoint directory and the run that wrote it.
struct RunCheckpoint {
  CheckpointDir dir;
  std::optional<std::string> run_id;  // the state file's "run_id"; nullopt: not recorded
  std::string
      note;  // when run_id is nullopt, why ("no trainer_state.json: not written by zerotune", …)
  // When trainer_state.json was read but does not parse: the error, with the parse position
  // ("<dir>/trainer_state.json: not valid JSON: parse error at line 3, column 1: …").
  std::string corrupt;
};

// The contents of <exp_dir>/zerotune_run.json.
struct RunRecord {
  std::string run_id;
  std::string started;       // UTC, ISO 8601 ("2025-01-31T12:00:00Z")
  std::string resumed_from;  // the checkpoint the run resumed from, "" for a fresh start
};

// The name of a zero_state_rank*.bin file in `dir` (zerotune's ZeRO state: the directory is a
// zerotune checkpoint whatever its state files say), or "" when none (or `dir` unreadable).
std::string zero_state_file_in(const std::filesystem::path& dir);

// A fresh run id: 32 lowercase hex digits from std::random_device.
std::string new_run_id();

// Every checkpoint-<step> directory of `exp_dir` (checkpoint_dirs.h), step ascending, with the run
// id read from its trainer_state.json. A corrupt one (read, but not a JSON object with a string
// "run_id") is no error here: the checkpoint gets no run id, a note saying why and, when the text
// does not parse, `corrupt`. One that cannot be read (an I/O error: permission denied, a directory
// of that name, …) is no corruption: throws zt::Error naming the file and the OS's reason, so
// that rotation never deletes it and resume never passes it over.
std::vector<RunCheckpoint> list_run_checkpoints(const std::filesystem::path& exp_dir);

// "checkpoint-1000 (no trainer_state.json: not written by zerotune)", "checkpoint-8 (run 1a2b…)".
std::string describe_checkpoint(const RunCheckpoint& c);

// <exp_dir>/zerotune_run.json, or nullopt when absent. Throws zt::Error naming the file when it is
// not a JSON object with a string "run_id".
std::optional<RunRecord> read_run_record(const std::filesystem::path& exp_dir);
// Writes <exp_dir>/zerotune_run.json atomically (creating exp_dir). Throws zt::Error on failure.
void write_run_record(const std::filesystem::path& exp_dir, const RunRecord& record);

// The checkpoints of `exp_dir` that do not belong to run `run_id`.
std::vector<RunCheckpoint> other_runs_checkpoints(const std::filesystem::path& exp_dir,
                                                  const std::string& run_id);

// `resume_from_checkpoint: true`: the newest checkpoint (largest step) of the run named by
// <exp_dir>/zerotune_run.json; with no such file, the newest checkpoint when every checkpoint
// names one run (transformers' get_last_checkpoint). Throws zt::Error saying plainly why there is
// none: no checkpoint at all (HF's "No valid checkpoint found in output directory (<dir>)"), no
// run record and a readable checkpoint without a run id or two run ids among them (so the run is
// unknown, whatever a corrupt checkpoint beside them holds; the message names the checkpoints and
// ids that differ), or a last run that saved no checkpoint —
// listing the checkpoints that are there and how to resume one of them explicitly — or a
// checkpoint whose trainer_state.json is corrupt and newer than every readable checkpoint of the
// run (it may be the one to resume): the parse error with its position, as the explicit
// resume_from_checkpoint=<dir> reports it. A trainer_state.json that cannot be read (an I/O
// error) fails whatever its step: list_run_checkpoints' error.
CheckpointDir latest_checkpoint_of_last_run(const std::filesystem::path& exp_dir);

// Rotation by `save_total_limit` (<= 0: nothing) over run `run_id`'s checkpoints only: the oldest
// (by step) are deleted until at most max(limit, number protected) of them remain, never
// `just_written` nor `best` (the best model's checkpoint, when not empty) — transformers'
// _rotate_checkpoints, which keeps two when the limit is 1 and the best is not the newest.
// Returns the deleted paths, oldest first. Throws zt::Error naming a directory it cannot remove,
// or a checkpoint's trainer_state.json it cannot read (list_run_checkpoints; nothing is deleted).
std::vector<std::filesystem::path> rotate_run_checkpoints(const std::filesystem::path& exp_dir,
                                                          int64_t save_total_limit,
                                                          const std::string& run_id,
                                                          const std::filesystem::path& just_written,
                                                          const std::filesystem::path& best = {});

}  // namespace zt::train
