// Names of enum values, for the enums a config value is parsed into (trainer.save_strategy,
// trainer.nan_policy, compute.backend, …): the one list of an enum's accepted spellings, from
// which the config schema's allowed values, the parse and the printed name all come.
//
// An enum E takes part by declaring, in its own namespace (found by argument-dependent lookup),
//   constexpr std::span<const EnumName<E>> enum_names(E) { return kNamesOfE; }
// with every value once, in the order the schema lists them.
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace zt {

template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

// The name of `v` ("?" for a value missing from the list, which enum_names forbids).
template <class E>
constexpr std::string_view name_of(E v) {
  for (const auto& n : enum_names(E{}))
    if (n.value == v) return n.name;
  return "?";
}

// The value named `name`, or std::nullopt.
template <class E>
constexpr std::optional<E> enum_from_name(std::string_view name) {
  for (const auto& n : enum_names(E{}))
    if (n.name == name) return n.value;
  return std::nullopt;
}

// Every name, in declaration order.
template <class E>
std::vector<std::string_view> enum_name_list() {
  std::vector<std::string_view> v;
  for (const auto& n : enum_names(E{})) v.push_back(n.name);
  return v;
}

}  // namespace zt
