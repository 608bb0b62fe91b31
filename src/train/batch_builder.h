// From the token cache to the model's padding-free micro-batches (SFT_SEMANTICS §2–3): a training
// sample is one or more examples (a packed bin); every example keeps its own sequence (cu_seqlens
// boundary, position ids from 0), and HF's unshifted labels are the token where the cache's target
// flag is set and -100 elsewhere.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "data/token_cache.h"
#include "model/micro_batch.h"

namespace zt::train {

// Target tokens of each sample: Σ over its examples of #{t >= 1 : target[t]} — the loss terms it
// contributes (position t-1 predicts label t, never across examples). [num_samples].
std::vector<int64_t> sample_target_counts(const data::PreparedDataset& ds);

// Tokens of the longest sample.
int64_t max_sample_tokens(const data::PreparedDataset& ds);
// Tokens of the longest example.
int64_t max_example_tokens(const data::PreparedDataset& ds);

// Appends every example of the given samples, in order, to `out` (which the caller clears).
// Throws zt::Error for a sample index out of range.
void append_samples(const data::PreparedDataset& ds, std::span<const int64_t> samples,
                    PackedBatch* out);

// Appends example `e` alone (eval runs one example per forward so its statistics do not depend on
// the batch size or world size).
void append_example(const data::PreparedDataset& ds, int64_t e, PackedBatch* out);

}  // namespace zt::train
