// Training-step throughput of zerotune on one GPU (issue 8 benchmark; not a test). The model of the
// given config.json initialised from scratch (seed fixed), bf16 compute weights with fp32 master
// weights, gradients and AdamW state (the ZeRO engine, stage 2, W = 1), padding-free micro-batches
// of --seqs sequences of --seq tokens read from the int32 token file that
// bench/gpu_peer_transformers.py writes (so both systems train on the same ids; every token a
// target, labels = ids, as the peer's labels=input_ids). One optimizer step per micro-batch, as the
// peer does. Timed over --steps steps after --warmup, with the device synchronised at both ends.
// Prints one JSON line:
//   {"system": "zerotune", "gc": …, "tokens_per_s": …, "step_s": …, "mfu": …, "peak_gib": …, …}
// MFU = tokens/s × (6·params + 12·L·H·seq/2) / 790e12 — the peer's formula (causal attention at
// half). peak_gib = device memory in use after start-up (every pool is allocated before step 1, so
// this is the peak; the CUDA context and cuBLAS workspace included); max_allocated_gib = the pools'
// maximum (the analog of torch.cuda.max_memory_allocated, which the peers report).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "core/error.h"
#include "dist/bootstrap.h"
#include "io/model_config.h"
#include "model/causal_lm.h"
#include "train/device.h"
#include "zero/zero_engine.h"

namespace {
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zerotune single-GPU training-step benchmark"};
  std::string config, tokens_file, backend = "cuda";
  int64_t seqs = 4, seq = 2048;
  int steps = 8, warmup = 3, stage = 2;
  bool gc = false, offload = false, phases = false, keep_attention = false;
  app.add_option("--config", config, "HF config.json")->required();
  app.add_option("--tokens", tokens_file, "int32 token file [steps, seqs, seq]")->required();
  app.add_option("--seqs", seqs, "sequences per micro-batch");
  app.add_option("--seq", seq, "tokens per sequence");
  app.add_option("--steps", steps, "timed steps");
  app.add_option("--warmup", warmup, "untimed steps first");
  app.add_option("--stage", stage, "ZeRO stage");
  app.add_option("--backend", backend, "cuda or cpu")->check(CLI::IsMember({"cuda", "cpu"}));
  app.add_flag("--gc", gc, "gradient checkpointing");
  app.add_flag("--keep-attention", keep_attention,
               "with --gc: keep each layer's attention output and lse (selective checkpointing)");
  app.add_flag("--offload", offload, "optimizer offload to the CPU");
  app.add_flag("--phases", phases, "also time the phases: forward, forward+backward, engine step");
  CLI11_PARSE(app, argc, argv);
  try {
    using namespace zt;
    const ModelConfig cfg = load_model_config(config);
    const int64_t T = seqs * seq, n_steps = warmup + steps;
    std::vector<int32_t> ids(static_cast<size_t>(n_steps * T));
    {
      std::ifstream f(tokens_file, std::ios::binary);
      f.read(reinterpret_cast<char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 4));
      if (!f) fail("{}: fewer than {} int32 tokens", tokens_file, ids.size());
    }
    const train::Backend be = *enum_from_name<train::Backend>(backend);
    train::DeviceContext dev = train::make_device(be, 0, 1);
    std::unique_ptr<dist::Comm> comm =
        train::make_trainer_comm(std::make_unique<dist::SingleComm>(), be, cfg);
    ModelOptions mo;
    mo.dtype = DType::kBF16;
    mo.max_tokens = T;
    mo.max_seqlen = seq;
    mo.checkpointing = gc;
    mo.keep_attention = keep_attention;
    zero::EngineOptions eo;  // as the trainer sets the model up: the engine is its storage
    eo.stage = stage;
    eo.offload = offload;
    eo.overlap_gather = true;
    eo.micro_steps_per_step = 1;  // one micro-batch per step, as the trainer at accumulation 1
    zero::ZeroEngine engine(ParamLayout(cfg), mo.dtype, *dev.ops, *comm, *dev.device_memory,
                            *dev.host_memory, eo);
    CausalLM model(cfg, *dev.ops, *dev.device_memory, mo, engine);
    std::vector<std::byte> host_flat(static_cast<size_t>(model.layout().total_elems()) * 2);
    const Tensor flat(host_flat.data(), mo.dtype, {model.layout().total_elems()}, Device::kCPU);
    model.init_from_scratch(0, flat);
    engine.init_from_flat(flat);
    optim::AdamWParams adam;
    std::vector<double> losses;
    double t0 = 0;
    for (int64_t k = 0; k < n_steps; ++k) {
      if (k == warmup) {
        engine.synchronize();
        t0 = now();
      }
      PackedBatch pb;
      for (int64_t s = 0; s < seqs; ++s) {
        std::span<const int32_t> x(ids.data() + k * T + s * seq, static_cast<size_t>(seq));
        pb.add(x, x);
      }
      const int64_t N = count_targets(pb.view());
      BackwardOptions bo;
      bo.grad_scale = 1.0f / static_cast<float>(N);
      const CeStats st = model.forward_backward(pb.view(), bo);
      zero::StepArgs sa;
      sa.lr = 1e-5;
      sa.adam = adam;
      engine.finish_step(sa);
      losses.push_back(st.loss_sum / static_cast<double>(N));
    }
    engine.synchronize();  // the last update included
    const double t1 = now();
    const double dt = (t1 - t0) / steps;
    // Phases (same micro-batch, 3 repetitions each, device synchronised around each): the
    // forward alone, forward + backward with its per-group reductions (then discarded), and the
    // engine's part of a step (every group reduced + clip + AdamW + new weights).
    std::string phase_json;
    if (phases) {
      PackedBatch pb;
      for (int64_t s = 0; s < seqs; ++s) {
        std::span<const int32_t> x(ids.data() + s * seq, static_cast<size_t>(seq));
        pb.add(x, x);
      }
      const auto timed = [&](auto&& f) {
        f();
        engine.synchronize();
        const double a = now();
        for (int i = 0; i < 3; ++i) f();
        engine.synchronize();
        return (now() - a) / 3 * 1e3;
      };
      BackwardOptions bo;
      bo.grad_scale = 1e-4f;
      const double f_ms = timed([&] { model.forward(pb.view()); });
      const double fb_ms = timed([&] {
        model.forward_backward(pb.view(), bo);
        engine.discard_step();
      });
      const double e_ms = timed([&] {
        for (int g = model.layout().num_groups() - 1; g >= 0; --g) engine.reduce_group(g);
        zero::StepArgs sa;
        sa.lr = 1e-5;
        engine.finish_step(sa);
      });
      phase_json =
          fmt::format(", \"forward_ms\": {:.2f}, \"fwd_bwd_ms\": {:.2f}, \"engine_ms\": {:.2f}",
                      f_ms, fb_ms, e_ms);
    }
    const double tok_s = static_cast<double>(T) / dt;
    const double P = static_cast<double>(cfg.num_parameters());
    const double mfu =
        tok_s * (6 * P + 12.0 * cfg.num_hidden_layers * cfg.hidden_size * seq / 2) / 790e12;
    const double gib = static_cast<double>(dev.device_bytes_in_use()) / (1024.0 * 1024.0 * 1024.0);
    const double alloc_gib =
        static_cast<double>(dev.device_max_allocated()) / (1024.0 * 1024.0 * 1024.0);
    std::string ls;
    for (double l : losses) ls += (ls.empty() ? "" : ", ") + fmt::format("{:.6f}", l);
    std::printf(
        "{\"system\": \"zerotune\", \"gc\": %s, \"keep_attention\": %s, \"stage\": %d, "
        "\"offload\": %s, \"tokens_per_s\": "
        "%.1f, "
        "\"step_s\": %.5f, \"mfu\": %.4f, \"peak_gib\": %.3f, \"max_allocated_gib\": %.3f, "
        "\"params\": %.0f, \"attention_in_gradient_memory\": %d, \"device\": "
        "\"%s\", "
        "\"losses\": [%s]%s}\n",
        gc ? "true" : "false", keep_attention ? "true" : "false", stage, offload ? "true" : "false",
        tok_s, dt, mfu, gib, alloc_gib, P, model.attention_in_gradient_memory(),
        dev.describe().c_str(), ls.c_str(), phase_json.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train_gpu: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
