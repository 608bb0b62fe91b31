#include "train/run_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/log.h"

namespace zt::train {

RunDirLock::RunDirLock(const std::filesystem::path& exp_dir) {
  const std::filesystem::path file = exp_dir / kRunLockName;
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    fail("exp_dir: cannot create the lock file {}: {}", file.string(), std::strerror(errno));
  int rc;
  do {
    rc = ::flock(fd_, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno == EWOULDBLOCK) {
    std::string holder(32, '\0');
    const ssize_t n = ::pread(fd_, holder.data(), holder.size(), 0);
    holder.resize(n > 0 ? static_cast<size_t>(n) : 0);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    ::close(fd_);
    fd_ = -1;
    fail(
        "exp_dir {} is in use by another zerotune run ({}, per {}): two runs in one exp_dir would "
        "write the same checkpoints, rotate each other's away and interleave metrics.jsonl; wait "
        "for that run to end (or stop it), or give this one another exp_dir",
        exp_dir.string(), holder.empty() ? std::string("pid unknown") : "pid " + holder,
        file.string());
  }
  if (rc != 0) {
    log::warn("{}: flock failed ({}); the run goes on without the exp_dir lock", file.string(),
              std::strerror(errno));
    return;  // fd_ stays open: held() says no lock is to be taken again
  }
  // The holder's pid, for the message of a run refused by the lock.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0)
    log::warn("{}: cannot record the pid: {}", file.string(), std::strerror(errno));
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

RunDirLock::RunDirLock(RunDirLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

RunDirLock& RunDirLock::operator=(RunDirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

}  // namespace zt::train
