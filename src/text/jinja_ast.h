// Syntax tree of a parsed Jinja template (the subset of jinja2's nodes chat templates use).
// Filters and tests are resolved to functions at parse time, so an unknown one is a parse error.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja_value.h"

namespace zt::text::jinja {

class Interp;
struct Args;
// A filter `value|name(args…)` and a test `value is name(args…)`.
using FilterFn = Value (*)(Interp&, const Value&, Args&);
using TestFn = bool (*)(Interp&, const Value&, Args&);

enum class ExprKind : uint8_t {
  kConst,    // value
  kName,     // name
  kList,     // kids: items
  kTuple,    // kids: items
  kDict,     // kids: key0, value0, key1, value1, …
  kGetAttr,  // kids[0].name
  kGetItem,  // kids[0][kids[1]]
  kSlice,    // kids: start, stop, step (each may be null); only as kGetItem's key
  kCall,     // kids[0](args)
  kFilter,   // kids[0]|name(args); kids[0] is null inside `{% filter %}` / `{% set x | f %}`
  kTest,     // kids[0] is name(args)
  kNeg,      // -kids[0]
  kPos,      // +kids[0]
  kNot,      // not kids[0]
  kBinary,   // kids[0] op kids[1]
  kConcat,   // kids[0] ~ kids[1] ~ …
  kCompare,  // kids[0] cmp[0] kids[1] cmp[1] kids[2] … (Python chained comparison)
  kAnd,      // kids[0] and kids[1]
  kOr,       // kids[0] or kids[1]
  kCond,     // kids[0] if kids[1] else kids[2] (kids[2] may be null)
};
enum class BinOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CmpOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct CallArgs {
  std::vector<ExprPtr> pos;
  std::vector<std::pair<std::string, ExprPtr>> kw;
  ExprPtr star;      // *args
  ExprPtr starstar;  // **kwargs
};

struct Expr {
  ExprKind kind = ExprKind::kConst;
  int line = 0;
  Value value;
  std::string name;
  std::vector<ExprPtr> kids;
  CallArgs args;
  BinOp op = BinOp::kAdd;
  std::vector<CmpOp> cmp;
  FilterFn filter = nullptr;
  TestFn test = nullptr;
};

enum class StmtKind : uint8_t {
  kText,         // text
  kOutput,       // {{ exprs[0] }} / {% print exprs… %}
  kIf,           // exprs: conditions; bodies: one per condition, plus the else body
  kFor,          // target in expr [if cond]; bodies[0] body, bodies[1] else
  kSet,          // target = expr
  kSetBlock,     // {% set target [| filter] %}bodies[0]{% endset %}; expr: the filter chain or null
  kMacro,        // name(params = exprs[i] default or null) bodies[0]
  kCallBlock,    // {% call(params) expr %}bodies[0]{% endcall %}
  kFilterBlock,  // {% filter expr %}bodies[0]{% endfilter %}
  kWith,         // {% with params[i] = exprs[i] %}bodies[0]{% endwith %}
  kBreak,
  kContinue,
  kGeneration,  // {% generation %}bodies[0]{% endgeneration %} (transformers' AssistantTracker)
};

// Assignment target: a name, a tuple of names, or a namespace attribute `names[0].attr`.
struct Target {
  std::vector<std::string> names;
  bool tuple = false;
  std::string attr;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 0;
  std::string text;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
  Target target;
  ExprPtr expr;
  ExprPtr cond;
  std::string name;
  std::vector<std::string> params;
  bool uses_varargs = false;  // a macro body reads `varargs` / `kwargs` / `caller`
  bool uses_kwargs = false;
  bool uses_caller = false;
};

struct Template {
  Body body;
  bool has_generation = false;
};

}  // namespace zt::text::jinja
