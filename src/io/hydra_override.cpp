// Hydra 1.3's override value grammar (io/hydra_override.h): the lexer (OverrideLexer.g4's
// VALUE_MODE rules, longest match first, ties to the rule defined first), the parser
// (OverrideParser.g4's value, element, primitive, listContainer, dictContainer, function); the
// functions that give a value (int, float, str, bool, sort) are evaluated in
// io/hydra_override_functions.cpp.
#include "io/hydra_override.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/hydra_override_functions.h"
#include "io/hydra_sweep.h"
#include "io/python_number.h"

namespace zt {
namespace {

// Deeper nesting of lists, dicts and function calls is refused (no recursion without bound).
constexpr int kMaxDepth = 200;

// The token types of OverrideLexer.g4's VALUE_MODE, in the order the grammar defines them (the
// order that breaks a tie between two rules matching the same length).
enum class Tok {
  kPopen,          // WS? '(' WS?
  kComma,          // WS? ',' WS?
  kPclose,         // WS? ')'
  kBracketOpen,    // '[' WS?
  kBracketClose,   // WS? ']'
  kBraceOpen,      // '{' WS?
  kBraceClose,     // WS? '}'
  kColon,          // WS? ':' WS?
  kEqual,          // WS? '=' WS?
  kFloat,          // [+-]? (POINT_FLOAT | EXPONENT_FLOAT | inf | nan)
  kInt,            // [+-]? ('0' | [1-9] (_? DIGIT)*)
  kBool,           // true | false, any case
  kNull,           // null, any case
  kUnquotedChar,   // one of / - \ + . $ % * @ ? |
  kId,             // (CHAR | '_') (CHAR | DIGIT | '_' | '-')*
  kEsc,            // (\\ | \( | \) | \[ | \] | \{ | \} | \: | \= | \, | '\ ' | '\<tab>')+
  kWs,             // [ \t]+
  kQuoted,         // '…' or "…"
  kInterpolation,  // ${…}
  kEnd,            // the end of the value
};

// One token: its type and its text's [begin, end) in the override.
struct Token {
  Tok kind;
  size_t begin, end;
};

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_ws(char c) { return c == ' ' || c == '\t'; }

// Each function below returns where the longest match of its rule starting at s[i] ends, or i.

size_t ws_end(std::string_view s, size_t i) {
  while (i < s.size() && is_ws(s[i])) ++i;
  return i;
}

// DIGIT (('_')? DIGIT)*
size_t digits_end(std::string_view s, size_t i) {
  if (i >= s.size() || !is_digit(s[i])) return i;
  ++i;
  while (i < s.size()) {
    if (is_digit(s[i])) {
      ++i;
    } else if (s[i] == '_' && i + 1 < s.size() && is_digit(s[i + 1])) {
      i += 2;
    } else {
      break;
    }
  }
  return i;
}

// INT_UNSIGNED: '0' | [1-9] (('_')? DIGIT)*
size_t int_unsigned_end(std::string_view s, size_t i) {
  if (i < s.size() && s[i] == '0') return i + 1;
  if (i < s.size() && s[i] >= '1' && s[i] <= '9') return digits_end(s, i);
  return i;
}

size_t sign_end(std::string_view s, size_t i) {
  return i < s.size() && (s[i] == '+' || s[i] == '-') ? i + 1 : i;
}

size_t word_end(std::string_view s, size_t i, std::string_view word) {
  if (s.size() - i < word.size()) return i;
  for (size_t k = 0; k < word.size(); ++k)
    if ((s[i + k] | 0x20) != word[k]) return i;  // ASCII letters, any case
  return i + word.size();
}

size_t float_end(std::string_view s, size_t i) {
  const size_t j = sign_end(s, i);
  size_t best = std::max(word_end(s, j, "inf"), word_end(s, j, "nan"));
  // POINT_FLOAT: INT_UNSIGNED '.' | INT_UNSIGNED? '.' DIGIT (('_')? DIGIT)*
  const size_t u = int_unsigned_end(s, j);
  std::vector<size_t> point_ends;
  if (u < s.size() && s[u] == '.') {
    if (u > j) point_ends.push_back(u + 1);
    const size_t fraction = digits_end(s, u + 1);
    if (fraction > u + 1) point_ends.push_back(fraction);
  }
  for (const size_t e : point_ends) best = std::max(best, e);
  // EXPONENT_FLOAT: (INT_UNSIGNED | POINT_FLOAT) [eE] [+-]? DIGIT (('_')? DIGIT)*
  std::vector<size_t> bases = point_ends;
  if (u > j) bases.push_back(u);
  for (const size_t b : bases) {
    if (b >= s.size() || (s[b] != 'e' && s[b] != 'E')) continue;
    const size_t e = sign_end(s, b + 1);
    const size_t exponent = digits_end(s, e);
    if (exponent > e) best = std::max(best, exponent);
  }
  return best > j ? best : i;
}

size_t int_end(std::string_view s, size_t i) {
  const size_t j = sign_end(s, i);
  const size_t u = int_unsigned_end(s, j);
  return u > j ? u : i;
}

size_t id_end(std::string_view s, size_t i) {
  if (i >= s.size() || !(is_alpha(s[i]) || s[i] == '_')) return i;
  ++i;
  while (i < s.size() && (is_alpha(s[i]) || is_digit(s[i]) || s[i] == '_' || s[i] == '-')) ++i;
  return i;
}

// The characters a backslash escapes in an unquoted value (ESC; Hydra's `_ESC`).
constexpr std::string_view kEscapable = "\\()[]{}:=, \t";

size_t esc_end(std::string_view s, size_t i) {
  while (i + 1 < s.size() && s[i] == '\\' && kEscapable.find(s[i + 1]) != std::string_view::npos)
    i += 2;
  return i;
}

// QUOTED_VALUE: closed by the first quote character with an even run of backslashes before it.
size_t quoted_end(std::string_view s, size_t i) {
  if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return i;
  size_t backslashes = 0;
  for (size_t k = i + 1; k < s.size(); ++k) {
    if (s[k] == s[i] && backslashes % 2 == 0) return k + 1;
    backslashes = s[k] == '\\' ? backslashes + 1 : 0;
  }
  return i;
}

// INTERPOLATION: '${' ~('}')+ '}'. First the '}' that matches the '{' after the '$' (`close` holds,
// for each '{' of the override, the index of its matching '}', or npos), so that a nested
// interpolation is one (`${oc.env:A,${b}}`), as OmegaConf reads it; else Hydra's own rule, the
// first '}' after at least one other character.
size_t interpolation_end(std::string_view s, size_t i, const std::vector<size_t>& close) {
  if (s.substr(i, 2) != "${") return i;
  if (close[i + 1] != std::string_view::npos && close[i + 1] > i + 2) return close[i + 1] + 1;
  const size_t first = s.find('}', i + 2);
  return first != std::string_view::npos && first > i + 2 ? first + 1 : i;
}

// The punctuation tokens: the character and whether spaces before / after it belong to the token.
struct Punct {
  Tok kind;
  char c;
  bool before, after;
};
constexpr std::array<Punct, 9> kPuncts = {{{Tok::kPopen, '(', true, true},
                                           {Tok::kComma, ',', true, true},
                                           {Tok::kPclose, ')', true, false},
                                           {Tok::kBracketOpen, '[', false, true},
                                           {Tok::kBracketClose, ']', true, false},
                                           {Tok::kBraceOpen, '{', false, true},
                                           {Tok::kBraceClose, '}', true, false},
                                           {Tok::kColon, ':', true, true},
                                           {Tok::kEqual, '=', true, true}}};

size_t punct_end(std::string_view s, size_t i, const Punct& p) {
  const size_t k = p.before ? ws_end(s, i) : i;
  if (k >= s.size() || s[k] != p.c) return i;
  return p.after ? ws_end(s, k + 1) : k + 1;
}

// The token at s[i] (i < s.size()): the longest match, ties to the rule defined first; nullopt
// when no rule matches. `close` as interpolation_end() takes it.
std::optional<Token> next_token(std::string_view s, size_t i, const std::vector<size_t>& close) {
  Token best{Tok::kEnd, i, i};
  const auto take = [&](Tok kind, size_t end) {
    if (end > best.end) best = Token{kind, i, end};
  };
  for (const Punct& p : kPuncts) take(p.kind, punct_end(s, i, p));
  take(Tok::kFloat, float_end(s, i));
  take(Tok::kInt, int_end(s, i));
  take(Tok::kBool, std::max(word_end(s, i, "true"), word_end(s, i, "false")));
  take(Tok::kNull, word_end(s, i, "null"));
  if (std::string_view("/-\\+.$%*@?|").find(s[i]) != std::string_view::npos)
    take(Tok::kUnquotedChar, i + 1);
  take(Tok::kId, id_end(s, i));
  take(Tok::kEsc, esc_end(s, i));
  take(Tok::kWs, ws_end(s, i));
  take(Tok::kQuoted, quoted_end(s, i));
  take(Tok::kInterpolation, interpolation_end(s, i, close));
  if (best.end == i) return std::nullopt;
  return best;
}

class ValueParser {
 public:
  ValueParser(const std::string& ov, size_t start) : ov_(ov) {
    // Each '{' paired with its '}' in one pass (a stack), for interpolation_end().
    std::vector<size_t> close(ov_.size(), std::string::npos), open;
    for (size_t k = start; k < ov_.size(); ++k) {
      if (ov_[k] == '{') {
        open.push_back(k);
      } else if (ov_[k] == '}' && !open.empty()) {
        close[open.back()] = k;
        open.pop_back();
      }
    }
    size_t i = ws_end(ov_, start);  // EQUAL ('=' WS?) takes the spaces after the '='
    while (i < ov_.size()) {
      const std::optional<Token> t = next_token(ov_, i, close);
      if (!t) unexpected_character(i);
      if (ov_.compare(i, 2, "${") == 0 && t->kind != Tok::kInterpolation)
        fail(
            "override '{}': the '${{' at character {} starts no interpolation (it is empty or has "
            "no closing '}}')",
            ov_, column(i));
      tokens_.push_back(*t);
      i = t->end;
    }
    tokens_.push_back(Token{Tok::kEnd, ov_.size(), ov_.size()});
  }

  // OverrideParser.g4's `value` after the '=': empty (the empty string) or one element; a
  // top-level comma (simpleChoiceSweep) is a sweep.
  Json parse() {
    if (peek().kind == Tok::kEnd) return "";
    Json v = element(0);
    if (peek().kind == Tok::kComma) fail("override '{}': {}", ov_, kSweepRefused);
    expect(Tok::kEnd, "the end of the value");
    return v;
  }

 private:
  const Token& peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  // The 1-based position in the override of the character at byte `i`, counting UTF-8 characters.
  size_t column(size_t i) const {
    size_t n = 1;
    for (size_t k = 0; k < i && k < ov_.size(); ++k)
      n += (static_cast<unsigned char>(ov_[k]) & 0xC0) != 0x80;
    return n;
  }
  std::string_view text(const Token& t) const {
    return std::string_view(ov_).substr(t.begin, t.end - t.begin);
  }

  [[noreturn]] void unexpected_character(size_t i) const {
    const char c = ov_[i];
    if (c == '\'' || c == '"')
      fail(
          "override '{}': the quote {} at character {} is never closed (a quote inside a quoted "
          "value is escaped: \\{})",
          ov_, c, column(i), c);
    size_t len = 1;  // the whole UTF-8 character (check_utf8 saw valid UTF-8)
    const auto lead = static_cast<unsigned char>(c);
    if (lead >= 0xF0) {
      len = 4;
    } else if (lead >= 0xE0) {
      len = 3;
    } else if (lead >= 0xC0) {
      len = 2;
    }
    fail(
        "override '{}': character {} ('{}') is not allowed in an unquoted value by Hydra's "
        "override grammar; quote the value ('…' or \"…\")",
        ov_, column(i), ov_.substr(i, len));
  }

  // Throws "expected <what> at character N, found <token>", with a hint when the token is
  // punctuation that Hydra reads as syntax.
  [[noreturn]] void expected(std::string_view what) const {
    const Token& t = peek();
    if (t.kind == Tok::kEnd)
      fail("override '{}': expected {} at character {}, found the end of the value", ov_, what,
           column(t.begin));
    const size_t at = t.kind == Tok::kQuoted || t.kind == Tok::kWs ? t.begin : ws_end(ov_, t.begin);
    std::string found(text(t).substr(at - t.begin));
    while (!found.empty() && is_ws(found.back())) found.pop_back();
    if (t.kind == Tok::kWs) found = "whitespace";
    std::string hint;
    if (found.size() == 1 && std::string_view("()[]{}:=,").find(found[0]) != std::string::npos)
      hint = fmt::format(
          "; as text, '{}' is escaped with a backslash (\\{}) or the value is quoted ('…')", found,
          found);
    fail("override '{}': expected {} at character {}, found {}{}", ov_, what, column(at),
         t.kind == Tok::kWs ? found : "'" + found + "'", hint);
  }

  const Token& expect(Tok kind, std::string_view what) {
    if (peek().kind != kind) expected(what);
    return tokens_[pos_++];
  }

  Json element(int depth) {
    if (depth > kMaxDepth)
      fail("override '{}': lists, dicts and function calls nest more than {} levels deep", ov_,
           kMaxDepth);
    const Token& t = peek();
    switch (t.kind) {
      case Tok::kQuoted:
        ++pos_;
        return unquote_hydra_string(text(t));
      case Tok::kBracketOpen:
        return list(depth);
      case Tok::kBraceOpen:
        return dict(depth);
      case Tok::kId:
        if (peek(1).kind == Tok::kPopen) return function(depth);
        [[fallthrough]];
      default:
        return primitive(/*key=*/false, /*whole=*/depth == 0);
    }
  }

  // `primitive` (or `dictKey`, without ':' and interpolations): the tokens that may form it,
  // typed as the visitor's _createPrimitive types them. `whole`: it is the whole value, where an
  // int outside int64 stays its text, as the same value in a YAML file does (io/hydra_yaml.h), so
  // the config check names the key's own range; inside a list, dict or call (where a cast or sort
  // would need the number) it is refused.
  Json primitive(bool key, bool whole = false) {
    const size_t first = pos_;
    while (true) {
      const Tok k = peek().kind;
      const bool ok = k == Tok::kId || k == Tok::kNull || k == Tok::kInt || k == Tok::kFloat ||
                      k == Tok::kBool || k == Tok::kUnquotedChar || k == Tok::kEsc ||
                      k == Tok::kWs || (!key && (k == Tok::kColon || k == Tok::kInterpolation));
      if (!ok) break;
      ++pos_;
    }
    if (pos_ == first) expected(key ? "a dict key (unquoted)" : "a value");
    size_t begin = first, end = pos_;
    if (tokens_[begin].kind == Tok::kWs) {
      if (end - begin == 1)
        fail("override '{}': the value at character {} is only whitespace", ov_,
             column(tokens_[begin].begin));
      ++begin;
    }
    if (tokens_[end - 1].kind == Tok::kWs) --end;
    if (end - begin > 1) {  // several tokens: their text, escapes undone
      std::string s;
      for (size_t k = begin; k < end; ++k) s += unescaped(tokens_[k]);
      return s;
    }
    const Token& t = tokens_[begin];
    const std::string_view s = text(t);
    switch (t.kind) {
      case Tok::kInt: {
        const std::optional<int64_t> v = python_int(s, /*spaces=*/false);
        if (!v && whole) return std::string(s);
        if (!v)
          fail(
              "override '{}': the integer {} at character {} does not fit in 64 bits (zerotune's "
              "integers are from -9223372036854775808 to 9223372036854775807)",
              ov_, s, column(t.begin));
        return *v;
      }
      case Tok::kFloat:
        return *python_float(s, /*spaces=*/false);  // every FLOAT token is one of Python's
      case Tok::kNull:
        return nullptr;
      case Tok::kBool:
        return (s[0] | 0x20) == 't';
      default:
        return unescaped(t);
    }
  }

  // A token's text, with the backslash of each escape dropped when it is an ESC token.
  std::string unescaped(const Token& t) const {
    const std::string_view s = text(t);
    if (t.kind != Tok::kEsc) return std::string(s);
    std::string out;
    for (size_t k = 1; k < s.size(); k += 2) out += s[k];
    return out;
  }

  Json list(int depth) {
    expect(Tok::kBracketOpen, "'['");
    Json a = Json::array();
    if (peek().kind == Tok::kBracketClose) {
      ++pos_;
      return a;
    }
    while (true) {
      a.push_back(element(depth + 1));
      if (peek().kind == Tok::kBracketClose) break;
      expect(Tok::kComma, "',' or ']'");
    }
    ++pos_;
    return a;
  }

  Json dict(int depth) {
    expect(Tok::kBraceOpen, "'{'");
    Json o = Json::object();
    if (peek().kind == Tok::kBraceClose) {
      ++pos_;
      return o;
    }
    std::map<std::string, size_t> key_at;  // each key of `o`: the byte where it starts
    while (true) {
      const size_t at = peek().begin;
      const std::string key = hydra_str(primitive(/*key=*/true));
      const auto [first, added] = key_at.emplace(key, at);
      if (!added)  // Hydra's dict() keeps the last; zerotune refuses, as in its files
        fail("override '{}': duplicate key '{}' at character {} (first given at character {})", ov_,
             key, column(at), column(first->second));
      expect(Tok::kColon, "':' after a dict key");
      o[key] = element(depth + 1);
      if (peek().kind == Tok::kBraceClose) break;
      expect(Tok::kComma, "',' or '}'");
    }
    ++pos_;
    return o;
  }

  // `function`: ID POPEN (argName? element (COMMA argName? element)*)? PCLOSE, then evaluated.
  Json function(int depth) {
    const Token name_token = tokens_[pos_++];
    const std::string name(text(name_token));
    ++pos_;  // POPEN
    std::vector<Json> args;
    std::vector<std::pair<std::string, Json>> kwargs;
    if (peek().kind != Tok::kPclose) {
      while (true) {
        if (peek().kind == Tok::kId && peek(1).kind == Tok::kEqual) {
          std::string arg_name(text(peek()));
          pos_ += 2;
          kwargs.emplace_back(std::move(arg_name), element(depth + 1));
        } else {
          if (!kwargs.empty())
            fail("override '{}': {}(…): positional argument follows keyword argument", ov_, name);
          args.push_back(element(depth + 1));
        }
        if (peek().kind == Tok::kPclose) break;
        expect(Tok::kComma, "',' or ')'");
      }
    }
    const Token& close = tokens_[pos_++];
    return call_hydra_function(ov_, ov_.substr(name_token.begin, close.end - name_token.begin),
                               name, args, kwargs);
  }

  const std::string& ov_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

}  // namespace

Json parse_override_value(const std::string& ov, size_t eq) {
  return ValueParser(ov, eq + 1).parse();
}

std::optional<std::string> python_str_of_token(std::string_view s) {
  if (s.empty()) return std::nullopt;
  if (float_end(s, 0) == s.size()) return python_float_repr(*python_float(s, /*spaces=*/false));
  if (int_end(s, 0) == s.size()) {
    std::string digits = s[0] == '-' ? "-" : "";
    for (const char c : s.substr(s[0] == '-' || s[0] == '+'))
      if (c != '_') digits += c;
    return digits == "-0" ? "0" : digits;
  }
  if (word_end(s, 0, "true") == s.size()) return "True";
  if (word_end(s, 0, "false") == s.size()) return "False";
  return std::nullopt;
}

std::string unquote_hydra_string(std::string_view quoted) {
  const char quote = quoted.front();
  const std::string_view in = quoted.substr(1, quoted.size() - 2);
  std::string out;
  size_t i = 0;
  while (i < in.size()) {
    if (in[i] != '\\') {
      out += in[i++];
      continue;
    }
    size_t end = i;
    while (end < in.size() && in[end] == '\\') ++end;
    const size_t run = end - i;
    if (end == in.size() || in[end] == quote) {
      out.append(run / 2 + (end == in.size() ? run % 2 : 0), '\\');
      if (end < in.size()) out += in[end++];  // the escaped quote
    } else {
      out.append(run, '\\');
    }
    i = end;
  }
  return out;
}

}  // namespace zt
