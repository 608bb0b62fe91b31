// The value model of the Jinja engine: the Python objects a chat template sees (None, bool, int,
// float, str, list, tuple, dict, jinja2 Undefined, Namespace, loop context, callables) with
// Python's semantics for truthiness, str(), repr(), ==, <, and HF's `tojson` (json.dumps).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "io/json.h"
#include "io/json_check.h"

namespace zt::text::jinja {

class Value;
struct Dict;
struct Callable;
struct LoopState;
using List = std::vector<Value>;
using ListPtr = std::shared_ptr<const List>;
using DictPtr = std::shared_ptr<Dict>;

// A failure while rendering (a Python exception in jinja2). The interpreter prefixes it with the
// template name and the line of the innermost expression or statement.
class RenderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void raise(fmt::format_string<Args...> f, Args&&... args) {
  throw RenderError(fmt::format(f, std::forward<Args>(args)...));
}

// The deepest nesting of lists, tuples, dicts and namespaces a template's value may have. A
// template can build a value of any depth (a loop assigning `ns.x = [ns.x]`), and printing,
// `tojson`, comparing and freeing it recurse once per level: 100,000 levels overflowed the stack.
// Values from JSON nest up to kMaxJsonDepth (every JSON text zerotune reads is checked), so twice
// that leaves a template room to wrap them; Python's jinja2 stops printing or dumping near 1,000
// levels (its recursion limit). Past it: RenderError "value nested deeper than 2000 levels", which
// the interpreter prefixes with the template's name and line.
inline constexpr int kMaxValueDepth = 2 * kMaxJsonDepth;
static_assert(kMaxValueDepth <= UINT16_MAX, "Value keeps its depth in 16 bits");

enum class Type : uint8_t {
  kUndefined,  // jinja2.Undefined: prints "", falsy, iterates empty; most operations raise
  kNone,
  kBool,
  kInt,  // Python int, held in int64 (overflow raises)
  kFloat,
  kString,  // UTF-8
  kList,
  kTuple,
  kDict,       // insertion-ordered
  kNamespace,  // jinja2 Namespace: the one mutable object (attribute assignment)
  kCallable,   // macro, caller, builtin function or bound method
  kLoop,       // the `loop` variable of a for loop
};

class Value {
 public:
  Value() = default;  // Undefined with an empty message
  // Frees the containers nested in a container whose last reference this is in a loop, not a
  // recursion: a chain of namespaces, each assigned into the previous one's attribute after it
  // was built, can be millions long (no depth check sees it) and overflowed the stack.
  ~Value();
  Value(const Value&) = default;
  Value(Value&&) noexcept = default;
  Value& operator=(const Value&) = default;
  Value& operator=(Value&&) noexcept = default;
  static Value undefined(std::string message) {
    return Value(Type::kUndefined, std::move(message));
  }
  static Value none() { return Value(Type::kNone, std::monostate{}); }
  static Value boolean(bool b) { return Value(Type::kBool, b); }
  static Value integer(int64_t i) { return Value(Type::kInt, i); }
  static Value number(double d) { return Value(Type::kFloat, d); }
  static Value string(std::string s) { return Value(Type::kString, std::move(s)); }
  // Containers: each raises "value nested deeper than 2000 levels" (kMaxValueDepth) when an item
  // is nested kMaxValueDepth deep already.
  static Value list(List items);
  static Value tuple(List items);
  static Value dict(DictPtr d);
  static Value ns(DictPtr d);
  static Value callable(std::shared_ptr<Callable> c) {
    return Value(Type::kCallable, std::move(c));
  }
  static Value loop(std::shared_ptr<LoopState> l) { return Value(Type::kLoop, std::move(l)); }

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::kUndefined; }
  bool is_none() const { return type_ == Type::kNone; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_int() const { return type_ == Type::kInt || type_ == Type::kBool; }  // bool is an int
  bool is_number() const { return is_int() || type_ == Type::kFloat; }
  bool is_sequence() const { return type_ == Type::kList || type_ == Type::kTuple; }
  bool is_mapping() const { return type_ == Type::kDict; }

  bool as_bool() const { return std::get<bool>(v_); }
  // The int value of an int or bool.
  int64_t as_int() const {
    return type_ == Type::kBool ? static_cast<int64_t>(std::get<bool>(v_)) : std::get<int64_t>(v_);
  }
  // The float value of a number (int, bool or float).
  double as_double() const {
    return type_ == Type::kFloat ? std::get<double>(v_) : static_cast<double>(as_int());
  }
  // The text of a string, or the error message of an Undefined.
  const std::string& str() const { return std::get<std::string>(v_); }
  const List& items() const { return *std::get<ListPtr>(v_); }
  Dict& dict() const { return *std::get<DictPtr>(v_); }
  Callable& fn() const { return *std::get<std::shared_ptr<Callable>>(v_); }
  LoopState& loop_state() const { return *std::get<std::shared_ptr<LoopState>>(v_); }
  // Identity of a reference type (list, dict, namespace, callable, loop) for `is sameas`.
  const void* identity() const;
  // Nesting of lists, tuples, dicts and namespaces: 0 for anything else, 1 + the deepest item's
  // (keys included) for a container, as it was built (a namespace's attributes assigned later do
  // not count).
  int depth() const { return depth_; }

 private:
  using Storage = std::variant<std::monostate, bool, int64_t, double, std::string, ListPtr, DictPtr,
                               std::shared_ptr<Callable>, std::shared_ptr<LoopState>>;
  template <typename T>
  Value(Type t, T&& v, uint16_t depth = 0) : type_(t), depth_(depth), v_(std::forward<T>(v)) {}
  // When this holds the last reference to a list, tuple, dict or namespace: moves the containers
  // among its items (keys included) into `out` and empties it.
  void release_items(std::vector<Value>& out);

  Type type_ = Type::kUndefined;
  uint16_t depth_ = 0;  // depth(), at most kMaxValueDepth (kept in the padding after type_)
  Storage v_ = std::string();
};

// A Python dict (insertion-ordered). Keys compare with Python equality (1 == 1.0 == True).
struct Dict {
  std::vector<std::pair<Value, Value>> entries;

  const Value* find(std::string_view key) const;
  const Value* find(const Value& key) const;
  // Replaces the value of an existing key (keeping its position) or appends.
  void set(Value key, Value value);
};

// State of one running for loop, read through the `loop` variable.
struct LoopState {
  ListPtr items;       // the (filtered) items iterated
  int64_t index0 = 0;  // current iteration
  bool has_changed = false;
  List changed_last;  // arguments of the last loop.changed() call
};

struct Stmt;
struct Scope;

// Something callable from a template. Builtins and bound methods are dispatched by name.
struct Callable {
  enum class Kind : uint8_t { kBuiltin, kMethod, kMacro, kCaller };
  Kind kind = Kind::kBuiltin;
  std::string name;                // function / method / macro name
  Value self;                      // the bound object of a method
  const Stmt* node = nullptr;      // the macro or call block (owned by the parsed template)
  std::shared_ptr<Scope> closure;  // scope the macro / caller body resolves names in
};

// Python's type name ("NoneType", "str", "dict", …) for error messages.
std::string type_name(const Value& v);
// jinja2's object_type_repr: "None", "dict object", "str object", ….
std::string object_type_repr(const Value& v);
bool truthy(const Value& v);
// The functions below recurse once per level of a container. Lists, tuples and dicts are at most
// kMaxValueDepth deep (checked as they are built, and never changed after), namespaces compare by
// identity and do not dump, so only printing can meet a deeper value: a namespace whose attributes
// were assigned after it was put in a container, or a namespace holding itself. Printing raises
// "value nested deeper than 2000 levels" there.

// Python str(v) (jinja2 output of `{{ v }}`): Undefined -> "", None -> "None", 1.0 -> "1.0",
// containers -> repr. Printing a function raises.
std::string to_str(const Value& v);
void append_str(std::string& out, const Value& v);
// Python repr(v).
std::string repr(const Value& v);
void append_repr(std::string& out, const Value& v);
// Python ==.
bool equals(const Value& a, const Value& b);
// Python a < b; raises "'<' not supported between instances of …" for unorderable types.
bool less(const Value& a, const Value& b);

// JSON (nlohmann) -> Value: objects become dicts with string keys in file order.
Value from_json(const Json& j);

// HF's `tojson` filter: json.dumps(v, ensure_ascii, indent, separators, sort_keys).
struct DumpOptions {
  bool ensure_ascii = false;
  bool pretty = false;   // indent is not None
  std::string indent;    // the indent unit (int n -> n spaces)
  std::string item_sep;  // default ", " ("," when pretty)
  std::string key_sep = ": ";
  bool sort_keys = false;
};
std::string dumps(const Value& v, const DumpOptions& opt);

}  // namespace zt::text::jinja
