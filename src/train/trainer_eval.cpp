// Trainer evaluation: the eval loss over the eval set, and the best model (metric_for_best_model,
// load_best_model_at_end) as transformers' Trainer tracks it across checkpoints and resumes.
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/log.h"
#include "train/batch_builder.h"
#include "train/checkpoint_dirs.h"
#include "train/metrics.h"
#include "train/progress.h"
#include "train/run_checkpoints.h"
#include "train/step_plan.h"
#include "train/trainer_impl.h"
#include "zero/zero_engine.h"

namespace zt::train {

// ---------------------------------------------------------------- eval

// Empty when a stop signal came during the evaluation: it is abandoned (no eval record) at the next
// eval batch, every rank agreeing, so the interrupt checkpoint of the step is written without it.
std::optional<MetricRecord> Trainer::State::evaluate(int64_t global_step, double epoch) {
  const double start = now_seconds();  // transformers' evaluate(): start_time before the loop
  const int64_t n = eval->num_examples();
  const int64_t W = comm.world_size(), B = a.per_device_eval_batch_size;
  std::vector<double> loss(static_cast<size_t>(n), 0.0), cnt(loss.size(), 0.0),
      hit(loss.size(), 0.0), ent(loss.size(), 0.0);
  // Batch-wise sharding, as accelerate does (eval_micro_batches): the ranks go through their
  // batches in rounds — round j is each rank's j-th batch — and check the stop flag together
  // before each round. A forward may contain collectives (ZeRO-3 gathers each group it uses), so
  // in each round every rank runs as many forwards as rank 0 (whose batch is the round's fullest),
  // the others ending with repeats of example 0 whose results are dropped.
  const auto mine = eval_micro_batches(n, B, W, comm.rank());
  const auto firsts = eval_micro_batches(n, B, W, 0);
  for (size_t j = 0; j < firsts.size(); ++j) {
    if (any_rank_stopping(comm)) {
      if (rank0())
        progress->message(
            fmt::format("interrupted during the evaluation at step {} after {} of {} "
                        "examples; the evaluation is not logged",
                        global_step, std::min<int64_t>(n, j * W * B), n));
      return std::nullopt;
    }
    const size_t own = j < mine.size() ? mine[j].size() : 0;
    for (size_t f = 0; f < firsts[j].size(); ++f) {
      const bool padding = f >= own;
      const int64_t i = padding ? 0 : mine[j][f];
      PackedBatch pb;
      append_example(*eval, i, &pb);
      const CeStats st = model->forward(pb.view());
      if (padding) continue;
      loss[i] = st.loss_sum;
      cnt[i] = static_cast<double>(st.count);
      hit[i] = static_cast<double>(st.correct);
      ent[i] = st.entropy_sum;
    }
  }
  // Each example's values come from exactly one rank; the rank-order sum adds zeros elsewhere, so
  // every rank gets the owner's exact bits, then sums examples in index order: eval_loss does not
  // depend on the eval batch size or the world size.
  comm.all_reduce(loss.data(), loss.size(), dist::ReduceOp::kSum);
  comm.all_reduce(cnt.data(), cnt.size(), dist::ReduceOp::kSum);
  comm.all_reduce(hit.data(), hit.size(), dist::ReduceOp::kSum);
  comm.all_reduce(ent.data(), ent.size(), dist::ReduceOp::kSum);
  EvalAccumulator acc;
  for (int64_t i = 0; i < n; ++i)
    acc.add(loss[i], static_cast<int64_t>(cnt[i]), static_cast<int64_t>(hit[i]), ent[i]);
  EvalRunInfo run;
  run.runtime_seconds = now_seconds() - start;
  // transformers' num_samples: len(eval_dataset), TRL's rows or packed bins, the rows zerotune
  // drops (and bins of them alone) included.
  run.num_samples = eval_trl_samples;
  run.num_steps = (run.num_samples + W * B - 1) / (W * B);  // ceil(num_samples / total_batch_size)
  run.num_tokens = num_tokens_seen;
  return acc.take(global_step, epoch, run);
}

bool Trainer::State::note_best(const MetricRecord& rec, int64_t global_step) {
  if (a.metric_for_best_model.empty()) return false;
  const double v = rec.number(a.metric_for_best_model);
  const double best =
      best_metric.value_or(a.greater_is_better ? -std::numeric_limits<double>::infinity()
                                               : std::numeric_limits<double>::infinity());
  if (!(a.greater_is_better ? v > best : v < best)) return false;
  best_metric = v;
  best_global_step = global_step;
  return true;
}

void Trainer::State::best_to_json(Json& st) const {
  st["best_metric"] = best_metric ? Json(*best_metric) : Json();
  st["best_global_step"] = best_global_step > 0 ? Json(best_global_step) : Json();
  const std::optional<std::string> best_path = hf_best_model_checkpoint(best_checkpoint);
  st["best_model_checkpoint"] = best_path ? Json(*best_path) : Json();
  // zerotune's: what best_metric measures, so that a resume with another metric starts afresh.
  st["metric_for_best_model"] =
      a.metric_for_best_model.empty() ? Json() : Json(a.metric_for_best_model);
  st["greater_is_better"] = a.greater_is_better;
}

void Trainer::State::best_from_json(const Json& st, const fs::path& state_file) {
  const auto bad = [&](const char* key, const char* want) {
    fail("{}: '{}' must be {}, got {}", state_file.string(), key, want, st[key].dump());
  };
  const auto given = [&](const char* key) { return st.contains(key) && !st[key].is_null(); };
  if (given("best_metric")) {
    if (!st["best_metric"].is_number()) bad("best_metric", "a number or null");
    best_metric = st["best_metric"].get<double>();
  }
  if (given("best_global_step")) {
    if (!st["best_global_step"].is_number_integer() || st["best_global_step"].get<int64_t>() < 1 ||
        st["best_global_step"].get<int64_t>() > start_step)
      bad("best_global_step",
          fmt::format("an integer in [1, {}] (the checkpoint's step) or null", start_step).c_str());
    if (!best_metric) bad("best_metric", "a number when best_global_step is set");
    best_global_step = st["best_global_step"].get<int64_t>();
  }
  if (given("best_model_checkpoint") && !st["best_model_checkpoint"].is_string())
    bad("best_model_checkpoint", "a path or null");
  if (given("eval_pending") && !st["eval_pending"].is_boolean())
    bad("eval_pending", "true or false");
  eval_pending = given("eval_pending") && st["eval_pending"].get<bool>();
  // The best so far was measured with another metric or direction: start afresh.
  if (given("metric_for_best_model") &&
      (st["metric_for_best_model"] != Json(a.metric_for_best_model) ||
       (given("greater_is_better") && st["greater_is_better"] != Json(a.greater_is_better)))) {
    if (rank0() && best_metric)
      log::warn(
          "{}: the best model so far was measured by {} (greater_is_better {}); this run "
          "compares {}: its best model starts afresh",
          state_file.string(), st["metric_for_best_model"].dump(),
          given("greater_is_better") ? st["greater_is_better"].dump() : "?",
          a.metric_for_best_model.empty() ? "nothing" : a.metric_for_best_model);
    best_metric.reset();
    best_global_step = 0;
    return;
  }
  if (best_global_step == 0) return;
  // This run's checkpoint of the best step (transformers joins run_dir and the step at each save):
  // exp_dir may have moved since the path was recorded, and a relative recorded path (as
  // transformers writes it for a relative output_dir) means the training run's working directory,
  // which need not be this one's — so the recorded path is only quoted, never resolved.
  const fs::path mine = a.exp_dir / checkpoint_name(best_global_step);
  std::error_code ec;
  if (fs::is_directory(mine, ec)) {
    best_checkpoint = mine;
  } else if (rank0() && given("best_model_checkpoint")) {  // transformers 5: warned and ignored
    log::warn(
        "{}: the best checkpoint {} recorded in the resumed state does not exist anymore (nor "
        "{}); ignoring it for this run",
        state_file.string(), st["best_model_checkpoint"].get<std::string>(), mine.string());
  }
}

void Trainer::State::finish_best() {
  if (a.load_best_model_at_end) {
    std::error_code ec;
    if (best_checkpoint.empty()) {
      if (rank0())
        log::warn("load_best_model_at_end: {}; the final model is the last step's",
                  !best_metric ? "no evaluation ran, so there is no best model"
                               : fmt::format("the best evaluation (step {}) has no checkpoint",
                                             best_global_step));
    } else if (!fs::is_regular_file(zero::ZeroEngine::state_path(best_checkpoint, 0), ec)) {
      // transformers: "Could not locate the best model at …", and the last model stays.
      if (rank0())
        log::warn(
            "load_best_model_at_end: could not locate the best model at {} (removed during the "
            "run?); the final model is the last step's",
            best_checkpoint.string());
    } else {
      if (rank0())
        log::info("loading the best model from {} ({} {})", best_checkpoint.string(),
                  a.metric_for_best_model, best_metric.value_or(NAN));
      engine->load_state(best_checkpoint);
      best_loaded = true;
    }
  }
  if (!rank0() || a.save_total_limit != 1 || best_checkpoint.empty()) return;
  // transformers: with save_total_limit 1 only the best checkpoint stays after training (the
  // rotation with the best as the one protected checkpoint).
  for (const auto& p : rotate_run_checkpoints(a.exp_dir, 1, run_id, best_checkpoint))
    log::info("deleted {} (save_total_limit 1 keeps the best checkpoint)", p.string());
}

}  // namespace zt::train
