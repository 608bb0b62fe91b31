#include "text/jinja_value.h"

#include <algorithm>
#include <cmath>

#include "text/jinja_pystr.h"

namespace zt::text::jinja {
namespace {

// `depth` levels of containers entered: past kMaxValueDepth, raises.
void check_depth(int depth) {
  if (depth > kMaxValueDepth) raise("value nested deeper than {} levels", kMaxValueDepth);
}

uint16_t depth_over(const List& items) {
  int d = 0;
  for (const Value& v : items) d = std::max(d, v.depth());
  check_depth(d + 1);
  return static_cast<uint16_t>(d + 1);
}

uint16_t depth_over(const Dict& dict) {
  int d = 0;
  for (const auto& [k, v] : dict.entries) d = std::max({d, k.depth(), v.depth()});
  check_depth(d + 1);
  return static_cast<uint16_t>(d + 1);
}

}  // namespace

// (The lists are made non-const, held as const: release_items may empty one it owns alone.)
Value Value::list(List items) {
  const uint16_t d = depth_over(items);
  return Value(Type::kList, ListPtr(std::make_shared<List>(std::move(items))), d);
}

Value Value::tuple(List items) {
  const uint16_t d = depth_over(items);
  return Value(Type::kTuple, ListPtr(std::make_shared<List>(std::move(items))), d);
}

Value Value::dict(DictPtr d) {
  const uint16_t depth = depth_over(*d);
  return Value(Type::kDict, std::move(d), depth);
}

Value Value::ns(DictPtr d) {
  const uint16_t depth = depth_over(*d);
  return Value(Type::kNamespace, std::move(d), depth);
}

static bool is_container(const Value& v) {
  return v.is_sequence() || v.type() == Type::kDict || v.type() == Type::kNamespace;
}

void Value::release_items(std::vector<Value>& out) {
  if (auto* l = std::get_if<ListPtr>(&v_); l != nullptr && l->use_count() == 1) {
    auto& items = const_cast<List&>(**l);  // made non-const by list() / tuple()
    for (Value& item : items)
      if (is_container(item)) out.push_back(std::move(item));
    items.clear();
  } else if (auto* d = std::get_if<DictPtr>(&v_); d != nullptr && d->use_count() == 1) {
    for (auto& [k, item] : (*d)->entries) {
      if (is_container(k)) out.push_back(std::move(k));
      if (is_container(item)) out.push_back(std::move(item));
    }
    (*d)->entries.clear();
  }
}

Value::~Value() {
  if (!is_container(*this)) return;
  std::vector<Value> pending;
  release_items(pending);
  while (!pending.empty()) {
    Value v = std::move(pending.back());
    pending.pop_back();
    v.release_items(pending);
  }  // each `v` is freed with its items already moved out
}

const void* Value::identity() const {
  switch (type_) {
    case Type::kList:
    case Type::kTuple:
      return std::get<ListPtr>(v_).get();
    case Type::kDict:
    case Type::kNamespace:
      return std::get<DictPtr>(v_).get();
    case Type::kCallable:
      return std::get<std::shared_ptr<Callable>>(v_).get();
    case Type::kLoop:
      return std::get<std::shared_ptr<LoopState>>(v_).get();
    default:
      return nullptr;
  }
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& [k, v] : entries)
    if (equals(k, key)) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

std::string type_name(const Value& v) {
  switch (v.type()) {
    case Type::kUndefined:
      return "Undefined";
    case Type::kNone:
      return "NoneType";
    case Type::kBool:
      return "bool";
    case Type::kInt:
      return "int";
    case Type::kFloat:
      return "float";
    case Type::kString:
      return "str";
    case Type::kList:
      return "list";
    case Type::kTuple:
      return "tuple";
    case Type::kDict:
      return "dict";
    case Type::kNamespace:
      return "Namespace";
    case Type::kCallable:
      return v.fn().kind == Callable::Kind::kMacro ? "Macro" : "function";
    case Type::kLoop:
      return "LoopContext";
  }
  return "object";
}

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  return type_name(v) + " object";
}

bool truthy(const Value& v) {
  switch (v.type()) {
    case Type::kUndefined:
    case Type::kNone:
      return false;
    case Type::kBool:
      return v.as_bool();
    case Type::kInt:
      return v.as_int() != 0;
    case Type::kFloat:
      return v.as_double() != 0.0;
    case Type::kString:
      return !v.str().empty();
    case Type::kList:
    case Type::kTuple:
      return !v.items().empty();
    case Type::kDict:
      return !v.dict().entries.empty();
    default:
      return true;
  }
}

// The printing functions with the number of containers entered so far (`depth`).
static void append_repr_at(std::string& out, const Value& v, int depth);
static void append_str_at(std::string& out, const Value& v, int depth);

static void append_seq(std::string& out, const List& items, char open, char close, bool tuple,
                       int depth) {
  check_depth(depth);
  out.push_back(open);
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    append_repr_at(out, items[i], depth);
  }
  if (tuple && items.size() == 1) out.push_back(',');
  out.push_back(close);
}

static void append_dict(std::string& out, const Dict& d, int depth) {
  check_depth(depth);
  out.push_back('{');
  bool first = true;
  for (const auto& [k, v] : d.entries) {
    if (!first) out += ", ";
    first = false;
    append_repr_at(out, k, depth);
    out += ": ";
    append_repr_at(out, v, depth);
  }
  out.push_back('}');
}

static void append_repr_at(std::string& out, const Value& v, int depth) {
  switch (v.type()) {
    case Type::kUndefined:
      out += "Undefined";
      return;
    case Type::kString:
      out += py::repr(v.str());
      return;
    case Type::kList:
      append_seq(out, v.items(), '[', ']', false, depth + 1);
      return;
    case Type::kTuple:
      append_seq(out, v.items(), '(', ')', true, depth + 1);
      return;
    case Type::kDict:
      append_dict(out, v.dict(), depth + 1);
      return;
    default:
      append_str_at(out, v, depth);
      return;
  }
}

void append_repr(std::string& out, const Value& v) { append_repr_at(out, v, 0); }

std::string repr(const Value& v) {
  std::string out;
  append_repr(out, v);
  return out;
}

void append_str(std::string& out, const Value& v) { append_str_at(out, v, 0); }

static void append_str_at(std::string& out, const Value& v, int depth) {
  switch (v.type()) {
    case Type::kUndefined:
      return;
    case Type::kNone:
      out += "None";
      return;
    case Type::kBool:
      out += v.as_bool() ? "True" : "False";
      return;
    case Type::kInt:
      out += std::to_string(v.as_int());
      return;
    case Type::kFloat:
      out += py::float_repr(v.as_double());
      return;
    case Type::kString:
      out += v.str();
      return;
    case Type::kList:
    case Type::kTuple:
    case Type::kDict:
      append_repr_at(out, v, depth);
      return;
    case Type::kNamespace:
      out += "<Namespace ";
      append_dict(out, v.dict(), depth + 1);
      out += ">";
      return;
    case Type::kLoop: {
      const LoopState& l = v.loop_state();
      out += fmt::format("<LoopContext {}/{}>", l.index0 + 1, l.items->size());
      return;
    }
    case Type::kCallable:
      if (v.fn().kind == Callable::Kind::kMacro) {
        out += fmt::format("<Macro {}>", py::repr(v.fn().name));
        return;
      }
      raise("cannot print the function '{}' (its Python repr holds a memory address)", v.fn().name);
  }
}

std::string to_str(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  append_str(out, v);
  return out;
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.type() == Type::kFloat || b.type() == Type::kFloat) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Type::kUndefined:
    case Type::kNone:
      return true;
    case Type::kString:
      return a.str() == b.str();
    case Type::kList:
    case Type::kTuple: {
      const List &x = a.items(), &y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equals(x[i], y[i])) return false;
      return true;
    }
    case Type::kDict: {
      const Dict &x = a.dict(), &y = b.dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* o = y.find(k);
        if (!o || !equals(v, *o)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.type() == Type::kFloat || b.type() == Type::kFloat) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.type() == b.type()) {
    if (a.is_string()) return a.str() < b.str();  // UTF-8 byte order == code point order
    if (a.is_sequence()) {
      const List &x = a.items(), &y = b.items();
      for (size_t i = 0; i < x.size() && i < y.size(); ++i)
        if (!equals(x[i], y[i])) return less(x[i], y[i]);
      return x.size() < y.size();
    }
  }
  raise("'<' not supported between instances of '{}' and '{}'", type_name(a), type_name(b));
}

Value from_json(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return Value::none();
    case Json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case Json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case Json::value_t::number_unsigned: {
      auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float:
      return Value::number(j.get<double>());
    case Json::value_t::string:
      return Value::string(j.get<std::string>());
    case Json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return Value::list(std::move(items));
    }
    case Json::value_t::object: {
      auto d = std::make_shared<Dict>();
      d->entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it)
        d->entries.emplace_back(Value::string(it.key()), from_json(it.value()));
      return Value::dict(std::move(d));
    }
    default:
      raise("unsupported JSON value of type {}", j.type_name());
  }
}

// ---- json.dumps ----

static void dump_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  for (char32_t c : py::decode(s)) {
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
      if (c > 0xFFFF) {
        char32_t v = c - 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
      }
    } else {
      py::append_utf8(out, c);
    }
  }
  out.push_back('"');
}

static std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return py::float_repr(d);
}

static void dump(std::string& out, const Value& v, const DumpOptions& opt, int level) {
  auto newline = [&](int lvl) {
    out.push_back('\n');
    for (int i = 0; i < lvl; ++i) out += opt.indent;
  };
  switch (v.type()) {
    case Type::kNone:
      out += "null";
      return;
    case Type::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Type::kInt:
      out += std::to_string(v.as_int());
      return;
    case Type::kFloat:
      out += json_float(v.as_double());
      return;
    case Type::kString:
      dump_string(out, v.str(), opt.ensure_ascii);
      return;
    case Type::kList:
    case Type::kTuple: {
      const List& items = v.items();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      if (opt.pretty) newline(level + 1);
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) {
          out += opt.item_sep;
          if (opt.pretty) newline(level + 1);
        }
        dump(out, items[i], opt, level + 1);
      }
      if (opt.pretty) newline(level);
      out.push_back(']');
      return;
    }
    case Type::kDict: {
      std::vector<const std::pair<Value, Value>*> entries;
      for (const auto& e : v.dict().entries) entries.push_back(&e);
      if (entries.empty()) {
        out += "{}";
        return;
      }
      if (opt.sort_keys)
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto* a, const auto* b) { return less(a->first, b->first); });
      out.push_back('{');
      if (opt.pretty) newline(level + 1);
      bool first = true;
      for (const auto* e : entries) {
        if (!first) {
          out += opt.item_sep;
          if (opt.pretty) newline(level + 1);
        }
        first = false;
        const Value& k = e->first;
        switch (k.type()) {
          case Type::kString:
            dump_string(out, k.str(), opt.ensure_ascii);
            break;
          case Type::kBool:
            out += k.as_bool() ? "\"true\"" : "\"false\"";
            break;
          case Type::kInt:
            out += fmt::format("\"{}\"", k.as_int());
            break;
          case Type::kFloat:
            out += fmt::format("\"{}\"", json_float(k.as_double()));
            break;
          case Type::kNone:
            out += "\"null\"";
            break;
          default:
            raise("keys must be str, int, float, bool or None, not {}", type_name(k));
        }
        out += opt.key_sep;
        dump(out, e->second, opt, level + 1);
      }
      if (opt.pretty) newline(level);
      out.push_back('}');
      return;
    }
    default:
      raise("Object of type {} is not JSON serializable", type_name(v));
  }
}

std::string dumps(const Value& v, const DumpOptions& opt) {
  std::string out;
  dump(out, v, opt, 0);
  return out;
}

}  // namespace zt::text::jinja
