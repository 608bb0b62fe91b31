// MicroBatch: one padding-free micro-batch as the model consumes it (DESIGN §2, SFT_SEMANTICS §2):
// the examples concatenated, position ids restarting at 0 per example, sequence boundaries
// cu_seqlens, and HF-convention labels.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace zt {

// The most tokens one micro-batch can hold: its position ids and sequence boundaries (cu_seqlens)
// are int32 (and so are the CUDA attention's and embedding gradient's row indices).
inline constexpr int64_t kMaxMicroBatchTokens = INT32_MAX;

// Host views; the caller keeps the memory alive during the call that uses it.
struct MicroBatch {
  std::span<const int32_t> tokens;        // [T] input ids
  std::span<const int32_t> position_ids;  // [T] (normally 0, 1, … restarting per example)
  std::span<const int32_t> cu_seqlens;    // [n+1]: example i is rows [cu[i], cu[i+1])
  // [T] HF's unshifted labels: the loss at row t (when t+1 is in the same example) uses
  // labels[t+1]; -100 = not trained. The first label of each example is never a target.
  std::span<const int32_t> labels;
  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_seqs() const { return static_cast<int64_t>(cu_seqlens.size()) - 1; }
};

// Checks a micro-batch against the model's limits and vocabulary; zt::Error naming the field,
// the position and the value: sizes of tokens/position_ids/labels differ; cu_seqlens not
// starting at 0, not ending at T, or with an empty or decreasing entry; an example longer than
// max_seqlen; T > max_tokens; a token id or label (other than -100) outside [0, vocab); a negative
// position id.
void validate_micro_batch(const MicroBatch& mb, int64_t vocab, int64_t max_tokens,
                          int64_t max_seqlen);

// Shifted targets: out[t] = labels[t+1] when t+1 is in t's example, else -100 (so no label
// crosses an example boundary). out.size() must equal T. Returns the number of targets.
int64_t shift_targets(const MicroBatch& mb, std::span<int32_t> out);

// Number of target tokens of mb (what shift_targets returns), without writing anything.
int64_t count_targets(const MicroBatch& mb);

// A micro-batch that owns its arrays, built by concatenating examples (ids and labels of equal
// length). Used by the `loss` command, tests and benchmarks; the trainer's micro-batch builder
// lives in src/data.
struct PackedBatch {
  std::vector<int32_t> tokens, position_ids, cu_seqlens{0}, labels;
  // Appends one example; zt::Error when ids and labels differ in length or ids is empty.
  void add(std::span<const int32_t> ids, std::span<const int32_t> example_labels);
  MicroBatch view() const { return {tokens, position_ids, cu_seqlens, labels}; }
  int64_t max_seqlen() const;
};

}  // namespace zt
