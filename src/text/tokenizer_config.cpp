// Reading a tokenizer directory's chat template and special tokens the way transformers'
// `PreTrainedTokenizerBase.from_pretrained` does (tokenization_utils_base.py).
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/unique_keys.h"
#include "text/chat_template.h"
#include "text/unicode.h"

namespace zt::text {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) fail("{}: cannot open file", p.string());
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Json read_json(const fs::path& p) { return parse_json_unique_keys(read_text(p), p.string()); }

// transformers 4.57.1 TOKENIZER_MAPPING_NAMES: the model types whose fast tokenizer is one of the
// classes of transformers_tokenizer_class (AutoTokenizer's choice when neither
// tokenizer_config.json nor config.json names a tokenizer_class).
constexpr std::pair<std::string_view, std::string_view> kModelTypeTokenizer[] = {
    {"arcee", "LlamaTokenizer"},
    {"aria", "LlamaTokenizer"},
    {"aya_vision", "CohereTokenizer"},
    {"chameleon", "LlamaTokenizer"},
    {"code_llama", "CodeLlamaTokenizer"},
    {"cohere", "CohereTokenizer"},
    {"cohere2", "CohereTokenizer"},
    {"colpali", "LlamaTokenizer"},
    {"colqwen2", "Qwen2Tokenizer"},
    {"deepseek_v2", "LlamaTokenizer"},
    {"deepseek_v3", "LlamaTokenizer"},
    {"deepseek_vl", "LlamaTokenizer"},
    {"deepseek_vl_hybrid", "LlamaTokenizer"},
    {"diffllama", "LlamaTokenizer"},
    {"ernie4_5", "LlamaTokenizer"},
    {"ernie4_5_moe", "LlamaTokenizer"},
    {"falcon_mamba", "GPTNeoXTokenizer"},
    {"gemma", "GemmaTokenizer"},
    {"gemma2", "GemmaTokenizer"},
    {"gemma3", "GemmaTokenizer"},
    {"gemma3_text", "GemmaTokenizer"},
    {"gemma3n", "GemmaTokenizer"},
    {"gemma3n_text", "GemmaTokenizer"},
    {"gpt_neox", "GPTNeoXTokenizer"},
    {"idefics", "LlamaTokenizer"},
    {"idefics2", "LlamaTokenizer"},
    {"idefics3", "LlamaTokenizer"},
    {"internvl", "Qwen2Tokenizer"},
    {"jamba", "LlamaTokenizer"},
    {"janus", "LlamaTokenizer"},
    {"jetmoe", "LlamaTokenizer"},
    {"llama", "LlamaTokenizer"},
    {"llama4", "LlamaTokenizer"},
    {"llama4_text", "LlamaTokenizer"},
    {"llava", "LlamaTokenizer"},
    {"llava_next", "LlamaTokenizer"},
    {"llava_next_video", "LlamaTokenizer"},
    {"llava_onevision", "LlamaTokenizer"},
    {"mamba", "GPTNeoXTokenizer"},
    {"mamba2", "GPTNeoXTokenizer"},
    {"mistral", "LlamaTokenizer"},
    {"mixtral", "LlamaTokenizer"},
    {"mllama", "LlamaTokenizer"},
    {"mpt", "GPTNeoXTokenizer"},
    {"olmo", "GPTNeoXTokenizer"},
    {"olmo2", "GPTNeoXTokenizer"},
    {"olmoe", "GPTNeoXTokenizer"},
    {"paligemma", "LlamaTokenizer"},
    {"persimmon", "LlamaTokenizer"},
    {"phi3", "LlamaTokenizer"},
    {"phimoe", "LlamaTokenizer"},
    {"qwen2", "Qwen2Tokenizer"},
    {"qwen2_5_omni", "Qwen2Tokenizer"},
    {"qwen2_5_vl", "Qwen2Tokenizer"},
    {"qwen2_audio", "Qwen2Tokenizer"},
    {"qwen2_moe", "Qwen2Tokenizer"},
    {"qwen2_vl", "Qwen2Tokenizer"},
    {"qwen3", "Qwen2Tokenizer"},
    {"qwen3_moe", "Qwen2Tokenizer"},
    {"qwen3_next", "Qwen2Tokenizer"},
    {"qwen3_omni_moe", "Qwen2Tokenizer"},
    {"qwen3_vl", "Qwen2Tokenizer"},
    {"qwen3_vl_moe", "Qwen2Tokenizer"},
    {"recurrent_gemma", "GemmaTokenizer"},
    {"rwkv", "GPTNeoXTokenizer"},
    {"shieldgemma2", "GemmaTokenizer"},
    {"siglip2", "GemmaTokenizer"},
    {"stablelm", "GPTNeoXTokenizer"},
    {"t5gemma", "GemmaTokenizer"},
    {"video_llava", "LlamaTokenizer"},
    {"vipllava", "LlamaTokenizer"},
    {"voxtral", "LlamaTokenizer"},
    {"xlstm", "GPTNeoXTokenizer"},
    {"zamba", "LlamaTokenizer"},
    {"zamba2", "LlamaTokenizer"}};

}  // namespace

const TransformersTokenizerClass* transformers_tokenizer_class(std::string_view cls) {
  static constexpr TransformersTokenizerClass kClasses[] = {
      {"LlamaTokenizer", "<s>", "</s>", "<unk>", "", true, false},
      {"GemmaTokenizer", "<bos>", "<eos>", "<unk>", "<pad>", true, false},
      {"CodeLlamaTokenizer", "<s>", "</s>", "<unk>", "", true, false},
      {"CohereTokenizer", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>", "<UNK>", "", true, false},
      {"GPTNeoXTokenizer", "<|endoftext|>", "<|endoftext|>", "<|endoftext|>", "", false, false},
      {"Qwen2Tokenizer", "", "<|endoftext|>", "<|endoftext|>", "<|endoftext|>", false, false,
       /*rebuilds_post_processor=*/false}};
  if (cls.ends_with("Fast")) cls.remove_suffix(4);
  for (const TransformersTokenizerClass& c : kClasses)
    if (c.name == cls) return &c;
  return nullptr;
}

std::string read_template_file(const fs::path& p) {
  std::string s = read_text(p);
  if (const auto bad = unicode::find_invalid_utf8(s)) {
    const size_t line = 1 + static_cast<size_t>(std::count(s.begin(), s.begin() + *bad, '\n'));
    fail(
        "{}:{}: byte 0x{:02X} is not UTF-8 (byte {} of the file); a chat template must be UTF-8 "
        "text (transformers reads it as UTF-8 and stops here too)",
        p.string(), line, static_cast<unsigned char>(s[*bad]), *bad);
  }
  return s;
}

namespace {

// A token field: a string, an AddedToken object {"content": …}, or null.
std::optional<std::string> token_field(const Json& cfg, const char* key, const fs::path& file) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return c->get<std::string>();
  }
  fail("{}: '{}' must be a string, an AddedToken object {{\"content\": …}} or null, got {}",
       file.string(), key, it->dump());
}

// `chat_template` as a string, or a list of {"name", "template"} (transformers' multi-template
// format); fills `named` and returns the "default" template (if any).
std::optional<std::string> template_field(const Json& v, const fs::path& file, const char* key,
                                          std::vector<std::pair<std::string, std::string>>* named) {
  named->clear();  // replaces an earlier file's templates whole
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array())
    fail("{}: '{}' must be a string or a list of {{\"name\", \"template\"}}, got {}", file.string(),
         key, v.type_name());
  std::optional<std::string> dflt;
  for (size_t i = 0; i < v.size(); ++i) {
    const Json& e = v[i];
    if (!e.is_object() || !e.contains("name") || !e.contains("template") ||
        !e["name"].is_string() || !e["template"].is_string())
      fail("{}: '{}[{}]' must be an object with string 'name' and 'template'", file.string(), key,
           i);
    named->emplace_back(e["name"].get<std::string>(), e["template"].get<std::string>());
    if (named->back().first == "default") dflt = named->back().second;
  }
  return dflt;
}

void set_named(std::vector<std::pair<std::string, std::string>>& named, const std::string& name,
               const std::string& text) {
  for (auto& [n, t] : named) {
    if (n == name) {
      t = text;
      return;
    }
  }
  named.emplace_back(name, text);
}

}  // namespace

TokenizerConfig load_tokenizer_config(const fs::path& dir) {
  TokenizerConfig cfg;
  cfg.dir = dir;
  fs::path file = dir / "tokenizer_config.json";
  // Without it, transformers' PreTrainedTokenizerFast loads tokenizer.json with its defaults: no
  // named special token (special_tokens_map.json aside), no chat template (template files aside).
  cfg.has_config_file = fs::exists(file);
  if (!cfg.has_config_file && !fs::exists(dir / "tokenizer.json"))
    fail("{}: file not found, and no tokenizer.json beside it (expected an HF tokenizer directory)",
         file.string());
  Json j = cfg.has_config_file ? read_json(file) : Json::object();
  if (!j.is_object()) fail("{}: expected a JSON object, got {}", file.string(), j.type_name());

  if (auto it = j.find("chat_template"); it != j.end()) {
    cfg.chat_template = template_field(*it, file, "chat_template", &cfg.named_templates);
    cfg.chat_template_origin = file.string() + ":chat_template";
    cfg.named_templates_origin = cfg.chat_template_origin;
  }

  // Legacy processor file {"chat_template": …}; then chat_template.jinja, which transformers
  // >= 4.43 saves and which wins over the config's copy.
  if (fs::path p = dir / "chat_template.json"; fs::exists(p)) {
    Json cj = read_json(p);
    if (!cj.is_object() || !cj.contains("chat_template"))
      fail("{}: expected an object with a 'chat_template' key", p.string());
    cfg.chat_template =
        template_field(cj["chat_template"], p, "chat_template", &cfg.named_templates);
    cfg.chat_template_origin = p.string() + ":chat_template";
    cfg.named_templates_origin = cfg.chat_template_origin;
  }
  // Template files replace the config's template whole, as transformers 4.57.1's from_pretrained
  // reads them (tokenization_utils_base.py _from_pretrained): chat_template.jinja as "default" and
  // each additional_chat_templates/<name>.jinja as <name>; a "default" alone is one template, else
  // they are the named templates (a list in tokenizer_config.json is then not looked at).
  std::vector<std::pair<std::string, std::string>> files;
  std::string files_origin;
  if (fs::path p = dir / "chat_template.jinja"; fs::exists(p)) {
    files.emplace_back("default", read_template_file(p));
    files_origin = p.string();
  }
  if (fs::path extra = dir / "additional_chat_templates"; fs::is_directory(extra)) {
    std::vector<fs::path> extras;
    for (const auto& e : fs::directory_iterator(extra))
      if (e.path().extension() == ".jinja") extras.push_back(e.path());
    std::sort(extras.begin(), extras.end());
    for (const auto& p : extras) {
      set_named(files, p.stem().string(), read_template_file(p));
      if (p.stem() == "default") files_origin = p.string();  // replaces chat_template.jinja's
    }
    if (!extras.empty()) cfg.named_templates_origin = extra.string() + "/";
  }
  if (!files.empty()) {
    cfg.chat_template.reset();
    cfg.chat_template_origin.clear();
    cfg.named_templates.clear();
    for (const auto& [name, text] : files)
      if (name == "default") {
        cfg.chat_template = text;
        cfg.chat_template_origin = files_origin;
      }
    if (files.size() > 1 || files[0].first != "default") cfg.named_templates = std::move(files);
  }
  // Legacy special_tokens_map.json fills tokens the config leaves unset.
  Json stm = Json::object();
  if (fs::path p = dir / "special_tokens_map.json";
      fs::exists(p) && !j.contains("added_tokens_decoder"))
    stm = read_json(p);
  auto token = [&](const char* key) {
    auto v = token_field(j, key, file);
    if (v) {
      cfg.token_files[key] = file;
    } else if (stm.is_object()) {
      v = token_field(stm, key, dir / "special_tokens_map.json");
      if (v) cfg.token_files[key] = dir / "special_tokens_map.json";
    }
    return v;
  };
  cfg.bos_token = token("bos_token");
  cfg.eos_token = token("eos_token");
  cfg.unk_token = token("unk_token");
  cfg.sep_token = token("sep_token");
  cfg.pad_token = token("pad_token");
  cfg.cls_token = token("cls_token");
  cfg.mask_token = token("mask_token");
  for (const char* key : {"add_bos_token", "add_eos_token"}) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_boolean())
      fail("{}: '{}' must be true or false, got {}", file.string(), key, it->dump());
    (key == std::string_view("add_bos_token") ? cfg.add_bos_token : cfg.add_eos_token) =
        it->get<bool>();
  }
  if (auto it = j.find("tokenizer_class"); it != j.end() && !it->is_null()) {
    if (!it->is_string())
      fail("{}: 'tokenizer_class' must be a string, got {}", file.string(), it->dump());
    cfg.tokenizer_class = it->get<std::string>();
    cfg.tokenizer_class_origin = file.string() + " tokenizer_class";
  } else if (const fs::path model = dir / "config.json"; fs::exists(model)) {
    // AutoTokenizer's fallbacks: the model config's tokenizer_class, then its model_type's class.
    // A config.json that does not parse is the model loader's to report; here it names no class.
    Json mc;
    try {
      mc = read_json(model);
    } catch (const Error&) {
    }
    if (mc.is_object() && mc.contains("tokenizer_class") && mc["tokenizer_class"].is_string()) {
      cfg.tokenizer_class = mc["tokenizer_class"].get<std::string>();
      cfg.tokenizer_class_origin = model.string() + " tokenizer_class";
    } else if (mc.is_object() && mc.contains("model_type") && mc["model_type"].is_string()) {
      const std::string type = mc["model_type"].get<std::string>();
      for (const auto& [t, c] : kModelTypeTokenizer)
        if (t == type) {
          cfg.tokenizer_class = std::string(c);
          cfg.tokenizer_class_origin = fmt::format("{} model_type '{}'", model.string(), type);
        }
    }
  }
  // Those classes' default special tokens, for a key neither file names (an explicit null stays
  // None, as the keyword argument transformers passes then overrides the default).
  if (const TransformersTokenizerClass* d =
          cfg.tokenizer_class ? transformers_tokenizer_class(*cfg.tokenizer_class) : nullptr) {
    const std::pair<const char*, std::string_view> defaults[] = {
        {"bos_token", d->bos}, {"eos_token", d->eos}, {"unk_token", d->unk}, {"pad_token", d->pad}};
    for (const auto& [key, value] : defaults) {
      if (value.empty() || j.contains(key) || (stm.is_object() && stm.contains(key))) continue;
      std::optional<std::string>& slot = key == std::string_view("bos_token")   ? cfg.bos_token
                                         : key == std::string_view("eos_token") ? cfg.eos_token
                                         : key == std::string_view("unk_token") ? cfg.unk_token
                                                                                : cfg.pad_token;
      slot = std::string(value);
      cfg.token_files[key] = fmt::format("the {} default", *cfg.tokenizer_class);
    }
  }
  return cfg;
}

std::vector<std::pair<std::string, std::string>> chat_templates_by_name(
    const TokenizerConfig& cfg) {
  if (!cfg.named_templates.empty()) return cfg.named_templates;
  if (cfg.chat_template) return {{"default", *cfg.chat_template}};
  return {};
}

fs::path special_token_file(const TokenizerConfig& cfg, const std::string& key) {
  const auto it = cfg.token_files.find(key);
  return it != cfg.token_files.end() ? it->second : cfg.dir / "tokenizer_config.json";
}

const std::string& select_chat_template(const TokenizerConfig& cfg, bool has_tools) {
  if (has_tools)
    for (const auto& [n, t] : cfg.named_templates)
      if (n == "tool_use") return t;
  if (!cfg.chat_template && !cfg.named_templates.empty()) {
    // transformers' get_chat_template: "This model has multiple chat templates with no default
    // specified! … Available template names are ['rag', 'tool_use']." (sorted).
    std::vector<std::string> names;
    for (const auto& [n, t] : cfg.named_templates) names.push_back("'" + n + "'");
    std::sort(names.begin(), names.end());
    fail(
        "{}: the tokenizer has multiple chat templates with no default specified (transformers "
        "raises here too); available template names are [{}]. Add a 'default' one "
        "(chat_template.jinja), or pass the template to use (trainer.chat_template_path)",
        cfg.named_templates_origin.empty() ? cfg.dir.string() : cfg.named_templates_origin,
        fmt::format("{}", fmt::join(names, ", ")));
  }
  if (!cfg.chat_template)
    fail(
        "{}: the tokenizer has no chat template (tokenizer_config.json 'chat_template', "
        "chat_template.jinja or a 'default' named template)",
        cfg.dir.string());
  return *cfg.chat_template;
}

}  // namespace zt::text
