// Jinja2 parser: tokens -> Template, following jinja2 3.x `Parser` (operator precedence, tuples,
// filters/tests binding tighter than arithmetic, `is not`, `not in`, chained comparisons).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/jinja_ast.h"
#include "text/jinja_lexer.h"

namespace zt::text::jinja {

// Parses a token list. Throws zt::Error "<name>:<line>: …" for a syntax error, an unknown or
// unsupported tag, filter or test (naming it), or an unclosed block.
Template parse(const std::vector<Token>& tokens, const std::string& name);

// Implemented in jinja_filters.cpp: the filter / test of that name, or null. `*known` tells
// whether jinja2 has it (then the engine merely does not support it).
FilterFn find_filter(std::string_view name, bool* known);
TestFn find_test(std::string_view name, bool* known);

}  // namespace zt::text::jinja
