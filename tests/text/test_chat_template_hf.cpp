// The Qwen2.5 and Qwen3 chat templates (and a {% generation %} template) rendered byte-identically
// to transformers' apply_chat_template(tokenize=False) over hand-written, no_robots and
// kto_en_demo conversations (tests/data/chat_template/hf_render.json, made by
// tools/make_chat_template_goldens.py); plus tokenizer-directory loading and the template context.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "core/error.h"
#include "core/zt_test_util.h"
#include "io/json.h"
#include "text/chat_template.h"

namespace zt::text {
namespace {

namespace fs = std::filesystem;
using zt::testing::expect_error;
using zt::testing::TempDir;

fs::path tokenizer_dir(const std::string& name) {
  return fs::path(ZT_SHARED_DATA) / "tokenizers" / name;
}
fs::path golden_dir() { return fs::path(ZT_TEST_DATA) / "chat_template"; }

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

TEST(ChatTemplateHf, QwenTemplatesMatchTransformers) {
  Json g = Json::parse(slurp(golden_dir() / "hf_render.json"));
  std::map<std::string, TokenizerConfig> configs;
  for (const char* name : {"qwen2.5-instruct", "qwen3"})
    configs[name] = load_tokenizer_config(tokenizer_dir(name));
  std::map<std::string, ChatTemplate> templates;
  auto get_template = [&](const std::string& key,
                          const std::string& source) -> const ChatTemplate& {
    auto it = templates.find(key);
    if (it == templates.end()) it = templates.emplace(key, ChatTemplate(source, key)).first;
    return it->second;
  };
  size_t rendered = 0, with_spans = 0;
  std::map<std::string, size_t> per_source;
  for (const Json& c : g["cases"]) {
    const Json& conv = g["conversations"][c["conversation"].get<size_t>()];
    const TokenizerConfig& cfg = configs.at(c["tokenizer"].get<std::string>());
    const bool tools = c["tools"].get<bool>();
    std::string key = c["tokenizer"].get<std::string>();
    std::string source = select_chat_template(cfg, tools);
    if (c.contains("template")) {
      key = c["template"].get<std::string>();
      source = slurp(golden_dir() / key);
    }
    Json ctx = chat_template_context(cfg, conv["messages"], tools ? g["tools"] : Json(nullptr),
                                     c["add_generation_prompt"].get<bool>(), c["kwargs"]);
    RenderResult r = get_template(key, source).render(ctx);
    SCOPED_TRACE(::testing::Message()
                 << key << " conversation " << c["conversation"] << " agp "
                 << c["add_generation_prompt"] << " tools " << tools << " " << c["kwargs"].dump());
    EXPECT_EQ(r.text, c["expected"].get<std::string>());
    if (c.contains("spans")) {
      std::vector<std::pair<size_t, size_t>> spans;
      for (const auto& s : c["spans"]) spans.emplace_back(s[0].get<size_t>(), s[1].get<size_t>());
      EXPECT_EQ(r.generation_spans, spans);
      with_spans += !spans.empty();
    } else {
      EXPECT_TRUE(r.generation_spans.empty());
    }
    ++rendered;
    ++per_source[conv["source"].get<std::string>()];
  }
  EXPECT_GE(rendered, 190u);
  EXPECT_GE(with_spans, 30u);
  EXPECT_GE(per_source["no_robots"], 50u);
  EXPECT_GE(per_source["kto_en_demo"], 20u);
  EXPECT_GE(per_source["hand"], 60u);
}

TEST(ChatTemplateHf, GenerationSpansCoverTheAssistantTurns) {
  // Independent of the goldens: each span of the generation template is exactly an assistant
  // message's text followed by <|im_end|>.
  TokenizerConfig cfg = load_tokenizer_config(tokenizer_dir("qwen3"));
  ChatTemplate t(slurp(golden_dir() / "qwen_generation.jinja"), "qwen_generation.jinja");
  Json msgs = Json::array({{{"role", "user"}, {"content", "2+2?"}},
                           {{"role", "assistant"}, {"content", "4 ✓"}},
                           {{"role", "user"}, {"content", "and 3+3?"}},
                           {{"role", "assistant"}, {"content", " 6 "}}});
  RenderResult r = t.render(chat_template_context(cfg, msgs, nullptr, false));
  ASSERT_EQ(r.generation_spans.size(), 2u);
  auto span_text = [&](size_t i) {
    auto [b, e] = r.generation_spans[i];
    return r.text.substr(b, e - b);
  };
  EXPECT_EQ(span_text(0), "4 ✓<|im_end|>");
  EXPECT_EQ(span_text(1), "6<|im_end|>");
  EXPECT_EQ(r.text.substr(r.generation_spans[0].first - 22, 22), "<|im_start|>assistant\n");
}

TEST(TokenizerConfig, LoadsQwenDirectories) {
  TokenizerConfig q = load_tokenizer_config(tokenizer_dir("qwen2.5-instruct"));
  EXPECT_EQ(q.eos_token, "<|im_end|>");
  EXPECT_EQ(q.pad_token, "<|endoftext|>");
  EXPECT_FALSE(q.bos_token);
  EXPECT_FALSE(q.unk_token);
  EXPECT_FALSE(q.add_bos_token.value_or(false));
  ASSERT_TRUE(q.chat_template);
  EXPECT_EQ(q.chat_template->rfind("{%- if tools %}", 0), 0u);
  EXPECT_NE(q.chat_template->find("You are Qwen, created by Alibaba Cloud."), std::string::npos);
  EXPECT_TRUE(q.named_templates.empty());
  EXPECT_EQ(
      q.chat_template_origin,
      (tokenizer_dir("qwen2.5-instruct") / "tokenizer_config.json").string() + ":chat_template");
  TokenizerConfig q3 = load_tokenizer_config(tokenizer_dir("qwen3"));
  EXPECT_NE(q3.chat_template->find("reasoning_content"), std::string::npos);
  EXPECT_EQ(&select_chat_template(q3, true), &*q3.chat_template);
}

TEST(TokenizerConfig, TemplateListTokenObjectsAndTemplateFiles) {
  TempDir d;
  write(d / "tokenizer_config.json", R"({
    "chat_template": [{"name": "default", "template": "D{{ x }}"}, {"name": "tool_use", "template": "T"}],
    "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
    "eos_token": "</s>", "pad_token": null, "unk_token": {"content": "<unk>"}, "add_bos_token": true})");
  TokenizerConfig c = load_tokenizer_config(d.path());
  EXPECT_EQ(c.chat_template, "D{{ x }}");
  EXPECT_EQ(c.bos_token, "<s>");
  EXPECT_EQ(c.eos_token, "</s>");
  EXPECT_FALSE(c.pad_token);
  EXPECT_EQ(c.unk_token, "<unk>");
  EXPECT_TRUE(c.add_bos_token.value_or(false));
  ASSERT_EQ(c.named_templates.size(), 2u);
  EXPECT_EQ(select_chat_template(c, false), "D{{ x }}");
  EXPECT_EQ(select_chat_template(c, true), "T");

  // chat_template.json (processor file) overrides the config; chat_template.jinja wins over both.
  write(d / "chat_template.json", R"({"chat_template": "J"})");
  EXPECT_EQ(load_tokenizer_config(d.path()).chat_template, "J");
  write(d / "chat_template.jinja", "JINJA {{ 1 }}\n");
  TokenizerConfig j = load_tokenizer_config(d.path());
  EXPECT_EQ(j.chat_template, "JINJA {{ 1 }}\n");
  EXPECT_EQ(j.chat_template_origin, (d / "chat_template.jinja").string());
  EXPECT_EQ(select_chat_template(j, false), "JINJA {{ 1 }}\n");

  fs::create_directories(d / "additional_chat_templates");
  write(d / "additional_chat_templates" / "rag.jinja", "R");
  // The template files replace the config's list whole (transformers' from_pretrained; golden
  // layouts config_named_and_jinja / config_named_and_additional of
  // tests/data/chat_template/export_layouts.golden.json): chat_template.jinja's default and rag,
  // not the config's tool_use (it was kept: tool rows trained with a template TRL does not use).
  TokenizerConfig a = load_tokenizer_config(d.path());
  EXPECT_EQ(a.named_templates, (std::vector<std::pair<std::string, std::string>>{
                                   {"default", "JINJA {{ 1 }}\n"}, {"rag", "R"}}));
  EXPECT_EQ(select_chat_template(a, true), "JINJA {{ 1 }}\n");
}

// A template file holding a byte that is not UTF-8 (a Latin-1 é): an error naming the file, line
// and byte, wherever the template comes from (it was an "internal error", exit 70, from the JSON
// library when the text was later stored, even for data that never used the template).
TEST(TokenizerConfig, TemplateFileThatIsNotUtf8IsNamed) {
  TempDir d;
  write(d / "tokenizer_config.json", R"({"eos_token": "</s>"})");
  write(d / "chat_template.jinja", "{% for m in messages %}\n{{ m.content }}\xe9{% endfor %}");
  expect_error([&] { load_tokenizer_config(d.path()); },
               {(d / "chat_template.jinja").string() +
                ":2: byte 0xE9 is not UTF-8 (byte 39 of the file); a chat template must be UTF-8"});
  fs::remove(d / "chat_template.jinja");
  fs::create_directories(d / "additional_chat_templates");
  write(d / "additional_chat_templates" / "tool_use.jinja", "ok\xff");
  expect_error([&] { load_tokenizer_config(d.path()); },
               {(d / "additional_chat_templates" / "tool_use.jinja").string() +
                ":1: byte 0xFF is not UTF-8 (byte 2 of the file)"});
  write(d / "t.jinja", "caf\xc3\xa9 {{ x }}");  // é in UTF-8 is fine
  EXPECT_EQ(read_template_file(d / "t.jinja"), "caf\xc3\xa9 {{ x }}");
}

// tokenizer.json without tokenizer_config.json, as transformers' PreTrainedTokenizerFast loads it:
// no named special token, no add_bos_token, no chat template — except what special_tokens_map.json
// and the template files hold, which transformers reads without the config too.
TEST(TokenizerConfig, TokenizerJsonAloneGetsTransformersDefaults) {
  TempDir d;
  write(d / "tokenizer.json", "{}");  // not read here (text::Tokenizer::load reads it)
  TokenizerConfig c = load_tokenizer_config(d.path());
  EXPECT_FALSE(c.has_config_file);
  EXPECT_EQ(c.dir, d.path());
  for (const auto* t : {&c.bos_token, &c.eos_token, &c.pad_token, &c.unk_token, &c.sep_token,
                        &c.cls_token, &c.mask_token})
    EXPECT_FALSE(*t);
  EXPECT_FALSE(c.add_bos_token.value_or(false));
  EXPECT_FALSE(c.chat_template);
  EXPECT_TRUE(c.named_templates.empty());
  expect_error([&] { select_chat_template(c, false); },
               {d.path().string() + ": the tokenizer has no chat template (tokenizer_config.json "
                                    "'chat_template', chat_template.jinja or a 'default' named "
                                    "template)"});
  write(d / "special_tokens_map.json", R"({"eos_token": "</s>", "bos_token": {"content": "<s>"}})");
  write(d / "chat_template.jinja", "{{ eos_token }}");
  c = load_tokenizer_config(d.path());
  EXPECT_FALSE(c.has_config_file);
  EXPECT_EQ(c.eos_token, "</s>");
  EXPECT_EQ(c.bos_token, "<s>");
  EXPECT_FALSE(c.pad_token);
  EXPECT_EQ(c.chat_template, "{{ eos_token }}");
  EXPECT_EQ(c.chat_template_origin, (d / "chat_template.jinja").string());
  write(d / "tokenizer_config.json", "{}");
  EXPECT_TRUE(load_tokenizer_config(d.path()).has_config_file);
}

// Named templates without a "default" one: the error is transformers' get_chat_template's
// ("multiple chat templates with no default specified", the names sorted), naming where they were
// read; it said "the tokenizer has no chat template". Rows with tools still get tool_use.
TEST(TokenizerConfig, NamedTemplatesWithoutDefaultSayWhichNamesThereAre) {
  TempDir d;
  write(d / "tokenizer.json", "{}");
  write(
      d / "tokenizer_config.json",
      R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "rag", "template": "R"}]})");
  const auto no_default = [](const std::string& where, const std::string& names) {
    return where +
           ": the tokenizer has multiple chat templates with no default specified (transformers "
           "raises here too); available template names are [" +
           names +
           "]. Add a 'default' one (chat_template.jinja), or pass the template to use "
           "(trainer.chat_template_path)";
  };
  TokenizerConfig c = load_tokenizer_config(d.path());
  EXPECT_EQ(select_chat_template(c, true), "T");
  EXPECT_EQ(
      zt::testing::error_of([&] { select_chat_template(c, false); }),
      no_default((d / "tokenizer_config.json").string() + ":chat_template", "'rag', 'tool_use'"));
  // The files replace the config's list whole, as transformers reads them: tool_use alone here.
  fs::create_directories(d / "additional_chat_templates");
  write(d / "additional_chat_templates" / "tool_use.jinja", "FT");
  c = load_tokenizer_config(d.path());
  EXPECT_EQ(c.named_templates,
            (std::vector<std::pair<std::string, std::string>>{{"tool_use", "FT"}}));
  EXPECT_EQ(zt::testing::error_of([&] { select_chat_template(c, false); }),
            no_default((d / "additional_chat_templates").string() + "/", "'tool_use'"));
  // chat_template.jinja alone beside a config list: one template, the list not looked at.
  fs::remove_all(d / "additional_chat_templates");
  write(d / "chat_template.jinja", "J");
  c = load_tokenizer_config(d.path());
  EXPECT_EQ(c.chat_template, "J");
  EXPECT_TRUE(c.named_templates.empty());
  EXPECT_EQ(select_chat_template(c, true), "J");
}

TEST(TokenizerConfig, ErrorsNameTheFileAndKey) {
  TempDir d;
  expect_error([&] { load_tokenizer_config(d.path()); },
               {(d / "tokenizer_config.json").string() +
                ": file not found, and no tokenizer.json beside it (expected an HF tokenizer "
                "directory)"});
  write(d / "tokenizer_config.json", "{\"eos_token\": ");
  expect_error([&] { load_tokenizer_config(d.path()); },
               {(d / "tokenizer_config.json").string(), "invalid JSON"});
  write(d / "tokenizer_config.json", R"({"eos_token": 5})");
  expect_error(
      [&] { load_tokenizer_config(d.path()); },
      {"tokenizer_config.json: 'eos_token' must be a string, an AddedToken object", "got 5"});
  write(d / "tokenizer_config.json", R"({"chat_template": [{"name": "x"}]})");
  expect_error([&] { load_tokenizer_config(d.path()); }, {"'chat_template[0]' must be an object"});
  write(d / "tokenizer_config.json", R"({"chat_template": 3})");
  expect_error([&] { load_tokenizer_config(d.path()); },
               {"'chat_template' must be a string or a list"});
  write(d / "tokenizer_config.json", R"({"add_bos_token": "yes"})");
  expect_error([&] { load_tokenizer_config(d.path()); }, {"'add_bos_token' must be true or false"});
  write(d / "tokenizer_config.json", "{}");
  TokenizerConfig c = load_tokenizer_config(d.path());
  EXPECT_FALSE(c.chat_template);
  expect_error([&] { select_chat_template(c, false); },
               {d.path().string(), "has no chat template"});
}

TEST(ChatTemplateContext, MatchesTransformersNormalisation) {
  TokenizerConfig cfg;
  cfg.eos_token = "</s>";
  cfg.pad_token = "<pad>";
  Json msgs = Json::parse(R"([{"role": "user", "content": "q", "name": null},
    {"role": "assistant", "content": "a", "reasoning": "why", "tool_calls": null},
    {"role": "assistant", "thinking": "t", "content": "b", "reasoning_content": "rc"}])");
  Json ctx =
      chat_template_context(cfg, msgs, nullptr, true, Json{{"eos_token", "<eos>"}, {"k", 1}});
  // None-valued keys dropped; reasoning copied to `thinking` (first) and `reasoning_content`
  // (last).
  EXPECT_EQ(ctx["messages"][0].dump(), R"({"role":"user","content":"q"})");
  EXPECT_EQ(
      ctx["messages"][1].dump(),
      R"({"thinking":"why","role":"assistant","content":"a","reasoning":"why","reasoning_content":"why"})");
  EXPECT_EQ(ctx["messages"][2].dump(),
            R"({"thinking":"t","role":"assistant","content":"b","reasoning_content":"rc"})");
  EXPECT_EQ(ctx["eos_token"], "<eos>");  // extra kwargs override the special tokens
  EXPECT_EQ(ctx["pad_token"], "<pad>");
  EXPECT_FALSE(ctx.contains("bos_token"));
  EXPECT_TRUE(ctx["tools"].is_null());
  EXPECT_TRUE(ctx.contains("documents"));
  EXPECT_EQ(ctx["add_generation_prompt"], true);
  EXPECT_EQ(ctx["k"], 1);
  // `tools` is defined (as None) exactly as in transformers.
  EXPECT_EQ(ChatTemplate("{{ tools is defined }}{{ tools is none }}", "t").render(ctx).text,
            "TrueTrue");
  expect_error(
      [&] {
        chat_template_context(cfg, msgs, nullptr, false, Json{{"messages", 1}});
      },
      {"'messages' cannot also be an extra template argument"});
  expect_error([&] { chat_template_context(cfg, Json::array({1}), nullptr, false); },
               {"messages[0] must be an object, got number"});
}

}  // namespace
}  // namespace zt::text
