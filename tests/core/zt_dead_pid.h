// The pid of a process that has exited: for tests of what a killed process leaves behind.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>

namespace zt::testing {

// The pid of a child that has exited and been reaped: no process runs under it (until the kernel
// hands the pid out again, which takes a wrap-around of the pid space).
inline int64_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

}  // namespace zt::testing
