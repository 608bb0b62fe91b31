// The functions of Hydra 1.3's override grammar that give one value
// (io/hydra_override_functions.h): the casts int, float, str, bool and sort, as
// hydra/_internal/grammar/grammar_functions.py evaluates them; its sweeps and shuffle() refused.
#include "io/hydra_override_functions.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/hydra_sweep.h"
#include "io/python_number.h"

namespace zt {
namespace {

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// The JSON type of `v` in Python's words, for messages.
std::string_view python_type(const Json& v) {
  if (v.is_string()) return "str";
  if (v.is_boolean()) return "bool";
  if (v.is_number_integer()) return "int";
  if (v.is_number_float()) return "float";
  if (v.is_array()) return "list";
  if (v.is_object()) return "dict";
  return "NoneType";
}

enum class Cast { kInt, kFloat, kStr, kBool };

// One call of a function in override `ov_`; `call_` is its text, for messages.
class FunctionCall {
 public:
  FunctionCall(const std::string& ov, const std::string& call) : ov_(ov), call_(call) {}

  // Hydra's functions that give one value; its sweeps and shuffle() are refused.
  Json call(const std::string& name, const std::vector<Json>& args,
            const std::vector<std::pair<std::string, Json>>& kwargs) {
    static constexpr std::array<std::string_view, 5> kSweeps = {"choice", "range", "interval",
                                                                "glob", "tag"};
    if (std::find(kSweeps.begin(), kSweeps.end(), name) != kSweeps.end())
      fail("override '{}': {}", ov_, kSweepRefused);
    if (name == "shuffle")
      fail(
          "override '{}': shuffle() gives a random order on each run and zerotune's runs are "
          "deterministic; write the list in the order wanted",
          ov_);
    if (name == "sort") return sort(args, kwargs);
    static constexpr std::array<std::pair<std::string_view, Cast>, 4> kCasts = {
        {{"int", Cast::kInt}, {"float", Cast::kFloat}, {"str", Cast::kStr}, {"bool", Cast::kBool}}};
    for (const auto& [cast_name, cast] : kCasts) {
      if (name != cast_name) continue;
      const Json* value = args.empty() ? nullptr : &args[0];
      for (const auto& [k, v] : kwargs) {
        if (k != "value")
          fail("override '{}': {}: unexpected keyword argument '{}'", ov_, call_, k);
        if (!args.empty())
          fail("override '{}': {}: cannot use both position and named arguments", ov_, call_);
        value = &v;
      }
      if (value == nullptr)
        fail("override '{}': {}: no positional args or value specified", ov_, call_);
      if (args.size() > 1) fail("override '{}': {}", ov_, kSweepRefused);
      return apply_cast(cast, *value);
    }
    fail(
        "override '{}': unknown function '{}' in '{}' (Hydra's functions: bool, choice, float, "
        "glob, int, interval, range, shuffle, sort, str, tag); as text, '(' is escaped (\\() or "
        "the value is quoted",
        ov_, name, call_);
  }

  // Hydra's cast_int / cast_float / cast_str / cast_bool of one value: each element of a list and
  // each value of a dict cast in turn; a string read as Python's int() / float() read it.
  Json apply_cast(Cast cast, const Json& v) const {
    if (v.is_array()) {
      Json a = Json::array();
      for (const Json& e : v) a.push_back(apply_cast(cast, e));
      return a;
    }
    if (v.is_object()) {
      Json o = Json::object();
      for (const auto& [k, e] : v.items()) o[k] = apply_cast(cast, e);
      return o;
    }
    if (v.is_null() && cast == Cast::kBool) return false;  // Python's bool(None)
    if (v.is_null())
      fail("override '{}': {}: null cannot be cast (only bool() takes it)", ov_, call_);
    const std::string s = v.is_string() ? v.get<std::string>() : "";
    switch (cast) {
      case Cast::kInt: {
        if (v.is_number_integer()) return v;
        if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
        if (v.is_string()) {
          if (const std::optional<int64_t> i = python_int(s)) return *i;
          fail("override '{}': {}: invalid literal for int() with base 10: '{}'", ov_, call_, s);
        }
        const double d = v.get<double>();
        if (std::isnan(d))
          fail("override '{}': {}: cannot convert float NaN to integer", ov_, call_);
        if (std::isinf(d))
          fail("override '{}': {}: cannot convert float infinity to integer", ov_, call_);
        if (std::fabs(d) >= 9.2233720368547758e18)
          fail("override '{}': {}: {} does not fit in a 64-bit integer", ov_, call_, d);
        return static_cast<int64_t>(d);  // truncates toward zero, as int() does
      }
      case Cast::kFloat: {
        if (v.is_string()) {
          if (const std::optional<double> d = python_float(s)) return *d;
          fail("override '{}': {}: could not convert string to float: '{}'", ov_, call_, s);
        }
        if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
        return v.get<double>();
      }
      case Cast::kStr:
        return hydra_str(v);
      case Cast::kBool:
        if (v.is_string()) {
          std::string l = s;
          for (char& c : l) c = static_cast<char>(c | (is_alpha(c) ? 0x20 : 0));
          if (l == "true") return true;
          if (l == "false") return false;
          fail("override '{}': {}: Cannot cast '{}' to bool", ov_, call_, s);
        }
        if (v.is_boolean()) return v;
        return v.get<double>() != 0;  // nan is true, as in Python
    }
    return v;
  }

  // Hydra's sort(*args, sweep=None, list=None, reverse=False) of one value: a list sorted (numbers
  // or strings, as Python compares them; a stable sort, reverse keeping equal elements' order),
  // anything else as it is.
  Json sort(const std::vector<Json>& args,
            const std::vector<std::pair<std::string, Json>>& kwargs) const {
    bool reverse = false;
    const Json* list = nullptr;  // list=[…], which wins over positional values, as in Hydra
    for (const auto& [k, v] : kwargs) {
      if (k == "reverse") {
        if (!v.is_boolean())
          fail("override '{}': {}: mismatch type argument reverse: {} is incompatible with bool",
               ov_, call_, python_type(v));
        reverse = v.get<bool>();
      } else if (k == "list") {
        if (!v.is_array() && !v.is_null())
          fail("override '{}': {}: mismatch type argument list: {} is incompatible with list", ov_,
               call_, python_type(v));
        if (v.is_array()) list = &v;
      } else if (k == "sweep") {
        fail("override '{}': {}", ov_, kSweepRefused);
      } else {
        fail("override '{}': {}: unexpected keyword argument '{}'", ov_, call_, k);
      }
    }
    if (list == nullptr && args.size() > 1) fail("override '{}': {}", ov_, kSweepRefused);
    const Json* value = list != nullptr ? list : args.empty() ? nullptr : &args[0];
    if (value == nullptr) fail("override '{}': {}: empty sort input", ov_, call_);
    if (!value->is_array()) return *value;
    const bool numbers = std::all_of(value->begin(), value->end(), [](const Json& e) {
      return (e.is_number() || e.is_boolean()) &&
             !(e.is_number_float() && std::isnan(e.get<double>()));
    });
    const bool strings =
        std::all_of(value->begin(), value->end(), [](const Json& e) { return e.is_string(); });
    if (!numbers && !strings)
      fail(
          "override '{}': {}: sort() takes a list of numbers or a list of strings (Python's '<' "
          "compares no other mix)",
          ov_, call_);
    std::vector<Json> items(value->begin(), value->end());
    const auto less = [numbers](const Json& a, const Json& b) {
      if (!numbers) return a.get<std::string>() < b.get<std::string>();  // UTF-8: code points
      const auto num = [](const Json& e) -> std::pair<bool, int64_t> {
        if (e.is_boolean()) return {true, e.get<bool>() ? 1 : 0};
        if (e.is_number_integer()) return {true, e.get<int64_t>()};
        return {false, 0};
      };
      const auto [ai, av] = num(a);
      const auto [bi, bv] = num(b);
      if (ai && bi) return av < bv;
      return (ai ? static_cast<double>(av) : a.get<double>()) <
             (bi ? static_cast<double>(bv) : b.get<double>());
    };
    if (reverse) {
      std::stable_sort(items.begin(), items.end(),
                       [&](const Json& a, const Json& b) { return less(b, a); });
    } else {
      std::stable_sort(items.begin(), items.end(), less);
    }
    return Json(items);
  }

 private:
  const std::string& ov_;
  const std::string& call_;
};

}  // namespace

std::string hydra_str(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number_float()) return python_float_repr(v.get<double>());
  return "null";
}

Json call_hydra_function(const std::string& ov, const std::string& call, const std::string& name,
                         const std::vector<Json>& args,
                         const std::vector<std::pair<std::string, Json>>& kwargs) {
  return FunctionCall(ov, call).call(name, args, kwargs);
}

}  // namespace zt
