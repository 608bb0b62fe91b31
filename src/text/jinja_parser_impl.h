// The recursive-descent parser behind jinja::parse (jinja_parser.cpp: statements,
// jinja_parse_expr.cpp: expressions), mirroring jinja2 3.x `Parser`. Internal to src/text.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "text/jinja_parser.h"

namespace zt::text::jinja {

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& name) : t_(tokens), name_(name) {}

  Template run() {
    Template tpl;
    tpl.body = subparse({});
    tpl.has_generation = has_generation_;
    return tpl;
  }

 private:
  // ---- token stream ----
  const Token& cur() const { return t_[i_]; }
  const Token& look() const { return t_[std::min(i_ + 1, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return t;
  }
  static bool is_name(const Token& t, std::string_view v) {
    return t.type == Tok::kName && t.value == v;
  }
  static bool is_op(const Token& t, std::string_view v) {
    return t.type == Tok::kOp && t.value == v;
  }
  bool skip_name(std::string_view v) { return is_name(cur(), v) ? (next(), true) : false; }
  bool skip_op(std::string_view v) { return is_op(cur(), v) ? (next(), true) : false; }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::kData:
        return "template data";
      case Tok::kVarBegin:
        return "begin of print statement";
      case Tok::kVarEnd:
        return "end of print statement";
      case Tok::kBlockBegin:
        return "begin of statement block";
      case Tok::kBlockEnd:
        return "end of statement block";
      case Tok::kEof:
        return "end of template";
      case Tok::kString:
        return "string";
      default:
        return "'" + t.value + "'";
    }
  }
  [[noreturn]] void error(int line, const std::string& msg) const {
    fail("{}:{}: {}", name_, line, msg);
  }
  const Token& expect(Tok type, const char* what) {
    if (cur().type != type)
      error(cur().line, fmt::format("expected {}, got {}", what, describe(cur())));
    return next();
  }
  void expect_op(std::string_view op) {
    if (!is_op(cur(), op))
      error(cur().line, fmt::format("expected '{}', got {}", op, describe(cur())));
    next();
  }
  const Token& expect_name() { return expect(Tok::kName, "a name"); }

  // ---- statements ----
  Body subparse(const std::vector<std::string>& end_tokens);
  Body parse_statements(const std::vector<std::string>& end_tokens, bool drop_needle);
  StmtPtr make_stmt(StmtKind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  StmtPtr parse_statement();
  StmtPtr parse_for();
  StmtPtr parse_if();
  StmtPtr parse_set();
  void parse_signature(Stmt& s);
  Body parse_function_body(const std::vector<std::string>& end);
  StmtPtr parse_macro();
  StmtPtr parse_call_block();
  StmtPtr parse_filter_block();
  StmtPtr parse_with();
  StmtPtr parse_print();
  StmtPtr parse_generation();
  StmtPtr parse_loop_control();

  // Records whether a macro body reads `varargs`, `kwargs` or `caller`.
  static void scan_expr(const Expr* e, Stmt& m);
  static void scan_names(const Stmt& s, Stmt& m);

  // ---- assignment targets ----
  Target parse_assign_target(const std::vector<std::string>& extra_end, bool with_namespace);

  // ---- expressions ----
  ExprPtr make(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  ExprPtr make2(ExprKind kind, int line, ExprPtr a, ExprPtr b) {
    auto e = make(kind, line);
    e->kids.push_back(std::move(a));
    e->kids.push_back(std::move(b));
    return e;
  }

  bool is_tuple_end(const std::vector<std::string>& extra) const;
  ExprPtr parse_tuple(bool simplified, bool with_condexpr, const std::vector<std::string>& extra,
                      bool explicit_parens);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_binary_level(int level);
  ExprPtr parse_math1() { return parse_binary_level(0); }

  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_filter_expr(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr obj);
  ExprPtr parse_subscribed();
  CallArgs parse_call_args();
  ExprPtr parse_call(ExprPtr callee);
  std::string dotted_name();
  ExprPtr parse_filter(ExprPtr operand, bool start_inline);
  ExprPtr parse_test(ExprPtr operand);
  const std::vector<Token>& t_;
  size_t i_ = 0;
  const std::string& name_;
  std::vector<std::pair<std::string, int>> tag_stack_;
  std::vector<std::vector<std::string>> end_stack_;
  int loop_depth_ = 0;
  // Nesting depth of the recursive descent (expressions, `not` / sign chains, statement blocks):
  // a template nested deeper than kMaxNesting is refused with its line instead of overflowing the
  // stack (a 20,000-deep parenthesis crashed the process). Python's jinja2 stops far earlier
  // (its recursion limit: ~80 parentheses, ~250 nested blocks), so no template it accepts is lost.
  static constexpr int kMaxNesting = 400;
  int nesting_ = 0;
  struct Nest {
    Parser& p;
    Nest(Parser& parser, int line) : p(parser) {
      if (++p.nesting_ > kMaxNesting) {
        --p.nesting_;
        p.error(line, fmt::format("nested deeper than {} levels", kMaxNesting));
      }
    }
    ~Nest() { --p.nesting_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
  };
  // A left-deep chain (a + b + …, a or b or …, x|f|g, a.b.c, x if c else …) nests its tree as
  // deeply as it is long, and evaluating or freeing the tree recurses that deep: each link counts
  // toward kMaxNesting while the function that builds the chain runs.
  struct Chain {
    Parser& p;
    int links = 0;
    explicit Chain(Parser& parser) : p(parser) {}
    void link(int line) {
      if (p.nesting_ + 1 > kMaxNesting)
        p.error(line, fmt::format("nested deeper than {} levels", kMaxNesting));
      ++p.nesting_;
      ++links;
    }
    ~Chain() { p.nesting_ -= links; }
    Chain(const Chain&) = delete;
    Chain& operator=(const Chain&) = delete;
  };
  bool has_generation_ = false;
};

}  // namespace zt::text::jinja
