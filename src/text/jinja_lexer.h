// Jinja2 lexer with the settings transformers uses (trim_blocks=True, lstrip_blocks=True,
// keep_trailing_newline=False): the same token boundaries and whitespace control as jinja2 3.x
// `Lexer.tokeniter` (`{%-`, `-%}`, `{{-`, `-}}`, `{%+`, `+%}`, comments, `{% raw %}`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zt::text::jinja {

enum class Tok : uint8_t {
  kData,        // template text (value)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,        // identifier or keyword (value)
  kString,      // string literal, escapes resolved (value)
  kInt,         // integer literal (ival)
  kFloat,       // float literal (fval)
  kOp,          // operator or punctuation (value: "+", "//", "(", …)
  kEof,
};

struct Token {
  Tok type = Tok::kEof;
  std::string value;
  int64_t ival = 0;
  double fval = 0.0;
  int line = 1;  // 1-based line in the template
};

// Tokenizes `source`. Throws zt::Error "<name>:<line>: …" for an unterminated tag, comment or
// string, or a character that starts no token.
std::vector<Token> tokenize(const std::string& source, const std::string& name);

}  // namespace zt::text::jinja
