// Hydra's config-group composition (Hydra 1.3, version_base 1.3) of a primary config: its
// `defaults:` list names configs in config groups (directories beside the primary file), whose
// contents are merged into one config as OmegaConf.merge merges them. What is composed:
//   - `group: option` loads <config dir>/<group>/<option>.yaml at the group's package (the group
//     path with '/' → '.': `server/db: mysql` goes under server.db); `group@pkg: option`,
//     `@_here_` (the containing config's package), `@_global_` (the top), `# @package` headers;
//   - `optional group: option` (a missing file is no error), `group: null` (nothing), `group: ???`
//     (must be chosen on the command line), `group: [a, b]` (several options of one group);
//   - `group: ${a}_${b}`: an option named by the options chosen for other groups (resolved once
//     the rest of the list is expanded, as Hydra defers it);
//   - plain config entries (`- base`, `- db/mysql`), `_self_` (where the file's own keys go: when
//     it is absent it is implicitly last, in the primary and in every group file alike);
//   - defaults lists inside group files (recursive, relative to the file's group; `/group` is
//     absolute), `override group: option` entries anywhere (an override higher up, or on the
//     command line, wins over one further down);
//   - command-line group overrides: `group=option`, `+group=option` (append to the primary's
//     list), `~group` / `~group=option` (remove).
// Entries configuring Hydra itself (`hydra/…`) are accepted and do nothing. Refused, naming the
// file and the entry: interpolations in config paths and options lists, other interpolations
// than ${group} in an option, Hydra 1.0's `_group_` / `_name_` keywords, and a primary whose list
// holds only override entries when `+group=` adds a group (Hydra 1.3 would then drop the primary's
// own keys without a word).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "io/json.h"

namespace zt {

struct NonStringKey;  // io/hydra_yaml.h
struct KeyOrigins;    // io/hydra_yaml.h

// The most configs one chain of defaults lists may nest (the primary, a group file its list names,
// a file that one's list names, …). Hydra 1.3.2 stops near 470 with Python's RecursionError; a
// chain of 20,000 overflowed zerotune's stack.
inline constexpr int kMaxDefaultsDepth = 1000;

// One command-line override that names a config group (Hydra's test: <config dir>/<group> is a
// directory).
struct GroupOverride {
  enum class Op { kChoose, kAppend, kDelete };
  std::string text;  // as given, for messages ("db=mysql")
  Op op = Op::kChoose;
  std::string key;  // the group, with "@package" when given ("db", "server/db", "db@backup")
  Json value;       // the option (string), options (array of strings), or null (`~db`)
};

// OmegaConf.merge of mapping `src` into mapping `dst`: mappings merge key by key, anything else
// replaces (lists too), a `???` in `src` leaves a value `dst` has alone. `at` is the key path of
// `dst` and `from` names where `src` came from, for the error: a list meeting a mapping
// (OmegaConf's ConfigTypeError).
void merge_config(Json& dst, const Json& src, const std::string& at, const std::string& from);

// Whether `key_or_group` (an override's key before any '@') names a config group of the primary
// config in `config_dir`: a directory of that relative path exists, as Hydra decides.
bool is_config_group(const std::filesystem::path& config_dir, const std::string& key_or_group);

// The config groups (subdirectories) of `dir`, sorted; for messages.
std::vector<std::string> config_groups_in(const std::filesystem::path& dir);

// Composes the primary config at `primary` with its defaults lists and the command-line
// `overrides` of config groups; returns the merged tree with every `defaults` list and the
// top-level `hydra` section removed, interpolations not yet resolved. A primary without a
// defaults list and no overrides is its own contents. Throws zt::Error naming the file and the
// entry (or the override): a group or option that is not there (listing the options or groups
// that are), a group chosen twice, an override or deletion that matches no entry, `_self_` twice,
// a list merged with a mapping, a chain of defaults lists nesting more than kMaxDefaultsDepth
// configs (naming the entry, the file and its depth), and the refused forms above.
// `non_string_keys`, when given, receives the other keys of the configs composed that PyYAML
// types as other than a string (load_yaml_file), each parent the key path in the composed config;
// `origins`, when given, the file and line of each key at its key path in the composed config (of
// the config merged last where several set it); `notes`, when given, the lines for the user that
// composing makes (a defaults list without _self_), which are logged as info when it is null.
Json compose_hydra_config(const std::filesystem::path& primary,
                          const std::vector<GroupOverride>& overrides,
                          std::vector<NonStringKey>* non_string_keys = nullptr,
                          KeyOrigins* origins = nullptr, std::vector<std::string>* notes = nullptr);

// Appends `line` to `notes`, or logs it as info when `notes` is null.
void note(std::vector<std::string>* notes, std::string line);

}  // namespace zt
