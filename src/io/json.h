// JSON value type used across zerotune: nlohmann::ordered_json keeps object keys in insertion
// (file/column) order, which chat templates' `tojson` and dataset rows rely on.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace zt::detail {
// Prints the failed nlohmann::json precondition and aborts (see JSON_ASSERT below).
[[noreturn]] inline void json_assert_failed(const char* check, const char* file,
                                            int line) noexcept {
  std::fprintf(stderr, "zerotune: internal error: JSON precondition '%s' failed (%s:%d)\n", check,
               file, line);
  std::abort();
}
}  // namespace zt::detail

// nlohmann::json's preconditions — e.g. operator[] on a const object reading a key it does not
// hold — are assert()s, so in a release build (NDEBUG) a broken one is undefined behaviour that
// reads past the object's storage and returns whatever is there (a test that read an absent key
// this way passed or failed from run to run). Here each is checked in every build and aborts
// naming the check: a bug shows where it is, never as a wrong value.
#ifndef JSON_ASSERT
#define JSON_ASSERT(x) \
  ((x) ? static_cast<void>(0) : ::zt::detail::json_assert_failed(#x, __FILE__, __LINE__))
#endif

#include <nlohmann/json.hpp>

namespace zt {
using Json = nlohmann::ordered_json;
}  // namespace zt
