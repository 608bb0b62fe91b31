// JSON value type used across zerotune: nlohmann::ordered_json keeps object keys in insertion
// (file/column) order, which chat templates' `tojson` and dataset rows rely on.
#pragma once

#include <nlohmann/json.hpp>

namespace zt {
using Json = nlohmann::ordered_json;
}  // namespace zt
