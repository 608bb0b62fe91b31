#include "cli/run_config.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>

#include "cli/config_schema.h"
#include "core/error.h"
#include "core/log.h"
#include "core/spelling.h"
#include "io/hydra_yaml.h"
#include "io/python_number.h"

namespace zt::cli {
namespace {

Json* ensure(Json& root, std::string_view path) {
  Json* cur = &root;
  for (const auto& part : split_key_path(path)) {
    if (cur->is_null()) *cur = Json::object();
    cur = &(*cur)[part];
  }
  return cur;
}

void erase(Json& root, std::string_view path) {
  auto parts = split_key_path(path);
  Json* cur = &root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!cur->is_object() || !cur->contains(parts[i])) return;
    cur = &(*cur)[parts[i]];
  }
  if (cur->is_object()) cur->erase(parts.back());
}

bool is_missing_value(const Json& v) { return v.is_string() && v.get<std::string>() == "???"; }

// TRL passes trainer.chat_template_kwargs to the chat template as keyword arguments
// (`apply_chat_template(**kwargs)`), so each key must be a string in Python; a key of the file
// that PyYAML types otherwise (`yes:` True, `1:` 1) raises TypeError ("keywords must be strings")
// there. Throws zt::Error naming the file, line and key for the first such key still in `tree`.
void refuse_non_string_kwargs(const Json& tree, const std::vector<NonStringKey>& keys) {
  constexpr std::string_view kKwargs = "trainer.chat_template_kwargs";
  for (const NonStringKey& k : keys) {
    const Json* kwargs = k.parent == kKwargs ? find_key_path(tree, kKwargs) : nullptr;
    if (kwargs == nullptr || !kwargs->is_object() || !kwargs->contains(k.key)) continue;
    const Json& v = k.value;
    const std::string python =
        v.is_boolean()          ? fmt::format("the boolean {}", v.get<bool>() ? "True" : "False")
        : v.is_number_integer() ? fmt::format("the integer {}", v.dump())
                                : fmt::format("the float {}", python_float_repr(v.get<double>()));
    fail(
        "{}:{}: {}: the key {} is {} to PyYAML (YAML 1.1, as OmegaConf loads it), not a string; "
        "TRL passes these keys to the chat template as keyword arguments, and a keyword name must "
        "be a string (Python raises TypeError: keywords must be strings): quote the key, as in "
        "'{}':",
        k.file.string(), k.line, kKwargs, k.key, python, k.key);
  }
}

// `s` without the ASCII whitespace around it (what Python's int() and float() skip).
std::string_view trimmed(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\n\r\f\v");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\n\r\f\v") - b + 1);
}

// A value a refused field may hold: its default, null, an empty list / mapping / string (Python
// reads "" as false and transformers skips an empty optim_args), or one of the field's
// KeySpec::also_neutral. Any other string is not neutral: Python reads " " as true (fp16: " "
// would turn fp16 on in TRL).
bool is_neutral(const KeySpec& s, const Json& v) {
  if (v.is_null() || v == s.default_value) return true;
  if ((v.is_object() || v.is_array()) && v.empty()) return true;
  if (v.is_string() && v.get_ref<const std::string&>().empty()) return true;
  return std::any_of(s.also_neutral.begin(), s.also_neutral.end(), [&](const Json& n) {
    return v == n || (v.is_string() && n.is_string() &&
                      trimmed(v.get_ref<const std::string&>()) == n.get_ref<const std::string&>());
  });
}

// Whether `s` is an integer to Python's int() that int64 does not hold ("99999999999999999999999",
// from the file or `${oc.env:SEED}`): Python's ints have no bound, zerotune's are 64-bit.
bool int_beyond_int64(std::string_view s) {
  return !python_int(s) && python_float(s) && s.find_first_of(".eEiInN") == std::string_view::npos;
}

bool wants_integer(const ValueRule& r) {
  return r.kind == ValueRule::Kind::kInt || r.kind == ValueRule::Kind::kSteps;
}

std::string show(const Json& v) {
  if (v.is_string()) return fmt::format("'{}'", v.get_ref<const std::string&>());
  if (v.is_number_float() && !std::isfinite(v.get<double>())) return fmt::format("{}", v.get<double>());  // dump(): null
  return v.dump();
}

// "FILE:LINE" of the file that holds key `path` (a config group's file, or the primary), else
// `source`: the key was given on the command line, was derived, or the tree came from no file.
// The one place that says where a key was written, for RunConfig's messages and its users'.
std::string key_location(const std::string& source, const std::set<std::string>& overridden,
                         const std::map<std::string, KeyOrigin>& origins, const std::string& path) {
  if (overridden.count(path)) return source;
  const auto it = origins.find(path);
  if (it == origins.end()) return source;
  return fmt::format("{}:{}", it->second.file.string(), it->second.line);
}

template <typename T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, int64_t>) return "an integer";
  else if constexpr (std::is_same_v<T, double>) return "a number";
  else if constexpr (std::is_same_v<T, bool>) return "true or false";
  else return "a string";
}

class Checker {
 public:
  Checker(const std::string& source, const std::set<std::string>& overridden,
          std::vector<std::string>* notes, std::map<std::string, KeyOrigin>* origins)
      : source_(source), overridden_(overridden), notes_(notes), origins_(origins) {}

  // Old names → new names, before anything else looks at the tree.
  void apply_aliases(Json& tree) {
    for (const auto& a : key_aliases()) {
      const Json* old = find_key_path(tree, a.old_path);
      if (old == nullptr) continue;
      const Json* cur = find_key_path(tree, a.new_path);
      // Compared as the new key reads them (`${oc.env:L}` gives "128" beside a plain 128).
      const auto as_read = [&](const Json& x) {
        Json y = x;
        if (const KeySpec* s = find_key(a.new_path)) coerce_string(s->rule, y);
        return y;
      };
      if (cur != nullptr && as_read(*cur) != as_read(*old))
        fail("{}: {} (the name before {}) and {} are both given, with different values ({} and {})", source_,
             a.old_path, a.since, a.new_path, old->dump(), cur->dump());
      const std::string at = key_at(a.old_path);
      Json v = *old;
      erase(tree, a.old_path);
      *ensure(tree, a.new_path) = std::move(v);
      // The value is checked under its new name: name the old one's line (not when the command
      // line gave the old name: that value came from no file).
      auto o = origins_->extract(std::string(a.old_path));
      if (!o.empty() && !overridden_.count(std::string(a.old_path))) {
        o.key() = std::string(a.new_path);
        origins_->insert(std::move(o));
      }
      notes_->push_back(
          fmt::format("{}: {} is read as {} (renamed in {})", at, a.old_path, a.new_path, a.since));
    }
  }

  void check_tree(Json& node, const std::string& path) {
    if (path.empty()) root_ = &node;
    if (!path.empty()) {
      if (const KeySpec* s = find_key(path)) return check_leaf(*s, node);
      if (!is_section(path))
        fail("{}: unknown config key '{}' (not a zerotune/TRL SFTConfig key){}", key_at(path), path,
             did_you_mean_key(path));
      if (!node.is_object() && !node.is_null())
        fail("{}: config key '{}' must be a mapping, got {}", key_at(path), path, node.dump());
    }
    if (!node.is_object()) return;
    for (auto& [k, v] : node.items()) {
      // An empty key at the top level has the root's path: it would be taken for the root and
      // never checked (a scalar there was dropped without a word).
      if (k.empty())
        fail("{}: an empty config key{} (not a zerotune/TRL SFTConfig key)", source_,
             path.empty() ? " at the top level" : " in '" + path + "'");
      // A key spelled with dots (`trainer.learning_rate: 1e-3` at the top level) is one key of
      // that name to PyYAML and OmegaConf, which the recipe never reads: the value would be lost
      // without a word, where it looks like the nested key it spells.
      if (k.find('.') != std::string::npos) {
        const std::string full = path.empty() ? k : path + "." + k;
        fail(
            "{}: config key '{}'{} is one key whose name holds dots (YAML and OmegaConf read it "
            "so; nothing reads it); to set {} write each part as a nested mapping key or give "
            "{}=… on the command line",
            key_at(full), k, path.empty() ? "" : " in '" + path + "'", full, full);
      }
      check_tree(v, path.empty() ? k : path + "." + k);
    }
  }

 private:
  // A string where the key wants a number or a boolean — `${oc.env:STEPS}` is one (OmegaConf's
  // oc.env returns strings), or a quoted "10" — is read as the value it spells, as OmegaConf
  // converts a string for a typed field: a number as Python's int(), else float(), reads it
  // (io/python_number.h: spaces around allowed, " 7" is 7; "010" is 10; single underscores between
  // digits, "1_0" is 10 and "1__0" no number), booleans true / false in any case. OmegaConf's other
  // boolean words (yes, on, 1, …) stay refused, as a quoted 'yes' always was here (HF would take
  // the string as truthy). A string that spells none stays as it is, and the check names it; so
  // does an integer beyond int64 where an integer is wanted (it was read as a float and shown as
  // 9.999999999999999e+22); where a number is wanted it is the float that float() reads.
  static void coerce_string(const ValueRule& r, Json& v) {
    using K = ValueRule::Kind;
    if (!v.is_string()) return;
    const std::string& s = v.get_ref<const std::string&>();
    if (r.kind == K::kInt || r.kind == K::kNumber || r.kind == K::kSteps || r.kind == K::kWarmup) {
      if (const std::optional<int64_t> i = python_int(s)) {
        v = *i;
      } else if (wants_integer(r) && int_beyond_int64(s)) {
        return;
      } else if (const std::optional<double> d = python_float(s)) {
        v = *d;
      }
    } else if (r.kind == K::kBool) {
      const std::string l = ascii_lower(s);
      if (l == "true" || l == "false") v = l == "true";
    }
  }

  std::string where(std::string_view key) const {
    return overridden_.count(std::string(key)) ? " (given on the command line)" : "";
  }

  std::string key_at(std::string_view path) const {
    return key_location(source_, overridden_, *origins_, std::string(path));
  }

  void check_leaf(const KeySpec& s, Json& v) {
    if (is_missing_value(v)) return;  // `???`: must be set (or derived) before it is read
    // A trainer key's value reaches TRL's SFTConfig(**trainer) as it is (the users' config is a
    // plain DictConfig: no typed field converts it), and Python reads every non-empty string as
    // true: `packing: "false"` packs there. A string spelling false is refused rather than read
    // as the opposite of what TRL does; one spelling true is true in both.
    if (s.rule.kind == ValueRule::Kind::kBool && v.is_string() && s.path.starts_with("trainer.") &&
        ascii_lower(v.get<std::string>()) == "false") {
      const std::string name(s.path.substr(std::string_view("trainer.").size()));
      fail(
          "{}: {}: '{}' is a string (quoted, or from ${{oc.env:…}}), not the boolean false: TRL's "
          "SFTConfig takes the value as it is, and Python reads every non-empty string as true, "
          "so TRL would run with {} on; write false without quotes (on the command line: "
          "{}=false){}",
          key_at(s.path), s.path, v.get<std::string>(), name, s.path, where(s.path));
    }
    // A NUL byte in a string (YAML "\0"): every path, name and text value goes to the OS or a
    // tokenizer as a C string, which would end there (Python refuses it: "embedded null byte").
    const auto refuse_nul = [&](const Json& x) {
      if (!x.is_string()) return;
      const std::string& t = x.get_ref<const std::string&>();
      if (const size_t at = t.find('\0'); at != std::string::npos)
        fail("{}: {}: {} holds a NUL byte at offset {}; a path, name or text cannot hold one{}",
             key_at(s.path), s.path, Json(t).dump(), at, where(s.path));
    };
    refuse_nul(v);
    if (v.is_array())
      for (const Json& x : v) refuse_nul(x);
    coerce_string(s.rule, v);
    if (s.use == KeyUse::kUnsupported) {
      if (!is_neutral(s, v))
        fail("{}: {}: {} is not supported by zerotune: {}{}", key_at(s.path), s.path, show(v),
             s.note, where(s.path));
      return;
    }
    if (v.is_null()) {
      if (s.use == KeyUse::kActs && !s.rule.nullable && s.rule.kind != ValueRule::Kind::kAny)
        fail("{}: {}: null is not valid (expected {}){}", key_at(s.path), s.path,
             check_value(s.rule, Json()), where(s.path));
      return;
    }
    if (s.rule.kind == ValueRule::Kind::kSteps && v.is_number_float() && steps_unread(s, v)) return;
    const std::string want = check_value(s.rule, v);
    if (want == "@unsupported") {
      std::string choices;
      for (auto c : s.rule.choices) {
        if (!choices.empty()) choices += ", ";
        choices += c;
      }
      fail("{}: {}: {} is not supported by zerotune (it implements: {}){}", key_at(s.path), s.path,
           show(v), choices, where(s.path));
    }
    if (!want.empty()) {
      // `save_strategy: no` unquoted is the boolean false in YAML 1.1, as OmegaConf (and so TRL)
      // reads the file: say so where a word was wanted.
      const bool word = s.rule.kind == ValueRule::Kind::kEnum ||
                        s.rule.kind == ValueRule::Kind::kString ||
                        s.rule.kind == ValueRule::Kind::kStrings;
      std::string hint =
          word && v.is_boolean()
              ? "; YAML reads an unquoted yes / no / on / off / true / false as a boolean, as "
                "OmegaConf does: quote the word, e.g. \"no\""
              : "";
      std::string shown = show(v);
      // An integer beyond int64 is shown as given, with the 64-bit bound where the key's own
      // range does not exclude it (`max_steps`: an integer >= -1).
      if (wants_integer(s.rule) && v.is_string() &&
          int_beyond_int64(v.get_ref<const std::string&>())) {
        shown = trimmed(v.get_ref<const std::string&>());
        const bool negative = shown[0] == '-';
        if (negative ? s.rule.kind == ValueRule::Kind::kInt && std::isinf(s.rule.lo)
                     : s.rule.kind == ValueRule::Kind::kSteps || std::isinf(s.rule.hi))
          hint = negative ? "; zerotune's integers are 64-bit: at least -9223372036854775808"
                          : "; zerotune's integers are 64-bit: at most 9223372036854775807";
      }
      if (s.rule.kind == ValueRule::Kind::kSteps) hint += steps_fraction_hint(s, v);
      fail("{}: {}: {} is not valid (expected {}{}){}", key_at(s.path), s.path, shown, want, hint,
           where(s.path));
    }
    if (s.use == KeyUse::kNote && v != s.default_value)
      notes_->push_back(fmt::format("{}: {}: {} changes nothing in zerotune: {}", key_at(s.path),
                                    s.path, show(v), s.note));
  }

  // The value of `path` in the tree being checked as its rule reads it (a `${oc.env:…}` string
  // coerced), else the key's default.
  Json value_of(std::string_view path) const {
    const KeySpec* s = find_key(path);
    const Json* v = root_ != nullptr ? find_key_path(*root_, path) : nullptr;
    Json out = v != nullptr ? *v : s != nullptr ? s->default_value : Json();
    if (s != nullptr) coerce_string(s->rule, out);
    return out;
  }

  // Where a steps key's value is read as a count of steps: under its strategy "steps", and
  // logging_steps also where eval_strategy is steps and eval_steps null or 0 (__post_init__ copies
  // logging_steps into eval_steps). `eval_copy` says it is that copy alone.
  struct StepsUse {
    bool read = false, eval_copy = false;
  };
  StepsUse steps_use(std::string_view path) const {
    const std::string_view name = path.substr(std::string_view("trainer.").size());
    const std::string strategy = fmt::format("trainer.{}_strategy", name.substr(0, name.find('_')));
    if (value_of(strategy) == "steps") return {true, false};
    if (path != "trainer.logging_steps" || value_of("trainer.eval_strategy") != "steps") return {};
    const Json e = value_of("trainer.eval_steps");
    return {e.is_null() || (e.is_number() && e.get<double>() == 0), true};
  }

  // trainer.logging_steps / eval_steps / save_steps: a fraction above 1 (2.5) that no strategy
  // "steps" reads. transformers 4.57.1 takes it (TrainingArguments.__post_init__ makes a value
  // > 1 int() only under its strategy steps, raising "--logging_steps must be an integer if
  // bigger than 1" on a fraction there), and TrainerState.compute_steps records it as it is; the
  // count zerotune keeps (int() of it) is never read. At least the key's lower bound and below
  // 2^63 (the count's int64), as a whole number must be.
  bool steps_unread(const KeySpec& s, const Json& v) const {
    const double d = v.get<double>();
    return d != std::floor(d) && d >= steps_lower_bound(s.rule) && d < 0x1p63 &&
           !steps_use(s.path).read;
  }

  // Why a fraction above 1 is refused: the strategy steps that reads it, in transformers' words.
  std::string steps_fraction_hint(const KeySpec& s, const Json& v) const {
    if (!v.is_number_float()) return "";
    const double d = v.get<double>();
    if (d <= 1 || d == std::floor(d) || !std::isfinite(d)) return "";
    const StepsUse use = steps_use(s.path);
    const std::string_view name = s.path.substr(std::string_view("trainer.").size());
    if (use.eval_copy)
      return fmt::format(
          "; trainer.eval_strategy is steps and trainer.eval_steps null or 0, so evaluations "
          "run every {}, and transformers raises \"--eval_steps must be an integer if bigger "
          "than 1: {}\"",
          name, show(v));
    return fmt::format(
        "; trainer.{}_strategy is steps, where transformers raises \"--{} must be an integer "
        "if bigger than 1: {}\" (under another strategy a fraction is taken, and unused)",
        name.substr(0, name.find('_')), name, show(v));
  }

  const std::string& source_;
  const std::set<std::string>& overridden_;
  std::vector<std::string>* notes_;
  std::map<std::string, KeyOrigin>* origins_;
  const Json* root_ = nullptr;  // the whole tree, for rules that read another key
};

}  // namespace

RunConfig RunConfig::from_json(Json tree, const std::string& source,
                               const std::vector<std::string>& overridden,
                               const KeyOrigins* origins) {
  if (!tree.is_object()) fail("{}: the top level must be a mapping", source);
  RunConfig c;
  c.source_ = source;
  c.overridden_.insert(overridden.begin(), overridden.end());
  if (origins != nullptr) c.origins_ = origins->at;
  Checker check(c.source_, c.overridden_, &c.notes_, &c.origins_);
  check.apply_aliases(tree);
  check.check_tree(tree, "");

  // The users' layout: model_name names the model and its tokenizer; their sft.py renders each
  // plain prompt as one user turn of the chat template (dataset.prompt_format: chat).
  if (const Json* mn = find_key_path(tree, "model_name"); mn != nullptr && mn->is_string()) {
    const Json* np = find_key_path(tree, "model.name_or_path");
    if (np != nullptr && !np->is_null() && *np != *mn)
      fail("{}: model_name ({}) and model.name_or_path ({}) name different models; give one of them", source,
           mn->dump(), np->dump());
    *ensure(tree, "model.name_or_path") = *mn;
    const Json* pf = find_key_path(tree, "dataset.prompt_format");
    if (pf == nullptr || pf->is_null()) {
      *ensure(tree, "dataset.prompt_format") = "chat";
      c.implied_["dataset.prompt_format"] = fmt::format(
          "not set in {}: chat is implied by model_name, the users' sft.py layout; set "
          "dataset.prompt_format: none for TRL's plain prompt + completion",
          source);
      c.notes_.push_back(fmt::format(
          "{}: model_name given (the users' sft.py layout): dataset.prompt_format is chat — each plain prompt is "
          "one user turn of the chat template with the generation prompt, the completion ends with EOS, as "
          "their sft.py does; set dataset.prompt_format: none for TRL's plain prompt + completion",
          source));
    }
  }
  if (const Json* seed = find_key_path(tree, "seed"); seed != nullptr && !seed->is_null() && !find_key_path(tree, "trainer.seed"))
    *ensure(tree, "trainer.seed") = *seed;

  for (const auto& s : config_schema()) {
    if (find_key_path(tree, s.path) != nullptr || s.default_value.is_null()) continue;
    *ensure(tree, s.path) = s.default_value;
  }
  if (const Json* pf = find_key_path(tree, "dataset.prompt_format"); pf == nullptr || pf->is_null())
    *ensure(tree, "dataset.prompt_format") = "none";
  c.tree_ = std::move(tree);
  return c;
}

RunConfig RunConfig::load(const std::filesystem::path& path, const std::vector<std::string>& overrides) {
  // The keys an override sets without '+' (each has a default here), and that a misspelt one is
  // compared with: the schema's, and the old names read as new ones (suggested as the new).
  std::vector<KnownKey> known;
  for (const auto& s : config_schema()) known.push_back({std::string(s.path), ""});
  for (const auto& a : key_aliases())
    known.push_back({std::string(a.old_path), std::string(a.new_path)});
  std::vector<std::string> overridden;
  std::vector<NonStringKey> non_string_keys;
  KeyOrigins origins;
  std::vector<std::string> notes;  // loading's own lines first, then the keys'
  try {
    Json tree =
        load_hydra_yaml(path, overrides, known, &overridden, &non_string_keys, &origins, &notes);
    refuse_non_string_kwargs(tree, non_string_keys);
    RunConfig c = from_json(std::move(tree), path.string(), overridden, &origins);
    c.notes_.insert(c.notes_.begin(), notes.begin(), notes.end());
    return c;
  } catch (const Error&) {
    // A config that fails: its notes come before the error (a defaults list without _self_ is
    // often why a value is not the one expected).
    for (const auto& n : notes) log::info("{}", n);
    throw;
  }
}

const Json* RunConfig::find(const std::string& key) const { return find_key_path(tree_, key); }

const Json& RunConfig::value(const std::string& key) const {
  static const Json kNull;
  const Json* v = find(key);
  return v != nullptr ? *v : kNull;
}

bool RunConfig::is_missing(const std::string& key) const {
  const Json* v = find(key);
  return v != nullptr && is_missing_value(*v);
}

std::string RunConfig::key_at(const std::string& key) const {
  return key_location(source_, overridden_, origins_, key);
}

std::string RunConfig::where(const std::string& key) const {
  if (overridden_.count(key)) return " (given on the command line)";
  const auto it = implied_.find(key);
  return it != implied_.end() ? " (" + it->second + ")" : "";
}

std::string RunConfig::key_ref(const std::string& key) const {
  // An absent key (unset, or under a mapping an override removed) has no line that holds it.
  const std::string at = find(key) != nullptr ? key_at(key) : source_;
  return at != source_ ? fmt::format("{} ({})", key, at) : key + where(key);
}

void RunConfig::set(const std::string& key, Json value) { *ensure(tree_, key) = std::move(value); }

template <typename T>
std::optional<T> RunConfig::get_optional(const std::string& key) const {
  const Json* v = find(key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (is_missing(key))
    fail("{}: config key '{}' is ??? (mandatory) and was not set", key_at(key), key);
  if constexpr (std::is_same_v<T, int64_t>) {
    if (v->is_number_integer()) return v->get<int64_t>();
    if (v->is_number_float() && v->get<double>() == static_cast<double>(static_cast<int64_t>(v->get<double>())))
      return static_cast<int64_t>(v->get<double>());
  } else if constexpr (std::is_same_v<T, double>) {
    if (v->is_number()) return v->get<double>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (v->is_boolean()) return v->get<bool>();
  } else {
    if (v->is_string()) return v->get<std::string>();
  }
  fail("{}: config key '{}' must be {}, got {}{}", key_at(key), key, type_name<T>(), v->dump(),
       where(key));
}

template <typename T>
T RunConfig::get(const std::string& key) const {
  auto v = get_optional<T>(key);
  if (!v) fail("{}: config key '{}' is required but not set", source_, key);
  return *v;
}

template std::optional<int64_t> RunConfig::get_optional<int64_t>(const std::string&) const;
template std::optional<double> RunConfig::get_optional<double>(const std::string&) const;
template std::optional<bool> RunConfig::get_optional<bool>(const std::string&) const;
template std::optional<std::string> RunConfig::get_optional<std::string>(const std::string&) const;
template int64_t RunConfig::get<int64_t>(const std::string&) const;
template double RunConfig::get<double>(const std::string&) const;
template bool RunConfig::get<bool>(const std::string&) const;
template std::string RunConfig::get<std::string>(const std::string&) const;

}  // namespace zt::cli
