// How zerotune reads every YAML text — the hydra-style sft.yaml, the accelerate config, a DeepSpeed
// JSON (read as YAML for its line numbers) and command-line override values — with the rules
// OmegaConf (PyYAML underneath) applies to the same files:
//   - the text must be UTF-8 (an error names the line and column of the first other byte);
//   - NEL (U+0085), LINE SEPARATOR (U+2028) and PARAGRAPH SEPARATOR (U+2029) are line breaks to
//     PyYAML (YAML 1.1) and ordinary characters to yaml-cpp (YAML 1.2), so a text holding one
//     reads differently (there a comment ends at it, a plain scalar stops, a quoted one folds it
//     to a space): refused, naming its line and column (inside double quotes the escapes \x85,
//     \u2028, \u2029 give the character in both; yaml-cpp's node holds \N and \_ as single
//     Latin-1 bytes, which the config reader re-encodes); not in a JSON text, where Python's json
//     reads them as characters;
//   - one document per file: a second document (`---`) is an error naming its line (PyYAML:
//     "expected a single document in the stream"), never silently dropped;
//   - aliases are bounded: the nodes that aliases stand for, summed over every alias, may number at
//     most kMaxYamlAliasNodes (a "billion laughs" chain of 28 lines would otherwise expand to
//     9^10 nodes; OmegaConf stops at 10,000 too); an alias inside the node it names (a recursive
//     structure) is refused;
//   - nesting deeper than kMaxYamlDepth is refused, with a message naming the line (yaml-cpp 0.7's
//     own recursion guard stops at 499 levels with "bad file" and the mark of a later token);
//   - a key given twice in a mapping is an error (check_unique_yaml_keys, io/unique_keys.h); a
//     mapping's own keys and the merge key `<<` count, keys it merges in do not;
//   - merge keys (YAML 1.1 `<<`, resolved by PyYAML and so by OmegaConf/hydra): `<<: *base` or
//     `<<: [*a, *b]` copies the entries of the mapping(s) into the mapping that holds it; its own
//     keys override merged ones, and in a list earlier mappings override later ones. Entry order
//     is PyYAML's (`flatten_mapping`): merged entries first (a list's mappings last to first), then
//     the mapping's own, a key keeping the place where it first appeared.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace zt {

// The most nodes that aliases may expand to in one YAML text.
inline constexpr uint64_t kMaxYamlAliasNodes = 10000;
// The deepest nesting of sequences/mappings read (the top-level mapping is level 1).
inline constexpr int kMaxYamlDepth = 400;

// Parses YAML `text` (ORIGIN names it in messages) with the rules above; merge keys are resolved
// in the returned tree (nodes keep their marks, so later messages can name lines). Syntax errors
// throw YAML::Exception (its mark holds line and column) for the caller to phrase; the rules above
// throw zt::Error "ORIGIN:LINE: …". `json`: the text is JSON (read as YAML for its line
// numbers), whose reader takes NEL, U+2028 and U+2029 as characters. `lenient`: a repeated key and
// those line breaks are let through (a dataset card's metadata, which huggingface_hub reads with
// yaml.safe_load: the last of a repeated key wins; the caller checks the part it reads).
YAML::Node load_yaml(const std::string& text, const std::string& origin, bool json = false,
                     bool lenient = false);

// Byte offset of the first byte of `s` that does not start or continue a well-formed UTF-8
// sequence (overlong forms, surrogates and code points above U+10FFFF are ill-formed; RFC 3629),
// or -1 when all of `s` is UTF-8. A YAML text must be UTF-8 (PyYAML refuses other bytes with
// "'utf-8' codec can't decode byte"): load_yaml and the command-line overrides check with it.
int64_t first_invalid_utf8_byte(std::string_view s);

}  // namespace zt
