// jinja2's builtin tests (`x is name`), jinja2 3.1 `tests.py`.
#include "text/jinja_interp.h"
#include "text/jinja_parser.h"

namespace zt::text::jinja {
namespace {

bool t_defined(Interp&, const Value& v, Args&) { return !v.is_undefined(); }
bool t_undefined(Interp&, const Value& v, Args&) { return v.is_undefined(); }
bool t_none(Interp&, const Value& v, Args&) { return v.is_none(); }
bool t_boolean(Interp&, const Value& v, Args&) { return v.type() == Type::kBool; }
bool t_true(Interp&, const Value& v, Args&) { return v.type() == Type::kBool && v.as_bool(); }
bool t_false(Interp&, const Value& v, Args&) { return v.type() == Type::kBool && !v.as_bool(); }
bool t_integer(Interp&, const Value& v, Args&) { return v.type() == Type::kInt; }
bool t_float(Interp&, const Value& v, Args&) { return v.type() == Type::kFloat; }
bool t_number(Interp&, const Value& v, Args&) { return v.is_number(); }  // bool is a Number
bool t_string(Interp&, const Value& v, Args&) { return v.is_string(); }
bool t_mapping(Interp&, const Value& v, Args&) { return v.is_mapping(); }
// Undefined defines __call__, __iter__, __len__ and __getitem__, so jinja2 says yes to these.
bool t_callable(Interp&, const Value& v, Args&) {
  return v.type() == Type::kCallable || v.is_undefined();
}
bool t_iterable(Interp&, const Value& v, Args&) {
  return v.is_undefined() || v.is_string() || v.is_sequence() || v.is_mapping() ||
         v.type() == Type::kLoop;
}
bool t_sequence(Interp&, const Value& v, Args&) {
  return v.is_undefined() || v.is_string() || v.is_sequence() || v.is_mapping();
}
bool t_escaped(Interp&, const Value&, Args&) { return false; }  // no Markup values here

bool str_pred(Interp& in, const Value& v, const char* method) {
  Args none;
  return truthy(call_method(in, Value::string(to_str(v)), method, none));
}
bool t_lower(Interp& in, const Value& v, Args&) { return str_pred(in, v, "islower"); }
bool t_upper(Interp& in, const Value& v, Args&) { return str_pred(in, v, "isupper"); }

Value one_arg(Args& a, const char* what) {
  auto p = bind(a, {"other"}, what);
  if (!p[0]) raise("{} needs an argument", what);
  return *p[0];
}
bool t_odd(Interp&, const Value& v, Args&) {
  return equals(binary_op(BinOp::kMod, v, Value::integer(2)), Value::integer(1));
}
bool t_even(Interp&, const Value& v, Args&) {
  return equals(binary_op(BinOp::kMod, v, Value::integer(2)), Value::integer(0));
}
bool t_divisibleby(Interp&, const Value& v, Args& a) {
  return equals(binary_op(BinOp::kMod, v, one_arg(a, "test 'divisibleby'")), Value::integer(0));
}
bool t_in(Interp&, const Value& v, Args& a) { return contains(one_arg(a, "test 'in'"), v); }
bool t_sameas(Interp&, const Value& v, Args& a) {
  Value o = one_arg(a, "test 'sameas'");
  if (v.type() != o.type()) return false;
  if (v.identity()) return v.identity() == o.identity();
  return equals(v, o);
}
bool t_eq(Interp&, const Value& v, Args& a) {
  return compare(CmpOp::kEq, v, one_arg(a, "test 'eq'"));
}
bool t_ne(Interp&, const Value& v, Args& a) {
  return compare(CmpOp::kNe, v, one_arg(a, "test 'ne'"));
}
bool t_lt(Interp&, const Value& v, Args& a) {
  return compare(CmpOp::kLt, v, one_arg(a, "test 'lt'"));
}
bool t_le(Interp&, const Value& v, Args& a) {
  return compare(CmpOp::kLe, v, one_arg(a, "test 'le'"));
}
bool t_gt(Interp&, const Value& v, Args& a) {
  return compare(CmpOp::kGt, v, one_arg(a, "test 'gt'"));
}
bool t_ge(Interp&, const Value& v, Args& a) {
  return compare(CmpOp::kGe, v, one_arg(a, "test 'ge'"));
}
bool t_filter(Interp&, const Value& v, Args&) {
  bool known = false;
  return v.is_string() && find_filter(v.str(), &known) != nullptr;
}
bool t_test(Interp&, const Value& v, Args&) {
  bool known = false;
  return v.is_string() && find_test(v.str(), &known) != nullptr;
}

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

// Every jinja2 3.1 builtin test name (TESTS in jinja2/tests.py).
constexpr TestEntry kTests[] = {
    {"odd", t_odd},
    {"even", t_even},
    {"divisibleby", t_divisibleby},
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"filter", t_filter},
    {"test", t_test},
    {"none", t_none},
    {"boolean", t_boolean},
    {"false", t_false},
    {"true", t_true},
    {"integer", t_integer},
    {"float", t_float},
    {"lower", t_lower},
    {"upper", t_upper},
    {"string", t_string},
    {"mapping", t_mapping},
    {"number", t_number},
    {"sequence", t_sequence},
    {"iterable", t_iterable},
    {"callable", t_callable},
    {"sameas", t_sameas},
    {"escaped", t_escaped},
    {"in", t_in},
    {"==", t_eq},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"!=", t_ne},
    {"ne", t_ne},
    {">", t_gt},
    {"gt", t_gt},
    {"greaterthan", t_gt},
    {"ge", t_ge},
    {">=", t_ge},
    {"<", t_lt},
    {"lt", t_lt},
    {"lessthan", t_lt},
    {"<=", t_le},
    {"le", t_le},
};

}  // namespace

TestFn find_test(std::string_view name, bool* known) {
  for (const auto& t : kTests) {
    if (t.name == name) {
      *known = true;
      return t.fn;
    }
  }
  *known = false;
  return nullptr;
}

}  // namespace zt::text::jinja
