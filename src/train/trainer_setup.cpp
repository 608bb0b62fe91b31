// Trainer set-up: the datasets, the model and ZeRO engine, the step plan, the resume from a
// checkpoint (or the initial weights), and the run's outputs in exp_dir.
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "core/arena.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/log.h"
#include "data/prepare.h"
#include "dist/local_launch.h"
#include "io/hf_export.h"
#include "io/json_check.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "io/tensorboard.h"
#include "io/tied_embeddings.h"
#include "io/yaml_writer.h"
#include "model/causal_lm.h"
#include "model/micro_batch.h"
#include "optim/lr_schedule.h"
#include "text/special_tokens.h"
#include "train/batch_builder.h"
#include "train/checkpoint_dirs.h"
#include "train/checkpoint_state.h"
#include "train/device.h"
#include "train/metrics.h"
#include "train/progress.h"
#include "train/resume_checks.h"
#include "train/run_checkpoints.h"
#include "train/run_export.h"
#include "train/step_plan.h"
#include "train/trainer_impl.h"
#include "zero/zero_engine.h"

namespace zt::train {

// ---------------------------------------------------------------- set-up

namespace {

constexpr const char* kBatchKey = "trainer.per_device_train_batch_size";

// The tokens one micro-batch can hold, which sizes the model's pools: per_device_train_batch_size
// × the longest training sample (`longest`, tokens). zt::Error naming the key (and its file) when
// that is more than kMaxMicroBatchTokens.
int64_t micro_batch_capacity(const TrainArgs& a, int64_t longest) {
  const int64_t b = a.per_device_train_batch_size;
  if (longest > 0 && b > kMaxMicroBatchTokens / longest) {
    const auto o = a.key_origin(kBatchKey);
    fail(
        "{}{}: {} samples × the longest training sample ({} tokens) is more than the {} tokens a "
        "micro-batch can hold (its position ids and sequence boundaries are int32; the model's "
        "pools are sized by per_device_train_batch_size × the longest sample): expected at most "
        "{} here (a larger gradient_accumulation_steps keeps the global batch){}",
        o.at.empty() ? "" : o.at + ": ", kBatchKey, b, longest, kMaxMicroBatchTokens,
        kMaxMicroBatchTokens / longest, o.where);
  }
  return b * longest;
}

// Sets rep.built_by to the rank of the run that built the token cache, if one did (every rank
// calls it after prepare_dataset: an all-reduce). Under a launch the ranks prepare at once and
// one builds while the others wait and map its file, so rank 0's own view ("reused", or "built by
// another process") would not say what happened; "reused" is left only where no rank built it.
// One rank: rep unchanged.
void note_cache_builder(dist::Comm& comm, data::PrepareReport& rep) {
  if (comm.world_size() == 1) return;
  int64_t builder = rep.from_cache ? 0 : comm.rank() + 1;
  comm.all_reduce(&builder, 1, dist::ReduceOp::kMax);
  if (builder > 0) rep.built_by = fmt::format("rank {}", builder - 1);
}

}  // namespace

void Trainer::State::prepare_data() {
  data::PrepareReport rep;
  train.emplace(data::prepare_dataset(a.train_data, tok, tok_cfg, &rep));
  note_cache_builder(comm, rep);
  train_trl_samples = rep.trl_num_samples;
  if (rank0()) log::info("train data {}: {}", a.train_data.dataset.string(), rep.summary());
  if (a.eval_data) {
    data::PrepareReport erep;
    eval.emplace(data::prepare_dataset(data::eval_options(*a.eval_data, rep), tok, tok_cfg, &erep));
    note_cache_builder(comm, erep);
    eval_trl_samples = erep.trl_num_samples;
    if (rank0()) log::info("eval data {}: {}", a.eval_data->dataset.string(), erep.summary());
  }
  train_targets = sample_target_counts(*train);
}

void Trainer::State::build_model() {
  mcfg = load_model_config(a.model_dir);
  std::optional<SafetensorsReader> weights;
  if (!a.from_scratch) {
    weights.emplace(resolve_weights_file(a.model_dir, rank0()));
    reconcile_tied_embeddings(mcfg, *weights, rank0());
  }
  export_opts = run_export_options(a, tok, tok_cfg, tok_dir, mcfg, rank0());
  auto check_vocab = [&](const data::PreparedDataset& ds) {
    for (int32_t id : ds.all_tokens())
      if (id < 0 || id >= mcfg.vocab_size)
        fail(
            "{}: token id {} ({}) is outside the model's vocabulary [0, {}) (vocab_size of {}) — "
            "tokenizer and model do not match",
            ds.path().string(), id, text::describe_token(tok, tok_cfg, id), mcfg.vocab_size,
            mcfg.source);
  };
  check_vocab(*train);
  if (eval) check_vocab(*eval);
  ModelOptions mo;
  mo.dtype = a.dtype;
  mo.checkpointing = a.gradient_checkpointing;
  mo.keep_attention = a.selective_checkpointing;
  int64_t max_seq = max_example_tokens(*train);
  const int64_t longest = max_sample_tokens(*train);
  const int64_t train_tokens = micro_batch_capacity(a, longest);
  mo.max_tokens = train_tokens;
  if (eval) {
    max_seq = std::max(max_seq, max_example_tokens(*eval));
    mo.max_tokens = std::max(mo.max_tokens, max_example_tokens(*eval));
  }
  mo.max_seqlen = max_seq;
  dev = make_device(a.backend, comm.local_rank(), comm.local_world_size(),
                    static_cast<size_t>(a.cross_entropy_workspace_mib) << 20);
  if (rank0()) log::info("device: {}", dev.describe());
  // The engine is the model's GroupStorage: it owns the gradient window (a layer's gradients
  // live until its bucket is packed) and the weights (all of them under stages 0–2; the shard and
  // about two layers under ZeRO-3).
  zero::EngineOptions eo;
  eo.stage = a.zero_stage;
  eo.offload = a.offload_optimizer;
  // Stages 1/2 on a GPU: the all-gather after an update runs while the next forward starts.
  eo.overlap_gather = dev.device_index >= 0;
  eo.local_world_size = comm.local_world_size();
  // Offload: with one micro-batch per step, accumulating the fp32 gradient shard in host memory
  // costs no transfer beyond the one the host AdamW needs anyway and keeps the shard off the GPU;
  // with accumulation it would move the whole shard over PCIe and add it on the host every
  // micro-batch (the users' job, accumulation 64: 7.4k tokens/s against 30.9k without offload,
  // bench/README). There the shard accumulates on the device and goes to the host once per step.
  eo.host_gradient_accumulation = a.gradient_accumulation_steps == 1;
  // One micro-batch per step on one GPU: the gradients are written straight into the fp32 shard
  // (no fp32 gradient window beside it: 1.0 GiB less for a tied 1.5B model).
  eo.micro_steps_per_step = static_cast<int>(a.gradient_accumulation_steps);
  engine = std::make_unique<zero::ZeroEngine>(ParamLayout(mcfg), a.dtype, *dev.ops, comm,
                                              *dev.device_memory, *dev.host_memory, eo);
  try {
    model = std::make_unique<CausalLM>(mcfg, *dev.ops, *dev.device_memory, mo, *engine);
  } catch (const OutOfMemoryError& e) {
    // The model's pools (activations, workspace, inputs) are sized by the micro-batch's tokens.
    if (mo.max_tokens != train_tokens) throw;  // an eval example is longer: not the batch's doing
    const auto o = a.key_origin(kBatchKey);
    fail(
        "{}{}: {} samples × the longest training sample ({} tokens) = {} tokens per micro-batch, "
        "and the model's activation pools are sized for that many: {}. Lower {} (a larger "
        "gradient_accumulation_steps keeps the global batch) or trainer.max_length{}",
        o.at.empty() ? "" : o.at + ": ", kBatchKey, a.per_device_train_batch_size, longest,
        train_tokens, e.what(), kBatchKey, o.where);
  }
  init_weights.resize(static_cast<size_t>(model->layout().total_elems()) * dtype_size(a.dtype));
  const Tensor flat(init_weights.data(), a.dtype, {model->layout().total_elems()}, Device::kCPU);
  if (a.from_scratch) {
    model->init_from_scratch(a.seed, flat);
  } else {
    model->load_weights(*weights, flat);
  }
  adam.beta1 = a.adam_beta1;
  adam.beta2 = a.adam_beta2;
  adam.eps = a.adam_epsilon;
  adam.weight_decay = a.weight_decay;
  if (rank0()) {
    log::info("model {} ({}): {} parameters, {} layers, hidden {}, vocab {}; {} from {}",
              mcfg.model_type, dtype_name(a.dtype), mcfg.num_parameters(), mcfg.num_hidden_layers,
              mcfg.hidden_size, mcfg.vocab_size,
              a.from_scratch ? "initialised from scratch (config only)" : "weights",
              a.model_dir.string());
    // The model's own pools (its weights and gradients are the engine's: the ZeRO line).
    const ModelMemory mm = model->memory();
    log::info(
        "model pools: activations {}, workspace {}, inputs {}{}", format_bytes(mm.activations),
        format_bytes(mm.workspace), format_bytes(mm.inputs),
        !model->ce_shares_layer_set() ? std::string()
        : model->ce_overhang_bytes() == 0
            ? std::string(" (the cross-entropy's workspace is the recomputed layer's activations)")
            : fmt::format(" (the cross-entropy's workspace is the recomputed layer's "
                          "activations and {} beyond them)",
                          format_bytes(model->ce_overhang_bytes())));
    if (a.selective_checkpointing && a.gradient_checkpointing) {
      const int64_t attn = mcfg.num_attention_heads * mcfg.head_dim;
      const int64_t own = mcfg.num_hidden_layers - model->attention_in_gradient_memory();
      const auto kept = static_cast<size_t>(own * mo.max_tokens) *
                        (static_cast<size_t>(attn) * dtype_size(a.dtype) +
                         static_cast<size_t>(mcfg.num_attention_heads) * 4);
      log::info(
          "compute.selective_checkpointing: each layer's attention output and softmax statistics "
          "are kept ({} of the activations above, for the {} layers that do not keep them in "
          "gradient memory); only the rest is recomputed",
          format_bytes(kept), own);
    } else if (a.selective_checkpointing) {
      log::info(
          "compute.selective_checkpointing: without trainer.gradient_checkpointing it changes "
          "nothing");
    }
    log::info("ZeRO pools: {}", engine->memory().describe());
    if (engine->groups_in_shard() > 0)
      log::info(
          "gradients: one micro-batch per step on one rank: {} of {} parameter groups write their "
          "fp32 gradient straight into the gradient shard (no gradient window for them)",
          engine->groups_in_shard(), model->layout().num_groups());
    if (model->residuals_in_gradient_memory() > 0)
      log::info(
          "activations: {} of {} residual-stream checkpoints (x.1 … x.L, {} each) live in the "
          "gradient shard's columns of the layers below the one that reads them, unused until "
          "their backward",
          model->residuals_in_gradient_memory(), mcfg.num_hidden_layers,
          format_bytes(static_cast<size_t>(mo.max_tokens * mcfg.hidden_size) *
                       dtype_size(a.dtype)));
    if (model->attention_in_gradient_memory() > 0)
      log::info(
          "activations: {} of {} layers keep their attention output and lse in that gradient "
          "memory too (no memory added): their recomputation skips the attention forward",
          model->attention_in_gradient_memory(), mcfg.num_hidden_layers);
    if (a.offload_optimizer) {
      log::info("{}", engine->host_adamw_description());
      if (eo.host_gradient_accumulation) {
        log::info(
            "offload: the fp32 gradient shard accumulates in host memory (one micro-batch per "
            "step: no transfer beyond the update's)");
      } else {
        log::info(
            "offload: the fp32 gradient shard accumulates on the device and is copied to the host "
            "once per step ({} micro-batches per step; the 'gradient shard' pool above)",
            a.gradient_accumulation_steps);
      }
    }
    if (dev.device_index >= 0)
      log::info("GPU {}: {} in use after start-up, {} max allocated (the pools above)",
                dev.device_index, format_bytes(dev.device_bytes_in_use()),
                format_bytes(dev.device_max_allocated()));
  }
}

void Trainer::State::build_plan() {
  PlanConfig pc;
  pc.num_samples = train->num_samples();
  pc.batch_size = a.per_device_train_batch_size;
  pc.world_size = comm.world_size();
  pc.grad_accum = a.gradient_accumulation_steps;
  pc.num_train_epochs = a.num_train_epochs;
  const auto epochs = a.key_origin("trainer.num_train_epochs");
  pc.epochs_ref = (epochs.at.empty() ? "" : epochs.at + ": ") + "trainer.num_train_epochs";
  pc.epochs_where = epochs.where;
  pc.max_steps = a.max_steps;
  pc.drop_last = a.dataloader_drop_last;
  pc.seed = a.data_seed.value_or(a.seed);  // transformers: data_seed if not None, else seed
  const int64_t global_batch = pc.batch_size * pc.world_size * pc.grad_accum;
  plan = std::make_unique<StepPlan>(pc);
  // Fewer samples than one global batch is a short epoch, as in HF (SFT_SEMANTICS §4): one step of
  // the micro-batches there are, normalised by their own target count.
  if (rank0() && pc.num_samples < global_batch)
    log::info(
        "plan: the training set ({} samples) is smaller than one global batch ({}); each epoch is "
        "{} step(s) of {} micro-batch(es) per rank{}",
        pc.num_samples, global_batch, plan->steps_per_epoch(), plan->micro_batches_per_rank(),
        pc.world_size > 1
            ? fmt::format(", {} samples in all (accelerate's even_batches repeats samples "
                          "from the start of the epoch to fill the last round)",
                          plan->samples_per_epoch())
            : std::string());
  a.resolve_step_ratios(plan->total_steps());  // logging/eval/save steps given as ratios
  set_hf_state_steps(&a, plan->total_steps());  // trainer_state.json's values of them
  sched.kind = a.lr_scheduler_type;
  sched.base_lr = a.learning_rate;
  sched.total_steps = plan->total_steps();
  sched.warmup_steps =
      optim::resolve_warmup_steps(plan->total_steps(), a.warmup_steps, a.warmup_ratio);
  sched.init_lr = a.learning_rate;
  try {
    optim::apply_lr_scheduler_kwargs(&sched, a.lr_scheduler_kwargs);
  } catch (const Error& e) {
    const TrainArgs::KeyOrigin o = a.key_origin("trainer.lr_scheduler_kwargs");
    fail("{}trainer.lr_scheduler_kwargs (lr_scheduler_type {}): {}{}",
         o.at.empty() ? "" : o.at + ": ", name_of(sched.kind), e.what(), o.where);
  }
  // Every step's learning rate, before the first step (with max_steps, `train` checked it before
  // any rank started).
  if (const auto bad = optim::first_invalid_lr(sched)) {
    const TrainArgs::KeyOrigin o = a.key_origin("trainer.lr_scheduler_kwargs");
    fail("{}trainer.lr_scheduler_kwargs {}{}: {}", o.at.empty() ? "" : o.at + ": ",
         a.lr_scheduler_kwargs.dump(), o.where, optim::invalid_lr_reason(sched, *bad));
  }
  // transformers 4.57 builds these without scheduler_specific_kwargs: given ones do nothing.
  if (const Json& kw = a.lr_scheduler_kwargs;
      rank0() && optim::lr_schedule_ignores_kwargs(sched.kind) && !kw.is_null() &&
      !(kw.is_object() && kw.empty()) && !(kw.is_string() && kw.get<std::string>().empty())) {
    const TrainArgs::KeyOrigin o = a.key_origin("trainer.lr_scheduler_kwargs");
    log::info(
        "{}trainer.lr_scheduler_kwargs {}{} has no effect: transformers builds the {} schedule "
        "without them",
        o.at.empty() ? "" : o.at + ": ", kw.dump(), o.where, name_of(sched.kind));
  }
  // The "plan: … lr …" line waits for the resume decision (log_plan), which may keep the
  // checkpoint's learning rate.
}

void Trainer::State::log_plan() const {
  if (!rank0()) return;
  const int64_t global_batch =
      a.per_device_train_batch_size * comm.world_size() * a.gradient_accumulation_steps;
  // The schedule's lr_scheduler_kwargs, where it takes them and some are given.
  const Json& kw = a.lr_scheduler_kwargs;
  const std::string kwargs = optim::lr_schedule_ignores_kwargs(sched.kind) || kw.is_null() ||
                                     (kw.is_object() && kw.empty())
                                 ? std::string()
                                 : " and lr_scheduler_kwargs " + kw.dump();
  log::info(
      "plan: {} samples, world size {}, micro-batch {}, accumulation {} → global batch {}; {} "
      "steps/epoch, {} steps in all; lr {} {} with {} warm-up steps{}",
      train->num_samples(), comm.world_size(), a.per_device_train_batch_size,
      a.gradient_accumulation_steps, global_batch, plan->steps_per_epoch(), plan->total_steps(),
      name_of(sched.kind), sched.base_lr, sched.warmup_steps, kwargs);
}

void Trainer::State::resume_or_init() {
  int64_t pid = rank0() ? static_cast<int64_t>(getpid()) : 0;
  comm.broadcast(&pid, sizeof(pid), 0);
  owner_pid = pid;
  // Every rank resolves the checkpoint itself (the same files, the same answer or error); the
  // barrier keeps rank 0 from rewriting the run record (open_outputs) before all have read it.
  std::optional<fs::path> ckpt;
  if (a.resume_from_checkpoint)
    ckpt = *a.resume_from_checkpoint == "true" ? latest_checkpoint_of_last_run(a.exp_dir).path
                                               : fs::path(*a.resume_from_checkpoint);
  comm.barrier();
  Json st;
  std::string split_change;  // how the checkpoint's world size × micro-batch × accumulation changed
  std::optional<std::string> pipeline_note;  // the checkpoint's token pipeline is not this one's
  if (ckpt) {
    check_resume_path(*ckpt);
    // zerotune_state.json; trainer_state.json in a checkpoint from before it existed.
    const fs::path state_file = zerotune_state_path(*ckpt);
    if (!fs::exists(state_file))
      fail(
          "resume_from_checkpoint: {} has no {} or {} (not a zerotune checkpoint); to start a new "
          "run from the model in it, set model.name_or_path={}",
          ckpt->string(), kZerotuneStateName, kTrainerStateName, ckpt->string());
    try {
      st = parse_json(read_file(state_file), state_file.string());
    } catch (const Json::exception& e) {
      fail("{}: not valid JSON: {}", state_file.string(), json_error_reason(e));
    }
    // The keys the resume reads, checked before use (a hand-edited or foreign file names its key).
    if (!st.is_object())
      fail("{}: expected a JSON object (zerotune's checkpoint state), got {}", state_file.string(),
           st.type_name());
    // A checkpoint of the new layout that lost zerotune_state.json (its trainer_state.json is
    // transformers'): damaged, not foreign — starting over from its weights would lose the state.
    if (state_file.filename() == kTrainerStateName && !st.contains("plan"))
      if (const std::string own = zero_state_file_in(*ckpt); !own.empty())
        fail(
            "resume_from_checkpoint: {}: missing, though {} holds zerotune's {} (a checkpoint "
            "damaged or copied in part; {} beside it is transformers' log, not the resume state)",
            (*ckpt / kZerotuneStateName).string(), ckpt->string(), own, kTrainerStateName);
    if (!st.contains("plan") || !st["plan"].is_object())
      fail(
          "{}: no 'plan' object (the saved data order); not a zerotune checkpoint's state (a "
          "transformers/TRL checkpoint? zerotune resumes only its own; to start a new run from "
          "its weights, set model.name_or_path={})",
          state_file.string(), ckpt->string());
    for (const char* key : {"applied_steps", "num_tokens_seen"})
      if (!st.contains(key) || !st[key].is_number_integer() || st[key].get<int64_t>() < 0)
        fail("{}: '{}' must be a non-negative integer, got {}", state_file.string(), key,
             st.contains(key) ? st[key].dump() : std::string("nothing"));
    start_step = checked_resume_step(st, state_file.string(),
                                     plan_state_next_step(*plan, st["plan"], state_file.string()),
                                     *ckpt, rank0());
    // A checkpoint with zerotune_state.json has transformers' trainer_state.json beside it: the
    // run's log so far, which this run continues (rank 0 writes it). Every rank reads it, so that
    // a bad file stops them all. Its global_step is the one transformers would resume at: one
    // edited by hand (or another checkpoint's file) is refused, as zerotune_state.json's is.
    if (state_file.filename() == kZerotuneStateName && !fs::exists(*ckpt / kTrainerStateName)) {
      // transformers' file is the log only (zerotune_state.json holds what resumes): lost, the
      // run resumes with an empty log rather than refusing a checkpoint it would pick again.
      if (rank0())
        log::warn(
            "resume_from_checkpoint: {}: no {} (transformers' TrainerState, the log of the run so "
            "far); resuming from {}, the log rebuilt from the exp_dir's metrics.jsonl when that "
            "is this run's",
            ckpt->string(), kTrainerStateName, state_file.string());
    } else if (state_file.filename() == kZerotuneStateName) {
      const fs::path hf_file = *ckpt / kTrainerStateName;
      HfTrainerStateRead hf = read_hf_trainer_state(hf_file);
      if (hf.global_step != start_step)
        fail(
            "{}: 'global_step' is {}, but {} holds step {} (the checkpoint's two state files "
            "disagree: edited by hand, or copied from another checkpoint?)",
            hf_file.string(), hf.global_step, state_file.string(), start_step);
      if (rank0()) resumed_log_history = std::move(hf.log_history);
      resume_interval_steps(hf, hf_file.string(), plan->total_steps(), &a, rank0());
    }
    check_checkpoint_model(*ckpt, mcfg);
    // Logged once the state has loaded (below): a refused checkpoint prints no "re-sharded".
    split_change = plan_state_split_change(*plan, st["plan"], state_file.string());
    applied_steps = st["applied_steps"].get<int64_t>();
    num_tokens_seen = st["num_tokens_seen"].get<int64_t>();
    last_saved_step = start_step;
    // The losses summed so far (train_loss over every step). A checkpoint from before zerotune
    // kept them: this process's losses over all the steps, as transformers' _total_loss_scalar /
    // global_step after a resume.
    train_loss_steps = applied_steps;
    if (st.contains("train_loss_sum")) {
      if (!st["train_loss_sum"].is_number())
        fail("{}: 'train_loss_sum' must be a number, got {}", state_file.string(),
             st["train_loss_sum"].dump());
      train_loss_sum = st["train_loss_sum"].get<double>();
    }
    best_from_json(st, state_file);
    sched = resumed_lr_schedule(st, state_file.string(), sched, a, start_step, *ckpt, rank0());
    // A checkpoint from before zerotune recorded the AdamW values: its args.yaml's.
    std::string adam_from = state_file.string();
    if (!st.contains("optimizer"))
      if (std::optional<Json> o = adamw_from_args_yaml(*ckpt)) {
        st["optimizer"] = std::move(*o);
        adam_from = (*ckpt / "args.yaml").string();
      }
    adam = resumed_adamw(st, adam_from, adam, a, *ckpt, rank0());
    // Logged once the state has loaded, as split_change.
    pipeline_note = pipeline_change_warning(st, state_file.string(), data::kPipelineVersion);
    // args.yaml records the learning rate the run uses (as it records the effective output_dir
    // and report_to): the checkpoint's, where the config asked for another.
    if (sched.base_lr != a.learning_rate && a.resolved_config.contains("trainer") &&
        a.resolved_config["trainer"].is_object())
      a.resolved_config["trainer"]["learning_rate"] = sched.base_lr;
    // … and the AdamW hyperparameters it uses: the checkpoint's.
    if (a.resolved_config.contains("trainer") && a.resolved_config["trainer"].is_object()) {
      const Json used = adamw_to_json(adam),
                 asked =
                     adamw_to_json({a.adam_beta1, a.adam_beta2, a.adam_epsilon, a.weight_decay});
      for (const auto& [key, value] : used.items())
        if (value != asked[key]) a.resolved_config["trainer"][key] = value;
    }
    resumed_from = *ckpt;
  }
  log_plan();
  // A resumed run continues its checkpoint's run; a fresh one (or a checkpoint without an id) gets
  // a new id, drawn on rank 0.
  char id[33] = {};
  if (rank0()) {
    std::string r =
        st.contains("run_id") && st["run_id"].is_string() ? st["run_id"].get<std::string>() : "";
    if (r.size() != 32) r = new_run_id();
    std::copy(r.begin(), r.end(), id);
  }
  comm.broadcast(id, 32, 0);
  run_id = std::string(id, 32);
  if (!ckpt) {
    engine->init_from_flat(
        Tensor(init_weights.data(), a.dtype, {model->layout().total_elems()}, Device::kCPU));
    std::vector<std::byte>().swap(init_weights);
    return;
  }
  std::vector<std::byte>().swap(init_weights);
  engine->load_state(*ckpt);
  // Every rank's Adam step count against the run's (a state file of another save of the same world
  // size is read by its own rank only): all-reduce the largest difference.
  int64_t off = engine->adam_step() != applied_steps ? 1 : 0;
  comm.all_reduce(&off, 1, dist::ReduceOp::kMax);
  if (off != 0)
    fail(
        "resume_from_checkpoint: {}: a zero_state_rank*.bin holds another Adam step count than "
        "{}'s applied_steps ({}): at least one state file comes from another save",
        ckpt->string(), zerotune_state_path(*ckpt).filename().string(), applied_steps);
  if (!split_change.empty() && rank0())
    log::info(
        "resume_from_checkpoint: {}: {}. The same global batch, so every step holds the same "
        "samples; the ZeRO state is re-sharded where the world size changed. The sums run in "
        "another order, so the losses agree with an uninterrupted run to rounding, not bitwise",
        ckpt->string(), split_change);
  if (pipeline_note && rank0()) log::warn("{}", *pipeline_note);
  if (rank0()) log::info("resumed from {} at step {}", ckpt->string(), start_step);
}

void Trainer::State::open_outputs() {
  if (!rank0()) return;
  std::error_code ec;
  fs::create_directories(a.exp_dir, ec);
  if (ec) fail("exp_dir: cannot create {}: {}", a.exp_dir.string(), ec.message());
  if (!dir_lock.held()) dir_lock = RunDirLock(a.exp_dir);  // before anything is written there
  for (const auto& p : clean_stale_checkpoint_dirs(a.exp_dir))
    log::info("cleaned {} left by an interrupted run", p.string());
  // The temporary files of atomic writes there (args.yaml, the run record, metrics.jsonl) that a
  // killed run never renamed into place.
  // Only those three names: another program's atomic write there (a plot beside the logs) is not
  // zerotune's to judge.
  const auto run_file_temp_pid = [](std::string_view name) -> std::optional<int64_t> {
    for (std::string_view f : {"args.yaml", kRunRecordName, "metrics.jsonl"})
      if (name.starts_with(f) && name.substr(f.size()).starts_with(".tmp."))
        return atomic_write_temp_pid(name);
    return std::nullopt;
  };
  for (const auto& p : clean_stale_temp_files(a.exp_dir, run_file_temp_pid))
    log::info("cleaned {} left by an interrupted run", p.string());
  if (!output_dir_at_start) {
    clean_stale_export_dirs(a.output_dir);  // logs what it removes or restores
    output_dir_at_start = model_files_fingerprint(a.output_dir);
  }
  // metrics.jsonl is the log of the exp_dir's last run: a checkpoint of the older layout (no log of
  // its own) continues it only when that run is the checkpoint's.
  const std::optional<RunRecord> last_run = read_run_record(a.exp_dir);
  const bool metrics_are_the_checkpoints = last_run && last_run->run_id == run_id;
  write_run_record(a.exp_dir,
                   {.run_id = run_id, .started = "", .resumed_from = resumed_from.string()});
  if (auto others = other_runs_checkpoints(a.exp_dir, run_id); !others.empty()) {
    std::string names;
    for (const auto& c : others) names += (names.empty() ? "" : ", ") + describe_checkpoint(c);
    log::warn(
        "{} holds {} checkpoint(s) of another run: {}. This run (id {}) leaves them alone: "
        "save_total_limit rotates only this run's checkpoints and resume_from_checkpoint: true "
        "resumes only this run's (a checkpoint this run saves at the same step replaces the "
        "other's). Use a fresh exp_dir to keep runs apart",
        a.exp_dir.string(), others.size(), names, run_id);
  }
  write_file_atomic(a.exp_dir / "args.yaml", json_to_yaml(a.resolved_config));
  dist::note_checkpoint_for_launcher(a.exp_dir.string(), resumed_from.string(), false);
  std::optional<int64_t> keep;
  if (start_step > 0) keep = start_step;
  metrics = std::make_unique<MetricsWriter>(a.exp_dir / "metrics.jsonl", keep);
  // A resumed run's log continues its checkpoint's (transformers reloads state.log_history); a
  // checkpoint from before zerotune wrote one: metrics.jsonl's records through its step.
  if (resumed_log_history) {
    log_history = std::move(*resumed_log_history);
  } else if (start_step > 0 && metrics_are_the_checkpoints) {
    log_history = metrics->kept_records();
  } else if (start_step > 0) {
    log::warn(
        "resume_from_checkpoint: {} (written before checkpoints held their log) is not of the run "
        "whose metrics.jsonl is in {}: the checkpoints' log_history starts at this run's step {}",
        resumed_from.string(), a.exp_dir.string(), start_step + 1);
  }
  if (!a.logging_dir.empty()) {
    io::TensorBoardWriterOptions o;
    if (start_step > 0) o.purge_step = start_step + 1;
    tb = std::make_unique<io::TensorBoardWriter>(a.logging_dir, o);
  }
  progress =
      std::make_unique<ProgressDisplay>(stdout, ProgressDisplay::stream_is_tty(stdout),
                                        plan->total_steps(), start_step, ProgressDisplay::now());
}

void Trainer::State::log_record(const MetricRecord& rec, LogTo to) {
  if (!rank0()) return;
  progress->log(rec);
  if (to != LogTo::kNoFile) metrics->write(rec);
  if (to == LogTo::kAll) log_history.push_back(rec.to_json());
  if (tb) {
    auto scalars = tensorboard_scalars(rec);
    tb->add_scalars(static_cast<int64_t>(rec.number("step")), scalars);
  }
}

}  // namespace zt::train
