// Internal to the filter implementation files (jinja_filters.cpp, jinja_filters_seq.cpp): shared
// helpers and the sequence filters the filter table refers to.
#pragma once

#include <string>

#include "text/jinja_interp.h"

namespace zt::text::jinja::filters {

// The string value of an argument; raises naming `what` otherwise.
const std::string& str_arg(const Value* v, const char* what);
// Truthiness of an optional argument.
bool flag(const Value* v, bool dflt = false);
// jinja2 make_attrgetter: "a.b.0" looked up part by part with getitem; digit parts become ints.
Value get_path(Interp& in, Value item, const Value& attribute);
// jinja2 ignore_case: lower-cases strings unless `case_sensitive`.
Value ignore_case(const Value& v, bool case_sensitive);

Value f_dictsort(Interp& in, const Value& v, Args& a);
Value f_first(Interp& in, const Value& v, Args& a);
Value f_last(Interp& in, const Value& v, Args& a);
Value f_items(Interp& in, const Value& v, Args& a);
Value f_join(Interp& in, const Value& v, Args& a);
Value f_list(Interp& in, const Value& v, Args& a);
Value f_map(Interp& in, const Value& v, Args& a);
Value f_max(Interp& in, const Value& v, Args& a);
Value f_min(Interp& in, const Value& v, Args& a);
Value f_select(Interp& in, const Value& v, Args& a);
Value f_reject(Interp& in, const Value& v, Args& a);
Value f_selectattr(Interp& in, const Value& v, Args& a);
Value f_rejectattr(Interp& in, const Value& v, Args& a);
Value f_reverse(Interp& in, const Value& v, Args& a);
Value f_sort(Interp& in, const Value& v, Args& a);
Value f_sum(Interp& in, const Value& v, Args& a);
Value f_unique(Interp& in, const Value& v, Args& a);

}  // namespace zt::text::jinja::filters
