// Internal to io/hydra_yaml.cpp: OmegaConf's `${…}` interpolations, resolved in a composed config
// (`${a.b}`, relative `${.b}`, `${oc.env:VAR,default}`, escapes `\${x}`).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "io/json.h"

namespace zt::detail {

// A whole-value interpolation that gave a mapping or a list: the value at key path `to` is a copy
// of the one at `from` (`to: ${from}`).
struct InterpolatedCopy {
  std::string to;
  std::string from;
};

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
// other than oc.env is used, or a "${" is unterminated. `copies`, when given, receives each
// whole-value interpolation that gave a mapping or a list, in the order resolved (a copy made
// inside a value before the copy of that value).
void resolve_interpolations(Json& root, const std::filesystem::path& file,
                            const std::vector<std::string>& from_command_line,
                            std::vector<InterpolatedCopy>* copies = nullptr);

}  // namespace zt::detail
