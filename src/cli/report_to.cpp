#include "cli/report_to.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/spelling.h"

namespace zt::cli {

bool is_transformers_integration(std::string_view name) {
  for (const std::string_view i : kTransformersIntegrations)
    if (i == name) return true;
  return false;
}

ReportTo resolve_report_to(const RunConfig& cfg) {
  const Json& v = cfg.value("trainer.report_to");
  const std::string at = cfg.key_at("trainer.report_to");  // "FILE:LINE" that holds the key
  std::vector<std::string> names;
  if (v.is_null()) {
    names = {"all"};
  } else if (v.is_string()) {
    names = {v.get<std::string>()};
  } else if (v.is_array()) {
    for (const auto& e : v) {
      if (!e.is_string())
        fail("{}: trainer.report_to: expected a string or a list of strings, got {}", at, v.dump());
      names.push_back(e.get<std::string>());
    }
  } else {
    fail("{}: trainer.report_to: expected a string or a list of strings, got {}", at, v.dump());
  }
  // What transformers refuses (its Trainer raises "<name> is not supported" for each name that is
  // no integration) and zerotune would otherwise read as an integration it lacks: "none" / "all"
  // beside other names, those words or "tensorboard" in another case ("None"), and "" or only
  // whitespace (each was warned about unquoted, "trainer.report_to   is not supported", and
  // TensorBoard written).
  for (const auto& n : names) {
    if (n.find_first_not_of(" \t\n\r\f\v") == std::string::npos)
      fail(
          "{}: trainer.report_to: {} is not an integration (transformers raises on it); use none "
          "for no integration, or leave the key out for transformers' default (all){}",
          at, n.empty() ? "the empty string" : "'" + n + "' (only whitespace)",
          cfg.where("trainer.report_to"));
    const std::string lower = ascii_lower(n);
    const bool keyword = lower == "none" || lower == "all";
    if ((keyword || lower == "tensorboard") && n != lower)
      fail(
          "{}: trainer.report_to: '{}' is not an integration (transformers raises on it); did you "
          "mean '{}'?",
          at, n, lower);
    if (keyword && names.size() > 1)
      fail(
          "{}: trainer.report_to: '{}' stands alone, not in a list with other integrations "
          "(transformers raises on it); got {}",
          at, n, v.dump());
    if (!keyword && !is_transformers_integration(n)) {
      const bool comma = n.find(',') != std::string::npos;
      fail(
          "{}: trainer.report_to: '{}' is not an integration (transformers raises on it){}; its "
          "integrations are {}",
          at, n, comma ? "; several integrations are a list, e.g. [tensorboard, wandb]" : "",
          fmt::join(kTransformersIntegrations, ", "));
    }
  }
  ReportTo r;
  for (const auto& n : names) {
    if (n == "tensorboard" || n == "all")
      r.tensorboard = true;
    else if (n != "none")
      r.unsupported.push_back(n);
  }
  if (!r.unsupported.empty()) {
    std::string list;
    for (const auto& n : r.unsupported) list += (list.empty() ? "" : ", ") + n;
    r.warning = fmt::format("{}: trainer.report_to {} is not supported; {}", at, list,
                            r.tensorboard ? "TensorBoard and metrics.jsonl are written"
                                          : "TensorBoard and metrics.jsonl are written instead");
    r.tensorboard = true;
  }
  if (r.tensorboard) r.effective.push_back("tensorboard");
  return r;
}

void record_report_to(RunConfig& cfg, const ReportTo& r, const std::filesystem::path& logging_dir) {
  cfg.set("trainer.report_to", r.effective);
  if (r.tensorboard) cfg.set("trainer.logging_dir", logging_dir.string());
}

}  // namespace zt::cli
