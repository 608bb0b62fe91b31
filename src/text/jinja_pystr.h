// Python `str` / `float` semantics the Jinja engine needs for byte-identical output: UTF-8 <->
// code points, `str.isspace` / `isprintable` / case mapping (via utf8proc), `repr(str)`,
// `repr(float)`, `str.splitlines`, and printf-style `%` formatting helpers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/unicode.h"

namespace zt::text::jinja::py {

// UTF-8 -> code points. Invalid bytes decode to U+FFFD (inputs come from JSON, so they are valid).
std::u32string decode(std::string_view s);
// Code points -> UTF-8.
std::string encode(std::u32string_view s);
// Appends the UTF-8 of one code point (the tokenizer's, text/unicode.h).
using unicode::append_utf8;
// Number of code points (Python `len(str)`).
size_t length(std::string_view s);
bool is_ascii(std::string_view s);

// Python's `str.isspace` for one code point (bidi WS/B/S or category Zs).
bool is_space(char32_t c);
// Python's `str.isprintable` for one code point (what `repr` leaves unescaped).
bool is_printable(char32_t c);
// Simple (one-to-one) Unicode case mappings of one code point.
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);
char32_t to_title(char32_t c);
bool is_cased(char32_t c);
bool is_upper(char32_t c);
bool is_lower(char32_t c);
bool is_alpha(char32_t c);
bool is_digit(char32_t c);

// Multi-character mappings from SpecialCasing.txt (jinja_casing.cpp), or null.
const char32_t* special_upper(char32_t c);
const char32_t* special_lower(char32_t c);
const char32_t* special_title(char32_t c);

// Python's full case mappings: str.upper / str.lower (with the final-sigma rule).
std::string upper(std::string_view s);
std::string lower(std::string_view s);
// `str.capitalize()` (Python >= 3.8: first character title-cased, the rest lower-cased).
std::string capitalize(std::string_view s);
// `str.title()` (cased-run based), not Jinja's `title` filter.
std::string title(std::string_view s);
// `str.strip/lstrip/rstrip(chars)`; `chars == nullptr` strips Python whitespace.
std::string strip(std::string_view s, const std::string* chars, bool left, bool right);
// `str.split(sep, maxsplit)` / `str.rsplit`; `sep == nullptr` splits on whitespace runs.
std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit,
                               bool from_right);
// `str.splitlines(keepends)` (\n, \r, \r\n, \v, \f, \x1c-\x1e, \x85, \u2028, \u2029).
std::vector<std::string> splitlines(std::string_view s, bool keepends);
// `str.replace(old, new, count)`; count < 0 replaces all. Empty `old` inserts between characters.
std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count);
// Count of non-overlapping occurrences (`str.count`), in code points semantics for empty `sub`.
int64_t count(std::string_view s, std::string_view sub);

// `repr(str)`: quotes chosen as Python does, escapes \\ \n \r \t, non-printables as \xNN/\uNNNN.
std::string repr(std::string_view s);
// `repr(float)`: shortest round-trip digits; scientific when exponent < -4 or >= 16
// ('1e-05', '1e+16', '0.0001', '1.0', 'inf', 'nan').
std::string float_repr(double d);

}  // namespace zt::text::jinja::py
