// Python's int() and float() of a string: how OmegaConf converts a string given for a typed int or
// float field (`${oc.env:STEPS}`, a quoted '10'), and, without the spaces, how Hydra's override
// grammar reads a decimal number (single underscores between digits, as Python allows them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zt {

// Python's int(s) in base 10: an optional sign, then decimal digits with single underscores between
// them ("1_000"; "1__0", "_1", "1_" are refused), leading zeros allowed ("010" is 10). With
// `spaces`, ASCII whitespace around the number is skipped (" 7\n" is 7), as int() does.
// nullopt where int() raises, and for a value outside int64 (Python's ints have no bound).
std::optional<int64_t> python_int(std::string_view s, bool spaces = true);

// Python's float(s): an optional sign, then inf / infinity / nan in any case, or digits with single
// underscores between them, an optional '.' and fraction (at least one digit in all: "5.", ".5"),
// an optional exponent ("1e-5", "1_0.5e1_0"). With `spaces`, ASCII whitespace around it is
// skipped. nullopt where float() raises; a finite text too large is inf, as in Python.
std::optional<double> python_float(std::string_view s, bool spaces = true);

// Python's repr() (and str()) of a float: the shortest text that reads back the same, with ".0" on
// a whole number, scientific when the exponent is below -4 or from 16 (`1.5`, `1000.0`, `1e-05`,
// `1e+16`, `inf`, `nan`).
std::string python_float_repr(double d);

}  // namespace zt
