#include "io/json_check.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace zt {

std::optional<size_t> find_too_deep_json(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      depth = std::max(0, depth - 1);
    }
  }
  return std::nullopt;
}

namespace {

// 1-based line (counted from first_line) and column of byte `at` of `text`.
std::pair<size_t, size_t> line_col(std::string_view text, size_t at, size_t first_line) {
  const auto head = text.substr(0, at);
  const size_t line_start = head.rfind('\n');
  return {first_line + static_cast<size_t>(std::count(head.begin(), head.end(), '\n')),
          line_start == std::string_view::npos ? at + 1 : at - line_start};
}

// What a text holding NUL bytes is when it starts as UTF-16 or UTF-32 text does (Windows tools
// write UTF-16: PowerShell's `>`, Notepad's "Unicode"): its byte order mark, or, without one, the
// NULs beside an ASCII first character (a line break included): "X\0\0\0" UTF-32LE, "\0\0\0X"
// UTF-32BE (tested first: they also start as UTF-16 does), "X\0" UTF-16LE, "\0X" UTF-16BE.
// `after_newline`: the text is a line after the first, split off at a '\n' (a JSON Lines
// reader's). In UTF-16LE / UTF-32LE that '\n' was a character's first byte, so the line opens with
// its NULs, then an ASCII character: "\0X" UTF-16LE (not BE), "\0\0\0X" UTF-32LE. (In big-endian
// text the '\n' is a character's last byte and line 1 already holds a NUL.) Empty when the text
// is none of these (a lone NUL, a tail of NULs).
std::string_view wide_encoding(std::string_view text, bool after_newline) {
  const auto starts = [&](std::string_view p) { return text.substr(0, p.size()) == p; };
  const auto ascii = [&](size_t i) {
    return i < text.size() && text[i] != '\0' && static_cast<unsigned char>(text[i]) < 0x80;
  };
  const auto nuls = [&](size_t from, size_t n) {
    return from + n <= text.size() && text.substr(from, n).find_first_not_of('\0') == text.npos;
  };
  if (after_newline) {
    if (nuls(0, 3) && ascii(3)) return "UTF-32LE";
    if (nuls(0, 1) && ascii(1)) return "UTF-16LE";
    return {};
  }
  using namespace std::string_view_literals;
  if (starts("\xFF\xFE\0\0"sv)) return "UTF-32LE (byte order mark FF FE 00 00)";
  if (starts("\0\0\xFE\xFF"sv)) return "UTF-32BE (byte order mark 00 00 FE FF)";
  if (starts("\xFF\xFE"sv)) return "UTF-16LE (byte order mark FF FE)";
  if (starts("\xFE\xFF"sv)) return "UTF-16BE (byte order mark FE FF)";
  if (ascii(0) && nuls(1, 3)) return "UTF-32LE";
  if (nuls(0, 3) && ascii(3)) return "UTF-32BE";
  if (ascii(0) && nuls(1, 1)) return "UTF-16LE";
  if (nuls(0, 1) && ascii(1)) return "UTF-16BE";
  return {};
}

}  // namespace

void check_no_nul(std::string_view text, const std::string& origin, size_t first_line,
                  std::string_view prefix) {
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    const auto [line, col] = line_col(text, nul, first_line);
    if (const std::string_view enc = wide_encoding(text, first_line > 1); !enc.empty())
      fail(
          "{}:{}:{}: {}a NUL byte: the text is {}, expected UTF-8 (convert it, e.g. iconv -f {} -t "
          "UTF-8)",
          origin, line, col, prefix, enc, enc.substr(0, enc.find(' ')));
    fail("{}:{}:{}: {}a NUL byte: not JSON text (a truncated or binary file?)", origin, line, col,
         prefix);
  }
}

void check_json_text(std::string_view text, const std::string& origin, size_t first_line,
                     std::string_view prefix) {
  check_no_nul(text, origin, first_line, prefix);
  if (const auto at = find_too_deep_json(text))
    fail("{}:{}: {}JSON nesting depth exceeds {}", origin, line_col(text, *at, first_line).first,
         prefix, kMaxJsonDepth);
}

Json parse_json(std::string_view text, const std::string& origin) {
  check_json_text(text, origin);
  return Json::parse(text);
}

std::string json_error_reason(const std::exception& e) {
  const std::string_view what = e.what();
  if (what.rfind("[json.exception.", 0) == 0) {
    const size_t end = what.find("] ");
    if (end != std::string_view::npos) return std::string(what.substr(end + 2));
  }
  return std::string(what);
}

}  // namespace zt
