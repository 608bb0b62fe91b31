// json_to_yaml (io/yaml_writer.h): the emitter walk over a JSON value, the quoting rule for strings
// (plain only when every YAML reader reads the text back as the same string), the escapes of a
// double-quoted string (what PyYAML reads only escaped) and OmegaConf's escape of "${" in strings.
#include "io/yaml_writer.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cassert>
#include <cmath>
#include <regex>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "core/spelling.h"
#include "io/hydra_yaml.h"
#include "io/yaml_load.h"

namespace zt {
namespace {

// Whether `s` can be written as a plain YAML scalar that every YAML 1.1 or 1.2 reader (PyYAML and
// OmegaConf, yaml-cpp, ours) reads back as this string. Deliberately narrow: a name or a path —
// letters, digits and _ . / - only, starting with a letter, '_', '/', './' or '../' — that is none
// of YAML 1.1's booleans (yes / no / on / off / y / n, any case: PyYAML reads `save_strategy: no`
// as False), null, or a number to any of them (inf, nan). Anything else is quoted: "12:30" (a
// sexagesimal int, 750, to PyYAML), "007", "", " x", "-x", "a b".
bool plain_scalar_safe(const std::string& s) {
  static const std::regex name_or_path(R"(([A-Za-z_/]|\.\.?/)[A-Za-z0-9_./-]*)");
  static const std::set<std::string> kWords = {"true", "false", "yes",  "no",  "on", "off",
                                               "y",    "n",     "null", "inf", "nan"};
  return std::regex_match(s, name_or_path) && kWords.count(ascii_lower(s)) == 0 &&
         yaml_scalar_to_json(s, false).is_string();
}

// The code point of the UTF-8 character at s[i] and its length in bytes; a byte that starts no
// well-formed character (io/yaml_load.h's first_invalid_utf8_byte) is U+FFFD, one byte long.
std::pair<char32_t, size_t> next_code_point(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return {b, 1};
  const size_t len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
  if (first_invalid_utf8_byte(s.substr(i, len)) != -1) return {0xFFFD, 1};
  char32_t cp = b & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return {cp, len};
}

// `s` as a double-quoted YAML scalar that PyYAML (so OmegaConf), yaml-cpp and zerotune read back as
// `s`. Escaped: '"' and '\'; \b \t \n \f \r; the other C0 controls, DEL, the C1 controls and
// U+00A0 as \xNN (PyYAML refuses the controls and DEL unescaped: its reader's printable set is
// tab, LF, CR, U+0020–U+007E, U+0085, U+00A0–U+D7FF, U+E000–U+FFFD, U+10000–U+10FFFF; it reads a
// raw U+0085 as a line break); U+2028 and U+2029 (line breaks to PyYAML), U+FEFF (a byte order
// mark) and U+FFFE, U+FFFF (refused unescaped) as \uNNNN. Everything else is written as it is,
// U+10FFFF and the other noncharacters included. A byte of `s` that is not UTF-8 is written as
// U+FFFD (a YAML text is UTF-8; nothing else reads back).
std::string double_quoted(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const auto [cp, len] = next_code_point(s, i);
    switch (cp) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0)) {
          out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
        } else if (cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF || cp == 0xFFFE || cp == 0xFFFF) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
        } else if (cp == 0xFFFD && len == 1) {
          out += "\xEF\xBF\xBD";  // U+FFFD for a byte that is not UTF-8
        } else {
          out += s.substr(i, len);
        }
    }
    i += len;
  }
  return out + '"';
}

// A string value as OmegaConf reads it back: a string holding "${" is read as an interpolation, so
// each "${" is escaped as OmegaConf's grammar escapes it — the n backslashes before it doubled and
// one more added (`${x}` is written `\${x}`, `\${x}` as `\\\${x}`); other backslashes are text
// there. A string without "${" is never parsed, and is written as it is.
std::string escape_interpolations(const std::string& s) {
  std::string out;
  size_t i = 0;
  for (size_t open = s.find("${"); open != std::string::npos; open = s.find("${", i)) {
    size_t run = open;
    while (run > i && s[run - 1] == '\\') --run;
    out += s.substr(i, run - i) + std::string(2 * (open - run) + 1, '\\') + "${";
    i = open + 2;
  }
  return out + s.substr(i);
}

// yaml-cpp lays out the maps and sequences; every scalar's text is written here, since yaml-cpp's
// double-quoted strings leave DEL raw (PyYAML then refuses the whole file) and turn U+FFFE, U+FFFF,
// U+FDD0–U+FDEF and every plane's last two code points into U+FFFD. Each scalar goes to yaml-cpp as
// the double-quoted placeholder "N" (its index in `scalars`) and is put in its place afterwards:
// with every scalar a placeholder, the only '"' in yaml-cpp's text are theirs.
struct Emitter {
  YAML::Emitter out;
  std::vector<std::string> scalars;

  void scalar(std::string text, bool key) {
    // PyYAML reads a key of more than 1024 characters only after '?' (its simple keys are
    // shorter); yaml-cpp writes "? key" itself for a longer string, but sees only "N".
    if (key && text.size() > 1024) out << YAML::LongKey;
    if (key) out << YAML::Key;
    out << YAML::DoubleQuoted << std::to_string(scalars.size());
    scalars.push_back(std::move(text));
  }

  void text_scalar(const std::string& s, bool key) {
    scalar(plain_scalar_safe(s) ? s : double_quoted(s), key);
  }

  void emit(const Json& v) {
    if (v.is_object()) {
      out << YAML::BeginMap;
      for (auto& [k, c] : v.items()) {
        text_scalar(k, /*key=*/true);
        out << YAML::Value;
        emit(c);
      }
      out << YAML::EndMap;
    } else if (v.is_array()) {
      out << YAML::BeginSeq;
      for (const auto& c : v) emit(c);
      out << YAML::EndSeq;
    } else if (v.is_null()) {
      scalar("~", false);
    } else if (v.is_string()) {
      text_scalar(escape_interpolations(v.get_ref<const std::string&>()), false);
    } else if (v.is_boolean()) {
      scalar(v.get<bool>() ? "true" : "false", false);
    } else if (v.is_number_float() && !std::isfinite(v.get<double>())) {
      const double d = v.get<double>();  // dump() writes null for these
      scalar(std::isnan(d) ? ".nan" : d > 0 ? ".inf" : "-.inf", false);
    } else if (v.is_number_float()) {
      // dump() writes 1e-05; PyYAML's YAML 1.1 float needs a '.' (yaml.safe_load reads "1e-05" as a
      // string; OmegaConf and zerotune take either): 1.0e-05.
      std::string t = v.dump();
      if (const size_t e = t.find_first_of("eE");
          e != std::string::npos && t.find('.') == std::string::npos)
        t.insert(e, ".0");
      scalar(t, false);
    } else {
      scalar(v.dump(), false);
    }
  }

  // yaml-cpp's text with each placeholder "N" replaced by scalars[N].
  std::string yaml() const {
    const std::string laid_out = out.c_str();
    std::string result;
    size_t n = 0, i = 0;
    for (size_t open = laid_out.find('"'); open != std::string::npos;
         open = laid_out.find('"', i)) {
      const size_t close = laid_out.find('"', open + 1);
      assert(close != std::string::npos &&
             laid_out.substr(open + 1, close - open - 1) == std::to_string(n));
      result += laid_out.substr(i, open - i) + scalars[n++];
      i = close + 1;
    }
    assert(n == scalars.size());
    return result + laid_out.substr(i) + "\n";
  }
};

}  // namespace

std::string json_to_yaml(const Json& value) {
  Emitter e;
  e.emit(value);
  return e.yaml();
}

}  // namespace zt
