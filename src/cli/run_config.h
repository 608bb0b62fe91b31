// RunConfig: the users' hydra-style `sft.yaml`, loaded (io/hydra_yaml.h), checked against zerotune's
// schema and completed with TRL `SFTConfig` defaults (SFT_SEMANTICS §5). Sections:
//   model.*    where the weights/tokenizer come from      dataset.*  train/eval files and formatting
//   compute.*  world size, global batch, backend, ZeRO   trainer.*  `SFTConfig` field names
// A key not in the schema is an error naming the key path and file; a known key zerotune does not
// act on (e.g. `trainer.report_to: wandb`, `use_ms`) gets a one-line warning.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/json.h"

namespace zt::cli {

class RunConfig {
 public:
  // Loads `path` with `overrides` ("trainer.max_length=512"), validates, fills defaults.
  // Throws zt::Error (unknown key, wrong type, YAML syntax, bad interpolation).
  static RunConfig load(const std::filesystem::path& path, const std::vector<std::string>& overrides);
  // Validates an already-parsed tree (tests, embedded configs); `source` names it in errors.
  static RunConfig from_json(Json tree, const std::string& source);

  // Typed access by dotted key path; throws zt::Error naming the key and the file when the value
  // is `???`, missing, or of another type than T (int64_t, double, bool, std::string).
  template <typename T>
  T get(const std::string& key) const;
  // Like get, but null (or absent) → std::nullopt.
  template <typename T>
  std::optional<T> get_optional(const std::string& key) const;
  bool is_missing(const std::string& key) const;  // value is `???`
  void set(const std::string& key, Json value);   // for derived values (e.g. accumulation steps)

  const Json& tree() const { return tree_; }
  const std::string& source() const { return source_; }
  // Warnings collected while validating (known keys zerotune ignores), one line each.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  const Json* find(const std::string& key) const;
  Json tree_;
  std::string source_;
  std::vector<std::string> warnings_;
};

}  // namespace zt::cli
