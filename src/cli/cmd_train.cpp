// `zerotune train --config sft.yaml [--config_file accelerate.yaml] [key.path=value …]`: the
// users' SFT job (DESIGN §8). Reads the hydra-style sft.yaml as it is, takes the ZeRO stage /
// offload / mixed precision from the accelerate config (the file given here, or the one `zerotune
// launch --config_file` passed down as ZT_ACCELERATE_CONFIG) and trainer.deepspeed, combined as
// transformers and accelerate combine them (cli/deepspeed_source.h), finds this process's rank from
// the environment (mpirun, torchrun-style variables, or a single process) and runs train::Trainer.
#include <fmt/ranges.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "cli/accelerate_config.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/config_schema.h"
#include "cli/data_setup.h"
#include "cli/deepspeed_source.h"
#include "cli/report_to.h"
#include "cli/run_dir_guard.h"
#include "cli/train_options.h"
#include "core/file_util.h"
#include "core/log.h"
#include "core/spelling.h"
#include "core/stop_signals.h"
#include "dist/bootstrap.h"
#include "io/hf_export.h"
#include "io/model_source.h"
#include "io/safetensors.h"
#include "io/tied_embeddings.h"
#include "io/unique_keys.h"
#include "optim/lr_schedule.h"
#include "train/device.h"
#include "train/metrics.h"
#include "train/trainer.h"

namespace zt::cli {
namespace fs = std::filesystem;

namespace {

// trainer.metric_for_best_model / greater_is_better / load_best_model_at_end / save_strategy: best,
// resolved and checked as transformers' TrainingArguments.__post_init__ and Trainer.__init__ do
// (metric "loss" by default under load_best_model_at_end, greater_is_better from its name, save
// and eval strategies that line up), plus what transformers only finds at the first evaluation or
// never (a metric the evaluation does not log; save_strategy best without evaluations, which would
// save nothing). Throws zt::Error naming the keys.
void resolve_best_model(const RunConfig& cfg, train::TrainArgs& a) {
  using train::IntervalStrategy;
  using train::SaveStrategy;
  const std::string metric_key = "trainer.metric_for_best_model";
  const auto given = cfg.get_optional<std::string>(metric_key);
  if (given && given->empty())
    fail(
        "{}: {} is an empty string; name a metric (loss, mean_token_accuracy, entropy) or leave "
        "it null{}",
        cfg.key_at(metric_key), metric_key, cfg.where(metric_key));
  std::string metric = given.value_or("");
  if (metric.empty() && a.load_best_model_at_end) metric = "loss";
  const bool best_save = a.save_strategy == SaveStrategy::kBest;
  // Messages about several keys begin with the file:line of the first, its where() right after
  // its name (not at the end, where it would read as the last key's), and name each other's
  // (RunConfig::key_ref). A message about one key ends with its where().
  const std::string save_key = "trainer.save_strategy", eval_key = "trainer.eval_strategy",
                    lbm_key = "trainer.load_best_model_at_end";
  if ((best_save || a.load_best_model_at_end) && metric.empty())
    fail("{}: {}: best{} needs {} (the metric whose new best triggers a save)",
         cfg.key_at(save_key), save_key, cfg.where(save_key), cfg.key_ref(metric_key));
  if (metric.empty()) return;
  const auto greater = cfg.get_optional<bool>("trainer.greater_is_better");
  a.greater_is_better = greater ? *greater : !metric.ends_with("loss");
  a.metric_for_best_model = metric.starts_with("eval_") ? metric : "eval_" + metric;
  std::string known;
  bool found = false;
  for (std::string_view m : train::kEvalMetricNames) {
    known += (known.empty() ? "" : ", ") + std::string(m);
    found = found || m == a.metric_for_best_model;
  }
  if (!found)
    fail("{}: {} '{}' ({}) is not a metric of zerotune's evaluation; it logs {}{}",
         cfg.key_at(metric_key), metric_key, metric, a.metric_for_best_model, known,
         cfg.where(metric_key));
  if ((best_save || a.load_best_model_at_end) && a.eval_strategy == IntervalStrategy::kNo) {
    const std::string& key = best_save ? save_key : lbm_key;
    fail("{}: {}{} needs evaluations to find the best model, but {} is 'no'", cfg.key_at(key),
         best_save ? save_key + ": best" : lbm_key, cfg.where(key), cfg.key_ref(eval_key));
  }
  if (!a.load_best_model_at_end || best_save) return;
  if (name_of(a.eval_strategy) != name_of(a.save_strategy))
    fail(
        "{}: {}{} requires the save and eval strategy to match (as transformers does), but {} is "
        "'{}' and {} '{}'",
        cfg.key_at(lbm_key), lbm_key, cfg.where(lbm_key), cfg.key_ref(eval_key),
        name_of(a.eval_strategy), cfg.key_ref(save_key), name_of(a.save_strategy));
  // The values as given (a ratio or a count), as transformers' __post_init__ compares them.
  const bool eval_set = a.eval_steps > 0 || a.eval_steps_ratio > 0;
  const auto raw = [](int64_t n, double ratio) {
    return ratio > 0 ? ratio : static_cast<double>(n);
  };
  const double eval_every = eval_set ? raw(a.eval_steps, a.eval_steps_ratio)
                                     : raw(a.logging_steps, a.logging_steps_ratio);
  const double save_every = raw(a.save_steps, a.save_steps_ratio);
  // eval_steps null (0): the evaluation steps are logging_steps, as in transformers.
  const char* every_key = eval_set ? "trainer.eval_steps" : "trainer.logging_steps";
  if (a.eval_strategy != IntervalStrategy::kSteps || std::fmod(save_every, eval_every) == 0) return;
  if (eval_every < 1 || save_every < 1) {
    if (!(eval_every < 1 && save_every < 1))
      fail(
          "{}: {}{} requires the saving steps to be a multiple of the evaluation steps, which "
          "cannot be guaranteed when {} {} and {} {} mix a ratio and a number of steps (as "
          "transformers refuses it)",
          cfg.key_at(lbm_key), lbm_key, cfg.where(lbm_key), cfg.key_ref("trainer.save_steps"),
          save_every, cfg.key_ref(every_key), eval_every);
    // transformers' LARGE_MULTIPLIER work-around for the ratios' floating-point remainders
    if (std::fmod(save_every * 1000000, eval_every * 1000000) != 0)
      fail(
          "{}: {}{} requires the saving steps to be a multiple of the evaluation steps, but {} {} "
          "is not a multiple of {} {}",
          cfg.key_at(lbm_key), lbm_key, cfg.where(lbm_key), cfg.key_ref("trainer.save_steps"),
          save_every, cfg.key_ref(every_key), eval_every);
    return;
  }
  fail(
      "{}: {}{} requires the saving steps to be a round multiple of the evaluation steps, but "
      "{} {} is not a round multiple of {} {}",
      cfg.key_at(lbm_key), lbm_key, cfg.where(lbm_key), cfg.key_ref("trainer.save_steps"),
      a.save_steps, cfg.key_ref(every_key), eval_every);
}

// trainer.lr_scheduler_kwargs against trainer.lr_scheduler_type, before any rank starts (the
// trainer applies them again once it knows the total steps): an argument the schedule does not
// take, a wrong type or a missing required one is a zt::Error naming file, line and key.
void check_lr_scheduler_kwargs(const RunConfig& cfg, const train::TrainArgs& a) {
  optim::LrSchedule s;
  s.kind = a.lr_scheduler_type;
  s.base_lr = s.init_lr = a.learning_rate;
  // With max_steps the total is known here, so is every step's learning rate.
  if (a.max_steps > 0) {
    s.total_steps = a.max_steps;
    s.warmup_steps = optim::resolve_warmup_steps(a.max_steps, a.warmup_steps, a.warmup_ratio);
  }
  const std::string key = "trainer.lr_scheduler_kwargs";
  try {
    optim::apply_lr_scheduler_kwargs(&s, a.lr_scheduler_kwargs);
  } catch (const Error& e) {
    fail("{}: {} (lr_scheduler_type {}): {}{}", cfg.key_at(key), key, name_of(s.kind), e.what(),
         cfg.where(key));
  }
  if (a.max_steps <= 0) return;
  if (const auto bad = optim::first_invalid_lr(s))
    fail("{}: {} {}{}: {}", cfg.key_at(key), key, a.lr_scheduler_kwargs.dump(), cfg.where(key),
         optim::invalid_lr_reason(s, *bad));
}

// trainer.model_init_kwargs: what TRL's SFTTrainer passes to from_pretrained when it loads the
// model from its name (trl/trainer/utils.py create_model_from_path; a string starting with "{" is
// JSON, as TrainingArguments parses its dict fields). zerotune loads model.name_or_path
// (`model_dir`) itself, in fp32 master weights:
// - dtype / torch_dtype other than float32 ("auto": config.json's torch_dtype) trains TRL's model
//   without fp32 master weights: a warning says the numbers differ; a dtype TRL refuses (dtype) or
//   zerotune lacks (torch_dtype: float64, …) is an error;
// - revision, subfolder, variant, gguf_file (other weights) and quantized loading are errors;
// - the loading-only arguments below change nothing (a note);
// - any other argument is a config attribute from_pretrained sets on the model's config
//   (attention_dropout, num_hidden_layers, …), which changes TRL's model: an error naming the key
//   (set it in config.json).
// Returns the dtype TRL's model is loaded in when it is not float32 ("bfloat16", "float16"; ""
// for float32 / unset, from_pretrained's default in transformers 4.57).
std::string check_model_init_kwargs(const RunConfig& cfg, const fs::path& model_dir,
                                    const std::function<void(const std::string&)>& warn,
                                    bool verbose) {
  const std::string key = "trainer.model_init_kwargs";
  Json v = cfg.value(key);
  std::string loaded;
  if (v.is_null()) return loaded;
  if (v.is_string()) {
    const std::string& t = v.get_ref<const std::string&>();
    if (const size_t b = t.find_first_not_of(" \t\r\n"); b != std::string::npos && t[b] == '{') {
      try {
        v = parse_json_unique_keys(t, key);
      } catch (const Error& e) {
        fail("{}: {}{}: the string is not a JSON mapping: {}", cfg.key_at(key), key, cfg.where(key),
             e.what());
      }
    }
  }
  if (!v.is_object())
    fail("{}: {}{} is {}; expected a mapping of from_pretrained keyword arguments, or null",
         cfg.key_at(key), key, cfg.where(key), v.dump());
  static constexpr std::string_view kLoadingOnly[] = {"attn_implementation",
                                                      "device_map",
                                                      "low_cpu_mem_usage",
                                                      "trust_remote_code",
                                                      "use_cache",
                                                      "cache_dir",
                                                      "local_files_only",
                                                      "token",
                                                      "use_safetensors",
                                                      "force_download",
                                                      "proxies",
                                                      "max_memory",
                                                      "offload_folder",
                                                      "offload_state_dict",
                                                      "output_loading_info",
                                                      "weights_only"};
  std::vector<std::string> noted;
  for (const auto& [k, x] : v.items()) {
    const std::string at = fmt::format("{}: {}.{}", cfg.key_at(key), key, k);
    const std::string text = x.is_string() ? x.get<std::string>() : x.dump();
    if (k == "dtype" || k == "torch_dtype") {
      if (x.is_null() || text == "float32") continue;
      if (!x.is_string() || (text != "auto" && text != "bfloat16" && text != "float16"))
        fail(
            "{}{}: {} is not a dtype zerotune takes here (expected 'auto', 'bfloat16', "
            "'float16' or 'float32'{})",
            at, cfg.where(key), text,
            k == "dtype" ? "; TRL's create_model_from_path refuses it too" : "");
      std::string loads = text;
      if (text == "auto") {
        // from_pretrained's "auto": config.json's torch_dtype (dtype in transformers 5).
        try {
          loads = load_model_config(model_dir).dtype;
        } catch (const Error&) {
          continue;  // the model's own load names a bad config.json
        }
        if (loads.empty() || loads == "float32") continue;
      }
      loaded = loads;
      warn(fmt::format(
          "{}: {}: TRL would load the model's parameters in {} and train them without fp32 "
          "master weights (its AdamW state in that dtype too); zerotune keeps fp32 master weights "
          "and computes in {} (trainer.bf16), so its losses differ from such a run's{}",
          at, text, text == "auto" ? loads + " (config.json's dtype)" : text,
          cfg.get<bool>("trainer.bf16") ? "bf16" : "fp32", cfg.where(key)));
    } else if (k == "revision" || k == "subfolder" || k == "variant" || k == "gguf_file") {
      if (x.is_null() || (k == "revision" && text == "main") || text.empty()) continue;
      fail(
          "{}{}: '{}' loads other weights than model.name_or_path's, which zerotune does not "
          "do (it reads model.name_or_path as it is); set model.name_or_path to those weights' "
          "directory instead",
          at, cfg.where(key), text);
    } else if (k == "quantization_config" || k == "load_in_8bit" || k == "load_in_4bit") {
      if (x.is_null() || x == false) continue;
      fail(
          "{}{}: quantized loading is not supported: zerotune fine-tunes full-precision weights "
          "only (transformers' Trainer refuses to fine-tune a quantized model without adapters "
          "too)",
          at, cfg.where(key));
    } else if (std::find(std::begin(kLoadingOnly), std::end(kLoadingOnly), k) !=
               std::end(kLoadingOnly)) {
      noted.push_back(k);
    } else {
      fail(
          "{}{}: {}: from_pretrained sets it on the model's config, which changes TRL's model; "
          "zerotune reads the model's config from {} only: set {} there",
          at, cfg.where(key), text, (model_dir / "config.json").string(), k);
    }
  }
  if (!noted.empty() && verbose)
    log::info(
        "{}: {}{} {} changes nothing in zerotune: it loads model.name_or_path itself, "
        "with its own attention kernels, on the devices of the job",
        cfg.key_at(key), key, cfg.where(key), fmt::join(noted, ", "));
  return loaded;
}

// RunConfig (+ accelerate config) → TrainArgs for a job of `world` ranks. Rank 0 logs warnings.
// The options TrainArgs holds as they are come from their declarations (read_declared_options,
// config_schema.h); what is resolved here is what depends on more than one key or file.
// transformers' DeepSpeed integration (HfTrainerDeepSpeedConfig.trainer_config_process) fills a
// DeepSpeed JSON's "auto" values from TrainingArguments and refuses the file when a value given
// differs: "Please correct the following DeepSpeed config values that mismatch TrainingArguments
// values". zerotune refuses the same files, naming each value's file:line and the trainer key;
// the accelerate YAML's deepspeed_config.gradient_accumulation_steps / gradient_clipping too,
// which accelerate writes into the DeepSpeed config transformers checks.
// (scheduler.params.warmup_num_steps / total_num_steps, which transformers compares once the step
// count is known, are not compared: the scheduler block gets its note; warmup_min_lr is only
// filled, never compared, by transformers.)
void check_deepspeed_values(const RunConfig& cfg, const AccelerateConfig& acc,
                            const train::TrainArgs& a, int world) {
  struct Trainer {
    std::string_view ds;
    std::vector<double> want;
    std::string key;
    std::string want_text = "";  // how `want` is shown, when not as numbers
  };
  const bool bf16 = a.dtype == DType::kBF16;
  const std::string b = cfg.key_ref("trainer.per_device_train_batch_size");
  const std::string g = cfg.key_ref("trainer.gradient_accumulation_steps");
  const std::string lr = cfg.key_ref("trainer.learning_rate");
  const std::vector<Trainer> trainer = {
      {"train_micro_batch_size_per_gpu", {double(a.per_device_train_batch_size)}, b},
      {"gradient_accumulation_steps", {double(a.gradient_accumulation_steps)}, g},
      {"train_batch_size",
       {double(world) * double(a.per_device_train_batch_size) *
        double(a.gradient_accumulation_steps)},
       fmt::format("world size {} × {} × {}", world, b, g)},
      {"gradient_clipping", {a.max_grad_norm}, cfg.key_ref("trainer.max_grad_norm")},
      {"optimizer.params.lr", {a.learning_rate}, lr},
      {"optimizer.params.betas",
       {a.adam_beta1, a.adam_beta2},
       cfg.key_ref("trainer.adam_beta1") + ", " + cfg.key_ref("trainer.adam_beta2")},
      {"optimizer.params.eps", {a.adam_epsilon}, cfg.key_ref("trainer.adam_epsilon")},
      {"optimizer.params.weight_decay", {a.weight_decay}, cfg.key_ref("trainer.weight_decay")},
      {"scheduler.params.warmup_max_lr", {a.learning_rate}, lr},
      {"bf16.enabled", {bf16 ? 1.0 : 0.0}, cfg.key_ref("trainer.bf16"), bf16 ? "true" : "false"},
      {"bfloat16.enabled",
       {bf16 ? 1.0 : 0.0},
       cfg.key_ref("trainer.bf16"),
       bf16 ? "true" : "false"},
  };
  std::string lines;
  for (const auto& v : acc.deepspeed_values)
    for (const auto& t : trainer)
      if (v.key == t.ds && v.values != t.want)
        lines += fmt::format(
            "\n  - {}: {} {} vs {} {}", v.at, v.key, v.text, t.key,
            t.want_text.empty() ? fmt::format("{}", fmt::join(t.want, ", ")) : t.want_text);
  if (!lines.empty())
    fail(
        "{}: DeepSpeed values that differ from the trainer's, which transformers refuses (\"Please "
        "correct the following DeepSpeed config values that mismatch TrainingArguments values\"); "
        "set each to \"auto\" or to the trainer's value:{}",
        acc.deepspeed_origin.empty() ? acc.path : acc.deepspeed_origin, lines);
}

train::TrainArgs make_train_args(RunConfig& cfg, const std::optional<AccelerateConfig>& acc,
                                 int world, bool verbose) {
  auto warn = [&](const std::string& w) {
    if (verbose) log::warn("{}", w);
  };
  // ---- world size and batch geometry
  if (auto n = cfg.get_optional<int64_t>("compute.n_gpus"); n && *n != world)
    warn(fmt::format(
        "{}: compute.n_gpus is {} but the job has {} rank(s); the actual world size ({}) wins{}",
        cfg.key_at("compute.n_gpus"), *n, world, world, cfg.where("compute.n_gpus")));
  if (acc && acc->num_processes && *acc->num_processes != world)
    warn(fmt::format("{}: num_processes is {} but the job has {} rank(s); the actual world size ({}) wins",
                     acc->path, *acc->num_processes, world, world));
  if (cfg.is_missing("trainer.gradient_accumulation_steps")) {
    // As the users' script does: global_batch_size / (n_gpus × per_device_train_batch_size), with
    // the actual world size in place of n_gpus.
    auto gbs = cfg.get_optional<int64_t>("compute.global_batch_size");
    const std::string gas = "trainer.gradient_accumulation_steps",
                      gbs_key = "compute.global_batch_size";
    if (!gbs)
      fail("{}: {}{} is ??? and {} is not set, so it cannot be derived", cfg.key_at(gas), gas,
           cfg.where(gas), cfg.key_ref(gbs_key));
    int64_t per_step = world * cfg.get<int64_t>("trainer.per_device_train_batch_size");
    if (*gbs < per_step || *gbs % per_step != 0)
      fail("{}: {}{} {} is not a multiple of world size {} × {} {} = {}; cannot derive {}",
           cfg.key_at(gbs_key), gbs_key, cfg.where(gbs_key), *gbs, world,
           cfg.key_ref("trainer.per_device_train_batch_size"), per_step / world, per_step,
           cfg.key_ref(gas));
    cfg.set("trainer.gradient_accumulation_steps", *gbs / per_step);
  }
  train::TrainArgs a;
  read_declared_options(cfg, a);
  // Nothing to train: transformers would run zero steps and save the unchanged model; zerotune
  // refuses such a run (as one whose every step was skipped), here, before data or outputs.
  if (a.max_steps <= 0 && !(a.num_train_epochs > 0))
    fail(
        "{}: trainer.num_train_epochs{} is {} and {} is {}, so the run would train no step "
        "(expected num_train_epochs > 0, or max_steps >= 1)",
        cfg.key_at("trainer.num_train_epochs"), cfg.where("trainer.num_train_epochs"),
        a.num_train_epochs, cfg.key_ref("trainer.max_steps"), a.max_steps);
  if (auto gbs = cfg.get_optional<int64_t>("compute.global_batch_size");
      gbs && *gbs != world * a.per_device_train_batch_size * a.gradient_accumulation_steps)
    warn(fmt::format(
        "{}: compute.global_batch_size{} is {} but world size {} × {} {} × {} {} = {}; the "
        "trainer's values win",
        cfg.key_at("compute.global_batch_size"), cfg.where("compute.global_batch_size"), *gbs,
        world, cfg.key_ref("trainer.per_device_train_batch_size"), a.per_device_train_batch_size,
        cfg.key_ref("trainer.gradient_accumulation_steps"), a.gradient_accumulation_steps,
        world * a.per_device_train_batch_size * a.gradient_accumulation_steps));

  // ---- ZeRO: compute.zero_stage, else the accelerate config's, else kDefaultZeroStage
  auto stage = cfg.get_optional<int64_t>("compute.zero_stage");
  const std::optional<int> acc_stage = acc ? acc->zero_stage : std::nullopt;
  // Under DeepSpeed the start-up line of the settings in force names the override already
  // (deepspeed_source.cpp's in_force_line): warned here only for an FSDP section's stage.
  if (stage && acc_stage && *stage != *acc_stage && acc->distributed_type != "DEEPSPEED")
    warn(fmt::format("{}: compute.zero_stage {} overrides the ZeRO stage {} of {}{}",
                     cfg.key_at("compute.zero_stage"), *stage, *acc_stage,
                     acc->deepspeed_source.empty() ? acc->path : acc->deepspeed_source,
                     cfg.where("compute.zero_stage")));
  a.zero_stage = stage ? static_cast<int>(*stage) : acc_stage.value_or(kDefaultZeroStage);
  auto offload = cfg.get_optional<bool>("compute.offload_optimizer");
  a.offload_optimizer = offload ? *offload : (acc && acc->offload_optimizer_device == "cpu");

  // ---- backend and precision
  auto backend = config_value<train::BackendChoice>(cfg, "compute.backend");
  if (backend == train::BackendChoice::kAuto && (cfg.get<bool>("trainer.use_cpu") || (acc && acc->use_cpu)))
    backend = train::BackendChoice::kCpu;
  try {
    a.backend = train::resolve_backend(backend);
  } catch (const Error& e) {
    fail("{}: {}{}", cfg.key_at("compute.backend"), e.what(), cfg.where("compute.backend"));
  }
  bool bf16 = cfg.get<bool>("trainer.bf16");
  // fp16 / fp8 from the accelerate file: with trainer.bf16 transformers trains bf16 (its arguments
  // override accelerate's mixed_precision; the warning below), without it accelerate would
  // autocast to fp16 / fp8, which zerotune lacks — refused, as trainer.fp16 is.
  if (acc && !bf16 && (acc->mixed_precision == "fp16" || acc->mixed_precision == "fp8"))
    fail(
        "{}: mixed_precision {} is not supported by zerotune (it trains in bf16 or fp32; fp16 "
        "needs "
        "loss scaling): set mixed_precision: bf16 or no, or trainer.bf16: true",
        acc->path, acc->mixed_precision);
  if (acc && acc->mixed_precision != "no" && (acc->mixed_precision == "bf16") != bf16)
    warn(fmt::format("{}: mixed_precision {} differs from trainer.bf16 {}; trainer.bf16 wins", acc->path,
                     acc->mixed_precision, bf16));
  a.dtype = bf16 ? DType::kBF16 : DType::kF32;

  // ---- model and data
  if (!cfg.get_optional<std::string>("model.name_or_path"))
    fail("{}: the model is not set (model_name, or model.name_or_path)", cfg.source());
  const char* model_key =
      cfg.get_optional<std::string>("model_name") ? "model_name" : "model.name_or_path";
  if (cfg.get<std::string>("model.name_or_path").empty())
    fail("{}: {} is empty; expected a local HF model directory or a hub id Org/Name{}",
         cfg.key_at(model_key), model_key, cfg.where(model_key));
  ModelSource src;
  try {
    src = resolve_model_source(cfg.get<std::string>("model.name_or_path"));
  } catch (const Error& e) {
    fail("{}: {}: {}{}", cfg.key_at(model_key), model_key, e.what(), cfg.where(model_key));
  }
  if (!src.has_weights && !src.weights_problem.empty())
    fail("{}: {}: {}{}", cfg.key_at(model_key), model_key, src.weights_problem,
         cfg.where(model_key));
  a.model_dir = src.dir;
  a.from_scratch = !src.has_weights;
  const std::string trl_load_dtype = check_model_init_kwargs(cfg, a.model_dir, warn, verbose);
  // The exported weights' dtype is that of the parameters TRL's save_model writes: DeepSpeed with
  // bf16 casts the module to bf16 (its engine's _configure_distributed_model), so the users'
  // ZeRO configs save bf16; without DeepSpeed the parameters stay as from_pretrained loaded them —
  // float32 unless model_init_kwargs says bfloat16 (trainer.bf16 is autocast there). zerotune
  // exports its fp32 master weights in that dtype (float16 loads: float32, a superset).
  const bool deepspeed = acc && acc->distributed_type == "DEEPSPEED";
  a.export_dtype = (bf16 && deepspeed) || trl_load_dtype == "bfloat16" ? DType::kBF16 : DType::kF32;
  check_dataset_kwargs(cfg, warn);
  check_dataset_present(cfg, "train");
  a.train_data = data_options(cfg, "train");
  if (has_eval_set(cfg)) {
    check_dataset_present(cfg, "eval");
    a.eval_data = data_options(cfg, "eval");
    // TRL's collator is padding-free only with padding_free or bfd packing of the train set; a
    // packed eval set without it is padded bins whose examples attend to each other.
    if (a.eval_data->packing && !a.train_data.packing && !cfg.get<bool>("trainer.padding_free"))
      warn(fmt::format(
          "{}: trainer.eval_packing{}: true with packing false: TRL 0.25.1 then evaluates each "
          "packed eval bin as one sequence (its collator is padding-free only when the train set "
          "is packed or padding_free is true), so its eval_loss mixes the examples of a bin; "
          "zerotune evaluates each example alone, as with eval_packing false. The packing decides "
          "only the eval speed metrics' sample count here",
          cfg.key_at("trainer.eval_packing"), cfg.where("trainer.eval_packing")));
  }

  // ---- outputs
  a.exp_dir = cfg.get<std::string>("exp_dir");
  auto out = cfg.get_optional<std::string>("trainer.output_dir");
  a.output_dir = out ? fs::path(*out) : a.exp_dir / "final";
  cfg.set("trainer.output_dir", a.output_dir.string());  // args.yaml: the effective value
  const ReportTo report_to = resolve_report_to(cfg);
  if (!report_to.warning.empty()) warn(report_to.warning);
  if (report_to.tensorboard) {
    auto ld = cfg.get_optional<std::string>("trainer.logging_dir");
    a.logging_dir = ld ? fs::path(*ld) : a.exp_dir / "tensorboard";
  }
  record_report_to(cfg, report_to, a.logging_dir);  // args.yaml: what the run reports to
  if (acc) check_deepspeed_values(cfg, *acc, a, world);
  if (acc && !acc->clipping_zero_at.empty() && a.max_grad_norm > 0)
    fail(
        "{}: deepspeed_config.gradient_clipping is 0, which accelerate leaves out of the DeepSpeed "
        "config, so DeepSpeed would train without clipping while {} is {}; set {} to 0 (no "
        "clipping) or remove gradient_clipping",
        acc->clipping_zero_at, cfg.key_ref("trainer.max_grad_norm"), a.max_grad_norm,
        cfg.key_ref("trainer.max_grad_norm"));
  const Json& resume = cfg.value("trainer.resume_from_checkpoint");
  if (resume.is_boolean()) {
    if (resume.get<bool>()) a.resume_from_checkpoint = "true";
  } else if (resume.is_string()) {
    // `${oc.env:RESUME,false}` gives the string "false": read as the boolean, as the YAML word was
    // before oc.env gave strings (an empty value too: no resume).
    const std::string w = ascii_lower(resume.get<std::string>());
    if (w == "true") {
      a.resume_from_checkpoint = "true";
    } else if (w != "false" && !w.empty()) {
      a.resume_from_checkpoint = resume.get<std::string>();
    }
  } else if (!resume.is_null()) {
    fail("{}: trainer.resume_from_checkpoint must be a path, true or false, got {}{}",
         cfg.key_at("trainer.resume_from_checkpoint"), resume.dump(),
         cfg.where("trainer.resume_from_checkpoint"));
  }
  if (a.eval_strategy != train::IntervalStrategy::kNo && !a.eval_data)
    fail("{}: trainer.eval_strategy{} is '{}' but {} is not set",
         cfg.key_at("trainer.eval_strategy"), cfg.where("trainer.eval_strategy"),
         name_of(a.eval_strategy), cfg.key_ref("dataset.eval.path"));
  if (a.eval_on_start && !a.eval_data)
    fail("{}: trainer.eval_on_start{} is true but {} is not set",
         cfg.key_at("trainer.eval_on_start"), cfg.where("trainer.eval_on_start"),
         cfg.key_ref("dataset.eval.path"));
  resolve_best_model(cfg, a);
  check_lr_scheduler_kwargs(cfg, a);
  a.resolved_config = cfg.tree();
  return a;
}

// The line a stop signal during cmd_train's set-up prints: "" when the process is one rank of
// several (each would repeat it; the launcher reports the signal once) or warnings are off.
std::string setup_stop_line() {
  bool alone = true;
  try {
    alone = dist::read_launch_env([](const char* n) { return std::getenv(n); }, std::nullopt)
                .launcher == dist::Launcher::kSingle;
  } catch (const Error&) {  // reported when the set-up reads it again
  }
  if (!alone || log::min_level() > log::Level::kWarn) return "";
  return "zerotune: warning: training was interrupted during its set-up: nothing was trained and "
         "no checkpoint was written; the same command starts the run again\n";
}

// What `train`'s command line gives: the config file's options, the accelerate config and the
// overrides.
struct TrainCommandLine {
  ConfigFileOption file;
  std::string accel;
  std::vector<std::string> overrides;
};

// `train`'s options, into `app` (cmd_train; train_gives_deepspeed reads them alike).
void add_train_options(CLI::App& app, TrainCommandLine& line) {
  add_config_file_option(app, line.file);
  app.add_option("--config_file", line.accel,
                 "accelerate config (ZeRO stage, offload, mixed precision)");
  app.add_option("overrides", line.overrides, "key.path=value overrides");
}

}  // namespace

std::optional<bool> train_gives_deepspeed(const Args& args) {
  for (const auto& a : args)
    if (a == "-m" || a == "--multirun") return std::nullopt;
  CLI::App app;
  TrainCommandLine line;
  add_train_options(app, line);
  const Args long_flags = with_hydra_long_flags(args);
  std::vector<std::string> argv(long_flags.rbegin(), long_flags.rend());  // CLI11: reversed
  try {
    app.parse(argv);
  } catch (const CLI::Error&) {  // --help or a usage error: `train` answers it
    return std::nullopt;
  }
  std::string config;
  if (!config_file_problem(line.file, &config).empty()) return std::nullopt;
  try {
    const RunConfig cfg = RunConfig::load(config, line.overrides);
    return deepspeed_from_trainer(cfg).has_value();
  } catch (const Error&) {  // the ranks report it, each as `train` does
    return std::nullopt;
  }
}

constexpr CommandUsage kUsage{"train", "--config sft.yaml [--config_file accelerate.yaml] [key.path=value …]"};

int cmd_train(const Args& args) {
  // Stop signals from the start: the trainer's handlers (a stop at the next step), under a guard
  // for the set-up, which checks no stop flag and may block (a rendezvous, a FIFO): a signal there
  // ends the run at once with status 130, as an interrupted run's, before anything but the
  // exp_dir lock (and, asked for, the earlier run's removal) is written. The guard gives way to
  // the trainer's handlers with no window for the default action (core/stop_signals.h).
  train::Trainer::install_signal_handlers();
  std::optional<StopSignalsAtOnce> during_setup;
  during_setup.emplace(setup_stop_line(), 130, &train::Trainer::stop_requested());
  CLI::App app{"Run the SFT job of a hydra-style sft.yaml (under mpirun / zerotune launch for several ranks)"};
  TrainCommandLine line;
  std::string config;
  add_train_options(app, line);
  if (auto rc = refuse_multirun(args, kUsage)) return *rc;
  if (auto rc = parse_command_line(app, kUsage, with_hydra_long_flags(args))) return *rc;
  if (auto rc = config_file_of(line.file, kUsage, &config)) return *rc;
  std::string accel = line.accel;
  // ZT_ACCELERATE_CONFIG: the file `zerotune launch --config_file` names; ZT_ACCELERATE_REPORTED:
  // launch has read that same file as this command reads it and printed its warnings and notes
  // already (it holds the file's path; any other value is not launch's mark and is ignored).
  bool accel_reported = false;
  if (accel.empty())
    if (const char* e = std::getenv("ZT_ACCELERATE_CONFIG"); e != nullptr && *e) {
      accel = e;
      const char* r = std::getenv(kAccelerateReportedEnv);
      accel_reported = r != nullptr && accel == r;
    }

  RunConfig cfg = RunConfig::load(config, line.overrides);
  // trainer.ddp_timeout is the collective timeout (torch's init_process_group(timeout=...) under
  // the HF Trainer); ZT_COMM_TIMEOUT_S overrides it.
  const dist::LaunchEnv where = dist::read_launch_env(
      [](const char* n) { return std::getenv(n); }, cfg.get<double>("trainer.ddp_timeout"));
  std::unique_ptr<dist::Comm> comm = dist::make_comm(where);
  const bool rank0 = comm->rank() == 0;
  if (rank0)
    for (const auto& n : cfg.notes()) log::info("{}", n);
  // trainer.deepspeed first: where it gives the DeepSpeed settings, the accelerate config's
  // deepspeed_config_file and fsdp_config are not read (TrainerDeepSpeed::kGiven), as
  // TrainingArguments' own DeepSpeedPlugin never reads them. Each is reported on (the accelerate
  // config by `zerotune launch` when it said so), then they are combined as transformers and
  // accelerate combine them (cli/deepspeed_source.h); the start-up line says which settings rule.
  std::optional<AccelerateConfig> trainer_ds = deepspeed_from_trainer(cfg);
  std::optional<AccelerateConfig> acc;
  if (!accel.empty())
    acc = parse_accelerate_config(accel,
                                  trainer_ds ? TrainerDeepSpeed::kGiven : TrainerDeepSpeed::kNone);
  if (rank0 && acc && !accel_reported) {
    for (const auto& w : acc->warnings) log::warn("{}", w);
    for (const auto& n : acc->notes) log::info("{}", n);
  }
  if (rank0 && trainer_ds) {
    for (const auto& w : trainer_ds->warnings) log::warn("{}", w);
    for (const auto& n : trainer_ds->notes) log::info("{}", n);
  }
  DeepSpeedChoice ds = choose_deepspeed_settings(std::move(acc), std::move(trainer_ds), cfg);
  if (rank0) {
    for (const auto& w : ds.warnings) log::warn("{}", w);
    if (!ds.in_force.empty()) log::info("{}", ds.in_force);
  }
  acc = std::move(ds.config);

  int64_t threads = cfg.get<int64_t>("compute.threads");
  if (threads <= 0) {
    unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    threads = std::max<int64_t>(1, hw / std::max(1, comm->local_world_size()));
  }
  omp_set_num_threads(static_cast<int>(threads));

  train::TrainArgs targs = make_train_args(cfg, acc, comm->world_size(), rank0);
  // Every directory the run creates, before anything is written (dataset.cache_dir: data_options).
  // The checks that write nothing first: a probe never goes inside a checkpoint directory.
  // Each message names the key's own file:line, or says it was given on the command line.
  std::vector<std::pair<std::string, fs::path>> run_dirs = {
      {"exp_dir", targs.exp_dir},
      {"trainer.output_dir", targs.output_dir}};  // default: exp_dir/final
  // Its event files would go with the checkpoint: replaced when that step is saved, or rotated.
  if (!targs.logging_dir.empty()) run_dirs.emplace_back("trainer.logging_dir", targs.logging_dir);
  for (const auto& [key, dir] : run_dirs)
    check_not_in_checkpoint(cfg.key_at(key), key, dir, cfg.where(key));
  for (const auto& [key, dir] : run_dirs)
    check_dir_creatable(cfg.key_at(key), key, dir, cfg.where(key));
  // Rank 0 holds the exp_dir lock while the run writes there (train/run_dir_lock.h): a second run
  // in the directory of a live one is refused before it looks at, clears or writes anything. An
  // exp_dir that does not exist yet is locked by the trainer when it creates it.
  train::RunDirLock dir_lock;
  std::error_code dir_ec;
  if (rank0 && fs::is_directory(targs.exp_dir, dir_ec)) dir_lock = train::RunDirLock(targs.exp_dir);
  // Every rank checks before any rank can write (the barrier), so all refuse alike.
  const bool overwrite = cfg.get<bool>("trainer.overwrite_output_dir");
  check_run_dir_is_free(targs.exp_dir, targs.output_dir, targs.resume_from_checkpoint.has_value(), overwrite);
  if (rank0 && overwrite && !targs.resume_from_checkpoint)
    for (const auto& p : clear_earlier_run(
             targs.exp_dir,
             earlier_events_dir(targs.exp_dir, targs.logging_dir,
                                cfg.get_optional<std::string>("trainer.logging_dir"))))
      log::info("trainer.overwrite_output_dir: removed {} of the earlier run", p.string());
  // The model files output_dir holds now, before the data is prepared (which can take minutes): the
  // final export will not replace model files that differ from these, whenever during this run's
  // set-up or training another run (another exp_dir, so not locked out) exported there. What a
  // killed export left there is cleaned first (a model it had moved aside is restored).
  std::string output_dir_at_start;
  if (rank0) {
    clean_stale_export_dirs(targs.output_dir);  // logs what it removes or restores
    output_dir_at_start = model_files_fingerprint(targs.output_dir);
  }
  comm->barrier();
  // On the GPU the engine's collectives take device memory: NCCL (several ranks) over the host Comm.
  ModelConfig mcfg = load_model_config(targs.model_dir);  // the trainer logs what it decides
  if (!targs.from_scratch)
    reconcile_tied_embeddings(mcfg, SafetensorsReader(resolve_weights_file(targs.model_dir, false)),
                              false);
  comm = train::make_trainer_comm(std::move(comm), targs.backend, mcfg, where.options);
  targs.train_data.num_threads = static_cast<int>(threads);
  if (targs.eval_data) targs.eval_data->num_threads = static_cast<int>(threads);
  if (rank0)
    log::info("rank 0 of {} ({} comm), {} backend, {} thread(s) per rank, ZeRO stage {}{}",
              comm->world_size(), comm->backend(), name_of(targs.backend), threads, targs.zero_stage,
              targs.offload_optimizer ? " + optimizer offload" : "");
  TokenizerBundle tok = load_tokenizer(cfg);
  during_setup.reset();  // the trainer's handlers (installed above) again
  const fs::path output_dir = targs.output_dir;
  train::Trainer trainer(std::move(targs), *comm, tok.tokenizer, tok.config, tok.dir);
  if (dir_lock.held()) trainer.hold_run_dir_lock(std::move(dir_lock));
  if (rank0) trainer.note_output_dir_at_start(std::move(output_dir_at_start));
  train::TrainSummary sum = trainer.run();
  if (sum.interrupted) {
    // No checkpoint: a fresh run stopped before its first step. Its exp_dir holds this attempt's
    // args.yaml and metrics.jsonl, which the run-directory guard refuses to overwrite unasked.
    if (rank0 && sum.last_checkpoint.empty())
      log::warn(
          "training was interrupted before its first step: nothing was trained and no checkpoint "
          "was written; start the run again with trainer.overwrite_output_dir=true");
    else if (rank0)
      log::warn("training was interrupted; resume with trainer.resume_from_checkpoint={}",
                sum.last_checkpoint.string());
    return 130;
  }
  if (!sum.stopped_at_end_by.empty()) {
    if (rank0)
      log::warn(
          "training was stopped by {} after its last step, while its outputs were written: every "
          "step was trained and the final model in {} was written whole, but the run did not end "
          "on its own",
          sum.stopped_at_end_by, output_dir.string());
    return 130;
  }
  return 0;
}

}  // namespace zt::cli
