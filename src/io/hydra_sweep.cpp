#include "io/hydra_sweep.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <utility>
#include <vector>

#include "core/error.h"

// The grammar is Hydra 1.3's (hydra/grammar/OverrideParser.g4 and the functions registered in
// hydra/_internal/grammar/grammar_functions.py), read for behaviour and written here from scratch.

namespace zt {
namespace {

// The functions whose result is a sweep whatever their arguments.
constexpr std::array<std::string_view, 5> kSweepFunctions = {"choice", "range", "interval", "glob",
                                                             "tag"};
// The functions that give a sweep when given several values or a sweep.
constexpr std::array<std::string_view, 6> kValueFunctions = {"sort", "shuffle", "str",
                                                             "int",  "float",   "bool"};
// Nesting past this many function calls is left to the value's parser (no recursion without end).
constexpr int kMaxCallDepth = 64;

template <size_t N>
bool is_one_of(const std::array<std::string_view, N>& names, std::string_view s) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// The index of the quote that closes the one at `open` (a backslash escapes the character after
// it), or the last index when it is never closed.
size_t closing_quote(std::string_view v, size_t open) {
  for (size_t i = open + 1; i < v.size(); ++i) {
    if (v[i] == '\\') {
      ++i;
    } else if (v[i] == v[open]) {
      return i;
    }
  }
  return v.size() - 1;
}

// Walks `v` outside quotes and escapes (`\,`), calling `at(i, depth)` for each other character
// with the bracket depth ([..], {..}, (..)) before it; stops early when `at` returns true.
template <typename F>
void scan(std::string_view v, F at) {
  int depth = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const char c = v[i];
    if (c == '\\') {
      ++i;
    } else if (c == '\'' || c == '"') {
      i = closing_quote(v, i);
    } else if (at(i, depth)) {
      return;
    } else if (c == '[' || c == '{' || c == '(') {
      ++depth;
    } else if ((c == ']' || c == '}' || c == ')') && depth > 0) {
      --depth;
    }
  }
}

// `v` split at its top-level commas, each item trimmed.
std::vector<std::string_view> top_level_items(std::string_view v) {
  std::vector<std::string_view> out;
  size_t start = 0;
  scan(v, [&](size_t i, int depth) {
    if (v[i] == ',' && depth == 0) {
      out.push_back(trim(v.substr(start, i - start)));
      start = i + 1;
    }
    return false;
  });
  out.push_back(trim(v.substr(start)));
  return out;
}

// When `item` is one function call, `name(args)` (Hydra allows spaces before the parenthesis,
// nothing after the closing one): its name and the text between the parentheses.
std::optional<std::pair<std::string_view, std::string_view>> function_call(std::string_view item) {
  const auto is_id = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  size_t open = 0;
  while (open < item.size() && is_id(item[open])) ++open;
  if (open == 0 || std::isdigit(static_cast<unsigned char>(item[0]))) return std::nullopt;
  const std::string_view name = item.substr(0, open);
  while (open < item.size() && item[open] == ' ') ++open;
  if (open >= item.size() || item[open] != '(') return std::nullopt;
  size_t close = std::string_view::npos;
  scan(item.substr(open), [&](size_t i, int depth) {
    if (item[open + i] != ')' || depth != 1) return false;
    close = open + i;
    return true;
  });
  if (close == std::string_view::npos || !trim(item.substr(close + 1)).empty()) return std::nullopt;
  return std::make_pair(name, item.substr(open + 1, close - open - 1));
}

// `reverse=true` in `sort(a,reverse=true)`: a keyword argument, not a value.
bool is_keyword_argument(std::string_view arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string_view::npos || eq == 0) return false;
  const std::string_view name = trim(arg.substr(0, eq));
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

bool is_sweep(std::string_view value, int depth) {
  const std::vector<std::string_view> items = top_level_items(value);
  if (items.size() > 1) return true;
  const auto call = function_call(items[0]);
  if (!call || depth >= kMaxCallDepth) return false;
  const auto& [name, args] = *call;
  if (is_one_of(kSweepFunctions, name)) return true;
  if (!is_one_of(kValueFunctions, name)) return false;
  int values = 0;
  for (const std::string_view arg : top_level_items(args)) {
    if (is_keyword_argument(arg)) continue;
    if (++values > 1 || is_sweep(arg, depth + 1)) return true;
  }
  return false;
}

// The override's key without its +, ++ or ~ prefix.
std::string_view bare_key(std::string_view ov) {
  std::string_view key = ov.substr(0, ov.find('='));
  return key.substr(std::min(key.find_first_not_of("+~"), key.size()));
}

}  // namespace

bool is_sweep_value(std::string_view value) { return is_sweep(value, 0); }

void refuse_sweep_override(const std::string& ov) {
  const size_t eq = ov.find('=');
  if (eq == std::string::npos) return;
  const std::string_view key = bare_key(ov), value = std::string_view(ov).substr(eq + 1);
  const bool sweeper =
      key == "hydra/sweeper" || key == "hydra.sweeper" || key.rfind("hydra.sweeper.", 0) == 0;
  if (sweeper || (key == "hydra.mode" && trim(value) == "MULTIRUN"))
    fail("override '{}': {}", ov, kSweepRefused);
  if (!is_sweep_value(value)) return;
  fail("override '{}': {}{}", ov, kSweepRefused,
       top_level_items(value).size() > 1
           ? " (a list is key=[a,b]; a string holding a comma is quoted: key='a,b')"
           : "");
}

}  // namespace zt
