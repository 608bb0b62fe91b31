#include "io/hydra_yaml.h"

#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/file_util.h"
#include "core/log.h"
#include "core/spelling.h"
#include "io/hydra_compose.h"
#include "io/hydra_override.h"
#include "io/hydra_sweep.h"
#include "io/interpolation.h"
#include "io/python_number.h"
#include "io/yaml_load.h"

namespace zt {
namespace {

// Integers in YAML files: YAML 1.1's int forms exactly as PyYAML's resolver matches them (what
// OmegaConf gives): [-+]?0b[0-1_]+ binary, [-+]?0[0-7_]+ octal (017 is 15; 08 matches none and
// stays the string "08"), [-+]?(0|[1-9][0-9_]*) decimal, [-+]?0x[0-9a-fA-F_]+ hex,
// [-+]?[1-9][0-9_]*(:[0-5]?[0-9])+ sexagesimal (1:30 is 90, 12:30 is 750); underscores dropped
// after the match, as PyYAML's constructor does. (Command-line overrides are read in Hydra's
// grammar instead, io/hydra_override.h: no octal, binary, hex or sexagesimal there.)
bool parse_int(const std::string& s, int64_t* out) {
  static const std::regex bin("[-+]?0b[0-1_]+"), oct("[-+]?0[0-7_]+"), dec("[-+]?(0|[1-9][0-9_]*)"),
      hex("[-+]?0x[0-9a-fA-F_]+"), sexa("[-+]?[1-9][0-9_]*(:[0-5]?[0-9])+");
  const size_t sign = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (std::regex_match(s, sexa)) {  // base 60: each ':'-separated part a digit
    int64_t v = 0;
    std::string part;
    for (size_t k = sign; k <= s.size(); ++k) {
      if (k == s.size() || s[k] == ':') {
        if (v > (std::numeric_limits<int64_t>::max() - 59) / 60) return false;
        v = v * 60 + std::strtoll(part.c_str(), nullptr, 10);
        part.clear();
      } else if (s[k] != '_') {
        part += s[k];
      }
    }
    *out = s[0] == '-' ? -v : v;
    return true;
  }
  int base;
  size_t skip;  // prefix characters after the sign
  if (std::regex_match(s, bin)) {
    base = 2, skip = 2;
  } else if (std::regex_match(s, hex)) {
    base = 16, skip = 2;
  } else if (std::regex_match(s, dec)) {
    base = 10, skip = 0;
  } else if (std::regex_match(s, oct)) {
    base = 8, skip = 1;
  } else {
    return false;
  }
  std::string digits = s[0] == '-' ? "-" : "";
  for (size_t k = sign + skip; k < s.size(); ++k)
    if (s[k] != '_') digits += s[k];
  if (digits.empty() || digits == "-") return false;  // "0b_": PyYAML's int() fails too
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(digits.c_str(), &end, base);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

// Floats in YAML files: the forms OmegaConf's loader resolves (PyYAML's YAML 1.1 float resolver,
// and OmegaConf's own, which adds an exponent without a '.' and an unsigned exponent):
// [-+]?[0-9][0-9_]*\.[0-9_]*([eE][-+]?[0-9]+)? ("1.", "1.5e3"), [-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
// ("1e-5"), \.[0-9_]+([eE][-+]?[0-9]+)? (".5"; no sign: "-.5" stays a string, as there),
// [-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]* (sexagesimal, "1:30.5" is 90.5), [-+]?\.(inf|Inf|INF)
// and \.(nan|NaN|NAN) ("inf" without the dot is a string). Underscores dropped after the match.
bool parse_float(const std::string& s, double* out) {
  static const std::regex form(
      "[-+]?[0-9][0-9_]*\\.[0-9_]*([eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+|"
      "\\.[0-9_]+([eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\\.[0-9_]*|"
      "[-+]?\\.(inf|Inf|INF)|\\.(nan|NaN|NAN)");
  if (!std::regex_match(s, form)) return false;
  std::string t;
  for (char c : s)
    if (c != '_') t += c;
  const bool negative = t[0] == '-';
  const size_t sign = (t[0] == '-' || t[0] == '+') ? 1 : 0;
  const std::string body = ascii_lower(t.substr(sign));
  if (body == ".inf") {
    *out = negative ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
    return true;
  }
  if (body == ".nan") return *out = std::numeric_limits<double>::quiet_NaN(), true;
  if (body.find(':') != std::string::npos) {  // base 60, the last part with the fraction
    double v = 0;
    size_t k = 0;
    for (size_t c = body.find(':'); c != std::string::npos; k = c + 1, c = body.find(':', k))
      v = v * 60 + std::strtod(body.substr(k, c - k).c_str(), nullptr);
    v = v * 60 + std::strtod(body.substr(k).c_str(), nullptr);
    *out = negative ? -v : v;
    return true;
  }
  *out = std::strtod(t.c_str(), nullptr);  // out of range: ±inf, as Python's float() gives
  return true;
}

// A scalar's text as UTF-8. yaml-cpp writes the escapes \N and \_ of a double-quoted scalar as the
// single bytes 0x85 and 0xA0 (Latin-1), not as UTF-8; the file was checked to be UTF-8, so those
// are the only bytes that are not, and each is written as the code point it is (U+0085, U+00A0),
// as PyYAML reads the escapes.
std::string scalar_text(const YAML::Node& n) {
  std::string s = n.Scalar();
  for (int64_t bad; (bad = first_invalid_utf8_byte(s)) >= 0;) {
    const auto b = static_cast<unsigned char>(s[static_cast<size_t>(bad)]);
    s.replace(static_cast<size_t>(bad), 1,
              {static_cast<char>(0xC0 | (b >> 6)), static_cast<char>(0x80 | (b & 0x3F))});
  }
  return s;
}

// `n` as JSON; each plain mapping key PyYAML types as other than a string is appended to
// `non_string_keys` when given, and each mapping key's line to `origins` when given (`path` is the
// key path of `n`).
// A tagged node (`!!str 5`, `!!python/object:os.system ls`, `!env X`): PyYAML's SafeLoader, which
// OmegaConf loads with, resolves the core schema's tags (str, int, float, bool, null, seq, map),
// and OmegaConf adds pathlib paths; others are refused ("could not determine a constructor for the
// tag"). !!binary, !!timestamp and !!set (bytes, datetime, set values) are refused here too: no
// config key takes them. The value of a core scalar tag or a path, or nullopt for an untagged node;
// zt::Error naming file, line and tag otherwise.
std::optional<Json> tagged_value(const YAML::Node& n, const std::filesystem::path& file) {
  const std::string& tag = n.Tag();
  if (tag.empty() || tag == "?" || tag == "!") return std::nullopt;
  constexpr std::string_view kCore = "tag:yaml.org,2002:";
  const std::string name = tag.starts_with(kCore) ? tag.substr(kCore.size()) : "";
  const int line = n.Mark().line + 1;
  const std::string shown = name.empty() ? tag : "!!" + name;
  if (n.IsNull() && (name == "null" || name == "str"))
    return name == "str" ? Json("") : Json(nullptr);
  if (n.IsScalar() && !name.empty()) {
    const std::string text = scalar_text(n);
    if (name == "str") return Json(text);
    const Json v = yaml_scalar_to_json(text, /*quoted=*/false);
    const bool ok = (name == "int" && v.is_number_integer()) ||
                    (name == "float" && v.is_number()) || (name == "bool" && v.is_boolean()) ||
                    (name == "null" && v.is_null());
    if (ok) return name == "float" ? Json(v.get<double>()) : v;
    if (name == "int" || name == "float" || name == "bool" || name == "null")
      fail("{}:{}: '{} {}' is no {} (as PyYAML's SafeLoader, which OmegaConf uses, reads it)",
           file.string(), line, shown, text, name);
  }
  if ((n.IsSequence() && name == "seq") || (n.IsMap() && name == "map")) return std::nullopt;
  // OmegaConf's loader adds pathlib paths (what it writes for a Path value): Path(*parts), as a
  // string here ("a/b"; an absolute part starts over, as pathlib does).
  if (n.IsSequence() && (name == "python/object/apply:pathlib.Path" ||
                         name == "python/object/apply:pathlib.PosixPath" ||
                         name == "python/object/apply:pathlib.WindowsPath")) {
    std::string out;
    for (const auto& part : n) {
      if (!part.IsScalar())
        fail("{}:{}: '{}' takes a list of path parts (strings)", file.string(), line, shown);
      const std::string t = scalar_text(part);
      out = t.starts_with('/') || out.empty() ? t : (out.ends_with('/') ? out + t : out + "/" + t);
    }
    return Json(out.empty() ? "." : out);
  }
  fail(
      "{}:{}: the YAML tag '{}': zerotune takes the core tags (!!str, !!int, !!float, !!bool, "
      "!!null, !!seq, !!map) and pathlib paths, as OmegaConf's loader (PyYAML's SafeLoader) does, "
      "and no other; remove it",
      file.string(), line, shown);
}

Json node_to_json(const YAML::Node& n, const std::filesystem::path& file, const std::string& path,
                  std::vector<NonStringKey>* non_string_keys, KeyOrigins* origins) {
  const auto below = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
  if (n.IsDefined())
    if (std::optional<Json> v = tagged_value(n, file)) return *std::move(v);
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return yaml_scalar_to_json(scalar_text(n), n.Tag() == "!");
    case YAML::NodeType::Sequence: {
      Json a = Json::array();
      for (const auto& c : n)
        a.push_back(
            node_to_json(c, file, below(std::to_string(a.size())), non_string_keys, origins));
      return a;
    }
    case YAML::NodeType::Map: {
      Json o = Json::object();
      for (const auto& kv : n) {
        if (kv.first.IsNull())  // `null:`, `~:` (yaml-cpp keeps no text for them)
          fail(
              "{}:{}: a null key{} (null, Null, NULL or ~, unquoted): OmegaConf refuses it "
              "(Incompatible key type 'NoneType'); quote it if it is a name",
              file.string(), kv.first.Mark().line + 1, path.empty() ? "" : " in " + path);
        if (!kv.first.IsScalar())
          fail("{}:{}: only scalar mapping keys are supported", file.string(),
               kv.first.Mark().line + 1);
        const std::string k = scalar_text(kv.first);
        if (non_string_keys != nullptr && kv.first.Tag() == "?") {
          Json typed = yaml_scalar_to_json(k, /*quoted=*/false);
          if (!typed.is_string())
            non_string_keys->push_back({file, kv.first.Mark().line + 1, path, k, std::move(typed)});
        }
        if (origins != nullptr) origins->at[below(k)] = {file, kv.first.Mark().line + 1};
        o[k] = node_to_json(kv.second, file, below(k), non_string_keys, origins);
      }
      return o;
    }
  }
  return nullptr;
}

YAML::Node parse_file(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) fail("config file {} does not exist", path.string());
  std::string text;
  try {
    text = read_file(path);  // a device (/dev/zero as a group's file) is refused, not read forever
  } catch (const Error& e) {
    fail("config file {} cannot be read: {}", path.string(), e.what());
  }
  try {
    return load_yaml(text, path.string());
  } catch (const YAML::Exception& e) {
    fail("{}:{}:{}: YAML syntax error: {}", path.string(), e.mark.line + 1, e.mark.column + 1,
         e.msg);
  }
}

}  // namespace

std::vector<std::string> split_key_path(std::string_view p) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = p.find('.', start);
    parts.emplace_back(
        p.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts;
}

const Json* find_key_path(const Json& root, std::string_view path) {
  const Json* cur = &root;
  for (const auto& part : split_key_path(path)) {
    if (cur->is_object()) {
      auto it = cur->find(part);
      if (it == cur->end()) return nullptr;
      cur = &*it;
    } else if (cur->is_array()) {
      const std::optional<int64_t> idx = python_int(part, /*spaces=*/false);
      if (!idx || *idx < 0 || static_cast<size_t>(*idx) >= cur->size()) return nullptr;
      cur = &(*cur)[static_cast<size_t>(*idx)];
    } else {
      return nullptr;
    }
  }
  return cur;
}

namespace {

// Hydra's delete override: `~a.b` removes key a.b; `~a.b=v` removes it only when it holds v (else
// an error, as Hydra's "Could not delete ... value is ..."). Throws when the key is absent.
void delete_override(Json& root, const std::string& ov, const std::filesystem::path& file) {
  const size_t eq = ov.find('=');
  const std::string key = ov.substr(1, eq == std::string::npos ? std::string::npos : eq - 1);
  if (key.empty()) fail("override '{}' is not of the form ~key.path or ~key.path=value", ov);
  const auto parts = split_key_path(key);
  Json* cur = &root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!cur->is_object() || !cur->contains(parts[i])) cur = nullptr;
    if (cur == nullptr) break;
    cur = &(*cur)[parts[i]];
  }
  if (cur == nullptr || !cur->is_object() || !cur->contains(parts.back()))
    fail("override '{}': cannot delete '{}': it is not in {}", ov, key, file.string());
  if (eq != std::string::npos) {
    const Json want = parse_override_value(ov, eq);
    if ((*cur)[parts.back()] != want)
      fail("override '{}': cannot delete '{}': its value is {}, not {}", ov, key,
           (*cur)[parts.back()].dump(), want.dump());
  }
  cur->erase(parts.back());
}

void check_utf8(const std::string& ov) {
  if (const int64_t bad = first_invalid_utf8_byte(ov); bad >= 0)
    fail(
        "override {}: byte 0x{:02X} at offset {} is not UTF-8 (the command line must be UTF-8 "
        "text)",
        Json(ov.substr(0, static_cast<size_t>(bad))).dump() + "…",
        static_cast<unsigned char>(ov[bad]), bad);
}

// The override `ov` when it names a config group of the primary config in `dir` (Hydra's test:
// the key before any '@' is a directory there, and the value is not a mapping), else nullopt.
// Throws on a form Hydra refuses for groups: `++group=`, an option that is not a name or a list of
// names, `key@pkg=` where key is no group.
std::optional<GroupOverride> group_override(const std::string& ov,
                                            const std::filesystem::path& dir) {
  GroupOverride g;
  g.text = ov;
  size_t start = 0;
  if (ov.rfind("++", 0) == 0) {
    start = 2;
  } else if (!ov.empty() && (ov[0] == '+' || ov[0] == '~')) {
    g.op = ov[0] == '+' ? GroupOverride::Op::kAppend : GroupOverride::Op::kDelete;
    start = 1;
  }
  const size_t eq = ov.find('=');
  g.key = ov.substr(start, eq == std::string::npos ? std::string::npos : eq - start);
  const std::string group = g.key.substr(0, g.key.find('@'));
  if (!is_config_group(dir, group)) {
    if (g.key.find('@') != std::string::npos && eq != std::string::npos) {
      const std::vector<std::string> names = config_groups_in(dir);
      fail(
          "override '{}' names a config group (group@package) but there is no config group '{}' "
          "in {}; config groups there: {}",
          ov, group, dir.empty() ? "." : dir.string(),
          names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", ")));
    }
    return std::nullopt;
  }
  if (eq != std::string::npos) g.value = parse_override_value(ov, eq);
  if (g.value.is_object()) return std::nullopt;  // group={a: 1} sets keys, as in Hydra
  if (start == 2)
    fail(
        "override '{}': ++ (force-add) of a config group is not supported (as in Hydra); use +{} "
        "to add the group or {} to choose its option",
        ov, ov.substr(2), ov.substr(2));
  const auto is_name = [](const Json& v) { return v.is_string(); };
  const bool ok =
      g.op == GroupOverride::Op::kDelete
          ? g.value.is_null() || g.value.is_string()
          : g.value.is_string() ||
                (g.value.is_array() && std::all_of(g.value.begin(), g.value.end(), is_name));
  if (!ok)
    fail("override '{}': a config group's option must be a name{}, got {}", ov,
         g.op == GroupOverride::Op::kDelete ? "" : " or a list of names", g.value.dump());
  return g;
}

// For an override of a key that is not there: "; did you mean the config group 'db' …?" when the
// key (no dots; `a/b` for a nested group) is a few edits from a config group beside the config.
std::string group_hint(const std::string& ov, const std::filesystem::path& dir) {
  std::string key = ov.substr(0, ov.find('='));
  key.erase(0, std::min(key.find_first_not_of("+~"), key.size()));
  if (key.empty() || key.find('.') != std::string::npos) return "";
  const size_t slash = key.rfind('/');
  const std::string parent = slash == std::string::npos ? "" : key.substr(0, slash);
  const std::filesystem::path in = parent.empty() ? dir : dir / parent;
  const std::vector<std::string> names = config_groups_in(in);
  const std::string m = closest_match(key.substr(slash + 1),
                                      std::vector<std::string_view>(names.begin(), names.end()));
  if (m.empty()) return "";
  return fmt::format("; did you mean the config group '{}' (a directory in {})?",
                     parent.empty() ? m : parent + "/" + m, in.empty() ? "." : in.string());
}

// Appends to `out` the key path of each value `v` (at `path`) holds: `path` itself for a scalar, a
// list or an empty mapping, else the leaves of the mapping.
void leaf_paths(const Json& v, const std::string& path, std::vector<std::string>* out) {
  if (!v.is_object() || v.empty()) {
    out->push_back(path);
    return;
  }
  for (const auto& [k, c] : v.items()) leaf_paths(c, path + "." + k, out);
}

// The key path a misspelt override key `parts` likely meant, or "". Component by component, one
// the file has at the path suggested so far, or one of a key path in `known` (the keys the
// application knows, which an override sets without '+') that starts with that path, is kept;
// another is replaced by the closest such key within max(1, n/4) edits (closest_match's
// max(2, n/4) takes "a" for "zz"). "" when a component has none that close, or when the path found
// is neither in the file nor known (an override of it would fail too). A known old name the file
// lacks is given as its new name (the one to write); one the file has stays (the new name beside
// it would clash with it).
std::string suggested_key(const Json& root, const std::vector<std::string>& parts,
                          const std::vector<KnownKey>& known) {
  std::string path;
  for (const auto& part : parts) {
    std::set<std::string_view> here;
    const Json* node = path.empty() ? &root : find_key_path(root, path);
    if (node != nullptr && node->is_object())
      for (auto it = node->begin(); it != node->end(); ++it) here.insert(it.key());
    const std::string prefix = path.empty() ? "" : path + ".";
    for (const KnownKey& known_key : known) {
      const std::string& k = known_key.path;
      if (k.size() <= prefix.size() || k.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string_view rest = std::string_view(k).substr(prefix.size());
      here.insert(rest.substr(0, rest.find('.')));
    }
    std::string near =
        here.count(part)
            ? part
            : closest_match(part, std::vector<std::string_view>(here.begin(), here.end()));
    if (near.empty() || edit_distance(part, near) > std::max<size_t>(1, part.size() / 4)) return "";
    path = prefix + near;
  }
  if (find_key_path(root, path) != nullptr) return path;
  const auto it =
      std::find_if(known.begin(), known.end(), [&](const KnownKey& k) { return k.path == path; });
  if (it == known.end()) return "";
  return it->renamed_to.empty() ? path : it->renamed_to;
}

// Applies override `ov` to `root`; appends to `set` the key paths of the values it sets.
void apply_override(Json& root, const std::string& ov, const std::filesystem::path& file,
                    const std::vector<KnownKey>& known, const std::string& hint,
                    std::vector<std::string>* set) {
  if (!ov.empty() && ov[0] == '~') {  // Hydra's delete: ~key, or ~key=value (only if it holds that)
    delete_override(root, ov, file);
    return;
  }
  size_t eq = ov.find('=');
  if (eq == std::string::npos || eq == 0)
    fail("override '{}' is not of the form key.path=value", ov);
  std::string key = ov.substr(0, eq);
  bool add = false, append_only = false;
  // Hydra's grammar: +key=value adds a key, ++key=value adds it or overrides it.
  if (key.rfind("++", 0) == 0) {
    add = true;
    key = key.substr(2);
  } else if (key[0] == '+') {
    add = append_only = true;
    key = key.substr(1);
  }
  if (key.empty()) fail("override '{}' is not of the form key.path=value", ov);
  if (std::any_of(known.begin(), known.end(), [&](const KnownKey& k) { return k.path == key; }))
    add = true;
  const Json value = parse_override_value(ov, eq);
  leaf_paths(value, key, set);
  Json* cur = &root;
  auto parts = split_key_path(key);
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& p = parts[i];
    bool last = i + 1 == parts.size();
    if (!cur->is_object()) fail("override '{}': '{}' is not a mapping in {}", ov, p, file.string());
    if (!cur->contains(p)) {
      if (!add) {
        // A misspelt key is the likelier mistake than a new one: the key path it likely meant,
        // in the file or known (not beside the config-group hint, which names the likelier
        // mistake).
        const std::string near = hint.empty() ? suggested_key(root, parts, known) : "";
        const std::string mean = near.empty() ? "" : fmt::format("did you mean '{}'? or ", near);
        fail("override '{}': key '{}' is not in {} ({}use +{} to add a new key){}", ov, key,
             file.string(), mean, key, hint);
      }
      (*cur)[p] = last ? value : Json::object();
    } else if (last) {
      Json& old = (*cur)[p];
      // Hydra 1.3 (_apply_overrides_to_config): `+key=value` where the config already holds a
      // value that is not null (nor OmegaConf's missing '???', which select reads as None) is
      // refused, unless the new value is a mapping or a list (merged).
      if (append_only && !old.is_null() && old != "???" && !value.is_object() && !value.is_array())
        fail(
            "override '{}': could not append to config: an item is already at '{}' in {} (as Hydra "
            "says). Either remove the + prefix: '{}', or add a second + to add or override '{}': "
            "'+{}'",
            ov, key, file.string(), ov.substr(1), key, ov);
      // Hydra applies an override with OmegaConf.update(merge=True): a mapping merges into the
      // mapping there (other keys stay); anything else replaces; a list and a mapping do not mix.
      const bool mixed =
          (old.is_object() && value.is_array()) || (old.is_array() && value.is_object());
      if ((old.is_object() && value.is_object()) || mixed) {
        merge_config(*cur, Json{{p, value}}, key.substr(0, key.size() - p.size() - (i > 0)),
                     "override '" + ov + "'");
      } else {
        old = value;
      }
    }
    cur = &(*cur)[p];
  }
}

// Lists the keys inside each copied mapping or list of `copies` (in the order resolved: a copy's
// source is complete before it is copied) at the place it is copied to too, in `non_string_keys`
// and `origins` (either may be null).
void follow_copies(const std::vector<detail::InterpolatedCopy>& copies,
                   std::vector<NonStringKey>* non_string_keys, KeyOrigins* origins) {
  // `path` at or below `from`, moved to below `to`; nullopt when it is not below `from`.
  const auto moved = [](const std::string& path, const detail::InterpolatedCopy& c,
                        bool at_too) -> std::optional<std::string> {
    if (path == c.from) return at_too ? std::optional<std::string>(c.to) : std::nullopt;
    if (path.size() > c.from.size() && path.compare(0, c.from.size(), c.from) == 0 &&
        path[c.from.size()] == '.')
      return c.to + path.substr(c.from.size());
    return std::nullopt;
  };
  std::set<std::pair<std::string, std::string>> done;  // a copy resolved twice is followed once
  for (const auto& c : copies) {
    if (!done.emplace(c.to, c.from).second) continue;
    if (non_string_keys != nullptr) {
      const size_t n = non_string_keys->size();
      for (size_t i = 0; i < n; ++i)
        if (auto parent = moved((*non_string_keys)[i].parent, c, /*at_too=*/true)) {
          NonStringKey k = (*non_string_keys)[i];
          k.parent = std::move(*parent);
          non_string_keys->push_back(std::move(k));
        }
    }
    if (origins != nullptr) {
      std::vector<std::pair<std::string, KeyOrigin>> add;
      // The key `to` itself keeps its own place of writing; the keys below it are the source's.
      for (auto it = origins->at.lower_bound(c.from + "."); it != origins->at.end(); ++it) {
        const auto to = moved(it->first, c, /*at_too=*/false);
        if (!to) break;
        add.emplace_back(*to, it->second);
      }
      for (auto& [k, o] : add) origins->at[k] = std::move(o);
    }
  }
}

}  // namespace

Json yaml_scalar_to_json(const std::string& s, bool quoted) {
  if (quoted) return s;
  // YAML 1.1's words in PyYAML's three spellings each (what OmegaConf's loader gives;
  // "tRUE" and "nULL" stay strings), yes / no / on / off being booleans too.
  static const std::set<std::string_view> kNull = {"", "~", "null", "Null", "NULL"},
                                          kTrue = {"true", "True", "TRUE", "yes", "Yes",
                                                   "YES",  "on",   "On",   "ON"},
                                          kFalse = {"false", "False", "FALSE", "no", "No",
                                                    "NO",    "off",   "Off",   "OFF"};
  if (kNull.count(s)) return nullptr;
  if (kTrue.count(s)) return true;
  if (kFalse.count(s)) return false;
  int64_t i;
  if (parse_int(s, &i)) return i;
  double d;
  if (parse_float(s, &d)) return d;
  return s;
}

Json load_yaml_file(const std::filesystem::path& path, std::vector<NonStringKey>* non_string_keys,
                    KeyOrigins* origins) {
  return node_to_json(parse_file(path), path, "", non_string_keys, origins);
}

Json load_hydra_yaml(const std::filesystem::path& path, const std::vector<std::string>& overrides,
                     const std::vector<KnownKey>& known, std::vector<std::string>* overridden,
                     std::vector<NonStringKey>* non_string_keys, KeyOrigins* origins,
                     std::vector<std::string>* notes) {
  const std::filesystem::path dir = path.parent_path();
  std::vector<GroupOverride> groups;
  std::vector<std::string> keys;  // overrides of keys, applied to the composed config
  for (const auto& ov : overrides) {
    check_utf8(ov);
    // `lr=1e-5,2e-5`, `choice(a,b)`, `hydra/sweeper=…`: a sweep, where zerotune runs one job.
    refuse_sweep_override(ov);
    // hydra.run.dir=., hydra/job_logging=disabled: Hydra's own settings, as the file's hydra
    // section and defaults entries, which are dropped too.
    const std::string bare = ov.substr(std::min(ov.find_first_not_of("+~"), ov.size()));
    if (bare.rfind("hydra.", 0) == 0 || bare.rfind("hydra/", 0) == 0 ||
        bare.rfind("hydra=", 0) == 0) {
      note(notes, fmt::format("override '{}' configures Hydra itself (its output directory, "
                              "logging, launcher); zerotune runs without Hydra and ignores it",
                              ov));
      continue;
    }
    if (std::optional<GroupOverride> g = group_override(ov, dir)) {
      groups.push_back(std::move(*g));
    } else {
      keys.push_back(ov);
    }
  }
  Json root = compose_hydra_config(path, groups, non_string_keys, origins, notes);
  std::vector<std::string> from_command_line;  // the key paths the overrides set
  for (const auto& ov : keys) {
    apply_override(root, ov, path, known, group_hint(ov, dir), &from_command_line);
    if (overridden != nullptr) {
      std::string key = ov.substr(0, ov.find('='));
      key.erase(0, std::min(key.find_first_not_of("+~"), key.size()));
      overridden->push_back(key);
    }
  }
  std::vector<detail::InterpolatedCopy> copies;
  detail::resolve_interpolations(root, path, from_command_line, &copies);
  follow_copies(copies, non_string_keys, origins);
  return root;
}

}  // namespace zt
