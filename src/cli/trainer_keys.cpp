// trainer.*: every field of TRL's SFTConfig and transformers' TrainingArguments (the users' TRL
// 0.25.1 / transformers 4.57.1 and the current TRL 1.16 / transformers 5.x; the golden list is
// tests/data/cli/trainer_fields.json), each acted on, noted or refused (config_schema.h), with
// TRL SFTConfig's defaults (SFT_SEMANTICS §5), plus zerotune's own trainer keys at the end.
#include "cli/dict_field_string.h"
#include "cli/train_options.h"

namespace zt::cli {
namespace {

// An integer number of steps >= 0 (steps() wants >= 1): eval_steps / save_steps, where
// transformers gives 0 a meaning.
ValueRule steps_from_zero(bool nullable) {
  ValueRule r = steps(nullable);
  r.lo = 0;
  return r;
}

using train::IntervalStrategy;
using train::NanPolicy;
using train::Optimizer;
using train::SaveStrategy;
using train::TrainArgs;

constexpr std::string_view kLoader =
    "zerotune reads micro-batches from its memory-mapped token cache; there are no loader workers";
constexpr std::string_view kHub = "zerotune never uploads; push the output_dir with `hf upload`";
constexpr std::string_view kLogs = "zerotune logs from rank 0 to stderr, metrics.jsonl and TensorBoard";
constexpr std::string_view kCompile = "zerotune is compiled C++/CUDA (no torch.compile)";
constexpr std::string_view kTpu = "TPU only";
constexpr std::string_view kEvalLoop =
    "zerotune's evaluation computes eval_loss and eval_mean_token_accuracy over the whole eval set";
constexpr std::string_view kDdp =
    "zerotune's ZeRO engine has its own buckets and transports (MPI/TCP on the CPU, NCCL on GPUs); "
    "the numbers do not depend on them";
constexpr std::string_view kFsdp =
    "zerotune's sharding is compute.zero_stage or the accelerate config; the numbers do not depend on it";

// A steps key (logging_steps / eval_steps / save_steps): an integer count into `field`, or a ratio
// in (0, 1) of the total steps into `ratio` (the count resolved once the plan knows the total,
// TrainArgs::resolve_step_ratios); null stores 0 (eval_steps: logging_steps). An integer is read
// as it is (exact beyond 2^53, as Python's int), a whole float (10.0, below 2^63: the rule) as
// TrainingArguments' int(value); a fraction above 1 (2.5, taken only where no strategy steps
// reads it: RunConfig's check) is int() too, and never read. The value as given goes to `given`
// (trainer_state.json's value depends on its form: train::hf_state_steps).
KeySpec steps_option(std::string_view path, int64_t TrainArgs::*field, double TrainArgs::*ratio,
                     Json TrainArgs::*given, Json dflt, ValueRule rule) {
  KeySpec k = acts(path, std::move(dflt), std::move(rule));
  k.to_args = [path, field, ratio, given](const RunConfig& cfg, TrainArgs& a) {
    const Json& v = cfg.value(std::string(path));
    a.*given = v;
    if (v.is_number_integer()) {
      a.*ratio = 0.0;
      a.*field = v.get<int64_t>();
      return;
    }
    const double d = v.is_null() ? 0.0 : v.get<double>();
    a.*ratio = d > 0.0 && d < 1.0 ? d : 0.0;
    a.*field = a.*ratio > 0.0 ? 0 : static_cast<int64_t>(d);
  };
  return k;
}

// trainer.lr_scheduler_kwargs into TrainArgs::lr_scheduler_kwargs (null: none) as transformers'
// TrainingArguments.__post_init__ leaves it: a string starting with '{' parsed as JSON, its string
// values converted (hf_dict_field_value); bad JSON is an error naming the file, line and key.
KeySpec scheduler_kwargs() {
  KeySpec k = acts("trainer.lr_scheduler_kwargs", nullptr, any_value());
  k.to_args = [](const RunConfig& cfg, TrainArgs& a) {
    const std::string key = "trainer.lr_scheduler_kwargs";
    try {
      a.lr_scheduler_kwargs = hf_dict_field_value(cfg.value(key));
    } catch (const Error& e) {
      fail("{}: {}: {}{}", cfg.key_at(key), key, e.what(), cfg.where(key));
    }
  };
  return k;
}

}  // namespace

std::vector<KeySpec> trainer_keys() {
  const double kSeedMax = 4294967295.0;
  return {
      // ---- outputs
      acts("trainer.output_dir", nullptr, text(true)),  // the final model; default exp_dir/final
      acts("trainer.overwrite_output_dir", false, boolean()),  // exp_dir holding a run: replace it
      noted("trainer.do_train", false, "`zerotune train` always trains"),
      noted("trainer.do_eval", false,
            "evaluation follows eval_strategy, as in transformers' Trainer"),
      noted("trainer.do_predict", false, "zerotune has no prediction pass"),
      acts("trainer.logging_dir", nullptr, text(true)),
      acts("trainer.report_to", nullptr, strings()),
      noted("trainer.run_name", nullptr, "the run is named by exp_dir"),
      noted("trainer.project", "huggingface",
            "trackio only; zerotune logs to metrics.jsonl and TensorBoard"),
      noted("trainer.trackio_space_id", "trackio",
            "trackio only; zerotune logs to metrics.jsonl and TensorBoard"),
      noted("trainer.trackio_bucket_id", nullptr,
            "trackio only; zerotune logs to metrics.jsonl and TensorBoard"),
      noted("trainer.trackio_static_space_id", nullptr,
            "trackio only; zerotune logs to metrics.jsonl and TensorBoard"),
      acts("trainer.resume_from_checkpoint", nullptr, any_value()),  // a path, true or false
      enum_option("trainer.save_strategy", &TrainArgs::save_strategy, SaveStrategy::kSteps),
      // 0: no periodic save, the final step's only (transformers' DefaultFlowCallback tests
      // `save_steps > 0`)
      steps_option("trainer.save_steps", &TrainArgs::save_steps, &TrainArgs::save_steps_ratio,
                   &TrainArgs::save_steps_given, 500, steps_from_zero(false)),
      // null, 0 or negative: keep every checkpoint (transformers' _rotate_checkpoints returns for
      // `save_total_limit is None or save_total_limit <= 0`).
      option_or_null("trainer.save_total_limit", &TrainArgs::save_total_limit, nullptr, int64_t{0},
                     integer(-std::numeric_limits<double>::infinity(), 1e9, true)),
      refused("trainer.save_safetensors", true, "zerotune writes safetensors only"),
      noted("trainer.save_on_each_node", false,
            "rank 0 writes the model; every rank writes its own ZeRO state"),
      noted("trainer.save_only_model", false,
            "zerotune's checkpoints always hold the optimizer state (exact resume); the model is "
            "the same"),
      noted("trainer.restore_callback_states_from_checkpoint", false, "zerotune has no callbacks"),
      // The three best-model keys are resolved and checked together (cmd_train.cpp).
      option("trainer.load_best_model_at_end", &TrainArgs::load_best_model_at_end, false,
             boolean()),
      acts("trainer.metric_for_best_model", nullptr, text(true)),
      acts("trainer.greater_is_better", nullptr, boolean(true)),
      noted("trainer.enable_jit_checkpoint", false,
            "zerotune stops cleanly on SIGINT/SIGTERM and resumes from its last checkpoint"),

      // ---- evaluation and logging
      enum_option("trainer.eval_strategy", &TrainArgs::eval_strategy, IntervalStrategy::kNo),
      // null or 0: logging_steps, as transformers' TrainingArguments sets it
      steps_option("trainer.eval_steps", &TrainArgs::eval_steps, &TrainArgs::eval_steps_ratio,
                   &TrainArgs::eval_steps_given, nullptr, steps_from_zero(true)),
      option("trainer.eval_delay", &TrainArgs::eval_delay, 0, number(0)),
      option("trainer.eval_on_start", &TrainArgs::eval_on_start, false, boolean()),
      noted("trainer.eval_accumulation_steps", nullptr, kEvalLoop),
      noted("trainer.eval_do_concat_batches", true, kEvalLoop),
      noted("trainer.eval_use_gather_object", false, kEvalLoop),
      noted("trainer.batch_eval_metrics", false, kEvalLoop),
      noted("trainer.prediction_loss_only", false, kEvalLoop),
      noted("trainer.include_for_metrics", Json::array(), kEvalLoop),
      noted("trainer.label_names", nullptr,
            "the labels are the completion mask's (SFT_SEMANTICS §2)"),
      noted("trainer.jit_mode_eval", false, kCompile),
      noted("trainer.use_legacy_prediction_loop", false, kEvalLoop),
      noted("trainer.past_index", -1, "no model in zerotune returns past states"),
      steps_option("trainer.logging_steps", &TrainArgs::logging_steps,
                   &TrainArgs::logging_steps_ratio, &TrainArgs::logging_steps_given, 10, steps()),
      enum_option("trainer.logging_strategy", &TrainArgs::logging_strategy,
                  IntervalStrategy::kSteps),
      option("trainer.logging_first_step", &TrainArgs::logging_first_step, false, boolean()),
      noted("trainer.logging_nan_inf_filter", true,
            "zerotune stops at a non-finite loss (or skips the step, trainer.nan_policy) instead "
            "of filtering the log"),
      noted("trainer.log_level", "passive", kLogs),
      noted("trainer.log_level_replica", "warning", kLogs),
      noted("trainer.log_on_each_node", true, kLogs),
      noted("trainer.disable_tqdm", nullptr, "zerotune shows a progress line on a terminal"),
      noted("trainer.skip_memory_metrics", true, "zerotune logs peak memory in metrics.jsonl"),
      noted("trainer.include_tokens_per_second", false,
            "zerotune always logs train_tokens_per_second"),
      noted("trainer.include_num_input_tokens_seen", false,
            "zerotune always logs num_tokens (input tokens without padding) and writes "
            "trainer_state.json's num_input_tokens_seen; records get no num_input_tokens_seen "
            "(transformers': padding counted, or not with \"non_padding\")"),
      noted("trainer.debug", "", "debug options of PyTorch/XLA"),

      // ---- optimisation
      option("trainer.learning_rate", &TrainArgs::learning_rate, 2e-5, number(0)),
      enum_option("trainer.lr_scheduler_type", &TrainArgs::lr_scheduler_type,
                  optim::LrScheduleKind::kLinear, {"reduce_lr_on_plateau"}),
      // a mapping (or a JSON string of one): the schedule's arguments, checked against
      // lr_scheduler_type when the schedule is built (optim::apply_lr_scheduler_kwargs)
      scheduler_kwargs(),
      option("trainer.warmup_steps", &TrainArgs::warmup_steps, 0, warmup()),
      // [0, 1], as transformers checks it (1: warm up over the whole run)
      option("trainer.warmup_ratio", &TrainArgs::warmup_ratio, 0.0, number(0, 1)),
      option("trainer.weight_decay", &TrainArgs::weight_decay, 0.0, number(0)),
      option("trainer.adam_beta1", &TrainArgs::adam_beta1, 0.9, number(0, 1, true)),
      option("trainer.adam_beta2", &TrainArgs::adam_beta2, 0.999, number(0, 1, true)),
      option("trainer.adam_epsilon", &TrainArgs::adam_epsilon, 1e-8, number(0)),
      // null, 0 or negative: no clipping (transformers clips only when max_grad_norm > 0)
      option_or_null("trainer.max_grad_norm", &TrainArgs::max_grad_norm, 1.0, 0.0,
                     number(-std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::infinity(), false, true)),
      enum_option("trainer.optim", &TrainArgs::optim, Optimizer::kAdamWTorch,
                  {"adamw_torch_xla",
                   "adamw_torch_npu_fused",
                   "adamw_apex_fused",
                   "adafactor",
                   "adamw_anyprecision",
                   "adamw_torch_4bit",
                   "adamw_torch_8bit",
                   "ademamix",
                   "sgd",
                   "adagrad",
                   "adamw_bnb_8bit",
                   "adamw_8bit",
                   "ademamix_8bit",
                   "lion_8bit",
                   "lion_32bit",
                   "paged_adamw_32bit",
                   "paged_adamw_8bit",
                   "paged_ademamix_32bit",
                   "paged_ademamix_8bit",
                   "paged_lion_32bit",
                   "paged_lion_8bit",
                   "rmsprop",
                   "rmsprop_bnb",
                   "rmsprop_bnb_8bit",
                   "rmsprop_bnb_32bit",
                   "galore_adamw",
                   "galore_adamw_8bit",
                   "galore_adafactor",
                   "galore_adamw_layerwise",
                   "galore_adamw_8bit_layerwise",
                   "galore_adafactor_layerwise",
                   "lomo",
                   "adalomo",
                   "grokadamw",
                   "schedule_free_radam",
                   "schedule_free_adamw",
                   "schedule_free_sgd",
                   "apollo_adamw",
                   "apollo_adamw_layerwise",
                   "stable_adamw",
                   "muon"}),
      refused("trainer.optim_args", nullptr,
              "zerotune's AdamW takes its settings from adam_* and weight_decay"),
      refused("trainer.optim_target_modules", nullptr,
              "GaLore/APOLLO optimizers are not implemented"),
      refused("trainer.adafactor", false, "zerotune implements AdamW (torch.optim.AdamW) only"),
      refused("trainer.label_smoothing_factor", 0.0, "label smoothing is not implemented"),
      refused("trainer.neftune_noise_alpha", nullptr, "NEFTune embedding noise is not implemented"),
      refused("trainer.average_tokens_across_devices", true,
              "zerotune always normalises the loss by the global target-token count of the step"),
      noted("trainer.torch_empty_cache_steps", nullptr,
            "zerotune allocates its memory once at start-up"),

      // ---- batches, steps, data order
      option("trainer.num_train_epochs", &TrainArgs::num_train_epochs, 3.0, number(0)),
      option("trainer.max_steps", &TrainArgs::max_steps, -1, integer(-1)),
      option("trainer.per_device_train_batch_size", &TrainArgs::per_device_train_batch_size, 8,
             integer(1)),
      option("trainer.per_device_eval_batch_size", &TrainArgs::per_device_eval_batch_size, 8,
             integer(1)),
      option("trainer.gradient_accumulation_steps", &TrainArgs::gradient_accumulation_steps, 1,
             integer(1)),
      option("trainer.seed", &TrainArgs::seed, 42, integer(0, kSeedMax)),
      option_or_null("trainer.data_seed", &TrainArgs::data_seed, nullptr, std::optional<uint64_t>{},
                     integer(0, kSeedMax, true)),  // the sampler's seed; null: trainer.seed
      option("trainer.dataloader_drop_last", &TrainArgs::dataloader_drop_last, false, boolean()),
      noted("trainer.dataloader_num_workers", 0, kLoader),
      noted("trainer.dataloader_prefetch_factor", nullptr, kLoader),
      noted("trainer.dataloader_pin_memory", true, kLoader),
      noted("trainer.dataloader_persistent_workers", false, kLoader),
      noted("trainer.dataloader_multiprocessing_context", nullptr, kLoader),
      noted("trainer.dataloader_in_order", true, kLoader),
      refused("trainer.train_sampling_strategy", "random",
              "zerotune samples a seeded random permutation per epoch (transformers' 'random')"),
      refused("trainer.group_by_length", false,
              "grouping by length changes the samples of each step"),
      noted("trainer.length_column_name", "length", "used only by group_by_length"),
      refused("trainer.ignore_data_skip", false, "resuming always continues the exact data order"),
      refused("trainer.auto_find_batch_size", false,
              "zerotune sizes its memory at start-up and never retries with another batch size"),
      noted("trainer.remove_unused_columns", true,
            "zerotune reads only the columns of the dataset's format"),
      refused("trainer.accelerator_config", nullptr,
              "zerotune's batches are per_device_train_batch_size per rank (no "
              "split_batches/dispatch_batches)"),

      // ---- precision and kernels
      acts("trainer.bf16", true, boolean()),
      refused("trainer.fp16", false,
              "fp16 needs loss scaling, which zerotune does not implement; use bf16"),
      refused("trainer.fp16_full_eval", false, "fp16 is not supported"),
      noted("trainer.bf16_full_eval", false,
            "zerotune evaluates in the training precision (trainer.bf16)"),
      noted("trainer.fp16_opt_level", "O1", "Apex AMP (fp16) only"),
      noted("trainer.half_precision_backend", "auto", "fp16 only"),
      noted("trainer.tf32", nullptr,
            "zerotune's kernels choose their own math mode (fp32 accumulation)"),
      option("trainer.gradient_checkpointing", &TrainArgs::gradient_checkpointing, true, boolean()),
      noted("trainer.gradient_checkpointing_kwargs", nullptr,
            "PyTorch checkpointing options (use_reentrant, …)"),
      noted("trainer.activation_offloading", false,
            "zerotune plans activation memory at start-up and keeps it on the device; the numbers "
            "are the same"),
      noted("trainer.use_liger_kernel", false,
            "zerotune's kernels are its own (fused linear-cross-entropy that never materialises "
            "the logits)"),
      noted("trainer.liger_kernel_config", nullptr, "zerotune's kernels are its own"),
      noted("trainer.full_determinism", false,
            "zerotune is always deterministic (bitwise, DESIGN §1)"),
      noted("trainer.torch_compile", false, kCompile),
      noted("trainer.torch_compile_backend", nullptr, kCompile),
      noted("trainer.torch_compile_mode", nullptr, kCompile),
      noted("trainer.torchdynamo", nullptr, kCompile),
      noted("trainer.use_cache", false, "the KV cache is for generation; training does not use it"),

      // ---- devices and distribution
      acts("trainer.use_cpu", false, boolean()),
      noted("trainer.use_mps_device", false,
            "zerotune runs on the CPU or CUDA backend (compute.backend)"),
      noted("trainer.local_rank", -1,
            "the rank comes from the launcher's environment (RANK/LOCAL_RANK or MPI)"),
      noted("trainer.ddp_backend", nullptr, kDdp),
      noted("trainer.ddp_find_unused_parameters", nullptr, kDdp),
      noted("trainer.ddp_bucket_cap_mb", nullptr, kDdp),
      noted("trainer.ddp_broadcast_buffers", nullptr, kDdp),
      acts("trainer.ddp_timeout", 1800,
           integer(1)),  // the collective timeout, s (ZT_COMM_TIMEOUT_S overrides)
      noted("trainer.ddp_static_graph", nullptr, kDdp),
      noted("trainer.fsdp", nullptr, kFsdp),
      noted("trainer.fsdp_config", nullptr, kFsdp),
      noted("trainer.fsdp_min_num_params", 0, kFsdp),
      noted("trainer.fsdp_transformer_layer_cls_to_wrap", nullptr, kFsdp),
      noted("trainer.parallelism_config", nullptr,
            "zerotune has data parallelism with ZeRO only; the numbers are the same, the memory is "
            "ZeRO's"),
      acts("trainer.deepspeed", nullptr,
           any_value()),  // DeepSpeed settings: cli/deepspeed_source.h
      noted("trainer.tpu_num_cores", nullptr, kTpu),
      noted("trainer.tpu_metrics_debug", false, kTpu),
      noted("trainer.mp_parameters", "", "SageMaker model parallelism only"),
      noted("trainer.ray_scope", "last", "Ray Tune only"),

      // ---- hub
      noted("trainer.push_to_hub", false, kHub),
      noted("trainer.hub_model_id", nullptr, kHub),
      noted("trainer.hub_strategy", "every_save", kHub),
      noted("trainer.hub_token", nullptr, kHub),
      noted("trainer.hub_private_repo", nullptr, kHub),
      noted("trainer.hub_always_push", false, kHub),
      noted("trainer.hub_revision", nullptr, kHub),
      noted("trainer.push_to_hub_organization", nullptr, kHub),

      // ---- SFTConfig: model and data
      // from_pretrained's keyword arguments: checked key by key (cmd_train.cpp
      // check_model_init_kwargs).
      acts("trainer.model_init_kwargs", nullptr, any_value()),
      noted("trainer.trust_remote_code", false,
            "zerotune implements Qwen2/Llama itself; no remote code runs"),
      acts("trainer.chat_template_path", nullptr, text(true)),
      acts("trainer.dataset_text_field", "text", text()),
      // a mapping; only skip_prepare_dataset is read (refused when true), as TRL 0.25.1 reads
      // only that key (check_dataset_kwargs)
      acts("trainer.dataset_kwargs", nullptr, any_value()),
      // With packing, TRL packs each of its dataset_num_proc contiguous shards apart (the bins
      // change); tokenisation threads are compute.threads. null or 0: one shard.
      acts("trainer.dataset_num_proc", nullptr, integer(0, 1e9, true)),
      refused("trainer.shuffle_dataset", false,
              "an extra shuffle before training changes the sample order; zerotune shuffles per "
              "epoch with the seed"),
      acts("trainer.eos_token", nullptr, text(true)),
      noted("trainer.pad_token", nullptr,
            "zerotune's micro-batches are padding-free; no pad token is used"),
      acts("trainer.max_length", 1024, integer(1, 1e9, true)),  // null: no truncation
      acts("trainer.truncation_mode", "keep_start", one_of({"keep_start", "keep_end"})),
      acts("trainer.packing", false, boolean()),
      acts("trainer.packing_strategy", "bfd", one_of({"bfd"}, {"wrapped", "bfd_split"})),
      noted("trainer.padding_free", false,
            "zerotune's micro-batches are always padding-free (the same loss; a pre-tokenised "
            "'seq_lengths' column is not split, a warning says so)"),
      noted("trainer.pad_to_multiple_of", nullptr, "zerotune's micro-batches are padding-free"),
      acts("trainer.eval_packing", nullptr,
           boolean(true)),  // the eval set's samples (data_setup.cpp)
      acts("trainer.completion_only_loss", nullptr, boolean(true)),
      acts("trainer.assistant_only_loss", false, boolean()),
      acts("trainer.loss_type", "nll", one_of({"nll", "chunked_nll"}, {"dft"})),
      noted("trainer.router_aux_loss_coef", nullptr,
            "mixture-of-experts models only (zerotune trains dense models)"),

      // ---- zerotune's own
      acts("trainer.prefix_mismatch", "warn", one_of({"warn", "error"})),
      acts("trainer.chat_template_kwargs", nullptr, any_value()),  // a mapping; a row's column wins
      enum_option("trainer.nan_policy", &TrainArgs::nan_policy, NanPolicy::kError),
  };
}

}  // namespace zt::cli
