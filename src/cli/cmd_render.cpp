// `zerotune render --tokenizer DIR FILE`: the chat template of a tokenizer applied to every row of
// a JSONL file, as transformers' `tokenizer.apply_chat_template(messages, tools=…,
// add_generation_prompt=…, tokenize=False, **other_keys)` renders it after TRL's
// remove_none_values, i.e. the text SFT training tokenises.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/deferred_stdout.h"
#include "core/error.h"
#include "data/sft_rows.h"
#include "io/json.h"
#include "io/json_check.h"
#include "text/chat_template.h"

namespace zt::cli {

namespace {

// One parsed template per distinct source (the default and, for rows with tools, "tool_use").
const text::ChatTemplate& template_for(const text::TokenizerConfig& cfg, bool has_tools,
                                       std::map<const std::string*, text::ChatTemplate>& cache) {
  const std::string& source = text::select_chat_template(cfg, has_tools);
  auto it = cache.find(&source);
  if (it == cache.end()) {
    std::string name = &source == &*cfg.chat_template ? cfg.chat_template_origin
                                                      : (cfg.dir / "tool_use template").string();
    it = cache.emplace(&source, text::ChatTemplate(source, name)).first;
  }
  return it->second;
}

}  // namespace

// FILE holds one JSON object per line: "messages" (a list of messages, required),
// "add_generation_prompt" (bool, default false), "tools" (optional list), and any other keys,
// which become extra template variables (e.g. "enable_thinking"). Inside each value, keys whose
// value is null are removed at any depth first, as training does (data::remove_none_values, TRL's
// remove_none_values). Blank lines are skipped. Prints
// one JSON string (the rendered text) per row, in order. Errors name FILE:LINE; after one nothing
// is printed (the output is held back, spooled past 1 MiB, until every row rendered).
constexpr CommandUsage kUsage{"render", "--tokenizer DIR FILE.jsonl"};

int cmd_render(const Args& args) {
  CLI::App app{"Render the chat template of a tokenizer over a JSONL file of conversations"};
  std::string tokenizer_dir, file;
  app.add_option("--tokenizer", tokenizer_dir, "HF tokenizer directory (tokenizer_config.json)")
      ->required();
  app.add_option("file", file, "JSONL file of {\"messages\": […], …} rows")->required();
  if (auto rc = parse_command_line(app, kUsage, args)) return *rc;

  const text::TokenizerConfig cfg = text::load_tokenizer_config(tokenizer_dir);
  std::map<const std::string*, text::ChatTemplate> cache;
  // A directory opens as a stream that fails at its first read: it printed nothing and exited 0.
  if (std::filesystem::is_directory(file)) fail("{}: is a directory; expected a JSONL file", file);
  std::ifstream in(file);
  if (!in) fail("{}: cannot open file", file);
  std::string line;
  DeferredStdout out;
  size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (std::all_of(line.begin(), line.end(),
                    [](char c) { return std::isspace(static_cast<unsigned char>(c)); }))
      continue;
    check_json_text(line, file, lineno);
    try {
      Json row;
      try {
        row = Json::parse(line);
      } catch (const Json::exception& e) {
        fail("invalid JSON: {}", json_error_reason(e));
      }
      if (!row.is_object()) fail("expected a JSON object, got {}", row.type_name());
      // What training renders: null-valued keys removed at any depth inside each value (messages,
      // tools, tool-call arguments), as TRL's remove_none_values before formatting.
      data::remove_none_values(row);
      auto msgs = row.find("messages");
      if (msgs == row.end()) fail("the row has no \"messages\" key");
      bool agp = false;
      if (auto it = row.find("add_generation_prompt"); it != row.end() && !it->is_null()) {
        if (!it->is_boolean())
          fail("\"add_generation_prompt\" must be true or false, got {}", it->dump());
        agp = it->get<bool>();
      }
      Json tools = nullptr;
      if (auto it = row.find("tools"); it != row.end() && !it->is_null()) {
        if (!it->is_array()) fail("\"tools\" must be a list, got {}", it->type_name());
        tools = *it;
      }
      Json extra = Json::object();
      for (auto it = row.begin(); it != row.end(); ++it)
        if (it.key() != "messages" && it.key() != "add_generation_prompt" && it.key() != "tools")
          extra[it.key()] = it.value();
      const text::ChatTemplate& tpl = template_for(cfg, !tools.is_null(), cache);
      Json ctx = text::chat_template_context(cfg, *msgs, tools, agp, extra);
      out.append(Json(tpl.render(ctx).text).dump(-1, ' ', false, Json::error_handler_t::replace));
      out.append("\n");
    } catch (const Error& e) {
      fail("{}:{}: {}", file, lineno, e.what());
    }
  }
  if (in.bad()) fail("{}: read error after line {}", file, lineno);
  out.commit();
  return 0;
}

}  // namespace zt::cli
