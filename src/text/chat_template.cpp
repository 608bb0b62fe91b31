#include "text/chat_template.h"

#include "core/error.h"
#include "text/jinja_interp.h"
#include "text/jinja_lexer.h"
#include "text/jinja_parser.h"

namespace zt::text {

struct ChatTemplate::Impl {
  std::string source;
  std::string name;
  jinja::Template tpl;
};

ChatTemplate::ChatTemplate(std::string source, std::string name) : impl_(std::make_unique<Impl>()) {
  impl_->source = std::move(source);
  impl_->name = std::move(name);
  impl_->tpl = jinja::parse(jinja::tokenize(impl_->source, impl_->name), impl_->name);
}

ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

RenderResult ChatTemplate::render(const Json& context) const {
  RenderResult r;
  try {
    jinja::Interp in(impl_->tpl, impl_->name, context);  // a context too deep raises here
    r.text = in.run(&r.generation_spans);
    r.spans_before_output = in.spans_before_output();
  } catch (const jinja::RenderError& e) {  // raised outside any statement
    fail("{}: {}", impl_->name, e.what());
  }
  return r;
}

bool ChatTemplate::has_generation_blocks() const { return impl_->tpl.has_generation; }

const std::string& ChatTemplate::source() const { return impl_->source; }

Json chat_template_context(const TokenizerConfig& cfg, const Json& messages, const Json& tools,
                           bool add_generation_prompt, const Json& extra) {
  if (!messages.is_array())
    fail("chat template input: 'messages' must be a list, got {}", messages.type_name());
  if (!extra.is_object()) fail("chat template input: extra arguments must be an object");
  if (messages.empty())
    fail("chat template input: cannot apply a chat template to an empty conversation");
  Json ctx = Json::object();
  const std::pair<const char*, const std::optional<std::string>*> tokens[] = {
      {"bos_token", &cfg.bos_token},  {"eos_token", &cfg.eos_token}, {"unk_token", &cfg.unk_token},
      {"sep_token", &cfg.sep_token},  {"pad_token", &cfg.pad_token}, {"cls_token", &cfg.cls_token},
      {"mask_token", &cfg.mask_token}};
  for (const auto& [key, value] : tokens)
    if (*value) ctx[key] = **value;
  for (auto it = extra.begin(); it != extra.end(); ++it) {
    const std::string& k = it.key();
    if (k == "messages" || k == "tools" || k == "documents" || k == "add_generation_prompt")
      fail("chat template input: '{}' cannot also be an extra template argument", k);
    ctx[k] = it.value();
  }
  // _normalize_chat_messages (drop None-valued keys), then _alias_reasoning_fields.
  Json msgs = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    if (!m.is_object())
      fail("chat template input: messages[{}] must be an object, got {}", i, m.type_name());
    Json clean = Json::object();
    for (auto it = m.begin(); it != m.end(); ++it)
      if (!it.value().is_null()) clean[it.key()] = it.value();
    const Json* reasoning = nullptr;
    for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
      if (clean.contains(key)) {
        reasoning = &clean[key];
        break;
      }
    }
    if (reasoning) {
      Json aliased = Json::object();
      aliased["thinking"] = *reasoning;
      for (auto it = clean.begin(); it != clean.end(); ++it) aliased[it.key()] = it.value();
      aliased["reasoning_content"] = *reasoning;
      clean = std::move(aliased);
    }
    msgs.push_back(std::move(clean));
  }
  ctx["messages"] = std::move(msgs);
  ctx["tools"] = tools;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = add_generation_prompt;
  return ctx;
}

}  // namespace zt::text
