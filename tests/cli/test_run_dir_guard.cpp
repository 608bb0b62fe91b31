// check_run_dir_is_free: an earlier run's outputs are never overwritten, and the way out the error
// suggests depends on what that run left.
#include "cli/run_dir_guard.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

#include "core/error.h"

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
  fs::remove_all(exp);
}

}  // namespace
}  // namespace zt::cli
