#include "train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

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
#include "optim/lr_schedule.h"
#include "text/special_tokens.h"
#include "train/batch_builder.h"
#include "train/checkpoint_dirs.h"
#include "train/device.h"
#include "train/metrics.h"
#include "train/micro_batch_balance.h"
#include "train/progress.h"
#include "train/resume_checks.h"
#include "train/run_checkpoints.h"
#include "train/run_export.h"
#include "train/step_plan.h"
#include "zero/zero_engine.h"

namespace zt::train {
namespace fs = std::filesystem;

namespace {

// The stop signal received (SIGINT/SIGTERM), 0: none; set by on_stop_signal only.
volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int sig) { g_stop = sig; }

// The line on_stop_signal_at_once prints (set only while a DefaultStopSignals with a line lives).
const std::string* volatile g_stop_line = nullptr;
// Prints g_stop_line to stderr, then ends the process by the signal's default action (re-raised:
// blocked until this handler returns), so the exit status is the one the default action gives.
extern "C" void on_stop_signal_at_once(int sig) {
  if (const std::string* line = g_stop_line) {
    ssize_t ignored = ::write(STDERR_FILENO, line->data(), line->size());
    (void)ignored;
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

// While alive, SIGINT and SIGTERM end the process at once by their default action, after
// printing `line` (one whole line, ending in '\n') to stderr when it is not empty; the handlers
// installed before are restored on destruction. For the data preparation, whose tokenisation
// (minutes on a large dataset) checks no stop flag.
class DefaultStopSignals {
 public:
  explicit DefaultStopSignals(std::string line) : line_(std::move(line)) {
    struct sigaction sa {};
    sa.sa_handler = line_.empty() ? SIG_DFL : on_stop_signal_at_once;
    sigemptyset(&sa.sa_mask);
    for (int sig : kSignals) sigaddset(&sa.sa_mask, sig);  // one line, also for SIGINT + SIGTERM
    if (!line_.empty()) g_stop_line = &line_;
    for (int i = 0; i < 2; ++i) sigaction(kSignals[i], &sa, &saved_[i]);
  }
  ~DefaultStopSignals() {
    for (int i = 0; i < 2; ++i) sigaction(kSignals[i], &saved_[i], nullptr);
    g_stop_line = nullptr;
  }
  DefaultStopSignals(const DefaultStopSignals&) = delete;
  DefaultStopSignals& operator=(const DefaultStopSignals&) = delete;

 private:
  static constexpr int kSignals[2] = {SIGINT, SIGTERM};
  std::string line_;
  struct sigaction saved_[2];
};

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// The stop signal (SIGINT/SIGTERM) any rank has received, 0 when none (the larger number when
// ranks got different ones). Collective: every rank calls it at the same points, so all of them
// take the same decision.
int any_rank_stopping(dist::Comm& comm) {
  int64_t stop = g_stop;
  comm.all_reduce(&stop, 1, dist::ReduceOp::kMax);
  return static_cast<int>(stop);
}

// "SIGINT" / "SIGTERM" for the stop signal `sig`, "signal <sig>" for another.
std::string stop_signal_name(int sig) {
  if (sig == SIGINT) return "SIGINT";
  if (sig == SIGTERM) return "SIGTERM";
  return fmt::format("signal {}", sig);
}

// Peak resident memory of this process (VmHWM), GiB.
double peak_memory_gib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / (1024.0 * 1024.0);
  return 0.0;
}

}  // namespace

struct Trainer::State {
  State(TrainArgs args, dist::Comm& c, const text::Tokenizer& t, const text::TokenizerConfig& tc,
        fs::path td)
      : a(std::move(args)), comm(c), tok(t), tok_cfg(tc), tok_dir(std::move(td)) {}

  TrainArgs a;
  dist::Comm& comm;
  const text::Tokenizer& tok;
  const text::TokenizerConfig& tok_cfg;
  fs::path tok_dir;
  bool rank0() const { return comm.rank() == 0; }

  std::optional<data::PreparedDataset> train, eval;
  std::vector<int64_t> train_targets;
  ModelConfig mcfg;
  HfExportOptions export_opts;  // checkpoint-<step>/ and output_dir (train/run_export.h)
  DeviceContext dev;            // Ops + device/host memory of compute.backend (train/device.h)
  std::unique_ptr<zero::ZeroEngine> engine;  // the model's GroupStorage: declared first, dies last
  std::unique_ptr<CausalLM> model;
  // The initial weights (compute dtype, flat, host) for the engine to shard, then dropped.
  std::vector<std::byte> init_weights;
  std::unique_ptr<StepPlan> plan;
  optim::LrSchedule sched;
  optim::AdamWParams adam;
  int64_t start_step = 0;     // first step this run executes
  int64_t applied_steps = 0;  // optimizer updates so far (the LR schedule's position)
  int64_t num_tokens_seen = 0;
  int64_t owner_pid = 0;  // rank 0's pid: names the shared checkpoint staging directory
  std::string run_id;     // ties checkpoints to this run (train/run_checkpoints.h)
  fs::path resumed_from;  // the checkpoint this run resumed from, empty for a fresh start
  // The best model (metric_for_best_model; transformers' TrainerState best_metric,
  // best_global_step, best_model_checkpoint): kept in trainer_state.json across resumes.
  std::optional<double> best_metric;
  int64_t best_global_step = 0;  // 0: none yet
  fs::path best_checkpoint;      // empty until a checkpoint of best_global_step is saved
  bool best_loaded = false;      // load_best_model_at_end has put its weights into the engine
  // An evaluation due at a step was abandoned by a stop signal: the checkpoint of that step
  // records it (eval_pending) and the resumed run evaluates first.
  int64_t eval_abandoned_step = -1;
  bool eval_pending = false;  // read from the resumed checkpoint
  std::unique_ptr<MetricsWriter> metrics;
  std::unique_ptr<io::TensorBoardWriter> tb;
  std::unique_ptr<ProgressDisplay> progress;
  RunDirLock dir_lock;  // rank 0: one run at a time in exp_dir (run_dir_lock.h)

  void prepare_data();
  void build_model();
  void build_plan();
  void resume_or_init();
  void open_outputs();
  void log_record(const MetricRecord& rec);
  StepStats train_step(int64_t k, StepSamples& ss, TrainSummary& sum);
  std::optional<MetricRecord> evaluate(int64_t global_step, double epoch);
  // Whether the evaluation `rec` of step `global_step` is a new best metric_for_best_model
  // (strictly better; a NaN never is); records it. False without a metric_for_best_model.
  bool note_best(const MetricRecord& rec, int64_t global_step);
  // The best state saved with a checkpoint / read back on resume (keys as transformers').
  void best_to_json(Json& st) const;
  void best_from_json(const Json& st, const fs::path& state_file);
  // After training, as transformers: load_best_model_at_end puts the best checkpoint's weights
  // into the engine (exactly; a best checkpoint removed during the run: a warning, the last model
  // stays), and with save_total_limit 1 this run's checkpoints other than the best are deleted.
  void finish_best();
  // interrupt: the checkpoint written after a stop signal (recorded as such for the launcher).
  fs::path save_checkpoint(int64_t global_step, bool interrupt);
  // Writes the final model to output_dir. When that fails (a full disk, output_dir removed or made
  // read-only during the run: start-up checks it is writable), every rank throws zt::Error with
  // the export's message and where the trained weights are kept: the best checkpoint when
  // load_best_model_at_end loaded it, `last_checkpoint` when it holds step `global_step`, else a
  // checkpoint written now into exp_dir (an HF model directory with the optimizer state: loadable
  // and resumable), else (that failed too) both messages.
  void export_final(int64_t global_step, const fs::path& last_checkpoint);
  std::vector<NamedTensor> named(const std::vector<float>& flat) const;
  std::string step_rows(const StepSamples& ss) const;
};

// ---------------------------------------------------------------- set-up

void Trainer::State::prepare_data() {
  data::PrepareReport rep;
  train.emplace(data::prepare_dataset(a.train_data, tok, tok_cfg, &rep));
  if (rank0()) log::info("train data {}: {}", a.train_data.dataset.string(), rep.summary());
  if (a.eval_data) {
    data::PrepareReport erep;
    eval.emplace(data::prepare_dataset(*a.eval_data, tok, tok_cfg, &erep));
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
  mo.max_tokens = a.per_device_train_batch_size * max_sample_tokens(*train);
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
  model = std::make_unique<CausalLM>(mcfg, *dev.ops, *dev.device_memory, mo, *engine);
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
  sched.kind = a.lr_scheduler_type;
  sched.base_lr = a.learning_rate;
  sched.total_steps = plan->total_steps();
  sched.warmup_steps =
      optim::resolve_warmup_steps(plan->total_steps(), a.warmup_steps, a.warmup_ratio);
  if (rank0())
    log::info(
        "plan: {} samples, world size {}, micro-batch {}, accumulation {} → global batch {}; {} "
        "steps/epoch, {} steps in all; lr {} {} with {} warm-up steps",
        pc.num_samples, pc.world_size, pc.batch_size, pc.grad_accum, global_batch,
        plan->steps_per_epoch(), plan->total_steps(), name_of(a.lr_scheduler_type), a.learning_rate,
        sched.warmup_steps);
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
  if (ckpt) {
    check_resume_path(*ckpt);
    fs::path state_file = *ckpt / "trainer_state.json";
    if (!fs::exists(state_file))
      fail(
          "resume_from_checkpoint: {} has no trainer_state.json (not a zerotune checkpoint); to "
          "start a new run from the model in it, set model.name_or_path={}",
          ckpt->string(), ckpt->string());
    try {
      st = parse_json(read_file(state_file), state_file.string());
    } catch (const Json::exception& e) {
      fail("{}: not valid JSON: {}", state_file.string(), json_error_reason(e));
    }
    // The keys the resume reads, checked before use (a hand-edited or foreign file names its key).
    if (!st.is_object())
      fail("{}: expected a JSON object (a zerotune trainer_state.json), got {}",
           state_file.string(), st.type_name());
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
    check_checkpoint_model(*ckpt, mcfg);
    // Logged once the state has loaded (below): a refused checkpoint prints no "re-sharded".
    split_change = plan_state_split_change(*plan, st["plan"], state_file.string());
    applied_steps = st["applied_steps"].get<int64_t>();
    num_tokens_seen = st["num_tokens_seen"].get<int64_t>();
    best_from_json(st, state_file);
    resumed_from = *ckpt;
  }
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
        "trainer_state.json's applied_steps ({}): at least one state file comes from another save",
        ckpt->string(), applied_steps);
  if (!split_change.empty() && rank0())
    log::info(
        "resume_from_checkpoint: {}: {}. The same global batch, so every step holds the same "
        "samples; the ZeRO state is re-sharded where the world size changed. The sums run in "
        "another order, so the losses agree with an uninterrupted run to rounding, not bitwise",
        ckpt->string(), split_change);
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
  clean_stale_export_dirs(a.output_dir);  // logs what it removes or restores
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
  if (!a.logging_dir.empty()) {
    io::TensorBoardWriterOptions o;
    if (start_step > 0) o.purge_step = start_step + 1;
    tb = std::make_unique<io::TensorBoardWriter>(a.logging_dir, o);
  }
  progress =
      std::make_unique<ProgressDisplay>(stdout, ProgressDisplay::stream_is_tty(stdout),
                                        plan->total_steps(), start_step, ProgressDisplay::now());
}

void Trainer::State::log_record(const MetricRecord& rec) {
  if (!rank0()) return;
  progress->log(rec);
  metrics->write(rec);
  if (tb) {
    auto scalars = tensorboard_scalars(rec);
    tb->add_scalars(static_cast<int64_t>(rec.number("step")), scalars);
  }
}

// ---------------------------------------------------------------- one optimizer step

// Optimizer step k (0-based) on this rank's micro-batches of `ss`: forward/backward of each with
// the loss scaled by 1/N (the model hands each group's gradient to the engine, which
// reduce-scatters it), the loss statistics all-reduced, then clip + AdamW (engine.finish_step) —
// or a skipped step (N = 0, or a non-finite loss / norm under nan_policy: skip). Records the step
// in `sum`.
StepStats Trainer::State::train_step(int64_t k, StepSamples& ss, TrainSummary& sum) {
  if (a.balance_micro_batches)
    balance_micro_batches(
        ss, [&](int64_t i) { return static_cast<int64_t>(train->sample_tokens(i).size()); });
  const int64_t N = step_target_tokens(ss, train_targets);
  const auto& mine = ss.samples[static_cast<size_t>(comm.rank())];
  StepStats st;
  st.target_tokens = N;
  st.learning_rate = sched.lr(applied_steps);
  for (const auto& rank : ss.samples)
    for (const auto& mb : rank)
      for (int64_t smp : mb) st.tokens += static_cast<int64_t>(train->sample_tokens(smp).size());
  if (N == 0) {
    if (rank0())
      log::warn("step {}: no target token in the global batch; the step is skipped", k + 1);
    engine->discard_step();
    st.skipped = true;
    ++sum.steps_skipped_no_target;
  } else {
    double sums[2] = {0, 0};     // Σ CE, Σ entropy over the targets
    int64_t counts[2] = {0, 0};  // correct, targets
    for (const auto& mb_samples : mine) {
      PackedBatch pb;
      append_samples(*train, mb_samples, &pb);
      BackwardOptions bo;
      bo.grad_scale = 1.0f / static_cast<float>(N);
      bo.accumulate = false;
      // Per group: engine->weights(g) (ZeRO-3: all-gather), engine->grads_ready(g)
      // (reduce-scatter).
      CeStats cs = model->forward_backward(pb.view(), bo);
      sums[0] += cs.loss_sum;
      sums[1] += cs.entropy_sum;
      counts[0] += cs.correct;
      counts[1] += cs.count;
    }
    comm.all_reduce(sums, 2, dist::ReduceOp::kSum);
    comm.all_reduce(counts, 2, dist::ReduceOp::kSum);
    st.loss = sums[0] / static_cast<double>(N);
    st.correct_tokens = counts[0];
    st.entropy_sum = sums[1];
    if (!std::isfinite(st.loss)) {
      if (a.nan_policy == NanPolicy::kError)
        fail(
            "step {}: the loss is {} (non-finite); dataset rows of the step: {}. Set "
            "trainer.nan_policy: skip to skip such steps",
            k + 1, st.loss, step_rows(ss));
      if (rank0())
        log::warn("step {}: non-finite loss {}; skipped (rows {})", k + 1, st.loss, step_rows(ss));
      engine->discard_step();
      st.skipped = true;
    } else {
      zero::StepArgs sa;
      sa.lr = st.learning_rate;
      sa.max_grad_norm = a.max_grad_norm;
      sa.adam = adam;
      sa.skip_nonfinite = a.nan_policy == NanPolicy::kSkip;
      // All-gather of the norm's partial sums; AdamW; all-gather of the new weights (stages 1/2).
      zero::StepResult r = engine->finish_step(sa);
      st.grad_norm = r.grad_norm;
      if (!r.applied) {
        if (rank0()) log::warn("step {}: non-finite gradient norm {}; skipped", k + 1, r.grad_norm);
        st.skipped = true;
      } else {
        ++applied_steps;
      }
    }
  }
  num_tokens_seen += st.tokens;
  ++sum.steps_done;
  if (st.skipped) ++sum.steps_skipped;
  sum.step_losses.push_back(st.skipped ? std::nan("") : st.loss);
  sum.grad_norms.push_back(st.skipped ? std::nan("") : st.grad_norm);
  sum.learning_rates.push_back(st.learning_rate);
  return st;
}

// ---------------------------------------------------------------- eval

// Empty when a stop signal came during the evaluation: it is abandoned (no eval record) at the next
// eval batch, every rank agreeing, so the interrupt checkpoint of the step is written without it.
std::optional<MetricRecord> Trainer::State::evaluate(int64_t global_step, double epoch) {
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
  return acc.take(global_step, epoch);
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
  st["best_model_checkpoint"] =
      best_checkpoint.empty() ? Json()
                              : Json(fs::absolute(best_checkpoint).lexically_normal().string());
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
  // exp_dir may have moved since the path was recorded.
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
  if (rank0()) {
    Json st = {{"global_step", global_step},
               {"applied_steps", applied_steps},
               {"num_tokens_seen", num_tokens_seen},
               {"world_size", comm.world_size()},
               {"zero_stage", a.zero_stage},
               {"run_id", run_id},
               {"plan", plan_state_to_json(*plan, global_step)}};
    best_to_json(st);
    st["eval_pending"] = eval_abandoned_step == global_step;
    write_file_atomic(dir / "trainer_state.json", st.dump(2) + "\n");
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

void Trainer::State::export_final(int64_t global_step, const fs::path& last_checkpoint) {
  std::string error;  // rank 0's, then every rank's
  {
    std::vector<float> master = engine->full_master_weights();
    if (rank0()) {
      try {
        export_hf_model(a.output_dir, mcfg, named(master), export_opts);
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

std::string Trainer::State::step_rows(const StepSamples& ss) const {
  std::string rows;
  int listed = 0;
  for (const auto& rank : ss.samples)
    for (const auto& mb : rank)
      for (int64_t s : mb) {
        auto r = train->sample_examples(s);
        for (int64_t e = r.first; e < r.last && listed < 32; ++e, ++listed)
          rows += (rows.empty() ? "" : ", ") + std::to_string(train->source_row(e));
      }
  return rows;
}

// ---------------------------------------------------------------- the loop

Trainer::Trainer(TrainArgs args, dist::Comm& comm, const text::Tokenizer& tokenizer,
                 const text::TokenizerConfig& tokenizer_config, fs::path tokenizer_dir)
    : s_(std::make_unique<State>(std::move(args), comm, tokenizer, tokenizer_config,
                                 std::move(tokenizer_dir))) {}

Trainer::~Trainer() = default;

void Trainer::hold_run_dir_lock(RunDirLock lock) { s_->dir_lock = std::move(lock); }

volatile std::sig_atomic_t& Trainer::stop_requested() { return g_stop; }

void Trainer::install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

std::vector<float> Trainer::master_weights() { return s_->engine->full_master_weights(); }

TrainSummary Trainer::run() {
  State& s = *s_;
  const TrainArgs& a = s.a;
  const int64_t eval_every = a.eval_steps > 0 ? a.eval_steps : a.logging_steps;

  {
    // A stop signal while the datasets are tokenised ends the process there (exit by the signal)
    // instead of after the whole tokenisation: nothing has been written to exp_dir yet, and the
    // token cache appears by rename, whole or not at all. A world of one rank says so, as
    // cmd_train does after an interrupted training; with more ranks each would repeat it, and
    // the launcher reports the signal once.
    const bool say = s.comm.world_size() == 1 && log::min_level() <= log::Level::kWarn;
    const DefaultStopSignals during_prepare(
        say ? std::string("zerotune: warning: training was interrupted while the datasets were "
                          "tokenised: nothing was trained and no checkpoint was written; the same "
                          "command starts the run again\n")
            : std::string());
    s.prepare_data();
  }
  s.build_model();
  s.build_plan();
  s.resume_or_init();
  s.open_outputs();

  TrainSummary sum;
  LogWindow window(s.num_tokens_seen);
  const int64_t T = s.plan->total_steps();
  if (s.rank0() && a.eval_strategy != IntervalStrategy::kNo && T > 0) {
    const double last = a.eval_strategy == IntervalStrategy::kSteps
                            ? static_cast<double>(T)
                            : s.plan->info(T - 1).epoch_progress;
    if (a.eval_delay > last)
      log::warn("trainer.eval_delay {} is past the run's last {} ({}): no evaluation will run",
                a.eval_delay, a.eval_strategy == IntervalStrategy::kSteps ? "step" : "epoch", last);
  }
  // Resumed without an eval set (dataset.eval unset, so eval_strategy is no and no best model is
  // tracked): the pending evaluation cannot run; it is skipped, saying so, and training goes on.
  if (s.eval_pending && !s.eval) {
    if (s.rank0())
      log::warn(
          "resume_from_checkpoint: {} records an evaluation at step {} that a stop signal "
          "abandoned, but dataset.eval is not set in this run: that evaluation is not run",
          s.resumed_from.string(), s.start_step);
    s.eval_pending = false;
  }
  // The evaluation a stop signal abandoned at the resumed step runs first, as it would have
  // (compared for the best model; that step's checkpoint is the one resumed from); eval_on_start
  // would evaluate the same weights, so it is not run a second time.
  if ((s.eval_pending || a.eval_on_start) && s.start_step < T) {
    const double epoch = s.start_step > 0 ? s.plan->info(s.start_step - 1).epoch_progress : 0.0;
    if (std::optional<MetricRecord> rec = s.evaluate(s.start_step, epoch)) {
      s.log_record(*rec);
      if (s.eval_pending && s.note_best(*rec, s.start_step)) {
        const fs::path ck = a.exp_dir / checkpoint_name(s.start_step);
        std::error_code ec;
        if (fs::is_directory(ck, ec)) s.best_checkpoint = ck;
      }
    }
  }
  // A stop signal before this run's first step (during the start evaluation above, which it
  // abandoned, or while the run was being set up): stop here, without training a step. Every rank
  // reaches this check, whether or not a start evaluation ran (it is collective). Nothing has
  // changed since the start, so nothing is saved: a fresh run writes no checkpoint and exports no
  // model (last_checkpoint stays empty); a resumed run's checkpoint is still the latest
  // (last_checkpoint names it for the resume hint) and is left as it was, so an abandoned pending
  // evaluation it records (eval_pending) runs first on the next resume too. The launcher's record
  // (open_outputs) already names that checkpoint, or none, as the last complete one.
  if (any_rank_stopping(s.comm)) {
    sum.interrupted = true;
    sum.last_checkpoint = s.resumed_from;
    if (s.rank0())
      s.progress->message(
          fmt::format("interrupted: stopped at step {} before training any step", s.start_step));
    return sum;
  }
  double window_start = now_seconds();

  for (int64_t k = s.start_step; k < T; ++k) {
    StepSamples ss = s.plan->samples(k);
    window.add_step(s.train_step(k, ss, sum));  // ss: this rank's micro-batches rebalanced

    const int64_t gs = k + 1;  // HF global_step after this step
    const StepInfo info = ss.info;
    if (s.rank0()) s.progress->update(gs, ProgressDisplay::now());
    if (gs % a.logging_steps == 0 || gs == T) {
      double t = now_seconds();
      MetricRecord rec = window.take(gs, info.epoch_progress, t - window_start);
      rec.set("peak_memory_gib", peak_memory_gib());
      if (s.dev.device_index >= 0) {
        constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
        // In use (CUDA context, cuBLAS / NCCL included) and the pools' maximum allocation (the
        // analog of torch.cuda.max_memory_allocated, which the peers report).
        rec.set("peak_gpu_memory_gib", static_cast<double>(s.dev.device_bytes_in_use()) / kGiB);
        rec.set("peak_gpu_max_allocated_gib",
                static_cast<double>(s.dev.device_max_allocated()) / kGiB);
      }
      window_start = t;
      s.log_record(rec);
    }
    // "epoch": at each epoch's last step and at the run's last one — an epoch cut short by
    // max_steps (or a fractional num_train_epochs) ends there, and transformers' training loop
    // calls on_epoch_end after it too (DefaultFlowCallback: evaluate and save).
    const bool epoch_end = info.last_in_epoch || gs == T;
    // eval_delay: DefaultFlowCallback's `args.eval_delay <= state.global_step` (steps) or
    // `<= state.epoch` (epoch).
    const bool do_eval = (a.eval_strategy == IntervalStrategy::kSteps && gs % eval_every == 0 &&
                          a.eval_delay <= static_cast<double>(gs)) ||
                         (a.eval_strategy == IntervalStrategy::kEpoch && epoch_end &&
                          a.eval_delay <= info.epoch_progress);
    bool new_best = false;
    if (do_eval) {
      if (std::optional<MetricRecord> rec = s.evaluate(gs, info.epoch_progress)) {
        sum.last_eval_loss = rec->number("eval_loss");
        s.log_record(*rec);
        new_best = s.note_best(*rec, gs);
      } else {
        s.eval_abandoned_step = gs;
      }
    }
    const bool stop = any_rank_stopping(s.comm);
    const bool do_save =
        (a.save_strategy == SaveStrategy::kSteps && (gs % a.save_steps == 0 || gs == T)) ||
        (a.save_strategy == SaveStrategy::kEpoch && epoch_end) ||
        (a.save_strategy == SaveStrategy::kBest && new_best) || stop;
    if (do_save) sum.last_checkpoint = s.save_checkpoint(gs, stop);
    if (stop) {
      sum.interrupted = true;
      if (s.rank0()) s.progress->message(fmt::format("interrupted: stopped after step {}", gs));
      return sum;
    }
  }
  if (s.rank0()) s.progress->finish(ProgressDisplay::now());
  // A model that was never updated is not a trained model: no final export, a non-zero exit.
  // (applied_steps counts the updates of the resumed-from part too; every rank has the same.)
  if (s.applied_steps == 0 && sum.steps_done > 0)
    fail(
        "no optimizer step was applied: all {} step(s) of the run were skipped ({} without a "
        "target token, {} with a non-finite loss or gradient norm under trainer.nan_policy: skip); "
        "the "
        "weights are unchanged, so no final model is written to {}",
        sum.steps_done, sum.steps_skipped_no_target,
        sum.steps_skipped - sum.steps_skipped_no_target, a.output_dir.string());
  s.finish_best();
  s.export_final(T, sum.last_checkpoint);
  // A stop signal after the last step's check (while that step's checkpoint, the best model or
  // the final model was written) let them finish — each is written under a temporary name and
  // renamed into place whole — but the run did not end on its own: it says so, never success.
  // Every rank gets here (export_final fails on all of them alike).
  if (const int sig = any_rank_stopping(s.comm)) {
    sum.stopped_at_end_by = stop_signal_name(sig);
    if (s.rank0())
      s.progress->message(
          fmt::format("interrupted: {} came after the last step's stop check, while the last "
                      "checkpoint, the best model or the final model was written",
                      sum.stopped_at_end_by));
  }
  return sum;
}

}  // namespace zt::train
