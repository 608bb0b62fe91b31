// check_run_dir_is_free: an earlier run's outputs are never overwritten, and the way out the error
// suggests depends on what that run left; check_dir_creatable proves a run directory can be made.
#include <gtest/gtest.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fstream>

#include "cli/run_dir_guard.h"
#include "core/error.h"
#include "core/zt_test_util.h"

namespace zt::cli {
namespace {
namespace fs = std::filesystem;

std::string guard_error(const fs::path& exp) {
  try {
    check_run_dir_is_free(exp, exp / "out", /*resuming=*/false, /*overwrite=*/false);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RunDirGuard, SuggestsResumingOnlyWhenACheckpointExists) {
  const fs::path exp = fs::temp_directory_path() / ("zt_guard_" + std::to_string(::getpid()));
  fs::remove_all(exp);
  fs::create_directories(exp / "out");
  EXPECT_EQ(guard_error(exp), "");  // an empty exp_dir is free
  std::ofstream(exp / "metrics.jsonl") << "{}\n";
  const std::string no_ckpt = guard_error(exp);
  EXPECT_NE(no_ckpt.find("already holds an earlier run (" + (exp / "metrics.jsonl").string() + ")"),
            std::string::npos)
      << no_ckpt;
  EXPECT_EQ(no_ckpt.find("resume_from_checkpoint"), std::string::npos) << no_ckpt;
  EXPECT_NE(no_ckpt.find("trainer.overwrite_output_dir=true"), std::string::npos) << no_ckpt;
  fs::create_directories(exp / "out" / "checkpoint-4");
  const std::string with_ckpt = guard_error(exp);
  EXPECT_NE(with_ckpt.find("continue that run with trainer.resume_from_checkpoint=true"),
            std::string::npos)
      << with_ckpt;
  // Resuming or overwriting: no objection.
  EXPECT_NO_THROW(check_run_dir_is_free(exp, exp / "out", true, false));
  EXPECT_NO_THROW(check_run_dir_is_free(exp, exp / "out", false, true));
  // Only the final model of an earlier run, in an output_dir outside a fresh exp_dir (the same
  // trainer.output_dir given twice): that key is named and is the one to change (it said "exp_dir
  // <fresh dir> already holds an earlier run" and suggested another exp_dir, which repeated it).
  const fs::path fixed = exp / "fixed", fresh = exp / "g2";
  fs::create_directories(fixed);
  std::ofstream(fixed / "model.safetensors") << "x";
  std::string only_out;
  try {
    check_run_dir_is_free(fresh, fixed, false, false);
  } catch (const Error& e) {
    only_out = e.what();
  }
  EXPECT_EQ(only_out, "trainer.output_dir " + fixed.string() + " already holds an earlier run (" +
                          (fixed / "model.safetensors").string() +
                          "); zerotune does not overwrite a run's outputs: give another "
                          "trainer.output_dir (e.g. trainer.output_dir=" +
                          fixed.string() +
                          "_2), or replace it with trainer.overwrite_output_dir=true");
  // The run's files in exp_dir and its model in an output_dir outside it: exp_dir is named, and
  // both keys are to change; inside it (fixed is exp/fixed), exp_dir alone.
  const fs::path outside = exp.string() + "_out";
  fs::create_directories(outside);
  std::ofstream(outside / "model.safetensors") << "x";
  for (const auto& [out, tail] :
       {std::pair{outside,
                  " and trainer.output_dir (e.g. trainer.output_dir=" + outside.string() + "_2), "},
        std::pair{fixed, std::string(", ")}}) {
    std::string both;
    try {
      check_run_dir_is_free(exp, out, false, false);
    } catch (const Error& e) {
      both = e.what();
    }
    EXPECT_EQ(both.rfind("exp_dir " + exp.string() + " already holds an earlier run (", 0), 0u)
        << both;
    EXPECT_NE(both.find("give another exp_dir (e.g. exp_dir=" + exp.string() + "_2)" + tail),
              std::string::npos)
        << both;
  }
  fs::remove_all(outside);
  fs::remove_all(exp);
}

// exp_dir / trainer.output_dir that is, or lies inside, a checkpoint-<step> directory: refused
// naming the key, the path and the checkpoint (the final export replaced another run's checkpoint).
TEST(RunDirGuard, RefusesADirectoryInsideACheckpoint) {
  const fs::path root = fs::temp_directory_path() / ("zt_guard_ckpt_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const fs::path ckpt = root / "run_a" / "checkpoint-500";
  fs::create_directories(ckpt);
  auto error_of = [](const fs::path& dir) {
    try {
      check_not_in_checkpoint("sft.yaml", "trainer.output_dir", dir);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string whole = error_of(ckpt);
  EXPECT_EQ(
      whole.rfind("sft.yaml: trainer.output_dir: " + ckpt.string() + " is checkpoint directory " +
                      ckpt.string() + ", which belongs to a run",
                  0),
      0u)
      << whole;
  EXPECT_EQ(error_of(ckpt.string() + "/")
                .rfind("sft.yaml: trainer.output_dir: " + ckpt.string() +
                           "/ is checkpoint directory " + ckpt.string() + ",",
                       0),
            0u);
  EXPECT_NE(error_of(ckpt / "final" / "model")
                .find(" is inside checkpoint directory " + ckpt.string() + ","),
            std::string::npos);
  // Through a symbolic link too.
  fs::create_directory_symlink(ckpt, root / "link");
  EXPECT_NE(error_of(root / "link" / "final").find("checkpoint directory " + ckpt.string()),
            std::string::npos);
  // Names that are not checkpoint-<digits> are free; so is a sibling of a checkpoint.
  for (const char* free : {"checkpoint-final", "checkpoint-5.tmp-7", "checkpoints", "final"})
    EXPECT_EQ(error_of(root / "run_a" / free), "") << free;
  fs::remove_all(root);
}

// A directory that cannot be made is refused at start-up, not when the final model is written
// (a 300-byte name and /sys passed the old access(2) check, and the run trained to the end): the
// check makes and removes the first missing directory, holds every name to NAME_MAX, and leaves
// nothing behind when it passes.
TEST(RunDirGuard, CreatableMeansMkdirWorksAndLeavesNothing) {
  const fs::path root = fs::temp_directory_path() / ("zt_guard_mk_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  auto error_of = [](const fs::path& dir) {
    return zt::testing::error_of(
        [&] { check_dir_creatable("sft.yaml", "trainer.output_dir", dir); });
  };
  const std::string longname(300, 'o');
  EXPECT_EQ(error_of(root / longname), "sft.yaml: trainer.output_dir: cannot create " +
                                           (root / longname).string() + ": File name too long");
  // Under a directory still to make: the name is held to the file system's NAME_MAX.
  const fs::path deep = root / "new" / longname / "final";
  EXPECT_EQ(error_of(deep), "sft.yaml: trainer.output_dir: cannot create " + deep.string() +
                                ": File name too long (a path component of 300 bytes; " +
                                root.string() + " allows at most 255)");
  // A creatable path passes and nothing of it is left; an existing directory gets no probe left.
  EXPECT_EQ(error_of(root / "a" / "b" / "final"), "<no error>");
  EXPECT_EQ(error_of(root), "<no error>");
  EXPECT_TRUE(fs::is_empty(root));
  // sysfs refuses new directories even to root, whose access(2) says yes.
  struct statfs sfs {};
  struct statvfs svfs {};
  if (::statfs("/sys", &sfs) == 0 && sfs.f_type == 0x62656572 /* SYSFS_MAGIC */ &&
      ::statvfs("/sys", &svfs) == 0) {
    // Not root: the permission check on /sys (mode 0555) comes first.
    const char* reason = (svfs.f_flag & ST_RDONLY) != 0 ? "Read-only file system"
                         : ::geteuid() == 0             ? "Operation not permitted"
                                                        : "Permission denied";
    EXPECT_EQ(error_of("/sys/zerotune_out"),
              std::string("sft.yaml: trainer.output_dir: cannot create /sys/zerotune_out: ") +
                  reason + " (in /sys)");
  }
  fs::remove_all(root);
}

// trainer.overwrite_output_dir with report_to none: the earlier run's event files in the run
// directory go too (a fresh user found them left beside the new run's metrics.jsonl); a
// logging_dir outside exp_dir is not touched by a run that writes nothing to it.
TEST(RunDirGuard, OverwriteClearsTheEarlierRunsEventsEvenWithoutTensorBoard) {
  const fs::path exp = fs::temp_directory_path() / ("zt_guard_ev_" + std::to_string(::getpid()));
  fs::remove_all(exp);
  fs::create_directories(exp / "tensorboard");
  std::ofstream(exp / "metrics.jsonl") << "{}\n";
  std::ofstream(exp / "tensorboard" / "events.out.tfevents.1796547274.host.1") << "x";
  std::ofstream(exp / "tensorboard" / "notes.txt") << "x";

  EXPECT_EQ(earlier_events_dir(exp, exp / "tb", std::nullopt), exp / "tb");  // the run's own
  EXPECT_EQ(earlier_events_dir(exp, "", std::nullopt), exp / "tensorboard");
  EXPECT_EQ(earlier_events_dir(exp, "", (exp / "tb2").string()), exp / "tb2");
  EXPECT_EQ(earlier_events_dir(exp, "", exp.string()), exp);
  EXPECT_EQ(earlier_events_dir(exp, "", (exp / ".." / "shared_tb").string()), fs::path());
  EXPECT_EQ(earlier_events_dir(exp, "", (fs::temp_directory_path() / "tb").string()), fs::path());

  const auto removed = clear_earlier_run(exp, earlier_events_dir(exp, "", std::nullopt));
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_EQ(removed[0], exp / "metrics.jsonl");
  EXPECT_EQ(removed[1], exp / "tensorboard" / "events.out.tfevents.1796547274.host.1");
  EXPECT_FALSE(fs::exists(exp / "metrics.jsonl"));
  EXPECT_FALSE(fs::exists(removed[1]));
  EXPECT_TRUE(fs::exists(exp / "tensorboard" / "notes.txt"));  // only event files go
  fs::remove_all(exp);
}

}  // namespace
}  // namespace zt::cli
