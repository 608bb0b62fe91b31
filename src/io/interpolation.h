// Internal to io/hydra_yaml.cpp: OmegaConf's `${…}` interpolations — resolving them in a composed
// config (`${a.b}`, relative `${.b}`, `${oc.env:VAR,default}`, escapes `\${x}`), and hiding them
// from the YAML parse of a command-line override's value, as Hydra's override grammar reads them.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "io/json.h"

namespace zt::detail {

// Resolves every interpolation of `root` in place, as OmegaConf does: a whole-value `${a.b}` keeps
// the referenced value's type, one inside a string concatenates its text; `${.b}` / `${..b}` are
// relative to the mapping holding the value; `${oc.env:VAR}` / `${oc.env:VAR,default}` give the
// environment variable's text, both arguments resolved first (each may interpolate or be quoted;
// a quoted one is text with its quotes and escapes undone); 2k+1 backslashes before "${" make it
// text. A referenced value is the config's as written, resolved once. `file` names the config in
// errors; `from_command_line` are the key paths the overrides set (an error at or below one says
// so). Throws zt::Error naming the file and the key path holding the interpolation when it points
// at no key, at a ??? value, above the top of the config, or loops; when an environment variable
// without a default is not set, oc.env names no variable or gets more than 2 arguments, a resolver
// other than oc.env is used, or a "${" is unterminated.
void resolve_interpolations(Json& root, const std::filesystem::path& file,
                            const std::vector<std::string>& from_command_line);

// Hydra's override grammar reads an interpolation (`${a.b}`, `${oc.env:VAR,default}`) as one token
// wherever it stands, also inside a list or a dict; YAML would read its braces and colon as a flow
// mapping (`${oc.env:HOME}` as {"${oc.env": "HOME}"}). So each interpolation outside quotes is
// swapped for a placeholder — U+E000 <index> U+E001, private-use characters that YAML reads as
// plain text — before the YAML parse, and put back into the strings after it. Appends the
// interpolations to `out` in order and returns the text with the placeholders.
std::string hide_interpolations(const std::string& v, std::vector<std::string>* out);

// Every string and mapping key in `v` with the placeholders of hide_interpolations() replaced by
// the interpolations in `interps` they stand for (`interps[i]` for the placeholder of index i).
void restore_interpolations(Json& v, const std::vector<std::string>& interps);

}  // namespace zt::detail
