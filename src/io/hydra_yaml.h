// Hydra/OmegaConf-style YAML configs, as the users' `sft.yaml` files are written: the config is
// composed from its `defaults:` list and config groups as Hydra composes it (io/hydra_compose.h),
// the `hydra:` section is dropped, `${a.b}` interpolations (whole-value keeps the type, inside a
// string concatenates; `${oc.env:VAR}` / `${oc.env:VAR,default}` read the environment) are
// resolved after composition, `???` marks a mandatory value still missing, and `key.path=value`
// overrides from the command line are applied to the composed config (`+key.path=value` adds a
// new key, as in Hydra; `group=option` chooses a config group's option before composing).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "io/json.h"

namespace zt {

// The string OmegaConf uses for a mandatory value that is not set.
inline constexpr std::string_view kMissingValue = "???";

// Converts one YAML scalar string of a file to a typed JSON value with OmegaConf's rules (PyYAML's
// YAML 1.1 resolvers, which OmegaConf's loader keeps): null / Null / NULL / ~ / empty → null; true
// / false / yes / no / on / off in PyYAML's three spellings (lower, Capital, UPPER) → bool;
// integers (1_000, 0x1F, 0b101, 017 octal, 12:30 sexagesimal = 750) → int; floats (1e-5, 1., .5,
// .inf, .nan, 1:30.5) → float; anything else → string. `quoted` scalars are always strings.
// (Command-line override values follow Hydra's grammar instead: io/hydra_override.h.)
Json yaml_scalar_to_json(const std::string& s, bool quoted);

// A mapping key of a config file that PyYAML (YAML 1.1, as OmegaConf's loader) types as other
// than a string: `yes:` True, `1:` 1, `0x10:` 16, `1.5:` 1.5 (a null key is refused). Its mappings
// have string keys, so zerotune keeps such a key as written; where Python needs a string (a keyword
// argument's name), the application refuses it.
struct NonStringKey {
  std::filesystem::path file;
  int line = 0;        // 1-based
  std::string parent;  // the key path of the mapping that holds it ("" for the top)
  std::string key;     // as written
  Json value;          // as PyYAML types it: a bool, an int or a float
};

// Where each key of a config was written, so that a message about a key names the file that holds
// it (a config group's file, not the primary) and its line.
struct KeyOrigin {
  std::filesystem::path file;
  int line = 0;  // 1-based, the line of the key
};
struct KeyOrigins {
  // Key path in the config ("trainer.learning_rate"; list elements by index) → where the key that
  // gave its value was written.
  std::map<std::string, KeyOrigin> at;
};

// A key path the application knows: an override sets it without '+' (it has a default there).
// `renamed_to`, when not empty, is the name it now has (an old name read as the new one): a
// misspelt override key closest to the old name is told the new one.
struct KnownKey {
  std::string path;
  std::string renamed_to = "";
};

// Loads `path`, composes it with its config groups (an override whose key names a directory
// beside `path` chooses, adds (+) or removes (~) a config group, as in Hydra), applies the other
// `overrides` in Hydra's grammar ("a.b=1"; "+a.c=x" adds a key; "++a.c=x" adds or overrides;
// "~a.b" deletes a key, "~a.b=v" only if it holds v), drops `defaults`/`hydra`, resolves
// interpolations. `???` values are kept as the string "???".
// An override of a key absent from the file needs a leading '+' (as in Hydra) unless `known`
// holds its key path (the application knows the key: it has a default there); one that needs it
// is told the key path it likely meant, in the file or in `known` ("did you mean …?"; for an old
// name of `known` the file lacks, its new name).
// Throws zt::Error naming the file (and line for YAML syntax errors and repeated keys), the
// override that names an unknown key (without '+'), an interpolation that points nowhere or loops,
// the composition errors of compose_hydra_config (the file and defaults entry, or override), a
// value Hydra's override grammar refuses (parse_override_value, io/hydra_override.h), and a sweep
// (refuse_sweep_override, io/hydra_sweep.h: `lr=1e-5,2e-5`, `choice(a,b)`, …). `overridden`, when
// given, receives the key path of each override (for messages that say where a value came from);
// `non_string_keys` each key of the files composed that PyYAML types as other than a string, its
// parent the key path in the composed config; `origins` the file and line of each key of the
// files composed, at its key path in the composed config (the file merged last, for a key several
// set; a key given only on the command line has none). A key inside a mapping or list that a
// whole-value interpolation copies (`chat_template_kwargs: ${kw}`) is listed in both at its
// place of writing and at each place it is copied to (`kw.yes` and
// `trainer.chat_template_kwargs.yes`), so a check of a key path sees what reaches it. `notes`,
// when given, receives the lines for the user (an override of Hydra's own settings, ignored; a
// defaults list without _self_) instead of their being logged as info: the caller prints them
// once, where several ranks load the same file.
Json load_hydra_yaml(const std::filesystem::path& path, const std::vector<std::string>& overrides,
                     const std::vector<KnownKey>& known = {},
                     std::vector<std::string>* overridden = nullptr,
                     std::vector<NonStringKey>* non_string_keys = nullptr,
                     KeyOrigins* origins = nullptr, std::vector<std::string>* notes = nullptr);

// Parses a YAML file into JSON with no interpolation (e.g. accelerate / DeepSpeed configs), by
// load_yaml's rules (io/yaml_load.h: one document, bounded aliases, merge keys resolved).
// Throws zt::Error naming the file and line on syntax errors, a key given twice in a mapping, a
// second document, an alias expansion past the limit, a malformed merge key, a null key
// (`null:`, `~:`; OmegaConf refuses one: "Incompatible key type 'NoneType'"). `non_string_keys`,
// when given, receives each plain key PyYAML types as other than a string (its parent the key
// path in the file; list elements by index); `origins` the line of each mapping key.
Json load_yaml_file(const std::filesystem::path& path,
                    std::vector<NonStringKey>* non_string_keys = nullptr,
                    KeyOrigins* origins = nullptr);

// "a.b.c" -> {"a", "b", "c"}.
std::vector<std::string> split_key_path(std::string_view path);

// The value at dotted `path` in `root` (list elements by index: "a.0.b"), or nullptr.
const Json* find_key_path(const Json& root, std::string_view path);

}  // namespace zt
