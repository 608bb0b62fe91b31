#include "text/decoder.h"

#include <charconv>

#include "core/error.h"
#include "text/bpe_json.h"
#include "text/unicode.h"

namespace zt::text {

using namespace json_fields;

namespace {

// One code point of `s` given as a string (Strip's content, Metaspace's replacement).
std::string one_char(const Json& d, const char* key, const char* dflt, const std::string& file,
                     const std::string& path) {
  std::string c = get_string(d, key, file, path).value_or(dflt);
  size_t i = 0;
  if (!c.empty()) unicode::next_code_point(c, i);
  if (c.empty() || i != c.size()) {
    fail("{}: {}.{} must be one character, got '{}'", file, path, key, c);
  }
  return c;
}

size_t count_of(const Json& d, const char* key, const std::string& file, const std::string& path) {
  const Json* v = member(d, key);
  if (!v || !v->is_number_unsigned()) {
    fail("{}: {}.{} must be a non-negative integer", file, path, key);
  }
  return v->get<size_t>();
}

// The byte of a "<0xXX>" token, as ByteFallback reads it (u8::from_str_radix of the two
// characters: hex digits of either case, or '+' and one digit).
std::optional<unsigned char> fallback_byte(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return std::nullopt;
  std::string_view h = t.substr(3, 2);
  if (h[0] == '+') h = h.substr(1);
  unsigned v = 0;
  auto [p, ec] = std::from_chars(h.data(), h.data() + h.size(), v, 16);
  if (ec != std::errc() || p != h.data() + h.size() || v > 255) return std::nullopt;
  return static_cast<unsigned char>(v);
}

// The characters of a valid UTF-8 string, each as its byte range.
std::vector<std::string_view> chars_of(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < s.size();) {
    size_t b = i;
    unicode::next_code_point(s, i);
    out.push_back(s.substr(b, i - b));
  }
  return out;
}

}  // namespace

Decoder Decoder::from_json(const Json& d, const std::string& file, const std::string& path) {
  Decoder out;
  out.parse(d, file, path);
  return out;
}

void Decoder::parse(const Json& d, const std::string& file, const std::string& path) {
  if (d.is_null()) return;
  std::string type = type_of(d, file, path);
  Step st{};
  if (type == "Sequence") {
    const Json& list = get_array(d, "decoders", file, path);
    for (size_t k = 0; k < list.size(); ++k) {
      parse(list[k], file, fmt::format("{}.decoders[{}]", path, k));
    }
    return;
  } else if (type == "ByteLevel") {
    st.kind = Step::Kind::kByteLevel;
  } else if (type == "Replace") {
    st.kind = Step::Kind::kReplace;
    auto content = get_string(d, "content", file, path);
    if (!content) fail("{}: {}.content must be a string", file, path);
    st.text = *content;
    st.pattern = std::make_shared<const Regex>(pattern_field(d, file, path));
  } else if (type == "ByteFallback") {
    st.kind = Step::Kind::kByteFallback;
  } else if (type == "Fuse") {
    st.kind = Step::Kind::kFuse;
  } else if (type == "Strip") {
    st.kind = Step::Kind::kStrip;
    st.text = one_char(d, "content", " ", file, path);
    st.start = count_of(d, "start", file, path);
    st.stop = count_of(d, "stop", file, path);
  } else if (type == "Metaspace") {
    st.kind = Step::Kind::kMetaspace;
    st.text = one_char(d, "replacement", "\u2581", file, path);
    auto scheme = get_string(d, "prepend_scheme", file, path);
    if (!scheme) scheme = get_bool(d, "add_prefix_space", true, file, path) ? "always" : "never";
    if (*scheme != "always" && *scheme != "never" && *scheme != "first") {
      fail("{}: {}.prepend_scheme '{}' is not one of always, never, first", file, path, *scheme);
    }
    st.prepend = *scheme != "never";
  } else {
    fail(
        "{}: {}.type '{}' is not supported (supported: ByteLevel, Replace, ByteFallback, Fuse, "
        "Strip, Metaspace, Sequence)",
        file, path, type);
  }
  steps_.push_back(std::move(st));
}

bool Decoder::byte_level_only() const {
  return steps_.size() == 1 && steps_[0].kind == Step::Kind::kByteLevel;
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (steps_.empty()) {  // no decoder: TokenizerImpl::decode joins with spaces
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) out.push_back(' ');
      out += tokens[i];
    }
    return out;
  }
  RegexScratch scratch;
  std::vector<std::pair<uint32_t, uint32_t>> matches;
  for (const Step& st : steps_) {
    switch (st.kind) {
      case Step::Kind::kByteLevel: {
        unicode::ByteLevelAlphabet alphabet;
        std::string bytes;
        for (const std::string& t : tokens) {
          if (!alphabet.to_bytes(t, bytes)) bytes += t;
        }
        tokens.assign(1, unicode::utf8_lossy(bytes));
        break;
      }
      case Step::Kind::kReplace:
        for (std::string& t : tokens) {
          st.pattern->find_all(t, scratch, matches);
          if (matches.empty()) continue;
          std::string r;
          uint32_t prev = 0;
          for (auto [a, b] : matches) {
            r.append(t, prev, a - prev);
            r += st.text;
            prev = b;
          }
          r.append(t, prev, std::string::npos);
          t.swap(r);
        }
        break;
      case Step::Kind::kByteFallback: {
        std::vector<std::string> out;
        std::string pending;  // bytes of the current <0xXX> run
        size_t count = 0;
        auto flush = [&] {
          if (count == 0) return;
          if (!unicode::find_invalid_utf8(pending)) {
            out.push_back(pending);
          } else {
            for (size_t k = 0; k < count; ++k) out.emplace_back("\uFFFD");
          }
          pending.clear();
          count = 0;
        };
        for (std::string& t : tokens) {
          if (auto b = fallback_byte(t)) {
            pending.push_back(static_cast<char>(*b));
            ++count;
          } else {
            flush();
            out.push_back(std::move(t));
          }
        }
        flush();
        tokens.swap(out);
        break;
      }
      case Step::Kind::kFuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case Step::Kind::kStrip:
        for (std::string& t : tokens) {
          auto ch = chars_of(t);
          size_t lead = 0, trail = 0;
          while (lead < st.start && lead < ch.size() && ch[lead] == st.text) ++lead;
          while (trail < st.stop && trail < ch.size() && ch[ch.size() - 1 - trail] == st.text) {
            ++trail;
          }
          std::string r;
          for (size_t k = lead; k + trail < ch.size(); ++k) r += ch[k];
          t.swap(r);
        }
        break;
      case Step::Kind::kMetaspace:
        // Every replacement becomes ' ', except in the first token when a prefix was prepended
        // (there each one is dropped: Metaspace::decode_chain).
        for (size_t i = 0; i < tokens.size(); ++i) {
          std::string r;
          for (std::string_view c : chars_of(tokens[i])) {
            if (c == st.text) {
              if (!(i == 0 && st.prepend)) r.push_back(' ');
            } else {
              r += c;
            }
          }
          tokens[i].swap(r);
        }
        break;
    }
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

}  // namespace zt::text
