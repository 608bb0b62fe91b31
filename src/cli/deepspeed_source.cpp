// Where a run's DeepSpeed settings come from (see deepspeed_source.h).
#include "cli/deepspeed_source.h"

#include <algorithm>
#include <filesystem>

#include "cli/dict_field_string.h"
#include "core/error.h"
#include "io/json_check.h"
#include "text/unicode.h"

namespace zt::cli {

namespace {

// The value of a base64 character (the standard alphabet), or -1.
int base64_value(unsigned char ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
  if (ch >= '0' && ch <= '9') return ch - '0' + 52;
  if (ch == '+') return 62;
  if (ch == '/') return 63;
  return -1;
}

// Python's json.loads(text) where zerotune can hold the result: the parsed value, or nullopt with
// `why` set. Python refuses a leading byte order mark ("Unexpected UTF-8 BOM") and a raw NUL
// (a control character), which nlohmann would skip or stop at.
std::optional<Json> python_json_loads(const std::string& text, std::string* why) {
  if (text.starts_with("\xEF\xBB\xBF")) {
    *why = "it starts with a byte order mark, which Python's json refuses";
    return std::nullopt;
  }
  if (text.find('\0') != std::string::npos) {
    *why = "it holds a NUL character";
    return std::nullopt;
  }
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    *why = json_error_reason(e);
    return std::nullopt;
  }
}

// Python's type name of a JSON value as json.loads returns it.
const char* python_type(const Json& v) {
  if (v.is_array()) return "list";
  if (v.is_string()) return "str";
  if (v.is_boolean()) return "bool";
  if (v.is_null()) return "NoneType";
  if (v.is_number_float()) return "float";
  return "int";
}

// True when `text`, stripped of whitespace, starts as a JSON object or list would.
bool looks_like_json(const std::string& text) {
  const size_t b = text.find_first_not_of(" \t\r\n");
  return b != std::string::npos && (text[b] == '{' || text[b] == '[');
}

// True when every character of `text` is one base64 text may hold (either alphabet, '=' and
// whitespace).
bool looks_like_base64(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char ch) {
    return base64_value(ch) >= 0 || ch == '-' || ch == '_' || ch == '=' || ch == '\n' ||
           ch == '\r' || ch == ' ' || ch == '\t';
  });
}

// `text` (valid UTF-8) whole when it has at most 60 characters (code points), else its first 57
// and "...": never a part of a character's bytes.
std::string shortened(const std::string& text) {
  size_t chars = 0, cut = 0;
  for (size_t i = 0; i < text.size(); i = text::unicode::char_end(text, i))
    if (++chars == 58) cut = i;
  return chars > 60 ? text.substr(0, cut) + "..." : text;
}

// An object, or an error saying what the JSON is instead (transformers fails on it in
// HfDeepSpeedConfig.set_stage_and_offload, calling .get on it).
Json require_object(Json v, const std::string& text, const std::string& form) {
  if (v.is_object()) return v;
  fail(
      "'{}' is {} of {} {}, not a mapping of DeepSpeed settings (transformers fails on it: "
      "AttributeError: '{}' object has no attribute 'get')",
      text, form, v.is_array() ? "the list" : "the value", shortened(v.dump()), python_type(v));
}

}  // namespace

std::optional<std::string> python_urlsafe_b64decode(std::string_view text) {
  if (std::any_of(text.begin(), text.end(), [](unsigned char ch) { return ch >= 0x80; }))
    return std::nullopt;  // str.encode('ascii') fails before any decoding
  std::string out;
  int quad = 0, pads = 0;
  unsigned left = 0;
  for (unsigned char ch : text) {
    if (ch == '-') ch = '+';
    if (ch == '_') ch = '/';
    if (ch == '=') {
      // As binascii.a2b_base64: `quad >= 2 && quad + ++pads >= 4` (pads counts only there).
      if (quad >= 2 && quad + ++pads >= 4) return out;
      continue;
    }
    const int v = base64_value(ch);
    if (v < 0) continue;
    pads = 0;
    switch (quad) {
      case 0:
        left = static_cast<unsigned>(v);
        break;
      case 1:
        out.push_back(static_cast<char>((left << 2) | (static_cast<unsigned>(v) >> 4)));
        left = static_cast<unsigned>(v) & 0x0f;
        break;
      case 2:
        out.push_back(static_cast<char>((left << 4) | (static_cast<unsigned>(v) >> 2)));
        left = static_cast<unsigned>(v) & 0x03;
        break;
      default:
        out.push_back(static_cast<char>((left << 6) | static_cast<unsigned>(v)));
        left = 0;
        break;
    }
    quad = (quad + 1) % 4;
  }
  if (quad != 0) return std::nullopt;
  return out;
}

DeepSpeedString read_deepspeed_string(const std::string& text) {
  std::string json_why;
  if (std::optional<Json> v = python_json_loads(text, &json_why))
    return {require_object(std::move(*v), text, "JSON"), "a JSON string"};
  std::string b64_why;
  if (const std::optional<std::string> bytes = python_urlsafe_b64decode(text); !bytes) {
    b64_why = "it is not base64 (a non-ASCII character, or incomplete padding)";
  } else if (text::unicode::find_invalid_utf8(*bytes)) {
    b64_why = "it decodes to bytes that are not UTF-8";
  } else if (std::optional<Json> v = python_json_loads(*bytes, &b64_why)) {
    return {require_object(std::move(*v), text, "base64-encoded JSON"), "base64-encoded JSON"};
  } else {
    b64_why = "it decodes to text that is not JSON: " + b64_why;
  }
  std::string detail;
  if (looks_like_json(text))
    detail += fmt::format(
        " (as JSON: {}; zerotune also refuses NaN, Infinity and numbers beyond a double, which "
        "Python's json takes)",
        json_why);
  if (looks_like_base64(text)) detail += fmt::format(" (as base64: {})", b64_why);
  fail(
      "'{}' is no existing file, no JSON and no base64-encoded JSON{}; expected the path of a "
      "DeepSpeed JSON file, or the DeepSpeed settings inline (a mapping, a JSON string, or "
      "base64-encoded JSON); transformers' HfDeepSpeedConfig raises \"Expected a string path to "
      "an existing deepspeed config, or a dictionary, or a base64 encoded string. Received: {}\"",
      text, detail, text);
}

std::optional<AccelerateConfig> deepspeed_from_trainer(const RunConfig& cfg) {
  const std::string key = "trainer.deepspeed";
  const std::string origin = fmt::format("{}: {}{}", cfg.key_at(key), key, cfg.where(key));
  Json v;
  try {
    v = hf_dict_field_value(cfg.value(key));
  } catch (const Error& e) {
    fail("{}: {}", origin, e.what());
  }
  if (v.is_null() || v == false || v == 0 || (v.is_object() && v.empty()) ||
      (v.is_string() && v.get_ref<const std::string&>().empty()))
    return std::nullopt;
  const bool json_string = cfg.value(key).is_string();  // a '{' string that __post_init__ read
  if (v.is_string()) {
    const std::string text = v.get<std::string>();
    // HfDeepSpeedConfig: os.path.exists first (a directory too: parse_deepspeed_config names it).
    if (std::error_code ec; std::filesystem::exists(text, ec)) {
      AccelerateConfig c = parse_deepspeed_config(text);
      c.deepspeed_source = fmt::format("{}, the file {} names", text, cfg.key_ref(key));
      return c;
    }
    DeepSpeedString s;
    try {
      s = read_deepspeed_string(text);
    } catch (const Error& e) {
      fail("{}: {}", origin, e.what());
    }
    AccelerateConfig c = parse_deepspeed_settings(s.settings, origin);
    c.deepspeed_source = fmt::format("{}, {}", cfg.key_ref(key), s.form);
    return c;
  }
  if (v.is_object()) {
    AccelerateConfig c = parse_deepspeed_settings(v, origin);
    c.deepspeed_source =
        fmt::format("{}, {}", cfg.key_ref(key), json_string ? "a JSON string" : "a mapping");
    return c;
  }
  fail(
      "{} is {}; expected the path of a DeepSpeed JSON file, or the DeepSpeed settings inline (a "
      "mapping of zero_optimization, bf16, …, a JSON string, or base64-encoded JSON)",
      origin, v.dump());
}

namespace {

// DeepSpeedPlugin.__post_init__ refuses a DeepSpeed config without zero_optimization. `head`
// begins the message, where the settings were given: "FILE:LINE: KEY" for trainer.deepspeed, as
// its other messages begin, else the file (deepspeed_source); `of` names their JSON file, if any.
void require_zero_optimization(const AccelerateConfig& c, const std::string& head,
                               const std::string& of) {
  if (c.zero_optimization_missing)
    fail(
        "{}: the DeepSpeed settings{} have no zero_optimization section, which accelerate's "
        "DeepSpeedPlugin requires (\"Please specify the ZeRO optimization config in the DeepSpeed "
        "config.\"); add one, e.g. \"zero_optimization\": {{\"stage\": 0}} (0: DeepSpeed's "
        "default, no sharding)",
        head, of);
}

// "DeepSpeed settings in force: …" for the DeepSpeed config `c`, then `more`: the ZeRO stage and
// optimizer offload the run acts on — compute.zero_stage / compute.offload_optimizer where they
// are given and differ from `c`'s (make_train_args lets them win), named with what they override
// — and where the rest comes from.
std::string in_force_line(const AccelerateConfig& c, const std::string& more,
                          const RunConfig& cfg) {
  const auto offload_words = [](bool on) {
    return on ? "optimizer offload to the CPU" : "no optimizer offload";
  };
  std::string stage =
      c.zero_stage ? std::to_string(*c.zero_stage) : "0 (DeepSpeed's default: none is named)";
  bool overridden = false;
  if (const auto s = cfg.get_optional<int64_t>("compute.zero_stage");
      s && *s != c.zero_stage.value_or(0)) {
    stage = fmt::format("{} ({}, over stage {})", *s, cfg.key_ref("compute.zero_stage"),
                        c.zero_stage.value_or(0));
    overridden = true;
  }
  const bool file_offload = c.offload_optimizer_device == "cpu";
  std::string offload = offload_words(file_offload);
  if (const auto o = cfg.get_optional<bool>("compute.offload_optimizer"); o && *o != file_offload) {
    offload = fmt::format("{} ({}, over {})", offload_words(*o),
                          cfg.key_ref("compute.offload_optimizer"), offload_words(file_offload));
    overridden = true;
  }
  return fmt::format("DeepSpeed settings in force: ZeRO stage {}, {}, {}from {}{}", stage, offload,
                     overridden ? "the rest " : "", c.deepspeed_source, more);
}

}  // namespace

DeepSpeedChoice choose_deepspeed_settings(std::optional<AccelerateConfig> accelerate,
                                          std::optional<AccelerateConfig> trainer,
                                          const RunConfig& cfg) {
  DeepSpeedChoice out;
  if (!trainer) {
    if (accelerate && accelerate->distributed_type == "DEEPSPEED") {
      require_zero_optimization(*accelerate, accelerate->deepspeed_source, "");
      out.in_force = in_force_line(*accelerate, "", cfg);
    }
    out.config = std::move(accelerate);
    return out;
  }
  const std::string key = "trainer.deepspeed";
  const std::string origin = fmt::format("{}: {}{}", cfg.key_at(key), key, cfg.where(key));
  // Settings inline have `origin` as their path (deepspeed_from_trainer), a file its own.
  require_zero_optimization(*trainer, origin,
                            trainer->path == origin ? "" : fmt::format(" of {}", trainer->path));
  if (!accelerate) {
    out.in_force = in_force_line(*trainer, "", cfg);
    out.config = std::move(trainer);
    return out;
  }
  const AccelerateConfig& acc = *accelerate;
  if (acc.distributed_type == "DEEPSPEED")
    if (const std::string lines = fields_ignored_beside_deepspeed_json(acc.deepspeed_fields);
        !lines.empty())
      fail(
          "{} gives DeepSpeed settings, and the accelerate config {} (distributed_type "
          "DEEPSPEED) gives DeepSpeed settings of its own, which accelerate refuses beside them "
          "(accelerate launch passes them on in ACCELERATE_CONFIG_DS_FIELDS, and the "
          "DeepSpeedPlugin TrainingArguments builds from {} raises {}); remove these from the "
          "accelerate config (set them in {}'s settings), or remove {}:{}",
          origin, acc.path, key, accelerate_ignored_variables_quote(), key, key, lines);
  AccelerateConfig c = std::move(*trainer);
  c.path = acc.path;  // the process settings are the accelerate config's
  c.num_processes = acc.num_processes;
  c.num_machines = acc.num_machines;
  c.machine_rank = acc.machine_rank;
  c.main_process_ip = acc.main_process_ip;
  c.main_process_port = acc.main_process_port;
  c.mixed_precision = acc.mixed_precision;
  c.use_cpu = acc.use_cpu;
  c.warnings.clear();  // trainer.deepspeed's and the accelerate config's are printed already
  c.notes.clear();
  std::string more;
  if (acc.distributed_type == "DEEPSPEED") {
    more = fmt::format(
        "; {} is not used: TrainingArguments builds the Accelerator's DeepSpeedPlugin from {}",
        acc.deepspeed_source, key);
  } else {
    more = fmt::format(
        "; DeepSpeed although the accelerate config {} has distributed_type {}: "
        "TrainingArguments sets ACCELERATE_USE_DEEPSPEED for {}",
        acc.path, acc.distributed_type, key);
    if (acc.distributed_type == "FSDP")
      out.warnings.push_back(fmt::format(
          "{}: distributed_type FSDP: its fsdp_config is not used, as {} turns DeepSpeed on and "
          "accelerate's AcceleratorState takes DeepSpeed before FSDP: the DeepSpeed settings of "
          "{} are in force",
          acc.path, cfg.key_ref(key), c.deepspeed_source));
  }
  out.in_force = in_force_line(c, more, cfg);
  out.config = std::move(c);
  return out;
}

}  // namespace zt::cli
