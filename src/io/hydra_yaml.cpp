#include "io/hydra_yaml.h"

#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/log.h"
#include "core/spelling.h"
#include "io/hydra_compose.h"
#include "io/hydra_sweep.h"
#include "io/python_number.h"
#include "io/yaml_load.h"

namespace zt {
namespace {

// Integers in YAML files: YAML 1.1's int forms exactly as PyYAML's resolver matches them (what
// OmegaConf gives): [-+]?0b[0-1_]+ binary, [-+]?0[0-7_]+ octal (017 is 15; 08 matches none and
// stays the string "08"), [-+]?(0|[1-9][0-9_]*) decimal, [-+]?0x[0-9a-fA-F_]+ hex; underscores
// dropped after the match; the 1:30 sexagesimal form is not taken (it stays a string).
// (Command-line overrides are read by python_int instead: Hydra's override grammar has no octal,
// binary or hex.)
bool parse_int(const std::string& s, int64_t* out) {
  static const std::regex bin("[-+]?0b[0-1_]+"), oct("[-+]?0[0-7_]+"), dec("[-+]?(0|[1-9][0-9_]*)"),
      hex("[-+]?0x[0-9a-fA-F_]+");
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
  const size_t sign = (s[0] == '-' || s[0] == '+') ? 1 : 0;
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

bool parse_float(const std::string& s, double* out) {
  std::string l = ascii_lower(s);
  if (l == ".inf" || l == "+.inf" || l == "inf")
    return *out = std::numeric_limits<double>::infinity(), true;
  if (l == "-.inf" || l == "-inf") return *out = -std::numeric_limits<double>::infinity(), true;
  if (l == ".nan" || l == "nan") return *out = std::numeric_limits<double>::quiet_NaN(), true;
  std::string t;
  for (char c : s)
    if (c != '_') t += c;
  // Must look like a number: digits with a '.' or an exponent.
  bool digit = false, marker = false;
  for (size_t i = 0; i < t.size(); ++i) {
    char c = t[i];
    if (std::isdigit(static_cast<unsigned char>(c)))
      digit = true;
    else if (c == '.' || c == 'e' || c == 'E')
      marker = true;
    else if (!((c == '-' || c == '+') && (i == 0 || t[i - 1] == 'e' || t[i - 1] == 'E')))
      return false;
  }
  if (!digit || !marker) return false;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (*end != '\0') return false;
  *out = v;
  return true;
}

Json node_to_json(const YAML::Node& n, const std::filesystem::path& file, bool octal = true) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return yaml_scalar_to_json(n.Scalar(), n.Tag() == "!", octal);
    case YAML::NodeType::Sequence: {
      Json a = Json::array();
      for (const auto& c : n) a.push_back(node_to_json(c, file, octal));
      return a;
    }
    case YAML::NodeType::Map: {
      Json o = Json::object();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar())
          fail("{}:{}: only scalar mapping keys are supported", file.string(),
               kv.first.Mark().line + 1);
        o[kv.first.Scalar()] = node_to_json(kv.second, file, octal);
      }
      return o;
    }
  }
  return nullptr;
}

YAML::Node parse_file(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) fail("config file {} does not exist", path.string());
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) fail("config file {} cannot be read", path.string());
  try {
    return load_yaml(text.str(), path.string());
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

// The arguments of a resolver call (the text after `name:`) as written, split at the commas that
// are outside quotes, brackets, braces and nested interpolations, as OmegaConf's grammar splits
// them; a character after a backslash (`\,`) is never a separator. "" gives one empty argument.
std::vector<std::string> resolver_args(const std::string& text) {
  std::vector<std::string> args(1);
  int depth = 0;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size()) {
      args.back() += text.substr(i++, 2);
      continue;
    }
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    } else if (c == ',' && depth == 0) {
      args.emplace_back();
      continue;
    }
    args.back() += c;
  }
  return args;
}

// `s` without the spaces at its start and end.
std::string strip_spaces(const std::string& s) {
  const size_t first = s.find_first_not_of(' ');
  return first == std::string::npos ? "" : s.substr(first, s.find_last_not_of(' ') + 1 - first);
}

// An unquoted resolver argument with OmegaConf's escapes undone: a backslash before one of
// \ ( ) [ ] { } : = , space or tab is dropped (`a\,b` is "a,b"); other backslashes are text.
std::string unescape_resolver_arg(const std::string& a) {
  constexpr std::string_view kEscaped = "\\()[]{}:=, \t";
  std::string out;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == '\\' && i + 1 < a.size() && kEscaped.find(a[i + 1]) != std::string_view::npos) ++i;
    out += a[i];
  }
  return out;
}

// Resolves every interpolation of a config in place. An interpolation reads the value its key has
// in the config as written (`raw_`), resolved once and then final, as OmegaConf does: the text an
// escaped `\${x}` or an environment variable leaves is never read as an interpolation again when
// another key refers to it, whatever the order of the keys. `from_command_line` are the key paths
// the overrides set (each leaf of a mapping given as a value): an error at or below one of them
// says so, as the override errors do.
class Resolver {
 public:
  Resolver(Json& root, const std::filesystem::path& file,
           const std::vector<std::string>& from_command_line)
      : root_(root), raw_(root), file_(file), from_command_line_(from_command_line) {}

  void resolve_all() { resolve_node(root_, ""); }

 private:
  void resolve_node(Json& node, const std::string& path) {
    if (node.is_object()) {
      for (auto& [k, v] : node.items()) resolve_node(v, path.empty() ? k : path + "." + k);
    } else if (node.is_array()) {
      for (size_t i = 0; i < node.size(); ++i)
        resolve_node(node[i], path + "." + std::to_string(i));
    } else if (node.is_string()) {
      node = resolve_string(node.get<std::string>(), path);
    }
  }

  // The absolute key path an interpolation names. OmegaConf's relative form: `${.b}` is key b of
  // the mapping that holds the value at `at`, each further leading dot one level up (`${..b}`: b
  // beside that mapping).
  std::string absolute_key(const std::string& expr, const std::string& at) {
    if (expr.empty() || expr[0] != '.') return expr;
    const size_t dots = std::min(expr.find_first_not_of('.'), expr.size());
    std::vector<std::string> parts = split_key_path(at);
    parts.pop_back();  // the mapping (or list) holding the value
    for (size_t i = 1; i < dots; ++i) {
      if (parts.empty())
        fail("{}: '{}' interpolates '${{{}}}', which goes above the top of the config{}",
             file_.string(), at, expr, where(at));
      parts.pop_back();
    }
    std::string key;
    for (const auto& p : parts) key += p + ".";
    return key + expr.substr(dots);
  }

  Json resolve_ref(const std::string& expr, const std::string& at) {
    if (expr.rfind("oc.env:", 0) == 0) {
      // OmegaConf's oc.env(key, default): the arguments are split at the commas outside quotes and
      // brackets; a third one is an error there (env() takes from 1 to 2 positional arguments).
      const std::vector<std::string> args = resolver_args(expr.substr(7));
      if (args.size() > 2)
        fail(
            "{}: '{}' interpolates '${{{}}}', which gives oc.env {} arguments; oc.env takes an "
            "environment variable name and at most one default (quote a default that holds a "
            "comma: '{}'){}",
            file_.string(), at, expr, args.size(), expr.substr(8 + args[0].size()), where(at));
      const std::string var = strip_spaces(args[0]);  // OmegaConf skips the spaces around it
      // The variable's value is a string, as OmegaConf's oc.env returns it (SLURM_JOB_ID=0042 as a
      // run name stays "0042"); a config key that wants a number or a boolean reads a string that
      // spells one (RunConfig), as OmegaConf converts it for a typed field.
      const char* v = std::getenv(var.c_str());
      if (v != nullptr) return std::string(v);
      if (args.size() == 1)
        fail("{}: '{}' interpolates environment variable {} which is not set{}", file_.string(), at,
             var, where(at));
      const std::string def = strip_spaces(args[1]);
      // The default may itself interpolate (`${oc.env:OUT,${exp_dir}/out}`), as in OmegaConf. The
      // default is a string too, as OmegaConf makes it (str() of an interpolated number: 42 →
      // "42"), except null (`null` in any case: OmegaConf returns None for it); a quoted literal
      // loses its quotes; an unquoted one its escapes (`a\,b` is "a,b").
      if (def.find("${") != std::string::npos) {
        Json d = resolve_string(def, at);
        if (d.is_number() || d.is_boolean()) return d.dump();
        return d;
      }
      if (ascii_lower(def) == "null") return Json();
      if (def.size() >= 2 && (def.front() == '\'' || def.front() == '"') &&
          def.back() == def.front())
        return def.substr(1, def.size() - 2);
      return unescape_resolver_arg(def);
    }
    if (expr.find(':') != std::string::npos)
      fail("{}: '{}' uses the resolver '${{{}}}', which zerotune does not support (only oc.env){}",
           file_.string(), at, expr, where(at));
    const std::string key = absolute_key(expr, at);
    if (stack_.count(key))
      fail("{}: interpolation loop through '{}' at '{}'{}", file_.string(), key, at, where(at));
    const Json* target = key.empty() || key.back() == '.' ? nullptr : find_key_path(raw_, key);
    if (target == nullptr)
      fail("{}: '{}' interpolates '${{{}}}', but no key '{}' exists{}", file_.string(), at, expr,
           key, where(at));
    auto done = resolved_.find(key);
    if (done == resolved_.end()) {
      stack_.insert(key);
      Json value = *target;
      resolve_node(value, key);
      stack_.erase(key);
      done = resolved_.emplace(key, std::move(value)).first;
    }
    const Json& value = done->second;
    if (value.is_string() && value.get<std::string>() == kMissingValue)
      fail("{}: '{}' interpolates '{}', which is ??? (mandatory, not set){}", file_.string(), at,
           expr, where(at));
    return value;
  }

  // The '}' closing the "${" at `open` (interpolations nest: `${oc.env:A,${b}}`), or npos.
  static size_t closing_brace(const std::string& s, size_t open) {
    int depth = 0;
    for (size_t i = open; i < s.size(); ++i) {
      if (s.compare(i, 2, "${") == 0) {
        ++depth;
        ++i;
      } else if (s[i] == '}' && --depth == 0) {
        return i;
      }
    }
    return std::string::npos;
  }

  Json resolve_string(const std::string& s, const std::string& at) {
    if (s.find("${") == std::string::npos) return s;
    // Whole-value interpolation keeps the referenced value's type.
    if (s.size() > 3 && s.rfind("${", 0) == 0 && closing_brace(s, 0) == s.size() - 1)
      return resolve_ref(s.substr(2, s.size() - 3), at);
    std::string out;
    size_t i = 0;
    while (i < s.size()) {
      size_t open = s.find("${", i);
      if (open == std::string::npos) {
        out += s.substr(i);
        break;
      }
      // OmegaConf's escapes before "${": 2k+1 backslashes are k backslashes and the text "${"
      // (`\${x}` is the text ${x}), 2k backslashes are k backslashes and an interpolation
      // (`C:\\${d}` is C:\ and d's value). Backslashes anywhere else are text.
      size_t run = open;
      while (run > i && s[run - 1] == '\\') --run;
      out += s.substr(i, run - i) + std::string((open - run) / 2, '\\');
      if ((open - run) % 2 == 1) {
        out += "${";
        i = open + 2;
        continue;
      }
      size_t close = closing_brace(s, open);
      if (close == std::string::npos)
        fail("{}: '{}': unterminated '${{' in '{}'{}", file_.string(), at, s, where(at));
      Json v = resolve_ref(s.substr(open + 2, close - open - 2), at);
      out += v.is_string() ? v.get<std::string>() : v.dump();
      i = close + 1;
    }
    return out;
  }

  // " (given on the command line)" when the value at key path `at` was set by an override.
  std::string where(const std::string& at) const {
    for (const auto& k : from_command_line_)
      if (at == k || at.rfind(k + ".", 0) == 0) return " (given on the command line)";
    return "";
  }

  Json& root_;
  const Json raw_;  // the config before any interpolation is resolved
  const std::filesystem::path& file_;
  std::set<std::string> stack_;
  std::map<std::string, Json> resolved_;  // key -> its resolved value
  const std::vector<std::string>& from_command_line_;
};

// An override's value as YAML text in Hydra's grammar: inside a dict's braces a key's colon needs
// no space after it (`{enable_thinking:false}` is {enable_thinking: false} to Hydra; to YAML it is
// one key "enable_thinking:false" with no value), so one is added after the first colon of each
// dict entry that lacks it. Quoted text and lists are left as they are.
std::string hydra_override_yaml(const std::string& v) {
  std::string out;
  out.reserve(v.size() + 8);
  std::vector<char> open;  // the brackets enclosing the current position
  bool in_key = false;     // in a dict entry before its colon
  char quote = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const char c = v[i];
    out += c;
    if (quote != 0) {
      if (c == '\\' && quote == '"' && i + 1 < v.size()) {
        out += v[++i];
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '{' || c == '[') {
      open.push_back(c);
      in_key = c == '{';
    } else if (c == '}' || c == ']') {
      if (!open.empty()) open.pop_back();
      in_key = false;
    } else if (c == ',') {
      in_key = !open.empty() && open.back() == '{';
    } else if (c == ':' && in_key) {
      in_key = false;
      if (i + 1 < v.size() && v[i + 1] != ' ') out += ' ';
    }
  }
  return out;
}

// Hydra's override grammar reads an interpolation (`${a.b}`, `${oc.env:VAR,default}`) as one token
// wherever it stands, also inside a list or a dict; YAML would read its braces and colon as a flow
// mapping (`${oc.env:HOME}` as {"${oc.env": "HOME}"}). So each interpolation outside quotes is
// swapped for a placeholder — U+E000 <index> U+E001, private-use characters that YAML reads as
// plain text — before the YAML parse, and put back into the strings after it. Appends the
// interpolations to `out` in order and returns the text with the placeholders.
constexpr std::string_view kInterpOpen = "\xEE\x80\x80", kInterpClose = "\xEE\x80\x81";

std::string hide_interpolations(const std::string& v, std::vector<std::string>* out) {
  std::string text;
  char quote = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const char c = v[i];
    if (quote != 0) {
      text += c;
      if (c == '\\' && quote == '"' && i + 1 < v.size()) {
        text += v[++i];
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    if (c == '\'' || c == '"') quote = c;
    size_t backslashes = 0;  // an odd run before "${" escapes it: `\${x}` is the text ${x}
    while (backslashes < i && v[i - 1 - backslashes] == '\\') ++backslashes;
    if (c != '$' || i + 1 >= v.size() || v[i + 1] != '{' || backslashes % 2 == 1) {
      text += c;
      continue;
    }
    // The '}' closing this "${": braces nest (`${oc.env:A,${b}}`); quoted resolver arguments
    // (`${oc.env:A,'}'}`) hold no braces of the interpolation.
    int depth = 0;
    char arg_quote = 0;
    size_t close = std::string::npos;
    for (size_t k = i + 1; k < v.size() && close == std::string::npos; ++k) {
      if (arg_quote != 0) {
        if (v[k] == '\\' && k + 1 < v.size()) {
          ++k;
        } else if (v[k] == arg_quote) {
          arg_quote = 0;
        }
      } else if (v[k] == '\'' || v[k] == '"') {
        arg_quote = v[k];
      } else if (v[k] == '{') {
        ++depth;
      } else if (v[k] == '}' && --depth == 0) {
        close = k;
      }
    }
    if (close == std::string::npos) {  // unterminated: left to the resolver's error
      text += c;
      continue;
    }
    text += fmt::format("{}{}{}", kInterpOpen, out->size(), kInterpClose);
    out->push_back(v.substr(i, close + 1 - i));
    i = close;
  }
  return text;
}

// `s` with the placeholders of hide_interpolations() replaced by the interpolations they stand for.
std::string restore_interpolations(const std::string& s, const std::vector<std::string>& interps) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t open = s.find(kInterpOpen, i);
    const size_t close = open == std::string::npos ? std::string::npos : s.find(kInterpClose, open);
    if (close == std::string::npos) break;
    const std::string index =
        s.substr(open + kInterpOpen.size(), close - open - kInterpOpen.size());
    out += s.substr(i, open - i);
    out += interps.at(std::stoul(index));
    i = close + kInterpClose.size();
  }
  return out + s.substr(std::min(i, s.size()));
}

void restore_interpolations(Json& v, const std::vector<std::string>& interps) {
  if (v.is_string()) {
    v = restore_interpolations(v.get<std::string>(), interps);
  } else if (v.is_array()) {
    for (auto& c : v) restore_interpolations(c, interps);
  } else if (v.is_object()) {
    Json o = Json::object();
    for (auto& [k, c] : v.items()) {
      restore_interpolations(c, interps);
      o[restore_interpolations(k, interps)] = std::move(c);
    }
    v = std::move(o);
  }
}

// The typed value of override `ov` (the text after its '=' at `eq`), read in Hydra's grammar:
// nothing after the '=' (`key=`) is the empty string, as in Hydra (YAML would read null).
Json override_value(const std::string& ov, size_t eq) {
  if (eq + 1 == ov.size()) return "";
  std::vector<std::string> interps;
  const std::string text = hide_interpolations(ov.substr(eq + 1), &interps);
  try {
    Json v = node_to_json(load_yaml(hydra_override_yaml(text), "override '" + ov + "'"),
                          "<command line>", /*octal=*/false);
    if (!interps.empty()) restore_interpolations(v, interps);
    return v;
  } catch (const YAML::Exception& e) {
    fail("override '{}': the value is not valid YAML: {}", ov, e.msg);
  }
}

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
    const Json want = override_value(ov, eq);
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
  if (eq != std::string::npos) g.value = override_value(ov, eq);
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

// Applies override `ov` to `root`; appends to `set` the key paths of the values it sets.
void apply_override(Json& root, const std::string& ov, const std::filesystem::path& file,
                    const std::function<bool(const std::string&)>& is_known,
                    const std::string& hint, std::vector<std::string>* set) {
  if (!ov.empty() && ov[0] == '~') {  // Hydra's delete: ~key, or ~key=value (only if it holds that)
    delete_override(root, ov, file);
    return;
  }
  size_t eq = ov.find('=');
  if (eq == std::string::npos || eq == 0)
    fail("override '{}' is not of the form key.path=value", ov);
  std::string key = ov.substr(0, eq);
  bool add = false;
  // Hydra's grammar: +key=value adds a key, ++key=value adds it or overrides it.
  if (key.rfind("++", 0) == 0) {
    add = true;
    key = key.substr(2);
  } else if (key[0] == '+') {
    add = true;
    key = key.substr(1);
  }
  if (key.empty()) fail("override '{}' is not of the form key.path=value", ov);
  if (is_known && is_known(key)) add = true;
  const Json value = override_value(ov, eq);
  leaf_paths(value, key, set);
  Json* cur = &root;
  auto parts = split_key_path(key);
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& p = parts[i];
    bool last = i + 1 == parts.size();
    if (!cur->is_object()) fail("override '{}': '{}' is not a mapping in {}", ov, p, file.string());
    if (!cur->contains(p)) {
      if (!add)
        fail("override '{}': key '{}' is not in {} (use +{} to add a new key){}", ov, key,
             file.string(), key, hint);
      (*cur)[p] = last ? value : Json::object();
    } else if (last) {
      Json& old = (*cur)[p];
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

// Whether `s` can be written as a plain YAML scalar that every YAML 1.1 or 1.2 reader (PyYAML and
// OmegaConf, yaml-cpp, ours) reads back as this string. Deliberately narrow: a name or a path —
// letters, digits and _ . / - only, starting with a letter, '_', '/', './' or '../' — that is none
// of YAML 1.1's booleans (yes / no / on / off / y / n, any case: PyYAML reads `save_strategy: no`
// as False), null, or a number to any of them (inf, nan). Anything else is quoted: "12:30" (a
// sexagesimal int, 750, to PyYAML), "007", "", " x", "-x", "a b".
bool plain_scalar_safe(const std::string& s) {
  static const std::regex name_or_path(R"(([A-Za-z_/]|\.\.?/)[A-Za-z0-9_./-]*)");
  static const std::set<std::string> kWords = {"true", "false", "yes",  "no",  "on", "off",
                                               "y",    "n",     "null", "inf", "nan"};
  return std::regex_match(s, name_or_path) && kWords.count(ascii_lower(s)) == 0 &&
         yaml_scalar_to_json(s, false).is_string();
}

void emit_string(YAML::Emitter& out, const std::string& s) {
  if (plain_scalar_safe(s))
    out << s;
  else
    out << YAML::DoubleQuoted << s;
}

// A string value as OmegaConf reads it back: a string holding "${" is read as an interpolation, so
// each "${" is escaped as OmegaConf's grammar escapes it — the n backslashes before it doubled and
// one more added (`${x}` is written `\${x}`, `\${x}` as `\\\${x}`); other backslashes are text
// there. A string without "${" is never parsed, and is written as it is.
std::string escape_interpolations(const std::string& s) {
  std::string out;
  size_t i = 0;
  for (size_t open = s.find("${"); open != std::string::npos; open = s.find("${", i)) {
    size_t run = open;
    while (run > i && s[run - 1] == '\\') --run;
    out += s.substr(i, run - i) + std::string(2 * (open - run) + 1, '\\') + "${";
    i = open + 2;
  }
  return out + s.substr(i);
}

void emit(YAML::Emitter& out, const Json& v) {
  if (v.is_object()) {
    out << YAML::BeginMap;
    for (auto& [k, c] : v.items()) {
      out << YAML::Key;
      emit_string(out, k);
      out << YAML::Value;
      emit(out, c);
    }
    out << YAML::EndMap;
  } else if (v.is_array()) {
    out << YAML::BeginSeq;
    for (const auto& c : v) emit(out, c);
    out << YAML::EndSeq;
  } else if (v.is_null()) {
    out << YAML::Null;
  } else if (v.is_string()) {
    emit_string(out, escape_interpolations(v.get_ref<const std::string&>()));
  } else if (v.is_boolean()) {
    out << (v.get<bool>() ? "true" : "false");
  } else if (v.is_number_float() && !std::isfinite(v.get<double>())) {
    const double d = v.get<double>();  // dump() writes null for these
    out << (std::isnan(d) ? ".nan" : d > 0 ? ".inf" : "-.inf");
  } else {
    out << v.dump();
  }
}

}  // namespace

Json yaml_scalar_to_json(const std::string& s, bool quoted, bool octal) {
  if (quoted) return s;
  std::string l = ascii_lower(s);
  if (l.empty() || l == "~" || l == "null") return nullptr;
  if (l == "true") return true;
  if (l == "false") return false;
  // Hydra's override grammar: decimal only, single underscores between digits (0042 is 42).
  if (!octal) {
    if (const std::optional<int64_t> i = python_int(s, /*spaces=*/false)) return *i;
    if (const std::optional<double> d = python_float(s, /*spaces=*/false)) return *d;
    return s;
  }
  int64_t i;
  if (parse_int(s, &i)) return i;
  double d;
  if (parse_float(s, &d)) return d;
  return s;
}

Json load_yaml_file(const std::filesystem::path& path) {
  return node_to_json(parse_file(path), path);
}

Json load_hydra_yaml(const std::filesystem::path& path, const std::vector<std::string>& overrides,
                     const std::function<bool(const std::string&)>& is_known,
                     std::vector<std::string>* overridden) {
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
      log::info(
          "override '{}' configures Hydra itself (its output directory, logging, launcher); "
          "zerotune runs without Hydra and ignores it",
          ov);
      continue;
    }
    if (std::optional<GroupOverride> g = group_override(ov, dir)) {
      groups.push_back(std::move(*g));
    } else {
      keys.push_back(ov);
    }
  }
  Json root = compose_hydra_config(path, groups);
  std::vector<std::string> from_command_line;  // the key paths the overrides set
  for (const auto& ov : keys) {
    apply_override(root, ov, path, is_known, group_hint(ov, dir), &from_command_line);
    if (overridden != nullptr) {
      std::string key = ov.substr(0, ov.find('='));
      key.erase(0, std::min(key.find_first_not_of("+~"), key.size()));
      overridden->push_back(key);
    }
  }
  Resolver(root, path, from_command_line).resolve_all();
  return root;
}

std::string json_to_yaml(const Json& value) {
  YAML::Emitter out;
  emit(out, value);
  return std::string(out.c_str()) + "\n";
}

}  // namespace zt
