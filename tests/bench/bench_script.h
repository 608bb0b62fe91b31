// Runs one of bench/'s Python scripts on a file the test writes, for the tests of those scripts:
// the script's exit status (-1 when it did not exit normally), stdout and stderr.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/zt_test_util.h"

namespace zt::testing {

struct ScriptResult {
  int status;
  std::string out, err;
};

inline std::string slurp_file(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// `python3 bench/<script> <input file> <args>` with `input` written to a temporary file named
// `input_name`; args are passed through the shell as given.
inline ScriptResult run_bench_script(const std::string& script, const std::string& input_name,
                                     const std::string& input, const std::string& args) {
  TempDir tmp;
  const auto in = tmp / input_name, out = tmp / "out", err = tmp / "err";
  std::ofstream(in) << input;
  const std::string cmd = "python3 " + std::string(ZT_SOURCE_DIR) + "/bench/" + script + " " +
                          in.string() + " " + args + " >" + out.string() + " 2>" + err.string();
  const int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp_file(out), slurp_file(err)};
}

}  // namespace zt::testing
