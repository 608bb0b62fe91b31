// HF's weight-decay rule, as plain string tests equivalent to its regexes.
#include "optim/param_groups.h"

#include <string>

#include "core/spelling.h"

namespace zt::optim {

bool hf_weight_decay_applies(std::string_view hf_name) {
  const std::string s = ascii_lower(std::string(hf_name));
  if (s.find("bias") != std::string::npos) return false;
  if (s.find("layernorm") != std::string::npos) return false;
  if (s.find("rmsnorm") != std::string::npos) return false;
  // (?:^|\.)norm(?:$|\.)  and  _norm(?:$|\.)
  for (size_t pos = s.find("norm"); pos != std::string::npos; pos = s.find("norm", pos + 1)) {
    const size_t end = pos + 4;
    const bool ends_component = end == s.size() || s[end] == '.';
    if (!ends_component) continue;
    if (pos == 0 || s[pos - 1] == '.' || s[pos - 1] == '_') return false;
  }
  return true;
}

}  // namespace zt::optim
