#include "text/jinja_interp.h"

#include <algorithm>

#include "core/error.h"
#include "text/jinja_parser.h"
#include "text/jinja_pystr.h"

namespace zt::text::jinja {

std::vector<const Value*> bind(const Args& a, std::initializer_list<const char*> names,
                               std::string_view what) {
  std::vector<const Value*> out(names.size(), nullptr);
  if (a.pos.size() > names.size())
    raise("{} takes at most {} argument(s), {} given", what, names.size(), a.pos.size());
  for (size_t i = 0; i < a.pos.size(); ++i) out[i] = &a.pos[i];
  for (const auto& [k, v] : a.kw) {
    size_t i = 0;
    for (const char* n : names) {
      if (k == n) break;
      ++i;
    }
    if (i == names.size()) raise("{} got an unexpected keyword argument '{}'", what, k);
    if (out[i]) raise("{} got multiple values for argument '{}'", what, k);
    out[i] = &v;
  }
  return out;
}

Value* Scope::find_local(std::string_view name) {
  for (auto& [k, v] : vars)
    if (k == name) return &v;
  return nullptr;
}

void Scope::set(const std::string& name, Value v) {
  if (Value* slot = find_local(name)) {
    *slot = std::move(v);
  } else {
    vars.emplace_back(name, std::move(v));
  }
}

// Makes `scope` current for its lifetime.
class Interp::ScopeGuard {
 public:
  ScopeGuard(Interp* in, std::shared_ptr<Scope> scope) : in_(in), saved_(std::move(in->cur_)) {
    in_->cur_ = std::move(scope);
  }
  ~ScopeGuard() { in_->cur_ = std::move(saved_); }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  Interp* in_;
  std::shared_ptr<Scope> saved_;
};

static std::shared_ptr<Scope> child_of(const std::shared_ptr<Scope>& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

Interp::Interp(const Template& tpl, const std::string& name, const Json& context)
    : tpl_(tpl), name_(name), context_(from_json(context)), cur_(std::make_shared<Scope>()) {
  if (!context_.is_mapping()) fail("{}: the template context must be a JSON object", name);
}

std::string Interp::run(std::vector<std::pair<size_t, size_t>>* spans) {
  std::string out;
  root_out_ = &out;
  spans_ = spans;
  const size_t first = spans ? spans->size() : 0;
  exec(tpl_.body, out);
  if (spans) chars_to_bytes(out, *spans, first);
  return out;
}

size_t Interp::root_chars() {
  if (root_counted_ > root_out_->size()) root_counted_ = root_chars_ = 0;  // never shrinks today
  root_chars_ += py::length(std::string_view(*root_out_).substr(root_counted_));
  root_counted_ = root_out_->size();
  return root_chars_;
}

void Interp::chars_to_bytes(const std::string& out, std::vector<std::pair<size_t, size_t>>& spans,
                            size_t first) {
  std::vector<size_t> at;  // the character positions to convert, sorted
  for (size_t i = first; i < spans.size(); ++i) {
    at.push_back(spans[i].first);
    at.push_back(spans[i].second);
  }
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  std::vector<size_t> byte(at.size(), out.size());  // past the last character: the output's end
  size_t chars = 0, k = 0;
  for (size_t b = 0; b < out.size() && k < at.size(); ++b) {
    if ((static_cast<unsigned char>(out[b]) & 0xC0) == 0x80) continue;  // inside a character
    while (k < at.size() && at[k] == chars) byte[k++] = b;
    ++chars;
  }
  const auto to_byte = [&](size_t c) {
    return byte[static_cast<size_t>(std::lower_bound(at.begin(), at.end(), c) - at.begin())];
  };
  for (size_t i = first; i < spans.size(); ++i)
    spans[i] = {to_byte(spans[i].first), to_byte(spans[i].second)};
}

Interp::Flow Interp::exec(const Body& body, std::string& out) {
  for (const auto& s : body) {
    Flow f = exec_stmt(*s, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Value Interp::render_body(const Body& body, std::shared_ptr<Scope> scope) {
  ScopeGuard g(this, std::move(scope));
  std::string buf;
  exec(body, buf);
  return Value::string(std::move(buf));
}

Interp::Flow Interp::exec_stmt(const Stmt& s, std::string& out) {
  try {
    switch (s.kind) {
      case StmtKind::kText:  // jinja drops empty text: it yields no block
        out += s.text;
        if (&out == root_out_ && !s.text.empty()) root_output_ = true;
        return Flow::kNormal;
      case StmtKind::kOutput:  // one block, even an empty one
        for (const auto& e : s.exprs) append_str(out, eval(*e));
        if (&out == root_out_) root_output_ = true;
        return Flow::kNormal;
      case StmtKind::kIf:
        for (size_t i = 0; i < s.exprs.size(); ++i)
          if (truthy(eval(*s.exprs[i]))) return exec(s.bodies[i], out);
        if (s.bodies.size() > s.exprs.size()) return exec(s.bodies.back(), out);
        return Flow::kNormal;
      case StmtKind::kFor:
        return exec_for(s, out);
      case StmtKind::kSet:
        assign(s.target, eval(*s.expr));
        return Flow::kNormal;
      case StmtKind::kSetBlock: {
        Value v = render_body(s.bodies[0], child_of(cur_));
        if (s.expr) v = apply_filter_chain(*s.expr, v);
        assign(s.target, v);
        return Flow::kNormal;
      }
      case StmtKind::kMacro: {
        auto fn = std::make_shared<Callable>();
        fn->kind = Callable::Kind::kMacro;
        fn->name = s.name;
        fn->node = &s;
        fn->closure = cur_;
        cur_->set(s.name, Value::callable(std::move(fn)));
        return Flow::kNormal;
      }
      case StmtKind::kCallBlock: {
        auto fn = std::make_shared<Callable>();
        fn->kind = Callable::Kind::kCaller;
        fn->name = "caller";
        fn->node = &s;
        fn->closure = cur_;
        const Expr& call_expr = *s.expr;
        Value callee = eval(*call_expr.kids[0]);
        Args args = eval_args(call_expr.args);
        args.kw.emplace_back("caller", Value::callable(std::move(fn)));
        append_str(out, call(callee, args));
        if (&out == root_out_) root_output_ = true;
        return Flow::kNormal;
      }
      case StmtKind::kFilterBlock:
        append_str(out, apply_filter_chain(*s.expr, render_body(s.bodies[0], child_of(cur_))));
        if (&out == root_out_) root_output_ = true;
        return Flow::kNormal;
      case StmtKind::kWith: {
        auto scope = child_of(cur_);
        for (size_t i = 0; i < s.params.size(); ++i) scope->set(s.params[i], eval(*s.exprs[i]));
        ScopeGuard g(this, std::move(scope));
        return exec(s.bodies[0], out);
      }
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
      case StmtKind::kGeneration: {
        // transformers' AssistantTracker renders the block through caller() and records
        // (len(output yielded so far), + len(block)) in characters; the output yielded so far is
        // the top-level output. Inside a macro or call block that output does not hold the block
        // yet: the span covers the block's character count from the top-level output's end, as
        // transformers' does. run() turns the characters into byte offsets of the final output.
        Value v = render_body(s.bodies[0], child_of(cur_));
        if (spans_) {
          if (!root_output_) ++spans_before_output_;
          const size_t begin = root_chars();
          spans_->emplace_back(begin, begin + py::length(v.str()));
        }
        out += v.str();
        if (&out == root_out_) root_output_ = true;
        return Flow::kNormal;
      }
    }
  } catch (const RenderError& e) {
    fail("{}:{}: {}", name_, s.line, e.what());
  }
  return Flow::kNormal;
}

Interp::Flow Interp::exec_for(const Stmt& s, std::string& out) {
  List items = iterate(eval(*s.expr));
  if (s.cond) {
    List kept;
    for (auto& item : items) {
      ScopeGuard g(this, child_of(cur_));
      assign(s.target, item);
      if (truthy(eval(*s.cond))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    ScopeGuard g(this, child_of(cur_));
    exec(s.bodies[1], out);
    return Flow::kNormal;
  }
  auto state = std::make_shared<LoopState>();
  state->items = std::make_shared<const List>(std::move(items));
  Value loop = Value::loop(state);
  for (size_t i = 0; i < state->items->size(); ++i) {
    state->index0 = static_cast<int64_t>(i);
    ScopeGuard g(this, child_of(cur_));
    assign(s.target, (*state->items)[i]);
    cur_->set("loop", loop);
    if (exec(s.bodies[0], out) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Interp::assign(const Target& t, const Value& v) {
  if (!t.attr.empty()) {
    Value ns = lookup(t.names[0]);
    if (ns.type() != Type::kNamespace)
      raise("cannot assign attribute on non-namespace object '{}'", t.names[0]);
    if (!t.attr.empty() && t.attr[0] == '_')
      raise(
          "Chat templates cannot store underscore-prefixed attributes on a namespace, but got "
          "{}. Please rename the attribute.",
          py::repr(t.attr));
    ns.dict().set(Value::string(t.attr), v);
    return;
  }
  if (!t.tuple) {
    cur_->set(t.names[0], v);
    return;
  }
  if (v.is_undefined()) raise("{}", v.str().empty() ? "value is undefined" : v.str());
  List items = iterate(v);
  if (items.size() > t.names.size())
    raise("too many values to unpack (expected {})", t.names.size());
  if (items.size() < t.names.size())
    raise("not enough values to unpack (expected {}, got {})", t.names.size(), items.size());
  for (size_t i = 0; i < items.size(); ++i) cur_->set(t.names[i], items[i]);
}

List Interp::iterate(const Value& v) const {
  switch (v.type()) {
    case Type::kUndefined:
      return {};
    case Type::kList:
    case Type::kTuple:
      return v.items();
    case Type::kDict: {
      List keys;
      for (const auto& [k, val] : v.dict().entries) keys.push_back(k);
      return keys;
    }
    case Type::kString: {
      List chars;
      for (char32_t c : py::decode(v.str())) {
        std::string s;
        py::append_utf8(s, c);
        chars.push_back(Value::string(std::move(s)));
      }
      return chars;
    }
    default:
      raise("'{}' object is not iterable", type_name(v));
  }
}

Value Interp::lookup(const std::string& name) {
  for (Scope* s = cur_.get(); s; s = s->parent.get())
    if (Value* v = s->find_local(name)) return *v;
  if (const Value* v = context_.dict().find(std::string_view(name))) return *v;
  if (is_global_function(name)) {
    auto fn = std::make_shared<Callable>();
    fn->kind = Callable::Kind::kBuiltin;
    fn->name = name;
    return Value::callable(std::move(fn));
  }
  if (name == "lipsum" || name == "cycler" || name == "joiner")
    raise("unsupported global function '{}'", name);
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

Value Interp::eval(const Expr& e) {
  try {
    return eval_inner(e);
  } catch (const RenderError& err) {
    fail("{}:{}: {}", name_, e.line, err.what());
  }
}

Args Interp::eval_args(const CallArgs& a) {
  Args out;
  for (const auto& e : a.pos) out.pos.push_back(eval(*e));
  if (a.star) {
    for (auto& v : iterate(eval(*a.star))) out.pos.push_back(std::move(v));
  }
  for (const auto& [k, e] : a.kw) out.kw.emplace_back(k, eval(*e));
  if (a.starstar) {
    Value d = eval(*a.starstar);
    if (!d.is_mapping()) raise("argument after ** must be a mapping, not {}", type_name(d));
    for (const auto& [k, v] : d.dict().entries) out.kw.emplace_back(to_str(k), v);
  }
  return out;
}

Value Interp::eval_inner(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kConst:
      return e.value;
    case ExprKind::kName:
      return lookup(e.name);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      List items;
      items.reserve(e.kids.size());
      for (const auto& k : e.kids) items.push_back(eval(*k));
      return e.kind == ExprKind::kList ? Value::list(std::move(items))
                                       : Value::tuple(std::move(items));
    }
    case ExprKind::kDict: {
      auto d = std::make_shared<Dict>();
      for (size_t i = 0; i + 1 < e.kids.size(); i += 2)
        d->set(eval(*e.kids[i]), eval(*e.kids[i + 1]));
      return Value::dict(std::move(d));
    }
    case ExprKind::kGetAttr:
      return getattr(eval(*e.kids[0]), e.name);
    case ExprKind::kGetItem: {
      Value obj = eval(*e.kids[0]);
      if (e.kids[1]->kind == ExprKind::kSlice) return slice(obj, *e.kids[1]);
      return getitem(obj, eval(*e.kids[1]));
    }
    case ExprKind::kSlice:
      raise("a slice is only valid inside []");
    case ExprKind::kCall: {
      Value callee = eval(*e.kids[0]);
      Args args = eval_args(e.args);
      return call(callee, args);
    }
    case ExprKind::kFilter: {
      if (!e.kids[0]) raise("filter '{}' has no operand", e.name);
      Value v = eval(*e.kids[0]);
      Args args = eval_args(e.args);
      return e.filter(*this, v, args);
    }
    case ExprKind::kTest: {
      Value v = eval(*e.kids[0]);
      Args args = eval_args(e.args);
      return Value::boolean(e.test(*this, v, args));
    }
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      Value v = eval(*e.kids[0]);
      if (v.is_undefined()) raise_undefined(v);
      bool neg = e.kind == ExprKind::kNeg;
      if (v.type() == Type::kFloat) return Value::number(neg ? -v.as_double() : v.as_double());
      if (v.is_int()) {
        if (neg && v.as_int() == INT64_MIN) raise("integer overflow");
        return Value::integer(neg ? -v.as_int() : v.as_int());
      }
      raise("bad operand type for unary {}: '{}'", neg ? '-' : '+', type_name(v));
    }
    case ExprKind::kNot:
      return Value::boolean(!truthy(eval(*e.kids[0])));
    case ExprKind::kBinary: {
      Value a = eval(*e.kids[0]);
      Value b = eval(*e.kids[1]);
      return binary_op(e.op, a, b);
    }
    case ExprKind::kConcat: {
      std::string s;
      for (const auto& k : e.kids) append_str(s, eval(*k));
      return Value::string(std::move(s));
    }
    case ExprKind::kCompare:
      return eval_compare(e);
    case ExprKind::kAnd: {
      Value a = eval(*e.kids[0]);
      return truthy(a) ? eval(*e.kids[1]) : a;
    }
    case ExprKind::kOr: {
      Value a = eval(*e.kids[0]);
      return truthy(a) ? a : eval(*e.kids[1]);
    }
    case ExprKind::kCond:
      if (truthy(eval(*e.kids[1]))) return eval(*e.kids[0]);
      if (e.kids[2]) return eval(*e.kids[2]);
      return Value::undefined(
          fmt::format("the inline if-expression on line {} evaluated to false "
                      "and no else section was defined.",
                      e.line));
  }
  raise("internal error: unknown expression");
}

Value Interp::eval_compare(const Expr& e) {
  Value left = eval(*e.kids[0]);
  for (size_t i = 0; i < e.cmp.size(); ++i) {
    Value right = eval(*e.kids[i + 1]);
    bool ok = compare(e.cmp[i], left, right);
    if (!ok) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interp::apply_filter_chain(const Expr& f, const Value& input) {
  Value base = f.kids[0] ? apply_filter_chain(*f.kids[0], input) : input;
  try {
    Args args = eval_args(f.args);
    return f.filter(*this, base, args);
  } catch (const RenderError& err) {
    fail("{}:{}: {}", name_, f.line, err.what());
  }
}

Value Interp::call(const Value& callee, Args& args) {
  if (callee.is_undefined()) raise_undefined(callee);
  if (callee.type() != Type::kCallable) raise("'{}' object is not callable", type_name(callee));
  const Callable& fn = callee.fn();
  switch (fn.kind) {
    case Callable::Kind::kBuiltin:
      return call_global(*this, fn.name, args);
    case Callable::Kind::kMethod:
      return call_method(*this, fn.self, fn.name, args);
    case Callable::Kind::kMacro:
    case Callable::Kind::kCaller:
      return call_macro(fn, args);
  }
  raise("internal error: unknown callable");
}

Value Interp::call_macro(const Callable& fn, Args& args) {
  struct DepthGuard {
    int& d;
    ~DepthGuard() { --d; }
  } depth{++call_depth_};
  if (call_depth_ > 500) raise("maximum recursion depth exceeded calling macro '{}'", fn.name);
  const Stmt& m = *fn.node;
  auto scope = child_of(fn.closure);
  size_t np = m.params.size();
  std::vector<bool> bound(np, false);
  List varargs;
  for (size_t i = 0; i < args.pos.size(); ++i) {
    if (i < np) {
      scope->set(m.params[i], args.pos[i]);
      bound[i] = true;
    } else {
      varargs.push_back(args.pos[i]);
    }
  }
  if (!varargs.empty() && !m.uses_varargs)
    raise("macro '{}' takes not more than {} argument(s)", fn.name, np);
  auto kwargs = std::make_shared<Dict>();
  Value caller;
  bool has_caller = false;
  for (auto& [k, v] : args.kw) {
    if (k == "caller" && fn.kind == Callable::Kind::kMacro) {
      caller = v;
      has_caller = true;
      continue;
    }
    auto it = std::find(m.params.begin(), m.params.end(), k);
    if (it == m.params.end()) {
      if (!m.uses_kwargs) raise("macro '{}' takes no keyword argument '{}'", fn.name, k);
      kwargs->set(Value::string(k), v);
      continue;
    }
    size_t i = static_cast<size_t>(it - m.params.begin());
    if (bound[i]) raise("macro '{}' got multiple values for argument '{}'", fn.name, k);
    scope->set(k, v);
    bound[i] = true;
  }
  ScopeGuard g(this, scope);
  for (size_t i = 0; i < np; ++i) {
    if (bound[i]) continue;
    scope->set(m.params[i], m.exprs[i] ? eval(*m.exprs[i])
                                       : Value::undefined(fmt::format(
                                             "parameter '{}' was not provided", m.params[i])));
  }
  if (m.uses_varargs) scope->set("varargs", Value::tuple(std::move(varargs)));
  if (m.uses_kwargs) scope->set("kwargs", Value::dict(std::move(kwargs)));
  if (fn.kind == Callable::Kind::kMacro && m.uses_caller)
    scope->set("caller", has_caller ? caller : Value::undefined("No caller defined"));
  std::string buf;
  exec(m.bodies[0], buf);
  return Value::string(std::move(buf));
}

Value Interp::call_filter(std::string_view name, const Value& v, Args& args) {
  bool known = false;
  FilterFn f = find_filter(name, &known);
  if (!f) raise("{} filter '{}'", known ? "unsupported" : "unknown", name);
  return f(*this, v, args);
}

bool Interp::call_test(std::string_view name, const Value& v, Args& args) {
  bool known = false;
  TestFn t = find_test(name, &known);
  if (!t) raise("{} test '{}'", known ? "unsupported" : "unknown", name);
  return t(*this, v, args);
}

}  // namespace zt::text::jinja
