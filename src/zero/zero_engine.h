// ZeroEngine: data-parallel gradient reduction, gradient clipping and AdamW over the canonical
// shard layout, for ZeRO stages 0–3 with optional optimizer offload (DESIGN §6, SFT_SEMANTICS
// §3–4).
//
// What every stage does identically (so stages agree bitwise — DESIGN §1 promise 1):
//   - per micro-step, as the backward finishes group g (on_group_ready), the model's fp32 gradient
//     of that group is packed into a rank-major bucket [W][group_shard_elems(g)], reduce-scattered
//     (fp32 SUM, rank order, dist::Comm) and added into this rank's fp32 gradient shard [S]
//     (overwritten by the first micro-step of an optimizer step);
//   - the global gradient norm is sqrt of the rank-order sum of per-rank fp64 sums of squares, each
//     rank summing its whole shard buffer with Ops::sumsq; a tied embedding is one tensor, counted
//     once;
//   - clip coefficient optim::clip_coefficient(norm, max_grad_norm), folded into AdamW
//     (optim::adamw_step / adamw_cpu, torch.optim.AdamW's arithmetic) on the fp32 master weights,
//     weight decay 0 for tensors with ParamSpec::no_decay;
//   - the new compute weights are the master weights rounded once to the model dtype (bf16 RNE, or
//     an fp32 copy) on the rank that owns them; those bits are what every rank's model receives.
// What the stages keep (memory only):
//   stage 0: full master / m / v on every rank ([W][S]); the reduced gradient shards are
//            all-gathered and every rank updates everything locally (elementwise, so bitwise the
//            sharded update); each rank's partial norm is computed per owning rank, as the owner
//            would.
//   stage 1, 2: master / m / v shards [S]; after the update the compute-weight shards are
//            all-gathered group by group into the model. In this design stages 1 and 2 coincide
//            (the gradient is already sharded by the per-group reduce-scatter); stage 2 is kept as
//            a name for DeepSpeed/accelerate configs.
//   stage 3: as 1/2, plus the compute weights stay sharded ([S] in the model dtype). The trainer
//            brackets every use of the model's weights with gather_group(g) / release_group(g). The
//            current CausalLM has no per-group forward hook, so the trainer gathers every group
//            before forward_backward and releases them after (gather_all / release_all); results
//            are identical either way, only peak memory differs. A released group's model weights
//            are zeroed, so a use without a gather shows at once.
// Offload (any stage): master / m / v live in a host arena; at the step boundary the gradient
//   shard is copied "D2H", the CPU AdamW runs on the host, the compute-dtype result is copied
//   "H2D". On the CPU backend both memories are host memory, but the code path is the distinct one,
//   and offload on/off is bitwise equal. Without offload the update runs on the device buffers
//   (optim::adamw_cuda on a CUDA Ops: the same per-element arithmetic, so offload on/off stays
//   bitwise equal on the GPU too).
//
// Typical trainer loop (one optimizer step of G micro-batches, N = the step's global target count):
//   ZeroEngine engine(model.layout(), model_buffers(model) /* zero/model_binding.h */, ops, comm,
//                     device_memory, host_memory, {stage, offload});
//   engine.init_from_model();  // or engine.load_state(checkpoint_dir) on resume
//   per step:
//     if (N == 0) { engine.discard_step(); continue; }  // skipped: nothing changes, no LR step
//     for (micro-batch mb of the step) {
//       engine.gather_all();  // no-op below stage 3
//       model.forward_backward(mb, {1.0f / N, false, engine.group_ready_callback()});
//       engine.release_all();
//     }
//     StepResult r = engine.finish_step({lr, max_grad_norm, adam});
// Under stage 3 every other use of the model's weights (eval forward, model.named_weights() for an
// HF export) is bracketed by gather_all() / release_all() too.
// The AdamW step count (bias correction) is the engine's own, adam_step(): it counts applied
// updates, is saved in the state files, and does not advance for discarded steps.
//
// Every rank must make the same engine calls in the same order (they contain collectives). Not
// thread-safe. All Tensors are on ops.device(); the Comm must take that device's pointers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "core/arena.h"
#include "dist/comm.h"
#include "optim/adamw.h"
#include "zero/shard_layout.h"

namespace zt::zero {

// ZeRO configuration.
struct EngineOptions {
  int stage = 1;         // ZeRO stage 0, 1, 2 or 3 (1 and 2 coincide; see the file comment)
  bool offload = false;  // master / m / v in host memory, CPU AdamW (DeepSpeed offload_optimizer)
};

// The model memory the engine reads and writes: flat buffers in ParamLayout offsets.
struct ModelBuffers {
  Tensor weights;  // [layout.total_elems()] compute weights, kF32 or kBF16
  Tensor grads;    // [layout.total_elems()] fp32 gradients of the current micro-step
};

// Hyper-parameters of one optimizer step.
struct StepArgs {
  double lr = 0.0;             // learning rate of this step (optim::LrSchedule::lr), Python float
  double max_grad_norm = 1.0;  // clipping threshold; <= 0: no clipping (HF skips clip_grad_norm_)
  optim::AdamWParams adam;     // betas, eps, weight_decay (decay only on tensors without no_decay)
  // finish_step only: a NaN/inf norm discards the step (nothing changes) instead of applying the
  // update (HF applies it, which turns the weights into NaN).
  bool skip_nonfinite = false;
};

// What an optimizer step did.
struct StepResult {
  double grad_norm = 0.0;  // global pre-clip L2 norm of the gradient (HF logs it as `grad_norm`)
  float clip_coef = 1.0f;  // the fp32 factor the gradient was multiplied by
  bool applied = false;    // false: discarded (skip_nonfinite with a non-finite norm)
  int64_t adam_step = 0;   // AdamW step count after this call (torch state["step"])
};

// Bytes of one memory pool.
struct PoolBytes {
  std::string name;  // "gradient shard", "master weights", …
  size_t bytes = 0;
  bool host = false;  // true: host memory (offload); false: device memory
};

// Memory the engine holds, per pool, plus the compute weights the stage needs in the model.
struct ZeroMemory {
  std::vector<PoolBytes> pools;  // held by the engine (arena views, padding included)
  // Device bytes of compute weights the stage needs resident in the model: the whole padded model
  // (stages 0–2) or one gathered group, [W][max group shard] (stage 3). The current CausalLM still
  // allocates its full parameter buffer in every stage.
  size_t model_weights = 0;
  size_t device_bytes() const;  // engine device pools + model_weights
  size_t host_bytes() const;    // engine host pools
  // One line per pool, "stage 3: device 1.2 MiB (gradient shard 64.0 KiB, …) host …", for logs.
  std::string describe() const;
};

class ZeroEngine {
 public:
  // Plans and allocates the engine's pools (device pools from device_memory, offload pools from
  // host_memory; both must outlive the engine). layout: the model's ParamLayout (copied into the
  // shard layout for W = comm.world_size()); model: its flat buffers (kept as views). Throws
  // zt::Error for a stage outside 0–3, buffers of the wrong dtype/size/device, or an
  // out-of-memory (naming the pool).
  ZeroEngine(const ParamLayout& layout, ModelBuffers model, Ops& ops, dist::Comm& comm,
             MemoryResource& device_memory, MemoryResource& host_memory, EngineOptions options);
  ZeroEngine(const ZeroEngine&) = delete;
  ZeroEngine& operator=(const ZeroEngine&) = delete;

  const ShardLayout& layout() const { return layout_; }
  const EngineOptions& options() const { return opt_; }
  int rank() const { return comm_.rank(); }
  int world_size() const { return layout_.world_size(); }
  // AdamW updates applied so far (torch's state["step"]; 0 before the first).
  int64_t adam_step() const { return adam_step_; }

  // Master weights ← fp32 of the model's current compute weights (which must be the same on every
  // rank: loaded or initialised from the same source); Adam m, v ← 0; step count ← 0; gradient
  // accumulators cleared. Stage 3 then releases every group. Collective-free. Call once before the
  // first step (or use load_state).
  void init_from_model();

  // ---- micro-steps

  // Stage 3: all-gathers group g's compute-weight shards into the model's weights (collective).
  // Other stages: no-op (the model always holds its full weights).
  void gather_group(int g);
  // Stage 3: zeroes group g's weights in the model (they are not to be used until gathered).
  // Other stages: no-op.
  void release_group(int g);
  void gather_all();   // gather_group(g) for g = 0 … num_groups−1
  void release_all();  // release_group(g) for every g
  // Reduce-scatters group g's gradient (model.grads) into this rank's gradient shard: overwrite on
  // the group's first reduction of the optimizer step, add after (collective). This is the
  // model's BackwardOptions::on_group_ready. Throws zt::Error for a bad g, before
  // init_from_model/load_state, or after grad_norm() in the same step.
  void reduce_group(int g);
  // [this](int g) { reduce_group(g); }
  std::function<void(int)> group_ready_callback();

  // ---- optimizer step

  // Global pre-clip gradient norm of the accumulated step (collective on the first call of a step,
  // cached after). Throws zt::Error naming the group when the groups were reduced unequal numbers
  // of times or never (no micro-step ran). A non-finite value is returned as is.
  double grad_norm();
  // Clip + AdamW + new compute weights (stages 0–2: every rank's model holds the full updated
  // weights; stage 3: the shards are updated and every group is released). Computes grad_norm()
  // if not done yet. Clears the accumulators and increments adam_step().
  StepResult apply_step(const StepArgs& args);
  // grad_norm(), then apply_step(args) — or discard_step() when the norm is not finite and
  // args.skip_nonfinite.
  StepResult finish_step(const StepArgs& args);
  // Forgets the step's accumulated gradient; parameters, Adam state and step count untouched
  // (a step with N = 0 target tokens, SFT_SEMANTICS §3, or a rejected non-finite step).
  void discard_step();

  // ---- state (checkpoint / resume / export)

  // The file of `rank`'s state under `dir`: dir / "zero_state_rank{rank:05}.bin".
  static std::filesystem::path state_path(const std::filesystem::path& dir, int rank);
  // Writes this rank's master / m / v shards ([S] fp32 each) and the step count to state_path(dir,
  // rank()) atomically (temp + rename). The bytes do not depend on the stage or offload, so a
  // state saved under one stage loads under any other with the same W. Throws zt::Error in the
  // middle of a step (gradients reduced but not applied) or on an I/O failure.
  // File: 64-byte header (magic "ZTZERO01", version, W, rank, layout hash, S, adam step), payload
  // master | m | v (fp32 little-endian), 8-byte XXH3-64 of the payload.
  void save_state(const std::filesystem::path& dir) const;
  // Reads state_path(dir, rank()), checks magic, version, W, rank, layout hash, size and checksum
  // (zt::Error naming the file, the field, the value found and the value expected), installs the
  // state (stage 0 all-gathers the other ranks' shards: collective) and rebuilds the compute
  // weights from the master weights (stage 3: released). Clears any step in progress.
  void load_state(const std::filesystem::path& dir);
  // The fp32 master weights gathered to rank 0 (collective): rank 0 gets the model's flat layout
  // [layout.model_elems()] (ParamLayout offsets, padding 0), other ranks an empty vector. For
  // export. Throws zt::Error in the middle of a step.
  std::vector<float> full_master_weights();

  // Bytes per pool for this stage / offload / W.
  ZeroMemory memory() const;

 private:
  // A rank-major buffer: rank r's shard-buffer element j is at data + r*stride + j - shift.
  struct RankMajor {
    void* data;
    DType dtype;
    int64_t stride;
    int64_t shift;
  };
  void pack(int g, const Tensor& model_flat, const RankMajor& dst, int r0, int r1);
  void unpack(int g, const RankMajor& src, const Tensor& model_flat, int r0, int r1);
  Tensor dev(void* p, DType dt, int64_t n) const;
  int owned_rank0() const;  // first rank whose shard this rank updates (0 for stage 0)
  int owned_ranks() const;  // W for stage 0, else 1
  int64_t owned_elems() const { return owned_ranks() * layout_.shard_elems(); }
  void require_ready(const char* what) const;
  void require_between_steps(const char* what) const;
  void update(const StepArgs& args, float coef);
  void compute_from_master();    // compute_ ← round(master) (load_state)
  void install_weights();        // stages 0–2: model ← compute shards; stage 3: release_all
  void all_gather_group(int g);  // every rank's group-g compute shard → the model's weights
  void reset_step();

  ShardLayout layout_;
  ModelBuffers model_;
  Ops& ops_;
  dist::Comm& comm_;
  EngineOptions opt_;
  DType cdt_;
  size_t ces_;  // bytes per compute element
  Stream stream_;
  Arena dev_, host_;

  // Device pools.
  float* grad_shard_ =
      nullptr;                  // [S] fp32: this rank's reduced gradient, accumulated over the step
  float* bucket_ = nullptr;     // [W][max group shard] fp32: reduce-scatter send buffer
  void* gather_ = nullptr;      // [W][max group shard] compute dtype: all-gather receive (1–3)
  void* compute_ = nullptr;     // [owned] compute dtype: updated compute-weight shard(s)
  float* full_grad_ = nullptr;  // [W][S] fp32: all-gathered reduced gradient (stage 0)
  Tensor sumsq_ws_;
  // Optimizer state: [owned] fp32 each, device (no offload) or host (offload) memory.
  float* master_ = nullptr;
  float* m_ = nullptr;
  float* v_ = nullptr;
  // Offload staging (host).
  float* host_grad_ = nullptr;        // [owned] fp32
  uint16_t* host_compute_ = nullptr;  // [owned] bf16 (bf16 models only)

  // Step state.
  std::vector<int> reduced_;  // per group: reductions in this step
  std::optional<double> norm_;
  bool ready_ = false;
  int64_t adam_step_ = 0;
};

}  // namespace zt::zero
