#include "text/unicode.h"

#include <fmt/format.h>
#include <utf8proc.h>

#include <algorithm>
#include <iterator>

#include "text/unicode_tables.h"

namespace zt::text::unicode {

namespace {

// Length of the well-formed prefix of a UTF-8 sequence starting at p[0] (n bytes available), and
// whether it is complete: Unicode Table 3-7 "Well-Formed UTF-8 Byte Sequences".
struct SeqCheck {
  size_t len;     // bytes consumed by the (possibly truncated) well-formed prefix, >= 1
  bool complete;  // true when those bytes form a whole character
};

SeqCheck check_sequence(const unsigned char* p, size_t n) {
  unsigned char b = p[0];
  if (b < 0x80) return {1, true};
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return {1, false};
  }
  size_t i = 1;
  for (; i <= need; ++i) {
    if (i >= n) return {i, false};
    unsigned char c = p[i];
    unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (c < l || c > h) return {i, false};
  }
  return {need + 1, true};
}

template <size_t N>
bool in_ranges(const unicode_tables::Range (&r)[N], char32_t c) {
  auto it =
      std::upper_bound(std::begin(r), std::end(r), c,
                       [](char32_t v, const unicode_tables::Range& x) { return v < x.first; });
  return it != std::begin(r) && c <= std::prev(it)->last;
}

template <size_t N>
std::string class_of(const unicode_tables::Range (&r)[N]) {
  std::string out;
  for (const auto& x : r)
    out += fmt::format("\\x{{{:X}}}-\\x{{{:X}}}", uint32_t(x.first), uint32_t(x.last));
  return out;
}

}  // namespace

bool hf_extra_letter(char32_t c) { return in_ranges(unicode_tables::kExtraLetters, c); }
bool hf_extra_number(char32_t c) { return in_ranges(unicode_tables::kExtraNumbers, c); }
bool hf_nfc_unknown(char32_t c) { return in_ranges(unicode_tables::kNfcUnknown, c); }
std::string hf_extra_letters_class() { return class_of(unicode_tables::kExtraLetters); }
std::string hf_extra_numbers_class() { return class_of(unicode_tables::kExtraNumbers); }

std::optional<size_t> find_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    i = skip_ascii(p, n, i);
    if (i >= n) break;
    SeqCheck c = check_sequence(p + i, n - i);
    if (!c.complete) return i;
    i += c.len;
  }
  return std::nullopt;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size(), i = 0;
  while (i < n) {
    SeqCheck c = check_sequence(p + i, n - i);
    if (c.complete) {
      out.append(bytes.data() + i, c.len);
    } else {
      out.append("\xEF\xBF\xBD");
    }
    i += c.len;
  }
  return out;
}

bool is_white_space(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  switch (c) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool is_word_char(char32_t c) {
  if (c < 0x80) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  if (c == 0x200C || c == 0x200D) return true;  // Join_Control
  // Other_Alphabetic symbols (category So): circled and squared Latin letters.
  if ((c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
      (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189)) {
    return true;
  }
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    case UTF8PROC_CATEGORY_CN:  // unassigned for utf8proc: a newer letter or digit for HF?
      return hf_extra_letter(c) || hf_extra_number(c);
    default:
      return false;
  }
}

ByteLevelAlphabet::ByteLevelAlphabet() {
  to_byte_.fill(-1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    byte_to_char[b] = printable ? char32_t(b) : char32_t(next++);
  }
  for (int b = 0; b < 256; ++b) {
    to_byte_[byte_to_char[b]] = static_cast<int16_t>(b);
    append_utf8(byte_to_utf8[b], byte_to_char[b]);
  }
}

}  // namespace zt::text::unicode
