// Expression parsing (jinja2 3.x Parser.parse_tuple … parse_test): precedence from loosest to
// tightest: conditional, or, and, not, comparisons / in, + -, ~, * / // %, **, unary - +,
// then postfix (attribute, subscript, call) and filters / tests.
#include "text/jinja_parser_impl.h"

namespace zt::text::jinja {

bool Parser::is_tuple_end(const std::vector<std::string>& extra) const {
  if (cur().type == Tok::kVarEnd || cur().type == Tok::kBlockEnd || is_op(cur(), ")")) return true;
  return cur().type == Tok::kName &&
         std::find(extra.begin(), extra.end(), cur().value) != extra.end();
}

ExprPtr Parser::parse_tuple(bool simplified, bool with_condexpr,
                            const std::vector<std::string>& extra, bool explicit_parens) {
  int line = cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end(extra)) break;
    items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
    if (is_op(cur(), ",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) error(cur().line, "expected an expression, got " + describe(cur()));
  }
  auto e = make(ExprKind::kTuple, line);
  e->kids = std::move(items);
  return e;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  const Nest nest(*this, cur().line);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  int line = cur().line;
  Chain chain(*this);
  ExprPtr e = parse_or();
  while (skip_name("if")) {
    chain.link(line);
    auto c = make(ExprKind::kCond, line);
    ExprPtr test = parse_or();
    ExprPtr other;
    if (skip_name("else")) {
      const Nest nest(*this, cur().line);
      other = parse_condexpr();
    }
    c->kids.push_back(std::move(e));
    c->kids.push_back(std::move(test));
    c->kids.push_back(std::move(other));
    e = std::move(c);
    line = cur().line;
  }
  return e;
}

ExprPtr Parser::parse_or() {
  int line = cur().line;
  Chain chain(*this);
  ExprPtr e = parse_and();
  while (skip_name("or")) {
    chain.link(line);
    e = make2(ExprKind::kOr, line, std::move(e), parse_and());
  }
  return e;
}

ExprPtr Parser::parse_and() {
  int line = cur().line;
  Chain chain(*this);
  ExprPtr e = parse_not();
  while (skip_name("and")) {
    chain.link(line);
    e = make2(ExprKind::kAnd, line, std::move(e), parse_not());
  }
  return e;
}

ExprPtr Parser::parse_not() {
  if (is_name(cur(), "not")) {
    const Nest nest(*this, cur().line);
    auto e = make(ExprKind::kNot, next().line);
    e->kids.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  int line = cur().line;
  ExprPtr first = parse_math1();
  ExprPtr e;
  while (true) {
    CmpOp op;
    const Token& t = cur();
    if (is_op(t, "=="))
      op = CmpOp::kEq;
    else if (is_op(t, "!="))
      op = CmpOp::kNe;
    else if (is_op(t, "<"))
      op = CmpOp::kLt;
    else if (is_op(t, "<="))
      op = CmpOp::kLe;
    else if (is_op(t, ">"))
      op = CmpOp::kGt;
    else if (is_op(t, ">="))
      op = CmpOp::kGe;
    else if (is_name(t, "in"))
      op = CmpOp::kIn;
    else if (is_name(t, "not") && is_name(look(), "in"))
      op = CmpOp::kNotIn;
    else
      break;
    next();
    if (op == CmpOp::kNotIn) next();
    if (!e) {
      e = make(ExprKind::kCompare, line);
      e->kids.push_back(std::move(first));
    }
    e->cmp.push_back(op);
    e->kids.push_back(parse_math1());
  }
  return e ? std::move(e) : std::move(first);
}

ExprPtr Parser::parse_binary_level(int level) {
  // level 0: + -, 1: ~ (concat), 2: * / // %, 3: **
  if (level == 3) {
    int line = cur().line;
    Chain chain(*this);
    ExprPtr e = parse_unary(true);
    while (is_op(cur(), "**")) {
      chain.link(line);
      next();
      e = make2(ExprKind::kBinary, line, std::move(e), parse_unary(true));
      e->op = BinOp::kPow;
    }
    return e;
  }
  int line = cur().line;
  Chain chain(*this);
  ExprPtr e = parse_binary_level(level + 1);
  if (level == 1) {
    if (!is_op(cur(), "~")) return e;
    auto c = make(ExprKind::kConcat, line);
    c->kids.push_back(std::move(e));
    while (skip_op("~")) c->kids.push_back(parse_binary_level(2));
    return c;
  }
  while (true) {
    const Token& t = cur();
    BinOp op;
    if (level == 0 && is_op(t, "+"))
      op = BinOp::kAdd;
    else if (level == 0 && is_op(t, "-"))
      op = BinOp::kSub;
    else if (level == 2 && is_op(t, "*"))
      op = BinOp::kMul;
    else if (level == 2 && is_op(t, "/"))
      op = BinOp::kDiv;
    else if (level == 2 && is_op(t, "//"))
      op = BinOp::kFloorDiv;
    else if (level == 2 && is_op(t, "%"))
      op = BinOp::kMod;
    else
      break;
    chain.link(line);
    next();
    e = make2(ExprKind::kBinary, line, std::move(e), parse_binary_level(level + 1));
    e->op = op;
    line = cur().line;
  }
  return e;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  int line = cur().line;
  ExprPtr e;
  if (is_op(cur(), "-") || is_op(cur(), "+")) {
    const Nest nest(*this, line);
    bool neg = next().value == "-";
    e = make(neg ? ExprKind::kNeg : ExprKind::kPos, line);
    e->kids.push_back(parse_unary(false));
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  if (t.type == Tok::kName) {
    next();
    auto e = make(ExprKind::kConst, t.line);
    if (t.value == "true" || t.value == "True")
      e->value = Value::boolean(true);
    else if (t.value == "false" || t.value == "False")
      e->value = Value::boolean(false);
    else if (t.value == "none" || t.value == "None")
      e->value = Value::none();
    else {
      e->kind = ExprKind::kName;
      e->name = t.value;
    }
    return e;
  }
  if (t.type == Tok::kString) {
    auto e = make(ExprKind::kConst, t.line);
    std::string s;
    while (cur().type == Tok::kString) s += next().value;
    e->value = Value::string(std::move(s));
    return e;
  }
  if (t.type == Tok::kInt || t.type == Tok::kFloat) {
    next();
    auto e = make(ExprKind::kConst, t.line);
    e->value = t.type == Tok::kInt ? Value::integer(t.ival) : Value::number(t.fval);
    return e;
  }
  if (is_op(t, "(")) {
    next();
    ExprPtr e = parse_tuple(false, true, {}, true);
    expect_op(")");
    return e;
  }
  if (is_op(t, "[")) {
    auto e = make(ExprKind::kList, next().line);
    while (!is_op(cur(), "]")) {
      if (!e->kids.empty()) expect_op(",");
      if (is_op(cur(), "]")) break;
      e->kids.push_back(parse_expression(true));
    }
    expect_op("]");
    return e;
  }
  if (is_op(t, "{")) {
    auto e = make(ExprKind::kDict, next().line);
    while (!is_op(cur(), "}")) {
      if (!e->kids.empty()) expect_op(",");
      if (is_op(cur(), "}")) break;
      e->kids.push_back(parse_expression(true));
      expect_op(":");
      e->kids.push_back(parse_expression(true));
    }
    expect_op("}");
    return e;
  }
  error(t.line, "unexpected " + describe(t));
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  Chain chain(*this);
  while (true) {
    if (is_op(cur(), ".") || is_op(cur(), "[") || is_op(cur(), "(")) chain.link(cur().line);
    if (is_op(cur(), ".") || is_op(cur(), "[")) {
      e = parse_subscript(std::move(e));
    } else if (is_op(cur(), "(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  Chain chain(*this);
  while (true) {
    if (is_op(cur(), "|") || is_name(cur(), "is") || is_op(cur(), "(")) chain.link(cur().line);
    if (is_op(cur(), "|")) {
      e = parse_filter(std::move(e), false);
    } else if (is_name(cur(), "is")) {
      e = parse_test(std::move(e));
    } else if (is_op(cur(), "(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr obj) {
  const Token& t = next();
  if (t.value == ".") {
    const Token& a = next();
    if (a.type == Tok::kName) {
      auto e = make(ExprKind::kGetAttr, t.line);
      e->name = a.value;
      e->kids.push_back(std::move(obj));
      return e;
    }
    if (a.type != Tok::kInt) error(a.line, "expected name or number after '.'");
    auto key = make(ExprKind::kConst, a.line);
    key->value = Value::integer(a.ival);
    return make2(ExprKind::kGetItem, t.line, std::move(obj), std::move(key));
  }
  std::vector<ExprPtr> args;
  while (!is_op(cur(), "]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  ExprPtr key;
  if (args.size() == 1) {
    key = std::move(args[0]);
  } else {
    key = make(ExprKind::kTuple, t.line);
    key->kids = std::move(args);
  }
  return make2(ExprKind::kGetItem, t.line, std::move(obj), std::move(key));
}

ExprPtr Parser::parse_subscribed() {
  int line = cur().line;
  std::vector<ExprPtr> parts;
  if (is_op(cur(), ":")) {
    next();
    parts.push_back(nullptr);
  } else {
    ExprPtr e = parse_expression(true);
    if (!is_op(cur(), ":")) return e;
    next();
    parts.push_back(std::move(e));
  }
  auto stop_here = [&] { return is_op(cur(), "]") || is_op(cur(), ","); };
  if (is_op(cur(), ":") || stop_here()) {
    parts.push_back(nullptr);
  } else {
    parts.push_back(parse_expression(true));
  }
  if (is_op(cur(), ":")) {
    next();
    parts.push_back(stop_here() ? nullptr : parse_expression(true));
  } else {
    parts.push_back(nullptr);
  }
  auto e = make(ExprKind::kSlice, line);
  e->kids = std::move(parts);
  return e;
}

CallArgs Parser::parse_call_args() {
  int line = cur().line;
  expect_op("(");
  CallArgs a;
  bool require_comma = false;
  auto ensure = [&](bool ok) {
    if (!ok) error(line, "invalid syntax for function call expression");
  };
  while (!is_op(cur(), ")")) {
    if (require_comma) {
      expect_op(",");
      if (is_op(cur(), ")")) break;
    }
    if (is_op(cur(), "*")) {
      ensure(!a.star && !a.starstar);
      next();
      a.star = parse_expression(true);
    } else if (is_op(cur(), "**")) {
      ensure(!a.starstar);
      next();
      a.starstar = parse_expression(true);
    } else if (cur().type == Tok::kName && is_op(look(), "=")) {
      ensure(!a.starstar);
      std::string key = next().value;
      next();
      a.kw.emplace_back(std::move(key), parse_expression(true));
    } else {
      ensure(!a.star && !a.starstar && a.kw.empty());
      a.pos.push_back(parse_expression(true));
    }
    require_comma = true;
  }
  expect_op(")");
  return a;
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto e = make(ExprKind::kCall, cur().line);
  e->args = parse_call_args();
  e->kids.push_back(std::move(callee));
  return e;
}

std::string Parser::dotted_name() {
  std::string n = expect_name().value;
  while (is_op(cur(), ".")) {
    next();
    n += "." + expect_name().value;
  }
  return n;
}

ExprPtr Parser::parse_filter(ExprPtr operand, bool start_inline) {
  Chain chain(*this);
  while (is_op(cur(), "|") || start_inline) {
    chain.link(cur().line);
    if (!start_inline) next();
    start_inline = false;
    int line = cur().line;
    auto e = make(ExprKind::kFilter, line);
    e->name = dotted_name();
    bool known = false;
    e->filter = find_filter(e->name, &known);
    if (!e->filter)
      error(line, fmt::format("{} filter '{}'", known ? "unsupported" : "unknown", e->name));
    if (is_op(cur(), "(")) e->args = parse_call_args();
    e->kids.push_back(std::move(operand));
    operand = std::move(e);
  }
  return operand;
}

ExprPtr Parser::parse_test(ExprPtr operand) {
  int line = next().line;
  bool negated = skip_name("not");
  auto e = make(ExprKind::kTest, line);
  e->name = dotted_name();
  bool known = false;
  e->test = find_test(e->name, &known);
  if (!e->test)
    error(line, fmt::format("{} test '{}'", known ? "unsupported" : "unknown", e->name));
  const Token& t = cur();
  if (is_op(t, "(")) {
    e->args = parse_call_args();
  } else if ((t.type == Tok::kName || t.type == Tok::kString || t.type == Tok::kInt ||
              t.type == Tok::kFloat || is_op(t, "[") || is_op(t, "{")) &&
             !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
    if (is_name(t, "is")) error(t.line, "You cannot chain multiple tests with is");
    e->args.pos.push_back(parse_postfix(parse_primary()));
  }
  e->kids.push_back(std::move(operand));
  if (!negated) return e;
  auto n = make(ExprKind::kNot, line);
  n->kids.push_back(std::move(e));
  return n;
}

}  // namespace zt::text::jinja
