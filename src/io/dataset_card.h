// The `configs` of a dataset repository's card, as HF `datasets` reads them
// (datasets/utils/metadata.py `MetadataConfigs`, load.py `LocalDatasetModuleFactory`): the YAML
// front matter of README.md (huggingface_hub's repocard: a block between a first line `---` and
// the next `---` line, a mapping), with the top-level keys of `.huggingface.yaml` laid over it
// when that file exists. Each config has a `config_name`, optional `data_files` (a pattern, a list
// of patterns — both split "train" —, or a list of {split, path} with path a pattern or a list of
// them), an optional `data_dir` the patterns are relative to, and `default: true`.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zt {

// One config of the card; `data_files` as `datasets.data_files.sanitize_patterns` gives them:
// split -> patterns, in the card's order.
struct CardConfig {
  std::string name;
  std::optional<std::vector<std::pair<std::string, std::vector<std::string>>>> data_files;
  std::string data_dir;  // "" for none; relative, '/'-separated
  bool is_default = false;
  std::string at;                       // "FILE:LINE" of the config's entry
  std::vector<std::string> other_keys;  // keys besides those, version and description
};

struct DatasetCard {
  std::vector<CardConfig> configs;  // empty: the card has no `configs`
  // Config names of the card's `dataset_info` (a mapping: its config_name, else "default"; a list:
  // each entry's): `datasets` takes the only one as the default config when `configs` names none.
  std::vector<std::string> info_configs;
};

// Reads README.md (and .huggingface.yaml) of the dataset directory `dir`; no README.md and no
// .huggingface.yaml: an empty card, as is a README without front matter. Throws zt::Error naming
// the file, its line and the key for: YAML syntax errors, a key given twice, front matter that is
// no mapping, `configs` that is no list, an entry that is no mapping or lacks `config_name`, a
// config name given twice, `data_files` of another shape than those above (`datasets`' "Expected
// data_files in YAML to be either a string or a list of strings or a list of dicts with two keys:
// 'split' and 'path'"), a split name that is not ^\w+(\.\w+)*$ or given twice, and a `data_dir`
// that is no relative path inside the repository.
DatasetCard read_dataset_card(const std::filesystem::path& dir);

}  // namespace zt
