// trainer.report_to resolved as transformers' TrainingArguments resolves it (`__post_init__`), so
// that args.yaml records the integrations the run reported to, as HF's dump of its arguments does:
//   null (absent, or deleted with `~trainer.report_to`) — the users' transformers 4.x default,
//   "all", which means every installed integration — and "all" → [tensorboard];
//   "none" → [];  a string → [that string];  a list → the list.
// zerotune's one integration is TensorBoard (metrics.jsonl is always written). A list or string
// naming only integrations zerotune lacks (wandb, mlflow, …) gets TensorBoard instead, with one
// warning naming them; [tensorboard, wandb] reports to TensorBoard and warns about wandb.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cli/run_config.h"
#include "io/json.h"

namespace zt::cli {

// The names transformers' Trainer reports to (INTEGRATION_TO_CALLBACK of
// transformers/integrations/integration_utils.py, 4.57.1 — the users' version); any other name
// makes it raise "<name> is not supported".
inline constexpr std::string_view kTransformersIntegrations[] = {
    "azure_ml", "clearml", "codecarbon", "comet_ml",    "dagshub", "dvclive", "flyte",
    "mlflow",   "neptune", "swanlab",    "tensorboard", "trackio", "wandb"};

// Whether `name` is one of kTransformersIntegrations (exact spelling, as transformers compares).
bool is_transformers_integration(std::string_view name);

struct ReportTo {
  bool tensorboard = false;              // TensorBoard event files are written
  Json effective = Json::array();        // what the run reported to: [] or ["tensorboard"]
  std::vector<std::string> unsupported;  // the integrations named that zerotune lacks
  std::string warning;                   // "" or one line naming `unsupported`
};

// The trainer.report_to of `cfg` resolved as above. Throws zt::Error (RunConfig's) for a value that
// is not null, a string or a list of strings (the schema refuses those before this runs), and for
// what transformers raises on: "" or only whitespace, none / all beside other names, None /
// TensorBoard (the case), any other name that is not in kTransformersIntegrations ("wandbb",
// "tensorboard,wandb" as one string).
ReportTo resolve_report_to(const RunConfig& cfg);

// Writes what the run uses into `cfg`, for args.yaml: trainer.report_to = r.effective and, when
// TensorBoard is written, trainer.logging_dir = `logging_dir` (the directory its events go to).
void record_report_to(RunConfig& cfg, const ReportTo& r, const std::filesystem::path& logging_dir);

}  // namespace zt::cli
