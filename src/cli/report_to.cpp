#include "cli/report_to.h"

#include <fmt/format.h>

namespace zt::cli {

ReportTo resolve_report_to(const RunConfig& cfg) {
  const Json& v = cfg.value("trainer.report_to");
  std::vector<std::string> names;
  if (v.is_null()) {
    names = {"all"};
  } else if (v.is_string()) {
    names = {v.get<std::string>()};
  } else if (v.is_array()) {
    for (const auto& e : v) {
      if (!e.is_string())
        fail("{}: trainer.report_to: expected a string or a list of strings, got {}", cfg.source(),
             v.dump());
      names.push_back(e.get<std::string>());
    }
  } else {
    fail("{}: trainer.report_to: expected a string or a list of strings, got {}", cfg.source(),
         v.dump());
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
    r.warning = fmt::format("{}: trainer.report_to {} is not supported; {}", cfg.source(), list,
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
