#include "text/jinja_parser.h"

#include "text/jinja_parser_impl.h"

namespace zt::text::jinja {
namespace {

constexpr std::string_view kUnsupportedTags[] = {"block", "extends",    "include",  "import",
                                                 "from",  "autoescape", "recursive"};

}  // namespace

Body Parser::subparse(const std::vector<std::string>& end_tokens) {
  const Nest nest(*this, cur().line);
  Body body;
  if (!end_tokens.empty()) end_stack_.push_back(end_tokens);
  while (cur().type != Tok::kEof) {
    const Token& tok = cur();
    if (tok.type == Tok::kData) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kText;
      s->line = tok.line;
      s->text = tok.value;
      body.push_back(std::move(s));
      next();
    } else if (tok.type == Tok::kVarBegin) {
      next();
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kOutput;
      s->line = tok.line;
      s->exprs.push_back(parse_tuple(false, true, {}, false));
      expect(Tok::kVarEnd, "end of print statement");
      body.push_back(std::move(s));
    } else if (tok.type == Tok::kBlockBegin) {
      next();
      if (!end_tokens.empty() && cur().type == Tok::kName &&
          std::find(end_tokens.begin(), end_tokens.end(), cur().value) != end_tokens.end()) {
        end_stack_.pop_back();
        return body;
      }
      body.push_back(parse_statement());
      expect(Tok::kBlockEnd, "end of statement block");
    } else {
      error(tok.line, "unexpected " + describe(tok));
    }
  }
  if (!end_tokens.empty()) end_stack_.pop_back();
  return body;
}

Body Parser::parse_statements(const std::vector<std::string>& end_tokens, bool drop_needle) {
  skip_op(":");
  expect(Tok::kBlockEnd, "end of statement block");
  Body body = subparse(end_tokens);
  if (cur().type == Tok::kEof) {
    std::string want;
    for (const auto& e : end_tokens) want += (want.empty() ? "'" : " or '") + e + "'";
    const auto& [tag, line] = tag_stack_.back();
    error(line, fmt::format("unexpected end of template: the '{}' block opened on this line is "
                            "not closed (expected {})",
                            tag, want));
  }
  if (drop_needle) next();
  return body;
}

StmtPtr Parser::parse_statement() {
  const Token& tok = cur();
  if (tok.type != Tok::kName) error(tok.line, "tag name expected, got " + describe(tok));
  const std::string& n = tok.value;
  for (auto u : kUnsupportedTags)
    if (n == u) error(tok.line, fmt::format("unsupported tag '{}'", n));
  tag_stack_.emplace_back(n, tok.line);
  StmtPtr s;
  if (n == "for")
    s = parse_for();
  else if (n == "if")
    s = parse_if();
  else if (n == "set")
    s = parse_set();
  else if (n == "macro")
    s = parse_macro();
  else if (n == "call")
    s = parse_call_block();
  else if (n == "filter")
    s = parse_filter_block();
  else if (n == "with")
    s = parse_with();
  else if (n == "print")
    s = parse_print();
  else if (n == "generation")
    s = parse_generation();
  else if (n == "break" || n == "continue")
    s = parse_loop_control();
  else {
    tag_stack_.pop_back();
    std::string msg = fmt::format("unknown tag '{}'", n);
    if (!end_stack_.empty()) {
      std::string want;
      for (const auto& e : end_stack_.back()) want += (want.empty() ? "'" : " or '") + e + "'";
      msg +=
          fmt::format(" (the innermost open block '{}' expects {})", tag_stack_.back().first, want);
    }
    error(tok.line, msg);
  }
  tag_stack_.pop_back();
  return s;
}

StmtPtr Parser::parse_for() {
  auto s = make_stmt(StmtKind::kFor, next().line);
  s->target = parse_assign_target({"in"}, false);
  if (!skip_name("in")) error(cur().line, "expected 'in' in for loop, got " + describe(cur()));
  s->expr = parse_tuple(false, false, {"recursive"}, false);
  if (skip_name("if")) s->cond = parse_expression(true);
  if (is_name(cur(), "recursive")) error(cur().line, "unsupported recursive for loop");
  ++loop_depth_;
  s->bodies.push_back(parse_statements({"endfor", "else"}, false));
  --loop_depth_;
  if (next().value == "endfor") {
    s->bodies.emplace_back();
  } else {
    s->bodies.push_back(parse_statements({"endfor"}, true));
  }
  return s;
}

StmtPtr Parser::parse_if() {
  auto s = make_stmt(StmtKind::kIf, next().line);
  while (true) {
    s->exprs.push_back(parse_tuple(false, false, {}, false));
    s->bodies.push_back(parse_statements({"elif", "else", "endif"}, false));
    const Token& t = next();
    if (t.value == "elif") continue;
    if (t.value == "else") s->bodies.push_back(parse_statements({"endif"}, true));
    break;
  }
  return s;
}

StmtPtr Parser::parse_set() {
  auto s = make_stmt(StmtKind::kSet, next().line);
  s->target = parse_assign_target({}, true);
  if (skip_op("=")) {
    s->expr = parse_tuple(false, true, {}, false);
    return s;
  }
  s->kind = StmtKind::kSetBlock;
  if (!s->target.attr.empty()) error(s->line, "a block set cannot assign a namespace attribute");
  if (is_op(cur(), "|")) s->expr = parse_filter(nullptr, false);
  s->bodies.push_back(parse_statements({"endset"}, true));
  return s;
}

void Parser::parse_signature(Stmt& s) {
  expect_op("(");
  while (!is_op(cur(), ")")) {
    if (!s.params.empty()) expect_op(",");
    s.params.push_back(expect_name().value);
    if (skip_op("=")) {
      s.exprs.push_back(parse_expression(true));
    } else {
      bool has_default =
          std::any_of(s.exprs.begin(), s.exprs.end(), [](const auto& e) { return e != nullptr; });
      if (has_default) error(cur().line, "non-default argument follows default argument");
      s.exprs.push_back(nullptr);
    }
  }
  expect_op(")");
}

Body Parser::parse_function_body(const std::vector<std::string>& end) {
  int saved = loop_depth_;
  loop_depth_ = 0;
  Body b = parse_statements(end, true);
  loop_depth_ = saved;
  return b;
}

StmtPtr Parser::parse_macro() {
  auto s = make_stmt(StmtKind::kMacro, next().line);
  s->name = expect_name().value;
  parse_signature(*s);
  s->bodies.push_back(parse_function_body({"endmacro"}));
  for (const auto& st : s->bodies[0]) scan_names(*st, *s);
  return s;
}

StmtPtr Parser::parse_call_block() {
  auto s = make_stmt(StmtKind::kCallBlock, next().line);
  if (is_op(cur(), "(")) parse_signature(*s);
  s->expr = parse_expression(true);
  if (s->expr->kind != ExprKind::kCall) error(s->line, "expected a call after 'call'");
  s->bodies.push_back(parse_function_body({"endcall"}));
  return s;
}

StmtPtr Parser::parse_filter_block() {
  auto s = make_stmt(StmtKind::kFilterBlock, next().line);
  s->expr = parse_filter(nullptr, true);
  s->bodies.push_back(parse_statements({"endfilter"}, true));
  return s;
}

StmtPtr Parser::parse_with() {
  auto s = make_stmt(StmtKind::kWith, next().line);
  while (cur().type != Tok::kBlockEnd) {
    if (!s->params.empty()) expect_op(",");
    s->params.push_back(expect_name().value);
    expect_op("=");
    s->exprs.push_back(parse_expression(true));
  }
  s->bodies.push_back(parse_statements({"endwith"}, true));
  return s;
}

StmtPtr Parser::parse_print() {
  auto s = make_stmt(StmtKind::kOutput, next().line);
  while (cur().type != Tok::kBlockEnd) {
    if (!s->exprs.empty()) expect_op(",");
    s->exprs.push_back(parse_expression(true));
  }
  return s;
}

StmtPtr Parser::parse_generation() {
  auto s = make_stmt(StmtKind::kGeneration, next().line);
  s->bodies.push_back(parse_function_body({"endgeneration"}));
  has_generation_ = true;
  return s;
}

StmtPtr Parser::parse_loop_control() {
  const Token& t = next();
  if (loop_depth_ == 0) error(t.line, fmt::format("'{}' outside of a for loop", t.value));
  return make_stmt(t.value == "break" ? StmtKind::kBreak : StmtKind::kContinue, t.line);
}

void Parser::scan_expr(const Expr* e, Stmt& m) {
  if (!e) return;
  if (e->kind == ExprKind::kName) {
    m.uses_varargs |= e->name == "varargs";
    m.uses_kwargs |= e->name == "kwargs";
    m.uses_caller |= e->name == "caller";
  }
  for (const auto& k : e->kids) scan_expr(k.get(), m);
  for (const auto& k : e->args.pos) scan_expr(k.get(), m);
  for (const auto& [n, k] : e->args.kw) scan_expr(k.get(), m);
  scan_expr(e->args.star.get(), m);
  scan_expr(e->args.starstar.get(), m);
}

void Parser::scan_names(const Stmt& s, Stmt& m) {
  for (const auto& e : s.exprs) scan_expr(e.get(), m);
  scan_expr(s.expr.get(), m);
  scan_expr(s.cond.get(), m);
  for (const auto& b : s.bodies)
    for (const auto& st : b) scan_names(*st, m);
}

Target Parser::parse_assign_target(const std::vector<std::string>& extra_end, bool with_namespace) {
  Target t;
  bool parens = skip_op("(");
  while (true) {
    if (!t.names.empty()) expect_op(",");
    if (is_tuple_end(extra_end) || (parens && is_op(cur(), ")"))) break;
    const Token& n = expect_name();
    static constexpr std::string_view kConst[] = {"true", "false", "none", "True", "False", "None"};
    for (auto c : kConst)
      if (n.value == c) error(n.line, "can't assign to a constant");
    t.names.push_back(n.value);
    if (with_namespace && is_op(cur(), ".")) {
      next();
      t.attr = expect_name().value;
    }
    if (is_op(cur(), ",")) {
      t.tuple = true;
    } else {
      break;
    }
  }
  if (parens) {
    expect_op(")");
    t.tuple = true;
  }
  if (t.names.empty()) error(cur().line, "expected an assignment target, got " + describe(cur()));
  if (!t.attr.empty() && t.tuple)
    error(cur().line, "can't assign a namespace attribute in a tuple");
  return t;
}

Template parse(const std::vector<Token>& tokens, const std::string& name) {
  return Parser(tokens, name).run();
}

}  // namespace zt::text::jinja
