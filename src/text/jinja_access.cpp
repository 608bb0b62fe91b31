// Sandboxed attribute / item access and slicing (jinja2 SandboxedEnvironment.getattr / getitem,
// Python slice semantics).
#include "text/jinja_interp.h"
#include "text/jinja_pystr.h"

namespace zt::text::jinja {

void raise_undefined(const Value& v) {
  raise("{}", v.str().empty() ? "value is undefined" : v.str());
}

static int64_t norm_index(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

Value Interp::getitem(const Value& obj, const Value& key) {
  switch (obj.type()) {
    case Type::kUndefined:
      raise_undefined(obj);
    case Type::kDict:
      if (const Value* v = obj.dict().find(key)) return *v;
      break;
    case Type::kList:
    case Type::kTuple:
    case Type::kString:
      if (key.is_int()) {
        if (obj.is_string()) {
          std::u32string u = py::decode(obj.str());
          int64_t i = norm_index(key.as_int(), static_cast<int64_t>(u.size()));
          if (i >= 0 && i < static_cast<int64_t>(u.size())) {
            std::string s;
            py::append_utf8(s, u[static_cast<size_t>(i)]);
            return Value::string(std::move(s));
          }
        } else {
          const List& items = obj.items();
          int64_t i = norm_index(key.as_int(), static_cast<int64_t>(items.size()));
          if (i >= 0 && i < static_cast<int64_t>(items.size()))
            return items[static_cast<size_t>(i)];
        }
        return Value::undefined(
            fmt::format("{} has no element {}", object_type_repr(obj), repr(key)));
      }
      break;
    default:
      break;
  }
  if (key.is_string()) return getattr(obj, key.str());
  return Value::undefined(fmt::format("{} has no element {}", object_type_repr(obj), repr(key)));
}

Value Interp::getattr(const Value& obj, const std::string& attr) {
  if (obj.is_undefined()) raise_undefined(obj);
  if (obj.type() == Type::kLoop) {
    const LoopState& l = obj.loop_state();
    auto n = static_cast<int64_t>(l.items->size());
    if (attr == "index") return Value::integer(l.index0 + 1);
    if (attr == "index0") return Value::integer(l.index0);
    if (attr == "revindex") return Value::integer(n - l.index0);
    if (attr == "revindex0") return Value::integer(n - l.index0 - 1);
    if (attr == "first") return Value::boolean(l.index0 == 0);
    if (attr == "last") return Value::boolean(l.index0 == n - 1);
    if (attr == "length") return Value::integer(n);
    if (attr == "depth") return Value::integer(1);
    if (attr == "depth0") return Value::integer(0);
    if (attr == "previtem")
      return l.index0 > 0 ? (*l.items)[static_cast<size_t>(l.index0 - 1)]
                          : Value::undefined("there is no previous item");
    if (attr == "nextitem")
      return l.index0 + 1 < n ? (*l.items)[static_cast<size_t>(l.index0 + 1)]
                              : Value::undefined("there is no next item");
  }
  if (obj.type() == Type::kNamespace) {
    if (const Value* v = obj.dict().find(std::string_view(attr))) return *v;
  } else {
    bool found = false;
    Value m = get_method(obj, attr, &found);
    if (found) return m;
    if (obj.is_mapping()) {
      if (const Value* v = obj.dict().find(std::string_view(attr))) return *v;
    }
  }
  return Value::undefined(
      fmt::format("{} has no attribute {}", py::repr(object_type_repr(obj)), py::repr(attr)));
}

Value Interp::slice(const Value& obj, const Expr& s) {
  if (obj.is_undefined()) raise_undefined(obj);
  int64_t bounds[3] = {0, 0, 1};
  bool given[3] = {false, false, false};
  for (int k = 0; k < 3; ++k) {
    if (!s.kids[static_cast<size_t>(k)]) continue;
    Value v = eval(*s.kids[static_cast<size_t>(k)]);
    if (v.is_none()) continue;
    if (!v.is_int())
      return Value::undefined(fmt::format("{} has no element slice", object_type_repr(obj)));
    bounds[k] = v.as_int();
    given[k] = true;
  }
  int64_t step = bounds[2];
  if (step == 0) raise("slice step cannot be zero");
  bool is_str = obj.is_string();
  if (!is_str && !obj.is_sequence())
    return Value::undefined(fmt::format("{} has no element slice", object_type_repr(obj)));
  std::u32string u = is_str ? py::decode(obj.str()) : std::u32string();
  int64_t n = static_cast<int64_t>(is_str ? u.size() : obj.items().size());
  // CPython PySlice_AdjustIndices.
  auto adjust = [&](int64_t v, bool has, int64_t dflt) {
    if (!has) return dflt;
    if (v < 0) {
      v += n;
      if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= n) {
      v = step < 0 ? n - 1 : n;
    }
    return v;
  };
  int64_t start = adjust(bounds[0], given[0], step < 0 ? n - 1 : 0);
  int64_t stop = adjust(bounds[1], given[1], step < 0 ? -1 : n);
  std::u32string su;
  List items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (is_str) {
      su.push_back(u[static_cast<size_t>(i)]);
    } else {
      items.push_back(obj.items()[static_cast<size_t>(i)]);
    }
  }
  if (is_str) return Value::string(py::encode(su));
  return obj.type() == Type::kTuple ? Value::tuple(std::move(items))
                                    : Value::list(std::move(items));
}

}  // namespace zt::text::jinja
