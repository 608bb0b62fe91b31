// Tree-walking interpreter for a parsed Jinja template with jinja2's runtime semantics inside
// transformers' ImmutableSandboxedEnvironment: per-iteration loop scopes, macros closing over
// their defining scope, sandboxed attribute/item lookup (dict attributes fall back to items,
// mutating methods are unsafe), Undefined that renders empty, and HF's globals.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/jinja_ast.h"
#include "text/jinja_value.h"

namespace zt::text::jinja {

// Evaluated call arguments.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

// Binds `a` to the parameters `names` as a Python signature would; result[i] points at the value
// given for names[i] or is null. Raises RenderError naming `what` for too many positional
// arguments, an unknown keyword or a parameter given twice.
std::vector<const Value*> bind(const Args& a, std::initializer_list<const char*> names,
                               std::string_view what);

// A variable scope: the template's top level, one loop iteration, a macro call, a with block.
struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;
  Value* find_local(std::string_view name);
  void set(const std::string& name, Value v);
};

class Interp {
 public:
  // `context` holds the template variables (a JSON object); `name` prefixes every error.
  Interp(const Template& tpl, const std::string& name, const Json& context);

  // Renders the template; `spans` receives the [begin, end) byte ranges of `{% generation %}`
  // blocks, measured like transformers' AssistantTracker (offset into the top-level output, in
  // characters, turned into bytes of the output; a position past its end is its size).
  std::string run(std::vector<std::pair<size_t, size_t>>* spans);
  // After run(): how many `{% generation %}` blocks (the first ones) were rendered before the
  // template output anything at its top level (no text, no `{{ … }}`, not even an empty one; a
  // macro's or call block's output is not top-level until it is output). transformers 4.57's
  // AssistantTracker records no span for them (`is_active` tests its lists of rendered blocks and
  // of spans, both empty until then); transformers 5.24 records them.
  size_t spans_before_output() const { return spans_before_output_; }

  const std::string& name() const { return name_; }

  // Sandboxed `obj.attr` and `obj[key]` (jinja2 SandboxedEnvironment.getattr / getitem).
  Value getattr(const Value& obj, const std::string& attr);
  Value getitem(const Value& obj, const Value& key);
  // Calls a macro, caller, builtin or bound method; calling Undefined raises its message.
  Value call(const Value& callee, Args& args);
  // Filter / test by name, for `map('upper')`, `select('odd')`, `selectattr('x', 'eq', 1)`.
  Value call_filter(std::string_view name, const Value& v, Args& args);
  bool call_test(std::string_view name, const Value& v, Args& args);
  // The items a `for` loop or `list()` iterates (dict -> keys, str -> characters,
  // Undefined -> none); raises "'<type>' object is not iterable" otherwise.
  List iterate(const Value& v) const;

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  class ScopeGuard;

  Flow exec(const Body& body, std::string& out);
  Flow exec_stmt(const Stmt& s, std::string& out);
  Flow exec_for(const Stmt& s, std::string& out);
  Value render_body(const Body& body, std::shared_ptr<Scope> scope);
  void assign(const Target& t, const Value& v);
  Value eval(const Expr& e);
  Value eval_inner(const Expr& e);
  Args eval_args(const CallArgs& a);
  Value eval_compare(const Expr& e);
  Value apply_filter_chain(const Expr& f, const Value& input);
  Value lookup(const std::string& name);
  Value call_macro(const Callable& fn, Args& args);
  Value slice(const Value& obj, const Expr& s);
  // The top-level output's length in characters (Python's len), counted incrementally.
  size_t root_chars();
  // Turns spans[first..] from character positions in `out` into byte offsets.
  static void chars_to_bytes(const std::string& out, std::vector<std::pair<size_t, size_t>>& spans,
                             size_t first);

  const Template& tpl_;
  const std::string& name_;
  Value context_;
  std::shared_ptr<Scope> cur_;
  std::string* root_out_ = nullptr;
  std::vector<std::pair<size_t, size_t>>* spans_ = nullptr;
  bool root_output_ = false;  // a top-level text or output statement ran (jinja yielded a block)
  size_t spans_before_output_ = 0;
  size_t root_chars_ = 0;  // characters (code points) in root_out_'s first root_counted_ bytes
  size_t root_counted_ = 0;
  int call_depth_ = 0;  // nested macro / caller calls (bounded like Python's recursion limit)
};

// Raises the UndefinedError of an Undefined value (its message, e.g. "'x' is undefined").
[[noreturn]] void raise_undefined(const Value& v);

// Python operators with Python's semantics (int vs float, str concatenation/repetition, floor
// division and modulo signs). Raise RenderError with Python's TypeError text otherwise.
Value binary_op(BinOp op, const Value& a, const Value& b);
// `item in container`.
bool contains(const Value& container, const Value& item);
// `a op b` for one comparison operator (==, !=, <, <=, >, >=, in, not in); ordering raises
// Python's TypeError text for unorderable types and UndefinedError for Undefined operands.
bool compare(CmpOp op, const Value& a, const Value& b);

// Builtins (jinja_methods.cpp): HF's globals (range, dict, namespace, raise_exception,
// strftime_now) and the str / dict / list / loop methods templates call.
bool is_global_function(std::string_view name);
Value call_global(Interp& in, const std::string& name, Args& args);
// The bound method `obj.name`, an "unsafe" Undefined for a mutating method (sandbox), or
// nullopt-like Undefined with `*found = false` when `obj` has no such method.
Value get_method(const Value& obj, const std::string& name, bool* found);
Value call_method(Interp& in, const Value& self, const std::string& name, Args& args);
// Python `%` string formatting (`'%s' % x`, the `format` filter).
std::string percent_format(const std::string& fmt, const Value& args);

}  // namespace zt::text::jinja
