#include "train/resume_checks.h"

#include <map>

#include "core/error.h"
#include "core/log.h"
#include "core/tensor.h"
#include "param/param_layout.h"
#include "train/checkpoint_dirs.h"

namespace zt::train {

namespace fs = std::filesystem;

void check_resume_path(const fs::path& ckpt) {
  std::error_code ec;
  const fs::file_status st = fs::status(ckpt, ec);
  if (fs::is_directory(st)) return;
  if (fs::exists(st))
    fail(
        "resume_from_checkpoint: {} is a file; expected a checkpoint directory "
        "(<exp_dir>/checkpoint-<step>)",
        ckpt.string());
  std::string there;
  const fs::path parent = ckpt.parent_path().empty() ? fs::path(".") : ckpt.parent_path();
  if (fs::is_directory(parent, ec))
    for (const CheckpointDir& c : list_checkpoints(parent))
      there += (there.empty() ? "" : ", ") + c.path.filename().string();
  fail("resume_from_checkpoint: '{}' does not exist{}", ckpt.string(),
       there.empty() ? std::string()
                     : fmt::format(" (the checkpoints in {}: {})", parent.string(), there));
}

int64_t checked_resume_step(const Json& state, const std::string& state_file, int64_t next_step,
                            const fs::path& ckpt, bool log) {
  if (state.contains("global_step")) {
    const Json& g = state["global_step"];
    if (!g.is_number_integer() || g.get<int64_t>() != next_step)
      fail(
          "{}: 'global_step' is {}, but the saved data order ('plan' next_step) is at step {}; the "
          "file was edited or is not a zerotune checkpoint's (zerotune resumes at the step both "
          "name)",
          state_file, g.dump(), next_step);
  }
  const fs::path dir = ckpt.filename().empty() ? ckpt.parent_path() : ckpt;
  if (const auto n = parse_checkpoint_name(dir.filename().string()); n && *n != next_step && log)
    log::warn(
        "resume_from_checkpoint: {} holds step {} ({} global_step), not step {} as its name says "
        "(renamed?); resuming at step {}, as transformers does",
        ckpt.string(), next_step, state_file, *n, next_step);
  return next_step;
}

void check_checkpoint_model(const fs::path& ckpt, const ModelConfig& model) {
  const fs::path file = ckpt / "config.json";
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return;
  std::vector<ParamSpec> theirs;
  try {
    theirs = ParamLayout(load_model_config(ckpt)).params();
  } catch (const Error&) {
    return;  // the ZeRO state's layout hash still decides
  }
  const ParamLayout layout(model);
  std::map<std::string, std::vector<int64_t>> there;
  for (const ParamSpec& p : theirs) there.emplace(p.name, p.shape);
  std::string diff;
  for (const ParamSpec& p : layout.params()) {
    const auto it = there.find(p.name);
    if (it == there.end()) {
      diff = fmt::format("the run's model has a parameter '{}' {}, which the checkpoint lacks",
                         p.name, shape_to_string(p.shape));
      break;
    }
    if (it->second != p.shape) {
      diff = fmt::format("parameter '{}' has shape {} in the checkpoint and {} in the run's model",
                         p.name, shape_to_string(it->second), shape_to_string(p.shape));
      break;
    }
    there.erase(it);
  }
  if (diff.empty() && !there.empty())
    diff = fmt::format("the checkpoint has a parameter '{}' {}, which the run's model lacks",
                       there.begin()->first, shape_to_string(there.begin()->second));
  if (diff.empty()) return;
  fail(
      "resume_from_checkpoint: {} is a checkpoint of another model: {} ({} against {}); resume "
      "with the model.name_or_path it was trained from, or start a new run from its weights with "
      "model.name_or_path={}",
      ckpt.string(), diff, file.string(),
      model.source.empty() ? "model.name_or_path" : model.source, ckpt.string());
}

}  // namespace zt::train
