// Dataset kind detection and per-row validation (SFT_SEMANTICS §1; TRL `is_conversational`,
// `is_conversational_from_value`, `maybe_convert_to_chatml`).
#include "data/sft_rows.h"

#include <fmt/ranges.h>

#include "core/error.h"
#include "io/json_check.h"

namespace zt::data {
namespace {

std::vector<std::string> column_names(const Json& row) {
  std::vector<std::string> out;
  for (const auto& [k, v] : row.items()) out.push_back(k);
  return out;
}

// TRL's test: a non-empty list whose first element is an object with the given keys.
bool looks_like_messages(const Json& v, std::string_view key_a, std::string_view key_b = {}) {
  if (!v.is_array() || v.empty() || !v[0].is_object()) return false;
  if (!v[0].contains(key_a)) return false;
  return key_b.empty() || v[0].contains(key_b);
}

// ShareGPT's `from` values zerotune maps (README: a chosen difference; TRL renames the key only);
// any other value is the role as it is.
std::string role_from_sharegpt(const std::string& from) {
  if (from == "human") return "user";
  if (from == "gpt") return "assistant";
  return from;
}

// Checks (and for ShareGPT converts) one message list as TRL 0.25.1 reads it; returns the checked
// copy. TRL passes each message to the chat template as it is: any role, content of any type (a
// string, a list of content parts, …), other keys kept, so only what TRL itself needs is checked:
// a list of objects, whose role (where given) is a string, and whose first message has a role and
// a content, which TRL's is_conversational reads to tell a conversation (without them TRL does not
// read the row as one, and fails on it). Null values count as absent: TRL's remove_none_values
// drops them first. A later message without a role or content goes to the template as it is (as
// in TRL; a template that reads it raises its own error).
Json checked_messages(const Json& v, std::string_view column, bool sharegpt, int64_t r,
                      std::string_view file) {
  if (!v.is_array()) {
    fail("{}: row {}: column '{}' is {}, expected a list of messages", file, r, column,
         v.type_name());
  }
  const char* role_key = sharegpt ? "from" : "role";
  const char* content_key = sharegpt ? "value" : "content";
  Json out = Json::array();
  for (size_t k = 0; k < v.size(); ++k) {
    const Json& m = v[k];
    if (!m.is_object()) {
      fail(
          "{}: row {}: column '{}', message {} is {}, expected an object with '{}' and "
          "'{}'",
          file, r, column, k, m.type_name(), role_key, content_key);
    }
    const auto role = m.find(role_key);
    const bool has_role = role != m.end() && !role->is_null();
    if (k == 0) {
      for (const char* key : {role_key, content_key}) {
        const auto it = m.find(key);
        if (it != m.end() && !it->is_null()) continue;
        // A ShareGPT row already in role/content form is left so by maybe_convert_to_chatml.
        const char* chatml = key == role_key ? "role" : "content";
        if (sharegpt && !m.contains(key) && m.contains(chatml) && !m[chatml].is_null()) continue;
        fail(
            "{}: row {}: column '{}', message 0 has no '{}' (absent or null): TRL 0.25.1 reads a "
            "row as a conversation only when its first message has '{}' and '{}' "
            "(is_conversational), and fails on this one{}",
            file, r, column, key, role_key, content_key,
            column == "prompt" || column == "completion"
                ? " (or, since it checks 'prompt' or 'completion' as Python's string hash "
                  "orders them, renders it as it is)"
                : "");
      }
    }
    if (has_role && !role->is_string()) {
      fail("{}: row {}: column '{}', message {}: '{}' is {}, expected a string", file, r, column, k,
           role_key, role->type_name());
    }
    if (!sharegpt) {
      out.push_back(m);
      continue;
    }
    // TRL's maybe_convert_to_chatml: `from` becomes `role`, `value` becomes `content`, each
    // assigned in that order (a new key goes last; an existing one keeps its place).
    Json conv = Json::object();
    for (const auto& [key, val] : m.items()) {
      if (key != "from" && key != "value") conv[key] = val;
    }
    if (m.contains("from"))
      conv["role"] = role->is_string() ? Json(role_from_sharegpt(role->get<std::string>())) : *role;
    if (m.contains("value")) conv["content"] = m["value"];
    out.push_back(std::move(conv));
  }
  return out;
}

const std::string& checked_string(const Json& row, const std::string& column, int64_t r,
                                  std::string_view file) {
  // An absent key reads as null (a JSON row lacking a column other rows have: read_rows).
  const auto it = row.find(column);
  if (it == row.end() || it->is_null()) fail_missing_value(file, r, column, "a string");
  if (!it->is_string()) {
    fail("{}: row {}: column '{}' is {}, expected a string", file, r, column, it->type_name());
  }
  return it->get_ref<const std::string&>();
}

const Json& checked_column(const Json& row, const std::string& column, int64_t r,
                           std::string_view file) {
  const auto it = row.find(column);
  if (it == row.end() || it->is_null()) fail_missing_value(file, r, column, "a list of messages");
  return *it;
}

// Removes null-valued keys from every object in `v` (v itself an object or a list), recursively.
void strip_null_keys(Json& v) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end();) {
      if (it->is_null()) {
        it = v.erase(it);
        continue;
      }
      if (it->is_structured()) strip_null_keys(*it);
      ++it;
    }
  } else if (v.is_array()) {
    for (Json& e : v)
      if (e.is_structured()) strip_null_keys(e);
  }
}

// The value of an optional structured column (tools, chat_template_kwargs): null when absent or
// null, a JSON string parsed, anything else as it is.
Json json_column(const Json& row, const char* column, int64_t r, std::string_view file) {
  const auto it = row.find(column);
  if (it == row.end() || it->is_null()) return Json();
  if (!it->is_string()) return *it;
  const std::string& text = it->get_ref<const std::string&>();
  // The parser would stop at a NUL and drop the rest of the string (JSON spells it \u0000).
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    fail("{}: row {}: column '{}' is a string of JSON with a NUL byte at offset {}", file, r,
         column, nul);
  if (find_too_deep_json(text))
    fail("{}: row {}: column '{}' is a string of JSON nested deeper than {}", file, r, column,
         kMaxJsonDepth);
  Json parsed = Json::parse(text, nullptr, false);
  if (parsed.is_discarded()) {
    fail("{}: row {}: column '{}' is a string that is not valid JSON", file, r, column);
  }
  // Cleaned as the same value given as an object is (remove_none_values).
  if (parsed.is_structured()) strip_null_keys(parsed);
  return parsed;
}

}  // namespace

void fail_missing_value(std::string_view where, int64_t r, std::string_view column,
                        std::string_view expected) {
  fail(
      "{}: row {}: column '{}' is missing or null, expected {} (TRL fails on such a row too; in a "
      "JSON file a row that lacks a column other rows have reads as null there, as HF datasets "
      "reads it)",
      where, r, column, expected);
}

void remove_none_values(Json& row) {
  if (!row.is_object()) return;
  for (auto& [key, value] : row.items())
    if (value.is_structured()) strip_null_keys(value);
}

std::string_view to_string(DatasetKind kind) {
  switch (kind) {
    case DatasetKind::kPromptCompletion:
      return "prompt/completion";
    case DatasetKind::kConversationalPromptCompletion:
      return "conversational prompt/completion";
    case DatasetKind::kLanguageModeling:
      return "language modeling";
    case DatasetKind::kConversationalLanguageModeling:
      return "conversational language modeling";
    case DatasetKind::kPreTokenised:
      return "pre-tokenised";
  }
  return "?";
}

std::string_view to_string(DropReason r) {
  switch (r) {
    case DropReason::kEmptyCompletion:
      return "empty_completion";
    case DropReason::kEmptyText:
      return "empty_text";
    case DropReason::kEmptyMessages:
      return "empty_messages";
    case DropReason::kNoTarget:
      return "no_target";
    case DropReason::kNoTargetAfterTruncation:
      return "no_target_after_truncation";
  }
  return "?";
}

DatasetFormat detect_format(const Json& first, const DataOptions& opts, std::string_view file,
                            std::span<const std::string> left_out) {
  if (!first.is_object()) fail("{}: row 0 is {}, expected an object", file, first.type_name());
  DatasetFormat f;
  f.text_field = opts.dataset_text_field;
  // TRL's `is_processed`: ids given are trained as they are, text columns beside them unread.
  if (first.contains("input_ids")) {
    f.kind = DatasetKind::kPreTokenised;
    return f;
  }
  // TRL's tests see every column of the file in its first row, null where row 0 lacks it
  // (read_rows): "prompt" in it makes every row a prompt/completion row (tokenize_fn), and a
  // null value is no list of messages (is_conversational).
  if (first.contains("prompt") && first.contains("completion")) {
    const Json& p = first["prompt"];
    if (p.is_null()) {
      fail_missing_value(file, 0, "prompt",
                         "a string or a list of messages: the file has 'prompt' and "
                         "'completion' columns, so every row is a prompt/completion row, and the "
                         "kind (plain or conversational) is told from row 0's prompt");
    }
    if (p.is_string()) {
      f.kind = DatasetKind::kPromptCompletion;
    } else if (looks_like_messages(p, "role")) {
      f.kind = DatasetKind::kConversationalPromptCompletion;
    } else if (p.is_array() && p.empty()) {
      fail(
          "{}: row 0: column 'prompt' is an empty list; the dataset kind is told from row 0, whose "
          "prompt must be a string or a non-empty list of messages with 'role' and 'content'",
          file);
    } else {
      fail(
          "{}: row 0: column 'prompt' is {}, expected a string or a list of messages with "
          "'role' and 'content'",
          file, p.type_name());
    }
    return f;
  }
  if (first.contains("messages") && !first["messages"].is_null()) {
    if (!first["messages"].is_array()) {
      fail("{}: row 0: column 'messages' is {}, expected a list of messages", file,
           first["messages"].type_name());
    }
    f.kind = DatasetKind::kConversationalLanguageModeling;
    return f;
  }
  if (first.contains("conversations") &&
      looks_like_messages(first["conversations"], "from", "value")) {
    f.kind = DatasetKind::kConversationalLanguageModeling;
    f.sharegpt = true;
    return f;
  }
  if (first.contains(opts.dataset_text_field)) {
    f.kind = DatasetKind::kLanguageModeling;
    return f;
  }
  const std::string kinds = fmt::format(
      "columns 'prompt' and 'completion', or 'messages', or 'conversations' (from/value), or '{}' "
      "(dataset_text_field), or 'input_ids' (pre-tokenised); found columns [{}]",
      opts.dataset_text_field, fmt::join(column_names(first), ", "));
  if (first.contains("prompt")) {
    fail(
        "{}: missing column 'completion': a 'prompt' column needs a 'completion' column; found "
        "columns [{}]",
        file, fmt::join(column_names(first), ", "));
  }
  if (const auto it = first.find("conversations");
      it != first.end() && it->is_array() && it->empty())
    fail(
        "{}: row 0: column 'conversations' is an empty list; the dataset kind is told from row 0, "
        "whose conversations must be a non-empty list of messages with 'from' and 'value'",
        file);
  if (const auto it = first.find("messages"); it != first.end() && it->is_null()) {
    fail_missing_value(file, 0, "messages",
                       fmt::format("a list of messages: the dataset kind is told from row 0, as "
                                   "TRL tells it from the first row (no text column '{}' either)",
                                   opts.dataset_text_field));
  }
  // Columns of a type zerotune does not read (binary, timestamp …) are not in the row: name them.
  const std::string unread = left_out.empty()
                                 ? ""
                                 : fmt::format("; left out, of a type zerotune does not read: {}",
                                               fmt::join(left_out, ", "));
  fail("{}: cannot tell the dataset kind: expected {}{}", file, kinds, unread);
}

ExtractedRow extract_row(const Json& row, const DatasetFormat& format, int64_t r,
                         std::string_view file) {
  if (!row.is_object()) fail("{}: row {} is {}, expected an object", file, r, row.type_name());
  ExtractedRow x;
  SftRow& out = x.row;
  out.tools = json_column(row, "tools", r, file);
  out.chat_template_kwargs = json_column(row, "chat_template_kwargs", r, file);
  if (!out.chat_template_kwargs.is_null() && !out.chat_template_kwargs.is_object()) {
    fail(
        "{}: row {}: column 'chat_template_kwargs' is {}, expected an object of template "
        "variables such as {{\"enable_thinking\": false}}",
        file, r, out.chat_template_kwargs.type_name());
  }
  switch (format.kind) {
    case DatasetKind::kPromptCompletion:
      out.prompt = checked_string(row, "prompt", r, file);
      out.completion = checked_string(row, "completion", r, file);
      if (out.completion.empty()) x.skipped = DropReason::kEmptyCompletion;
      if (const auto t = row.find("text"); t != row.end() && t->is_string())
        out.text_column = t->get<std::string>();
      break;
    case DatasetKind::kConversationalPromptCompletion:
      out.prompt_messages =
          checked_messages(checked_column(row, "prompt", r, file), "prompt", false, r, file);
      out.completion_messages = checked_messages(checked_column(row, "completion", r, file),
                                                 "completion", false, r, file);
      if (out.completion_messages.empty()) x.skipped = DropReason::kEmptyCompletion;
      break;
    case DatasetKind::kLanguageModeling:
      out.completion = checked_string(row, format.text_field, r, file);
      if (out.completion.empty()) x.skipped = DropReason::kEmptyText;
      break;
    case DatasetKind::kConversationalLanguageModeling: {
      const char* col = format.sharegpt ? "conversations" : "messages";
      out.completion_messages =
          checked_messages(checked_column(row, col, r, file), col, format.sharegpt, r, file);
      if (out.completion_messages.empty()) x.skipped = DropReason::kEmptyMessages;
      break;
    }
    case DatasetKind::kPreTokenised:
      fail("{}: row {}: pre-tokenised rows are read by pretokenised_example", file, r);
  }
  return x;
}

}  // namespace zt::data
