#include "text/jinja_lexer.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string_view>

#include "core/error.h"
#include "core/file_util.h"
#include "text/jinja_pystr.h"

namespace zt::text::jinja {
namespace {

// jinja2 splits on \r\n, \r and \n, joins with \n and drops one trailing newline.
std::string normalize_newlines(const std::string& src) {
  std::string out = universal_newlines(src);
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}
bool is_name_char(unsigned char c) { return is_name_start(c) || is_digit(static_cast<char>(c)); }

class Lexer {
 public:
  Lexer(const std::string& source, const std::string& name)
      : src_(normalize_newlines(source)), name_(name) {
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') newlines_.push_back(i);
  }

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t p = find_tag(pos_);
      if (p == std::string::npos) {
        emit_data(pos_, src_.substr(pos_));
        break;
      }
      char kind = src_[p + 1];
      char sign =
          (p + 2 < src_.size() && (src_[p + 2] == '-' || src_[p + 2] == '+')) ? src_[p + 2] : '\0';
      size_t raw_end = kind == '%' ? match_raw_begin(p) : 0;
      emit_data(pos_, strip_text(src_.substr(pos_, p - pos_), sign, kind != '{', line_starting));
      pos_ = p + 2 + (sign ? 1 : 0);
      if (raw_end) {
        line_starting = src_[raw_end - 1] == '\n';
        pos_ = raw_end;
        line_starting = lex_raw_body(line_starting);
      } else if (kind == '#') {
        line_starting = skip_comment(p);
      } else {
        line_starting = lex_tag(kind == '{', p);
      }
    }
    push(Tok::kEof, src_.size());
    return std::move(out_);
  }

 private:
  int line_at(size_t off) const {
    return 1 + static_cast<int>(std::lower_bound(newlines_.begin(), newlines_.end(), off) -
                                newlines_.begin());
  }
  [[noreturn]] void error(size_t off, const std::string& msg) const {
    fail("{}:{}: {}", name_, line_at(off), msg);
  }
  Token& push(Tok t, size_t off, std::string value = {}) {
    out_.push_back(Token{t, std::move(value), 0, 0.0, line_at(off)});
    return out_.back();
  }
  void emit_data(size_t off, std::string text) {
    if (!text.empty()) push(Tok::kData, off, std::move(text));
  }

  // Earliest `{%`, `{{` or `{#` at or after `from`.
  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1))
      if (i + 1 < src_.size() && (src_[i + 1] == '%' || src_[i + 1] == '{' || src_[i + 1] == '#'))
        return i;
    return std::string::npos;
  }

  // Byte length of the Python whitespace character at `i` (0 if none).
  size_t space_len(size_t i) const {
    auto c = static_cast<unsigned char>(src_[i]);
    if (c < 0x80) return py::is_space(c) ? 1 : 0;
    std::u32string u = py::decode(std::string_view(src_).substr(i, 4));
    if (u.empty() || !py::is_space(u[0])) return 0;
    size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    return n;
  }
  size_t skip_spaces(size_t i) const {
    while (i < src_.size()) {
      size_t n = space_len(i);
      if (!n) break;
      i += n;
    }
    return i;
  }

  // jinja2's OptionalLStrip: `-` strips all trailing whitespace; otherwise (not `+`, not a
  // variable tag) lstrip_blocks drops spaces/tabs between the last newline and the tag.
  std::string strip_text(std::string text, char sign, bool lstrip_ok, bool line_starting) const {
    if (sign == '-') return py::strip(text, nullptr, false, true);
    if (sign == '+' || !lstrip_ok) return text;
    size_t nl = text.rfind('\n');
    size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if (l_pos == 0 && !line_starting) return text;
    std::string_view rest = std::string_view(text).substr(l_pos);
    if (rest.empty()) return text;
    for (char32_t c : py::decode(rest))
      if (!py::is_space(c)) return text;
    text.resize(l_pos);
    return text;
  }

  // `{%[-+]? raw %}` at p: returns the offset just past it, or 0.
  size_t match_raw_begin(size_t p) const {
    size_t i = p + 2;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    i = skip_spaces(i);
    if (src_.compare(i, 3, "raw") != 0) return 0;
    i = skip_spaces(i + 3);
    if (src_.compare(i, 3, "-%}") == 0) return skip_spaces(i + 3);
    if (src_.compare(i, 2, "%}") == 0) return i + 2;
    return 0;
  }

  bool lex_raw_body(bool line_starting) {
    for (size_t p = find_tag(pos_); p != std::string::npos; p = find_tag(p + 1)) {
      if (src_[p + 1] != '%') continue;
      size_t i = p + 2;
      char sign = (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ? src_[i] : '\0';
      if (sign) ++i;
      i = skip_spaces(i);
      if (src_.compare(i, 6, "endraw") != 0) continue;
      i = skip_spaces(i + 6);
      size_t end;
      if (src_.compare(i, 3, "+%}") == 0) {
        end = i + 3;
      } else if (src_.compare(i, 3, "-%}") == 0) {
        end = skip_spaces(i + 3);
      } else if (src_.compare(i, 2, "%}") == 0) {
        end = i + 2 + (i + 2 < src_.size() && src_[i + 2] == '\n');
      } else {
        continue;
      }
      emit_data(pos_, strip_text(src_.substr(pos_, p - pos_), sign, true, line_starting));
      pos_ = end;
      return src_[end - 1] == '\n';
    }
    error(pos_, "Missing end of raw directive");
  }

  bool skip_comment(size_t start) {
    for (size_t q = pos_; q < src_.size(); ++q) {
      if (src_.compare(q, 3, "+#}") == 0) {
        pos_ = q + 3;
        return false;
      }
      if (src_.compare(q, 3, "-#}") == 0) {
        pos_ = skip_spaces(q + 3);
        return src_[pos_ - 1] == '\n';
      }
      if (src_.compare(q, 2, "#}") == 0) {
        pos_ = q + 2 + (q + 2 < src_.size() && src_[q + 2] == '\n');
        return src_[pos_ - 1] == '\n';
      }
    }
    error(start, "Missing end of comment tag");
  }

  // Lexes the inside of `{{ … }}` / `{% … %}` starting at pos_; returns whether the end tag's match
  // ended with a newline (jinja2's line_starting).
  bool lex_tag(bool variable, size_t start) {
    push(variable ? Tok::kVarBegin : Tok::kBlockBegin, start);
    std::vector<char> balance;
    while (true) {
      if (pos_ >= src_.size()) error(start, "unexpected end of template: unclosed tag");
      if (balance.empty()) {
        size_t end = match_tag_end(variable);
        if (end) {
          push(variable ? Tok::kVarEnd : Tok::kBlockEnd, pos_);
          pos_ = end;
          return src_[end - 1] == '\n';
        }
      }
      if (size_t n = space_len(pos_)) {
        pos_ = skip_spaces(pos_ + n);
        continue;
      }
      if (lex_number() || lex_name() || lex_string()) continue;
      lex_operator(balance);
    }
  }

  size_t match_tag_end(bool variable) const {
    const char* close = variable ? "}}" : "%}";
    if (!variable && src_.compare(pos_, 3, "+%}") == 0) return pos_ + 3;
    if (src_[pos_] == '-' && src_.compare(pos_ + 1, 2, close) == 0) return skip_spaces(pos_ + 3);
    if (src_.compare(pos_, 2, close) == 0) {
      size_t e = pos_ + 2;
      if (!variable && e < src_.size() && src_[e] == '\n') ++e;  // trim_blocks
      return e;
    }
    return 0;
  }

  // Digits with single underscores between them (`(\d+_)*\d+`); returns the end or `i`.
  size_t digit_run(size_t i) const {
    size_t j = i;
    while (j < src_.size() && is_digit(src_[j])) {
      while (j < src_.size() && is_digit(src_[j])) ++j;
      if (j + 1 < src_.size() && src_[j] == '_' && is_digit(src_[j + 1])) ++j;
    }
    return j;
  }

  static std::string without_underscores(std::string_view s) {
    std::string out;
    for (char c : s)
      if (c != '_') out.push_back(c);
    return out;
  }

  bool lex_number() {
    if (!is_digit(src_[pos_])) return false;
    size_t int_end = digit_run(pos_);
    bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';
    if (!after_dot) {
      size_t end = 0;
      size_t i = int_end;
      size_t frac_end = 0;
      if (i + 1 < src_.size() && src_[i] == '.' && is_digit(src_[i + 1]))
        frac_end = digit_run(i + 1);
      auto exponent = [&](size_t k) -> size_t {
        if (k < src_.size() && (src_[k] == 'e' || src_[k] == 'E')) {
          ++k;
          if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
          if (k < src_.size() && is_digit(src_[k])) return digit_run(k);
        }
        return 0;
      };
      if (frac_end) end = exponent(frac_end);
      if (!end) end = exponent(int_end);
      if (!end) end = frac_end;
      if (end) {
        std::string text = without_underscores(std::string_view(src_).substr(pos_, end - pos_));
        Token& t = push(Tok::kFloat, pos_, text);
        t.fval = std::strtod(text.c_str(), nullptr);
        pos_ = end;
        return true;
      }
    }
    // Integers: 0b / 0o / 0x prefixes, decimal, or a run of zeros.
    int base = 10;
    size_t i = pos_, digits_from = pos_;
    if (src_[i] == '0' && i + 1 < src_.size()) {
      char p = static_cast<char>(src_[i + 1] | 0x20);
      if (p == 'b' || p == 'o' || p == 'x') {
        base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
        digits_from = i + 2;
      }
    }
    size_t end;
    if (base != 10) {
      auto ok = [&](char c) {
        c = static_cast<char>(c | 0x20);
        if (base == 2) return c == '0' || c == '1';
        if (base == 8) return c >= '0' && c <= '7';
        return is_digit(c) || (c >= 'a' && c <= 'f');
      };
      end = digits_from;
      while (end < src_.size()) {
        if (ok(src_[end])) {
          ++end;
        } else if (src_[end] == '_' && end + 1 < src_.size() && ok(src_[end + 1])) {
          end += 2;
        } else {
          break;
        }
      }
      if (end == digits_from) {  // "0x" alone: just the zero
        base = 10;
        digits_from = pos_;
        end = pos_ + 1;
      }
    } else if (src_[pos_] == '0') {
      end = pos_ + 1;
      while (end < src_.size() && (src_[end] == '0' || (src_[end] == '_' && end + 1 < src_.size() &&
                                                        src_[end + 1] == '0')))
        end += src_[end] == '_' ? 2 : 1;
    } else {
      end = int_end;
    }
    std::string text =
        without_underscores(std::string_view(src_).substr(digits_from, end - digits_from));
    Token& t = push(Tok::kInt, pos_, std::string(src_, pos_, end - pos_));
    auto res = std::from_chars(text.data(), text.data() + text.size(), t.ival, base);
    if (res.ec != std::errc()) error(pos_, "integer literal out of range: " + t.value);
    pos_ = end;
    return true;
  }

  bool lex_name() {
    if (!is_name_start(static_cast<unsigned char>(src_[pos_]))) return false;
    size_t end = pos_;
    while (end < src_.size() && is_name_char(static_cast<unsigned char>(src_[end]))) ++end;
    push(Tok::kName, pos_, src_.substr(pos_, end - pos_));
    pos_ = end;
    return true;
  }

  bool lex_string() {
    char q = src_[pos_];
    if (q != '\'' && q != '"') return false;
    size_t i = pos_ + 1;
    while (i < src_.size() && src_[i] != q) i += src_[i] == '\\' ? 2 : 1;
    if (i >= src_.size()) error(pos_, "unterminated string literal");
    push(Tok::kString, pos_, unescape(std::string_view(src_).substr(pos_ + 1, i - pos_ - 1), pos_));
    pos_ = i + 1;
    return true;
  }

  // Python's `encode('ascii', 'backslashreplace').decode('unicode-escape')`.
  std::string unescape(std::string_view s, size_t off) const {
    std::u32string u = py::decode(s), out;
    auto hex = [&](size_t& i, int n) -> char32_t {
      char32_t v = 0;
      for (int k = 0; k < n; ++k, ++i) {
        if (i >= u.size() || u[i] > 0x7F || !std::isxdigit(static_cast<int>(u[i])))
          error(off, "truncated escape in string literal");
        char c = static_cast<char>(u[i] | 0x20);
        v = v * 16 + static_cast<char32_t>(is_digit(c) ? c - '0' : c - 'a' + 10);
      }
      return v;
    };
    for (size_t i = 0; i < u.size();) {
      char32_t c = u[i++];
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      char32_t e = u[i++];
      switch (e) {
        case '\n':
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case 'a':
          out.push_back(7);
          break;
        case 'b':
          out.push_back(8);
          break;
        case 'f':
          out.push_back(12);
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'v':
          out.push_back(11);
          break;
        case 'x':
          out.push_back(hex(i, 2));
          break;
        case 'u':
          out.push_back(hex(i, 4));
          break;
        case 'U':
          out.push_back(hex(i, 8));
          break;
        case 'N':
          error(off, "\\N{…} escapes are not supported");
        default:
          if (e >= '0' && e <= '7') {
            char32_t v = e - '0';
            for (int k = 0; k < 2 && i < u.size() && u[i] >= '0' && u[i] <= '7'; ++k)
              v = v * 8 + (u[i++] - '0');
            out.push_back(v);
          } else if (e > 0x7F) {  // backslashreplace turned it into \xNN / \uNNNN first
            std::string esc = e <= 0xFF     ? fmt::format("x{:02x}", static_cast<uint32_t>(e))
                              : e <= 0xFFFF ? fmt::format("u{:04x}", static_cast<uint32_t>(e))
                                            : fmt::format("U{:08x}", static_cast<uint32_t>(e));
            out.push_back('\\');
            for (char ch : esc) out.push_back(static_cast<char32_t>(ch));
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    return py::encode(out);
  }

  void lex_operator(std::vector<char>& balance) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (auto op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        push(Tok::kOp, pos_, std::string(op));
        pos_ += 2;
        return;
      }
    }
    char c = src_[pos_];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos)
      error(pos_, fmt::format("unexpected char '{}'", c));
    if (c == '{' || c == '(' || c == '[') {
      balance.push_back(c == '{' ? '}' : c == '(' ? ')' : ']');
    } else if (c == '}' || c == ')' || c == ']') {
      if (balance.empty()) error(pos_, fmt::format("unexpected '{}'", c));
      if (balance.back() != c)
        error(pos_, fmt::format("unexpected '{}', expected '{}'", c, balance.back()));
      balance.pop_back();
    }
    push(Tok::kOp, pos_, std::string(1, c));
    ++pos_;
  }

  std::string src_;
  const std::string& name_;
  std::vector<size_t> newlines_;
  size_t pos_ = 0;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source, const std::string& name) {
  return Lexer(source, name).run();
}

}  // namespace zt::text::jinja
