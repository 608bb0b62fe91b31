// accelerate config YAML / DeepSpeed JSON -> AccelerateConfig (see accelerate_config.h).
#include "cli/accelerate_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>

#include "cli/launch_keys.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/spelling.h"
#include "io/hydra_yaml.h"
#include "io/json_check.h"
#include "io/python_number.h"
#include "io/yaml_load.h"

namespace zt::cli {

namespace {

// accelerate's DeepSpeedPlugin.__post_init__: zero_stage = int(ACCELERATE_DEEPSPEED_ZERO_STAGE or
// 2), the variable accelerate launch sets only from deepspeed_config.zero_stage
// (tests/data/cli/deepspeed_sources.json: accelerate_no_stage_alone, accelerate_no_section_alone).
constexpr int kAccelerateDefaultZeroStage = 2;

// True when `v` is a DeepSpeed block {type: `type` (any case), params: {…}} with nothing else in
// it and every param "auto" (params absent or null too): transformers fills each from the trainer.
bool is_auto_block(const YAML::Node& v, std::string_view type) {
  if (!v.IsMap() || !v["type"] || !v["type"].IsScalar() ||
      ascii_lower(v["type"].Scalar()) != ascii_lower(std::string(type)))
    return false;
  for (const auto& kv : v) {
    const std::string k = kv.first.Scalar();
    if (k == "type") continue;
    if (k != "params" || !(kv.second.IsNull() || kv.second.IsMap())) return false;
    for (const auto& p : kv.second)
      if (!p.second.IsScalar() || p.second.Scalar() != "auto") return false;
  }
  return true;
}

// True when `v` is one of the '|'-separated spellings of `neutral` (launch_keys.h).
bool is_neutral(const YAML::Node& v, std::string_view neutral) {
  if (neutral == "*") return true;
  size_t start = 0;
  while (start <= neutral.size()) {
    size_t bar = neutral.find('|', start);
    std::string_view alt =
        neutral.substr(start, bar == std::string_view::npos ? std::string_view::npos : bar - start);
    if (!v || v.IsNull()) {
      if (alt == "~" || alt == "[]" || alt == "{}") return true;
    } else if (alt.rfind("type:", 0) == 0) {
      if (is_auto_block(v, alt.substr(5))) return true;
    } else if (alt == "[]") {
      if (v.IsSequence() && v.size() == 0) return true;
    } else if (alt == "{}") {
      if (v.IsMap() && v.size() == 0) return true;
    } else if (v.IsScalar() && ascii_lower(v.Scalar()) == ascii_lower(std::string(alt))) {
      return true;
    }
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  return false;
}

std::string show(const YAML::Node& v) {
  if (v.IsScalar()) return v.Scalar();
  if (v.IsSequence()) return v.size() == 0 ? "[]" : "[…]";
  if (v.IsMap()) return v.size() == 0 ? "{}" : "{…}";
  return "null";
}

// A scalar as accelerate's yaml.safe_load types it: a core tag decides (!!str: a string; !!float:
// a float, `!!float 2` is 2.0), a quoted scalar is a string, and a plain one (or !!int, !!bool)
// resolves by PyYAML's YAML 1.1 rules (yaml_scalar_to_json), where `y` and `n` are strings
// (yaml-cpp reads them as booleans); yaml_scalar_to_json also takes OmegaConf's `1e5` as a float, a
// string to plain PyYAML and no integer or boolean either way. JSON (a DeepSpeed config read as
// YAML) alike: a quoted value is a string.
Json safe_load_value(const YAML::Node& n) {
  const std::string& tag = n.Tag();
  if (tag == "!" || tag == "tag:yaml.org,2002:str") return Json(n.Scalar());
  Json v = yaml_scalar_to_json(n.Scalar(), /*quoted=*/false);
  if (tag == "tag:yaml.org,2002:float" && v.is_number()) v = v.get<double>();
  return v;
}

// "!!float 2" for a tagged scalar, else its text.
std::string shown_scalar(const YAML::Node& n) {
  constexpr std::string_view kCore = "tag:yaml.org,2002:";
  const std::string& tag = n.Tag();
  return tag.starts_with(kCore) ? "!!" + tag.substr(kCore.size()) + " " + n.Scalar() : n.Scalar();
}

// A section of a config (a key whose value is a mapping) and the keys known in it.
struct Section {
  std::string_view name;
  std::span<const LaunchKey> keys;
};

// Reading context: names the origin in messages and collects warnings.
struct Reader {
  AccelerateConfig* cfg;
  std::string origin;
  // A DeepSpeed JSON (deepspeed_config_file), whose settings DeepSpeed validates with pydantic:
  // a boolean given as a string ("false", "yes", "0", …) is coerced as pydantic v2 coerces it.
  bool deepspeed_json = false;
  // Whether the text read is the user's, so that its lines mean something (not so for settings
  // given inline, which are read from a dump: messages name `origin` and the key path only).
  bool lines = true;

  // "origin:line" of node `n`, or `origin` where the text has no lines of the user's.
  std::string at(const YAML::Node& n) const {
    return lines ? fmt::format("{}:{}", origin, n.Mark().line + 1) : origin;
  }
  void warn(const std::string& msg) { cfg->warnings.push_back(msg); }
  [[noreturn]] void bad(const YAML::Node& n, const std::string& key, const std::string& expected) {
    if (n.IsScalar())
      fail("{}: key '{}' has value '{}' (expected {})", at(n), key, n.Scalar(), expected);
    fail("{}: key '{}' is {} (expected {})", at(n), key,
         n.IsNull()       ? "null"
         : n.IsSequence() ? "a list"
                          : "a mapping",
         expected);
  }
  std::string str(const YAML::Node& n, const std::string& key) {
    if (!n.IsScalar()) bad(n, key, "a string");
    return n.Scalar();
  }
  // An integer in [lo, hi]. A float to yaml.safe_load (`!!float 2`) is refused: accelerate would
  // pass "2.0" on as the process count, which torchrun refuses. A string spelling an integer
  // (quoted, !!str) is read as it: accelerate's DeepSpeed launcher passes str(value) on.
  int integer(const YAML::Node& n, const std::string& key, int lo, int hi,
              std::string expected = "") {
    int v = 0;
    if (expected.empty()) expected = fmt::format("an integer in [{}, {}]", lo, hi);
    if (n.IsScalar())
      if (const Json t = safe_load_value(n); t.is_number_float())
        bad(n, key,
            fmt::format("{}; accelerate's yaml.safe_load reads '{}' as the float {}", expected,
                        shown_scalar(n), python_float_repr(t.get<double>())));
    if (!n.IsScalar() || !YAML::convert<int>::decode(n, v) || v < lo || v > hi)
      bad(n, key, expected);
    return v;
  }
  // A boolean as yaml.safe_load types it. A string — quoted, !!str, or a plain y / n, which YAML
  // 1.1 leaves strings — is refused: accelerate (and DeepSpeed) test it for truth, and every
  // non-empty string is true ('false' included).
  bool boolean(const YAML::Node& n, const std::string& key) {
    const Json t = n.IsScalar() ? safe_load_value(n) : Json();
    if (t.is_string() && deepspeed_json) {
      std::string s = t.get<std::string>();
      for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      for (const char* yes : {"1", "on", "t", "true", "y", "yes"})
        if (s == yes) return true;
      for (const char* no : {"0", "off", "f", "false", "n", "no"})
        if (s == no) return false;
    }
    if (t.is_string())
      bad(n, key,
          fmt::format("true or false; accelerate's yaml.safe_load reads '{}' as a string, which "
                      "Python takes as true whatever it says: write true or false, unquoted",
                      shown_scalar(n)));
    if (!t.is_boolean()) bad(n, key, "true or false");
    return t.get<bool>();
  }
  // True when the node is a number (false for "auto" and other strings, as DeepSpeed allows).
  template <typename T>
  std::optional<T> number_or_auto(const YAML::Node& n, const std::string& key) {
    if (n.IsNull()) return std::nullopt;
    T v{};
    if (n.IsScalar() && YAML::convert<T>::decode(n, v)) return v;
    if (n.IsScalar() && n.Scalar() == "auto") return std::nullopt;
    bad(n, key, "a number or \"auto\"");
  }
  // Every key of `map` must be in `known` (`what` names the table in the error); a noted key off
  // its neutral value adds a note, a refused one is an error (neither where `used` is false: a
  // section accelerate does not act on, whose values it never looks at). An unknown key that is a
  // key of one of the `sections` (name, keys) below `map` is suggested there ("did you mean
  // 'deepspeed_config.deepspeed_config_file'?"), else the closest known key is.
  void check_keys(const YAML::Node& map, std::span<const LaunchKey> known,
                  const std::string& prefix, std::string_view what,
                  std::span<const Section> sections = {}, bool used = true) {
    std::vector<std::string_view> names;
    for (const auto& k : known) names.push_back(k.name);
    for (const auto& kv : map) {
      const std::string k = kv.first.Scalar();
      const std::string where = at(kv.first);
      const LaunchKey* spec = find_launch_key(known, k);
      if (spec == nullptr) {
        std::string hint = did_you_mean(k, names);
        for (const Section& s : sections)
          if (find_launch_key(s.keys, k) != nullptr)
            hint = fmt::format(" (did you mean '{0}{1}.{2}'? it belongs in the {0}{1} section)",
                               prefix, s.name, k);
        fail("{}: unknown key '{}{}': not {}{}", where, prefix, k, what, hint);
      }
      if (!used || spec->neutral.empty() || is_neutral(kv.second, spec->neutral)) continue;
      if (spec->refuse)
        fail("{}: '{}{}: {}' is not supported by zerotune: {}", where, prefix, k, show(kv.second),
             spec->note);
      cfg->notes.push_back(fmt::format("{}: '{}{}: {}' changes nothing in zerotune: {}", where,
                                       prefix, k, show(kv.second), spec->note));
    }
  }
};

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

// An offload device: none or cpu. In a DeepSpeed JSON (`auto_is_none`) "auto" too, which
// accelerate's DeepSpeedPlugin fills (fill_match) with its offload_*_device: "none", unless the
// accelerate config's deepspeed_config gives one, which it refuses beside a JSON
// (tests/data/cli/deepspeed_sources.json trainer_auto_stage).
void read_offload(Reader& rd, const YAML::Node& n, const std::string& key, std::string* out,
                  bool auto_is_none = false) {
  const std::string v = rd.str(n, key);
  if (v == "none" || v == "cpu") {
    *out = v;
    return;
  }
  if (v == "auto" && auto_is_none) {
    *out = "none";
    return;
  }
  const char* expected = auto_is_none ? "none, cpu or \"auto\"" : "none or cpu";
  if (v == "nvme") rd.bad(n, key, fmt::format("{} (zerotune does not offload to nvme)", expected));
  rd.bad(n, key, expected);
}

bool read_deepspeed_text(Reader& rd, const std::string& text, const std::string& origin,
                         bool lines = true);

// deepspeed_config_file: the DeepSpeed JSON with zero_optimization etc. (read_deepspeed_text).
// Returns whether it names gradient_accumulation_steps.
bool read_deepspeed_json(Reader& rd, const std::string& file, const std::string& base_dir) {
  std::filesystem::path p(file);
  if (p.is_relative() && !std::filesystem::exists(p)) p = std::filesystem::path(base_dir) / file;
  // A directory opens as an empty stream: it would read as a file without settings.
  if (std::filesystem::is_directory(p))
    fail("{}: DeepSpeed config '{}' is a directory; expected a DeepSpeed JSON file", rd.origin,
         p.string());
  std::string text;
  try {
    text = read_file(p);  // a device (/dev/zero) is refused, never read without end
  } catch (const Error& e) {
    fail("{}: DeepSpeed config '{}' cannot be read: {}", rd.origin, p.string(), e.what());
  }
  // A NUL byte, refused as every JSON read refuses it (io/json_check.h); the YAML reader does not
  // look for one.
  check_no_nul(text, p.string());
  return read_deepspeed_text(rd, text, p.string());
}

// DeepSpeed JSON text (a YAML subset, read as YAML for its line numbers) whose messages name
// `origin` (and its lines, unless `lines` is false): its settings into rd.cfg. Returns whether it
// names gradient_accumulation_steps.
bool read_deepspeed_text(Reader& rd, const std::string& text, const std::string& origin,
                         bool lines) {
  YAML::Node j;
  try {
    j = load_yaml(text, origin, /*json=*/true);
  } catch (const YAML::Exception& e) {
    fail("{}:{}: not valid JSON: {}", origin, e.mark.line + 1, e.msg);
  }
  Reader jr{rd.cfg, origin, /*deepspeed_json=*/true, lines};
  if (!j.IsMap()) fail("{}: expected a JSON object of DeepSpeed settings", jr.origin);
  rd.cfg->zero_optimization_missing = !j["zero_optimization"];
  jr.check_keys(j, deepspeed_json_keys(), "", "a DeepSpeed config key");
  for (const char* prec : {"bf16", "bfloat16", "fp16"})
    if (const YAML::Node b = j[prec]; b && b.IsMap())
      jr.check_keys(b, deepspeed_precision_keys(), std::string(prec) + ".",
                    "a key of DeepSpeed's precision settings");
  if (const YAML::Node z = j["zero_optimization"]; z && z.IsMap()) {
    jr.check_keys(z, deepspeed_zero_keys(), "zero_optimization.",
                  "a key of DeepSpeed's zero_optimization");
    if (const YAML::Node o = z["offload_optimizer"]; o && o.IsMap())
      jr.check_keys(o, deepspeed_offload_optimizer_keys(), "zero_optimization.offload_optimizer.",
                    "a key of DeepSpeed's offload_optimizer");
    if (const YAML::Node o = z["offload_param"]; o && o.IsMap())
      jr.check_keys(o, deepspeed_offload_param_keys(), "zero_optimization.offload_param.",
                    "a key of DeepSpeed's offload_param");
    if (const YAML::Node c = z["cpu_offload"]; c && jr.boolean(c, "zero_optimization.cpu_offload"))
      rd.cfg->offload_optimizer_device = "cpu";
    // "auto": accelerate's DeepSpeedPlugin fills it (fill_match) with its zero_stage,
    // int(ACCELERATE_DEEPSPEED_ZERO_STAGE or 2), which accelerate launch sets only from the
    // accelerate config's deepspeed_config.zero_stage, refused beside a JSON: 2 (golden
    // trainer_auto_stage, accelerate_json_auto_stage_alone).
    if (const YAML::Node s = z["stage"]; s && s.IsScalar() && s.Scalar() == "auto") {
      rd.cfg->zero_stage = kAccelerateDefaultZeroStage;
      rd.cfg->notes.push_back(fmt::format(
          "{}: zero_optimization.stage \"auto\" is ZeRO stage {}, as accelerate's DeepSpeedPlugin "
          "fills it (its default zero_stage)",
          jr.at(s), kAccelerateDefaultZeroStage));
    } else if (s) {
      rd.cfg->zero_stage =
          jr.integer(s, "zero_optimization.stage", 0, 3, "an integer in [0, 3] or \"auto\"");
    }
    if (const YAML::Node o = z["offload_optimizer"]; o && o["device"])
      read_offload(jr, o["device"], "zero_optimization.offload_optimizer.device",
                   &rd.cfg->offload_optimizer_device, /*auto_is_none=*/true);
    if (const YAML::Node o = z["offload_param"]; o && o["device"])
      read_offload(jr, o["device"], "zero_optimization.offload_param.device",
                   &rd.cfg->offload_param_device, /*auto_is_none=*/true);
  }
  if (const YAML::Node b = j["bf16"] ? j["bf16"] : j["bfloat16"];
      b && b["enabled"] && b["enabled"].Scalar() != "auto" &&
      jr.boolean(b["enabled"], "bf16.enabled"))
    rd.cfg->mixed_precision = "bf16";
  if (const YAML::Node f = j["fp16"]; f && f["enabled"] && f["enabled"].Scalar() != "auto" &&
                                      jr.boolean(f["enabled"], "fp16.enabled"))
    jr.bad(f["enabled"], "fp16.enabled",
           "false or \"auto\": zerotune trains in bf16 or fp32, not fp16, which needs loss scaling "
           "(as trainer.fp16 is refused); enable bf16 instead");
  // The values transformers fills from the trainer when "auto" and otherwise requires to equal
  // the trainer's; cmd_train compares them (check_deepspeed_values).
  const auto keep = [&](const YAML::Node& n, const std::string& key) {
    if (!n || n.IsNull() || (n.IsScalar() && n.Scalar() == "auto")) return;
    AccelerateConfig::DeepSpeedValue v{key, {}, n.IsScalar() ? n.Scalar() : "", jr.at(n)};
    double d = 0;
    if (n.IsSequence()) {
      for (const auto& e : n) {
        if (!e.IsScalar() || !YAML::convert<double>::decode(e, d))
          jr.bad(n, key, "a list of numbers or \"auto\"");
        v.values.push_back(d);
        v.text += (v.text.empty() ? "[" : ", ") + e.Scalar();
      }
      v.text += "]";
    } else {
      if (!n.IsScalar() || !YAML::convert<double>::decode(n, d))
        jr.bad(n, key, "a number or \"auto\"");
      v.values.push_back(d);
    }
    rd.cfg->deepspeed_values.push_back(std::move(v));
  };
  for (const auto& top : j) {  // in the file's order
    const std::string block = top.first.Scalar();
    if (block == "train_micro_batch_size_per_gpu" || block == "train_batch_size" ||
        block == "gradient_accumulation_steps" || block == "gradient_clipping")
      keep(top.second, block);
    if ((block == "bf16" || block == "bfloat16") && top.second.IsMap())
      if (const YAML::Node e = top.second["enabled"];
          e && !e.IsNull() && !(e.IsScalar() && e.Scalar() == "auto"))
        rd.cfg->deepspeed_values.push_back({block + ".enabled",
                                            {jr.boolean(e, block + ".enabled") ? 1.0 : 0.0},
                                            e.Scalar(),
                                            jr.at(e)});
    if ((block != "optimizer" && block != "scheduler") || !top.second.IsMap()) continue;
    if (const YAML::Node params = top.second["params"]; params && params.IsMap())
      for (const auto& kv : params) {
        const std::string k = kv.first.Scalar();
        if ((block == "optimizer" &&
             (k == "lr" || k == "betas" || k == "eps" || k == "weight_decay")) ||
            (block == "scheduler" && k == "warmup_max_lr"))  // warmup_min_lr: fill_only
          keep(kv.second, fmt::format("{}.params.{}", block, k));
      }
  }
  return static_cast<bool>(j["gradient_accumulation_steps"]);
}

// The accelerate config's deepspeed_config. Its deepspeed_config_file is opened only where it is
// in force (TrainerDeepSpeed::kNone): beside trainer.deepspeed accelerate never reads it.
void read_deepspeed(Reader& rd, const YAML::Node& ds, const std::string& base_dir,
                    TrainerDeepSpeed trainer) {
  if (!ds.IsMap()) rd.bad(ds, "deepspeed_config", "a mapping");
  AccelerateConfig& c = *rd.cfg;
  c.deepspeed_source = fmt::format("{}'s deepspeed_config", rd.origin);
  if (const YAML::Node f = ds["deepspeed_config_file"]; f && !f.IsNull()) {
    const size_t before = c.deepspeed_values.size();
    const std::string file = rd.str(f, "deepspeed_config.deepspeed_config_file");
    c.deepspeed_source =
        fmt::format("{} (deepspeed_config.deepspeed_config_file of {})", file, rd.origin);
    // accelerate's DeepSpeedPlugin sets a JSON's missing gradient_accumulation_steps to 1, which
    // transformers then compares with the trainer's (Trainer.propagate_args_to_deepspeed; golden
    // accelerate_json_file_alone). Only this path: the JSON given as TrainingArguments' `deepspeed`
    // is compared in __post_init__'s trainer_config_process, before the plugin adds the 1.
    // Beside trainer.deepspeed the file is not opened at all (golden accelerate_json_file_missing,
    // accelerate_json_file_fp16: transformers runs).
    if (trainer == TrainerDeepSpeed::kNone && !read_deepspeed_json(rd, file, base_dir))
      c.deepspeed_values.insert(c.deepspeed_values.begin() + static_cast<ptrdiff_t>(before),
                                {"gradient_accumulation_steps",
                                 {1.0},
                                 "1 (not in the file: accelerate's DeepSpeedPlugin sets it)",
                                 file});
  }
  const bool json_file = ds["deepspeed_config_file"] && !ds["deepspeed_config_file"].IsNull();
  if (const YAML::Node s = ds["zero_stage"])
    c.zero_stage = rd.integer(s, "deepspeed_config.zero_stage", 0, 3);
  else if (!json_file)  // accelerate builds the DeepSpeed config with its plugin's default
    c.zero_stage = kAccelerateDefaultZeroStage;
  if (const YAML::Node o = ds["offload_optimizer_device"])
    read_offload(rd, o, "deepspeed_config.offload_optimizer_device", &c.offload_optimizer_device);
  if (const YAML::Node o = ds["offload_param_device"])
    read_offload(rd, o, "deepspeed_config.offload_param_device", &c.offload_param_device);
  // accelerate writes these two into the DeepSpeed config it builds (DeepSpeedPlugin), where
  // transformers compares them with the trainer's as it compares a JSON's (cmd_train.cpp
  // check_deepspeed_values); "auto" is filled from the trainer.
  for (const char* key : {"gradient_accumulation_steps", "gradient_clipping"})
    if (const YAML::Node g = ds[key]) {
      const std::string name = std::string("deepspeed_config.") + key;
      std::optional<double> v;
      if (key == std::string_view("gradient_clipping"))
        v = rd.number_or_auto<double>(g, name);
      else if (const std::optional<int> steps = rd.number_or_auto<int>(g, name))
        v = *steps;
      const std::string at = rd.at(g);
      // accelerate leaves a zero gradient_clipping out of the DeepSpeed config (`if
      // self.gradient_clipping:`): nothing for transformers to compare, and DeepSpeed does not
      // clip.
      if (v && *v == 0.0 && key == std::string_view("gradient_clipping"))
        c.clipping_zero_at = at;
      else if (v)
        c.deepspeed_values.push_back({key, {*v}, g.Scalar(), at});
    }
}

// accelerate refuses an accelerate config that gives a DeepSpeed JSON (deepspeed_config_file) and
// also one of the settings that JSON holds (DeepSpeedPlugin._deepspeed_config_checks: "When using
// `deepspeed_config_file`, the following accelerate config variables will be ignored"): the
// deepspeed_config keys of kIgnoredBesideDeepSpeedConfig, and a top-level mixed_precision other
// than null (the deepspeed_fields accelerate launch passes on). zerotune refuses the same files,
// naming each key and line, where it let the YAML's value win over the JSON's.
void check_no_settings_beside_deepspeed_file(Reader& rd, const YAML::Node& ds) {
  const YAML::Node file = ds["deepspeed_config_file"];
  if (!file || file.IsNull()) return;
  const std::string lines = fields_ignored_beside_deepspeed_json(rd.cfg->deepspeed_fields);
  if (!lines.empty())
    fail(
        "{}: deepspeed_config.deepspeed_config_file is given, so the DeepSpeed JSON holds these "
        "settings, and accelerate refuses them beside it ({}); remove them from the accelerate "
        "config (mixed_precision: set bf16.enabled in the JSON):{}",
        rd.at(file), accelerate_ignored_variables_quote(), lines);
}

void read_fsdp(Reader& rd, const YAML::Node& fs) {
  if (!fs.IsMap()) rd.bad(fs, "fsdp_config", "a mapping");
  AccelerateConfig& c = *rd.cfg;
  c.zero_stage = 3;  // accelerate's default strategy is FULL_SHARD
  int version = 1;
  if (const YAML::Node v = fs["fsdp_version"])
    version = rd.integer(v, "fsdp_config.fsdp_version", 1, 2);
  if (version == 2) {
    if (const YAML::Node r = fs["fsdp_reshard_after_forward"])
      c.zero_stage = rd.boolean(r, "fsdp_config.fsdp_reshard_after_forward") ? 3 : 2;
  } else if (const YAML::Node s = fs["fsdp_sharding_strategy"]) {
    const std::string v = upper(rd.str(s, "fsdp_config.fsdp_sharding_strategy"));
    if (v == "FULL_SHARD" || v == "1") {
      c.zero_stage = 3;
    } else if (v == "SHARD_GRAD_OP" || v == "2") {
      c.zero_stage = 2;
    } else if (v == "NO_SHARD" || v == "3") {
      c.zero_stage = 0;
    } else if (v == "HYBRID_SHARD" || v == "4" || v == "_HYBRID_SHARD_ZERO2" || v == "5") {
      c.zero_stage = (v == "HYBRID_SHARD" || v == "4") ? 3 : 2;
      rd.warn(
          fmt::format("{}:{}: fsdp_sharding_strategy {} is run as ZeRO stage {} over all ranks "
                      "(zerotune has no hybrid sharding)",
                      rd.origin, s.Mark().line + 1, v, *c.zero_stage));
    } else {
      rd.bad(s, "fsdp_config.fsdp_sharding_strategy",
             "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD or _HYBRID_SHARD_ZERO2");
    }
  }
  if (const YAML::Node o = fs["fsdp_offload_params"];
      o && rd.boolean(o, "fsdp_config.fsdp_offload_params")) {
    c.offload_optimizer_device = "cpu";
    rd.warn(
        fmt::format("{}:{}: fsdp_offload_params: true is run as optimizer offload to the CPU "
                    "(parameters stay on the device)",
                    rd.origin, o.Mark().line + 1));
  }
}

// accelerate reads its config with yaml.safe_load: PyYAML's SafeLoader resolves the core schema's
// tags and refuses the others ("could not determine a constructor for the tag"), so a tag such as
// `!!python/object:…` or `!custom` is an error naming file, line and tag (yaml-cpp kept the value
// and dropped the tag); so are !!binary, !!timestamp and !!set, whose values (bytes, datetime, a
// set) no accelerate setting takes. A core tag types the value as PyYAML does where a number or a
// boolean is read (Reader::integer, Reader::boolean): `!!float 2` is no process count, `!!str
// false` no boolean; `num_processes: !!str 4` reads as 4, as accelerate's DeepSpeed launcher
// passes the string on.
void check_tags(const YAML::Node& n, const std::string& origin) {
  const std::string& tag = n.Tag();
  constexpr std::string_view kCore = "tag:yaml.org,2002:";
  if (!tag.empty() && tag != "?" && tag != "!") {
    const std::string name = tag.starts_with(kCore) ? tag.substr(kCore.size()) : "";
    static constexpr std::string_view kSafe[] = {"str",  "int", "float", "bool",
                                                 "null", "seq", "map",   "merge"};
    if (std::find(std::begin(kSafe), std::end(kSafe), name) == std::end(kSafe))
      fail(
          "{}:{}: the YAML tag '{}': an accelerate config takes only the tags !!str, !!int, "
          "!!float, !!bool, !!null, !!seq and !!map (accelerate's yaml.safe_load refuses "
          "!!python/… and custom tags); remove it",
          origin, n.Mark().line + 1, name.empty() ? tag : "!!" + name);
  }
  if (n.IsMap()) {
    for (const auto& kv : n) {
      check_tags(kv.first, origin);
      check_tags(kv.second, origin);
    }
  } else if (n.IsSequence()) {
    for (const auto& e : n) check_tags(e, origin);
  }
}

}  // namespace

AccelerateConfig parse_accelerate_config_text(const std::string& yaml, const std::string& origin,
                                              const std::string& base_dir,
                                              TrainerDeepSpeed trainer) {
  AccelerateConfig c;
  c.path = origin;
  Reader rd{&c, origin};
  YAML::Node root;
  try {
    root = load_yaml(yaml, origin);
  } catch (const YAML::Exception& e) {
    fail("{}:{}: not valid YAML: {}", origin, e.mark.line + 1, e.msg);
  }
  // An empty file (or one holding only comments or `null`) has no settings at all: accelerate
  // itself fails on it (its loader tests keys of the None that yaml.safe_load returns), and
  // running it as one process without ZeRO would silently drop what the file was meant to say.
  if (root.IsNull())
    fail(
        "{}: the file holds no accelerate settings (it is empty, only comments, or null); "
        "expected a mapping such as `num_processes: 2` (accelerate refuses such a file too)",
        origin);
  check_tags(root, origin);
  if (!root.IsMap()) fail("{}: expected a mapping of accelerate settings at the top level", origin);
  const Section sections[] = {{"deepspeed_config", accelerate_deepspeed_keys()},
                              {"fsdp_config", accelerate_fsdp_keys()}};
  rd.check_keys(root, accelerate_top_keys(), "", "an accelerate config key", sections);

  if (const YAML::Node n = root["distributed_type"]) {
    const std::string v = upper(rd.str(n, "distributed_type"));
    if (v != "NO" && v != "MULTI_CPU" && v != "MULTI_GPU" && v != "DEEPSPEED" && v != "FSDP")
      rd.bad(n, "distributed_type", "NO, MULTI_CPU, MULTI_GPU, DEEPSPEED or FSDP");
    c.distributed_type = v;
  }
  if (const YAML::Node n = root["num_processes"])
    c.num_processes = rd.integer(n, "num_processes", 1, 1 << 20);
  if (const YAML::Node n = root["num_machines"])
    c.num_machines = rd.integer(n, "num_machines", 1, 1 << 20);
  if (const YAML::Node n = root["machine_rank"])
    c.machine_rank = rd.integer(n, "machine_rank", 0, c.num_machines - 1);
  if (const YAML::Node n = root["main_process_ip"]; n && !n.IsNull())
    c.main_process_ip = rd.str(n, "main_process_ip");
  if (const YAML::Node n = root["main_process_port"]; n && !n.IsNull())
    c.main_process_port = rd.integer(n, "main_process_port", 1, 65535);
  if (const YAML::Node n = root["use_cpu"]) c.use_cpu = rd.boolean(n, "use_cpu");
  // null, as `accelerate config` writes beside a deepspeed_config_file, is accelerate's "no".
  if (const YAML::Node n = root["mixed_precision"]; n && !n.IsNull()) {
    const std::string v = rd.str(n, "mixed_precision");
    if (v != "no" && v != "bf16" && v != "fp16" && v != "fp8")
      rd.bad(n, "mixed_precision", "no, bf16, fp16 or fp8");
    // fp16 / fp8 is refused by `train` unless trainer.bf16 is on (cmd_train.cpp): transformers
    // then overrides accelerate's mixed_precision with bf16.
    c.mixed_precision = v;
  }

  const YAML::Node ds = root["deepspeed_config"];
  const YAML::Node fs = root["fsdp_config"];
  if (ds && ds.IsMap())
    rd.check_keys(ds, accelerate_deepspeed_keys(), "deepspeed_config.",
                  "a key of accelerate's deepspeed_config", {}, c.distributed_type == "DEEPSPEED");
  // fsdp_config is read only where FSDP runs: not beside another distributed_type (accelerate
  // ignores it) nor beside trainer.deepspeed (DeepSpeed runs; cli/deepspeed_source.cpp warns), so
  // its keys get no notes there, only the warning that it is not used. Beside trainer.deepspeed
  // under distributed_type FSDP its values are still checked (below).
  const bool fsdp_used = c.distributed_type == "FSDP" && trainer == TrainerDeepSpeed::kNone;
  if (fs && fs.IsMap())
    rd.check_keys(fs, accelerate_fsdp_keys(), "fsdp_config.", "a key of accelerate's fsdp_config",
                  {}, fsdp_used);
  if (c.distributed_type == "DEEPSPEED") {
    c.deepspeed_origin = origin;
    if (ds && ds.IsMap())
      for (const auto& kv : ds)
        c.deepspeed_fields.push_back({"deepspeed_config." + kv.first.Scalar(), rd.at(kv.first)});
    if (const YAML::Node n = root["mixed_precision"]; n && !n.IsNull())
      c.deepspeed_fields.push_back({"mixed_precision", rd.at(n)});
    if (!ds || ds.IsNull()) {
      // accelerate builds the DeepSpeed config from its DeepSpeedPlugin's defaults.
      c.zero_stage = kAccelerateDefaultZeroStage;
      c.deepspeed_source = fmt::format(
          "{} (distributed_type DEEPSPEED without deepspeed_config: accelerate's defaults)",
          origin);
    } else {
      if (ds.IsMap()) check_no_settings_beside_deepspeed_file(rd, ds);
      read_deepspeed(rd, ds, base_dir, trainer);
    }
  } else if (fsdp_used) {
    read_fsdp(rd, fs && !fs.IsNull() ? fs : YAML::Node(YAML::NodeType::Map));
  } else if (c.distributed_type == "FSDP" && fs && !fs.IsNull()) {
    // Beside trainer.deepspeed DeepSpeed runs, but accelerate's launcher still exports the FSDP_*
    // variables and Accelerator() builds a FullyShardedDataParallelPlugin from them, whose
    // __post_init__ refuses a bad value (fsdp_sharding_strategy: BOGUS is a KeyError there): the
    // section is read into a scratch config for its errors, and its settings, warnings and notes
    // are dropped.
    AccelerateConfig scratch;
    Reader check = rd;
    check.cfg = &scratch;
    read_fsdp(check, fs);
  }
  // accelerate launch copies both sections into its arguments but acts only on the one its
  // distributed_type selects (DEEPSPEED: deepspeed_config, FSDP: fsdp_config), silently; zerotune
  // ignores the other alike, but says so when it asks for sharding.
  if (c.distributed_type != "DEEPSPEED" && ds && ds.IsMap() && ds.size() > 0)
    rd.warn(
        fmt::format("{}: deepspeed_config is ignored with distributed_type {}, as accelerate "
                    "ignores it (set distributed_type: DEEPSPEED to use it)",
                    origin, c.distributed_type));
  if (c.distributed_type != "FSDP" && fs && fs.IsMap() && fs.size() > 0)
    rd.warn(
        fmt::format("{}: fsdp_config is ignored with distributed_type {}, as accelerate "
                    "ignores it (set distributed_type: FSDP to use it)",
                    origin, c.distributed_type));
  if (c.offload_param_device != "none")
    rd.warn(
        fmt::format("{}: parameter offload (offload_param_device: {}) is not supported; "
                    "parameters stay on the device",
                    origin, c.offload_param_device));
  return c;
}

AccelerateConfig parse_accelerate_config(const std::string& path, TrainerDeepSpeed trainer) {
  if (std::filesystem::is_directory(path))
    fail("accelerate config '{}' is a directory; expected an accelerate config YAML file", path);
  std::string text;
  try {
    text = read_file(path);  // a device (/dev/zero) is refused, never read without end
  } catch (const Error& e) {
    fail("accelerate config '{}' cannot be read: {}", path, e.what());
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return parse_accelerate_config_text(text, path, dir.empty() ? "." : dir, trainer);
}

namespace {

// What parse_deepspeed_config* add to rd.cfg after reading: the warning for parameter offload.
void warn_parameter_offload(Reader& rd, const std::string& origin) {
  if (rd.cfg->offload_param_device != "none")
    rd.warn(fmt::format(
        "{}: parameter offload (offload_param.device: {}) is not supported; parameters stay on "
        "the device",
        origin, rd.cfg->offload_param_device));
}

}  // namespace

std::string accelerate_ignored_variables_quote() {
  std::string listed;
  for (const std::string_view n : kIgnoredBesideDeepSpeedConfig)
    listed += fmt::format("{}'{}'", listed.empty() ? "" : ", ", n);
  return fmt::format(
      "\"When using `deepspeed_config_file`, the following accelerate config variables will be "
      "ignored: [{}].\"",
      listed);
}

std::string fields_ignored_beside_deepspeed_json(
    const std::vector<AccelerateConfig::Field>& fields) {
  std::string lines;
  for (const std::string_view name : kIgnoredBesideDeepSpeedConfig)
    for (const AccelerateConfig::Field& f : fields) {
      const std::string_view key = std::string_view(f.name).starts_with("deepspeed_config.")
                                       ? std::string_view(f.name).substr(17)
                                       : std::string_view(f.name);
      if (key == name) lines += fmt::format("\n  - {}: {}", f.at, f.name);
    }
  return lines;
}

AccelerateConfig parse_deepspeed_config(const std::string& path) {
  AccelerateConfig c;
  c.path = c.deepspeed_origin = c.deepspeed_source = path;
  c.distributed_type = "DEEPSPEED";
  Reader rd{&c, path};
  read_deepspeed_json(rd, path, ".");
  warn_parameter_offload(rd, path);
  return c;
}

AccelerateConfig parse_deepspeed_settings(const Json& settings, const std::string& origin) {
  AccelerateConfig c;
  c.path = c.deepspeed_origin = c.deepspeed_source = origin;
  c.distributed_type = "DEEPSPEED";
  Reader rd{&c, origin};
  read_deepspeed_text(rd, settings.dump(2), origin, /*lines=*/false);
  warn_parameter_offload(rd, origin);
  return c;
}

}  // namespace zt::cli
