#include "data/data_options.h"

#include <cstdlib>

#include "core/error.h"

namespace zt::data {

std::string ConfigNames::bare_key(std::string_view option) const {
  const auto it = options.find(option);
  return it != options.end() ? it->second.first : std::string(option);
}

std::string ConfigNames::key(std::string_view option) const {
  const auto it = options.find(option);
  if (it == options.end() || source.empty()) return bare_key(option);
  const auto file = at.find(option);
  return (file != at.end() ? file->second : source) + ": " + it->second.first;
}

std::string ConfigNames::ref(std::string_view option) const {
  const auto file = at.find(option);
  if (file != at.end()) return bare_key(option) + " (" + file->second + ")";
  return bare_key(option) + where(option);
}

std::string ConfigNames::where(std::string_view option) const {
  const auto it = options.find(option);
  return it != options.end() ? it->second.second : std::string();
}

std::string ConfigNames::dataset(const std::filesystem::path& file) const {
  if (split.empty()) return file.string();
  return fmt::format("{} (the {} set, {})", file.string(), split, dataset_key);
}

CompletionMask parse_completion_mask(std::string_view value, std::string_view key) {
  if (value == "prefix") return CompletionMask::kPrefix;
  if (value == "positional") return CompletionMask::kPositional;
  fail(
      "{}: '{}' is not a valid value; expected 'prefix' (current TRL) or 'positional' (TRL <= 1.9)",
      key, value);
}

AssistantMask parse_assistant_mask(std::string_view value, std::string_view key) {
  if (value == "overlap") return AssistantMask::kOverlap;
  if (value == "char_to_token") return AssistantMask::kCharToToken;
  fail(
      "{}: '{}' is not a valid value; expected 'overlap' (transformers >= 5.24) or "
      "'char_to_token' (transformers 4.57)",
      key, value);
}

TruncationMode parse_truncation_mode(std::string_view value, std::string_view key) {
  if (value == "keep_start") return TruncationMode::kKeepStart;
  if (value == "keep_end") return TruncationMode::kKeepEnd;
  fail("{}: '{}' is not a valid value; expected 'keep_start' or 'keep_end'", key, value);
}

PrefixMismatch parse_prefix_mismatch(std::string_view value, std::string_view key) {
  if (value == "warn") return PrefixMismatch::kWarn;
  if (value == "error") return PrefixMismatch::kError;
  fail("{}: '{}' is not a valid value; expected 'warn' or 'error'", key, value);
}

PromptFormat parse_prompt_format(std::string_view value, std::string_view key) {
  if (value == "none" || value.empty()) return PromptFormat::kNone;
  if (value == "chat") return PromptFormat::kChat;
  fail("{}: '{}' is not a valid value; expected 'none' or 'chat'", key, value);
}

std::string_view to_string(PrefixMismatch v) {
  return v == PrefixMismatch::kWarn ? "warn" : "error";
}
std::string_view to_string(CompletionMask v) {
  return v == CompletionMask::kPrefix ? "prefix" : "positional";
}
std::string_view to_string(AssistantMask v) {
  return v == AssistantMask::kOverlap ? "overlap" : "char_to_token";
}
std::string_view to_string(TruncationMode v) {
  return v == TruncationMode::kKeepStart ? "keep_start" : "keep_end";
}
std::string_view to_string(PromptFormat v) { return v == PromptFormat::kNone ? "none" : "chat"; }

std::filesystem::path default_cache_dir() {
  if (const char* d = std::getenv("ZEROTUNE_CACHE_DIR"); d != nullptr && *d != '\0') return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') {
    return std::filesystem::path(x) / "zerotune";
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    return std::filesystem::path(h) / ".cache" / "zerotune";
  }
  return ".zerotune_cache";
}

}  // namespace zt::data
