// Python's binary operators, `in`, and `%` formatting on jinja Values.
#include <cctype>
#include <cmath>
#include <cstdio>

#include "text/jinja_interp.h"
#include "text/jinja_pystr.h"

namespace zt::text::jinja {
namespace {

const char* op_symbol(BinOp op) {
  switch (op) {
    case BinOp::kAdd:
      return "+";
    case BinOp::kSub:
      return "-";
    case BinOp::kMul:
      return "*";
    case BinOp::kDiv:
      return "/";
    case BinOp::kFloorDiv:
      return "//";
    case BinOp::kMod:
      return "%";
    case BinOp::kPow:
      return "** or pow()";
  }
  return "?";
}

[[noreturn]] void unsupported(BinOp op, const Value& a, const Value& b) {
  raise("unsupported operand type(s) for {}: '{}' and '{}'", op_symbol(op), type_name(a),
        type_name(b));
}

[[noreturn]] void overflow_error() { raise("integer overflow (zerotune's Jinja ints are 64-bit)"); }

Value int_op(BinOp op, int64_t a, int64_t b) {
  int64_t r = 0;
  switch (op) {
    case BinOp::kAdd:
      if (__builtin_add_overflow(a, b, &r)) overflow_error();
      return Value::integer(r);
    case BinOp::kSub:
      if (__builtin_sub_overflow(a, b, &r)) overflow_error();
      return Value::integer(r);
    case BinOp::kMul:
      if (__builtin_mul_overflow(a, b, &r)) overflow_error();
      return Value::integer(r);
    case BinOp::kDiv:
      if (b == 0) raise("division by zero");
      return Value::number(static_cast<double>(a) / static_cast<double>(b));
    case BinOp::kFloorDiv:
    case BinOp::kMod: {
      if (b == 0) raise("integer division or modulo by zero");
      if (a == INT64_MIN && b == -1) {
        if (op == BinOp::kMod) return Value::integer(0);
        overflow_error();
      }
      int64_t q = a / b, m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) {
        q -= 1;
        m += b;
      }
      return Value::integer(op == BinOp::kMod ? m : q);
    }
    case BinOp::kPow: {
      if (b < 0) {
        if (a == 0) raise("0.0 cannot be raised to a negative power");
        return Value::number(std::pow(static_cast<double>(a), static_cast<double>(b)));
      }
      int64_t result = 1, base = a;
      while (b > 0) {
        if ((b & 1) && __builtin_mul_overflow(result, base, &result)) overflow_error();
        b >>= 1;
        if (b > 0 && __builtin_mul_overflow(base, base, &base)) overflow_error();
      }
      return Value::integer(result);
    }
  }
  return Value();
}

// CPython float_floor_div / float_rem.
void float_divmod(double vx, double wx, double* floordiv, double* mod) {
  double m = std::fmod(vx, wx);
  double div = (vx - m) / wx;
  if (m != 0.0) {
    if ((wx < 0) != (m < 0)) {
      m += wx;
      div -= 1.0;
    }
  } else {
    m = std::copysign(0.0, wx);
  }
  double fd;
  if (div != 0.0) {
    fd = std::floor(div);
    if (div - fd > 0.5) fd += 1.0;
  } else {
    fd = std::copysign(0.0, vx / wx);
  }
  *floordiv = fd;
  *mod = m;
}

Value float_op(BinOp op, double a, double b) {
  switch (op) {
    case BinOp::kAdd:
      return Value::number(a + b);
    case BinOp::kSub:
      return Value::number(a - b);
    case BinOp::kMul:
      return Value::number(a * b);
    case BinOp::kDiv:
      if (b == 0.0) raise("float division by zero");
      return Value::number(a / b);
    case BinOp::kFloorDiv:
    case BinOp::kMod: {
      if (b == 0.0)
        raise("{}", op == BinOp::kMod ? "float modulo by zero" : "float floor division by zero");
      double fd, m;
      float_divmod(a, b, &fd, &m);
      return Value::number(op == BinOp::kMod ? m : fd);
    }
    case BinOp::kPow:
      if (a == 0.0 && b < 0) raise("0.0 cannot be raised to a negative power");
      if (a < 0 && b != std::floor(b))
        raise("a negative number raised to a fractional power is complex");
      return Value::number(std::pow(a, b));
  }
  return Value();
}

Value repeat(const Value& seq, int64_t n) {
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value::string(std::move(out));
  }
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return seq.type() == Type::kTuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

}  // namespace

Value binary_op(BinOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.type() == Type::kFloat || b.type() == Type::kFloat)
      return float_op(op, a.as_double(), b.as_double());
    return int_op(op, a.as_int(), b.as_int());
  }
  switch (op) {
    case BinOp::kAdd:
      if (a.type() == b.type() && a.is_string()) return Value::string(a.str() + b.str());
      if (a.type() == b.type() && a.is_sequence()) {
        List out = a.items();
        out.insert(out.end(), b.items().begin(), b.items().end());
        return a.type() == Type::kTuple ? Value::tuple(std::move(out))
                                        : Value::list(std::move(out));
      }
      if (a.is_string() || a.is_sequence())
        raise("can only concatenate {} (not \"{}\") to {}", type_name(a), type_name(b),
              type_name(a));
      break;
    case BinOp::kMul:
      if ((a.is_string() || a.is_sequence()) && b.is_int()) return repeat(a, b.as_int());
      if ((b.is_string() || b.is_sequence()) && a.is_int()) return repeat(b, a.as_int());
      break;
    case BinOp::kMod:
      if (a.is_string()) return Value::string(percent_format(a.str(), b));
      break;
    default:
      break;
  }
  unsupported(op, a, b);
}

bool contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Type::kUndefined:
      return false;
    case Type::kString:
      if (!item.is_string())
        raise("'in <string>' requires string as left operand, not {}", type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Type::kList:
    case Type::kTuple:
      for (const auto& v : container.items())
        if (equals(v, item)) return true;
      return false;
    case Type::kDict:
      return container.dict().find(item) != nullptr;
    default:
      raise("argument of type '{}' is not iterable", type_name(container));
  }
}

bool compare(CmpOp op, const Value& a, const Value& b) {
  switch (op) {
    case CmpOp::kEq:
      return equals(a, b);
    case CmpOp::kNe:
      return !equals(a, b);
    case CmpOp::kIn:
      return contains(b, a);
    case CmpOp::kNotIn:
      return !contains(b, a);
    default:
      break;
  }
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  static constexpr const char* kSym[] = {"==", "!=", "<", "<=", ">", ">="};
  bool comparable = (a.is_number() && b.is_number()) ||
                    (a.type() == b.type() && (a.is_string() || a.is_sequence()));
  if (!comparable)
    raise("'{}' not supported between instances of '{}' and '{}'", kSym[static_cast<int>(op)],
          type_name(a), type_name(b));
  switch (op) {
    case CmpOp::kLt:
      return less(a, b);
    case CmpOp::kLe:
      return less(a, b) || equals(a, b);
    case CmpOp::kGt:
      return less(b, a);
    default:
      return less(b, a) || equals(a, b);
  }
}

std::string percent_format(const std::string& fmt, const Value& args) {
  List positional;
  const Dict* mapping = nullptr;
  if (args.type() == Type::kTuple) {
    positional = args.items();
  } else {
    if (args.is_mapping()) mapping = &args.dict();
    positional.push_back(args);
  }
  size_t next_arg = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) raise("incomplete format");
    if (fmt[i] == '%') {
      out.push_back('%');
      continue;
    }
    const Value* v = nullptr;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos) raise("incomplete format key");
      if (!mapping) raise("format requires a mapping");
      std::string key = fmt.substr(i + 1, close - i - 1);
      v = mapping->find(std::string_view(key));
      if (!v) raise("KeyError: {}", py::repr(key));
      used_mapping = true;
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string_view("-+ 0#").find(fmt[i]) != std::string_view::npos)
      flags.push_back(fmt[i++]);
    std::string width, prec;
    while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i])))
      width.push_back(fmt[i++]);
    bool has_prec = false;
    if (i < fmt.size() && fmt[i] == '.') {
      has_prec = true;
      ++i;
      while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i])))
        prec.push_back(fmt[i++]);
    }
    if (i >= fmt.size()) raise("incomplete format");
    char type = fmt[i];
    if (!v) {
      if (next_arg >= positional.size()) raise("not enough arguments for format string");
      v = &positional[next_arg++];
    }
    std::string spec = "%" + flags + width + (has_prec ? "." + prec : "");
    char buf[512];
    switch (type) {
      case 's':
      case 'r':
      case 'a': {
        std::string s = type == 's' ? to_str(*v) : repr(*v);
        if (has_prec) {
          std::u32string u = py::decode(s);
          size_t p = prec.empty() ? 0 : std::stoul(prec);
          if (u.size() > p) s = py::encode(std::u32string_view(u).substr(0, p));
        }
        size_t w = width.empty() ? 0 : std::stoul(width), len = py::length(s);
        if (len < w) {
          std::string pad(w - len, ' ');
          s = flags.find('-') != std::string::npos ? s + pad : pad + s;
        }
        out += s;
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        if (!v->is_number())
          raise("%{} format: a real number is required, not {}", type, type_name(*v));
        if (v->type() == Type::kFloat && type != 'd' && type != 'i' && type != 'u')
          raise("%{} format: an integer is required, not float", type);
        long long n = v->type() == Type::kFloat ? static_cast<long long>(std::trunc(v->as_double()))
                                                : static_cast<long long>(v->as_int());
        std::string f = spec + "ll" + (type == 'i' || type == 'u' ? 'd' : type);
        std::snprintf(buf, sizeof(buf), f.c_str(), n);
        out += buf;
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!v->is_number()) raise("must be real number, not {}", type_name(*v));
        std::string f = spec + type;
        std::snprintf(buf, sizeof(buf), f.c_str(), v->as_double());
        out += buf;
        break;
      }
      case 'c':
        if (v->is_string() && py::length(v->str()) == 1) {
          out += v->str();
        } else if (v->is_int()) {
          py::append_utf8(out, static_cast<char32_t>(v->as_int()));
        } else {
          raise("%c requires an int or a unicode character");
        }
        break;
      default:
        raise("unsupported format character '{}'", type);
    }
  }
  if (!used_mapping && !mapping && next_arg < positional.size())
    raise("not all arguments converted during string formatting");
  return out;
}

}  // namespace zt::text::jinja
