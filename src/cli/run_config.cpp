#include "cli/run_config.h"

#include <string_view>

#include "io/hydra_yaml.h"

namespace zt::cli {
namespace {

enum class Use { kActs, kIgnored };

struct KeySpec {
  std::string_view path;
  Json default_value;  // null → no default (unset)
  Use use;
};

// The schema: every key zerotune knows, its default, and whether zerotune acts on it.
// trainer.* names and defaults are TRL SFTConfig's (SFT_SEMANTICS §5).
const std::vector<KeySpec>& schema() {
  static const std::vector<KeySpec> k = {
      {"exp_name", "zerotune", Use::kActs},
      {"exp_dir", "runs/zerotune", Use::kActs},
      {"seed", nullptr, Use::kActs},  // top-level seed, if set, is the default of trainer.seed
      {"use_ms", nullptr, Use::kIgnored},
      {"wandb", nullptr, Use::kIgnored},
      {"model.name_or_path", nullptr, Use::kActs},
      {"model.tokenizer_name_or_path", nullptr, Use::kActs},
      {"model.dtype", "bfloat16", Use::kActs},
      {"model.attn_implementation", nullptr, Use::kIgnored},
      {"model.trust_remote_code", nullptr, Use::kIgnored},
      {"model.revision", nullptr, Use::kIgnored},
      {"dataset.train.path", nullptr, Use::kActs},
      {"dataset.train.split", "train", Use::kActs},  // accepted silently: ignored for local files (issue 2)
      {"dataset.eval.path", nullptr, Use::kActs},
      {"dataset.eval.split", "test", Use::kActs},
      {"dataset.prompt_format", "none", Use::kActs},
      {"dataset.completion_mask", "prefix", Use::kActs},  // zerotune: prefix (TRL 1.16)|positional (TRL <= 1.9)
      {"dataset.cache_dir", nullptr, Use::kActs},
      {"dataset.num_proc", nullptr, Use::kIgnored},
      {"compute.n_gpus", nullptr, Use::kActs},
      {"compute.global_batch_size", nullptr, Use::kActs},
      {"compute.backend", "auto", Use::kActs},
      {"compute.zero_stage", nullptr, Use::kActs},
      {"compute.offload_optimizer", nullptr, Use::kActs},
      {"compute.threads", 0, Use::kActs},
      {"trainer.output_dir", nullptr, Use::kActs},
      {"trainer.run_name", nullptr, Use::kIgnored},
      {"trainer.learning_rate", 2e-5, Use::kActs},
      {"trainer.lr_scheduler_type", "linear", Use::kActs},
      {"trainer.warmup_steps", 0, Use::kActs},
      {"trainer.warmup_ratio", 0.0, Use::kActs},
      {"trainer.weight_decay", 0.0, Use::kActs},
      {"trainer.adam_beta1", 0.9, Use::kActs},
      {"trainer.adam_beta2", 0.999, Use::kActs},
      {"trainer.adam_epsilon", 1e-8, Use::kActs},
      {"trainer.max_grad_norm", 1.0, Use::kActs},
      {"trainer.optim", "adamw_torch", Use::kActs},
      {"trainer.num_train_epochs", 3.0, Use::kActs},
      {"trainer.max_steps", -1, Use::kActs},
      {"trainer.per_device_train_batch_size", 8, Use::kActs},
      {"trainer.per_device_eval_batch_size", 8, Use::kActs},
      {"trainer.gradient_accumulation_steps", 1, Use::kActs},
      {"trainer.seed", 42, Use::kActs},
      {"trainer.data_seed", nullptr, Use::kIgnored},
      {"trainer.logging_steps", 10, Use::kActs},
      {"trainer.logging_dir", nullptr, Use::kActs},
      {"trainer.logging_first_step", false, Use::kIgnored},
      {"trainer.logging_strategy", "steps", Use::kIgnored},
      {"trainer.eval_strategy", "no", Use::kActs},
      {"trainer.eval_steps", nullptr, Use::kActs},
      {"trainer.do_eval", nullptr, Use::kIgnored},
      {"trainer.save_strategy", "steps", Use::kActs},
      {"trainer.save_steps", 500, Use::kActs},
      {"trainer.save_total_limit", nullptr, Use::kActs},
      {"trainer.save_only_model", false, Use::kIgnored},
      {"trainer.resume_from_checkpoint", nullptr, Use::kActs},
      {"trainer.max_length", 1024, Use::kActs},
      {"trainer.truncation_mode", "keep_start", Use::kActs},
      {"trainer.chat_template_path", nullptr, Use::kActs},
      {"trainer.chat_template_kwargs", nullptr, Use::kActs},  // a mapping; rows' own column merges over it
      {"trainer.packing", false, Use::kActs},
      {"trainer.packing_strategy", "bfd", Use::kActs},
      {"trainer.padding_free", nullptr, Use::kIgnored},
      {"trainer.gradient_checkpointing", true, Use::kActs},
      {"trainer.bf16", true, Use::kActs},
      {"trainer.fp16", false, Use::kActs},
      {"trainer.tf32", nullptr, Use::kIgnored},
      {"trainer.completion_only_loss", nullptr, Use::kActs},
      {"trainer.assistant_only_loss", false, Use::kActs},
      {"trainer.dataset_text_field", "text", Use::kActs},
      {"trainer.eos_token", nullptr, Use::kActs},
      {"trainer.pad_token", nullptr, Use::kIgnored},
      {"trainer.dataset_num_proc", nullptr, Use::kIgnored},
      {"trainer.dataloader_drop_last", false, Use::kActs},
      {"trainer.dataloader_num_workers", 0, Use::kIgnored},
      {"trainer.report_to", nullptr, Use::kActs},
      {"trainer.push_to_hub", false, Use::kIgnored},
      {"trainer.average_tokens_across_devices", true, Use::kIgnored},
      {"trainer.prefix_mismatch", "warn", Use::kActs},   // zerotune: error|warn
      {"trainer.nan_policy", "error", Use::kActs},       // zerotune: error|skip
  };
  return k;
}

const KeySpec* spec_for(std::string_view path) {
  for (const auto& s : schema())
    if (s.path == path) return &s;
  return nullptr;
}

// True if some schema key lies below `prefix.` (so `prefix` is a section, not a leaf).
bool is_section(std::string_view prefix) {
  for (const auto& s : schema())
    if (s.path.size() > prefix.size() && s.path.substr(0, prefix.size()) == prefix &&
        s.path[prefix.size()] == '.')
      return true;
  return false;
}

void check_tree(const Json& node, const std::string& path, const std::string& source,
                std::vector<std::string>* warnings) {
  if (!path.empty()) {
    if (const KeySpec* s = spec_for(path)) {
      if (s->use == Use::kIgnored && !node.is_null())
        warnings->push_back(fmt::format("{}: '{}' is accepted but not used by zerotune", source, path));
      return;
    }
    if (!is_section(path))
      fail("{}: unknown config key '{}' (not a zerotune/TRL SFTConfig key)", source, path);
    if (!node.is_object() && !node.is_null())
      fail("{}: config key '{}' must be a mapping, got {}", source, path, node.dump());
  }
  if (!node.is_object()) return;
  for (const auto& [k, v] : node.items()) check_tree(v, path.empty() ? k : path + "." + k, source, warnings);
}

Json* ensure(Json& root, std::string_view path) {
  Json* cur = &root;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part(path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (cur->is_null()) *cur = Json::object();
    cur = &(*cur)[part];
    if (dot == std::string_view::npos) return cur;
    start = dot + 1;
  }
}

template <typename T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, int64_t>) return "an integer";
  else if constexpr (std::is_same_v<T, double>) return "a number";
  else if constexpr (std::is_same_v<T, bool>) return "true or false";
  else return "a string";
}

}  // namespace

RunConfig RunConfig::from_json(Json tree, const std::string& source) {
  if (!tree.is_object()) fail("{}: the top level must be a mapping", source);
  RunConfig c;
  c.source_ = source;
  check_tree(tree, "", source, &c.warnings_);
  if (tree.contains("seed") && !tree["seed"].is_null() &&
      !(tree.contains("trainer") && tree["trainer"].is_object() && tree["trainer"].contains("seed")))
    (*ensure(tree, "trainer.seed")) = tree["seed"];
  for (const auto& s : schema()) {
    Json* slot = ensure(tree, s.path);
    if (slot->is_null() && !s.default_value.is_null()) *slot = s.default_value;
  }
  c.tree_ = std::move(tree);
  return c;
}

RunConfig RunConfig::load(const std::filesystem::path& path, const std::vector<std::string>& overrides) {
  auto known = [](const std::string& key) { return spec_for(key) != nullptr; };
  return from_json(load_hydra_yaml(path, overrides, known), path.string());
}

const Json* RunConfig::find(const std::string& key) const {
  const Json* cur = &tree_;
  size_t start = 0;
  while (true) {
    size_t dot = key.find('.', start);
    std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(part);
    if (it == cur->end()) return nullptr;
    cur = &*it;
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

bool RunConfig::is_missing(const std::string& key) const {
  const Json* v = find(key);
  return v != nullptr && v->is_string() && v->get<std::string>() == "???";
}

void RunConfig::set(const std::string& key, Json value) { *ensure(tree_, key) = std::move(value); }

template <typename T>
std::optional<T> RunConfig::get_optional(const std::string& key) const {
  const Json* v = find(key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (is_missing(key)) fail("{}: config key '{}' is ??? (mandatory) and was not set", source_, key);
  if constexpr (std::is_same_v<T, int64_t>) {
    if (v->is_number_integer()) return v->get<int64_t>();
  } else if constexpr (std::is_same_v<T, double>) {
    if (v->is_number()) return v->get<double>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (v->is_boolean()) return v->get<bool>();
  } else {
    if (v->is_string()) return v->get<std::string>();
  }
  fail("{}: config key '{}' must be {}, got {}", source_, key, type_name<T>(), v->dump());
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
