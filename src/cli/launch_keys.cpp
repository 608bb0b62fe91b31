// The accelerate / DeepSpeed key tables (see launch_keys.h for sources and meaning).
#include "cli/launch_keys.h"

namespace zt::cli {
namespace {

constexpr std::string_view kTpu = "TPU only";
constexpr std::string_view kMultiNode =
    "multi-machine jobs run one `zerotune launch --nnodes N --node_rank R` per machine, or start "
    "each rank with mpirun, srun or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT";
constexpr std::string_view kZeroTuning =
    "a DeepSpeed tuning knob; zerotune's ZeRO engine has its own buckets and schedule, and the "
    "numbers do not depend on them";

constexpr LaunchKey kAccelerateTop[] = {
    {"compute_environment", "LOCAL_MACHINE", "zerotune runs its ranks on the machine it is started on"},
    {"debug", "false", "accelerate's collective-shape checks; zerotune's transports always check sizes"},
    {"distributed_type", "", ""},
    {"downcast_bf16", "no|false", kTpu},
    {"enable_cpu_affinity", "false", "zerotune sets no CPU affinity (compute.threads sets threads per rank)"},
    {"gpu_ids", "all|~", "zerotune uses one GPU per local rank in order; choose them with CUDA_VISIBLE_DEVICES"},
    {"machine_rank", "", ""},
    {"main_process_ip", "", ""},
    {"main_process_port", "", ""},
    {"main_training_function", "main", "zerotune's entry point is `zerotune train`"},
    {"mixed_precision", "", ""},
    {"num_machines", "", ""},
    {"num_processes", "", ""},
    {"rdzv_backend", "static|c10d", "zerotune's ranks meet through its own TCP rendezvous (or MPI)"},
    {"same_network", "true", kMultiNode},
    {"tpu_env", "[]", kTpu},
    {"tpu_name", "~", kTpu},
    {"tpu_zone", "~", kTpu},
    {"tpu_use_cluster", "false", kTpu},
    {"tpu_use_sudo", "false", kTpu},
    {"tpu_vm", "~", kTpu},
    {"commands", "~", kTpu},
    {"command_file", "~", kTpu},
    {"use_cpu", "", ""},
    {"deepspeed_config", "", ""},
    {"fsdp_config", "", ""},
    {"dynamo_config", "{}", "zerotune is compiled ahead of time (no torch.compile)"},
    {"dynamo_backend", "no|NO", "zerotune is compiled ahead of time (no torch.compile)"},
    {"megatron_lm_config", "{}", "Megatron-LM only"},
    {"ipex_config", "{}", "Intel Extension for PyTorch only"},
    {"mpirun_config", "{}", "zerotune launch starts its ranks itself; under MPI run `mpirun -np N zerotune train …`"},
    {"parallelism_config", "{}",
     "zerotune has data parallelism with ZeRO only (no tensor/context/sequence parallelism); the "
     "numbers are the same, the memory per rank is ZeRO's"},
    {"fp8_config", "{}", "zerotune has no fp8 training; mixed_precision decides the precision"},
};

constexpr LaunchKey kAccelerateDeepSpeed[] = {
    {"zero_stage", "", ""},
    {"offload_optimizer_device", "", ""},
    {"offload_param_device", "", ""},
    {"gradient_accumulation_steps", "", ""},
    {"gradient_clipping", "", ""},
    {"deepspeed_config_file", "", ""},
    {"zero3_init_flag", "*", "zerotune builds and shards the model itself (no zero.Init)"},
    {"zero3_save_16bit_model", "*", "zerotune always saves the whole model in HF format at the end"},
    {"deepspeed_multinode_launcher", "standard|pdsh|~", kMultiNode},
    {"deepspeed_hostfile", "~", kMultiNode},
    {"deepspeed_exclusion_filter", "~", kMultiNode},
    {"deepspeed_inclusion_filter", "~", kMultiNode},
    {"offload_optimizer_nvme_path", "~|none", "zerotune offloads to CPU memory only"},
    {"offload_param_nvme_path", "~|none", "zerotune offloads to CPU memory only"},
    {"deepspeed_moe_layer_cls_names", "~", "zerotune trains dense Qwen2/Llama models (no MoE)"},
};

constexpr std::string_view kFsdpLayout =
    "an FSDP wrapping/prefetch detail; zerotune shards per transformer layer and the numbers do not "
    "depend on it";
constexpr LaunchKey kAccelerateFsdp[] = {
    {"fsdp_sharding_strategy", "", ""},
    {"fsdp_offload_params", "", ""},
    {"fsdp_version", "", ""},
    {"fsdp_reshard_after_forward", "", ""},
    {"fsdp_auto_wrap_policy", "*", kFsdpLayout},
    {"fsdp_backward_prefetch", "*", kFsdpLayout},
    {"fsdp_backward_prefetch_policy", "*", kFsdpLayout},
    {"fsdp_forward_prefetch", "*", kFsdpLayout},
    {"fsdp_transformer_layer_cls_to_wrap", "*", kFsdpLayout},
    {"fsdp_min_num_params", "*", kFsdpLayout},
    {"fsdp_use_orig_params", "*", kFsdpLayout},
    {"fsdp_sync_module_states", "*", "zerotune loads the same weights on every rank"},
    {"fsdp_cpu_ram_efficient_loading", "*", "zerotune loads the weights itself (memory-mapped safetensors)"},
    {"fsdp_state_dict_type", "*", "zerotune's checkpoints are its own (HF model + per-rank ZeRO state)"},
    {"fsdp_activation_checkpointing", "false|~",
     "zerotune's activation checkpointing is trainer.gradient_checkpointing"},
};

constexpr LaunchKey kDeepSpeedJson[] = {
    {"zero_optimization", "", ""},
    {"bf16", "", ""},
    {"bfloat16", "", ""},
    {"fp16", "", ""},
    {"gradient_accumulation_steps", "", ""},
    {"gradient_clipping", "", ""},
    // Not "auto": transformers' DeepSpeed integration fills "auto" from the trainer and refuses a
    // value that differs from it; zerotune reads the trainer's values, so anything else gets a note.
    {"train_batch_size", "auto|~", "zerotune's global batch is per_device_train_batch_size × world "
                                   "size × gradient_accumulation_steps (trainer.*)"},
    {"train_micro_batch_size_per_gpu", "auto|~",
     "zerotune's micro-batch is trainer.per_device_train_batch_size"},
    // AdamW with every value "auto" is the trainer's AdamW, as transformers fills it.
    {"optimizer", "~|type:AdamW",
     "zerotune's optimizer is trainer.optim / learning_rate / adam_* / weight_decay (transformers "
     "fills DeepSpeed's \"auto\" values from them and refuses others that differ)"},
    // A scheduler block is noted even with "auto" values: under transformers DeepSpeed's own
    // scheduler (WarmupLR, WarmupDecayLR) shapes the schedule, not trainer.lr_scheduler_type.
    {"scheduler", "~", "zerotune's schedule is trainer.lr_scheduler_type / warmup_* (transformers "
                       "fills DeepSpeed's \"auto\" values from them and refuses others that differ)"},
    {"steps_per_print", "*", "zerotune logs every trainer.logging_steps"},
    {"wall_clock_breakdown", "false", "zerotune reports throughput in metrics.jsonl"},
    {"memory_breakdown", "false", "zerotune reports its memory plan at start-up"},
    {"dump_state", "false", "debug output of DeepSpeed"},
    {"zero_allow_untested_optimizer", "*", "zerotune runs its own AdamW"},
    {"zero_force_ds_cpu_optimizer", "*", "zerotune runs its own AdamW"},
    {"communication_data_type", "~|fp32",
     "zerotune always reduces gradients in fp32 in rank order (DESIGN §6)"},
    {"seq_parallel_comm_data_type", "*", "no sequence parallelism in zerotune"},
    {"prescale_gradients", "false", "zerotune normalises once by the global target-token count"},
    {"gradient_predivide_factor", "1|1.0", "zerotune normalises once by the global target-token count"},
    {"sparse_gradients", "false", "zerotune's gradients are dense"},
    {"disable_allgather", "false", kZeroTuning},
    {"graph_harvesting", "false", "CUDA-graph capture of DeepSpeed kernels"},
    {"amp", "{}", "Apex AMP is not used; the precision is trainer.bf16", true},
    {"data_types", "{}", "zerotune accumulates gradients in fp32"},
    {"dataloader_drop_last", "*", "the trainer's dataloader_drop_last decides"},
    {"activation_checkpointing", "{}", "zerotune's activation checkpointing is trainer.gradient_checkpointing"},
    {"checkpoint", "{}", "zerotune's checkpoints are its own (HF model + per-rank ZeRO state)"},
    {"flops_profiler", "{}", "profiling output of DeepSpeed"},
    {"tensorboard", "{}", "zerotune writes TensorBoard events per trainer.report_to / logging_dir"},
    {"wandb", "{}", "DeepSpeed's own monitor; zerotune logs to metrics.jsonl and TensorBoard"},
    {"csv_monitor", "{}", "DeepSpeed's own monitor; zerotune logs to metrics.jsonl and TensorBoard"},
    {"comet", "{}", "DeepSpeed's own monitor; zerotune logs to metrics.jsonl and TensorBoard"},
    {"comms_logger", "{}", "DeepSpeed's communication log"},
    {"timers", "{}", "DeepSpeed's timers"},
    {"aio", "{}", "NVMe offload I/O (zerotune offloads to CPU memory only)"},
    {"autotuning", "{}", "DeepSpeed's autotuner"},
    {"elasticity", "{}", "elastic training is not supported; the batch is fixed", true},
    {"compile", "{}", "zerotune is compiled ahead of time (no torch.compile)"},
    {"nebula", "{}", "Azure Nebula checkpointing"},
    {"pipeline", "{}", "no pipeline parallelism in zerotune"},
    {"tensor_parallel", "{}", "no tensor parallelism in zerotune (the numbers are the same; memory is ZeRO's)"},
    {"sequence_parallel_size", "1|~", "no sequence parallelism in zerotune"},
    {"use_data_before_expert_parallelism", "false", "no MoE in zerotune"},
    {"hybrid_engine", "{}", "RLHF inference engine of DeepSpeed-Chat"},
    {"torch_autocast", "{}", "the precision is trainer.bf16", true},
    {"sparse_attention", "{}", "zerotune's attention is exact (dense causal)", true},
    {"eigenvalue", "{}", "DeepSpeed's eigenvalue analysis", true},
    {"progressive_layer_drop", "{}", "progressive layer drop changes the model's computation", true},
    {"compression_training", "{}", "compression (quantisation/pruning) training is not supported", true},
    {"quantize_training", "{}", "quantised training is not supported", true},
    {"weight_quantization", "{}", "quantised weights are not supported", true},
    {"data_efficiency", "{}", "curriculum / data routing changes the samples of each step", true},
    {"curriculum_learning", "{}", "curriculum learning changes the samples of each step", true},
    {"vocabulary_size", "*", "the vocabulary is the model's config.json vocab_size"},
};

constexpr LaunchKey kDeepSpeedZero[] = {
    {"stage", "", ""},
    {"offload_optimizer", "", ""},
    {"offload_param", "", ""},
    {"cpu_offload", "", ""},  // deprecated DeepSpeed spelling of offload_optimizer: {device: cpu}
    {"contiguous_gradients", "*", kZeroTuning},
    {"reduce_scatter", "*", kZeroTuning},
    {"reduce_bucket_size", "*", kZeroTuning},
    {"use_multi_rank_bucket_allreduce", "*", kZeroTuning},
    {"allgather_partitions", "*", kZeroTuning},
    {"allgather_bucket_size", "*", kZeroTuning},
    {"overlap_comm", "*", kZeroTuning},
    {"load_from_fp32_weights", "*", "zerotune's checkpoints hold the fp32 master weights"},
    {"elastic_checkpoint", "false", "elastic checkpoints are not supported"},
    {"zenflow", "~|{}", "ZenFlow's stale-gradient updates change the optimizer's arithmetic", true},
    {"sub_group_size", "*", kZeroTuning},
    {"cpu_offload_param", "~|false", "parameter offload is not supported; parameters stay on the device"},
    {"cpu_offload_use_pin_memory", "*", kZeroTuning},
    {"prefetch_bucket_size", "*", kZeroTuning},
    {"stage3_prefetch_bucket_size", "*", kZeroTuning},
    {"param_persistence_threshold", "*", kZeroTuning},
    {"stage3_param_persistence_threshold", "*", kZeroTuning},
    {"model_persistence_threshold", "*", kZeroTuning},
    {"stage3_model_persistence_threshold", "*", kZeroTuning},
    {"max_live_parameters", "*", kZeroTuning},
    {"stage3_max_live_parameters", "*", kZeroTuning},
    {"max_reuse_distance", "*", kZeroTuning},
    {"stage3_max_reuse_distance", "*", kZeroTuning},
    {"gather_16bit_weights_on_model_save", "*", "zerotune always saves the whole model at the end"},
    {"stage3_gather_16bit_weights_on_model_save", "*", "zerotune always saves the whole model at the end"},
    {"stage3_gather_fp16_weights_on_model_save", "*", "zerotune always saves the whole model at the end"},
    {"module_granularity_threshold", "*", kZeroTuning},
    {"stage3_module_granularity_threshold", "*", kZeroTuning},
    {"use_all_reduce_for_fetch_params", "*", kZeroTuning},
    {"stage3_use_all_reduce_for_fetch_params", "*", kZeroTuning},
    {"allgather_sequential", "*", kZeroTuning},
    {"stage3_allgather_sequential", "*", kZeroTuning},
    {"partition_stream_chunk_size", "*", kZeroTuning},
    {"stage3_partition_stream_chunk_size", "*", kZeroTuning},
    {"ignore_unused_parameters", "*", "every parameter of a Qwen2/Llama model is used"},
    {"legacy_stage1", "false", kZeroTuning},
    {"round_robin_gradients", "*", kZeroTuning},
    {"zero_hpz_partition_size", "*", kZeroTuning},
    {"zero_quantized_weights", "false", "ZeRO++ quantised all-gathers change the weights each rank sees", true},
    {"zero_quantized_nontrainable_weights", "false", "ZeRO++ quantised weights are not supported", true},
    {"zero_quantized_gradients", "false", "ZeRO++ quantised gradient reduction changes the gradients", true},
    {"zeropp_loco_param", "~|{}", "ZeRO++ LoCo error feedback is not supported", true},
    {"mics_shard_size", "*", kZeroTuning},
    {"mics_hierarchical_params_gather", "*", kZeroTuning},
    {"memory_efficient_linear", "*", kZeroTuning},
    {"pipeline_loading_checkpoint", "*", kZeroTuning},
    {"override_module_apply", "*", kZeroTuning},
    {"log_trace_cache_warnings", "*", kZeroTuning},
    {"enable_sanity_checks", "*", kZeroTuning},
    {"save_muon_momentum_buffer_in_memory", "*", "zerotune's optimizer is AdamW"},
    {"leaf_module", "*", kZeroTuning},
};

constexpr LaunchKey kDeepSpeedOffloadOptimizer[] = {
    {"device", "", ""},
    {"nvme_path", "~", "zerotune offloads to CPU memory only"},
    {"buffer_count", "*", kZeroTuning},
    {"pin_memory", "*", "zerotune's offloaded state is always in pinned host memory"},
    {"pipeline", "*", kZeroTuning},
    {"pipeline_read", "*", kZeroTuning},
    {"pipeline_write", "*", kZeroTuning},
    {"fast_init", "*", kZeroTuning},
    {"ratio", "*", "zerotune offloads the whole optimizer state; the numbers are the same"},
    {"super_offload", "*", kZeroTuning},
    {"convert_grad_on_cpu", "*", kZeroTuning},
    {"cpuadam_cores_perc", "*", "compute.threads sets the threads of zerotune's CPU AdamW"},
};

constexpr LaunchKey kDeepSpeedOffloadParam[] = {
    {"device", "", ""},
    {"nvme_path", "~", "zerotune offloads to CPU memory only"},
    {"buffer_count", "*", kZeroTuning},
    {"buffer_size", "*", kZeroTuning},
    {"max_in_cpu", "*", kZeroTuning},
    {"pin_memory", "*", kZeroTuning},
};

constexpr LaunchKey kDeepSpeedPrecision[] = {
    {"enabled", "", ""},
    {"immediate_grad_update", "*", "zerotune's optimizer step is AdamW on fp32 master weights"},
    {"check_grad_overflow", "*", "bf16 needs no overflow check; trainer.nan_policy handles non-finite losses"},
    {"bf16_master_weights_and_grads", "false|~", "zerotune keeps fp32 master weights and gradients", true},
    {"bf16_optimizer_states", "false|~", "zerotune keeps fp32 Adam moments", true},
    {"auto_cast", "*", "fp16 is not supported"},
    {"loss_scale", "*", "fp16 is not supported"},
    {"initial_scale_power", "*", "fp16 is not supported"},
    {"loss_scale_window", "*", "fp16 is not supported"},
    {"hysteresis", "*", "fp16 is not supported"},
    {"consecutive_hysteresis", "*", "fp16 is not supported"},
    {"min_loss_scale", "*", "fp16 is not supported"},
    {"fused_mode", "*", "fp16 is not supported"},
    {"fp16_master_weights_and_grads", "*", "fp16 is not supported"},
};

}  // namespace

std::span<const LaunchKey> accelerate_top_keys() { return kAccelerateTop; }
std::span<const LaunchKey> accelerate_deepspeed_keys() { return kAccelerateDeepSpeed; }
std::span<const LaunchKey> accelerate_fsdp_keys() { return kAccelerateFsdp; }
std::span<const LaunchKey> deepspeed_json_keys() { return kDeepSpeedJson; }
std::span<const LaunchKey> deepspeed_zero_keys() { return kDeepSpeedZero; }
std::span<const LaunchKey> deepspeed_offload_optimizer_keys() { return kDeepSpeedOffloadOptimizer; }
std::span<const LaunchKey> deepspeed_offload_param_keys() { return kDeepSpeedOffloadParam; }
std::span<const LaunchKey> deepspeed_precision_keys() { return kDeepSpeedPrecision; }

const LaunchKey* find_launch_key(std::span<const LaunchKey> keys, std::string_view name) {
  for (const auto& k : keys)
    if (k.name == name) return &k;
  return nullptr;
}

}  // namespace zt::cli
