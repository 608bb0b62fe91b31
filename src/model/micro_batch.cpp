#include "model/micro_batch.h"

#include <algorithm>

#include "core/error.h"

namespace zt {

void validate_micro_batch(const MicroBatch& mb, int64_t vocab, int64_t max_tokens,
                          int64_t max_seqlen) {
  const int64_t T = mb.num_tokens();
  if (static_cast<int64_t>(mb.position_ids.size()) != T ||
      static_cast<int64_t>(mb.labels.size()) != T)
    fail("micro-batch: {} tokens but {} position_ids and {} labels", T, mb.position_ids.size(),
         mb.labels.size());
  if (T > max_tokens)
    fail("micro-batch: {} tokens, more than the {} the model was sized for (max_tokens)", T,
         max_tokens);
  const auto& cu = mb.cu_seqlens;
  if (cu.size() < 2 || cu.front() != 0 || cu.back() != T)
    fail(
        "micro-batch: cu_seqlens must start at 0 and end at {} tokens (got {} entries, first {}, "
        "last {})",
        T, cu.size(), cu.empty() ? -1 : cu.front(), cu.empty() ? -1 : cu.back());
  for (size_t i = 1; i < cu.size(); ++i) {
    const int64_t len = int64_t{cu[i]} - cu[i - 1];
    if (len <= 0)
      fail("micro-batch: example {} is empty or cu_seqlens decreases ({} -> {})", i - 1, cu[i - 1],
           cu[i]);
    if (len > max_seqlen)
      fail("micro-batch: example {} has {} tokens, more than max_seqlen {}", i - 1, len,
           max_seqlen);
  }
  for (int64_t t = 0; t < T; ++t) {
    if (mb.tokens[t] < 0 || mb.tokens[t] >= vocab)
      fail("micro-batch: token id {} at position {} is outside the vocabulary [0, {})",
           mb.tokens[t], t, vocab);
    if (mb.labels[t] != -100 && (mb.labels[t] < 0 || mb.labels[t] >= vocab))
      fail("micro-batch: label {} at position {} is outside [0, {}) and not -100", mb.labels[t], t,
           vocab);
    if (mb.position_ids[t] < 0)
      fail("micro-batch: position id {} at position {} is negative", mb.position_ids[t], t);
  }
}

int64_t shift_targets(const MicroBatch& mb, std::span<int32_t> out) {
  const int64_t T = mb.num_tokens();
  if (static_cast<int64_t>(out.size()) != T)
    fail("shift_targets: output has {} entries for {} tokens", out.size(), T);
  int64_t n = 0;
  for (size_t i = 0; i + 1 < mb.cu_seqlens.size(); ++i) {
    const int64_t b = mb.cu_seqlens[i], e = mb.cu_seqlens[i + 1];
    for (int64_t t = b; t < e; ++t) {
      out[t] = t + 1 < e ? mb.labels[t + 1] : -100;
      n += out[t] != -100;
    }
  }
  return n;
}

int64_t count_targets(const MicroBatch& mb) {
  int64_t n = 0;
  for (size_t i = 0; i + 1 < mb.cu_seqlens.size(); ++i)
    for (int64_t t = mb.cu_seqlens[i]; t + 1 < mb.cu_seqlens[i + 1]; ++t)
      n += mb.labels[t + 1] != -100;
  return n;
}

void PackedBatch::add(std::span<const int32_t> ids, std::span<const int32_t> example_labels) {
  if (ids.empty()) fail("PackedBatch: example {} has no tokens", cu_seqlens.size() - 1);
  if (ids.size() != example_labels.size())
    fail("PackedBatch: example {} has {} input_ids but {} labels", cu_seqlens.size() - 1,
         ids.size(), example_labels.size());
  tokens.insert(tokens.end(), ids.begin(), ids.end());
  labels.insert(labels.end(), example_labels.begin(), example_labels.end());
  for (size_t i = 0; i < ids.size(); ++i) position_ids.push_back(static_cast<int32_t>(i));
  cu_seqlens.push_back(static_cast<int32_t>(tokens.size()));
}

int64_t PackedBatch::max_seqlen() const {
  int64_t m = 0;
  for (size_t i = 1; i < cu_seqlens.size(); ++i)
    m = std::max<int64_t>(m, cu_seqlens[i] - cu_seqlens[i - 1]);
  return m;
}

}  // namespace zt
