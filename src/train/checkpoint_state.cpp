#include "train/checkpoint_state.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/error.h"
#include "core/file_util.h"
#include "io/json_check.h"
#include "train/metrics.h"

namespace zt::train {

namespace fs = std::filesystem;

fs::path zerotune_state_path(const fs::path& ckpt) {
  std::error_code ec;
  const fs::path own = ckpt / kZerotuneStateName;
  if (fs::exists(fs::symlink_status(own, ec))) return own;
  return ckpt / kTrainerStateName;
}

std::string hf_trainer_state_text(const HfTrainerState& s) {
  // nlohmann::json (std::map objects) orders keys as Python's sort_keys does: UTF-8 byte order
  // is code-point order.
  using Sorted = nlohmann::json;
  const auto opt = [](const auto& v) { return v ? Sorted(*v) : Sorted(); };
  Sorted control = {{"args",
                     {{"should_epoch_stop", false},
                      {"should_evaluate", false},
                      {"should_log", false},
                      {"should_save", s.should_save},
                      {"should_training_stop", s.should_training_stop}}},
                    {"attributes", Sorted::object()}};
  Sorted st = {
      {"best_global_step", opt(s.best_global_step)},
      {"best_metric", opt(s.best_metric)},
      {"best_model_checkpoint", opt(s.best_model_checkpoint)},
      {"epoch", s.epoch},
      {"eval_steps", s.eval_steps},
      {"global_step", s.global_step},
      {"is_hyper_param_search", false},
      {"is_local_process_zero", true},
      {"is_world_process_zero", true},
      // The records keep their values' types (an integer step, floats) through the text.
      {"log_history", Sorted::parse(s.log_history.dump())},
      {"logging_steps", s.logging_steps},
      {"max_steps", s.max_steps},
      {"num_input_tokens_seen", s.num_input_tokens_seen},
      {"num_train_epochs", s.num_train_epochs},
      {"save_steps", s.save_steps},
      {"stateful_callbacks", {{"TrainerControl", std::move(control)}}},
      {"total_flos", s.total_flos},
      {"train_batch_size", s.train_batch_size},
      {"trial_name", nullptr},
      {"trial_params", nullptr},
  };
  return st.dump(2, ' ', /*ensure_ascii=*/true) + "\n";
}

Json hf_log_record(const Json& record) {
  if (!record.is_object())
    fail("log_history record: expected a JSON object, got {}", record.dump());
  Json out = record;
  if (out.contains("loss") && out["loss"].is_number())
    out["loss"] = python_round(out["loss"].get<double>(), 4);
  return out;
}

std::optional<std::string> hf_best_model_checkpoint(const fs::path& checkpoint) {
  if (checkpoint.empty()) return std::nullopt;
  return checkpoint.string();
}

int64_t non_embedding_parameters(const ParamLayout& layout) {
  int64_t n = 0;
  for (int i = 0; i < layout.num_params(); ++i) {
    if (i == layout.embed()) continue;
    const ParamSpec& p = layout.param(i);
    if (layout.tied() && p.name == "lm_head.weight") continue;
    n += p.numel;
  }
  return n;
}

double hf_total_flos(int64_t tokens, int64_t non_embedding_params) {
  return 6.0 * static_cast<double>(tokens) * static_cast<double>(non_embedding_params);
}

int64_t hf_steps_period(double steps) {
  // steps = m / 2^e with m odd: the multiple k · steps is whole exactly where 2^e divides k, so the
  // first whole one is at k = 2^e, the global step m. Each doubling is exact.
  while (steps != std::floor(steps)) steps *= 2;
  return static_cast<int64_t>(steps);
}

Json hf_state_steps(const Json& given, bool steps_strategy, int64_t max_steps) {
  if (given.is_null()) return 500;  // compute_steps leaves None: the dataclass default
  Json v = given;
  // __post_init__: `if strategy == STEPS and steps > 1: steps = int(steps)`.
  if (steps_strategy && v.get<double>() > 1 && v.is_number_float())
    v = static_cast<int64_t>(v.get<double>());
  // compute_steps: `if num_steps < 1: num_steps = math.ceil(max_steps * num_steps)`.
  if (v.get<double>() < 1)
    return static_cast<int64_t>(std::ceil(static_cast<double>(max_steps) * v.get<double>()));
  return v;
}

void set_hf_state_steps(TrainArgs* a, int64_t max_steps) {
  // Arguments not read from a config (no given value) give their counts.
  const auto given = [](const Json& g, int64_t count) {
    return g.is_null() && count > 0 ? Json(count) : g;
  };
  const Json logging = given(a->logging_steps_given, a->logging_steps);
  const Json eval = given(a->eval_steps_given, a->eval_steps);
  const bool eval_by_steps = a->eval_strategy == IntervalStrategy::kSteps;
  // __post_init__: an eval_steps None or 0 under eval_strategy steps becomes logging_steps.
  const bool eval_copies = eval_by_steps && (eval.is_null() || eval.get<double>() == 0);
  a->state_logging_steps =
      hf_state_steps(logging, a->logging_strategy == IntervalStrategy::kSteps, max_steps);
  a->state_eval_steps = hf_state_steps(eval_copies ? logging : eval, eval_by_steps, max_steps);
  a->state_save_steps = hf_state_steps(given(a->save_steps_given, a->save_steps),
                                       a->save_strategy == SaveStrategy::kSteps, max_steps);
}

HfTrainerStateRead read_hf_trainer_state(const fs::path& file) {
  Json st;
  try {
    st = parse_json(read_file(file), file.string());
  } catch (const Json::exception& e) {
    fail("{}: not valid JSON: {}", file.string(), json_error_reason(e));
  }
  if (!st.is_object()) fail("{}: expected a JSON object, got {}", file.string(), st.type_name());
  if (!st.contains("global_step") || !st["global_step"].is_number_integer() ||
      st["global_step"].get<int64_t>() < 0)
    fail("{}: 'global_step' must be a non-negative integer, got {}", file.string(),
         st.contains("global_step") ? st["global_step"].dump() : std::string("nothing"));
  if (!st.contains("log_history") || !st["log_history"].is_array())
    fail("{}: no \"log_history\" list (a transformers trainer_state.json has one)", file.string());
  size_t i = 0;
  for (const Json& e : st["log_history"]) {
    if (!e.is_object() || !e.contains("step") || !e["step"].is_number_integer())
      fail("{}: log_history[{}]: expected an object with an integer \"step\", got {}",
           file.string(), i, e.dump().substr(0, 200));
    ++i;
  }
  HfTrainerStateRead r{st["global_step"].get<int64_t>(), std::move(st["log_history"])};
  // transformers divides the global step by logging_steps / eval_steps where their strategy is
  // steps (a 0 raises ZeroDivisionError there: resume_interval_steps) and tests `save_steps > 0`
  // first; elsewhere a 0 (eval_steps: 0 under eval_strategy epoch) is never read.
  for (auto [key, field, value] :
       {std::tuple{"logging_steps", &r.logging_steps, &r.logging_steps_value},
        std::tuple{"eval_steps", &r.eval_steps, &r.eval_steps_value},
        std::tuple{"save_steps", &r.save_steps, &r.save_steps_value}}) {
    if (!st.contains(key)) continue;
    const Json& v = st[key];
    const bool ok = v.is_number_integer()
                        ? v.get<int64_t>() >= 0
                        : v.is_number_float() && v.get<double>() >= 0 && v.get<double>() < 0x1p63;
    if (!ok)
      fail("{}: '{}' must be a number of optimizer steps >= 0 (below 2^63), got {}", file.string(),
           key, v.dump());
    *field = v.is_number_integer() ? v.get<int64_t>() : hf_steps_period(v.get<double>());
    *value = v;
  }
  return r;
}

}  // namespace zt::train
