#include "io/data_files_pattern.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>

#include "core/error.h"

namespace zt {
namespace {

// Code points of a UTF-8 text ('?' and a class match one character, as Python's re on str);
// a byte that starts no well-formed sequence stands for itself.
std::u32string code_points(std::string_view s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (!ok) {
      out.push_back(b);
      ++i;
      continue;
    }
    char32_t cp = len == 1 ? b : b & (0x7F >> len);
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::vector<std::string_view> components(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t at = 0;
  for (size_t slash = path.find('/'); slash != std::string_view::npos; slash = path.find('/', at)) {
    parts.push_back(path.substr(at, slash - at));
    at = slash + 1;
  }
  parts.push_back(path.substr(at));
  return parts;
}

// A '[' … ']' class of a pattern component that starts at p[i] == '['; `end` gets the index after
// its ']', or npos when it is unclosed (then '[' is a literal). Python fnmatch / fsspec _translate:
// a leading '!' negates, a ']' right after '[' or '[!' is a member, "a-z" is a range (a range
// whose ends are reversed is empty), '-' first or last is a member.
bool class_matches(const std::u32string& p, size_t i, char32_t c, size_t* end) {
  size_t j = i + 1;
  if (j < p.size() && p[j] == U'!') ++j;
  if (j < p.size() && p[j] == U']') ++j;
  while (j < p.size() && p[j] != U']') ++j;
  if (j >= p.size()) {
    *end = std::u32string::npos;
    return false;
  }
  *end = j + 1;
  size_t k = i + 1;
  const bool negate = p[k] == U'!';
  if (negate) ++k;
  if (k == j) return negate;  // "[]" never matches, "[!]" any character
  bool in = false;
  for (; k < j; ++k) {
    if (k + 2 < j && p[k + 1] == U'-') {
      in = in || (p[k] <= c && c <= p[k + 2]);
      k += 2;
    } else {
      in = in || p[k] == c;
    }
  }
  return in != negate;
}

// One component: '*' any run, '?' one character, classes; backtracking on the last '*'.
bool component_matches(const std::u32string& p, const std::u32string& s) {
  size_t pi = 0, si = 0, star_p = std::u32string::npos, star_s = 0;
  while (si < s.size()) {
    bool step = false;
    if (pi < p.size()) {
      if (p[pi] == U'*') {
        star_p = ++pi;
        star_s = si;
        continue;
      }
      if (p[pi] == U'?') {
        step = true;
        ++pi;
      } else if (p[pi] == U'[') {
        size_t end = 0;
        const bool m = class_matches(p, pi, s[si], &end);
        if (end == std::u32string::npos) {
          step = s[si] == U'[';
          if (step) ++pi;
        } else if (m) {
          step = true;
          pi = end;
        }
      } else if (p[pi] == s[si]) {
        step = true;
        ++pi;
      }
    }
    if (step) {
      ++si;
    } else if (star_p != std::u32string::npos) {
      pi = star_p;
      si = ++star_s;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == U'*') ++pi;
  return pi == p.size();
}

bool hidden(std::string_view part) {
  return !part.empty() && part.front() == '.' &&
         part.find_first_not_of('.') != std::string_view::npos;
}

int count_hidden(const std::vector<std::string_view>& parts, size_t n) {
  int k = 0;
  for (size_t i = 0; i < n; ++i) k += hidden(parts[i]) ? 1 : 0;
  return k;
}

int count_special_dirs(const std::vector<std::string_view>& parts) {
  int k = 0;
  for (size_t i = 0; i + 1 < parts.size(); ++i) k += parts[i].starts_with("__") ? 1 : 0;
  return k;
}

constexpr std::array<std::string_view, 6> kFilesToIgnore = {
    "README.md",          "config.json",    "dataset_info.json",
    "dataset_infos.json", "dummy_data.zip", "dataset_dict.json"};

}  // namespace

bool valid_split_name(std::string_view s) {
  bool need_word = true;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '.') {
      if (need_word) return false;
      need_word = true;
    } else if (std::isalnum(c) || c == '_' || c >= 0x80) {
      need_word = false;
    } else {
      return false;
    }
  }
  return !need_word;
}

namespace {

bool all_digits(std::string_view s) {
  for (const char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// The split of a sharded hub name, "{split}-00000-of-00001…": the name before the last
// "-DDDDD-of-DDDD" (the regex `datasets` un-formats it with, greedy), or "" when there is none.
std::string sharded_split(std::string_view name) {
  for (size_t at = name.rfind("-of-"); at != std::string_view::npos && at >= 6;
       at = at == 0 ? std::string_view::npos : name.rfind("-of-", at - 1)) {
    if (name[at - 6] == '-' && all_digits(name.substr(at - 5, 5)) && at + 8 <= name.size() &&
        all_digits(name.substr(at + 4, 4)) && at > 6)
      return std::string(name.substr(0, at - 6));
  }
  return {};
}

}  // namespace

bool has_glob_magic(std::string_view pattern) {
  return pattern.find_first_of("*?[") != std::string_view::npos;
}

bool glob_matches(std::string_view pattern, std::string_view path) {
  const auto pv = components(pattern);
  const auto sv = components(path);
  std::vector<std::u32string> p, s;
  for (const auto c : pv) {
    if (c != "**" && c.find("**") != std::string_view::npos)
      fail(
          "data_files pattern '{}': '**' can only be a whole path component (as in "
          "data/**/*.parquet), "
          "not part of one ('{}'); fsspec refuses it (\"Invalid pattern\")",
          pattern, c);
    p.push_back(code_points(c));
  }
  for (const auto c : sv) s.push_back(code_points(c));
  const size_t np = p.size(), ns = s.size();
  // memo[pi * (ns + 1) + si]: 0 unknown, 1 no, 2 yes — patterns with several '**' stay linear.
  std::vector<uint8_t> memo((np + 1) * (ns + 1), 0);
  auto match = [&](auto&& self, size_t pi, size_t si) -> bool {
    uint8_t& m = memo[pi * (ns + 1) + si];
    if (m != 0) return m == 2;
    bool r = false;
    if (pi == np) {
      r = si == ns;
    } else if (pv[pi] == "**") {
      if (pi + 1 == np) {
        r = si < ns;  // ".*" after the last '/': the rest of a file's path
      } else {
        for (size_t k = si; k <= ns && !r; ++k) r = self(self, pi + 1, k);  // "(?:.+/)?"
      }
    } else {
      r = si < ns && component_matches(p[pi], s[si]) && self(self, pi + 1, si + 1);
    }
    m = r ? 2 : 1;
    return r;
  };
  return match(match, 0, 0);
}

std::vector<std::string> resolve_data_pattern(std::string_view pattern,
                                              const std::vector<std::string>& files) {
  const auto pv = components(pattern);
  const int pattern_hidden = count_hidden(pv, pv.size());
  const int pattern_special = count_special_dirs(pv);
  std::vector<std::string> out;
  for (const std::string& f : files) {
    if (!glob_matches(pattern, f)) continue;
    const auto fv = components(f);
    bool ignored = false;
    for (const auto name : kFilesToIgnore)
      ignored = ignored || (fv.back() == name && pv.back() != name);
    if (ignored || count_special_dirs(fv) != pattern_special ||
        count_hidden(fv, fv.size()) != pattern_hidden)
      continue;
    out.push_back(f);
  }
  return out;
}

std::vector<std::pair<std::string, std::vector<std::string>>> default_split_patterns(
    const std::vector<std::string>& files) {
  using Patterns = std::vector<std::pair<std::string, std::vector<std::string>>>;
  const std::string digits5 = "[0-9][0-9][0-9][0-9][0-9]";
  const std::string sharded = "data/{}-" + digits5 + "-of-" + digits5 + "*.*";
  const auto sharded_for = [&](const std::string& split) {
    std::string p = sharded;
    p.replace(p.find("{}"), 2, split);
    return p;
  };
  if (const auto shards = resolve_data_pattern(sharded_for("*"), files); !shards.empty()) {
    std::vector<std::string> splits;
    for (const std::string& f : shards) {
      const std::string split = sharded_split(std::string_view(f).substr(f.rfind('/') + 1));
      if (!valid_split_name(split))
        fail(
            "{}: the split name '{}' of this sharded file name is not valid (datasets: \"Split "
            "name should "
            "match '^\\w+(\\.\\w+)*$'\")",
            f, split);
      if (std::find(splits.begin(), splits.end(), split) == splits.end()) splits.push_back(split);
    }
    std::sort(splits.begin(), splits.end());
    Patterns out;
    for (const char* known : {"train", "validation", "test"})
      if (std::find(splits.begin(), splits.end(), known) != splits.end())
        out.push_back({known, {sharded_for(known)}});
    for (const std::string& s : splits)
      if (s != "train" && s != "validation" && s != "test") out.push_back({s, {sharded_for(s)}});
    return out;
  }
  const std::vector<std::pair<std::string, std::vector<std::string>>> keywords = {
      {"train", {"train", "training"}},
      {"validation", {"validation", "valid", "dev", "val"}},
      {"test", {"test", "testing", "eval", "evaluation"}}};
  const std::string sep = "[-._ 0-9]";
  const std::vector<std::vector<std::string>> rules = {
      {"**/{}/**", "**/{}" + sep + "*/**", "**/*" + sep + "{}/**",
       "**/*" + sep + "{}" + sep + "*/**"},
      {"**/{}" + sep + "*", "**/*" + sep + "{}" + sep + "*"}};
  for (const auto& bases : rules) {
    Patterns out;
    for (const auto& [split, kws] : keywords) {
      std::vector<std::string> patterns;
      bool found = false;
      for (const auto& kw : kws) {
        for (std::string p : bases) {
          p.replace(p.find("{}"), 2, kw);
          found = found || !resolve_data_pattern(p, files).empty();
          patterns.push_back(std::move(p));
        }
      }
      if (found) out.push_back({split, std::move(patterns)});
    }
    if (!out.empty()) return out;
  }
  if (!resolve_data_pattern("**", files).empty()) return {{"train", {"**"}}};
  return {};
}

}  // namespace zt
