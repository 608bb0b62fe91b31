#include "io/model_source.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"
#include "io/safetensors.h"

namespace zt {
namespace fs = std::filesystem;
namespace {

// The weight files in `dir` that zerotune does not read without model.safetensors or
// model.safetensors.index.json beside them: PyTorch pickles (pytorch_model*.bin and their index),
// TensorFlow / Flax / GGUF files, and safetensors files or indexes under other names (a shard whose
// index was not copied). Sorted names; empty when there are none.
std::vector<std::string> other_weight_files(const fs::path& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.ends_with(".safetensors") || f.ends_with(".safetensors.index.json") ||
        (f.starts_with("pytorch_model") &&
         (f.ends_with(".bin") || f.ends_with(".bin.index.json"))) ||
        f == "tf_model.h5" || f == "flax_model.msgpack" || f.ends_with(".gguf"))
      found.push_back(f);
  }
  std::sort(found.begin(), found.end());
  return found;
}

ModelSource describe(const fs::path& dir, bool require_config, const std::string& name,
                     std::string_view what, const fs::path& hub_repo = {}) {
  ModelSource m;
  m.dir = dir;
  if (require_config && !fs::exists(dir / "config.json"))
    fail("{} '{}': {} has no config.json", what, name, dir.string());
  m.has_weights = fs::exists(dir / "model.safetensors") ||
                  fs::exists(dir / "model.safetensors.index.json") ||
                  config_transformers_weights(dir / "config.json").has_value();
  m.has_tokenizer = fs::exists(dir / "tokenizer.json");
  if (m.has_weights) return m;
  // A link whose target is gone (a pruned hub blob, a copy that kept links): named as such.
  std::error_code ec;
  for (const char* f : {"model.safetensors", "model.safetensors.index.json"})
    if (fs::is_symlink(dir / f, ec) && !fs::exists(dir / f, ec)) {
      m.weights_problem = fmt::format(
          "{} is a link to {}, which does not exist (a pruned cache or a copy that kept links?)",
          (dir / f).string(), fs::read_symlink(dir / f, ec).string());
      return m;
    }
  if (const auto others = other_weight_files(dir); !others.empty()) {
    // Shards as transformers names them: model-00001-of-00002.safetensors.
    const bool shards_only = std::all_of(others.begin(), others.end(), [](const std::string& f) {
      return f.starts_with("model-") && f.find("-of-") != std::string::npos &&
             f.ends_with(".safetensors");
    });
    m.weights_problem = fmt::format(
        "{} holds {} but neither model.safetensors nor model.safetensors.index.json; {}. zerotune "
        "does not train a directory holding weights from scratch (a directory with config.json "
        "and no weight file is trained from scratch)",
        dir.string(), fmt::join(others, ", "),
        shards_only
            ? "shards are read through model.safetensors.index.json, which lists them (not copied?)"
            : "zerotune reads model.safetensors or the shards model.safetensors.index.json lists, "
              "as transformers' from_pretrained does: convert the weights (transformers: "
              "`AutoModelForCausalLM.from_pretrained(dir).save_pretrained(dir)` writes "
              "model.safetensors)");
    return m;
  }
  // A hub snapshot gets its files as links into blobs/ once each download completes; a blob still
  // named *.incomplete is a download that did not finish (blobs/ is shared by the repo's
  // revisions).
  if (!hub_repo.empty() && fs::is_directory(hub_repo / "blobs", ec))
    for (const auto& e : fs::directory_iterator(hub_repo / "blobs", ec))
      if (e.path().extension() == ".incomplete") {
        m.weights_problem = fmt::format(
            "the Hugging Face cache entry {} has no weights file in {}, and a download into it did "
            "not finish ({}); download it again (`hf download {}`), or pass a local directory with "
            "config.json alone to train from scratch",
            hub_repo.string(), dir.string(), e.path().string(), name);
        break;
      }
  return m;
}

}  // namespace

fs::path hf_cache_dir(const char* override_env, const char* sub) {
  if (const char* c = std::getenv(override_env); c != nullptr && *c) return c;
  if (const char* h = std::getenv("HF_HOME"); h != nullptr && *h) return fs::path(h) / sub;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x) return fs::path(x) / "huggingface" / sub;
  if (const char* home = std::getenv("HOME"); home != nullptr && *home)
    return fs::path(home) / ".cache" / "huggingface" / sub;
  return fs::path(".cache/huggingface") / sub;
}

fs::path hf_hub_cache_dir() { return hf_cache_dir("HF_HUB_CACHE", "hub"); }

bool looks_like_hub_id(const std::string& s) {
  size_t slash = s.find('/');
  return slash != std::string::npos && slash > 0 && slash + 1 < s.size() &&
         s.find('/', slash + 1) == std::string::npos && s[0] != '.' && s[0] != '~';
}

fs::path find_hub_snapshot(const std::string& repo_type, const std::string& id, const std::string& what) {
  std::string repo = repo_type + "--" + id;
  repo.replace(repo.find('/'), 1, "--");
  fs::path root = hf_hub_cache_dir() / repo;
  const std::string download =
      fmt::format("`hf download {}{}`", id, repo_type == "datasets" ? " --repo-type dataset" : "");
  // refs/main, when present, names the revision: huggingface_hub writes the commit hash there and
  // the files under snapshots/<hash>. A named snapshot that is missing (an interrupted download, a
  // pruned cache) is an error, never a fall-back to another snapshot: that would be another
  // revision of the model or data.
  const fs::path ref_file = root / "refs" / "main";
  std::error_code ec;
  if (fs::exists(ref_file, ec)) {
    std::ifstream ref(ref_file);
    std::string rev;
    if (!ref || !std::getline(ref, rev)) rev.clear();
    while (!rev.empty() && std::isspace(static_cast<unsigned char>(rev.back()))) rev.pop_back();
    if (rev.empty())
      fail(
          "{} '{}': {} is empty or unreadable; expected the commit hash of a snapshot in {}. The "
          "cache entry is damaged: download it again ({}) or pass a snapshot directory",
          what, id, ref_file.string(), (root / "snapshots").string(), download);
    const fs::path named = root / "snapshots" / rev;
    if (!fs::is_directory(named, ec))
      fail(
          "{} '{}': {} names snapshot '{}', but {} does not exist (an interrupted download or a "
          "pruned cache?); zerotune does not load another snapshot in its place. Download it "
          "again ({}) or pass a snapshot directory",
          what, id, ref_file.string(), rev, named.string(), download);
    return named;
  }
  // No refs/main (a cache filled by hand or by a tool that writes no refs): the only snapshot
  // there is taken, as find_hub_snapshot's comment in model_source.h says; several are refused.
  fs::path snap;
  if (fs::is_directory(root / "snapshots")) {
    for (const auto& e : fs::directory_iterator(root / "snapshots")) {
      if (!e.is_directory()) continue;
      if (!snap.empty())
        fail("{} '{}': several snapshots in {} and no refs/main; pass the snapshot directory", what, id,
             (root / "snapshots").string());
      snap = e.path();
    }
  }
  return snap;
}

ModelSource resolve_model_source(const std::string& name_or_path, bool require_config,
                                 std::string_view what) {
  if (name_or_path.empty()) fail("{}: name_or_path is empty", what);
  fs::path p(name_or_path);
  if (fs::is_directory(p)) return describe(p, require_config, name_or_path, what);
  if (fs::exists(p))
    fail("{} '{}': {} is a file; expected a directory", what, name_or_path, p.string());
  if (!looks_like_hub_id(name_or_path))
    fail("{} '{}': no such directory (expected a local HF {} directory or a hub id Org/Name)", what,
         name_or_path, what);
  fs::path snap = find_hub_snapshot("models", name_or_path, std::string(what));
  if (snap.empty())
    fail(
        "{} '{}' is not a local directory and is not in the Hugging Face cache ({}); zerotune does "
        "not download. Fetch it first, e.g. `hf download {}` (or `huggingface-cli download {}`), "
        "or set "
        "HF_HOME / HF_HUB_CACHE to the cache that has it, or pass a local directory",
        what, name_or_path, hf_hub_cache_dir().string(), name_or_path, name_or_path);
  std::string repo = "models--" + name_or_path;
  repo.replace(repo.find('/'), 1, "--");
  return describe(snap, require_config, name_or_path, what, hf_hub_cache_dir() / repo);
}

}  // namespace zt
