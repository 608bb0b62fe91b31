// One run at a time in an exp_dir. Two zerotune runs writing into one exp_dir (a job started
// twice, a scheduler's requeue while the first still runs, two resumes of one run) write the same
// checkpoint-<step> directories, rotate each other's checkpoints away and interleave
// metrics.jsonl; a resumed one also rewrites the run record. The run-directory guard
// (cli/run_dir_guard.h) only sees a directory's files at start-up and lets every resume through, so
// rank 0 holds an exclusive flock(2) on <exp_dir>/.zerotune.lock for as long as it runs; a second
// run refuses to start. The lock goes with the process (exit, crash, kill -9): no stale lock.
#pragma once

#include <filesystem>

namespace zt::train {

// The lock file in exp_dir (an empty file naming the holder's pid; left in place).
inline constexpr const char* kRunLockName = ".zerotune.lock";

// Holds the exclusive lock on <exp_dir>/.zerotune.lock from construction to destruction
// (move-only).
class RunDirLock {
 public:
  RunDirLock() = default;
  // Creates the lock file when absent and takes the lock without waiting. Throws zt::Error
  //   "exp_dir DIR is in use by another zerotune run (pid N, per DIR/.zerotune.lock) …"
  // when another process holds it, or naming the file and errno text when it cannot be created.
  // A file system without flock (some network ones): a warning, and the run goes on unlocked.
  explicit RunDirLock(const std::filesystem::path& exp_dir);
  ~RunDirLock();
  RunDirLock(RunDirLock&& other) noexcept;
  RunDirLock& operator=(RunDirLock&& other) noexcept;
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

  // Whether this object holds the lock (or found flock unsupported and went on without it).
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace zt::train
