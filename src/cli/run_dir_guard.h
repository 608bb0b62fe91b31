// zerotune never silently overwrites an earlier run's outputs (the users' sft.py suffixes its
// exp_dir with a timestamp for the same reason). zerotune's choice: a run refuses to start when
// its exp_dir already holds another run's args.yaml or metrics.jsonl, or its output_dir already
// holds a model, unless it resumes (trainer.resume_from_checkpoint) or replaces the earlier run
// (trainer.overwrite_output_dir: true, transformers 4.x's name for exactly this). Checkpoint
// directories of other runs are the trainer's business (reported at start; train/checkpoint_dirs).
#pragma once

#include <filesystem>
#include <string>

namespace zt::cli {

// Throws zt::Error naming exp_dir / output_dir, what they hold and the three ways out, unless
// `resuming` or `overwrite`. Touches nothing.
void check_run_dir_is_free(const std::filesystem::path& exp_dir, const std::filesystem::path& output_dir,
                           bool resuming, bool overwrite);

}  // namespace zt::cli
