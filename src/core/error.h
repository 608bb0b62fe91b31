// zerotune's one exception type (CONVENTIONS rule 4) and helpers to raise it.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace zt {

// Every user-facing failure: the message names the file, row/line, key, the value seen and what was
// expected. Caught once in main(), printed as "zerotune: error: <what>", exit status 1.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws zt::Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace zt
