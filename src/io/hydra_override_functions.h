// Internal to io/hydra_override.cpp: the evaluation of the functions of Hydra 1.3's override
// grammar that give one value (hydra/_internal/grammar/grammar_functions.py's cast_int,
// cast_float, cast_str, cast_bool and sort, read for behaviour), and the refusal of its sweeps and
// shuffle() inside a function call. The parser (hydra_override.cpp) reads a call's arguments and
// hands them here.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "io/json.h"

namespace zt {

// The text of a typed primitive as Hydra's str() cast writes it: a string as it is, true / false,
// an int in decimal, a float as Python's repr() (`1.0`, `1e-05`, `inf`); null, which str()
// refuses, is "null". The parser uses it for dict keys (`{1_0: a}` has key "10").
std::string hydra_str(const Json& v);

// The value of the call `call` (its text in the override, for messages) of Hydra function `name`
// with positional `args` and keyword `kwargs` (in the order given), in override `ov`:
//   - int(x), float(x), str(x), bool(x) (or `value=x`): x cast, each element of a list and each
//     value of a dict cast in turn, a string read as Python's int() / float() read it, bool() of
//     a string true / false in any case;
//   - sort(list) / sort(list=…, reverse=true): a list of numbers or of strings sorted stably,
//     anything else as it is.
// Throws zt::Error naming `ov` for: a sweep function (choice, range, interval, glob, tag), a cast
// or sort() given several values or `sweep=` (hydra_sweep.h's message); shuffle(); an unknown
// function or keyword argument; a cast with no value or with both kinds of argument; a value the
// cast refuses (Python's message: "invalid literal for int() with base 10: 'x'", "could not
// convert string to float: 'x'", "Cannot cast 'x' to bool", NaN / infinity / a float outside int64
// to int, null to anything but bool); sort() of a mix of types or with reverse / list of the wrong
// type.
Json call_hydra_function(const std::string& ov, const std::string& call, const std::string& name,
                         const std::vector<Json>& args,
                         const std::vector<std::pair<std::string, Json>>& kwargs);

}  // namespace zt
