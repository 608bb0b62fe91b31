// Token balancing of the ranks' micro-batches within one optimizer step (zerotune's addition to
// the HF/accelerate layout of train/step_plan.h; compute.balance_micro_batches, on by default).
//
// Data-parallel ranks meet at every micro-step (the per-layer reduce-scatters), so a step runs at
// the pace of the rank with the most tokens in each micro-batch. For every micro-batch index m the
// samples all ranks hold at m are dealt again: longest first (ties: earlier position in rank order),
// each to the rank with the fewest tokens so far that still has room (ties: the lower rank), every
// rank keeping as many samples as accelerate gave it; inside a micro-batch the samples keep their
// rank-order positions. The step's set of samples, its target count N and every micro-batch's size
// are unchanged, so the loss is the same sum in another order (fp32 reassociation only), the same
// on every ZeRO stage; only which rank computes which sample moves. A pure function: every rank
// computes the same result.
#pragma once

#include <cstdint>
#include <functional>

#include "train/step_plan.h"

namespace zt::train {

// Rebalances ss.samples in place (see the file comment). tokens(i): the token count of training
// sample i (> 0). W = 1 leaves ss as it is, and so does a micro-step where every rank holds at
// most one sample (no dealing can lighten the heaviest rank there).
void balance_micro_batches(StepSamples& ss, const std::function<int64_t(int64_t)>& tokens);

}  // namespace zt::train
