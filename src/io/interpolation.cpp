// OmegaConf's `${…}` interpolations (io/interpolation.h): the Resolver that resolves them in a
// composed config, with the splitting and unescaping of resolver arguments (oc.env).
#include "io/interpolation.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "core/error.h"
#include "core/spelling.h"
#include "io/hydra_override.h"
#include "io/hydra_yaml.h"
#include "io/python_number.h"

namespace zt::detail {
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

// `s` without the spaces and tabs at its start and end (OmegaConf's grammar skips both there).
std::string strip_spaces(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t");
  return first == std::string::npos ? "" : s.substr(first, s.find_last_not_of(" \t") + 1 - first);
}

// Python's str() of a scalar, as OmegaConf writes a value into text: a string as it is, True /
// False, an int in decimal, a float as repr() (1.5, 1e-05, inf), None. nullopt for a list or a
// dict, whose Python text (`[1, 'a']`, `{'a': 1}`) zerotune does not write.
std::optional<std::string> python_str(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_number_integer()) return v.dump();
  if (v.is_number_float()) return python_float_repr(v.get<double>());
  if (v.is_null()) return "None";
  return std::nullopt;
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
           const std::vector<std::string>& from_command_line, std::vector<InterpolatedCopy>* copies)
      : root_(root),
        raw_(root),
        file_(file),
        from_command_line_(from_command_line),
        copies_(copies) {}

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

  // One resolver argument as OmegaConf's grammar reads it, the spaces around it skipped: a quoted
  // one is text, its interpolations resolved into it and its quotes and escapes undone
  // (unquote_hydra_string, io/hydra_override.h: OmegaConf's quoted strings escape as Hydra's; the
  // escapes before "${" are left to resolve_string(), and removing backslashes before a quote or
  // at the end never puts one next to a "${"; a quoted `"${n}"` is str() of n's value); an
  // unquoted one holding an interpolation is that interpolation's value (`${n}` keeps its type)
  // or the text it makes (`${d}/out`); `null` in any case is null; other unquoted text has its
  // escapes undone (`a\,b` is "a,b"). Throws what resolve_string() and text() throw.
  Json resolve_arg(const std::string& written, const std::string& at) {
    const std::string a = strip_spaces(written);
    if (is_quoted(a)) {
      const std::string inner = unquote_hydra_string(a);
      return text(resolve_string(inner, at), inner, at);
    }
    if (a.find("${") != std::string::npos) return resolve_string(a, at);
    if (ascii_lower(a) == "null") return Json();
    return unescape_resolver_arg(a);
  }

  static bool is_quoted(const std::string& a) {
    return a.size() >= 2 && (a.front() == '\'' || a.front() == '"') && a.back() == a.front();
  }

  // oc.env's default `written`, typed by OmegaConf's grammar: an int, float or bool token is
  // already the text str() makes of it (`1.50` → "1.5", `1_000` → "1000", `true` → "True"); a
  // list or dict written out is an empty one of its kind (only its kind is used: text() refuses
  // it); anything else is resolve_arg()'s value (an interpolated 3 stays 3, null stays null; a
  // quoted default is its text as written: '1.50' → "1.50"). Throws what resolve_arg() throws.
  Json env_default(const std::string& written, const std::string& at) {
    const std::string a = strip_spaces(written);
    if (!is_quoted(a) && a.find("${") == std::string::npos) {
      if (std::optional<std::string> s = python_str_of_token(a)) return *s;
      if (!a.empty() && a.front() == '[') return Json::array();
      if (!a.empty() && a.front() == '{') return Json::object();
    }
    return resolve_arg(written, at);
  }

  // `v`, the value of `written` at key path `at`, as the text OmegaConf makes of it (python_str());
  // throws for a list or a dict.
  Json text(const Json& v, const std::string& written, const std::string& at) {
    std::optional<std::string> s = python_str(v);
    if (!s)
      fail(
          "{}: '{}': '{}' gives a {} where OmegaConf makes text of it, Python's str() of the {} "
          "(as in [1, 'a'] or {{'a': 1}}), which zerotune does not write; write the text wanted, "
          "quoted{}",
          file_.string(), at, written, v.is_array() ? "list" : "dict",
          v.is_array() ? "list" : "dict", where(at));
    return *s;
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
      // Both arguments are resolved before the variable is read, as OmegaConf resolves a
      // resolver's arguments before calling it: the name may be quoted or interpolate
      // (`${oc.env:${exp_name}}`), and a default's interpolation is resolved (and its errors
      // raised) whether the variable is set or not.
      const Json name = resolve_arg(args[0], at);
      const std::string var = name.is_string() ? name.get<std::string>() : name.dump();
      const Json def = args.size() == 2 ? env_default(args[1], at) : Json();
      if (var.empty() && args.size() == 1)
        fail(
            "{}: '{}' interpolates '${{{}}}', which names no environment variable; oc.env needs "
            "one, as in ${{oc.env:NAME}} or ${{oc.env:NAME,default}}{}",
            file_.string(), at, expr, where(at));
      // The variable's value is a string, as OmegaConf's oc.env returns it (SLURM_JOB_ID=0042 as a
      // run name stays "0042"); a config key that wants a number or a boolean reads a string that
      // spells one (RunConfig), as OmegaConf converts it for a typed field. An empty name with a
      // default gives the default, as in OmegaConf (the environment has no variable '').
      const char* v = std::getenv(var.c_str());
      if (v != nullptr) return std::string(v);
      if (args.size() == 1)
        fail("{}: '{}' interpolates environment variable {} which is not set{}", file_.string(), at,
             var, where(at));
      // The default as oc.env returns it: str() of its value, except null, which stays None.
      return def.is_null() ? def : text(def, strip_spaces(args[1]), at);
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
    if (s.size() > 3 && s.rfind("${", 0) == 0 && closing_brace(s, 0) == s.size() - 1) {
      const std::string expr = s.substr(2, s.size() - 3);
      Json v = resolve_ref(expr, at);
      if (copies_ != nullptr && (v.is_object() || v.is_array()))
        copies_->push_back({at, absolute_key(expr, at)});
      return v;
    }
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
      const std::string inner = s.substr(open, close + 1 - open);
      out += text(resolve_ref(inner.substr(2, inner.size() - 3), at), inner, at).get<std::string>();
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
  std::vector<InterpolatedCopy>* copies_;
};

}  // namespace

void resolve_interpolations(Json& root, const std::filesystem::path& file,
                            const std::vector<std::string>& from_command_line,
                            std::vector<InterpolatedCopy>* copies) {
  Resolver(root, file, from_command_line, copies).resolve_all();
}

}  // namespace zt::detail
