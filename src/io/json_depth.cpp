#include "io/json_depth.h"

#include <algorithm>

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

void check_json_depth(std::string_view text, const std::string& origin) {
  if (const auto at = find_too_deep_json(text)) {
    const auto line =
        1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(*at), '\n');
    fail("{}:{}: JSON nesting depth exceeds {}", origin, line, kMaxJsonDepth);
  }
}

Json parse_json(std::string_view text, const std::string& origin) {
  check_json_depth(text, origin);
  return Json::parse(text);
}

}  // namespace zt
