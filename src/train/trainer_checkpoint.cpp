// Trainer checkpoints and the final model: checkpoint-<step>/ in exp_dir (an HF model directory,
// the ZeRO state, transformers' trainer_state.json and zerotune_state.json) and the export to
// output_dir.
#include <algorithm>
#include <exception>

#include "core/error.h"
#include "core/file_util.h"
#include "core/log.h"
#include "data/prepare.h"
#include "dist/local_launch.h"
#include "io/hf_export.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "io/yaml_writer.h"
#include "train/checkpoint_dirs.h"
#include "train/checkpoint_state.h"
#include "train/progress.h"
#include "train/resume_checks.h"
#include "train/run_checkpoints.h"
#include "train/step_plan.h"
#include "train/trainer_impl.h"
#include "zero/zero_engine.h"

namespace zt::train {

namespace {

// The directory that holds `output_dir` ("out/" and "out" alike; "." for a bare name), absolute.
fs::path output_dir_parent(const fs::path& output_dir) {
  std::error_code ec;
  fs::path p = fs::absolute(output_dir, ec).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  return p.parent_path();
}

}  // namespace

// ---------------------------------------------------------------- checkpoints / export

std::vector<NamedTensor> Trainer::State::named(const std::vector<float>& flat) const {
  std::vector<NamedTensor> out;
  const ParamLayout& L = model->layout();
  for (const auto& p : L.params()) {
    if (L.tied() && p.name == "lm_head.weight") continue;
    NamedTensor t;
    t.name = p.name;
    t.dtype = DType::kF32;
    t.shape = p.shape;
    t.data = flat.data() + p.offset;
    out.push_back(std::move(t));
  }
  return out;
}

HfTrainerState Trainer::State::hf_state(int64_t global_step) const {
  HfTrainerState h;
  const int64_t T = plan->total_steps();
  h.global_step = global_step;
  h.epoch = global_step > 0 ? plan->info(std::min(global_step, T) - 1).epoch_progress : 0.0;
  h.max_steps = T;
  h.num_train_epochs = plan->num_epochs();
  // TrainerState.compute_steps: TrainingArguments' values (a resumed run's: its checkpoint's,
  // resume_interval_steps).
  h.logging_steps = a.state_logging_steps;
  h.eval_steps = a.state_eval_steps;
  h.save_steps = a.state_save_steps;
  h.train_batch_size = a.per_device_train_batch_size;
  // zerotune counts the input tokens always (TRL's num_tokens); transformers only with
  // include_num_input_tokens_seen, and writes 0 otherwise.
  h.num_input_tokens_seen = num_tokens_seen;
  h.total_flos = hf_total_flos(num_tokens_seen, non_embedding_parameters(model->layout()));
  for (const Json& rec : log_history)
    if (rec["step"].get<int64_t>() <= global_step) h.log_history.push_back(hf_log_record(rec));
  if (best_metric) h.best_metric = *best_metric;
  if (best_global_step > 0) h.best_global_step = best_global_step;
  h.best_model_checkpoint = hf_best_model_checkpoint(best_checkpoint);
  h.should_training_stop = global_step >= T;
  return h;
}

fs::path Trainer::State::save_checkpoint(int64_t global_step, bool interrupt) {
  std::optional<CheckpointStaging> staging;
  if (rank0()) staging.emplace(a.exp_dir, global_step, owner_pid);
  fs::path dir = staging_path(a.exp_dir, global_step, owner_pid);
  std::vector<float> master = engine->full_master_weights();  // collective; rank 0 gets them
  if (rank0()) {
    auto tensors = named(master);
    export_hf_model(dir, mcfg, tensors, export_opts);
  }
  comm.barrier();
  engine->save_state(dir);
  // transformers' _save_checkpoint: the best step's checkpoint, once it exists. Only step N writes
  // checkpoint-N, so that is when the best step's is saved (every rank decides alike).
  if (best_global_step == global_step) best_checkpoint = a.exp_dir / checkpoint_name(global_step);
  last_saved_step = global_step;
  if (rank0()) {
    Json st = {{"global_step", global_step},
               {"applied_steps", applied_steps},
               {"num_tokens_seen", num_tokens_seen},
               {"train_loss_sum", train_loss_sum},
               {"world_size", comm.world_size()},
               {"zero_stage", a.zero_stage},
               {"run_id", run_id},
               {"plan", plan_state_to_json(*plan, global_step)},
               {"lr_schedule", lr_schedule_to_json(sched, a.lr_scheduler_kwargs)},
               {"optimizer", adamw_to_json(adam)},
               {"data_pipeline", std::string(data::kPipelineVersion)}};
    best_to_json(st);
    st["eval_pending"] = eval_abandoned_step == global_step;
    write_file_atomic(dir / kZerotuneStateName, st.dump(2) + "\n");
    write_file_atomic(dir / kTrainerStateName, hf_trainer_state_text(hf_state(global_step)));
    write_file_atomic(dir / "args.yaml", json_to_yaml(a.resolved_config));
  }
  comm.barrier();
  fs::path final_path = staging_path(a.exp_dir, global_step, owner_pid);
  if (rank0()) {
    final_path = staging->commit();
    for (const auto& p :
         rotate_run_checkpoints(a.exp_dir, a.save_total_limit, run_id, final_path, best_checkpoint))
      log::info("deleted {}", p.string());
    progress->message(fmt::format("saved {}", final_path.string()));
    dist::note_checkpoint_for_launcher(a.exp_dir.string(), final_path.string(), interrupt);
  }
  comm.barrier();
  return a.exp_dir / checkpoint_name(global_step);
}

MetricRecord Trainer::State::train_summary(double runtime_seconds) const {
  const PlanConfig& pc = plan->config();
  const int64_t T = plan->total_steps();
  // set_initial_training_values' num_train_samples: max_steps × the global batch when max_steps
  // is set, else len(train_dataset) (TRL's rows or packed bins, the rows zerotune drops
  // included) × num_train_epochs; the steps: max_steps.
  const double global_batch = static_cast<double>(pc.batch_size * pc.grad_accum * pc.world_size);
  const double samples = pc.max_steps > 0
                             ? static_cast<double>(pc.max_steps) * global_batch
                             : static_cast<double>(train_trl_samples) * pc.num_train_epochs;
  MetricRecord r;
  add_speed_metrics(r, "train", runtime_seconds, samples, static_cast<double>(T));
  r.set("total_flos", hf_total_flos(num_tokens_seen, non_embedding_parameters(model->layout())));
  // transformers: _total_loss_scalar / global_step, the logged steps' losses summed (only this
  // process's after a resume). zerotune: the mean of every applied step's loss, the resumed part's
  // included (zerotune_state.json keeps the sum; a checkpoint without it gives transformers'
  // value); a skipped step has no loss and is not counted.
  r.set("train_loss", train_loss_steps > 0 ? train_loss_sum / static_cast<double>(train_loss_steps)
                                           : 0.0);  // transformers: 0.0 / global_step
  r.set("epoch", T > 0 ? plan->info(T - 1).epoch_progress : 0.0);
  r.set("step", T);
  return r;
}

std::string Trainer::State::final_state_text(const MetricRecord& summary) const {
  HfTrainerState h = hf_state(plan->total_steps());
  h.log_history.push_back(summary.to_json());
  h.should_save = last_saved_step > 0;
  h.should_training_stop = last_saved_step >= plan->total_steps();
  return hf_trainer_state_text(h);
}

void Trainer::State::export_final(int64_t global_step, const fs::path& last_checkpoint,
                                  const std::string& final_state) {
  std::string error;  // rank 0's, then every rank's
  {
    std::vector<float> master = engine->full_master_weights();
    if (rank0()) {
      try {
        // Another run with the same output_dir (and another exp_dir, so not locked out) that
        // exported while this one was set up or trained: its model is not replaced.
        // (Model files removed meanwhile leave nothing to protect: the export goes on.) The lock
        // on output_dir's parent makes two exports' check and write take turns, so the later one
        // sees the earlier one's model.
        const fs::path parent = output_dir_parent(a.output_dir);
        std::error_code ec;
        fs::create_directories(parent, ec);  // the export creates it anyway; an error is its
        const DirFlock exporting(parent);
        if (const std::string now = model_files_fingerprint(a.output_dir);
            !now.empty() && now != output_dir_at_start.value_or(""))
          fail(
              "trainer.output_dir {}: its model files changed since this run started (another "
              "run exported there?); zerotune does not replace a model it did not find there at "
              "start-up",
              a.output_dir.string());
        HfExportOptions opts = export_opts;
        if (!final_state.empty()) opts.extra_files.emplace_back(kTrainerStateName, final_state);
        export_hf_model(a.output_dir, mcfg, named(master), opts);
      } catch (const std::exception& e) {  // zt::Error, or one of the library's
        error = e.what();
      }
    }
  }
  uint64_t n = error.size();
  comm.broadcast(&n, sizeof n, 0);
  error.resize(n);
  if (n > 0) comm.broadcast(error.data(), n, 0);
  if (error.empty()) {
    if (rank0())
      progress->message(fmt::format("saved the final model to {}", a.output_dir.string()));
    return;
  }
  if (best_loaded)
    fail(
        "cannot write the final model: {}; the best model (load_best_model_at_end) is in {} (an "
        "HF model directory)",
        error, best_checkpoint.string());
  // Without save_strategy (or between saves) the trained weights exist only in memory: keep them.
  const fs::path last = a.exp_dir / checkpoint_name(global_step);
  if (last_checkpoint == last)
    fail(
        "cannot write the final model: {}; the trained model is in {} (the checkpoint of the "
        "last step: an HF model directory)",
        error, last.string());
  fs::path kept;
  try {
    kept = save_checkpoint(global_step, false);
  } catch (const Error& e) {
    fail("cannot write the final model: {}; keeping it as a checkpoint in exp_dir failed too: {}",
         error, e.what());
  }
  fail(
      "cannot write the final model: {}; the trained model was saved instead as {} (an HF model "
      "directory with the optimizer state: load it with from_pretrained, or resume from it with "
      "trainer.resume_from_checkpoint)",
      error, kept.string());
}

}  // namespace zt::train
