// Minimal leveled logging to stderr. No global mutable state beyond the process-wide verbosity,
// which is set once by the CLI before any work starts.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <utility>

namespace zt::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Returns the minimum level printed (default kInfo; ZT_LOG_LEVEL=debug|info|warn|error overrides).
Level min_level();

template <typename... Args>
void write(Level lvl, fmt::format_string<Args...> f, Args&&... args) {
  if (lvl < min_level()) return;
  static constexpr const char* kTag[] = {"debug", "info", "warning", "error"};
  fmt::print(stderr, "zerotune: {}: {}\n", kTag[static_cast<int>(lvl)],
             fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... a) { write(Level::kInfo, f, std::forward<Args>(a)...); }
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... a) { write(Level::kWarn, f, std::forward<Args>(a)...); }
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... a) { write(Level::kDebug, f, std::forward<Args>(a)...); }

}  // namespace zt::log
