// UTF-8 and Unicode helpers for the tokenizer: strict UTF-8 validation and decoding, lossy decoding
// (U+FFFD for invalid sequences, as Rust's String::from_utf8_lossy), the GPT-2 byte-level alphabet,
// and the character classes HF `tokenizers` uses around added tokens (Rust regex `\s` and `\w`).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zt::text::unicode {

// Byte offset of the first byte that does not start or continue a well-formed UTF-8 sequence
// (overlong forms, surrogates and code points above U+10FFFF are ill-formed), or nullopt when
// all of `s` is valid UTF-8.
std::optional<size_t> find_invalid_utf8(std::string_view s);

// Decodes the code point starting at s[i] (s must be valid UTF-8 there) and advances i past it.
inline char32_t next_code_point(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  unsigned char b = p[0];
  if (b < 0x80) {
    i += 1;
    return b;
  }
  if (b < 0xE0) {
    i += 2;
    return (char32_t(b & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (b < 0xF0) {
    i += 3;
    return (char32_t(b & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  i += 4;
  return (char32_t(b & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) | (char32_t(p[2] & 0x3F) << 6) |
         (p[3] & 0x3F);
}

// Appends the UTF-8 encoding of code point c to out.
void append_utf8(std::string& out, char32_t c);

// Index of the first byte at or after i that is not ASCII (or n): ASCII is skipped 8 bytes at a
// time. The fast path of every UTF-8 scan (validation, NFC quick check).
inline size_t skip_ascii(const unsigned char* p, size_t n, size_t i) {
  while (i + 8 <= n) {
    uint64_t w;
    __builtin_memcpy(&w, p + i, 8);
    if (w & 0x8080808080808080ull) break;
    i += 8;
  }
  while (i < n && p[i] < 0x80) ++i;
  return i;
}

// True for a UTF-8 continuation byte (10xxxxxx).
inline bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Byte range [begin, end) of the character containing byte i of the valid UTF-8 string s.
inline size_t char_begin(std::string_view s, size_t i) {
  while (i > 0 && is_continuation(static_cast<unsigned char>(s[i]))) --i;
  return i;
}
inline size_t char_end(std::string_view s, size_t i) {
  ++i;
  while (i < s.size() && is_continuation(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

// Converts bytes to a UTF-8 string, replacing every maximal ill-formed subsequence with U+FFFD —
// the "substitution of maximal subparts" practice that Rust's String::from_utf8_lossy follows.
std::string utf8_lossy(std::string_view bytes);

// Unicode White_Space property (Rust `char::is_whitespace`, Rust regex `\s`, Oniguruma `\s`).
bool is_white_space(char32_t c);

// Rust regex `\w` in Unicode mode: Alphabetic, marks, decimal digits, connector punctuation and
// Join_Control. Alphabetic is approximated by letters, letter numbers and the Other_Alphabetic
// symbols (circled/squared Latin letters); marks cover the rest of Other_Alphabetic.
bool is_word_char(char32_t c);

// Unicode data of HF `tokenizers` beyond what PCRE2 / utf8proc know (unicode_tables.h): letters and
// numbers its regexes know (Unicode 16), and code points its NFC ignores (it has Unicode 9 data).
bool hf_extra_letter(char32_t c);
bool hf_extra_number(char32_t c);
bool hf_nfc_unknown(char32_t c);
// The extra letters / numbers as the inside of a PCRE2 character class ("\x{1C89}-\x{1C8A}...").
std::string hf_extra_letters_class();
std::string hf_extra_numbers_class();

// The GPT-2 byte-level alphabet (a fact of the format): printable bytes map to the same code
// point, the other 68 bytes to U+0100.. in byte order. byte_to_char[b] is the character for byte b;
// char_to_byte(c) is its inverse (nullopt for characters outside the alphabet).
struct ByteLevelAlphabet {
  std::array<char32_t, 256> byte_to_char{};
  std::array<std::string, 256> byte_to_utf8{};  // byte_to_char as UTF-8
  ByteLevelAlphabet();
  std::optional<uint8_t> char_to_byte(char32_t c) const {
    if (c < 0x144 && to_byte_[c] >= 0) return static_cast<uint8_t>(to_byte_[c]);
    return std::nullopt;
  }
  // Appends to `out` the bytes of `token` when every character of it is in the alphabet and
  // returns true; else returns false with `out` as it was. `token` must be valid UTF-8.
  bool to_bytes(std::string_view token, std::string& out) const {
    const size_t start = out.size();
    for (size_t i = 0; i < token.size();) {
      auto b = char_to_byte(next_code_point(token, i));
      if (!b) {
        out.resize(start);
        return false;
      }
      out.push_back(static_cast<char>(*b));
    }
    return true;
  }

 private:
  std::array<int16_t, 0x144> to_byte_{};
};

}  // namespace zt::text::unicode
