#include "io/dataset_source.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/data_files_pattern.h"
#include "io/dataset_card.h"
#include "io/model_source.h"

namespace zt {
namespace fs = std::filesystem;
namespace {

std::string list(const std::vector<std::string>& files) {
  std::string s;
  for (size_t i = 0; i < files.size() && i < 5; ++i) s += (i ? ", " : "") + files[i];
  if (files.size() > 5) s += fmt::format(", … ({} in all)", files.size());
  return s.empty() ? "none" : s;
}

std::string names(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}'{}'", i ? ", " : "", v[i]);
  return s;
}

// The formats zerotune reads, by the file's last extension.
bool zerotune_reads(const std::string& rel) {
  const std::string ext = fs::path(rel).extension().string();
  return ext == ".parquet" || ext == ".jsonl" || ext == ".json" || ext == ".csv";
}

// A file `datasets` would read as text or table data (datasets/packaged_modules: any suffix of the
// name among these, e.g. data.jsonl.gz); images, audio and video are left out.
bool datasets_reads(const std::string& rel) {
  static const std::vector<std::string> exts = {
      "csv", "tsv", "json", "jsonl", "ndjson", "parquet", "geoparquet", "gpq", "arrow",
      "txt", "tar", "xml",  "hdf5",  "h5",     "eval",    "lance",      "zip"};
  const std::string name = fs::path(rel).filename().string();
  for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
    const size_t next = name.find('.', dot + 1);
    const std::string suffix =
        name.substr(dot + 1, next == std::string::npos ? std::string::npos : next - dot - 1);
    if (std::find(exts.begin(), exts.end(), suffix) != exts.end()) return true;
  }
  return false;
}

// The regular files (and links to one) under `dir`, relative, '/'-separated, sorted.
std::vector<std::string> files_under(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator();
       ++it) {
    if (!fs::is_regular_file(it->path(), ec)) continue;  // follows a link, as `datasets` does
    out.push_back(fs::relative(it->path(), dir).generic_string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The config `datasets.load_dataset(path)` (no name) loads: MetadataConfigs.get_default_config_name
// (the only config, the one named "default" or the one with `default: true` — two are an error),
// else the only config of the card's dataset_info, else none: an error listing them.
const CardConfig& default_config(const DatasetCard& card, const std::string& id,
                                 const fs::path& snap) {
  const CardConfig* chosen = nullptr;
  for (const CardConfig& c : card.configs) {
    if (card.configs.size() == 1 || c.name == "default" || c.is_default) {
      if (chosen != nullptr)
        fail(
            "dataset '{}': {} and {} both make a default config ('{}' and '{}'; datasets: "
            "\"Dataset has several "
            "default configs\"): keep `default: true` on one, and no other config named 'default'",
            id, chosen->at, c.at, chosen->name, c.name);
      chosen = &c;
    }
  }
  std::vector<std::string> all;
  for (const CardConfig& c : card.configs) all.push_back(c.name);
  if (chosen == nullptr && card.info_configs.size() == 1) {
    for (const CardConfig& c : card.configs)
      if (c.name == card.info_configs.front()) chosen = &c;
    if (chosen == nullptr)
      fail("dataset '{}': {}'s dataset_info names config '{}', which `configs` lacks (configs: {})",
           id, (snap / "README.md").string(), card.info_configs.front(), names(all));
  }
  if (chosen == nullptr)
    fail(
        "dataset '{}': {} lists {} configs ({}) and none is the default (datasets: \"Config name "
        "is missing\"); "
        "zerotune reads the default config, as load_dataset('{}', split=...) without a config name "
        "does: mark one "
        "`default: true` in the card, or give its file as dataset.<split>.path with "
        "dataset.is_local: true",
        id, card.configs.front().at.substr(0, card.configs.front().at.rfind(':')), all.size(),
        names(all), id);
  return *chosen;
}

// A file name the hub gives one shard of several ("train-00000-of-00002.parquet") alone: the
// others did not download (or were left out by `--include`), and the split is more than this file.
void check_not_partial_shard(const std::string& id, const std::string& split,
                             const std::string& rel, const fs::path& snap) {
  const std::string name = fs::path(rel).filename().string();
  const size_t of = name.find("-of-");
  if (of == std::string::npos || of < 5 || of + 4 >= name.size() ||
      !std::isdigit(static_cast<unsigned char>(name[of + 4])))
    return;
  size_t end = of + 4;
  while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
  size_t begin = of;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(name[begin - 1]))) --begin;
  const std::string total = name.substr(of + 4, end - of - 4);
  if (begin < of && total.size() <= 9 && std::stoi(total) > 1)
    fail(
        "dataset '{}': split '{}' has only {} in {}, one of {} shards (the name says so); the "
        "others are not in the cache (an interrupted or partial download?). Download the whole "
        "split (`hf download {} --repo-type dataset`), or give a file as dataset.<split>.path "
        "with dataset.is_local: true",
        id, split, rel, snap.string(), std::stoi(total), id);
}

}  // namespace

fs::path hf_datasets_cache_dir() { return hf_cache_dir("HF_DATASETS_CACHE", "datasets"); }

fs::path resolve_hub_dataset_file(const std::string& id, const std::string& split,
                                  std::string_view split_note) {
  if (!looks_like_hub_id(id))
    fail("dataset '{}': not a hub dataset id (expected Org/Name, e.g. trl-lib/ultrafeedback_binarized)", id);
  fs::path snap = find_hub_snapshot("datasets", id, "dataset");
  std::string repo = "datasets--" + id;
  repo.replace(repo.find('/'), 1, "--");
  if (snap.empty()) {
    std::string arrow = id;
    arrow.replace(arrow.find('/'), 1, "___");
    const fs::path arrow_dir = hf_datasets_cache_dir() / arrow;
    fail("dataset '{}' is not in the Hugging Face hub cache (looked in {}){}; zerotune does not download. "
         "Fetch its files with `hf download {} --repo-type dataset`, set HF_HOME / HF_HUB_CACHE to the cache "
         "that has them, or give a local file as dataset.<split>.path with dataset.is_local: true",
         id, (hf_hub_cache_dir() / repo).string(),
         fs::is_directory(arrow_dir)
             ? fmt::format(" (datasets' Arrow cache {} has it, but zerotune reads the hub cache's parquet/json "
                           "files, not Arrow)",
                           arrow_dir.string())
             : std::string(),
         id);
  }
  DatasetCard card;
  try {
    card = read_dataset_card(snap);
  } catch (const Error& e) {
    fail("dataset '{}': {}", id, e.what());
  }
  // The split patterns and the directory they are relative to: the default config's data_files
  // (its data_dir; without data_files the file-name rules there), else the file-name rules on the
  // snapshot (load.py LocalDatasetModuleFactory, create_builder_configs_from_metadata_configs).
  const CardConfig* config = card.configs.empty() ? nullptr : &default_config(card, id, snap);
  std::string base_rel;
  if (config != nullptr && !config->data_dir.empty())
    base_rel = fs::path(config->data_dir).generic_string();
  const fs::path base = base_rel.empty() ? snap : snap / base_rel;
  const std::vector<std::string> files = files_under(base);
  const auto patterns =
      config != nullptr && config->data_files ? *config->data_files : default_split_patterns(files);
  const std::string origin =
      config == nullptr ? "by file name (README.md has no `configs`)"
                        : fmt::format("config '{}' of {}{}", config->name, config->at,
                                      config->data_files ? "" : " (no data_files: by file name)");
  if (config != nullptr && !config->other_keys.empty())
    fail(
        "dataset '{}': {} sets {}, which zerotune does not apply (it reads the files as they are; "
        "these change "
        "which columns or rows `datasets` reads, or how); give the data as dataset.<split>.path "
        "with "
        "dataset.is_local: true",
        id, origin, names(config->other_keys));
  // Every split's patterns are resolved, as `datasets` resolves the config's data files before it
  // picks the split: a missing plain path or a bad pattern of another split is an error too.
  std::vector<std::string> matched;
  bool found = false;
  for (const auto& [name, list_of_patterns] : patterns) {
    std::vector<std::string> of_split;
    for (const std::string& pattern : list_of_patterns) {
      if (pattern.starts_with('/') || pattern.find("://") != std::string::npos)
        fail(
            "dataset '{}': {}: split '{}' names '{}'; zerotune reads only the snapshot's own files "
            "(a path "
            "relative to its root)",
            id, origin, name, pattern);
      std::vector<std::string> m;
      try {
        m = resolve_data_pattern(pattern, files);
      } catch (const Error& e) {
        fail("dataset '{}': {}: split '{}': {}", id, origin, name, e.what());
      }
      // `datasets` skips a pattern that matches nothing, but not a plain path (FileNotFoundError).
      if (m.empty() && !has_glob_magic(pattern))
        fail(
            "dataset '{}': {}: split '{}' names '{}', which is not in {} (datasets: \"Unable to "
            "find\")",
            id, origin, name, pattern, base.string());
      of_split.insert(of_split.end(), m.begin(), m.end());
    }
    if (name == split) {
      matched = std::move(of_split);
      found = true;
    }
  }
  if (!found) {
    std::vector<std::string> splits;
    for (const auto& p : patterns) splits.push_back(p.first);
    std::vector<std::string> shown;
    for (const auto& f : files)
      if (zerotune_reads(f) || datasets_reads(f))
        shown.push_back(base_rel.empty() ? f : base_rel + "/" + f);
    fail("dataset '{}': no split '{}' in {}, {} (its splits: {}; files there: {}){}", id, split,
         snap.string(), origin, splits.empty() ? "none" : names(splits), list(shown), split_note);
  }
  for (auto& f : matched) f = base_rel.empty() ? f : base_rel + "/" + f;
  std::vector<std::string> data, unread;
  for (const auto& f : matched) {
    if (zerotune_reads(f))
      data.push_back(f);
    else if (datasets_reads(f))
      unread.push_back(f);
  }
  if (data.empty() && !unread.empty())
    fail(
        "dataset '{}': split '{}' ({}) is {}, which zerotune does not read (it reads .parquet, "
        ".jsonl, .json and "
        ".csv files); convert it, and give the file as dataset.<split>.path with dataset.is_local: "
        "true",
        id, split, origin, list(unread));
  if (data.empty())
    fail("dataset '{}': no data file of split '{}' in {} ({}){}", id, split, snap.string(), origin,
         split_note);
  if (data.size() > 1)
    fail(
        "dataset '{}': split '{}' has {} files in {} ({}; {}); zerotune reads one file per split — "
        "merge them, or "
        "give one as dataset.<split>.path with dataset.is_local: true",
        id, split, data.size(), snap.string(), origin, list(data));
  check_not_partial_shard(id, split, data.front(), snap);
  return snap / data.front();
}

}  // namespace zt
