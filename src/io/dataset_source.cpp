#include "io/dataset_source.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/model_source.h"

namespace zt {
namespace fs = std::filesystem;
namespace {

std::vector<std::string> split_keywords(const std::string& split) {
  if (split == "train") return {"train", "training"};
  if (split == "validation") return {"validation", "valid", "dev", "val"};
  if (split == "test") return {"test", "testing", "eval", "evaluation"};
  return {split};
}

bool is_delim(char c) { return c == '-' || c == '.' || c == '_' || c == ' ' || (c >= '0' && c <= '9'); }

// True when `kw` occurs in `name` with a delimiter (or the end) on each side.
bool has_word(const std::string& name, const std::string& kw) {
  for (size_t at = name.find(kw); at != std::string::npos; at = name.find(kw, at + 1)) {
    const bool left = at == 0 || is_delim(name[at - 1]);
    const size_t end = at + kw.size();
    const bool right = end == name.size() || is_delim(name[end]);
    if (left && right) return true;
  }
  return false;
}

bool is_data_file(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".parquet" || ext == ".jsonl" || ext == ".json" || ext == ".csv";
}

bool of_split(const fs::path& rel, const std::vector<std::string>& keywords) {
  for (const auto& kw : keywords) {
    for (auto it = rel.begin(); it != rel.end(); ++it) {
      auto next = it;
      ++next;
      const std::string part = it->string();
      if (next == rel.end()) {
        if (has_word(rel.stem().string(), kw)) return true;
      } else if (part == kw || has_word(part, kw)) {
        return true;
      }
    }
  }
  return false;
}

std::string list(const std::vector<fs::path>& files) {
  std::string s;
  for (size_t i = 0; i < files.size() && i < 5; ++i) s += (i ? ", " : "") + files[i].generic_string();
  if (files.size() > 5) s += fmt::format(", … ({} in all)", files.size());
  return s.empty() ? "none" : s;
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
  std::vector<fs::path> all, match;
  const auto keywords = split_keywords(split);
  for (auto it = fs::recursive_directory_iterator(snap); it != fs::recursive_directory_iterator(); ++it) {
    const fs::path rel = fs::relative(it->path(), snap);
    if (rel.begin()->string().front() == '.') {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file() && !(it->is_symlink() && fs::is_regular_file(it->path()))) continue;
    if (!is_data_file(rel)) continue;
    all.push_back(rel);
    if (of_split(rel, keywords)) match.push_back(rel);
  }
  std::sort(all.begin(), all.end());
  std::sort(match.begin(), match.end());
  if (match.empty() && split == "train" && all.size() == 1) match = all;
  if (match.empty())
    fail("dataset '{}': no data file of split '{}' in {} (data files there: {}){}", id, split,
         snap.string(), list(all), split_note);
  if (match.size() > 1)
    fail("dataset '{}': split '{}' has {} files in {} ({}); zerotune reads one file per split — merge them, or "
         "give one as dataset.<split>.path with dataset.is_local: true",
         id, split, match.size(), snap.string(), list(match));
  // A shard of a sharded split ("train-00000-of-00002.parquet", as the hub names them) alone: the
  // others did not download (or were left out by `--include`), and the split is more than this
  // file.
  const std::string name = match.front().filename().string();
  if (const size_t of = name.find("-of-"); of != std::string::npos && of >= 5 &&
                                           of + 4 < name.size() &&
                                           std::isdigit(static_cast<unsigned char>(name[of + 4]))) {
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
          id, split, match.front().string(), snap.string(), std::stoi(total), id);
  }
  return snap / match.front();
}

}  // namespace zt
