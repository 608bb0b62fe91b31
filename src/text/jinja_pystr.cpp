#include "text/jinja_pystr.h"

#include <fmt/format.h>
#include <utf8proc.h>

#include <charconv>
#include <cmath>

namespace zt::text::jinja::py {

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out.push_back(c);
      ++i;
      continue;
    }
    utf8proc_int32_t cp = 0;
    auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                              static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    if (n <= 0) {
      out.push_back(0xFFFD);
      ++i;
    } else {
      out.push_back(static_cast<char32_t>(cp));
      i += static_cast<size_t>(n);
    }
  }
  return out;
}

std::string encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (char ch : s) n += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
  return n;
}

bool is_ascii(std::string_view s) {
  for (char ch : s)
    if (static_cast<unsigned char>(ch) >= 0x80) return false;
  return true;
}

bool is_space(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_printable(char32_t c) {
  if (c < 0x80) return c >= 0x20 && c < 0x7F;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

char32_t to_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
}
char32_t to_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}
char32_t to_title(char32_t c) {
  if (c < 0x80) return to_upper(c);
  return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c)));
}

static utf8proc_category_t cat(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}
bool is_upper(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z';
  return cat(c) == UTF8PROC_CATEGORY_LU || cat(c) == UTF8PROC_CATEGORY_LT;
}
bool is_lower(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z';
  return cat(c) == UTF8PROC_CATEGORY_LL;
}
bool is_cased(char32_t c) { return is_upper(c) || is_lower(c); }
bool is_alpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  auto k = cat(c);
  return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
         k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_LO;
}
bool is_digit(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return cat(c) == UTF8PROC_CATEGORY_ND;
}

// Appends the full mapping of `c` (special multi-character mapping, else the simple one).
static void append_mapped(std::u32string& out, char32_t c, const char32_t* (*special)(char32_t),
                          char32_t (*simple)(char32_t)) {
  if (c >= 0x80) {
    if (const char32_t* m = special(c)) {
      out += m;
      return;
    }
  }
  out.push_back(simple(c));
}

std::string upper(std::string_view s) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(to_upper(static_cast<unsigned char>(c)));
    return out;
  }
  std::u32string out;
  for (char32_t c : decode(s)) append_mapped(out, c, special_upper, to_upper);
  return encode(out);
}

static bool case_ignorable(char32_t c) {
  if (c == '\'' || c == '.' || c == ':' || c == '^' || c == '`' || c == 0xB7 || c == 0x2019)
    return true;
  auto k = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_ME || k == UTF8PROC_CATEGORY_CF ||
         k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_SK;
}

std::string lower(std::string_view s) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(to_lower(static_cast<unsigned char>(c)));
    return out;
  }
  std::u32string u = decode(s), out;
  for (size_t i = 0; i < u.size(); ++i) {
    if (u[i] == 0x03A3) {  // Final_Sigma: cased letter before, none after
      size_t j = i;
      while (j > 0 && case_ignorable(u[j - 1])) --j;
      bool before = j > 0 && is_cased(u[j - 1]);
      size_t k = i + 1;
      while (k < u.size() && case_ignorable(u[k])) ++k;
      bool after = k < u.size() && is_cased(u[k]);
      out.push_back(before && !after ? 0x03C2 : 0x03C3);
      continue;
    }
    append_mapped(out, u[i], special_lower, to_lower);
  }
  return encode(out);
}

std::string capitalize(std::string_view s) {
  std::u32string u = decode(s), out;
  for (size_t i = 0; i < u.size(); ++i) {
    if (i == 0) {
      append_mapped(out, u[i], special_title, to_title);
    } else {
      append_mapped(out, u[i], special_lower, to_lower);
    }
  }
  return encode(out);
}

std::string title(std::string_view s) {
  std::u32string out;
  bool prev_cased = false;
  for (char32_t c : decode(s)) {
    if (prev_cased) {
      append_mapped(out, c, special_lower, to_lower);
    } else {
      append_mapped(out, c, special_title, to_title);
    }
    prev_cased = is_cased(c);
  }
  return encode(out);
}

std::string strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::u32string u = decode(s);
  std::u32string set = chars ? decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : is_space(c);
  };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip_it(u[b])) ++b;
  if (right)
    while (e > b && strip_it(u[e - 1])) --e;
  return encode(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit,
                               bool from_right) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) throw std::invalid_argument("empty separator");
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
        size_t f = s.find(*sep, pos);
        if (f == std::string_view::npos) break;
        out.emplace_back(s.substr(pos, f - pos));
        pos = f + sep->size();
      }
      out.emplace_back(s.substr(pos));
    } else {
      size_t end = s.size();
      std::vector<std::string> rev;
      while (maxsplit < 0 || static_cast<int64_t>(rev.size()) < maxsplit) {
        if (end < sep->size()) break;
        size_t f = s.rfind(*sep, end - sep->size());
        if (f == std::string_view::npos) break;
        rev.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
        end = f;
      }
      rev.emplace_back(s.substr(0, end));
      out.assign(rev.rbegin(), rev.rend());
    }
    return out;
  }
  std::u32string u = decode(s);
  if (!from_right) {
    size_t i = 0, n = u.size();
    while (true) {
      while (i < n && is_space(u[i])) ++i;
      if (i == n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        out.push_back(encode(std::u32string_view(u).substr(i)));  // remainder kept as is
        break;
      }
      size_t j = i;
      while (j < n && !is_space(u[j])) ++j;
      out.push_back(encode(std::u32string_view(u).substr(i, j - i)));
      i = j;
    }
  } else {
    std::vector<std::string> rev;
    size_t i = u.size();
    while (true) {
      while (i > 0 && is_space(u[i - 1])) --i;
      if (i == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(rev.size()) == maxsplit) {
        rev.push_back(encode(std::u32string_view(u).substr(0, i)));
        break;
      }
      size_t j = i;
      while (j > 0 && !is_space(u[j - 1])) --j;
      rev.push_back(encode(std::u32string_view(u).substr(j, i - j)));
      i = j;
    }
    out.assign(rev.rbegin(), rev.rend());
  }
  return out;
}

static bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::u32string u = decode(s);
  std::vector<std::string> out;
  size_t i = 0, start = 0, n = u.size();
  while (i < n) {
    if (!is_line_break(u[i])) {
      ++i;
      continue;
    }
    size_t eol = i;
    i += (u[i] == '\r' && i + 1 < n && u[i + 1] == '\n') ? 2 : 1;
    out.push_back(encode(std::u32string_view(u).substr(start, (keepends ? i : eol) - start)));
    start = i;
  }
  if (start < n) out.push_back(encode(std::u32string_view(u).substr(start)));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with,
                    int64_t count) {
  std::string out;
  if (old.empty()) {
    std::u32string u = decode(s);
    int64_t done = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || done < count) {
        out.append(with);
        ++done;
      }
      if (i < u.size()) append_utf8(out, u[i]);
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t f = s.find(old, pos);
    if (f == std::string_view::npos) break;
    out.append(s.substr(pos, f - pos));
    out.append(with);
    pos = f + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(length(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size()))
    ++n;
  return n;
}

std::string repr(std::string_view s) {
  char quote = '\'';
  if (s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos) quote = '"';
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back(quote);
  for (char32_t c : decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (is_printable(c)) {
      append_utf8(out, c);
    } else if (c <= 0xFF) {
      out += fmt::format("\\x{:02x}", static_cast<uint32_t>(c));
    } else if (c <= 0xFFFF) {
      out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
    } else {
      out += fmt::format("\\U{:08x}", static_cast<uint32_t>(c));
    }
  }
  out.push_back(quote);
  return out;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  size_t epos = sci.find('e');
  std::string digits = sci.substr(0, 1) + (epos > 2 ? sci.substr(2, epos - 2) : "");
  int exp = std::stoi(sci.substr(epos + 1));
  if (exp < -4 || exp >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return out;
  }
  std::string out = sign;
  if (exp >= 0) {
    size_t int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_len) {
      out += digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  } else {
    out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  }
  return out;
}

}  // namespace zt::text::jinja::py
