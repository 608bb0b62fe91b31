#include "cli/dict_field_string.h"

#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "io/json_check.h"
#include "io/python_number.h"

namespace zt::cli {
namespace {

bool ascii_digits(std::string_view s) {
  if (s.empty()) return false;  // "".isdigit() is False
  for (const char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// value.lower() in ("true", "false"): the letters are ASCII, and no other character lowers to one.
bool ascii_iequals(std::string_view s, std::string_view lower) {
  if (s.size() != lower.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i] >= 'A' && s[i] <= 'Z' ? static_cast<char>(s[i] - 'A' + 'a') : s[i];
    if (c != lower[i]) return false;
  }
  return true;
}

Json convert_at(Json dict, const std::string& path) {
  for (auto it = dict.begin(); it != dict.end(); ++it) {
    Json& value = it.value();
    const std::string at = path.empty() ? it.key() : path + "." + it.key();
    if (value.is_object()) {
      value = convert_at(std::move(value), at);
      continue;
    }
    if (!value.is_string()) continue;
    const std::string s = value.get<std::string>();
    std::string one_dot_less = s;  // value.replace(".", "", 1)
    if (const size_t dot = s.find('.'); dot != std::string::npos) one_dot_less.erase(dot, 1);
    if (ascii_iequals(s, "true") || ascii_iequals(s, "false")) {
      value = ascii_iequals(s, "true");
    } else if (ascii_digits(s)) {
      const std::optional<int64_t> n = python_int(s, /*spaces=*/false);
      if (!n) fail("'{}': \"{}\" is an integer too large for zerotune (beyond 2^63 - 1)", at, s);
      value = *n;
    } else if (ascii_digits(one_dot_less)) {
      value = *python_float(s, /*spaces=*/false);  // digits and one '.': always a float
    }
  }
  return dict;
}

}  // namespace

Json convert_str_dict(Json dict) { return convert_at(std::move(dict), ""); }

Json hf_dict_field_value(const Json& value) {
  if (!value.is_string()) return value;
  const std::string& text = value.get_ref<const std::string&>();
  if (!text.starts_with('{')) return value;
  Json loaded;
  try {
    loaded = Json::parse(text);
  } catch (const Json::exception& e) {
    fail(
        "the string starts with '{{' but is not valid JSON ({}; zerotune also refuses NaN, "
        "Infinity and numbers beyond a double, which Python's json takes); transformers' "
        "TrainingArguments json.loads such a string (JSONDecodeError)",
        json_error_reason(e));
  }
  return convert_str_dict(std::move(loaded));
}

}  // namespace zt::cli
