// Shared fixtures for the model tests: the tiny HF models and transformers goldens under
// tests/data/model/<name>/ (made by tools/make_model_goldens.py), and comparison helpers.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/arena.h"
#include "io/json.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/causal_lm.h"

namespace zt::test {

inline std::filesystem::path model_dir(const std::string& name) {
  return std::filesystem::path(ZT_TEST_DATA) / "model" / name;
}

// One golden model: its config, weights reader, transformers' results and the examples.
struct Golden {
  std::string name;
  ModelConfig cfg;
  std::unique_ptr<SafetensorsReader> weights, golden;
  Json json;
  std::vector<PackedBatch> examples;  // one PackedBatch per example (alone)
  PackedBatch packed;                 // all examples in one micro-batch

  explicit Golden(const std::string& n) : name(n) {
    const auto dir = model_dir(n);
    cfg = load_model_config(dir);
    weights = std::make_unique<SafetensorsReader>(dir);
    golden = std::make_unique<SafetensorsReader>(dir / "golden.safetensors");
    std::ifstream in(dir / "golden.json");
    json = Json::parse(in);
    for (const auto& ex : json["examples"]) {
      const auto ids = ex["input_ids"].get<std::vector<int32_t>>();
      const auto labels = ex["labels"].get<std::vector<int32_t>>();
      PackedBatch one;
      one.add(ids, labels);
      examples.push_back(std::move(one));
      packed.add(ids, labels);
    }
  }
  int64_t targets() const { return json["targets"].get<int64_t>(); }
};

// A CPU model of `g` with the given options, weights loaded.
struct TestModel {
  CpuOps ops;
  HostMemory memory;
  std::unique_ptr<CausalLM> model;
  // keep_attention: ModelOptions::keep_attention (selective checkpointing).
  TestModel(const Golden& g, DType dtype, bool checkpointing, int64_t max_tokens = 0,
            CpuOpsOptions oo = {}, bool keep_attention = false)
      : ops(oo) {
    ModelOptions o;
    o.dtype = dtype;
    o.max_tokens = max_tokens > 0 ? max_tokens : g.packed.view().num_tokens();
    o.checkpointing = checkpointing;
    o.keep_attention = keep_attention;
    model = std::make_unique<CausalLM>(g.cfg, ops, memory, o);
    model->load_weights(*g.weights);
  }
  std::vector<float> grad(int i) const {
    const Tensor t = model->grad(i);
    return std::vector<float>(t.as<float>(), t.as<float>() + t.numel());
  }
  std::vector<float> all_grads() const {
    const Tensor t = model->all_grads();
    return std::vector<float>(t.as<float>(), t.as<float>() + t.numel());
  }
};

// max_i |a_i - b_i| / max_i |b_i|.
inline double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0, s = 1e-30;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
    s = std::max(s, std::abs(static_cast<double>(b[i])));
  }
  return m / s;
}

// ||a - b||₂ / ||b||₂.
inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 1e-300;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    n += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(d / n);
}

}  // namespace zt::test
