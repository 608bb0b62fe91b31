// Declaring an option that TrainArgs holds as it is, once: the schema row names the key, the
// TrainArgs field (its type), the default and the accepted values, and the same row stores the
// checked value into the field (KeySpec::to_args). Used by the schema tables (trainer_keys.cpp,
// config_schema.cpp) only.
//   option("trainer.save_steps", &TrainArgs::save_steps, 500, steps())
//   option_or_null("trainer.eval_steps", &TrainArgs::eval_steps, nullptr, 0, steps(true))  // null
//   → 0 enum_option("trainer.save_strategy", &TrainArgs::save_strategy, IntervalStrategy::kSteps,
//   {"best"})
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "cli/config_schema.h"
#include "cli/run_config.h"
#include "core/enum_names.h"
#include "core/error.h"
#include "train/train_args.h"

namespace zt::cli {

template <class T>
struct IsOptional : std::false_type {};
template <class U>
struct IsOptional<std::optional<U>> : std::true_type {};

// The checked value of `path` as T (an enum from its name). Throws zt::Error (RunConfig::get's)
// when the value is missing or of another type.
template <class T>
T config_value(const RunConfig& cfg, std::string_view path) {
  const std::string key(path);
  if constexpr (IsOptional<T>::value) {
    return T(config_value<typename T::value_type>(cfg, path));
  } else if constexpr (std::is_enum_v<T>) {
    const std::string name = cfg.get<std::string>(key);
    if (const auto v = enum_from_name<T>(name)) return *v;
    std::string names;
    for (auto n : enum_name_list<T>()) names += (names.empty() ? "" : ", ") + std::string(n);
    fail("{}: {}: '{}' is not valid (expected one of: {}){}", cfg.key_at(key), key, name, names,
         cfg.where(key));
  } else if constexpr (std::is_same_v<T, bool>) {
    return cfg.get<bool>(key);
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(cfg.get<int64_t>(key));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(cfg.get<double>(key));
  } else {
    return T(cfg.get<std::string>(key));
  }
}

// An acted-on key stored in `field`; `dflt` is its default as the config spells it (3.0 stays a
// float, 0 an integer: args.yaml shows it so).
template <class T, class D>
KeySpec option(std::string_view path, T train::TrainArgs::*field, D dflt, ValueRule rule) {
  static_assert(std::is_convertible_v<D, T>, "the default must have the field's type");
  KeySpec k = acts(path, Json(dflt), std::move(rule));
  k.to_args = [path, field](const RunConfig& cfg, train::TrainArgs& a) {
    a.*field = config_value<T>(cfg, path);
  };
  return k;
}

// A nullable acted-on key (default `dflt`, null or a value); null stores `if_null`.
template <class T>
KeySpec option_or_null(std::string_view path, T train::TrainArgs::*field, Json dflt, T if_null,
                       ValueRule rule) {
  KeySpec k = acts(path, std::move(dflt), std::move(rule));
  k.to_args = [path, field, if_null](const RunConfig& cfg, train::TrainArgs& a) {
    a.*field = cfg.value(std::string(path)).is_null() ? if_null : config_value<T>(cfg, path);
  };
  return k;
}

// The rule of an enum option: one of E's names; `unsupported` are the values TRL/transformers know
// that zerotune lacks (refused as "not supported by zerotune").
template <class E>
ValueRule enum_rule(std::vector<std::string_view> unsupported = {}) {
  return one_of(enum_name_list<E>(), std::move(unsupported));
}

// An acted-on enum key stored in `field`.
template <class E>
KeySpec enum_option(std::string_view path, E train::TrainArgs::*field, E dflt,
                    std::vector<std::string_view> unsupported = {}) {
  KeySpec k = acts(path, Json(std::string(name_of(dflt))), enum_rule<E>(std::move(unsupported)));
  k.to_args = [path, field](const RunConfig& cfg, train::TrainArgs& a) {
    a.*field = config_value<E>(cfg, path);
  };
  return k;
}

}  // namespace zt::cli
