#include "cli/error_report.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

namespace zt::cli {

bool first_report_of(std::string_view message) {
  const char* dir = std::getenv(kLaunchErrorsEnv);
  if (dir == nullptr || *dir == '\0') return true;
  const std::string path =
      fmt::format("{}/{:016x}", dir, XXH3_64bits(message.data(), message.size()));
  const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd >= 0) {
    ::close(fd);
    return true;
  }
  return errno != EEXIST;  // only "another rank made it" suppresses
}

}  // namespace zt::cli
