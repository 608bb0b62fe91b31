// RunConfig: the users' hydra-style `sft.yaml`, loaded (io/hydra_yaml.h), checked against zerotune's
// schema (cli/config_schema.h) and completed with TRL `SFTConfig` defaults (SFT_SEMANTICS §5).
// Sections:
//   model.*    where the weights/tokenizer come from      dataset.*  train/eval files and formatting
//   compute.*  world size, global batch, backend, ZeRO   trainer.*  `SFTConfig` field names
// The users' own layout (their sft.py) is also read: top-level `model_name` (model and tokenizer),
// `use_ms`, `dataset.is_local` and `dataset.{train,eval}.name` (a hub dataset id); a config with
// `model_name` gets `dataset.prompt_format: chat` unless it sets one (their sft.py's formatting).
//
// Everything is checked here, before any data or output is touched: an unknown key (with a
// "did you mean"), a value of the wrong type or outside its range, an enum value zerotune lacks, a
// refused TRL field set to something other than its default — each an error naming the file, the
// key, the value and what is allowed. Old TRL/transformers names are read as the new ones.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/hydra_yaml.h"
#include "io/json.h"

namespace zt::cli {

class RunConfig {
 public:
  // Loads `path` with `overrides` ("trainer.max_length=512"), validates, fills defaults.
  // Throws zt::Error (unknown or repeated key, wrong type or range, YAML syntax, bad
  // interpolation).
  static RunConfig load(const std::filesystem::path& path, const std::vector<std::string>& overrides);
  // Validates an already-parsed tree (tests, embedded configs); `source` names it in errors;
  // `overridden` are the key paths given on the command line (named as such in errors);
  // `origins`, when given, where each key was written (load_hydra_yaml): an error or note about a
  // key (unknown, a section that is no mapping, a value of the wrong type, out of range or not
  // supported) names the key's own file and line (a config group's file, not `source`; see key_at).
  static RunConfig from_json(Json tree, const std::string& source,
                             const std::vector<std::string>& overridden = {},
                             const KeyOrigins* origins = nullptr);

  // Typed access by dotted key path; throws zt::Error naming the key and the file when the value
  // is `???`, missing, or of another type than T (int64_t, double, bool, std::string).
  template <typename T>
  T get(const std::string& key) const;
  // Like get, but null (or absent) → std::nullopt.
  template <typename T>
  std::optional<T> get_optional(const std::string& key) const;
  // The value at `key` as it is (null when absent).
  const Json& value(const std::string& key) const;
  bool is_missing(const std::string& key) const;  // value is `???`
  void set(const std::string& key, Json value);   // for derived values (e.g. accumulation steps)

  const Json& tree() const { return tree_; }
  const std::string& source() const { return source_; }
  // One line each: known keys that change nothing in zerotune (set off their default), old names
  // read as new ones, the users'-layout formatting choice. Printed at start-up.
  const std::vector<std::string>& notes() const { return notes_; }
  // "FILE:LINE" of the file that holds `key` (a config group's file, or the primary; an old name
  // read as a new one: the old one's line), for a message about its value; `source()` when the key
  // was given on the command line (pair it with where(): " (given on the command line)"), was
  // derived or defaulted, or the config came from no file (from_json without origins).
  std::string key_at(const std::string& key) const;
  // Where the value of `key` came from when not from the config file: " (given on the command
  // line)" when overridden, " (not set in FILE: …)" saying what implied it and how to change it
  // (dataset.prompt_format: chat under model_name), else "".
  std::string where(const std::string& key) const;
  // `key` as a message about several keys names each after the first (which begins the message
  // with key_at, its where() right after its name): "KEY (FILE:LINE)" where a file holds it, "KEY
  // (given on the command line)" for an override, else KEY with where()'s suffix (a default, a
  // derived value, a config from no file).
  std::string key_ref(const std::string& key) const;

 private:
  const Json* find(const std::string& key) const;
  Json tree_;
  std::string source_;
  std::vector<std::string> notes_;
  std::set<std::string> overridden_;  // key paths given on the command line
  std::map<std::string, std::string> implied_;  // key path -> what set it (see where)
  std::map<std::string, KeyOrigin> origins_;    // key path -> where it was written (see key_at)
};

}  // namespace zt::cli
