// json_to_yaml (io/yaml_writer.h): the emitter walk over a JSON value, the quoting rule for strings
// (plain only when every YAML reader reads the text back as the same string) and OmegaConf's
// escape of "${" in strings.
#include "io/yaml_writer.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <regex>
#include <set>

#include "core/spelling.h"
#include "io/hydra_yaml.h"

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

void emit_string(YAML::Emitter& out, const std::string& s) {
  if (plain_scalar_safe(s))
    out << s;
  else
    out << YAML::DoubleQuoted << s;
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

void emit(YAML::Emitter& out, const Json& v) {
  if (v.is_object()) {
    out << YAML::BeginMap;
    for (auto& [k, c] : v.items()) {
      out << YAML::Key;
      emit_string(out, k);
      out << YAML::Value;
      emit(out, c);
    }
    out << YAML::EndMap;
  } else if (v.is_array()) {
    out << YAML::BeginSeq;
    for (const auto& c : v) emit(out, c);
    out << YAML::EndSeq;
  } else if (v.is_null()) {
    out << YAML::Null;
  } else if (v.is_string()) {
    emit_string(out, escape_interpolations(v.get_ref<const std::string&>()));
  } else if (v.is_boolean()) {
    out << (v.get<bool>() ? "true" : "false");
  } else if (v.is_number_float() && !std::isfinite(v.get<double>())) {
    const double d = v.get<double>();  // dump() writes null for these
    out << (std::isnan(d) ? ".nan" : d > 0 ? ".inf" : "-.inf");
  } else if (v.is_number_float()) {
    // dump() writes 1e-05; PyYAML's YAML 1.1 float needs a '.' (yaml.safe_load reads "1e-05" as a
    // string; OmegaConf and zerotune take either): 1.0e-05.
    std::string t = v.dump();
    if (const size_t e = t.find_first_of("eE");
        e != std::string::npos && t.find('.') == std::string::npos)
      t.insert(e, ".0");
    out << t;
  } else {
    out << v.dump();
  }
}

}  // namespace

std::string json_to_yaml(const Json& value) {
  YAML::Emitter out;
  emit(out, value);
  return std::string(out.c_str()) + "\n";
}

}  // namespace zt
