// Forward + backward throughput of the CPU model (not a test). A Qwen2/Llama model of the given
// config.json (default: hidden 512, 4 layers, 8 heads / 2 KV heads, intermediate 1536, vocab
// 32000, untied) initialised from scratch, one micro-batch of --tokens random tokens as one
// sequence (or --examples equal sequences), every token a target. Prints one JSON line:
//   {"impl": "zerotune", "tokens": T, "steps": n, "seconds_per_step": s, "tokens_per_second": t, …}
// bench/run_model_cpu.sh runs this and PyTorch on the same config and prints the ratio.
#include <fmt/format.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <random>

#include "backend/cpu/cpu_ops.h"
#include "core/arena.h"
#include "io/json.h"
#include "io/model_config.h"
#include "model/causal_lm.h"

namespace {

constexpr const char* kDefaultConfig = R"({
  "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "vocab_size": 32000,
  "hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 4,
  "num_attention_heads": 8, "num_key_value_heads": 2, "max_position_embeddings": 4096,
  "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": false,
  "hidden_act": "silu", "initializer_range": 0.02, "torch_dtype": "float32"
})";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zerotune CPU model forward+backward benchmark"};
  std::string config, dtype = "fp32";
  int64_t tokens = 2048, examples = 1;
  int steps = 3, warmup = 1;
  bool checkpointing = false;
  app.add_option("--config", config, "HF config.json (default: the built-in 512x4 Qwen2 config)");
  app.add_option("--tokens", tokens, "tokens per micro-batch");
  app.add_option("--examples", examples, "equal-length examples packed into the micro-batch");
  app.add_option("--steps", steps, "timed steps");
  app.add_option("--warmup", warmup, "untimed steps first");
  app.add_option("--dtype", dtype, "fp32 or bf16")->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_flag("--checkpointing", checkpointing, "per-layer activation checkpointing");
  CLI11_PARSE(app, argc, argv);
  try {
    const zt::ModelConfig cfg =
        config.empty() ? zt::parse_model_config(zt::Json::parse(kDefaultConfig), "built-in")
                       : zt::load_model_config(config);
    zt::CpuOps ops;
    zt::HostMemory memory;
    zt::ModelOptions opt;
    opt.dtype = dtype == "bf16" ? zt::DType::kBF16 : zt::DType::kF32;
    opt.max_tokens = tokens;
    opt.checkpointing = checkpointing;
    zt::CausalLM model(cfg, ops, memory, opt);
    model.init_from_scratch(1234);
    std::mt19937 gen(7);
    std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(cfg.vocab_size - 1));
    zt::PackedBatch batch;
    const int64_t per = tokens / examples;
    for (int64_t e = 0; e < examples; ++e) {
      std::vector<int32_t> ids(static_cast<size_t>(e + 1 == examples ? tokens - per * e : per));
      for (auto& x : ids) x = tok(gen);
      batch.add(ids, ids);
    }
    const int64_t n = zt::count_targets(batch.view());
    zt::BackwardOptions bo;
    bo.grad_scale = 1.0f / static_cast<float>(n);
    double loss = 0;
    for (int i = 0; i < warmup; ++i) loss = model.forward_backward(batch.view(), bo).loss_sum / n;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) loss = model.forward_backward(batch.view(), bo).loss_sum / n;
    const double sec =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / steps;
    const zt::ModelMemory mm = model.memory();
    zt::Json out = zt::Json::object();
    out["impl"] = "zerotune";
    out["dtype"] = dtype;
    out["checkpointing"] = checkpointing;
    out["threads"] = omp_get_max_threads();
    out["parameters"] = cfg.num_parameters();
    out["tokens"] = tokens;
    out["examples"] = examples;
    out["steps"] = steps;
    out["loss"] = loss;
    out["seconds_per_step"] = sec;
    out["tokens_per_second"] = static_cast<double>(tokens) / sec;
    out["activation_mib"] = static_cast<double>(mm.activations) / (1 << 20);
    out["workspace_mib"] = static_cast<double>(mm.workspace) / (1 << 20);
    fmt::print("{}\n", out.dump());
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_model_cpu: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
