// Test helper: runs a command in its own process group with stdout+stderr captured, with bounded
// waits (a hang becomes a test failure, never a stuck suite). No timing is asserted.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace zt::test {

// OpenMPI's session-directory base for the mpiruns of this test process: /tmp/zt_ompi.<pid>
// (OpenMPI creates it; removed when the process exits). Under the default base, two mpiruns
// started at once — two tests under ctest -j2 — race to create /tmp/ompi.<host>.<uid>, and one
// fails ("orte_session_dir failed … File exists", seen in a CI run); a process's own mpiruns run
// one after the other.
inline std::string mpi_tmpdir_base() {
  static const struct Base {
    std::string path = "/tmp/zt_ompi." + std::to_string(getpid());
    ~Base() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } base;
  return base.path;
}

class Child {
 public:
  // argv[0] is looked up in PATH; `env` entries "K=V" are added to (or replace in) the environment,
  // "K=" alone removes K.
  Child(const std::vector<std::string>& argv, const std::vector<std::string>& env = {}) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) std::abort();
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      for (const std::string& e : env) {
        const size_t eq = e.find('=');
        const std::string k = e.substr(0, eq), v = e.substr(eq + 1);
        if (v.empty())
          unsetenv(k.c_str());
        else
          setenv(k.c_str(), v.c_str(), 1);
      }
      std::vector<char*> a;
      for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
      a.push_back(nullptr);
      execvp(a[0], a.data());
      _exit(127);
    }
    setpgid(pid_, pid_);
    close(fds[1]);
    fd_ = fds[0];
    fcntl(fd_, F_SETFL, O_NONBLOCK);
  }
  ~Child() {
    if (status_ == kRunning) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& output() const { return out_; }

  // Reads output until pred(output) holds (true), or EOF / timeout (false).
  bool read_until(const std::function<bool(const std::string&)>& pred, double timeout_s) {
    const auto end = deadline(timeout_s);
    while (!pred(out_)) {
      if (!read_some(end)) return pred(out_);
    }
    return true;
  }

  // Waits for the child to exit, reading its output; returns its exit status (128 + signal when
  // killed), or -1 if it was still running after timeout_s (then its whole group is killed).
  int wait(double timeout_s) {
    const auto end = deadline(timeout_s);
    while (status_ == kRunning) {
      read_some(std::min(end, deadline(0.05)));
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        break;
      }
      if (std::chrono::steady_clock::now() >= end) {
        kill(-pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        status_ = -1;
        return -1;
      }
    }
    // Drain what is left; grandchildren that outlive the child cannot block us for long.
    const auto drain = deadline(2.0);
    while (read_some(drain)) {
    }
    return status_;
  }

 private:
  static constexpr int kRunning = -1000;
  using Clock = std::chrono::steady_clock;
  static Clock::time_point deadline(double s) {
    return Clock::now() +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }
  // Reads available output, waiting until `end`; false on EOF or timeout.
  bool read_some(Clock::time_point end) {
    for (;;) {
      char buf[4096];
      const ssize_t k = read(fd_, buf, sizeof(buf));
      if (k > 0) {
        out_.append(buf, static_cast<size_t>(k));
        return true;
      }
      if (k == 0) return false;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      poll(&p, 1, static_cast<int>(std::min<long>(left.count(), 200)));
    }
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  int status_ = kRunning;
  std::string out_;
};

// Number of non-overlapping occurrences of `needle` in `hay`.
inline size_t count_of(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + needle.size()))
    ++n;
  return n;
}

}  // namespace zt::test
