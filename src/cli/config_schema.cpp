// The zerotune sections of the schema (top level, model, dataset, compute), the rule builders and
// the value check. The trainer.* table is trainer_keys.cpp.
#include "cli/config_schema.h"

#include <fmt/format.h>

#include <cmath>

#include "cli/train_options.h"
#include "core/spelling.h"
#include "train/device.h"

namespace zt::cli {
namespace {

constexpr double kSeedMax = 4294967295.0;  // numpy's seed range, which transformers' set_seed uses

std::vector<KeySpec> section_keys() {
  return {
      acts("exp_name", "zerotune", text()),
      acts("exp_dir", "runs/zerotune", text()),
      acts("seed", nullptr, integer(0, kSeedMax, true)),  // if set, the default of trainer.seed
      // The users' layout (their sft.py): model_name is the model and its tokenizer.
      acts("model_name", nullptr, text(true)),
      noted("use_ms", nullptr,
            "it switches the users' hub mirror (ModelScope); zerotune reads local directories and the "
            "local HF cache only"),
      noted("wandb", nullptr, "zerotune logs to metrics.jsonl and TensorBoard"),

      acts("model.name_or_path", nullptr, text(true)),
      acts("model.tokenizer_name_or_path", nullptr, text(true)),
      noted("model.dtype", "bfloat16", "zerotune keeps fp32 master weights; the compute precision is trainer.bf16",
            one_of({"bfloat16", "float32", "float16", "auto"})),
      noted("model.attn_implementation", nullptr, "zerotune's attention is its own exact (dense causal, varlen) kernel"),
      noted("model.trust_remote_code", nullptr, "zerotune implements Qwen2/Llama itself; no remote code runs"),
      refused("model.revision", nullptr,
              "zerotune reads the HF cache's refs/main snapshot; pass the snapshot directory instead"),

      acts("dataset.is_local", nullptr, boolean(true)),
      acts("dataset.train.path", nullptr, text(true)),
      acts("dataset.train.name", nullptr, text(true)),
      acts("dataset.train.split", "train", text()),
      acts("dataset.eval.path", nullptr, text(true)),
      acts("dataset.eval.name", nullptr, text(true)),
      acts("dataset.eval.split", nullptr, text(true)),  // "train" for a file, "test" for a hub id
      acts("dataset.prompt_format", nullptr, one_of({"none", "chat"}, {}, true)),
      acts("dataset.completion_mask", "prefix", one_of({"prefix", "positional"})),
      acts("dataset.assistant_mask", "overlap", one_of({"overlap", "char_to_token"})),
      acts("dataset.cache_dir", nullptr, text(true)),
      noted("dataset.num_proc", nullptr, "zerotune tokenises with compute.threads threads"),

      acts("compute.n_gpus", nullptr, integer(1, 1 << 20, true)),
      acts("compute.global_batch_size", nullptr, integer(1, 1e15, true)),
      // auto: cuda when a GPU is visible (and trainer.use_cpu / accelerate's use_cpu is not set).
      acts("compute.backend", "auto", enum_rule<train::BackendChoice>()),
      // null: the accelerate / DeepSpeed config's stage, without one kDefaultZeroStage (0).
      acts("compute.zero_stage", nullptr, integer(0, 3, true)),
      acts("compute.offload_optimizer", nullptr, boolean(true)),
      acts("compute.threads", 0, integer(0, 4096)),
      option("compute.balance_micro_batches", &train::TrainArgs::balance_micro_batches, true, boolean()),
      // With trainer.gradient_checkpointing: keep each layer's attention output and softmax
      // statistics, recompute only the rest (selective activation checkpointing; bitwise the same).
      option("compute.selective_checkpointing", &train::TrainArgs::selective_checkpointing, false, boolean()),
      // The fused LM-head cross-entropy's chunk budget (kCeBudgetBytes by default).
      option("compute.cross_entropy_workspace_mib", &train::TrainArgs::cross_entropy_workspace_mib,
             static_cast<int64_t>(kCeBudgetBytes >> 20), integer(16, 1 << 20)),
  };
}

std::vector<KeySpec> build_schema() {
  std::vector<KeySpec> all = section_keys();
  for (auto& k : trainer_keys()) all.push_back(std::move(k));
  return all;
}

std::string fmt_bound(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::floor(v) && std::abs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  std::string s = fmt::format("{}", v);
  return s;
}

std::string range_text(const ValueRule& r, const char* what) {
  const bool has_lo = !std::isinf(r.lo), has_hi = !std::isinf(r.hi);
  if (has_lo && has_hi)
    return fmt::format("{} in {}{}, {}{}", what, r.lo_open ? "(" : "[", fmt_bound(r.lo), fmt_bound(r.hi),
                       r.hi_open ? ")" : "]");
  if (has_lo) return fmt::format("{} {} {}", what, r.lo_open ? ">" : ">=", fmt_bound(r.lo));
  if (has_hi) return fmt::format("{} {} {}", what, r.hi_open ? "<" : "<=", fmt_bound(r.hi));
  return what;
}

bool in_range(const ValueRule& r, double v) {
  if (r.lo_open ? !(v > r.lo) : !(v >= r.lo)) return false;
  if (r.hi_open ? !(v < r.hi) : !(v <= r.hi)) return false;
  return true;
}

std::string join(const std::vector<std::string_view>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::string(v[i]);
  return s;
}

}  // namespace

const std::vector<KeySpec>& config_schema() {
  static const std::vector<KeySpec> k = build_schema();
  return k;
}

const std::vector<KeyAlias>& key_aliases() {
  static const std::vector<KeyAlias> a = {
      {"trainer.evaluation_strategy", "trainer.eval_strategy", "transformers 4.46"},
      {"trainer.max_seq_length", "trainer.max_length", "TRL 0.20"},
      {"trainer.per_gpu_train_batch_size", "trainer.per_device_train_batch_size", "transformers 4 (deprecated)"},
      {"trainer.per_gpu_eval_batch_size", "trainer.per_device_eval_batch_size", "transformers 4 (deprecated)"},
      {"trainer.no_cuda", "trainer.use_cpu", "transformers 4.34"},
      {"trainer.activation_checkpointing", "trainer.gradient_checkpointing", "transformers 5 (new name)"},
      {"trainer.activation_checkpointing_kwargs", "trainer.gradient_checkpointing_kwargs",
       "transformers 5 (new name)"},
      {"trainer.include_inputs_for_metrics", "trainer.include_for_metrics", "transformers 4.46"},
      {"trainer.fp16_backend", "trainer.half_precision_backend", "transformers 4 (deprecated)"},
      {"trainer.push_to_hub_model_id", "trainer.hub_model_id", "transformers 4 (deprecated)"},
      {"trainer.push_to_hub_token", "trainer.hub_token", "transformers 4 (deprecated)"},
  };
  return a;
}

const KeySpec* find_key(std::string_view path) {
  for (const auto& s : config_schema())
    if (s.path == path) return &s;
  return nullptr;
}

bool is_section(std::string_view prefix) {
  for (const auto& s : config_schema())
    if (s.path.size() > prefix.size() && s.path.substr(0, prefix.size()) == prefix && s.path[prefix.size()] == '.')
      return true;
  return false;
}

std::vector<std::string_view> schema_paths() {
  std::vector<std::string_view> v;
  for (const auto& s : config_schema()) v.push_back(s.path);
  for (const auto& a : key_aliases()) v.push_back(a.old_path);
  return v;
}

std::string did_you_mean_key(std::string_view path) {
  std::string near = closest_match(path, schema_paths());
  for (const auto& a : key_aliases())
    if (a.old_path == near) near = a.new_path;
  return near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near);
}

double steps_lower_bound(const ValueRule& r) { return std::isfinite(r.lo) ? r.lo : 1.0; }

std::string check_value(const ValueRule& r, const Json& v) {
  using K = ValueRule::Kind;
  switch (r.kind) {
    case K::kAny:
      return "";
    case K::kBool:
      return v.is_boolean() ? "" : "true or false";
    case K::kInt: {
      const std::string want = range_text(r, "an integer");
      if (!v.is_number_integer()) return want;
      return in_range(r, static_cast<double>(v.get<int64_t>())) ? "" : want;
    }
    case K::kNumber: {
      const std::string want = range_text(r, "a number");
      if (!v.is_number() || !std::isfinite(v.get<double>())) return want;
      return in_range(r, v.get<double>()) ? "" : want;
    }
    case K::kSteps: {
      // At least 1, or r.lo where the rule sets it (eval_steps: 0 is transformers' "use
      // logging_steps"); or a ratio in (0, 1) of the total steps, as transformers takes it
      // (TrainerState.compute_steps; above 1 it must be whole: the rule of a strategy "steps",
      // RunConfig's check takes a fraction no strategy steps reads).
      const double lo = steps_lower_bound(r);
      const std::string want = fmt::format(
          "an integer number of steps >= {}, or a ratio in (0, 1) of the total steps", lo);
      if (v.is_number_integer()) return static_cast<double>(v.get<int64_t>()) >= lo ? "" : want;
      if (v.is_number_float()) {
        const double d = v.get<double>();
        // A whole float (10.0) is a count: TrainingArguments.__post_init__ makes it
        // int(logging_steps). int64 holds it below 2^63 (int() of inf raises OverflowError).
        if (d >= lo && d == std::floor(d))
          return d < 0x1p63
                     ? ""
                     : want + "; zerotune's integers are 64-bit: at most 9223372036854775807";
        if (d > 0 && d < 1) return "";
      }
      return want;
    }
    case K::kWarmup: {
      const char* want = "0, a ratio in (0, 1) of the total steps, or a whole number of steps >= 1";
      if (!v.is_number() || !std::isfinite(v.get<double>())) return want;
      const double d = v.get<double>();
      return (d >= 0 && (d < 1 || d == std::floor(d))) ? "" : want;
    }
    case K::kString:
      return v.is_string() ? "" : "a string";
    case K::kEnum: {
      const std::string want = "one of: " + join(r.choices);
      if (!v.is_string()) return want;
      const std::string s = v.get<std::string>();
      for (auto c : r.choices)
        if (c == s) return "";
      for (auto c : r.unsupported)
        if (c == s) return "@unsupported";
      return want;
    }
    case K::kStrings: {
      if (v.is_string()) return "";
      if (v.is_array()) {
        for (const auto& e : v)
          if (!e.is_string()) return "a string or a list of strings";
        return "";
      }
      return "a string or a list of strings";
    }
  }
  return "";
}

std::string describe_rule(const ValueRule& r) {
  using K = ValueRule::Kind;
  std::string s;
  switch (r.kind) {
    case K::kAny:
      return "any value";
    case K::kEnum:
      s = "one of: " + join(r.choices);
      if (!r.unsupported.empty()) s += " (not supported: " + join(r.unsupported) + ")";
      break;
    default:
      s = check_value(r, Json());  // what a value of the wrong type is told is expected
  }
  return r.nullable ? s + ", or null" : s;
}

std::string acted_keys_markdown() {
  std::string md = "| key | default | accepts |\n|---|---|---|\n";
  for (const auto& k : config_schema()) {
    if (k.use != KeyUse::kActs) continue;
    std::string accepts = describe_rule(k.rule);
    for (size_t p = accepts.find('|'); p != std::string::npos; p = accepts.find('|', p + 2)) accepts.replace(p, 1, "\\|");
    // Formatted by fmt: gcc 12 took an inlined string concatenation here for overlapping copies
    // (a -Wrestrict false positive).
    const std::string dflt =
        k.default_value.is_null() ? "—" : fmt::format("`{}`", k.default_value.dump());
    md += fmt::format("| `{}` | {} | {} |\n", k.path, dflt, accepts);
  }
  return md;
}

void read_declared_options(const RunConfig& cfg, train::TrainArgs& a) {
  for (const auto& k : config_schema()) {
    if (!k.to_args) continue;
    k.to_args(cfg, a);
    const std::string key(k.path);
    a.key_origins[key] = {cfg.key_at(key), cfg.where(key)};
  }
}

namespace {
ValueRule rule(ValueRule::Kind kind, bool nullable) {
  ValueRule r;
  r.kind = kind;
  r.nullable = nullable;
  return r;
}
}  // namespace

KeySpec acts(std::string_view path, Json dflt, ValueRule rule) {
  return {path, std::move(dflt), KeyUse::kActs, std::move(rule), {}, {}};
}
KeySpec noted(std::string_view path, Json dflt, std::string_view why, ValueRule rule) {
  return {path, std::move(dflt), KeyUse::kNote, std::move(rule), why, {}};
}
KeySpec refused(std::string_view path, Json dflt, std::string_view what,
                std::vector<Json> also_neutral) {
  return {path, std::move(dflt),        KeyUse::kUnsupported, any_value(), what,
          {},   std::move(also_neutral)};
}

ValueRule any_value() { return {}; }
ValueRule boolean(bool nullable) { return rule(ValueRule::Kind::kBool, nullable); }
ValueRule integer(double lo, double hi, bool nullable) {
  ValueRule r = rule(ValueRule::Kind::kInt, nullable);
  r.lo = lo;
  r.hi = hi;
  return r;
}
ValueRule number(double lo, double hi, bool hi_open, bool nullable) {
  ValueRule r = rule(ValueRule::Kind::kNumber, nullable);
  r.lo = lo;
  r.hi = hi;
  r.hi_open = hi_open;
  return r;
}
ValueRule steps(bool nullable) { return rule(ValueRule::Kind::kSteps, nullable); }
ValueRule warmup() { return rule(ValueRule::Kind::kWarmup, false); }
ValueRule text(bool nullable) { return rule(ValueRule::Kind::kString, nullable); }
ValueRule one_of(std::vector<std::string_view> choices, std::vector<std::string_view> unsupported, bool nullable) {
  ValueRule r = rule(ValueRule::Kind::kEnum, nullable);
  r.choices = std::move(choices);
  r.unsupported = std::move(unsupported);
  return r;
}
ValueRule strings() { return rule(ValueRule::Kind::kStrings, true); }

}  // namespace zt::cli
