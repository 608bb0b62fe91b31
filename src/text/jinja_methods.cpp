// HF's template globals and the Python methods (str, dict, list, loop) chat templates call.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "core/error.h"
#include "text/jinja_interp.h"
#include "text/jinja_pystr.h"

namespace zt::text::jinja {
namespace {

constexpr std::string_view kStrMethods[] = {
    "capitalize", "center",     "count",   "endswith",   "find",         "format",       "index",
    "isalnum",    "isalpha",    "isdigit", "islower",    "isspace",      "isupper",      "join",
    "ljust",      "lower",      "lstrip",  "partition",  "removeprefix", "removesuffix", "replace",
    "rfind",      "rindex",     "rjust",   "rpartition", "rsplit",       "rstrip",       "split",
    "splitlines", "startswith", "strip",   "title",      "upper",        "zfill"};
// Python str methods zerotune does not implement: using one is an error naming it.
constexpr std::string_view kStrUnsupported[] = {
    "casefold",  "encode",      "expandtabs", "format_map", "isascii",  "isdecimal", "isidentifier",
    "isnumeric", "isprintable", "istitle",    "maketrans",  "swapcase", "translate"};
constexpr std::string_view kDictMethods[] = {"get", "items", "keys", "values", "copy"};
constexpr std::string_view kDictUnsafe[] = {"clear",      "pop",    "popitem",
                                            "setdefault", "update", "fromkeys"};
constexpr std::string_view kListMethods[] = {"count", "index", "copy"};
constexpr std::string_view kListUnsafe[] = {"append", "clear",  "extend",  "insert",
                                            "pop",    "remove", "reverse", "sort"};

template <size_t N>
bool in(const std::string_view (&names)[N], std::string_view n) {
  return std::find(std::begin(names), std::end(names), n) != std::end(names);
}

Value bound(const Value& self, const std::string& name) {
  auto fn = std::make_shared<Callable>();
  fn->kind = Callable::Kind::kMethod;
  fn->name = name;
  fn->self = self;
  return Value::callable(std::move(fn));
}

const std::string& want_str(const Value* v, std::string_view what) {
  if (!v || !v->is_string())
    raise("{} argument must be str, not {}", what, v ? type_name(*v) : "nothing");
  return v->str();
}

int64_t want_int(const Value* v, int64_t dflt, std::string_view what) {
  if (!v || v->is_none()) return dflt;
  if (!v->is_int())
    raise("{}: '{}' object cannot be interpreted as an integer", what, type_name(*v));
  return v->as_int();
}

// Code-point bounds [start, end) as Python's str methods take them (negative from the end).
std::pair<size_t, size_t> cp_range(const Value* s, const Value* e, size_t n) {
  auto adj = [&](const Value* v, int64_t dflt) {
    int64_t x = want_int(v, dflt, "slice index");
    if (x < 0) x = std::max<int64_t>(0, x + static_cast<int64_t>(n));
    return static_cast<size_t>(std::min<int64_t>(x, static_cast<int64_t>(n)));
  };
  return {adj(s, 0), adj(e, static_cast<int64_t>(n))};
}

std::string pad(const std::string& s, int64_t width, const std::string& fill, char align) {
  int64_t len = static_cast<int64_t>(py::length(s));
  if (width <= len) return s;
  int64_t total = width - len, left = 0;
  if (align == '>') left = total;
  if (align == '^') left = total / 2;  // format(): extra fill goes right
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return out;
}

// Python's format(value, spec) for the common specs: [[fill]align][sign][0][width][.prec][type].
std::string format_spec(const Value& v, const std::string& spec) {
  if (spec.empty()) return to_str(v);
  std::u32string u = py::decode(spec);
  size_t i = 0;
  std::string fill = " ";
  char align = '\0', sign = '-';
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (u.size() >= 2 && is_align(u[1])) {
    fill.clear();
    py::append_utf8(fill, u[0]);
    align = static_cast<char>(u[1]);
    i = 2;
  } else if (!u.empty() && is_align(u[0])) {
    align = static_cast<char>(u[0]);
    i = 1;
  }
  if (i < u.size() && (u[i] == '+' || u[i] == '-' || u[i] == ' ')) sign = static_cast<char>(u[i++]);
  if (i < u.size() && u[i] == '0') {
    if (!align) {
      fill = "0";
      align = '=';
    }
    ++i;
  }
  int64_t width = 0, prec = -1;
  while (i < u.size() && u[i] >= '0' && u[i] <= '9') width = width * 10 + (u[i++] - '0');
  if (i < u.size() && u[i] == '.') {
    prec = 0;
    for (++i; i < u.size() && u[i] >= '0' && u[i] <= '9';) prec = prec * 10 + (u[i++] - '0');
  }
  char type = i < u.size() ? static_cast<char>(u[i++]) : '\0';
  if (i != u.size()) raise("unsupported format spec '{}'", spec);
  std::string body;
  if (v.is_string()) {
    if (type && type != 's') raise("Unknown format code '{}' for object of type 'str'", type);
    body = v.str();
    if (prec >= 0) body = py::encode(py::decode(body).substr(0, static_cast<size_t>(prec)));
    return pad(body, width, fill, align ? align : '<');
  }
  if (!v.is_number()) raise("unsupported format string passed to {}.__format__", type_name(v));
  bool as_int = v.is_int() && (type == '\0' || type == 'd' || type == 'x' || type == 'X' ||
                               type == 'o' || type == 'b');
  char buf[512];
  std::string sign_flag = sign == '-' ? "" : std::string(1, sign);
  if (as_int) {
    if (v.type() == Type::kBool && type == '\0')
      return pad(to_str(v), width, fill, align ? align : '<');
    long long n = v.as_int();
    if (type == 'b') {
      unsigned long long m = n < 0 ? -static_cast<unsigned long long>(n) : n;
      std::string bits;
      do bits.insert(bits.begin(), static_cast<char>('0' + (m & 1)));
      while (m >>= 1);
      body = (n < 0 ? "-" : sign_flag) + bits;
    } else {
      char t = type == '\0' ? 'd' : type;
      std::string f = "%" + sign_flag + "ll" + t;
      std::snprintf(buf, sizeof(buf), f.c_str(), n);
      body = buf;
    }
  } else {
    if (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b')
      raise("Unknown format code '{}' for object of type 'float'", type);
    double d = v.as_double();
    if (type == '\0' && prec < 0) {
      body = py::float_repr(d);
      if (sign != '-' && d >= 0) body = std::string(1, sign) + body;
    } else {
      char t = type == '\0' ? 'g' : type == '%' ? 'f' : type;
      if (type == '%') d *= 100;
      std::string f = "%" + sign_flag + "." + std::to_string(prec < 0 ? 6 : prec) + t;
      std::snprintf(buf, sizeof(buf), f.c_str(), d);
      body = buf;
      if (type == '%') body += "%";
    }
  }
  if (align == '=') {
    size_t s = (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) ? 1 : 0;
    return body.substr(0, s) + pad(body.substr(s), width - static_cast<int64_t>(s), fill, '>');
  }
  return pad(body, width, fill, align ? align : '>');
}

// str.format: {} / {0} / {name}, optional !r / !s and a format spec.
std::string str_format(const std::string& f, const Args& a) {
  std::string out;
  size_t auto_idx = 0;
  bool manual = false;
  for (size_t i = 0; i < f.size(); ++i) {
    char c = f[i];
    if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      raise("Single '}}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    size_t close = f.find('}', i);
    if (close == std::string::npos) raise("Single '{{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    i = close;
    std::string spec, conv;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conv = field.substr(bang + 1);
      field.resize(bang);
    }
    const Value* v = nullptr;
    bool numeric = !field.empty() && std::all_of(field.begin(), field.end(), [](char ch) {
      return std::isdigit(static_cast<unsigned char>(ch));
    });
    if ((field.empty() && manual) || (numeric && auto_idx > 0))
      raise("cannot switch from {} field specification to {} field numbering",
            field.empty() ? "manual" : "automatic", field.empty() ? "automatic" : "manual");
    manual |= numeric;
    if (field.empty()) {
      if (auto_idx >= a.pos.size()) raise("Replacement index {} out of range", auto_idx);
      v = &a.pos[auto_idx++];
    } else if (numeric) {
      size_t k = std::stoul(field);
      if (k >= a.pos.size()) raise("Replacement index {} out of range", k);
      v = &a.pos[k];
    } else {
      for (const auto& [k, val] : a.kw)
        if (k == field) v = &val;
      if (!v) raise("KeyError: {}", py::repr(field));
    }
    if (conv == "r") {
      out += format_spec(Value::string(repr(*v)), spec);
    } else if (conv == "s") {
      out += format_spec(Value::string(to_str(*v)), spec);
    } else if (conv.empty()) {
      out += format_spec(*v, spec);
    } else {
      raise("Unknown conversion specifier {}", conv);
    }
  }
  return out;
}

Value str_method(const std::string& s, const std::string& name, const Args& a) {
  std::string what = "str." + name + "()";
  if (name == "format") return Value::string(str_format(s, a));
  if (name == "upper") return Value::string(py::upper(s));
  if (name == "lower") return Value::string(py::lower(s));
  if (name == "capitalize") return Value::string(py::capitalize(s));
  if (name == "title") return Value::string(py::title(s));
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    auto p = bind(a, {"chars"}, what);
    const std::string* chars = p[0] && !p[0]->is_none() ? &want_str(p[0], what) : nullptr;
    return Value::string(py::strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    auto p = bind(a, {"sep", "maxsplit"}, what);
    const std::string* sep = p[0] && !p[0]->is_none() ? &want_str(p[0], what) : nullptr;
    if (sep && sep->empty()) raise("empty separator");
    List out;
    for (auto& part : py::split(s, sep, want_int(p[1], -1, what), name == "rsplit"))
      out.push_back(Value::string(std::move(part)));
    return Value::list(std::move(out));
  }
  if (name == "splitlines") {
    auto p = bind(a, {"keepends"}, what);
    List out;
    for (auto& part : py::splitlines(s, p[0] && truthy(*p[0])))
      out.push_back(Value::string(std::move(part)));
    return Value::list(std::move(out));
  }
  if (name == "replace") {
    auto p = bind(a, {"old", "new", "count"}, what);
    return Value::string(
        py::replace(s, want_str(p[0], what), want_str(p[1], what), want_int(p[2], -1, what)));
  }
  if (name == "startswith" || name == "endswith") {
    auto p = bind(a, {"prefix", "start", "end"}, what);
    if (!p[0]) raise("{} takes at least 1 argument", what);
    std::string_view sv = s;
    std::string sub;
    if (p[1] || p[2]) {
      std::u32string u = py::decode(s);
      auto [b, e] = cp_range(p[1], p[2], u.size());
      sub = py::encode(std::u32string_view(u).substr(b, e > b ? e - b : 0));
      sv = sub;
    }
    List options = p[0]->type() == Type::kTuple ? p[0]->items() : List{*p[0]};
    for (const auto& o : options) {
      const std::string& x = want_str(&o, what);
      bool hit = name == "startswith"
                     ? sv.substr(0, x.size()) == x
                     : sv.size() >= x.size() && sv.substr(sv.size() - x.size()) == x;
      if (hit) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    auto p = bind(a, {"sub", "start", "end"}, what);
    const std::string& sub = want_str(p[0], what);
    std::u32string u = py::decode(s), usub = py::decode(sub);
    auto [b, e] = cp_range(p[1], p[2], u.size());
    std::u32string_view hay =
        b <= e ? std::u32string_view(u).substr(b, e - b) : std::u32string_view();
    if (name == "count") {
      if (b > e) return Value::integer(0);
      return Value::integer(py::count(py::encode(hay), sub));
    }
    size_t pos = name[0] == 'r' ? hay.rfind(usub) : hay.find(usub);
    if (b > e) pos = std::u32string_view::npos;
    if (pos == std::u32string_view::npos) {
      if (name == "index" || name == "rindex") raise("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(static_cast<int64_t>(b + pos));
  }
  if (name == "join") {
    auto p = bind(a, {"iterable"}, what);
    if (!p[0]) raise("{} takes exactly one argument", what);
    List items;
    if (p[0]->is_sequence())
      items = p[0]->items();
    else if (p[0]->is_mapping())
      for (const auto& [k, v] : p[0]->dict().entries) items.push_back(k);
    else if (p[0]->is_string())
      for (char32_t c : py::decode(p[0]->str()))
        items.push_back(Value::string(py::encode(std::u32string(1, c))));
    else
      raise("can only join an iterable");
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string())
        raise("sequence item {}: expected str instance, {} found", i, type_name(items[i]));
      if (i) out += s;
      out += items[i].str();
    }
    return Value::string(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    auto p = bind(a, {"affix"}, what);
    const std::string& x = want_str(p[0], what);
    if (name == "removeprefix" && s.compare(0, x.size(), x) == 0)
      return Value::string(s.substr(x.size()));
    if (name == "removesuffix" && !x.empty() && s.size() >= x.size() &&
        s.compare(s.size() - x.size(), x.size(), x) == 0)
      return Value::string(s.substr(0, s.size() - x.size()));
    return Value::string(s);
  }
  if (name == "partition" || name == "rpartition") {
    auto p = bind(a, {"sep"}, what);
    const std::string& sep = want_str(p[0], what);
    if (sep.empty()) raise("empty separator");
    size_t pos = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (pos == std::string::npos)
      return name == "partition"
                 ? Value::tuple({Value::string(s), Value::string(""), Value::string("")})
                 : Value::tuple({Value::string(""), Value::string(""), Value::string(s)});
    return Value::tuple({Value::string(s.substr(0, pos)), Value::string(sep),
                         Value::string(s.substr(pos + sep.size()))});
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    auto p = bind(a, {"width", "fillchar"}, what);
    std::string fill = p[1] ? want_str(p[1], what) : " ";
    char align = name == "center" ? '^' : name == "ljust" ? '<' : '>';
    int64_t w = want_int(p[0], 0, what);
    if (align == '^') {  // str.center puts the extra fill on the right unless width is odd
      int64_t len = static_cast<int64_t>(py::length(s));
      if (w <= len) return Value::string(s);
      int64_t total = w - len, left = total / 2 + (total & w & 1);
      std::string out;
      for (int64_t i = 0; i < left; ++i) out += fill;
      out += s;
      for (int64_t i = 0; i < total - left; ++i) out += fill;
      return Value::string(std::move(out));
    }
    return Value::string(pad(s, w, fill, align));
  }
  if (name == "zfill") {
    auto p = bind(a, {"width"}, what);
    int64_t w = want_int(p[0], 0, what);
    bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
    std::string body = sign ? s.substr(1) : s;
    int64_t len = static_cast<int64_t>(py::length(s));
    if (w <= len) return Value::string(s);
    return Value::string((sign ? s.substr(0, 1) : "") +
                         std::string(static_cast<size_t>(w - len), '0') + body);
  }
  // is* predicates
  std::u32string u = py::decode(s);
  auto all = [&](bool (*pred)(char32_t)) {
    return !u.empty() && std::all_of(u.begin(), u.end(), pred);
  };
  if (name == "isspace") return Value::boolean(all(py::is_space));
  if (name == "isalpha") return Value::boolean(all(py::is_alpha));
  if (name == "isdigit") return Value::boolean(all(py::is_digit));
  if (name == "isalnum")
    return Value::boolean(all([](char32_t c) { return py::is_alpha(c) || py::is_digit(c); }));
  if (name == "isupper" || name == "islower") {
    bool any_cased = false, ok = true;
    for (char32_t c : u) {
      if (!py::is_cased(c)) continue;
      any_cased = true;
      if (name == "isupper" ? py::is_lower(c) : py::is_upper(c)) ok = false;
    }
    return Value::boolean(any_cased && ok);
  }
  raise("unsupported str method '{}'", name);
}

}  // namespace

bool is_global_function(std::string_view name) {
  return name == "range" || name == "dict" || name == "namespace" || name == "raise_exception" ||
         name == "strftime_now";
}

Value call_global(Interp& in, const std::string& name, Args& args) {
  if (name == "raise_exception") {
    auto p = bind(args, {"message"}, "raise_exception()");
    // transformers raises jinja2.exceptions.TemplateError(message).
    fail("{}: {}", in.name(), p[0] ? to_str(*p[0]) : std::string());
  }
  if (name == "strftime_now") {
    auto p = bind(args, {"format"}, "strftime_now()");
    const std::string& f = want_str(p[0], "strftime_now()");
    // transformers formats datetime.now(); SOURCE_DATE_EPOCH (seconds, the reproducible-builds
    // convention) pins the time instead, read as UTC: templates that print today's date (Llama
    // 3.x, SmolLM3) then render the same on every day.
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    const char* epoch = std::getenv("SOURCE_DATE_EPOCH");
    if (epoch != nullptr && *epoch != '\0') {
      char* end = nullptr;
      long long v = std::strtoll(epoch, &end, 10);
      if (*end != '\0' || v < 0) {
        fail("{}: SOURCE_DATE_EPOCH must be a non-negative integer (seconds), got '{}'", in.name(),
             epoch);
      }
      t = static_cast<std::time_t>(v);
      gmtime_r(&t, &tm);
    } else {
      localtime_r(&t, &tm);
    }
    std::string out(256 + f.size() * 8, '\0');
    size_t n = f.empty() ? 0 : std::strftime(out.data(), out.size(), f.c_str(), &tm);
    out.resize(n);
    return Value::string(std::move(out));
  }
  if (name == "range") {
    if (!args.kw.empty()) raise("range() takes no keyword arguments");
    if (args.pos.empty() || args.pos.size() > 3)
      raise("range expected at most 3 arguments, got {}", args.pos.size());
    int64_t v[3] = {0, 0, 1};
    for (size_t i = 0; i < args.pos.size(); ++i) {
      if (!args.pos[i].is_int())
        raise("'{}' object cannot be interpreted as an integer", type_name(args.pos[i]));
      v[args.pos.size() == 1 ? 1 : i] = args.pos[i].as_int();
    }
    if (v[2] == 0) raise("range() arg 3 must not be zero");
    List out;
    for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2]) {
      if (out.size() >= 100000)
        raise("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      out.push_back(Value::integer(i));
    }
    return Value::list(std::move(out));
  }
  // dict(...) and namespace(...): dict(*args, **kwargs) semantics.
  auto d = std::make_shared<Dict>();
  if (args.pos.size() > 1)
    raise("{} expected at most 1 positional argument, got {}", name, args.pos.size());
  if (!args.pos.empty()) {
    const Value& src = args.pos[0];
    if (src.is_mapping()) {
      d->entries = src.dict().entries;
    } else {
      for (const auto& item : in.iterate(src)) {
        List kv = in.iterate(item);
        if (kv.size() != 2)
          raise("dictionary update sequence element has length {}; 2 is required", kv.size());
        d->set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : args.kw) d->set(Value::string(k), v);
  if (name == "namespace") {
    for (const auto& [k, v] : d->entries)
      if (k.is_string() && !k.str().empty() && k.str()[0] == '_')
        raise(
            "Chat templates cannot store underscore-prefixed attributes on a namespace, but got "
            "{}. Please rename the attribute.",
            py::repr(k.str()));
    return Value::ns(std::move(d));
  }
  return Value::dict(std::move(d));
}

Value get_method(const Value& obj, const std::string& name, bool* found) {
  *found = true;
  auto unsafe = [&](const char* type) {
    return Value::undefined(
        fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, type));
  };
  switch (obj.type()) {
    case Type::kString:
      if (in(kStrMethods, name)) return bound(obj, name);
      if (in(kStrUnsupported, name)) raise("unsupported str method '{}'", name);
      break;
    case Type::kDict:
      if (in(kDictMethods, name)) return bound(obj, name);
      if (in(kDictUnsafe, name)) return unsafe("dict");
      break;
    case Type::kList:
      if (in(kListMethods, name)) return bound(obj, name);
      if (in(kListUnsafe, name)) return unsafe("list");
      break;
    case Type::kTuple:
      if (name == "count" || name == "index") return bound(obj, name);
      break;
    case Type::kLoop:
      if (name == "cycle" || name == "changed") return bound(obj, name);
      break;
    default:
      break;
  }
  *found = false;
  return Value();
}

Value call_method(Interp& in, const Value& self, const std::string& name, Args& args) {
  switch (self.type()) {
    case Type::kString:
      return str_method(self.str(), name, args);
    case Type::kDict: {
      const Dict& d = self.dict();
      if (name == "get") {
        auto p = bind(args, {"key", "default"}, "dict.get()");
        if (!p[0]) raise("get expected at least 1 argument, got 0");
        const Value* v = d.find(*p[0]);
        return v ? *v : p[1] ? *p[1] : Value::none();
      }
      if (!args.pos.empty() || !args.kw.empty()) raise("dict.{}() takes no arguments", name);
      if (name == "copy") return self;
      List out;
      for (const auto& [k, v] : d.entries) {
        if (name == "items")
          out.push_back(Value::tuple({k, v}));
        else
          out.push_back(name == "keys" ? k : v);
      }
      return Value::list(std::move(out));
    }
    case Type::kList:
    case Type::kTuple: {
      if (name == "copy") return Value::list(self.items());
      auto p = bind(args, {"value"}, "list." + name + "()");
      if (!p[0]) raise("{}() takes exactly one argument (0 given)", name);
      int64_t n = 0;
      for (size_t i = 0; i < self.items().size(); ++i) {
        if (!equals(self.items()[i], *p[0])) continue;
        if (name == "index") return Value::integer(static_cast<int64_t>(i));
        ++n;
      }
      if (name == "index") raise("{} is not in list", repr(*p[0]));
      return Value::integer(n);
    }
    case Type::kLoop: {
      LoopState& l = self.loop_state();
      if (name == "cycle") {
        if (args.pos.empty()) raise("no items for cycling given");
        return args.pos[static_cast<size_t>(l.index0) % args.pos.size()];
      }
      bool changed = !l.has_changed || !equals(Value::list(args.pos), Value::list(l.changed_last));
      l.has_changed = true;
      l.changed_last = args.pos;
      return Value::boolean(changed);
    }
    default:
      break;
  }
  (void)in;
  raise("unsupported method '{}' of {}", name, type_name(self));
}

}  // namespace zt::text::jinja
