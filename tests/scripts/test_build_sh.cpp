// scripts/build.sh's arguments: -j N / -jN sets the build's parallel jobs (default nproc), every
// other argument goes to cmake's configure step unchanged. The script runs from a copy in a
// scratch tree beside the test binary, with stand-ins for cmake (records each call's arguments, one
// [bracket] each) and nproc (prints 7) first on PATH, so no build happens.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace {

namespace fs = std::filesystem;

// A fresh directory beside the test binary (in the build tree), removed with its contents on
// destruction. The stand-ins must be executable, and the temporary directory (/tmp) may be mounted
// noexec, where they would fail with "Permission denied".
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl =
        (fs::read_symlink("/proc/self/exe").parent_path() / "zt_build_sh_XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + tmpl);
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

struct BuildRun {
  int status;
  std::string cmake_calls;  // one line per cmake call
  std::string err;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

BuildRun build_sh(const std::string& args) {
  ScratchDir tmp;
  fs::create_directories(tmp / "repo" / "scripts");
  fs::create_directories(tmp / "bin");
  fs::copy_file(fs::path(ZT_SOURCE_DIR) / "scripts" / "build.sh",
                tmp / "repo" / "scripts" / "build.sh");
  std::ofstream(tmp / "bin" / "cmake") << "#!/bin/sh\nprintf '[%s]' \"$@\" >>\"$ZT_CMAKE_LOG\"\n"
                                          "echo >>\"$ZT_CMAKE_LOG\"\n";
  std::ofstream(tmp / "bin" / "nproc") << "#!/bin/sh\necho 7\n";
  for (const char* f : {"cmake", "nproc"})
    fs::permissions(tmp / "bin" / f, fs::perms::owner_all, fs::perm_options::add);
  const fs::path log = tmp / "cmake.log", err = tmp / "err";
  std::ofstream(log).flush();
  const std::string cmd = "cd " + tmp.path().string() + " && PATH=" + (tmp / "bin").string() +
                          ":$PATH ZT_CMAKE_LOG=" + log.string() + " bash repo/scripts/build.sh " +
                          args + " 2>" + err.string();
  const int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp(log), slurp(err)};
}

const std::string kConfigure = "[-S][.][-B][build][-DCMAKE_BUILD_TYPE=Release]";

// The scratch tree lies beside the test binary, not in the temporary directory (noexec there
// would make the stand-ins fail), and goes away with its object.
TEST(BuildSh, StandInsLieBesideTheTestBinary) {
  fs::path kept;
  {
    const ScratchDir d;
    kept = d.path();
    EXPECT_EQ(d.path().parent_path(), fs::read_symlink("/proc/self/exe").parent_path());
    EXPECT_NE(d.path().parent_path(), fs::temp_directory_path());
    EXPECT_TRUE(fs::is_directory(d.path()));
  }
  EXPECT_FALSE(fs::exists(kept));
}

TEST(BuildSh, NoArgumentsBuildsWithNprocJobs) {
  const BuildRun r = build_sh("");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.cmake_calls, kConfigure + "\n[--build][build][-j][7]\n");
}

TEST(BuildSh, JobsGoToTheBuildAndTheRestToCmake) {
  BuildRun r = build_sh("-j 3 -DZT_CUDA=OFF");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.cmake_calls, kConfigure + "[-DZT_CUDA=OFF]\n[--build][build][-j][3]\n");
  r = build_sh("-DZT_CUDA=OFF -j12 '-DCMAKE_CXX_FLAGS=-O2 -g'");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.cmake_calls,
            kConfigure + "[-DZT_CUDA=OFF][-DCMAKE_CXX_FLAGS=-O2 -g]\n[--build][build][-j][12]\n");
}

TEST(BuildSh, JobsThatAreNoPositiveNumberAreRefusedBeforeCmakeRuns) {
  BuildRun r = build_sh("-DZT_CUDA=OFF -j");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "build.sh: -j needs a number of jobs (-j N or -jN)\n");
  EXPECT_EQ(r.cmake_calls, "");
  const std::pair<std::string, std::string> bad[] = {
      {"-j x", "x"}, {"-j0", "0"}, {"-j -DZT_CUDA=OFF", "-DZT_CUDA=OFF"}};
  for (const auto& [args, jobs] : bad) {
    r = build_sh(args);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_EQ(r.err, "build.sh: -j " + jobs + ": expected a positive number of jobs\n") << args;
    EXPECT_EQ(r.cmake_calls, "") << args;
  }
}

}  // namespace
