#include "train/run_checkpoints.h"

#include <fmt/chrono.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "core/error.h"
#include "core/file_util.h"
#include "io/json.h"
#include "io/json_check.h"
#include "train/checkpoint_state.h"

namespace zt::train {

namespace fs = std::filesystem;

namespace {

std::string list_described(const std::vector<RunCheckpoint>& cps) {
  std::string out;
  for (const auto& c : cps) out += (out.empty() ? "" : ", ") + describe_checkpoint(c);
  return out;
}

}  // namespace

std::string zero_state_file_in(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.starts_with("zero_state_rank") && f.ends_with(".bin")) return f;
  }
  return std::string();
}

std::string new_run_id() {
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 4; ++i) id += fmt::format("{:08x}", static_cast<uint32_t>(rd()));
  return id;
}

std::vector<RunCheckpoint> list_run_checkpoints(const fs::path& exp_dir) {
  std::vector<RunCheckpoint> out;
  for (const auto& dir : list_checkpoints(exp_dir)) {
    RunCheckpoint c;
    c.dir = dir;
    // The run id: zerotune_state.json's (trainer_state.json's in an older checkpoint).
    const fs::path state = zerotune_state_path(dir.path);
    const std::string name = state.filename().string();
    // Reading the file can fail for another reason than its content (permissions, a directory of
    // that name, a disk error): that is no corrupt checkpoint, and nothing tells whose it is, so
    // it is the user's to settle before any checkpoint is rotated away or resumed.
    const auto unreadable = [&](const std::string& what) {
      fail(
          "{} (an I/O error, not a corrupt checkpoint: zerotune neither rotates away nor skips a "
          "checkpoint it cannot read). Make it readable, or move {} out of {}",
          what, dir.path.filename().string(), exp_dir.string());
    };
    // zerotune's own ZeRO state files in the directory: a checkpoint of zerotune, though its state
    // file is missing (a copy cut short, a clean-up). It may be the newest of its run, so it is
    // corrupt, never another run's to pass over and overwrite.
    const auto own_state_file = [&] { return zero_state_file_in(dir.path); };
    const auto missing = [&](const std::string& own) {
      c.corrupt = fmt::format(
          "{}: missing, though {} holds zerotune's {} (a checkpoint damaged or copied in part)",
          (dir.path / kZerotuneStateName).string(), dir.path.string(), own);
      c.note = std::string(kZerotuneStateName) + " is missing";
    };
    std::error_code ec;
    const bool there = fs::exists(state, ec);  // false without error: absent (or a dangling link)
    if (ec) unreadable(fmt::format("{}: cannot stat: {}", state.string(), ec.message()));
    if (!there) {
      if (const std::string own = own_state_file(); !own.empty())
        missing(own);
      else
        c.note = "no trainer_state.json: not written by zerotune";
    } else {
      std::string text;
      try {
        text = read_file(state);  // "<file>: cannot open: Permission denied", "… read failed: …"
      } catch (const Error& e) {
        unreadable(e.what());
      }
      Json j;
      try {
        j = parse_json(text, state.string());
      } catch (const Json::exception& e) {
        c.corrupt = fmt::format("{}: not valid JSON: {}", state.string(), json_error_reason(e));
      } catch (const std::exception& e) {  // a NUL byte, nested too deep
        c.corrupt = e.what();
      }
      // transformers' trainer_state.json alone (no zerotune key "plan") beside zerotune's ZeRO
      // state: a current zerotune checkpoint that lost its zerotune_state.json.
      const bool hf_only = name == kTrainerStateName && c.corrupt.empty() && j.is_object() &&
                           !j.contains("plan") && !j.contains("run_id");
      if (!c.corrupt.empty())
        c.note = name + " is corrupt";
      else if (!j.is_object())
        c.note = name + " is not a JSON object";
      else if (const std::string own = hf_only ? own_state_file() : ""; !own.empty())
        missing(own);
      else if (!j.contains("run_id") || !j["run_id"].is_string())
        c.note = fmt::format("no run_id in {}: written by HF or an older zerotune", name);
      else
        c.run_id = j["run_id"].get<std::string>();
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::string describe_checkpoint(const RunCheckpoint& c) {
  const std::string name = c.dir.path.filename().string();
  if (c.run_id) return fmt::format("{} (run {})", name, *c.run_id);
  return fmt::format("{} ({})", name, c.note);
}

std::optional<RunRecord> read_run_record(const fs::path& exp_dir) {
  const fs::path p = exp_dir / kRunRecordName;
  std::error_code ec;
  if (!fs::exists(p, ec)) return std::nullopt;
  Json j;
  try {
    j = parse_json(read_file(p), p.string());
  } catch (const Json::exception& e) {
    fail("{}: not valid JSON: {}", p.string(), json_error_reason(e));
  }
  if (!j.is_object() || !j.contains("run_id") || !j["run_id"].is_string())
    fail("{}: expected a JSON object with a string \"run_id\"", p.string());
  RunRecord r;
  r.run_id = j["run_id"].get<std::string>();
  if (j.contains("started") && j["started"].is_string())
    r.started = j["started"].get<std::string>();
  if (j.contains("resumed_from") && j["resumed_from"].is_string())
    r.resumed_from = j["resumed_from"].get<std::string>();
  return r;
}

void write_run_record(const fs::path& exp_dir, const RunRecord& record) {
  std::error_code ec;
  fs::create_directories(exp_dir, ec);
  if (ec) fail("{}: cannot create the directory: {}", exp_dir.string(), ec.message());
  std::string started = record.started;
  if (started.empty()) {
    const auto now = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
    started = fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", now);
  }
  Json j = {
      {"run_id", record.run_id},
      {"started", started},
      {"resumed_from", record.resumed_from.empty() ? Json(nullptr) : Json(record.resumed_from)}};
  write_file_atomic(exp_dir / kRunRecordName, j.dump(2) + "\n");
}

std::vector<RunCheckpoint> other_runs_checkpoints(const fs::path& exp_dir,
                                                  const std::string& run_id) {
  std::vector<RunCheckpoint> out;
  for (auto& c : list_run_checkpoints(exp_dir))
    if (c.run_id != run_id) out.push_back(std::move(c));
  return out;
}

namespace {

// The newest of `cps` (step ascending) that run `run_id` wrote, or nullopt.
std::optional<CheckpointDir> newest_of_run(const std::vector<RunCheckpoint>& cps,
                                           const std::string& run_id) {
  std::optional<CheckpointDir> newest;
  for (const auto& c : cps)
    if (c.run_id == run_id) newest = c.dir;  // step ascending: the last match is the newest
  return newest;
}

// The checkpoint `resume_from_checkpoint: true` resumes among `cps` (see
// latest_checkpoint_of_last_run), or nullopt when `cps` is empty; throws zt::Error when the run
// to resume is unknown or saved none of them, listing `all` (the checkpoints in exp_dir).
std::optional<CheckpointDir> last_run_checkpoint(const fs::path& exp_dir,
                                                 const std::optional<RunRecord>& record,
                                                 const std::vector<RunCheckpoint>& cps,
                                                 const std::vector<RunCheckpoint>& all) {
  if (cps.empty()) return std::nullopt;
  if (!record) {
    // No record (deleted, or checkpoints copied into a new exp_dir): when every checkpoint names
    // one run, it is that run's newest, as transformers' get_last_checkpoint picks the largest
    // step. A checkpoint of no known run, or two runs, leave the run to resume unknown.
    for (const auto& c : cps)
      if (!c.run_id)
        fail(
            "resume_from_checkpoint: true: {} has no {} (zerotune writes it when a run starts) "
            "and {} names no run id, so it is unknown which of its checkpoints belong to the run "
            "to resume: {}. Pass trainer.resume_from_checkpoint=<checkpoint directory> to resume "
            "one of them",
            exp_dir.string(), kRunRecordName, describe_checkpoint(c), list_described(all));
    const RunCheckpoint& newest = cps.back();  // step ascending
    for (auto it = cps.rbegin(); it != cps.rend(); ++it)
      if (it->run_id != newest.run_id)
        fail(
            "resume_from_checkpoint: true: {} has no {} (zerotune writes it when a run starts) "
            "and its checkpoints belong to different runs — {} and {} — so it is unknown which run "
            "to resume: {}. Pass trainer.resume_from_checkpoint=<checkpoint directory> to resume "
            "one of them",
            exp_dir.string(), kRunRecordName, describe_checkpoint(newest), describe_checkpoint(*it),
            list_described(all));
    return newest.dir;
  }
  const std::optional<CheckpointDir> newest = newest_of_run(cps, record->run_id);
  if (!newest)
    fail(
        "resume_from_checkpoint: true: the last run started in {} (run {}, started {}) saved no "
        "checkpoint; those there belong to other runs: {}. Pass "
        "trainer.resume_from_checkpoint=<checkpoint directory> to resume one of them",
        exp_dir.string(), record->run_id, record->started.empty() ? "?" : record->started,
        list_described(all));
  return newest;
}

}  // namespace

CheckpointDir latest_checkpoint_of_last_run(const fs::path& exp_dir) {
  const auto all = list_run_checkpoints(exp_dir);
  if (all.empty()) fail("No valid checkpoint found in output directory ({})", exp_dir.string());
  const auto record = read_run_record(exp_dir);
  // A checkpoint whose trainer_state.json cannot be read names no run: it may be the newest of
  // the run to resume (a copy cut short), so it is reported as corrupt unless a readable
  // checkpoint of that run is newer.
  const RunCheckpoint* corrupt = nullptr;
  std::vector<RunCheckpoint> readable;
  for (const auto& c : all) {
    if (c.corrupt.empty())
      readable.push_back(c);
    else
      corrupt = &c;  // step ascending: the newest corrupt one
  }
  if (corrupt == nullptr) return *last_run_checkpoint(exp_dir, record, all, all);
  // The run's newest readable checkpoint; none (nullopt) means the corrupt one may be the run's.
  // Without a run record the readable checkpoints must name one run: when they do not, the run
  // to resume is unknown whatever the corrupt one holds, and that error comes through with its
  // own message rather than as "corrupt".
  const std::optional<CheckpointDir> picked =
      record ? newest_of_run(readable, record->run_id)
             : last_run_checkpoint(exp_dir, record, readable, all);
  if (picked && picked->step > corrupt->dir.step) return *picked;
  const std::string run =
      record ? fmt::format("the last run started in {} (run {})", exp_dir.string(), record->run_id)
             : fmt::format("the run in {}", exp_dir.string());
  fail(
      "resume_from_checkpoint: true: {}; checkpoint {} is corrupt, and {}, so it may be the "
      "checkpoint to resume. Restore or remove it, or pass "
      "trainer.resume_from_checkpoint=<checkpoint directory> to resume another: {}",
      corrupt->corrupt, corrupt->dir.path.string(),
      picked ? fmt::format("it is newer than {}, the newest readable checkpoint of {}",
                           picked->path.filename().string(), run)
             : fmt::format("no readable checkpoint belongs to {}", run),
      list_described(all));
}

std::vector<fs::path> rotate_run_checkpoints(const fs::path& exp_dir, int64_t save_total_limit,
                                             const std::string& run_id,
                                             const fs::path& just_written, const fs::path& best) {
  if (save_total_limit <= 0) return {};
  std::vector<CheckpointDir> mine;
  for (const auto& c : list_run_checkpoints(exp_dir))
    if (c.run_id == run_id) mine.push_back(c.dir);
  std::vector<fs::path> protect = {just_written};
  if (!best.empty() && best.lexically_normal() != just_written.lexically_normal())
    protect.push_back(best);
  return delete_oldest_checkpoints(
      mine, std::max(save_total_limit, static_cast<int64_t>(protect.size())), protect);
}

}  // namespace zt::train
