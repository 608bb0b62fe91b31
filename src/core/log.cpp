#include "core/log.h"

#include <cstdlib>
#include <cstring>

namespace zt::log {

Level min_level() {
  static const Level lvl = [] {
    const char* s = std::getenv("ZT_LOG_LEVEL");
    if (s == nullptr) return Level::kInfo;
    if (std::strcmp(s, "debug") == 0) return Level::kDebug;
    if (std::strcmp(s, "warn") == 0) return Level::kWarn;
    if (std::strcmp(s, "error") == 0) return Level::kError;
    return Level::kInfo;
  }();
  return lvl;
}

}  // namespace zt::log
