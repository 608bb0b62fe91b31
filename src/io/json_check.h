// The checks every JSON text zerotune reads passes before nlohmann parses it (dataset rows,
// config.json, tokenizer.json, tokenizer_config.json, safetensors headers and indexes, the rows of
// `zerotune render` / `loss` / `tokenize`, its own state files): check_json_text.
// - No raw NUL byte: nlohmann takes one (outside a string) as the end of its input, so the rest of
//   the text would be dropped in silence; JSON spells a NUL "\u0000" inside a string.
// - Bounded nesting: nlohmann parses iteratively but copies and compares values recursively, so a
//   value nested ~200,000 deep overflows the stack long after it was read.
#pragma once

#include <cstddef>
#include <exception>
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

// Throws zt::Error
//   "ORIGIN:LINE:COL: PREFIXa NUL byte: not JSON text (a truncated or binary file?)"
// at the first raw NUL byte of `text` ("… a NUL byte: the text is UTF-16LE (byte order mark FF
// FE), expected UTF-8 (convert it, e.g. iconv -f UTF-16LE -t UTF-8)" when `text` starts as UTF-16
// or UTF-32 text does), else
//   "ORIGIN:LINE: PREFIXJSON nesting depth exceeds 1000"
// when `text` nests deeper than kMaxJsonDepth. LINE is counted from `first_line` at the start of
// `text` (a JSON Lines reader passes the line's number), COL is the 1-based byte of the line. A
// text with first_line > 1 is taken for a line split off after a '\n', which the encoding guess
// counts (a UTF-16LE line after the first begins with that '\n''s NUL, as UTF-16BE text does).
void check_json_text(std::string_view text, const std::string& origin, size_t first_line = 1,
                     std::string_view prefix = {});

// The NUL half of check_json_text alone, for a JSON Lines file checked whole before its lines are
// parsed one by one (its nesting is counted per line).
void check_no_nul(std::string_view text, const std::string& origin, size_t first_line = 1,
                  std::string_view prefix = {});

// check_json_text, then Json::parse(text): a syntax error still throws Json::parse_error.
Json parse_json(std::string_view text, const std::string& origin);

// A nlohmann exception's message without the library's tag: "[json.exception.parse_error.101]
// parse error at line 1, column 1: syntax error …" -> "parse error at line 1, column 1: syntax
// error …", for messages to users (the tag names the library's internals, not their file).
std::string json_error_reason(const std::exception& e);
}  // namespace zt
