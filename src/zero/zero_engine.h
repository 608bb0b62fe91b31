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
//   stage 3: as 1/2, plus the compute weights stay sharded ([S] in the model dtype). Every use of
//            the model's weights is bracketed by acquire_group(g) / release_group(g) — the
//            model's GroupHooks call them around each layer in the forward, the backward and the
//            recompute. With a model that has no weight buffer of its own (ModelBuffers::weights
//            without data: CausalLM with own_weights = false) the engine gathers group g into
//            storage of its own and binds it to the model: group 0 and the last group each have
//            a buffer, the groups between them (the decoder layers) share two slots (g % 2), so
//            only the shards plus about two layers' weights are resident — and the embedding
//            (dedicated weight storage, the all-gather staging, the gradient window's embedding
//            part: a few embedding-sized buffers, which dominate for large vocabularies). The next
//            layer is prefetched into the other slot on the side stream while the current one
//            computes.
//            With a full model buffer (tests, the CPU reference) the group is gathered in place
//            and zeroed on release, so a use without a gather shows at once.
// Gradient window (any stage, a model without its own gradient buffer: ModelBuffers::grads
//   without data): the engine owns the fp32 gradient storage the model writes — group 0 and the
//   last group each have a buffer (the tied embedding collects the LM head's gradient first and
//   the embedding's last), the groups between them share one slot. That is valid because the
//   model writes a group's gradients only between the start of its backward and on_group_ready,
//   in order, on the engine's compute stream, and reduce_group packs them on that stream.
// Overlap (device backends): reduce_group packs on the compute stream and runs the
//   reduce-scatter on a side stream (two bucket slots, each reused once the collective that read
//   it has finished), so the collective of group g runs while the backward computes group g−1;
//   the compute stream waits for the side stream only before the gradient shard is read
//   (grad_norm, discard_step). After the update, stages 1/2 with overlap_gather all-gather the
//   groups on the side stream and acquire_group(g) makes compute wait for group g only. On the
//   CPU every op and collective is synchronous, so all of this reduces to the plain order.
// Offload (any stage): master / m / v live in a host arena; at the step boundary the gradient
//   shard is copied "D2H", the CPU AdamW runs on the host, the compute-dtype result is copied
//   "H2D". On the CPU backend both memories are host memory, but the code path is the distinct one,
//   and offload on/off is bitwise equal. Without offload the update runs on the device buffers
//   (optim::adamw_cuda on a CUDA Ops: the same per-element arithmetic, so offload on/off stays
//   bitwise equal on the GPU too).
//
// Typical trainer loop (one optimizer step of G micro-batches, N = the step's global target count;
// train/trainer.cpp):
//   CausalLM model(cfg, ops, device_memory, {…, own_weights = stage != 3, own_grads = false});
//   model.load_weights(reader, flat);  // flat: the model's all_weights(), or a host buffer (stage 3)
//   ZeroEngine engine(model.layout(), model_buffers(model) /* zero/model_binding.h */, ops, comm,
//                     device_memory, host_memory, {stage, offload, overlap_gather});
//   model.set_group_hooks({engine.acquire_callback(), engine.release_callback()});
//   engine.init_from_model();  // or init_from_flat(flat); or engine.load_state(dir) on resume
//   per step:
//     if (N == 0) { engine.discard_step(); continue; }  // skipped: nothing changes, no LR step
//     for (micro-batch mb of the step)
//       model.forward_backward(mb, {1.0f / N, false, engine.group_ready_callback()});
//     StepResult r = engine.finish_step({lr, max_grad_norm, adam});
// The hooks bracket every use of the model's weights (eval forward and logits included). Under
// stage 3 a forward contains collectives: every rank must run the same number of forwards. A model
// with its own buffers may use gather_all() / release_all() around a use instead (tests).
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
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "core/arena.h"
#include "dist/comm.h"
#include "optim/adamw.h"
#include "zero/shard_layout.h"

namespace zt::optim {
class HostAdamW;
}

namespace zt::zero {

// ZeRO configuration.
struct EngineOptions {
  int stage = 1;         // ZeRO stage 0, 1, 2 or 3 (1 and 2 coincide; see the file comment)
  bool offload = false;  // master / m / v in host memory, CPU AdamW (DeepSpeed offload_optimizer)
  // Stages 1/2: after an update, leave the all-gather of the new weights in flight and make the
  // compute stream wait for group g at acquire_group(g) (the caller must route every use of the
  // weights through acquire_group, e.g. the model's GroupHooks). false: apply_step returns with
  // the model's weights complete.
  bool overlap_gather = false;
  // Offload: the host AdamW (optim::HostAdamW) threads; 0 = automatic (cores / local ranks).
  int host_threads = 0;
  int local_world_size = 1;  // ranks sharing this host (for the automatic thread count)
};

// The model memory the engine reads and writes: flat buffers in ParamLayout offsets.
// A Tensor with data == nullptr (its dtype and device still set, numel ignored) means the model
// has no such buffer: the engine then allocates the storage per group and binds it to the model
// through bind_weights / bind_grads (see "stage 3" and "Gradient window" above).
struct ModelBuffers {
  Tensor weights;  // [layout.total_elems()] compute weights, kF32 or kBF16
  Tensor grads;    // [layout.total_elems()] fp32 gradients of the current micro-step
  // base = the device address of group g's first element ([group size] of the compute dtype /
  // fp32); the model uses it from its next acquire of g on.
  std::function<void(int g, void* base)> bind_weights;
  std::function<void(int g, float* base)> bind_grads;
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
  // Device bytes of the model's own weight buffer the engine works with: the whole padded model,
  // or 0 when the engine owns the (windowed, stage 3) weight storage — then in `pools`.
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
  ~ZeroEngine();
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
  // The same from a flat [layout.model_elems()] tensor of the compute dtype in host memory or on
  // the device (a model without its own weight buffer loads into host memory). Throws zt::Error
  // for a wrong dtype or size.
  void init_from_flat(const Tensor& flat);

  // ---- micro-steps

  // Before a use of group g's weights. Stage 3: all-gathers group g's compute-weight shards
  // into the model's weights, or into the engine's storage for g which it binds to the model
  // (collective), and prefetches the neighbouring group in the direction of the last two
  // acquires. Stages 1/2 with overlap_gather: the compute stream waits for g's post-update
  // gather. Otherwise a no-op.
  void acquire_group(int g);
  // After a use of group g's weights. Stage 3 with a full model buffer: zeroes group g's weights
  // in the model (not to be used until acquired again). Otherwise a no-op (a slot is reused in
  // stream order).
  void release_group(int g);
  // acquire_group(g) for g = 0 … num_groups−1 (not with engine-owned stage-3 storage: it holds
  // two layers at a time — use the model's hooks); release_group(g) for every g.
  void gather_all();
  void release_all();
  // [this](int g) { acquire_group(g); } and [this](int g) { release_group(g); }: the model's
  // GroupHooks.
  std::function<void(int)> acquire_callback();
  std::function<void(int)> release_callback();
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

  // Shard columns one reduce-scatter (and one bucket slot, [W][C] fp32) covers: the largest
  // decoder layer's group shard (the largest group when there is no layer). Larger groups are
  // reduced in pieces of C columns, the same element sums in the same rank order. A device Comm
  // needs reduce-scatter scratch for W × C elements.
  static int64_t reduce_chunk_elems(const ShardLayout& layout);

  // Bytes per pool for this stage / offload / W.
  ZeroMemory memory() const;
  // Offload: the host AdamW pool's start-up line (threads and why); empty without offload.
  std::string host_adamw_description() const;

 private:
  // A rank-major buffer: rank r's shard-buffer element j is at data + r*stride + j - shift.
  struct RankMajor {
    void* data;
    DType dtype;
    int64_t stride;
    int64_t shift;
  };
  // Group g's storage: model element (ParamLayout offset) e of group g is at base + (e −
  // group_model_begin(g)) elements.
  struct GroupPtr {
    void* base;
    DType dtype;
  };
  void pack(int g, GroupPtr src, const RankMajor& dst, int r0, int r1, int64_t lo = 0,
            int64_t hi = INT64_MAX);
  void unpack(int g, const RankMajor& src, GroupPtr dst, int r0, int r1, Stream s);
  // master / m / v / step from compute_ (which holds the owned compute shards); stage 3 releases.
  void init_state_from_compute();
  GroupPtr weights_of(int g) const;  // where the model reads group g's weights
  GroupPtr grads_of(int g) const;    // where the model writes group g's gradients
  void* weight_storage(int g) const;  // engine-owned stage-3 storage of g (windowed mode)
  bool windowed_weights() const { return model_.weights.data == nullptr; }
  bool windowed_grads() const { return model_.grads.data == nullptr; }
  // Stage 3: gathers group g into `dst` on stream s (dst: the group's storage).
  void gather_into(int g, GroupPtr dst, Stream s);
  // Makes the compute stream wait for the side stream: for the reduce-scatters enqueued since the
  // last join, or (always) for everything on it, gathers included.
  void join_side(bool always = false);
  Tensor dev(void* p, DType dt, int64_t n) const;
  int owned_rank0() const;  // first rank whose shard this rank updates (0 for stage 0)
  int owned_ranks() const;  // W for stage 0, else 1
  int64_t owned_elems() const { return owned_ranks() * layout_.shard_elems(); }
  void require_ready(const char* what) const;
  void require_between_steps(const char* what) const;
  void update(const StepArgs& args, float coef);
  // The offloaded update (chunked D2H → host AdamW → H2D, pipelined).
  struct OffloadPiece {
    int64_t offset;  // in the owned shard buffer
    int64_t n;       // data elements
    bool no_decay;
  };
  struct OffloadChunk {
    std::vector<OffloadPiece> pieces;
    int64_t lo = 0, hi = 0;  // the owned-buffer range the chunk's copies cover
  };
  static constexpr int64_t kOffloadChunk = int64_t{1} << 24;  // elements (64 MiB of fp32)
  void plan_offload();
  void update_offloaded(const optim::AdamWStep& s_decay, const optim::AdamWStep& s_plain,
                        const float* dev_grad);
  void compute_from_master();    // compute_ ← round(master) (load_state)
  void install_weights();        // stages 0–2: model ← compute shards; stage 3: release_all
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
  float* bucket_ = nullptr;     // [W][chunk_] fp32: reduce-scatter send buffer, slot 0
  float* bucket2_ = nullptr;    // [W][chunk_] fp32: slot 1 (W > 1)
  int64_t chunk_ = 0;           // reduce_chunk_elems(layout_)
  int next_bucket_ = 0;
  // Engine-owned model storage (windowed): weights of group 0, the last group, two layer slots;
  // gradients of group 0, the last group, one layer slot.
  void* wfirst_ = nullptr;
  void* wlast_ = nullptr;
  void* wslot_[2] = {nullptr, nullptr};
  int wslot_group_[2] = {-1, -1};  // the group gathered (or in flight) in each weight slot
  float* gfirst_ = nullptr;
  float* glast_ = nullptr;
  float* gslot_ = nullptr;
  // Streams and events (no-ops on the CPU).
  Stream side_;                  // reduce-scatters, post-update gathers, stage-3 prefetches
  Event ev_compute_;             // compute stream → side stream handoff
  Event ev_side_;                // side stream → compute stream handoff
  Event ev_bucket_free_[2];      // the reduce-scatter reading bucket slot k has finished
  Event ev_slot_ready_[2];       // stage-3 weight slot k holds its group (prefetch finished)
  Event ev_slot_free_[2];        // compute finished with weight slot k's previous group
  std::vector<Event> ev_gathered_;
  std::vector<Event> ev_d2h_;        // offload: chunk c's gradient has landed in host memory
  std::vector<OffloadChunk> chunks_;
  std::unique_ptr<optim::HostAdamW> host_adam_;  // stages 1/2 overlap_gather: group g's weights are in place
  std::vector<char> gather_pending_;
  std::vector<char> group_valid_;  // windowed stage 3: g's storage holds its current weights
  bool side_busy_ = false;       // reduce-scatters enqueued since the last join_side
  int last_acquired_ = -1, direction_ = 0;
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
