// jinja2's sequence filters (first, last, list, join, map, select/reject(attr), sort, unique,
// min, max, sum, reverse, items, dictsort), jinja2 3.1 `filters.py` semantics.
#include <algorithm>

#include "text/jinja_filters.h"
#include "text/jinja_pystr.h"

namespace zt::text::jinja::filters {

// make_attrgetter: "a.b.0" looked up part by part with getitem; digits become ints.
Value get_path(Interp& in, Value item, const Value& attribute) {
  if (!attribute.is_string()) return in.getitem(item, attribute);
  const std::string dot = ".";
  for (const auto& part : py::split(attribute.str(), &dot, -1, false)) {
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                               [](char c) { return c >= '0' && c <= '9'; });
    item = in.getitem(item, digits ? Value::integer(std::stoll(part)) : Value::string(part));
  }
  return item;
}

Value ignore_case(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::string(py::lower(v.str())) : v;
}

Value f_dictsort(Interp&, const Value& v, Args& a) {
  auto p = bind(a, {"case_sensitive", "by", "reverse"}, "filter 'dictsort'");
  if (!v.is_mapping()) raise("dictsort expects a mapping, got {}", type_name(v));
  std::string by = p[1] ? str_arg(p[1], "filter 'dictsort'") : "key";
  if (by != "key" && by != "value") raise("You can only sort by either \"key\" or \"value\"");
  size_t pos = by == "key" ? 0 : 1;
  bool cs = flag(p[0]), rev = flag(p[2]);
  List items;
  for (const auto& [k, val] : v.dict().entries) items.push_back(Value::tuple({k, val}));
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    Value kx = ignore_case(x.items()[pos], cs), ky = ignore_case(y.items()[pos], cs);
    return rev ? less(ky, kx) : less(kx, ky);
  });
  return Value::list(std::move(items));
}

Value f_first(Interp& in, const Value& v, Args& a) {
  bind(a, {}, "filter 'first'");
  List items = in.iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Interp& in, const Value& v, Args& a) {
  bind(a, {}, "filter 'last'");
  List items = in.iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_items(Interp&, const Value& v, Args& a) {
  bind(a, {}, "filter 'items'");
  if (v.is_undefined()) return Value::list({});
  if (!v.is_mapping()) raise("Can only get item pairs from a mapping.");
  List out;
  for (const auto& [k, val] : v.dict().entries) out.push_back(Value::tuple({k, val}));
  return Value::list(std::move(out));
}

Value f_join(Interp& in, const Value& v, Args& a) {
  auto p = bind(a, {"d", "attribute"}, "filter 'join'");
  std::string sep = p[0] ? to_str(*p[0]) : "", out;
  List items = in.iterate(v);
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    append_str(out, p[1] && !p[1]->is_none() ? get_path(in, items[i], *p[1]) : items[i]);
  }
  return Value::string(std::move(out));
}

Value f_list(Interp& in, const Value& v, Args& a) {
  bind(a, {}, "filter 'list'");
  return Value::list(in.iterate(v));
}

Value f_map(Interp& in, const Value& v, Args& a) {
  List out;
  if (!truthy(v)) return Value::list({});
  List items = in.iterate(v);
  if (a.pos.empty()) {
    const Value* attr = nullptr;
    const Value* dflt = nullptr;
    for (const auto& [k, val] : a.kw) {
      if (k == "attribute")
        attr = &val;
      else if (k == "default")
        dflt = &val;
      else
        raise("Unexpected keyword argument '{}'", k);
    }
    if (!attr) raise("map requires a filter argument");
    for (auto& item : items) {
      Value r = get_path(in, item, *attr);
      out.push_back(r.is_undefined() && dflt && !dflt->is_none() ? *dflt : r);
    }
    return Value::list(std::move(out));
  }
  std::string name = str_arg(&a.pos[0], "filter 'map'");
  Args rest{List(a.pos.begin() + 1, a.pos.end()), a.kw};
  for (auto& item : items) {
    Args copy = rest;
    out.push_back(in.call_filter(name, item, copy));
  }
  return Value::list(std::move(out));
}

static Value min_max(Interp& in, const Value& v, Args& a, bool is_max) {
  auto p = bind(a, {"case_sensitive", "attribute"}, is_max ? "filter 'max'" : "filter 'min'");
  List items = in.iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  auto key = [&](const Value& x) {
    return ignore_case(p[1] && !p[1]->is_none() ? get_path(in, x, *p[1]) : x, flag(p[0]));
  };
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (is_max ? less(best_key, k) : less(k, best_key)) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}

Value f_max(Interp& in, const Value& v, Args& a) { return min_max(in, v, a, true); }

Value f_min(Interp& in, const Value& v, Args& a) { return min_max(in, v, a, false); }

static Value select_or_reject(Interp& in, const Value& v, Args& a, bool select, bool by_attr) {
  if (!truthy(v)) return Value::list({});
  size_t off = by_attr ? 1 : 0;
  if (by_attr && a.pos.empty()) raise("Missing parameter for attribute name");
  std::string test;
  if (a.pos.size() > off) test = str_arg(&a.pos[off], "select/reject test name");
  Args rest{a.pos.size() > off + 1 ? List(a.pos.begin() + static_cast<long>(off) + 1, a.pos.end())
                                   : List{},
            a.kw};
  List out;
  for (const auto& item : in.iterate(v)) {
    Value x = by_attr ? get_path(in, item, a.pos[0]) : item;
    bool ok;
    if (test.empty()) {
      ok = truthy(x);
    } else {
      Args copy = rest;
      ok = in.call_test(test, x, copy);
    }
    if (ok == select) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value f_select(Interp& in, const Value& v, Args& a) {
  return select_or_reject(in, v, a, true, false);
}

Value f_reject(Interp& in, const Value& v, Args& a) {
  return select_or_reject(in, v, a, false, false);
}

Value f_selectattr(Interp& in, const Value& v, Args& a) {
  return select_or_reject(in, v, a, true, true);
}

Value f_rejectattr(Interp& in, const Value& v, Args& a) {
  return select_or_reject(in, v, a, false, true);
}

Value f_reverse(Interp& in, const Value& v, Args& a) {
  bind(a, {}, "filter 'reverse'");
  if (v.is_string()) {
    std::u32string u = py::decode(v.str());
    std::reverse(u.begin(), u.end());
    return Value::string(py::encode(u));
  }
  List items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value f_sort(Interp& in, const Value& v, Args& a) {
  auto p = bind(a, {"reverse", "case_sensitive", "attribute"}, "filter 'sort'");
  List items = in.iterate(v);
  bool rev = flag(p[0]), cs = flag(p[1]);
  std::vector<Value> attrs;
  if (p[2] && !p[2]->is_none()) {
    if (p[2]->is_string()) {
      const std::string comma = ",";
      for (auto& s : py::split(p[2]->str(), &comma, -1, false)) attrs.push_back(Value::string(s));
    } else {
      attrs.push_back(*p[2]);
    }
  }
  auto key = [&](const Value& x) {
    if (attrs.empty()) return ignore_case(x, cs);
    List k;
    for (const auto& at : attrs) k.push_back(ignore_case(get_path(in, x, at), cs));
    return Value::list(std::move(k));
  };
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& it : items) keyed.emplace_back(key(it), it);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return rev ? less(y.first, x.first) : less(x.first, y.first);
  });
  List out;
  for (auto& [k, it] : keyed) out.push_back(std::move(it));
  return Value::list(std::move(out));
}

Value f_sum(Interp& in, const Value& v, Args& a) {
  auto p = bind(a, {"attribute", "start"}, "filter 'sum'");
  Value total = p[1] ? *p[1] : Value::integer(0);
  for (const auto& item : in.iterate(v))
    total =
        binary_op(BinOp::kAdd, total, p[0] && !p[0]->is_none() ? get_path(in, item, *p[0]) : item);
  return total;
}

Value f_unique(Interp& in, const Value& v, Args& a) {
  auto p = bind(a, {"case_sensitive", "attribute"}, "filter 'unique'");
  List seen, out;
  for (const auto& item : in.iterate(v)) {
    Value k = ignore_case(p[1] && !p[1]->is_none() ? get_path(in, item, *p[1]) : item, flag(p[0]));
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); }))
      continue;
    seen.push_back(k);
    out.push_back(item);
  }
  return Value::list(std::move(out));
}

}  // namespace zt::text::jinja::filters
