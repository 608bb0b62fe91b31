#include "train/batch_builder.h"

#include <algorithm>

#include "core/error.h"

namespace zt::train {

std::vector<int64_t> sample_target_counts(const data::PreparedDataset& ds) {
  std::vector<int64_t> out(static_cast<size_t>(ds.num_samples()), 0);
  for (int64_t s = 0; s < ds.num_samples(); ++s) {
    auto r = ds.sample_examples(s);
    int64_t n = 0;
    for (int64_t e = r.first; e < r.last; ++e) {
      auto t = ds.targets(e);
      for (size_t i = 1; i < t.size(); ++i) n += t[i] != 0;
    }
    out[static_cast<size_t>(s)] = n;
  }
  return out;
}

int64_t max_sample_tokens(const data::PreparedDataset& ds) {
  int64_t m = 0;
  for (int64_t s = 0; s < ds.num_samples(); ++s) m = std::max<int64_t>(m, ds.sample_tokens(s).size());
  return m;
}

int64_t max_example_tokens(const data::PreparedDataset& ds) {
  int64_t m = 0;
  for (int64_t e = 0; e < ds.num_examples(); ++e) m = std::max(m, ds.example_length(e));
  return m;
}

void append_example(const data::PreparedDataset& ds, int64_t e, PackedBatch* out) {
  if (e < 0 || e >= ds.num_examples())
    fail("{}: example {} out of range [0, {})", ds.path().string(), e, ds.num_examples());
  auto ids = ds.tokens(e);
  auto tgt = ds.targets(e);
  std::vector<int32_t> labels(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) labels[i] = tgt[i] ? ids[i] : -100;
  out->add(ids, labels);
}

void append_samples(const data::PreparedDataset& ds, std::span<const int64_t> samples, PackedBatch* out) {
  for (int64_t s : samples) {
    if (s < 0 || s >= ds.num_samples())
      fail("{}: sample {} out of range [0, {})", ds.path().string(), s, ds.num_samples());
    auto r = ds.sample_examples(s);
    for (int64_t e = r.first; e < r.last; ++e) append_example(ds, e, out);
  }
}

}  // namespace zt::train
