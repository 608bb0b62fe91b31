// The step plan: which samples every rank's every micro-batch holds in optimizer step k, as HF
// `Trainer` + accelerate lay them out (SFT_SEMANTICS §4). A pure function of (seed, sizes, k), so a
// resume at step k needs nothing but k.
//
// Epoch layout (accelerate 1.x `BatchSamplerShard(split_batches=False, even_batches=True)` over a
// torch `BatchSampler(SeedableRandomSampler, B, drop_last)`, transformers 5.x
// `Trainer._run_epoch`):
//   - the epoch's permutation (train/sampler.h) is cut into micro-batches of B samples:
//     nb = ceil(n / B) (floor with dataloader_drop_last);
//   - micro-batch j goes to rank j mod W; every rank runs L = ceil(nb / W) micro-batches
//     (floor(nb / W) with drop_last, which also drops the incomplete last round);
//   - W = 1: no sharding, the last micro-batch keeps its n − (nb−1)·B samples;
//     W > 1 (without drop_last): every micro-batch has exactly B samples: the sample stream of the
//     epoch is perm[p mod n] for positions p = 0 … W·L·B − 1, i.e. an incomplete last micro-batch
//     and the missing micro-batches of the last round are filled by cycling to the start of the
//     epoch's permutation (the same sample may then appear twice in one step);
//   - each rank's L micro-batches are cut into windows of G (one optimizer step each),
//     U = max(1, ceil(L / G)) steps per epoch, the last window holding L − (U−1)·G; windows never
//     cross an epoch;
//   - T = max_steps if > 0, else ceil(num_train_epochs · U); step k is window k mod U of epoch
//     k / U (HF runs whole epochs and stops when global_step reaches T);
//   - the `epoch` HF logs after step k: e + min((w+1)·G, L) / L (`state.epoch`).
// Checked against accelerate/transformers for W = 1, 2, 4; B = 1, 3, 8; G = 1, 4; drop_last; n not
// divisible; n < W·B and n < W·B·G, a single short step per epoch (tests/data/train/step_plan.json).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "io/json.h"

namespace zt::train {

// Inputs of the plan; HF names in comments.
struct PlanConfig {
  int64_t num_samples = 0;        // training samples (after packing), n
  int64_t batch_size = 8;         // per_device_train_batch_size, B
  int64_t world_size = 1;         // number of data-parallel ranks, W
  int64_t grad_accum = 1;         // gradient_accumulation_steps, G
  double num_train_epochs = 3.0;  // used when max_steps <= 0
  int64_t max_steps = -1;         // > 0: the total number of optimizer steps
  bool drop_last = false;         // dataloader_drop_last
  uint64_t seed = 42;             // data_seed when set, else seed (Python int modulo 2^64)
  // How errors name num_train_epochs: a prefix ("sft.yaml:9: trainer.num_train_epochs") and a
  // suffix (" (given on the command line)"), as RunConfig::key_at / where give them.
  std::string epochs_ref = "num_train_epochs";
  std::string epochs_where = "";
};

// The most optimizer steps a run counts: 2^53, the largest count a double (the epoch progress, the
// learning-rate schedule's step) holds exactly.
inline constexpr int64_t kMaxTotalSteps = int64_t{1} << 53;

// Where optimizer step k sits (all counts are per rank).
struct StepInfo {
  int64_t step = 0;         // k, 0-based (HF global_step before the step)
  int64_t epoch = 0;        // e = k / U
  int64_t window = 0;       // w = k mod U, the window within the epoch
  int64_t first_micro = 0;  // per-rank index of the step's first micro-batch in the epoch, w·G
  int64_t num_micro = 0;    // micro-batches per rank in this step (G, or fewer in the last window)
  double epoch_progress = 0.0;  // HF `state.epoch` after the step: e + (w·G + num_micro) / L
  bool last_in_epoch = false;   // w == U − 1
};

// The samples of one optimizer step: samples[r][m] = indices (into the training samples) of rank
// r's m-th micro-batch, r < W, m < info.num_micro; each holds B indices, or fewer only for W = 1 in
// the last micro-batch of an epoch.
struct StepSamples {
  StepInfo info;
  std::vector<std::vector<std::vector<int64_t>>> samples;
};

class StepPlan {
 public:
  // Validates and derives nb, L, U, T. Throws zt::Error naming the value when n < 1, B < 1, W < 1,
  // G < 1, when neither max_steps > 0 nor num_train_epochs > 0, or when an epoch gives a rank no
  // micro-batch (drop_last with n < B·W).
  explicit StepPlan(const PlanConfig& config);

  const PlanConfig& config() const { return cfg_; }
  int64_t micro_batches_per_epoch() const { return nb_; }       // nb, all ranks together
  int64_t micro_batches_per_rank() const { return per_rank_; }  // L (HF steps_in_epoch)
  int64_t steps_per_epoch() const { return steps_per_epoch_; }  // U (num_update_steps_per_epoch)
  int64_t total_steps() const { return total_steps_; }          // T (max_steps)
  int64_t num_epochs() const;  // epochs the run touches, ceil(T / U)
  // Samples consumed by all ranks per epoch (W·L·B, or n when W = 1 and not drop_last).
  int64_t samples_per_epoch() const;

  // Position of step k. Throws zt::Error when k is not in [0, T).
  StepInfo info(int64_t k) const;
  // Samples of every rank in step k (see StepSamples). Recomputes the epoch's permutation when k
  // is in another epoch than the previous call (O(n)); not thread-safe.
  StepSamples samples(int64_t k);
  // Sample indices of rank `rank`'s micro-batches in step k: [num_micro][≤ B].
  std::vector<std::vector<int64_t>> rank_samples(int64_t k, int64_t rank);
  // The permutation of epoch e (cached).
  const std::vector<int64_t>& permutation(int64_t epoch);

 private:
  std::vector<int64_t> micro_batch(int64_t epoch, int64_t rank, int64_t m);

  PlanConfig cfg_;
  int64_t nb_ = 0, per_rank_ = 0, steps_per_epoch_ = 0, total_steps_ = 0;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> perm_;
};

// Sum of value(sample) over every sample of every micro-batch of every rank in the step — e.g.
// N, the step's global number of target tokens (SFT_SEMANTICS §3), from per-sample target counts;
// each rank computes it alone, no communication. A sample that appears twice counts twice (it is
// trained twice).
template <typename F>
int64_t sum_over_step(const StepSamples& step, F&& value) {
  int64_t total = 0;
  for (const auto& rank : step.samples)
    for (const auto& mb : rank)
      for (int64_t s : mb) total += static_cast<int64_t>(value(s));
  return total;
}

// N of the step from per-sample target-token counts `targets[sample]`. Throws zt::Error when a
// sample index is outside `targets`.
int64_t step_target_tokens(const StepSamples& step, std::span<const int64_t> targets);

// What a checkpoint records about the data order: the inputs that fix it and `next_step`.
// Keys: num_samples, batch_size, world_size, grad_accum, drop_last, seed, num_train_epochs,
// max_steps, total_steps, next_step.
Json plan_state_to_json(const StepPlan& plan, int64_t next_step);
// Reads `next_step` from a checkpoint's plan state after checking that it fixes the same data
// order: num_samples, drop_last and seed equal this plan's, and the split (batch_size, world_size,
// grad_accum) either equals it or is another split of the same global batch B·W·G with as many
// steps an epoch U — then step k holds the same samples under both (an epoch's last step aside
// when the epoch does not fill it: accelerate's padding rule of the new W applies there). Throws
// zt::Error naming `source`, the key, the saved and the current value otherwise (for another
// global batch, the gradient_accumulation_steps that keeps it, where one does), or when next_step
// is not in [0, T]. (num_train_epochs / max_steps may change between runs.)
int64_t plan_state_next_step(const StepPlan& plan, const Json& state, const std::string& source);
// "" when the checkpoint's split (B, W, G) is this plan's, else a line naming both ("… 4 × 2 × 1
// = 8 in the checkpoint, 4 × 1 × 2 = 8 now"). Throws zt::Error as plan_state_next_step for a
// missing or malformed key.
std::string plan_state_split_change(const StepPlan& plan, const Json& state,
                                    const std::string& source);

// Evaluation micro-batches of rank `rank`: the eval samples in order (HF uses a SequentialSampler)
// cut into micro-batches of `batch_size`, micro-batch j on rank j mod W. Every rank gets
// ceil(nb / W) entries; those past the end of the set are empty (HF would pad with repeated samples
// and drop them again in gather_for_metrics; zerotune never makes them). Throws zt::Error for
// n < 0, batch_size < 1, world_size < 1 or rank outside [0, W).
std::vector<std::vector<int64_t>> eval_micro_batches(int64_t num_samples, int64_t batch_size,
                                                     int64_t world_size, int64_t rank);

}  // namespace zt::train
