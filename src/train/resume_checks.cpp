#include "train/resume_checks.h"

#include <map>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/log.h"
#include "core/tensor.h"
#include "io/hydra_yaml.h"
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

Json lr_schedule_to_json(const optim::LrSchedule& s, const Json& kwargs) {
  return {{"learning_rate", s.base_lr},
          {"lr_scheduler_type", optim::lr_schedule_name(s.kind)},
          {"warmup_steps", s.warmup_steps},
          {"lr_scheduler_kwargs", kwargs.is_null() ? Json::object() : kwargs}};
}

optim::LrSchedule resumed_lr_schedule(const Json& state, const std::string& state_file,
                                      const optim::LrSchedule& now, const TrainArgs& a,
                                      int64_t start_step, const fs::path& ckpt, bool log) {
  if (!state.contains("lr_schedule") || state["lr_schedule"].is_null()) return now;
  const Json& ls = state["lr_schedule"];
  const auto bad = [&](const char* key, const std::string& want, const Json* got) {
    fail("{}: '{}' must be {}, got {}", state_file, key, want,
         got != nullptr ? got->dump() : std::string("nothing"));
  };
  if (!ls.is_object())
    bad("lr_schedule", "an object (learning_rate, lr_scheduler_type, warmup_steps) or null", &ls);
  const auto field = [&](const char* key) { return ls.contains(key) ? &ls[key] : nullptr; };
  const Json *lr = field("learning_rate"), *kind = field("lr_scheduler_type"),
             *warm = field("warmup_steps");
  if (lr == nullptr || !lr->is_number() || !(lr->get<double>() >= 0.0))
    bad("lr_schedule.learning_rate", "a number >= 0", lr);
  const auto k = kind != nullptr && kind->is_string()
                     ? enum_from_name<optim::LrScheduleKind>(kind->get<std::string>())
                     : std::nullopt;
  if (!k) {
    std::string names;
    for (auto n : enum_name_list<optim::LrScheduleKind>())
      names += (names.empty() ? "" : ", ") + std::string(n);
    bad("lr_schedule.lr_scheduler_type", "one of " + names, kind);
  }
  if (warm == nullptr || !warm->is_number_integer() || warm->get<int64_t>() < 0)
    bad("lr_schedule.warmup_steps", "an integer >= 0", warm);
  optim::LrSchedule used = now;
  used.base_lr = lr->get<double>();
  if (!log) return used;
  // "<file:line>: <key>: " as the config errors begin, and their "(given on the command line)".
  const auto at = [&](std::string_view key) {
    const TrainArgs::KeyOrigin o = a.key_origin(key);
    return std::pair(fmt::format("{}{}", o.at.empty() ? "" : o.at + ": ", key), o.where);
  };
  const std::string from = fmt::format("from step {} on", start_step + 1);
  // transformers' Trainer also keeps the shape its arguments give, but its first resumed step
  // still applies the learning rate the saved optimizer state holds (the old schedule's value).
  const char* kShape =
      "as transformers' Trainer does (the LR scheduler it restores keeps the shape this run's "
      "arguments give; there the first resumed step still uses the old schedule's value)";
  if (used.base_lr != now.base_lr) {
    const auto [key, where] = at("trainer.learning_rate");
    log::warn(
        "{}: {} differs from the {} that {} records; the checkpoint's {} is used, as "
        "transformers' Trainer does (resuming restores its LR scheduler, base learning rate "
        "included). To train on with {}, start a new run from the checkpoint's weights "
        "(model.name_or_path={}){}",
        key, now.base_lr, used.base_lr, state_file, used.base_lr, now.base_lr, ckpt.string(),
        where);
  }
  if (*k != now.kind) {
    const auto [key, where] = at("trainer.lr_scheduler_type");
    log::info("{}: {} differs from the {} that {} records; the schedule is {} {}, {}{}", key,
              optim::lr_schedule_name(now.kind), optim::lr_schedule_name(*k), state_file,
              optim::lr_schedule_name(now.kind), from, kShape, where);
  }
  // Compared as JSON (1 and 1.0 are equal, as they give the same schedule); a checkpoint from
  // before the kwargs were recorded says nothing about them.
  if (const Json* kw = field("lr_scheduler_kwargs");
      kw != nullptr && !optim::lr_schedule_ignores_kwargs(now.kind)) {
    const Json asked = a.lr_scheduler_kwargs.is_null() ? Json::object() : a.lr_scheduler_kwargs;
    if (*kw != asked) {
      const auto [key, where] = at("trainer.lr_scheduler_kwargs");
      log::info("{}: {} differs from the {} that {} records; the schedule is {} with {} {}, {}{}",
                key, asked.dump(), kw->dump(), state_file, optim::lr_schedule_name(now.kind),
                asked.dump(), from, kShape, where);
    }
  }
  if (warm->get<int64_t>() != now.warmup_steps) {
    // The key that decided the warm-up (optim::resolve_warmup_steps): warmup_steps unless it is 0.
    const bool ratio = a.warmup_steps == 0.0 && a.warmup_ratio > 0.0;
    const auto [key, where] = at(ratio ? "trainer.warmup_ratio" : "trainer.warmup_steps");
    log::info("{}: {} gives {} warm-up step(s), and {} records {}; the schedule uses {} {}, {}{}",
              key, ratio ? a.warmup_ratio : a.warmup_steps, now.warmup_steps, state_file,
              warm->get<int64_t>(), now.warmup_steps, from, kShape, where);
  }
  return used;
}

void resume_interval_steps(const HfTrainerStateRead& saved, const std::string& hf_file,
                           int64_t total_steps, TrainArgs* a, bool log) {
  struct Steps {
    const char* key;    // under trainer.
    const char* verb;   // what the run does every that many steps
    int64_t now, then;  // this config's count (resolved), the checkpoint's (hf_steps_period)
    const Json& written;  // the checkpoint's value as the file writes it (2.5 for a count of 5)
    double ratio;         // the config's ratio, or 0
    bool unset;         // eval_steps null: logging_steps' count
    bool acts;          // its strategy is steps
  };
  const Steps all[] = {
      {"logging_steps", "logs", a->logging_steps, saved.logging_steps, saved.logging_steps_value,
       a->logging_steps_ratio, false, a->logging_strategy == IntervalStrategy::kSteps},
      {"eval_steps", "evaluates", a->state_eval_steps.get<int64_t>(), saved.eval_steps,
       saved.eval_steps_value, a->eval_steps_ratio,
       a->eval_steps == 0 && a->eval_steps_ratio == 0.0,
       a->eval_strategy == IntervalStrategy::kSteps},
      {"save_steps", "saves", a->save_steps, saved.save_steps, saved.save_steps_value,
       a->save_steps_ratio, false, a->save_strategy == SaveStrategy::kSteps}};
  // DefaultFlowCallback's `state.global_step % state.logging_steps` (eval_steps alike) under
  // strategy steps: a 0 there raises ZeroDivisionError at the first step.
  for (const Steps& s : all) {
    const std::string_view key = s.key;
    if (!s.acts || s.then != 0 || key == "save_steps") continue;
    const std::string strategy = fmt::format("trainer.{}_strategy", key.substr(0, key.find('_')));
    fail(
        "{}: '{}' is 0, and this run's {} is steps: transformers' resumed Trainer would divide "
        "the step by it (ZeroDivisionError); resume with the {} the checkpoint was saved under, "
        "or start a new run",
        hf_file, key, strategy, strategy);
  }
  a->logging_steps = saved.logging_steps;
  a->eval_steps = saved.eval_steps;
  a->save_steps = saved.save_steps;
  a->state_logging_steps = saved.logging_steps_value;
  a->state_eval_steps = saved.eval_steps_value;
  a->state_save_steps = saved.save_steps_value;
  if (!log) return;
  for (const Steps& s : all) {
    if (s.now == s.then || !s.acts) continue;
    const std::string key = std::string("trainer.") + s.key;
    const TrainArgs::KeyOrigin o = a->key_origin(key);
    const std::string given = s.ratio > 0.0 ? fmt::format("{} gives {} of this run's {} steps",
                                                          s.ratio, s.now, total_steps)
                              : s.unset     ? fmt::format("null (logging_steps) gives {}", s.now)
                                            : fmt::format("{}", s.now);
    const std::string does = s.then > 0 ? fmt::format("{} every {} step(s)", s.verb, s.then)
                                        : std::string("saves at the last step only");
    log::info(
        "{}{}: {}, and {} records {}; the resumed run {}, as transformers' Trainer does (it "
        "loads the checkpoint's TrainerState, whose logging_steps, eval_steps and save_steps "
        "replace the ones this run's arguments give){}",
        o.at.empty() ? "" : o.at + ": ", key, given, hf_file, s.written.dump(), does, o.where);
  }
}

Json adamw_to_json(const optim::AdamWParams& p) {
  return {{"adam_beta1", p.beta1},
          {"adam_beta2", p.beta2},
          {"adam_epsilon", p.eps},
          {"weight_decay", p.weight_decay}};
}

optim::AdamWParams resumed_adamw(const Json& state, const std::string& state_file,
                                 const optim::AdamWParams& now, const TrainArgs& a,
                                 const fs::path& ckpt, bool log) {
  if (!state.contains("optimizer") || state["optimizer"].is_null()) return now;
  const Json& o = state["optimizer"];
  if (!o.is_object())
    fail(
        "{}: 'optimizer' must be an object (adam_beta1, adam_beta2, adam_epsilon, weight_decay) "
        "or null, got {}",
        state_file, o.dump());
  optim::AdamWParams used = now;
  struct Field {
    const char* key;
    double optim::AdamWParams::*value;
    bool below_one;  // a beta: [0, 1); else >= 0
  };
  for (const Field f : {Field{"adam_beta1", &optim::AdamWParams::beta1, true},
                        Field{"adam_beta2", &optim::AdamWParams::beta2, true},
                        Field{"adam_epsilon", &optim::AdamWParams::eps, false},
                        Field{"weight_decay", &optim::AdamWParams::weight_decay, false}}) {
    const Json* v = o.contains(f.key) ? &o[f.key] : nullptr;
    const double d = v != nullptr && v->is_number() ? v->get<double>() : -1.0;
    if (!(d >= 0.0) || (f.below_one && !(d < 1.0)))
      fail("{}: 'optimizer.{}' must be a number {}, got {}", state_file, f.key,
           f.below_one ? "in [0, 1)" : ">= 0", v != nullptr ? v->dump() : std::string("nothing"));
    used.*f.value = d;
    if (!log || d == now.*f.value) continue;
    const std::string key = std::string("trainer.") + f.key;
    const TrainArgs::KeyOrigin origin = a.key_origin(key);
    log::warn(
        "{}{}: {} differs from the {} that {} records; the checkpoint's {} is used, as "
        "transformers' Trainer does (resuming loads the optimizer's state, whose param groups keep "
        "their betas, eps and weight_decay). To train on with {}, start a new run from the "
        "checkpoint's weights (model.name_or_path={}){}",
        origin.at.empty() ? "" : origin.at + ": ", key, now.*f.value, d, state_file, d,
        now.*f.value, ckpt.string(), origin.where);
  }
  return used;
}

std::optional<Json> adamw_from_args_yaml(const fs::path& ckpt) {
  const fs::path file = ckpt / "args.yaml";
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  Json args;
  try {
    args = load_yaml_file(file);
  } catch (const Error&) {
    return std::nullopt;  // not the file zerotune wrote: the run's own values, as without one
  }
  Json o = Json::object();
  for (const char* key : {"adam_beta1", "adam_beta2", "adam_epsilon", "weight_decay"}) {
    const Json* v = find_key_path(args, std::string("trainer.") + key);
    if (v == nullptr || !v->is_number()) return std::nullopt;
    o[key] = *v;
  }
  return o;
}

std::optional<std::string> pipeline_change_warning(const Json& state, const std::string& state_file,
                                                   std::string_view now) {
  const Json* v = state.contains("data_pipeline") ? &state["data_pipeline"] : nullptr;
  if (v != nullptr && !v->is_string())
    fail("{}: 'data_pipeline' must be a string (the token pipeline version), got {}", state_file,
         v->dump());
  if (v != nullptr && v->get<std::string>() == now) return std::nullopt;
  const std::string then =
      v != nullptr ? fmt::format("records the token pipeline '{}'", v->get<std::string>())
                   : "records no token pipeline version (written before zerotune recorded it)";
  return fmt::format(
      "resume_from_checkpoint: {} {}, and this zerotune tokenises with '{}': the resumed steps see "
      "samples tokenised under the new rule, so their tokens (where the EOS goes, for one) may not "
      "be what the checkpoint's run would have trained on, and where the rule keeps or drops other "
      "rows (a file with 'input_ids' beside text columns trains the ids since pipeline 6) or packs "
      "them (bins by TRL's map batches of rows since pipeline 8; rows skipped for an empty "
      "completion or text hold their place in TRL's bins since pipeline 9; a CSV file's rows as "
      "datasets 4.8.5 and pandas read them since pipeline 10) the samples each step "
      "takes may differ too. Resume with the zerotune that wrote the checkpoint to keep its tokens",
      state_file, then, now);
}

}  // namespace zt::train
