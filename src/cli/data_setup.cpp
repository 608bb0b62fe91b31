#include "cli/data_setup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "cli/run_dir_guard.h"
#include "core/error.h"
#include "core/file_util.h"
#include "io/data_files_pattern.h"
#include "io/dataset_source.h"
#include "io/model_source.h"
#include "text/special_tokens.h"

namespace zt::cli {
namespace {

// A split written in `datasets`' slicing / concatenation syntax ("train[:50%]", "train[10:20]",
// "train+test": datasets.arrow_reader.ReadInstruction): what to say about it, or "" for a plain
// name.
std::string split_slicing(const std::string& split) {
  if (split.find_first_of("[]+") == std::string::npos) return {};
  return "is HF datasets' split slicing / concatenation syntax (ReadInstruction: 'train[:50%]', "
         "'train[10:20]', 'train+test'), which zerotune does not support: it reads whole splits "
         "(cut "
         "the file to the rows you want instead)";
}

// dataset.<split>.path as `load_dataset(<format>, data_files=PATH)` finds it: the file, or — when
// no file has that name and it holds a glob character — the one file the pattern matches
// (datasets' data_files rules, io/data_files_pattern.h; relative to the current directory).
std::filesystem::path local_data_file(const RunConfig& cfg, const std::string& key,
                                      const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!has_glob_magic(path) || fs::exists(path, ec)) return path;
  // The directory the pattern's first magic component sits in: the files below it are matched.
  const std::string head = path.substr(0, path.find_first_of("*?["));
  const size_t slash = head.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const fs::path root = dir.empty() ? fs::path(".") : fs::path(dir);
  std::vector<std::string> files;
  // Only as deep as the pattern reaches (every level under a `**`), past folders it cannot read.
  const std::string rel = path.substr(dir.size());
  const bool any_depth = rel.find("**") != std::string::npos;
  const auto levels = static_cast<int>(std::count(rel.begin(), rel.end(), '/'));
  if (fs::is_directory(root, ec)) {
    for (auto it = fs::recursive_directory_iterator(
             root, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!any_depth && it.depth() >= levels) it.disable_recursion_pending();
      std::error_code fec;
      if (fs::is_regular_file(it->path(), fec))
        files.push_back(fs::relative(it->path(), root, fec).generic_string());
    }
  }
  std::sort(files.begin(), files.end());
  const std::vector<std::string> matched = resolve_data_pattern(path.substr(dir.size()), files);
  if (matched.size() == 1) return dir + matched.front();
  std::string shown;
  for (size_t i = 0; i < matched.size() && i < 5; ++i) shown += (i ? ", " : "") + dir + matched[i];
  if (matched.size() > 5) shown += fmt::format(", … ({} in all)", matched.size());
  if (matched.empty())
    fail(
        "{}: {}: the pattern '{}' matches no file (globs are read as HF datasets' data_files reads "
        "them, "
        "relative to the current directory, {}){}",
        cfg.key_at(key), key, path, fs::current_path(ec).string(), cfg.where(key));
  fail(
      "{}: {}: the pattern '{}' matches {} files ({}); zerotune reads one file per split — merge "
      "them into one "
      "file, or name one{}",
      cfg.key_at(key), key, path, matched.size(), shown, cfg.where(key));
}

// dataset.<split>.path, or the cached hub file of dataset.<split>.name (see data_setup.h);
// `used_key` (optional) gets the key that named it.
std::filesystem::path dataset_file(const RunConfig& cfg, const std::string& split,
                                   std::string* used_key = nullptr) {
  const std::string key = "dataset." + split;
  const auto is_local = cfg.get_optional<bool>("dataset.is_local");
  const auto path = cfg.get_optional<std::string>(key + ".path");
  const auto name = cfg.get_optional<std::string>(key + ".name");
  auto hf_split = cfg.get_optional<std::string>(key + ".split");
  const bool local = is_local ? *is_local : path.has_value() || !name.has_value();
  if (used_key != nullptr) *used_key = key + (local ? ".path" : ".name");
  if (local) {
    if (!path)
      fail("{}: {}.path is not set{}", cfg.source(), key,
           is_local ? " (dataset.is_local is true)" : name ? "" : " (nor " + key + ".name, a hub dataset id)");
    if (hf_split && *hf_split != "train") {
      if (const std::string slicing = split_slicing(*hf_split); !slicing.empty())
        fail("{}: {}.split: '{}' {}; a local file's split is 'train' (set split: train){}",
             cfg.key_at(key + ".split"), key, *hf_split, slicing, cfg.where(key + ".split"));
      fail(
          "{}: {}.split: '{}' is not valid for the local file {}: a data file given by path is one "
          "split named 'train' (as HF datasets' load_dataset(<format>, data_files=path) makes "
          "it); set split: train{}",
          cfg.key_at(key + ".split"), key, *hf_split, *path, cfg.where(key + ".split"));
    }
    return local_data_file(cfg, key + ".path", *path);
  }
  if (!name)
    fail("{}: {}.name (a hub dataset id) is not set and dataset.is_local{} is false",
         cfg.key_at("dataset.is_local"), key, cfg.where("dataset.is_local"));
  if (hf_split) {
    if (const std::string slicing = split_slicing(*hf_split); !slicing.empty())
      fail("{}: {}.split: '{}' {}; give the split's name alone{}", cfg.key_at(key + ".split"), key,
           *hf_split, slicing, cfg.where(key + ".split"));
    return resolve_hub_dataset_file(*name, *hf_split, cfg.where(key + ".split"));
  }
  // A split the config does not name: say where its name came from.
  hf_split = split == "train" ? "train" : "test";
  return resolve_hub_dataset_file(*name, *hf_split,
                                  fmt::format("; {0}.split is not set, so the {1} set reads split "
                                              "'{2}': set {0}.split to the split to read",
                                              key, split, *hf_split));
}

}  // namespace

void check_dataset_present(const RunConfig& cfg, const std::string& split) {
  const std::filesystem::path file = dataset_file(cfg, split);
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    const std::string key = "dataset." + split + ".path";
    fail("{}: {}: {} does not exist (a relative path is from the current directory, {}){}",
         cfg.key_at(key), key, file.string(), std::filesystem::current_path(ec).string(),
         cfg.where(key));
  }
  if (std::filesystem::is_directory(file, ec)) {
    const std::string key = "dataset." + split + ".path";
    fail(
        "{}: {}: {} is a directory; expected a .parquet, .jsonl or .json file (zerotune reads one "
        "file per split: merge the directory's shards into one file, or name one of them){}",
        cfg.key_at(key), key, file.string(), cfg.where(key));
  }
  // A device or a pipe: read without end, or not at all.
  if (const std::string_view kind = file_kind(file); !kind.empty() && kind != "a regular file") {
    const std::string key = "dataset." + split + ".path";
    fail("{}: {}: {} is {}, no regular file; expected a .parquet, .jsonl or .json file{}",
         cfg.key_at(key), key, file.string(), kind, cfg.where(key));
  }
}

bool has_eval_set(const RunConfig& cfg) {
  return cfg.get_optional<std::string>("dataset.eval.path") || cfg.get_optional<std::string>("dataset.eval.name");
}

TokenizerBundle load_tokenizer(const RunConfig& cfg) {
  auto name = cfg.get_optional<std::string>("model.tokenizer_name_or_path");
  // The key the user wrote: model_name (the users' layout) sets model.name_or_path.
  std::string key = name                                          ? "model.tokenizer_name_or_path"
                    : cfg.get_optional<std::string>("model_name") ? "model_name"
                                                                  : "model.name_or_path";
  if (!name) name = cfg.get<std::string>("model.name_or_path");
  // Only whitespace (`model.tokenizer_name_or_path=' '`) is no path or hub id either: it was
  // looked up as a hub id, and the message named the model, not the key.
  if (name->empty() || name->find_first_not_of(" \t\n\r\f\v") == std::string::npos)
    fail(
        "{}: {} is {}; expected a local directory or a hub id Org/Name that has "
        "tokenizer.json{}",
        cfg.key_at(key), key, name->empty() ? "empty" : "'" + *name + "' (only whitespace)",
        cfg.where(key));
  ModelSource src;
  try {
    src = resolve_model_source(*name, /*require_config=*/false, "tokenizer");
  } catch (const Error& e) {
    fail("{}: {}: {}{}", cfg.key_at(key), key, e.what(), cfg.where(key));
  }
  if (!src.has_tokenizer)
    fail(
        "{}: {} = '{}' resolves to {}, which has no tokenizer.json (set "
        "model.tokenizer_name_or_path to a "
        "directory or hub id that has one, e.g. model.tokenizer_name_or_path=<dir> on the command "
        "line)",
        cfg.key_at(key), key, *name, src.dir.string());
  TokenizerBundle b{src.dir, text::Tokenizer::load(src.dir / "tokenizer.json"),
                    text::load_tokenizer_config(src.dir)};
  text::register_config_special_tokens(b.tokenizer, b.config);  // as transformers' loading does
  text::apply_config_post_processor(b.tokenizer, b.config);     // … and its Llama-family classes
  return b;
}

void check_dataset_kwargs(const RunConfig& cfg,
                          const std::function<void(const std::string&)>& warn) {
  const std::string key = "trainer.dataset_kwargs";
  const Json& v = cfg.value(key);
  if (v.is_null()) return;
  if (!v.is_object())
    fail(
        "{}: {}{} is {}; expected a mapping (TRL calls "
        "dataset_kwargs.get(\"skip_prepare_dataset\") "
        "and fails on anything else), or null",
        cfg.key_at(key), key, cfg.where(key), v.dump());
  std::vector<std::string> ignored;
  for (const auto& [k, x] : v.items()) {
    if (k != "skip_prepare_dataset") {
      ignored.push_back(k);
      continue;
    }
    // Python's truth: null, false, 0, "" and empty containers are false.
    const bool truthy = !(x.is_null() || x == false || x == 0 ||
                          ((x.is_string() || x.is_object() || x.is_array()) && x.empty()));
    if (truthy)
      fail(
          "{}: {}.skip_prepare_dataset: {} is not supported by zerotune: it always formats and "
          "tokenises the dataset itself (TRL would expect input_ids already in the rows){}",
          cfg.key_at(key), key, x.dump(), cfg.where(key));
  }
  if (!ignored.empty())
    warn(fmt::format(
        "{}: {}{}: {} change{} nothing: TRL 0.25.1 reads only skip_prepare_dataset from "
        "dataset_kwargs (the others are older TRL's keys), and zerotune does the same",
        cfg.key_at(key), key, cfg.where(key), fmt::join(ignored, ", "),
        ignored.size() == 1 ? "s" : ""));
}

data::DataOptions data_options(const RunConfig& cfg, const std::string& split) {
  data::DataOptions o;
  o.names.source = cfg.source();
  o.names.split = split;
  o.dataset = dataset_file(cfg, split, &o.names.dataset_key);
  for (const char* key :
       {"dataset.prompt_format", "trainer.assistant_only_loss", "trainer.completion_only_loss",
        "trainer.eos_token", "trainer.packing", "trainer.packing_strategy", "trainer.max_length",
        "trainer.dataset_text_field"}) {
    const std::string k = key;
    const std::string option = k.substr(k.find('.') + 1);
    o.names.options[option] = {k, cfg.where(k)};
    if (const std::string at = cfg.key_at(k); at != cfg.source()) o.names.at[option] = at;
  }
  o.dataset_text_field = cfg.get<std::string>("trainer.dataset_text_field");
  o.max_length = cfg.get_optional<int64_t>("trainer.max_length");  // null: no truncation
  o.packing = cfg.get<bool>("trainer.packing");
  // TRL packs the eval set by eval_packing (null: packing). zerotune evaluates example by example
  // either way (TRL too, where its collator is padding-free: cmd_train.cpp warns where not), but
  // transformers rates eval_samples_per_second / eval_steps_per_second by the eval set's length:
  // its packed bins when it is packed (PrepareReport::trl_num_samples, bins of dropped rows alone
  // included).
  if (const auto ep = cfg.get_optional<bool>("trainer.eval_packing"); ep && split == "eval") {
    o.packing = *ep;
    o.names.options["packing"] = {"trainer.eval_packing", cfg.where("trainer.eval_packing")};
    o.names.at.erase("packing");
    if (const std::string at = cfg.key_at("trainer.eval_packing"); at != cfg.source())
      o.names.at["packing"] = at;
  }
  o.packing_strategy = cfg.get<std::string>("trainer.packing_strategy");
  // The map that packs runs on dataset_num_proc shards (null/0: one), which changes the bins.
  o.dataset_num_proc =
      std::max<int64_t>(1, cfg.get_optional<int64_t>("trainer.dataset_num_proc").value_or(1));
  o.completion_only_loss = cfg.get_optional<bool>("trainer.completion_only_loss");
  o.assistant_only_loss = cfg.get<bool>("trainer.assistant_only_loss");
  o.eos_token = cfg.get_optional<std::string>("trainer.eos_token");
  o.prompt_format = data::parse_prompt_format(cfg.get<std::string>("dataset.prompt_format"), "dataset.prompt_format");
  o.prefix_mismatch = data::parse_prefix_mismatch(cfg.get<std::string>("trainer.prefix_mismatch"), "trainer.prefix_mismatch");
  o.completion_mask = data::parse_completion_mask(cfg.get<std::string>("dataset.completion_mask"), "dataset.completion_mask");
  o.assistant_mask = data::parse_assistant_mask(cfg.get<std::string>("dataset.assistant_mask"),
                                                "dataset.assistant_mask");
  o.truncation_mode = data::parse_truncation_mode(cfg.get<std::string>("trainer.truncation_mode"), "trainer.truncation_mode");
  const Json& trainer = cfg.tree().at("trainer");
  if (const auto kw = trainer.find("chat_template_kwargs"); kw != trainer.end() && !kw->is_null()) {
    if (!kw->is_object())
      fail(
          "{}: trainer.chat_template_kwargs must be a mapping of template variables (e.g. "
          "{{enable_thinking: false}}), got {}{}",
          cfg.key_at("trainer.chat_template_kwargs"), kw->dump(),
          cfg.where("trainer.chat_template_kwargs"));
    o.chat_template_kwargs = *kw;
  }
  if (auto p = cfg.get_optional<std::string>("trainer.chat_template_path")) o.chat_template_path = *p;
  if (auto dir = cfg.get_optional<std::string>("dataset.cache_dir")) {
    check_dir_creatable(cfg.key_at("dataset.cache_dir"), "dataset.cache_dir", *dir,
                        cfg.where("dataset.cache_dir"));
    o.cache_dir = *dir;
  }
  o.num_threads = static_cast<int>(cfg.get<int64_t>("compute.threads"));
  return o;
}

}  // namespace zt::cli
