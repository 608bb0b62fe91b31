// Bounded nesting for every JSON text zerotune reads. Nesting depth: nlohmann parses iteratively
// but copies and compares values recursively, so a value nested ~200,000 deep overflows the stack
// long after it was read. Every JSON text zerotune reads (dataset rows, config.json,
// tokenizer.json, tokenizer_config.json, DeepSpeed JSON, safetensors headers, its own state files)
// is first checked against kMaxJsonDepth.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "io/json.h"

namespace zt {

// The deepest nesting of arrays/objects zerotune reads: `[]` is depth 1, `[[]]` depth 2. (Python's
// json module stops near 1,000 levels by its recursion limit, ujson/pandas at 1,024.)
inline constexpr int kMaxJsonDepth = 1000;

// Byte offset in `text` of the first '[' or '{' that opens a container nested deeper than
// `max_depth`, or nullopt when there is none. Brackets inside strings (with backslash escapes)
// are skipped; nothing else is validated (malformed text is the parser's to report). O(bytes).
std::optional<size_t> find_too_deep_json(std::string_view text, int max_depth = kMaxJsonDepth);

// Throws zt::Error "ORIGIN:LINE: JSON nesting depth exceeds 1000" (LINE 1-based) when `text`
// nests deeper than kMaxJsonDepth.
void check_json_depth(std::string_view text, const std::string& origin);

// check_json_depth, then Json::parse(text): a syntax error still throws Json::parse_error.
Json parse_json(std::string_view text, const std::string& origin);
}  // namespace zt
