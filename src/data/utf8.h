// Strict UTF-8 validation (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF),
// used for every string the dataset readers produce.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace zt::data {

// Byte offset of the first byte that starts an invalid or truncated UTF-8 sequence in `s`, or
// nullopt when the whole of `s` is valid UTF-8.
std::optional<size_t> find_invalid_utf8(std::string_view s);

}  // namespace zt::data
