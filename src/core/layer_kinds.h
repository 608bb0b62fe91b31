// The per-op variants a decoder layer of an HF model family chooses (DESIGN §12). Shared by the
// model config (io/model_config.h), which parses a family's config.json into them, and the ops
// (backend/ops.h), which implement each one.
#pragma once

#include <cstdint>

namespace zt {

// How an RMSNorm applies its weight w to the normalised row n = x·rstd (statistics in fp32 in
// every style; the styles differ in the offset and in where the bf16 rounding happens):
//   kLlama: y = w · to_dtype(n)           (LlamaRMSNorm, Qwen2/3, Mistral, SmolLM3, Phi-3: the
//                                          normalised value is rounded before the multiply)
//   kOlmo2: y = to_dtype(w · n)           (Olmo2RMSNorm: the product in fp32, then rounded)
//   kGemma: y = to_dtype((1 + w) · n)     (Gemma3RMSNorm: offset weight, product in fp32)
// In fp32 kLlama and kOlmo2 agree.
enum class RmsNormStyle : uint8_t { kLlama, kOlmo2, kGemma };

// The activation of a gated MLP, out = act(gate) · up:
//   kSilu:     silu(g) = g·σ(g)                                    (SwiGLU; HF "silu")
//   kGeluTanh: gelu_tanh(g) = ½g(1 + tanh(√(2/π)(g + 0.044715g³))) (GeGLU; HF
//              "gelu_pytorch_tanh", the Gemma families)
enum class GluActivation : uint8_t { kSilu, kGeluTanh };

}  // namespace zt
