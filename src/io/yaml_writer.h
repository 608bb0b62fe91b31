// The YAML writer: json_to_yaml writes a JSON value as block-style YAML (the resolved `args.yaml`
// a run leaves in its experiment directory) that reads back as the same value through
// load_hydra_yaml (io/hydra_yaml.h) and through OmegaConf.
#pragma once

#include <string>

#include "io/json.h"

namespace zt {

// Writes `value` as block-style YAML (used for the resolved `args.yaml`) that reads back as
// `value`, here and in OmegaConf: a string holding "${" has it escaped (`\${x}`, OmegaConf's
// escape; the backslashes before it doubled), and a string that is not plainly a name or a path is
// written double-quoted ("12:30", "true", "007", "", " x"; the YAML 1.1 booleans yes / no / on /
// off too), with escapes for what PyYAML reads only escaped (control characters and DEL as \x7f,
// U+2028 / U+2029 / U+FEFF / U+FFFE / U+FFFF as \uNNNN) and every other character as it is. A
// byte that is not UTF-8 is written as U+FFFD. Non-finite floats are .inf / -.inf / .nan.
std::string json_to_yaml(const Json& value);

}  // namespace zt
