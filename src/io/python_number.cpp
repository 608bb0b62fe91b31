#include "io/python_number.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <string>

#include "core/spelling.h"

namespace zt {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The ASCII whitespace Python's int() and float() skip around a number.
std::string_view trim_spaces(std::string_view s) {
  constexpr std::string_view kSpaces = " \t\n\v\f\r";
  const size_t first = s.find_first_not_of(kSpaces);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpaces) + 1 - first);
}

// Python's digitpart (digit ("_"? digit)*) at s[*i]: appends the digits to `out` and moves *i past
// them; an underscore is taken only between two digits. False when no digit is there.
bool digit_part(std::string_view s, size_t* i, std::string* out) {
  const size_t start = *i;
  while (*i < s.size()) {
    const char c = s[*i];
    if (is_digit(c)) {
      *out += c;
    } else if (c != '_' || *i == start || *i + 1 == s.size() || !is_digit(s[*i + 1])) {
      break;
    }
    ++*i;
  }
  return *i > start;
}

}  // namespace

std::optional<int64_t> python_int(std::string_view s, bool spaces) {
  if (spaces) s = trim_spaces(s);
  size_t i = 0;
  std::string text;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) text += s[i++];
  if (!digit_part(s, &i, &text) || i != s.size()) return std::nullopt;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<double> python_float(std::string_view s, bool spaces) {
  if (spaces) s = trim_spaces(s);
  size_t i = 0;
  std::string text;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) text += s[i++];
  const std::string word = ascii_lower(std::string(s.substr(i)));
  const bool negative = !text.empty() && text[0] == '-';
  if (word == "inf" || word == "infinity")
    return negative ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  if (word == "nan") return std::numeric_limits<double>::quiet_NaN();
  const bool whole = digit_part(s, &i, &text);
  bool fraction = false;
  if (i < s.size() && s[i] == '.') {
    text += s[i++];
    fraction = digit_part(s, &i, &text);
  }
  if (!whole && !fraction) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    text += s[i++];
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) text += s[i++];
    if (!digit_part(s, &i, &text)) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  return std::strtod(text.c_str(), nullptr);  // out of range: ±inf or 0, as Python gives
}

std::string python_float_repr(double d) {
  std::string s = fmt::format("{}", d);  // Python's repr without the ".0" of a whole number
  if (s.find_first_of(".en") == std::string::npos) s += ".0";  // not inf, nan, 1e+16 or 0.5
  return s;
}

}  // namespace zt
