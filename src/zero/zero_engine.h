// ZeroEngine: data-parallel gradient reduction, gradient clipping and AdamW over the canonical
// shard layout, for ZeRO stages 0–3 with optional optimizer offload (DESIGN §6, SFT_SEMANTICS
// §3–4). It is the model's GroupStorage (param/group_storage.h) in training, and a coordinator of
// three mechanisms, each owning its buffers, streams and events and chosen once at construction:
//   GradReducer (grad_reducer.h): the gradient window the model writes, the per-group buckets and
//     the deterministic reduce-scatter into this rank's fp32 gradient shard;
//   WeightGatherer (weight_gatherer.h): the compute weights — under stages 0–2 one full copy the
//     model reads and the update writes in place (stages 1/2 at W > 1 all-gather the other
//     ranks' shards into it after each update), under stage 3 the shard and the slots with
//     prefetch; and each group's ready event for weights produced on a side stream
//     (EngineOptions::overlap_gather): weights(g) waits for group g's, every other call for all;
//   ShardOptimizer (shard_optimizer.h): AdamW on the fp32 master shard, on the device or
//     offloaded to the host.
//
// One optimizer step (G micro-batches, N = the step's global target count; train/trainer.cpp):
//   ZeroEngine engine(ParamLayout(cfg), dtype, ops, comm, device_memory, host_memory, options);
//   CausalLM model(cfg, ops, device_memory, model_options, engine);  // the engine is its storage
//   model.load_weights(reader, flat); engine.init_from_flat(flat);    // or engine.load_state(dir)
//   per step:
//     if (N == 0) { engine.discard_step(); continue; }  // skipped: nothing changes, no LR step
//     for (micro-batch mb of the step)
//       model.forward_backward(mb, {1.0f / N});  // per group: engine.weights(g) (stage 3:
//                                                // all-gather), engine.grads_ready(g)
//                                                // (reduce-scatter)
//     StepResult r = engine.finish_step({lr, max_grad_norm, adam});  // norm: all-gather of the
//                                                // partial sums; update; weight all-gather
// What every stage does identically (so stages agree bitwise — DESIGN §1 promise 1):
//   - per micro-step, as the backward hands back group g, its fp32 gradient is packed into a
//     rank-major bucket, reduce-scattered (fp32 SUM, rank order, dist::Comm) and added into this
//     rank's gradient shard [S] (overwritten by the group's first reduction of a step) — on the
//     device, or under offload in the optimizer's host memory (the sum goes D2H chunk by chunk
//     and the host adds it: the same fp32 additions in the same association);
//   - the global gradient norm is sqrt of the rank-order sum of the W ranks' fp64 sums of squares
//     of their shards (Ops::sumsq, all-gathered); a tied embedding is one tensor, counted once;
//   - clip coefficient optim::clip_coefficient(norm, max_grad_norm), folded into AdamW
//     (torch.optim.AdamW's arithmetic) on the fp32 master weights, weight decay 0 for tensors
//     with ParamSpec::no_decay;
//   - the new compute weights are the master weights rounded once to the model dtype on the rank
//     that owns them; those bits are what every rank's model receives.
// Device memory for the bf16 weights: one full copy under stages 0–2 (plus, at W > 1 under
// stages 1/2, a send buffer and a staging buffer of the largest group's size), the shard and
// four group buffers under stage 3.
// What the stages keep (memory only): stage 0 full master / m / v on every rank ([W][S]; the
//   reduced shards are all-gathered and every rank updates everything — elementwise, so bitwise
//   the sharded update); stages 1 and 2 the shards [S] (they coincide in this design: the
//   gradient is already sharded by the per-group reduce-scatter; "2" is kept for DeepSpeed /
//   accelerate configs); stage 3 also the compute weights only as a shard.
// Under stage 3 every use of a group's weights is an all-gather: every rank must run the same
// number of forwards (eval included). The AdamW step count (bias correction) is the engine's own,
// adam_step(): it counts applied updates, is saved in the state files, and does not advance for
// discarded steps. Every rank must make the same engine calls in the same order (they contain
// collectives). Not thread-safe. All device pointers are on ops.device(); the Comm must take that
// device's pointers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "core/arena.h"
#include "dist/comm.h"
#include "optim/adamw.h"
#include "param/group_storage.h"
#include "param/param_layout.h"
#include "zero/grad_reducer.h"
#include "zero/shard_layout.h"
#include "zero/shard_optimizer.h"
#include "zero/weight_gatherer.h"
#include "zero/zero_memory.h"

namespace zt::zero {

// ZeRO configuration.
struct EngineOptions {
  int stage = 1;         // ZeRO stage 0, 1, 2 or 3 (1 and 2 coincide; see the file comment)
  bool offload = false;  // master / m / v in host memory, CPU AdamW (DeepSpeed offload_optimizer)
  // Leave the new weights of an update in flight, produced group by group on a side stream:
  //   stages 1/2 at W > 1: the all-gather of the new weights (on the weight gatherer's stream);
  //   W = 1, stages 0–2, the optimizer state on the device: the AdamW update itself (on the
  //     engine's update stream, in layout order; the same kernels on the same data: bitwise the
  //     synchronous update) — overlaps_update().
  // Each group's weights then have a ready event (WeightGatherer::mark_produced). The one rule:
  // weights(g) makes the compute stream wait for group g's ready event alone, so the next forward
  // overlaps the production of the groups after the one it computes; every other engine call
  // waits for every group's first. false: apply_step returns with the weights complete.
  bool overlap_gather = false;
  // Offload: the host AdamW (optim::HostAdamW) threads; 0 = automatic (cores / local ranks).
  int host_threads = 0;
  int local_world_size = 1;  // ranks sharing this host (for the automatic thread count)
  // Offload: where the fp32 gradient shard accumulates over the micro-steps of a step. true: in
  // host memory (no [S] gradient on the device; one D2H and host add per micro-step — free at
  // one micro-step per step); false: on the device, copied to the host once per step. Bitwise
  // the same either way.
  bool host_gradient_accumulation = true;
  // Offload with device accumulation: elements per D2H piece of the delivered gradient shard
  // (the host AdamW starts on a piece once it has landed); 0: GradReducer::kDeliverElems. Tests
  // set it small to cut a tiny model's shard into many pieces.
  int64_t gradient_delivery_elems = 0;
  // Micro-steps (reductions of each group) per optimizer step when the caller knows it is fixed
  // (the trainer: gradient_accumulation_steps); 0 = unknown. 1, alone (W = 1), with the gradient
  // shard on the device: the model writes its gradients straight into the shard, no fp32 window
  // (GradReducer's one_micro_step; a second reduction in a step then throws zt::Error).
  int micro_steps_per_step = 0;
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

class ZeroEngine final : public GroupStorage {
 public:
  // Plans and allocates every pool (device pools from device_memory, offload pools from
  // host_memory; both must outlive the engine) for `layout` (copied into the shard layout for
  // W = comm.world_size()) and compute weights of `dtype`. Throws zt::Error for a stage outside
  // 0–3, a dtype other than f32/bf16, device memory not on the Ops device, or an out-of-memory
  // (naming the pool).
  ZeroEngine(const ParamLayout& layout, DType dtype, Ops& ops, dist::Comm& comm,
             MemoryResource& device_memory, MemoryResource& host_memory, EngineOptions options);
  ~ZeroEngine() override;
  ZeroEngine(const ZeroEngine&) = delete;
  ZeroEngine& operator=(const ZeroEngine&) = delete;

  const ShardLayout& layout() const { return layout_; }
  const EngineOptions& options() const { return opt_; }
  int rank() const { return comm_.rank(); }
  int world_size() const { return layout_.world_size(); }
  // AdamW updates applied so far (torch's state["step"]; 0 before the first).
  int64_t adam_step() const { return adam_step_; }
  // The save id save_state writes into this rank's file: a 64-bit digest of the state's history,
  // the same on every rank (every input is): where the weights came from (init_from_flat: one
  // fixed value; load_state: the loaded save's id) chained with each applied update's step
  // count, gradient norm, clip coefficient and StepArgs (apply_step). So every rank's file of
  // one save carries the same id, saves of different runs or steps carry different ones (up to a
  // 2^-64 collision, or two runs whose every norm and argument agree bitwise, whose states then
  // agree too), and the same history saves the same bytes (under another stage or offload, or
  // loaded and saved again). Blind spot: two engines initialised from different weights and
  // saved before any update share the id.
  // Never 0 (0 in a file marks one written before save ids).
  uint64_t save_id() const { return save_id_; }

  // The weights from a flat [layout.model_elems()] tensor of the compute dtype in host memory or
  // on the device (the same on every rank: loaded or initialised from the same source): compute
  // shards ← the owned part; master weights ← their fp32; Adam m, v ← 0; step count ← 0.
  // Collective-free. Call once before the first step (or use load_state). Throws zt::Error for a
  // wrong dtype or size.
  void init_from_flat(const Tensor& flat);

  // ---- GroupStorage: the model's calls, per group g (ParamLayout groups)

  // Group g's compute weights. Stage 3: all-gathers g into its slot (collective) and prefetches
  // the neighbouring layer; stages 0–2 with overlap_gather: the compute stream waits for group
  // g's ready event alone (its post-update gather at W > 1, its update at W = 1). Throws zt::Error
  // for a bad g or before init_from_flat / load_state.
  const void* weights(int g) override;
  void release(int g) override;
  // Group g's gradient window (fp32, zero padding), or its columns of the gradient shard
  // (EngineOptions::micro_steps_per_step).
  float* grads(int g) override;
  // Groups whose gradient the model writes straight into the shard (no window).
  int groups_in_shard() const { return reducer_.groups_in_shard(); }
  // A group written straight into the shard whose columns hold no padding: its columns, dead
  // from the update of one step to the backward of the next (one micro-step per step). The one
  // call that does not wait for every ready event: with the overlapped update (overlaps_update())
  // group g's columns may still be read by its update until weights(g) has returned. The model
  // writes only into the scratch of groups below the layer it is computing, after weights() of
  // that layer's group has returned — the update runs in layout order, so every lower group's is
  // done (CausalLM's lent-memory placement).
  void* gradient_scratch(int g) override;
  // reduce_group(g).
  void grads_ready(int g) override { reduce_group(g); }
  // Reduce-scatters group g's gradient window into this rank's gradient shard: overwrite on the
  // group's first reduction of the optimizer step, add after (collective). Throws zt::Error for
  // a bad g, before init_from_flat/load_state, or after grad_norm() in the same step.
  void reduce_group(int g);

  // ---- optimizer step

  // Global pre-clip gradient norm of the accumulated step (collective on the first call of a step,
  // cached after). Throws zt::Error naming the group when the groups were reduced unequal numbers
  // of times or never (no micro-step ran). A non-finite value is returned as is.
  double grad_norm();
  // Clip + AdamW + new compute weights (stages 0–2: every rank holds the full updated weights;
  // stage 3: the shards are updated). Computes grad_norm() if not done yet. Clears the
  // accumulators and increments adam_step().
  StepResult apply_step(const StepArgs& args);
  // grad_norm(), then apply_step(args) — or discard_step() when the norm is not finite and
  // args.skip_nonfinite.
  StepResult finish_step(const StepArgs& args);
  // Forgets the step's accumulated gradient; parameters, Adam state and step count untouched
  // (a step with N = 0 target tokens, SFT_SEMANTICS §3, or a rejected non-finite step).
  void discard_step();

  // ---- state (checkpoint / resume / export; zero_state.cpp)

  // The file of `rank`'s state under `dir`: dir / "zero_state_rank{rank:05}.bin".
  static std::filesystem::path state_path(const std::filesystem::path& dir, int rank);
  // Writes this rank's master / m / v shards ([S] fp32 each) and the step count to state_path(dir,
  // rank()) atomically (temp + rename). The bytes do not depend on the stage or offload, so a
  // state saved under one stage loads under any other. Collective-free. Throws zt::Error in the
  // middle of a step (gradients reduced but not applied) or on an I/O failure.
  // File: 64-byte header (magic "ZTZERO01", version, W, rank, layout hash, S, adam step, save_id(),
  // XXH3-64 of the header with that last field 0), payload master | m | v (fp32 little-endian),
  // 8-byte XXH3-64 of the payload.
  void save_state(const std::filesystem::path& dir) const;
  // Installs the state saved under `dir` (stage 0 all-gathers the other ranks' shards: collective)
  // and rebuilds the compute weights from the master weights. Clears any step in progress.
  // Rank 0's file gives the world size W0 the checkpoint was written with:
  //   - W0 = W: reads state_path(dir, rank()) only, then (W > 1) all-gathers what each rank read
  //     — whether its file loaded, its save id (collective, reached by every rank whether its
  //     own file loaded or not, so a bad file on one rank makes every rank fail, none wait);
  //   - W0 ≠ W (re-sharding): reads all W0 files, each checked in full, and cuts this rank's
  //     shards of the canonical layout for W from them (element e of tensor i sits in rank
  //     e / S_i's shard under either W), so master, m and v hold exactly the saved values.
  // Checks magic, version, the header checksum (before any other field is believed: "the header
  // is corrupt"), W, rank, layout hash, size, step count and payload checksum of every file it
  // reads, and that every rank's file carries rank 0's save id ("the directory mixes files of two
  // saves", naming both files and ids): zt::Error naming the file, the field, the value found and
  // the value expected; where another rank's file failed, every other rank's error names that
  // rank. Files written before save ids (0 in both new header fields) load with neither check.
  // save_id() becomes the loaded save's (for such old files: rank 0's payload checksum).
  void load_state(const std::filesystem::path& dir);
  // The fp32 master weights gathered to rank 0 (collective): rank 0 gets the model's flat layout
  // [layout.model_elems()] (ParamLayout offsets, padding 0), other ranks an empty vector. For
  // export. Throws zt::Error in the middle of a step.
  std::vector<float> full_master_weights();

  // Blocks the host until every stream of the engine is idle (the asynchronous update included;
  // benchmarks end their timing here).
  void synchronize() { synchronize_all(); }
  // Whether apply_step leaves the update in flight (see EngineOptions::overlap_gather).
  bool overlaps_update() const { return overlap_update_; }

  // Bytes per pool for this stage / offload / W.
  ZeroMemory memory() const;
  // Offload: the host AdamW pool's start-up line (threads and why); empty without offload.
  std::string host_adamw_description() const { return optimizer_->describe(); }

 private:
  void check_group(const char* what, int g) const;
  void require_ready(const char* what) const;
  void require_between_steps(const char* what) const;
  // master / m / v from the owned compute weights; the weights installed as the model's.
  void init_state_from_weights();
  // Every stream of the engine (after the compute stream has waited for every ready event).
  void synchronize_all();
  // load_state under stage 0 (every rank keeps every shard): m and v all-gathered in place (host
  // state: through the reducer), the master likewise — or, split, this rank's block own_master
  // [S] (host memory) all-gathered C columns at a time and written into the other ranks' blocks.
  void all_gather_loaded_state(const float* own_master);
  // load_state's parts: the world size of rank 0's file under `dir` (its magic checked), this
  // rank's own file (same W), and the re-sharding from `saved_w` ranks' files.
  int saved_world_size(const std::filesystem::path& dir) const;
  void load_own_state(const std::filesystem::path& dir);
  void load_resharded_state(const std::filesystem::path& dir, int saved_w);
  Tensor dev(float* p, int64_t n) const { return Tensor(p, DType::kF32, {n}, ops_.device()); }
  void reset_step();

  ShardLayout layout_;
  Ops& ops_;
  dist::Comm& comm_;
  EngineOptions opt_;
  DType dtype_;
  Stream stream_;  // the compute stream (the model's)
  // The asynchronous update (overlaps_update()): decided here, before the gatherer is built,
  // which then holds its per-group ready events.
  bool overlap_update_ = false;
  // Hands out the compute weights; owns the per-group ready events and their one wait rule:
  // weights(g) waits for group g's (acquire), every other engine call for all (wait_all_ready).
  std::unique_ptr<WeightGatherer> gatherer_;
  std::unique_ptr<ShardOptimizer> optimizer_;
  GradReducer reducer_;  // after optimizer_: under offload it accumulates into its host gradient
  // The asynchronous update: its stream and the event the compute stream records before it (both
  // null otherwise; the destructor waits for the stream). Each group's update marks the group
  // produced in the gatherer.
  OwnedStream update_stream_;
  OwnedEvent ev_update_start_;

  // Step state.
  std::vector<int> reduced_;  // per group: reductions in this step
  std::optional<double> norm_;
  bool ready_ = false;
  int64_t adam_step_ = 0;
  uint64_t save_id_ = 0;  // save_id(); set with the state (init_from_flat, load_state)
};

}  // namespace zt::zero
