// jinja2's builtin filters (jinja2 3.1 `filters.py`; the sequence ones are in
// jinja_filters_seq.cpp) and the filter table, with transformers' `tojson` override: json.dumps(x,
// ensure_ascii=False, indent=None, separators=None, sort_keys=False).
#include "text/jinja_filters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "text/jinja_interp.h"
#include "text/jinja_parser.h"
#include "text/jinja_pystr.h"

namespace zt::text::jinja {
namespace filters {

const std::string& str_arg(const Value* v, const char* what) {
  if (!v || !v->is_string()) raise("{}: expected a string argument", what);
  return v->str();
}
bool flag(const Value* v, bool dflt) { return v ? truthy(*v) : dflt; }

}  // namespace filters

namespace {

using namespace filters;  // NOLINT(build/namespaces)

int64_t len_of(const Value& v) {
  switch (v.type()) {
    case Type::kUndefined:
      return 0;
    case Type::kString:
      return static_cast<int64_t>(py::length(v.str()));
    case Type::kList:
    case Type::kTuple:
      return static_cast<int64_t>(v.items().size());
    case Type::kDict:
      return static_cast<int64_t>(v.dict().entries.size());
    case Type::kLoop:
      return static_cast<int64_t>(v.loop_state().items->size());
    default:
      raise("object of type '{}' has no len()", type_name(v));
  }
}

Value f_abs(Interp&, const Value& v, Args& a) {
  bind(a, {}, "filter 'abs'");
  if (v.type() == Type::kFloat) return Value::number(std::fabs(v.as_double()));
  if (v.is_int()) return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
  raise("bad operand type for abs(): '{}'", type_name(v));
}

Value f_attr(Interp& in, const Value& v, Args& a) {
  auto p = bind(a, {"name"}, "filter 'attr'");
  const std::string& n = str_arg(p[0], "filter 'attr'");
  if (v.type() == Type::kNamespace || v.type() == Type::kLoop) return in.getattr(v, n);
  bool found = false;
  Value m = get_method(v, n, &found);
  return found ? m
               : Value::undefined(fmt::format("{} has no attribute {}",
                                              py::repr(object_type_repr(v)), py::repr(n)));
}

Value f_capitalize(Interp&, const Value& v, Args& a) {
  bind(a, {}, "filter 'capitalize'");
  return Value::string(py::capitalize(to_str(v)));
}

Value f_center(Interp& in, const Value& v, Args& a) {
  auto p = bind(a, {"width"}, "filter 'center'");
  Args m;
  m.pos.push_back(p[0] ? *p[0] : Value::integer(80));
  return call_method(in, Value::string(to_str(v)), "center", m);
}

Value f_length(Interp&, const Value& v, Args& a) {
  bind(a, {}, "filter 'length'");
  return Value::integer(len_of(v));
}

Value f_default(Interp&, const Value& v, Args& a) {
  auto p = bind(a, {"default_value", "boolean"}, "filter 'default'");
  if (v.is_undefined() || (flag(p[1]) && !truthy(v))) return p[0] ? *p[0] : Value::string("");
  return v;
}

Value f_escape(Interp&, const Value& v, Args& a) {
  bind(a, {}, "filter 'escape'");
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return Value::string(std::move(out));
}

// Python float(str): surrounding whitespace allowed, underscores between digits.
bool parse_float(const std::string& s, double* out) {
  std::string t = py::strip(s, nullptr, true, true), clean;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '_') {
      if (i == 0 || i + 1 == t.size() || !std::isdigit(static_cast<unsigned char>(t[i - 1])) ||
          !std::isdigit(static_cast<unsigned char>(t[i + 1])))
        return false;
      continue;
    }
    clean.push_back(t[i]);
  }
  if (clean.empty() || clean.find_first_of("xXpP") != std::string::npos) return false;
  char* end = nullptr;
  *out = std::strtod(clean.c_str(), &end);
  return end == clean.c_str() + clean.size();
}

bool parse_int(const std::string& s, int base, int64_t* out) {
  std::string t = py::strip(s, nullptr, true, true), clean;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '_' && i > 0 && i + 1 < t.size() &&
        std::isalnum(static_cast<unsigned char>(t[i + 1])))
      continue;
    clean.push_back(t[i]);
  }
  if (clean.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(clean.c_str(), &end, base);
  if (errno != 0 || end != clean.c_str() + clean.size() ||
      !std::isalnum(static_cast<unsigned char>(clean.back())))
    return false;
  *out = v;
  return true;
}

Value f_float(Interp&, const Value& v, Args& a) {
  auto p = bind(a, {"default"}, "filter 'float'");
  if (v.is_number()) return Value::number(v.as_double());
  double d;
  if (v.is_string() && parse_float(v.str(), &d)) return Value::number(d);
  return p[0] ? *p[0] : Value::number(0.0);
}

Value f_int(Interp&, const Value& v, Args& a) {
  auto p = bind(a, {"default", "base"}, "filter 'int'");
  Value dflt = p[0] ? *p[0] : Value::integer(0);
  if (v.is_int()) return Value::integer(v.as_int());
  if (v.type() == Type::kFloat) {
    double d = v.as_double();
    if (!std::isfinite(d)) return dflt;
    return Value::integer(static_cast<int64_t>(std::trunc(d)));
  }
  if (v.is_string()) {
    int64_t i;
    int base = p[1] ? static_cast<int>(p[1]->as_int()) : 10;
    if (parse_int(v.str(), base, &i)) return Value::integer(i);
    double d;
    if (parse_float(v.str(), &d) && std::isfinite(d))
      return Value::integer(static_cast<int64_t>(std::trunc(d)));
  }
  return dflt;
}

Value f_indent(Interp&, const Value& v, Args& a) {
  auto p = bind(a, {"width", "first", "blank"}, "filter 'indent'");
  std::string ind =
      !p[0] ? "    "
      : p[0]->is_string()
          ? p[0]->str()
          : std::string(static_cast<size_t>(std::max<int64_t>(0, p[0]->as_int())), ' ');
  std::string s = to_str(v) + "\n";
  std::vector<std::string> lines = py::splitlines(s, false);
  std::string rv;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) {
      rv += '\n';
      // blank=True indents empty lines too
      if (flag(p[2]) || !lines[i].empty()) rv += ind;
    }
    rv += lines[i];
  }
  if (flag(p[1])) rv = ind + rv;
  return Value::string(std::move(rv));
}

Value f_lower(Interp&, const Value& v, Args& a) {
  bind(a, {}, "filter 'lower'");
  return Value::string(py::lower(to_str(v)));
}
Value f_upper(Interp&, const Value& v, Args& a) {
  bind(a, {}, "filter 'upper'");
  return Value::string(py::upper(to_str(v)));
}

Value f_replace(Interp&, const Value& v, Args& a) {
  auto p = bind(a, {"old", "new", "count"}, "filter 'replace'");
  if (!p[0] || !p[1]) raise("filter 'replace' needs the old and new strings");
  int64_t count = p[2] && !p[2]->is_none() ? p[2]->as_int() : -1;
  return Value::string(py::replace(to_str(v), to_str(*p[0]), to_str(*p[1]), count));
}

Value f_round(Interp&, const Value& v, Args& a) {
  auto p = bind(a, {"precision", "method"}, "filter 'round'");
  int64_t prec = p[0] ? p[0]->as_int() : 0;
  std::string method = p[1] ? str_arg(p[1], "filter 'round'") : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    raise("method must be common, ceil or floor");
  if (!v.is_number()) raise("type {} doesn't define __round__ method", type_name(v));
  if (method == "common") {
    if (v.is_int()) return Value::integer(v.as_int());  // round(int, n) is an int
    double d = v.as_double();
    if (!std::isfinite(d)) return v;
    if (prec == 0) return Value::number(std::nearbyint(d));
    if (prec < 0) {
      double scale = std::pow(10.0, static_cast<double>(-prec));
      return Value::number(std::nearbyint(d / scale) * scale);
    }
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::min<int64_t>(prec, 300)), d);
    return Value::number(std::strtod(buf, nullptr));
  }
  double scale = std::pow(10.0, static_cast<double>(prec));
  double x = v.as_double() * scale;
  return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_safe(Interp&, const Value& v, Args& a) {
  bind(a, {}, "filter 'safe'");
  return Value::string(to_str(v));
}

Value f_string(Interp&, const Value& v, Args& a) {
  bind(a, {}, "filter 'string'");
  return Value::string(to_str(v));
}

Value f_title(Interp&, const Value& v, Args& a) {
  bind(a, {}, "filter 'title'");
  // "".join(w[0].upper() + w[1:].lower() for w in re.split(r"([-\s({\[<]+)", s) if w)
  std::u32string u = py::decode(to_str(v));
  std::string out;
  auto is_sep = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py::is_space(c);
  };
  size_t i = 0;
  while (i < u.size()) {
    size_t j = i;
    bool sep = is_sep(u[i]);
    while (j < u.size() && is_sep(u[j]) == sep) ++j;
    out += py::upper(py::encode(std::u32string_view(u).substr(i, 1)));
    out += py::lower(py::encode(std::u32string_view(u).substr(i + 1, j - i - 1)));
    i = j;
  }
  return Value::string(std::move(out));
}

Value f_tojson(Interp&, const Value& v, Args& a) {
  auto p = bind(a, {"ensure_ascii", "indent", "separators", "sort_keys"}, "filter 'tojson'");
  DumpOptions o;
  o.ensure_ascii = flag(p[0]);
  o.sort_keys = flag(p[3]);
  if (p[1] && !p[1]->is_none()) {
    o.pretty = true;
    o.indent = p[1]->is_string()
                   ? p[1]->str()
                   : std::string(static_cast<size_t>(std::max<int64_t>(0, p[1]->as_int())), ' ');
  }
  o.item_sep = o.pretty ? "," : ", ";
  if (p[2] && !p[2]->is_none()) {
    if (!p[2]->is_sequence() || p[2]->items().size() != 2)
      raise("separators must be a (item, key) pair");
    o.item_sep = str_arg(&p[2]->items()[0], "tojson separators");
    o.key_sep = str_arg(&p[2]->items()[1], "tojson separators");
  }
  return Value::string(dumps(v, o));
}

Value f_trim(Interp&, const Value& v, Args& a) {
  auto p = bind(a, {"chars"}, "filter 'trim'");
  const std::string* chars = p[0] && !p[0]->is_none() ? &str_arg(p[0], "filter 'trim'") : nullptr;
  return Value::string(py::strip(to_str(v), chars, true, true));
}

Value f_truncate(Interp&, const Value& v, Args& a) {
  auto p = bind(a, {"length", "killwords", "end", "leeway"}, "filter 'truncate'");
  std::u32string s = py::decode(to_str(v));
  int64_t length = p[0] ? p[0]->as_int() : 255,
          leeway = p[3] && !p[3]->is_none() ? p[3]->as_int() : 5;
  std::string end = p[2] ? to_str(*p[2]) : "...";
  auto end_len = static_cast<int64_t>(py::length(end));
  if (length < end_len) raise("expected length >= {}, got {}", end_len, length);
  if (static_cast<int64_t>(s.size()) <= length + leeway) return Value::string(py::encode(s));
  std::string head = py::encode(s.substr(0, static_cast<size_t>(length - end_len)));
  if (flag(p[1])) return Value::string(head + end);
  std::string sp = " ";
  return Value::string(py::split(head, &sp, 1, true)[0] + end);
}

Value f_wordcount(Interp&, const Value& v, Args& a) {
  bind(a, {}, "filter 'wordcount'");
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : py::decode(to_str(v))) {
    bool w = py::is_alpha(c) || py::is_digit(c) || c == '_';
    n += w && !in_word;
    in_word = w;
  }
  return Value::integer(n);
}

Value f_format(Interp&, const Value& v, Args& a) {
  if (!a.kw.empty() && !a.pos.empty())
    raise("can't handle positional and keyword arguments at the same time");
  if (!a.kw.empty()) {
    auto d = std::make_shared<Dict>();
    for (auto& [k, val] : a.kw) d->set(Value::string(k), val);
    return Value::string(percent_format(to_str(v), Value::dict(std::move(d))));
  }
  return Value::string(percent_format(to_str(v), Value::tuple(a.pos)));
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;  // null: a jinja2 filter zerotune does not implement
};

// Every jinja2 3.1 builtin filter name (FILTERS in jinja2/filters.py).
constexpr FilterEntry kFilters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"batch", nullptr},
    {"capitalize", f_capitalize},
    {"center", f_center},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"filesizeformat", nullptr},
    {"first", f_first},
    {"float", f_float},
    {"forceescape", nullptr},
    {"format", f_format},
    {"groupby", nullptr},
    {"indent", f_indent},
    {"int", f_int},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"items", f_items},
    {"map", f_map},
    {"min", f_min},
    {"max", f_max},
    {"pprint", nullptr},
    {"random", nullptr},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"slice", nullptr},
    {"sort", f_sort},
    {"string", f_string},
    {"striptags", nullptr},
    {"sum", f_sum},
    {"title", f_title},
    {"trim", f_trim},
    {"truncate", f_truncate},
    {"unique", f_unique},
    {"upper", f_upper},
    {"urlencode", nullptr},
    {"urlize", nullptr},
    {"wordcount", f_wordcount},
    {"wordwrap", nullptr},
    {"xmlattr", nullptr},
    {"tojson", f_tojson},
};

}  // namespace

FilterFn find_filter(std::string_view name, bool* known) {
  for (const auto& f : kFilters) {
    if (f.name == name) {
      *known = true;
      return f.fn;
    }
  }
  *known = false;
  return nullptr;
}

}  // namespace zt::text::jinja
