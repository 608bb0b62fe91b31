// The value of a command-line override (`key=value`) read in Hydra 1.3's override grammar
// (hydra/grammar/OverrideLexer.g4 and OverrideParser.g4, with the typing of
// hydra/core/override_parser/overrides_visitor.py and the cast functions of
// hydra/_internal/grammar/grammar_functions.py), read for behaviour and written here from scratch:
// a hand-written lexer with ANTLR's longest-match rule and a recursive-descent parser.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "io/json.h"

namespace zt {

// The typed value of override `ov` — the text after its '=' at index `eq` — as Hydra 1.3 reads it:
//   - nothing (or only spaces and tabs) after the '=' is the empty string (`key=`);
//   - a primitive is a run of words, numbers, interpolations, the characters / - \ + . $ % * @ ? |
//     and ':', escapes (\\ \( \) \[ \] \{ \} \: \= \, "\ " and "\<tab>", each the character
//     after its backslash) and inner spaces, its outer spaces dropped (`  x y  ` is "x y"); one
//     token alone is typed: an int ([+-]?(0|[1-9](_?[0-9])*): `1_000` is 1000), a float (1.5, 1.,
//     .5, 1e3, inf, nan in any case, `_` between digits), true / false / null in any case, else
//     text; several tokens are text (`007`, `1__0`, `-`, `a\,b` is "a,b"); a value that is one
//     int outside int64 stays its text (`99999999999999999999`), as in a YAML file
//     (io/hydra_yaml.h), for the config check to name the key's own range;
//   - a quoted value ('…' or "…") is text, closed by the first quote with an even run of
//     backslashes before it; a run of n backslashes before a quote is n/2 of them (`'a\'b'` is
//     a'b, `'a\\'` is a\), other backslashes are text;
//   - a list `[a, 1, [b]]` and a dict `{a: 1, b: [x]}` of elements; a dict key is a primitive
//     without ':' or interpolations, never quoted, and its text is what Hydra's str() gives for it
//     (`{1_0: a}` has key "10", `{true: a}` "true");
//   - an interpolation `${…}` is text kept for the config's resolver (io/interpolation.h), also
//     inside lists, dicts and quotes; unlike Hydra's lexer, which ends it at the first '}', an
//     unquoted nested one (`${oc.env:A,${b}}`) runs to the '}' matching its '{';
//   - the cast functions int(x), float(x), str(x), bool(x) (also `value=x`; applied to each
//     element of a list and each value of a dict, as Hydra's) and sort(list) /
//     sort(list=…, reverse=true).
// Throws zt::Error naming `ov` for: a character the grammar does not allow unquoted ('~', '#',
// non-ASCII), an unterminated quote, bracket, brace or interpolation, what was expected at which
// character (1-based in `ov`) and what was found there; a sweep (top-level `a,b`, choice, range,
// interval, glob, tag, a function given several values: hydra_sweep.h's message) or shuffle(); an
// unknown function; a cast Python's int() / float() / Hydra's bool() refuses; an int outside
// int64 inside a list, dict or function call; nesting deeper than 200 levels; a dict key given
// twice (Hydra keeps the last value; zerotune refuses, as it refuses a key given twice in a file).
Json parse_override_value(const std::string& ov, size_t eq);

// Python's str() of `s` when the whole of it is one int, float or bool token of Hydra's override
// grammar, tokens OmegaConf's grammar shares for an unquoted resolver argument (oc.env's default):
// an int in decimal without '+' or '_', of any size as Python's ints (`+1_000` is "1000", `-0` is
// "0"); a float as Python's repr() (`1.50` is "1.5", `1e3` "1000.0", `-INF` "-inf"); a bool "True"
// or "False" (any case). nullopt for anything else (`007`, `1__0`, `yes`, `null`, `a b`).
std::optional<std::string> python_str_of_token(std::string_view s);

// The text of a quoted value `quoted` ('…' or "…", its quotes included) with Hydra's quoted-string
// escapes undone, which are also OmegaConf's for a quoted resolver argument: a run of n
// backslashes before the quote character is n/2 backslashes, followed by the quote when it stands
// inside (`'a\'b'` is a'b, `'a\\\'b'` is a\'b) and by nothing at the end (`'a\\'` is a\); all
// other backslashes are text (`'a\b'` stays a\b). `quoted` holds at least its two quotes.
std::string unquote_hydra_string(std::string_view quoted);

}  // namespace zt
