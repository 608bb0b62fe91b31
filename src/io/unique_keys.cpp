#include "io/unique_keys.h"

#include <algorithm>
#include <functional>
#include <map>

#include "core/error.h"

namespace zt {
namespace {

void walk_yaml(const YAML::Node& node, const std::string& path, const std::string& origin) {
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) walk_yaml(node[i], fmt::format("{}[{}]", path, i), origin);
    return;
  }
  if (!node.IsMap()) return;
  std::map<std::string, int> first_line;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) continue;
    const std::string& k = kv.first.Scalar();
    const int line = kv.first.Mark().line + 1;
    const std::string key_path = path.empty() ? k : path + "." + k;
    auto [it, fresh] = first_line.emplace(k, line);
    if (!fresh) fail("{}:{}: duplicate key '{}' (first given at line {})", origin, line, key_path, it->second);
    walk_yaml(kv.second, key_path, origin);
  }
}

}  // namespace

void check_unique_yaml_keys(const YAML::Node& node, const std::string& origin) { walk_yaml(node, "", origin); }

JsonKeyTracker::JsonKeyTracker(std::string_view text, std::string origin, size_t first_line,
                               std::string prefix)
    : text_(text), origin_(std::move(origin)), first_line_(first_line), prefix_(std::move(prefix)) {
  check_json_text(text_, origin_, first_line_, prefix_);
}

size_t JsonKeyTracker::line_of(size_t offset) const {
  offset = std::min(offset, text_.size());
  return first_line_ +
         static_cast<size_t>(
             std::count(text_.begin(), text_.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
}

void JsonKeyTracker::element() {
  if (!stack_.empty() && stack_.back().is_array) ++stack_.back().index;
}

void JsonKeyTracker::open(bool is_array) {
  element();
  stack_.emplace_back();
  stack_.back().is_array = is_array;
}

void JsonKeyTracker::close() {
  if (!stack_.empty()) stack_.pop_back();
}

void JsonKeyTracker::value() { element(); }

void JsonKeyTracker::fail_at(size_t offset, std::string_view what) const {
  fail("{}:{}: {}{}", origin_, line_of(offset), prefix_, what);
}

std::string JsonKeyTracker::path_to(std::string_view key) const {
  std::string p;
  for (size_t i = 0; i + 1 < stack_.size(); ++i) {
    const Frame& f = stack_[i];
    if (f.is_array) {
      p += fmt::format("[{}]", f.index);
    } else {
      if (!p.empty()) p += ".";
      if (!f.keys.empty()) p += f.name(f.keys.back());
    }
  }
  if (!p.empty()) p += ".";
  p += key;
  return p;
}

// Places keys[index] in the table (no duplicate check; the table has a free slot).
void JsonKeyTracker::insert(Frame& f, uint32_t index) {
  const size_t mask = f.table.size() - 1;
  for (size_t h = std::hash<std::string_view>{}(f.name(f.keys[index])) & mask;; h = (h + 1) & mask)
    if (f.table[h] == 0) {
      f.table[h] = index + 1;
      return;
    }
}

void JsonKeyTracker::key(std::string_view key, size_t offset) {
  if (stack_.empty()) return;
  Frame& f = stack_.back();
  if ((f.keys.size() + 1) * 2 > f.table.size()) {  // load factor <= 1/2
    f.table.assign(std::max<size_t>(16, f.table.size() * 2), 0);
    for (uint32_t i = 0; i < f.keys.size(); ++i) insert(f, i);
  }
  const size_t mask = f.table.size() - 1;
  size_t h = std::hash<std::string_view>{}(key) & mask;
  for (; f.table[h] != 0; h = (h + 1) & mask) {
    const KeyRef& other = f.keys[f.table[h] - 1];
    if (f.name(other) == key)
      fail("{}:{}: {}duplicate key '{}' (first given at line {})", origin_, line_of(offset),
           prefix_, path_to(key), line_of(other.offset));
  }
  f.keys.push_back({static_cast<uint32_t>(f.blob.size()), static_cast<uint32_t>(key.size()), offset});
  f.blob += key;
  f.table[h] = static_cast<uint32_t>(f.keys.size());
}

Json parse_json_tracked(std::string_view text, JsonKeyTracker& keys) {
  size_t reached = 0;
  const char* base = text.data();
  OffsetIterator first(base, base, &reached), last(base + text.size(), base, &reached);
  auto cb = [&](int /*depth*/, Json::parse_event_t ev, Json& parsed) {
    switch (ev) {
      case Json::parse_event_t::object_start: keys.open(false); break;
      case Json::parse_event_t::array_start: keys.open(true); break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end: keys.close(); break;
      case Json::parse_event_t::key: keys.key(parsed.get_ref<const std::string&>(), reached); break;
      case Json::parse_event_t::value: keys.value(); break;
    }
    return true;
  };
  try {
    return Json::parse(first, last, cb);
  } catch (const Json::out_of_range& e) {
    // nlohmann's one out_of_range while parsing (406): a number beyond a double, read a character
    // past its end. Python's json reads it as inf; pyarrow's JSON reader refuses it.
    keys.fail_at(
        reached > 0 ? reached - 1 : 0,
        fmt::format("invalid JSON: {} (beyond the range of a 64-bit float)", json_error_reason(e)));
  }
}

Json parse_json_unique_keys(std::string_view text, const std::string& origin) {
  JsonKeyTracker keys(text, origin);
  try {
    return parse_json_tracked(text, keys);
  } catch (const Json::parse_error& e) {
    // e.what(): "[json.exception.parse_error.101] parse error at line 1, column 2: …".
    std::string what = e.what();
    auto p = what.find("] ");
    fail("{}: invalid JSON: {}", origin, p == std::string::npos ? what : what.substr(p + 2));
  }
}

}  // namespace zt
