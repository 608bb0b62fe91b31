// Small helpers shared by the tests: error-text assertions, temp directories, JSON golden loading,
// running a command.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"

namespace zt::testing {

// Runs `stmt`, which must throw zt::Error whose message contains every string in `parts`.
template <typename F>
void expect_error(F&& stmt, const std::vector<std::string>& parts) {
  try {
    stmt();
    ADD_FAILURE() << "no zt::Error thrown; expected one containing '" << parts.at(0) << "'";
  } catch (const zt::Error& e) {
    const std::string what = e.what();
    for (const std::string& p : parts)
      EXPECT_NE(what.find(p), std::string::npos) << "message: " << what << "\nmissing: " << p;
  }
}

// The message of the zt::Error that `f` throws, or "<no error>".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const zt::Error& e) {
    return e.what();
  }
  return "<no error>";
}

// A fresh directory under the system temp dir, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("zt_test_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& s) const { return path_ / s; }

 private:
  std::filesystem::path path_;
};

// Names in `dir` (not recursive), sorted.
inline std::vector<std::string> list_dir(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Exit status (128 + signal when killed) and stdout + stderr of a shell command.
struct CommandResult {
  int status = -1;
  std::string output;
};
inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  std::string full = cmd;
  full += " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

}  // namespace zt::testing
