// Checkpoints tied to runs (train/run_checkpoints.h): rotation only over this run's checkpoints,
// never the one just written; resume_from_checkpoint: true picks the last run's newest or says why
// it cannot.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "core/file_util.h"
#include "core/zt_test_util.h"
#include "io/json.h"
#include "train/run_checkpoints.h"

namespace zt::train {
namespace {

namespace fs = std::filesystem;
using testing::list_dir;
using testing::TempDir;

const std::string kRunA(32, 'a'), kRunB(32, 'b');
// What the JSON parser says of "{broken" (the parse position included).
const std::string kBrokenReason =
    "parse error at line 1, column 2: syntax error while parsing object key - invalid literal; "
    "last read: '{b'; expected string literal";

// A checkpoint directory whose trainer_state.json names `run_id` ("" = no trainer_state.json).
void make_checkpoint(const fs::path& exp, int64_t step, const std::string& run_id) {
  const fs::path d = exp / checkpoint_name(step);
  fs::create_directories(d);
  if (!run_id.empty())
    std::ofstream(d / "trainer_state.json")
        << Json({{"global_step", step}, {"run_id", run_id}}).dump();
}

TEST(RunCheckpoints, NewRunIdsAre32HexDigitsAndDiffer) {
  const std::string a = new_run_id(), b = new_run_id();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
}

TEST(RunCheckpoints, ListTellsWhoWroteEachCheckpoint) {
  TempDir d;
  make_checkpoint(d.path(), 1000, "");
  make_checkpoint(d.path(), 2, kRunA);
  fs::create_directories(d / "checkpoint-3");
  std::ofstream(d / "checkpoint-3" / "trainer_state.json") << R"({"global_step": 3})";
  fs::create_directories(d / "checkpoint-5");
  std::ofstream(d / "checkpoint-5" / "trainer_state.json") << "{broken";
  const auto all = list_run_checkpoints(d.path());
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].dir.step, 2);
  EXPECT_EQ(all[0].run_id, kRunA);
  EXPECT_EQ(describe_checkpoint(all[0]), "checkpoint-2 (run " + kRunA + ")");
  EXPECT_EQ(all[1].run_id, std::nullopt);
  EXPECT_EQ(describe_checkpoint(all[1]),
            "checkpoint-3 (no run_id in trainer_state.json: written by HF or an older zerotune)");
  EXPECT_EQ(describe_checkpoint(all[2]), "checkpoint-5 (trainer_state.json is corrupt)");
  EXPECT_EQ(all[2].corrupt, (d / "checkpoint-5" / "trainer_state.json").string() +
                                ": not valid JSON: " + kBrokenReason);
  EXPECT_EQ(describe_checkpoint(all[3]),
            "checkpoint-1000 (no trainer_state.json: not written by zerotune)");
  const auto others = other_runs_checkpoints(d.path(), kRunA);
  ASSERT_EQ(others.size(), 3u);
  EXPECT_EQ(others[0].dir.step, 3);
}

TEST(RunCheckpoints, RotationKeepsTheNewCheckpointAndIgnoresOtherRuns) {
  // The case `rotation-deletes-new-checkpoints`: an older run's checkpoint-1000 in the directory.
  TempDir d;
  make_checkpoint(d.path(), 1000, "");
  make_checkpoint(d.path(), 900, kRunB);
  make_checkpoint(d.path(), 2, kRunA);
  EXPECT_TRUE(rotate_run_checkpoints(d.path(), 1, kRunA, d / "checkpoint-2").empty());
  make_checkpoint(d.path(), 4, kRunA);
  const auto removed = rotate_run_checkpoints(d.path(), 1, kRunA, d / "checkpoint-4");
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], d / "checkpoint-2");
  EXPECT_EQ(list_dir(d.path()),
            (std::vector<std::string>{"checkpoint-1000", "checkpoint-4", "checkpoint-900"}));
  // A run resumed from an earlier checkpoint of its own writes a lower step than a stale later one:
  // the one just written survives, the stale one goes.
  make_checkpoint(d.path(), 6, kRunA);
  make_checkpoint(d.path(), 5, kRunA);
  const auto r2 = rotate_run_checkpoints(d.path(), 1, kRunA, d / "checkpoint-5");
  EXPECT_EQ(r2, (std::vector<fs::path>{d / "checkpoint-4", d / "checkpoint-6"}));
  EXPECT_EQ(list_dir(d.path()),
            (std::vector<std::string>{"checkpoint-1000", "checkpoint-5", "checkpoint-900"}));
  // Limit 2 keeps two of this run's; 0 keeps all.
  make_checkpoint(d.path(), 7, kRunA);
  make_checkpoint(d.path(), 8, kRunA);
  EXPECT_EQ(rotate_run_checkpoints(d.path(), 0, kRunA, d / "checkpoint-8").size(), 0u);
  EXPECT_EQ(rotate_run_checkpoints(d.path(), 2, kRunA, d / "checkpoint-8"),
            (std::vector<fs::path>{d / "checkpoint-5"}));
}

TEST(RunCheckpoints, RunRecordRoundTrips) {
  TempDir d;
  EXPECT_EQ(read_run_record(d / "exp"), std::nullopt);
  write_run_record(d / "exp", {.run_id = kRunA, .started = "", .resumed_from = ""});
  const auto r = read_run_record(d / "exp");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->run_id, kRunA);
  EXPECT_EQ(r->started.size(), 20u) << r->started;  // 2025-01-31T12:00:00Z
  EXPECT_EQ(r->resumed_from, "");
  const Json j = Json::parse(read_file(d / "exp" / kRunRecordName));
  EXPECT_TRUE(j["resumed_from"].is_null());
  std::ofstream(d / "exp" / kRunRecordName) << R"({"id": 1})";
  testing::expect_error([&] { read_run_record(d / "exp"); }, {kRunRecordName, "string \"run_id\""});
}

TEST(RunCheckpoints, ResumeTruePicksTheLastRunsNewestOrSaysWhy) {
  TempDir d;
  const fs::path exp = d / "exp";
  testing::expect_error([&] { latest_checkpoint_of_last_run(exp); },
                        {"No valid checkpoint found in output directory", "exp"});
  make_checkpoint(exp, 1000, "");
  make_checkpoint(exp, 2, kRunA);
  make_checkpoint(exp, 4, kRunA);
  make_checkpoint(exp, 6, kRunB);
  // No record: which run is unknown.
  testing::expect_error([&] { latest_checkpoint_of_last_run(exp); },
                        {"has no zerotune_run.json", "checkpoint-1000 (no trainer_state.json",
                         "trainer.resume_from_checkpoint=<checkpoint directory>"});
  write_run_record(exp, {.run_id = kRunA, .started = "2025-01-31T12:00:00Z", .resumed_from = ""});
  EXPECT_EQ(latest_checkpoint_of_last_run(exp).path, exp / "checkpoint-4");  // not 6 (B) nor 1000
  write_run_record(exp, {.run_id = kRunB, .started = "", .resumed_from = ""});
  EXPECT_EQ(latest_checkpoint_of_last_run(exp).path, exp / "checkpoint-6");
  const std::string runC(32, 'c');
  write_run_record(exp, {.run_id = runC, .started = "2025-02-01T08:00:00Z", .resumed_from = ""});
  testing::expect_error([&] { latest_checkpoint_of_last_run(exp); },
                        {"the last run started in",
                         "(run " + runC + ", started 2025-02-01T08:00:00Z) saved no checkpoint",
                         "checkpoint-4 (run " + kRunA + ")"});
}

// No zerotune_run.json (deleted, or the checkpoints copied into a new exp_dir): when every
// checkpoint names one run, its newest is resumed, as transformers' get_last_checkpoint; two runs,
// or a checkpoint of no known run, are refused naming them.
TEST(RunCheckpoints, ResumeTrueWithoutARunRecordTakesTheOnlyRunsNewest) {
  TempDir d;
  const fs::path exp = d / "exp";
  make_checkpoint(exp, 2, kRunA);
  make_checkpoint(exp, 10, kRunA);
  make_checkpoint(exp, 4, kRunA);
  EXPECT_EQ(latest_checkpoint_of_last_run(exp).path, exp / "checkpoint-10");
  EXPECT_FALSE(fs::exists(exp / kRunRecordName));  // only read here; the trainer writes it
  make_checkpoint(exp, 6, kRunB);
  testing::expect_error([&] { latest_checkpoint_of_last_run(exp); },
                        {"has no zerotune_run.json",
                         "belong to different runs — checkpoint-10 (run " + kRunA +
                             ") and checkpoint-6 (run " + kRunB + ")",
                         "trainer.resume_from_checkpoint=<checkpoint directory>"});
  fs::remove_all(exp / "checkpoint-6");
  make_checkpoint(exp, 8, "");
  testing::expect_error(
      [&] { latest_checkpoint_of_last_run(exp); },
      {"has no zerotune_run.json",
       "and checkpoint-8 (no trainer_state.json: not written by zerotune) names no run id",
       "trainer.resume_from_checkpoint=<checkpoint directory>"});
}

// A checkpoint of zerotune (its zero_state_rank*.bin there) that lost its trainer_state.json was
// taken for another run's: resume passed over it to an older checkpoint and then overwrote it. It
// is corrupt, so a resume stops naming it; a directory without zerotune's files stays foreign.
TEST(RunCheckpoints, ACheckpointThatLostItsTrainerStateIsCorruptNotForeign) {
  TempDir d;
  const fs::path exp = d / "exp";
  make_checkpoint(exp, 1, kRunA);
  fs::create_directories(exp / "checkpoint-2");
  std::ofstream(exp / "checkpoint-2" / "zero_state_rank00000.bin") << "state";
  write_run_record(exp, {.run_id = kRunA, .started = "2025-01-31T12:00:00Z", .resumed_from = ""});
  const auto all = list_run_checkpoints(exp);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(describe_checkpoint(all[1]), "checkpoint-2 (zerotune_state.json is missing)");
  EXPECT_EQ(all[1].corrupt, (exp / "checkpoint-2" / "zerotune_state.json").string() +
                                ": missing, though " + (exp / "checkpoint-2").string() +
                                " holds zerotune's zero_state_rank00000.bin (a checkpoint damaged "
                                "or copied in part)");
  EXPECT_NE(testing::error_of([&] { latest_checkpoint_of_last_run(exp); })
                .find("copied in part); checkpoint " + (exp / "checkpoint-2").string() +
                      " is corrupt, and it is newer than checkpoint-1"),
            std::string::npos);
  fs::remove(exp / "checkpoint-2" / "zero_state_rank00000.bin");
  EXPECT_EQ(describe_checkpoint(list_run_checkpoints(exp)[1]),
            "checkpoint-2 (no trainer_state.json: not written by zerotune)");
  EXPECT_EQ(latest_checkpoint_of_last_run(exp).path, exp / "checkpoint-1");
}

// A checkpoint as zerotune writes it now: the run id in zerotune_state.json, beside transformers'
// trainer_state.json (no run id; a corrupt one does not hide the run). transformers'
// trainer_state.json alone beside zerotune's ZeRO state is a zerotune checkpoint that lost its
// zerotune_state.json (corrupt); without the ZeRO state it is HF's.
TEST(RunCheckpoints, TheRunIdIsZerotuneStatesAndTheHfFileAloneIsNotARun) {
  TempDir d;
  const fs::path exp = d / "exp";
  const std::string hf = R"({"global_step": 1, "log_history": [], "max_steps": 4})";
  for (int step : {1, 2, 3, 4, 5}) {
    const fs::path c = exp / checkpoint_name(step);
    fs::create_directories(c);
    std::ofstream(c / "trainer_state.json") << (step == 2 ? "{broken" : hf);
  }
  for (int step : {1, 2})
    std::ofstream(exp / checkpoint_name(step) / "zerotune_state.json")
        << Json({{"global_step", step}, {"run_id", kRunA}, {"plan", Json::object()}}).dump();
  std::ofstream(exp / "checkpoint-3" / "zero_state_rank00000.bin") << "state";
  std::ofstream(exp / "checkpoint-5" / "zerotune_state.json") << "{broken";
  const auto all = list_run_checkpoints(exp);
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[0].run_id, kRunA);
  EXPECT_EQ(all[1].run_id, kRunA);
  EXPECT_EQ(all[1].corrupt, "");
  EXPECT_EQ(describe_checkpoint(all[2]), "checkpoint-3 (zerotune_state.json is missing)");
  EXPECT_EQ(all[2].corrupt, (exp / "checkpoint-3" / "zerotune_state.json").string() +
                                ": missing, though " + (exp / "checkpoint-3").string() +
                                " holds zerotune's zero_state_rank00000.bin (a checkpoint damaged "
                                "or copied in part)");
  EXPECT_EQ(describe_checkpoint(all[3]),
            "checkpoint-4 (no run_id in trainer_state.json: written by HF or an older zerotune)");
  EXPECT_EQ(all[3].corrupt, "");
  EXPECT_EQ(describe_checkpoint(all[4]), "checkpoint-5 (zerotune_state.json is corrupt)");
  EXPECT_EQ(all[4].corrupt, (exp / "checkpoint-5" / "zerotune_state.json").string() +
                                ": not valid JSON: " + kBrokenReason);
  // Rotation by the new files: run A's two, the older deleted, the others left alone.
  EXPECT_EQ(rotate_run_checkpoints(exp, 1, kRunA, exp / "checkpoint-2"),
            std::vector<fs::path>{exp / "checkpoint-1"});
  EXPECT_TRUE(fs::exists(exp / "checkpoint-3"));
}

// A checkpoint of this very run whose trainer_state.json was cut short was reported as belonging
// to "other runs (trainer_state.json is not a JSON object)"; it is corrupt, and named so with the
// parse error and its position, whenever it is newer than every readable checkpoint of the run.
TEST(RunCheckpoints, ResumeTrueReportsACorruptCheckpointAsCorrupt) {
  TempDir d;
  const fs::path exp = d / "exp";
  fs::create_directories(exp / "checkpoint-2");
  const fs::path state2 = exp / "checkpoint-2" / "trainer_state.json";
  std::ofstream(state2) << "{broken";
  write_run_record(exp, {.run_id = kRunA, .started = "2025-01-31T12:00:00Z", .resumed_from = ""});
  const std::string run = "the last run started in " + exp.string() + " (run " + kRunA + ")";
  EXPECT_EQ(testing::error_of([&] { latest_checkpoint_of_last_run(exp); }),
            "resume_from_checkpoint: true: " + state2.string() + ": not valid JSON: " +
                kBrokenReason + "; checkpoint " + (exp / "checkpoint-2").string() +
                " is corrupt, and no readable checkpoint belongs to " + run +
                ", so it may be the checkpoint to resume. Restore or remove it, or pass "
                "trainer.resume_from_checkpoint=<checkpoint directory> to resume another: "
                "checkpoint-2 (trainer_state.json is corrupt)");
  // An older readable checkpoint of the run does not hide the corrupt newer one ...
  make_checkpoint(exp, 1, kRunA);
  EXPECT_NE(testing::error_of([&] { latest_checkpoint_of_last_run(exp); })
                .find("is corrupt, and it is newer than checkpoint-1, the newest readable "
                      "checkpoint of " +
                      run + ", so it may be"),
            std::string::npos);
  // ... a newer one does; so it is without a run record, when one run wrote the others.
  make_checkpoint(exp, 3, kRunA);
  EXPECT_EQ(latest_checkpoint_of_last_run(exp).path, exp / "checkpoint-3");
  fs::remove(exp / kRunRecordName);
  EXPECT_EQ(latest_checkpoint_of_last_run(exp).path, exp / "checkpoint-3");
  fs::remove_all(exp / "checkpoint-3");
  EXPECT_NE(testing::error_of([&] { latest_checkpoint_of_last_run(exp); })
                .find("is corrupt, and it is newer than checkpoint-1, the newest readable "
                      "checkpoint of the run in " +
                      exp.string() + ", so"),
            std::string::npos);
}

// Without a run record, readable checkpoints of two runs, or one of no known run, leave the run to
// resume unknown whatever a corrupt checkpoint beside them holds: that error comes through with its
// own message. It was reported as "checkpoint-2 is corrupt, and no readable checkpoint belongs to
// the run", though checkpoint-4 is readable and newer.
TEST(RunCheckpoints, ResumeTrueReportsAnUnknownRunBesideACorruptCheckpoint) {
  TempDir d;
  const fs::path exp = d / "exp";
  fs::create_directories(exp / "checkpoint-2");
  std::ofstream(exp / "checkpoint-2" / "trainer_state.json") << "{broken";
  make_checkpoint(exp, 4, kRunA);
  make_checkpoint(exp, 6, kRunB);
  const std::string head = "resume_from_checkpoint: true: " + exp.string() +
                           " has no zerotune_run.json (zerotune writes it when a run starts) and ";
  const std::string tail =
      ". Pass trainer.resume_from_checkpoint=<checkpoint directory> to resume one of them";
  EXPECT_EQ(testing::error_of([&] { latest_checkpoint_of_last_run(exp); }),
            head + "its checkpoints belong to different runs — checkpoint-6 (run " + kRunB +
                ") and checkpoint-4 (run " + kRunA +
                ") — so it is unknown which run to resume: checkpoint-2 (trainer_state.json is "
                "corrupt), checkpoint-4 (run " +
                kRunA + "), checkpoint-6 (run " + kRunB + ")" + tail);
  fs::remove_all(exp / "checkpoint-6");
  make_checkpoint(exp, 1, "");
  EXPECT_EQ(
      testing::error_of([&] { latest_checkpoint_of_last_run(exp); }),
      head +
          "checkpoint-1 (no trainer_state.json: not written by zerotune) names no run id, so "
          "it is unknown which of its checkpoints belong to the run to resume: checkpoint-1 "
          "(no trainer_state.json: not written by zerotune), checkpoint-2 (trainer_state.json "
          "is corrupt), checkpoint-4 (run " +
          kRunA + ")" + tail);
}

// A trainer_state.json that cannot be read (here a directory of that name: read() fails with
// EISDIR, as root too) was labelled "trainer_state.json is corrupt" (and a directory of that name
// "no trainer_state.json: not written by zerotune"), so resume passed it over for a newer readable
// checkpoint. An I/O error is no corruption: listing, rotation and resume refuse, naming the file
// and the OS's reason, and rotation deletes nothing.
TEST(RunCheckpoints, AnUnreadableTrainerStateIsAnErrorNotCorrupt) {
  TempDir d;
  const fs::path exp = d / "exp";
  make_checkpoint(exp, 2, kRunA);
  make_checkpoint(exp, 6, kRunA);
  const fs::path state4 = exp / "checkpoint-4" / "trainer_state.json";
  fs::create_directories(state4);
  write_run_record(exp, {.run_id = kRunA, .started = "2025-01-31T12:00:00Z", .resumed_from = ""});
  const std::string message =
      state4.string() +
      ": not a regular file (a directory); expected a file (an I/O error, not a corrupt "
      "checkpoint: zerotune neither "
      "rotates away nor skips a checkpoint it cannot read). Make it readable, or move "
      "checkpoint-4 out of " +
      exp.string();
  EXPECT_EQ(testing::error_of([&] { list_run_checkpoints(exp); }), message);
  EXPECT_EQ(testing::error_of([&] { other_runs_checkpoints(exp, kRunA); }), message);
  // Not skipped for the newer readable checkpoint-6, as a corrupt one would be.
  EXPECT_EQ(testing::error_of([&] { latest_checkpoint_of_last_run(exp); }), message);
  EXPECT_EQ(testing::error_of([&] { rotate_run_checkpoints(exp, 1, kRunA, exp / "checkpoint-6"); }),
            message);
  EXPECT_EQ(list_dir(exp), (std::vector<std::string>{"checkpoint-2", "checkpoint-4", "checkpoint-6",
                                                     kRunRecordName}));
  // Permissions (only when they bind: not as root): the file, and a checkpoint directory that
  // cannot be searched.
  if (::geteuid() != 0) {
    fs::remove(state4);
    std::ofstream(state4) << Json({{"global_step", 4}, {"run_id", kRunA}}).dump();
    fs::permissions(state4, fs::perms::none);
    EXPECT_EQ(testing::error_of([&] { latest_checkpoint_of_last_run(exp); }),
              state4.string() + ": cannot open: Permission denied (an I/O error, not a corrupt " +
                  message.substr(message.find("checkpoint: zerotune")));
    fs::permissions(state4, fs::perms::owner_read | fs::perms::owner_write);
    fs::permissions(exp / "checkpoint-4", fs::perms::none);
    EXPECT_EQ(
        testing::error_of([&] { rotate_run_checkpoints(exp, 1, kRunA, exp / "checkpoint-6"); }),
        state4.string() + ": cannot stat: Permission denied (an I/O error, not a corrupt " +
            message.substr(message.find("checkpoint: zerotune")));
    fs::permissions(exp / "checkpoint-4", fs::perms::owner_all);
    EXPECT_EQ(list_dir(exp).size(), 4u);
  }
  // Restored, it is an ordinary checkpoint again.
  fs::remove_all(state4);
  std::ofstream(state4) << Json({{"global_step", 4}, {"run_id", kRunA}}).dump();
  EXPECT_EQ(latest_checkpoint_of_last_run(exp).path, exp / "checkpoint-6");
  EXPECT_EQ(rotate_run_checkpoints(exp, 1, kRunA, exp / "checkpoint-6"),
            (std::vector<fs::path>{exp / "checkpoint-2", exp / "checkpoint-4"}));
}

}  // namespace
}  // namespace zt::train
