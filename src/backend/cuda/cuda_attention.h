// Launchers of the CUDA attention kernels (cuda_attention.cu): causal, GQA, padding-free varlen
// attention — forward and a deterministic backward — with the semantics of Ops::attention_fwd/bwd
// (backend/ops.h; reference: backend/cpu/cpu_attention.cpp). Plain C++ types only, so host code and
// tests need no CUDA headers. Arguments are validated by the caller (CudaOps::attention_*, in
// cuda_attention.cpp); the launchers throw std::invalid_argument only for shapes no kernel covers,
// and zt::Error (cuda_check.h) for a failed CUDA call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace zt::cuda {

// One attention call's shapes. Tensors are row-major device arrays of one storage type (bf16 when
// `bf16`, else f32): q, out, dout, dq [T, Hq, D]; k, v, dk, dv [T, Hkv, D]; lse [Hq, T] f32.
struct AttnProblem {
  int64_t T = 0;
  int Hq = 0, Hkv = 0;  // Hq a multiple of Hkv; query head h reads KV head h / (Hq / Hkv)
  int D = 0;            // head dim, 1..256
  bool bf16 = false;
  const int32_t* cu_dev = nullptr;   // cu_seqlens [num_seqs + 1] i32, device memory
  const int32_t* cu_host = nullptr;  // the same values in host memory (launch sizes come from it)
  int num_seqs = 0;
  float scale = 1.0f;  // scores = scale * q·k
  // Sliding window W: query i of a sequence sees keys j with i - W < j ≤ i; 0 = none (≥ 0).
  int64_t window = 0;
  // The Hopper backward's query heads per block G: a divisor of Hq / Hkv, whose blocks take G query
  // heads of one KV head in turn and sum their dK/dV in registers (fewer per-head fp32 partials to
  // store and add); 0 = chosen by attention_bwd's cost model (attention_bwd_heads_per_block). Tests
  // and benchmarks set it; the results are deterministic for every G, not bitwise equal across G.
  int bwd_heads_per_block = 0;
  // The Hopper backward's block order (which blocks run side by side; never a value): 0 = the
  // default (sequence by sequence at G = 1, tile-major above), 1 = sequence by sequence, 2 =
  // tile-major (every sequence's key tile 0, then every tile 1, …). Benchmarks set it.
  int bwd_block_order = 0;
};

// Which kernels run. kAuto: the tensor-core kernels (bf16, D ∈ {64, 128, 256}, 16-byte aligned
// pointers; D = 256 needs sm_90's 227 KiB of shared memory per block) — on an sm_90 device, at
// D ∈ {64, 128} without a window, the Hopper (wgmma) forward and backward — else the generic
// fp32-arithmetic ones. kMmaSync forces the mma.sync tensor-core kernels where kAuto would pick the
// Hopper ones (tests and benchmarks compare the two); kGeneric forces the generic kernels (tests).
// The forward and backward of one layer must use the same choice (the backward recomputes P
// from the forward's lse; either pair is exact to its own rounding).
enum class AttnKernels { kAuto, kGeneric, kMmaSync };

// True when kAuto runs the Hopper kernels for this problem on the current device (given
// attention_uses_tensor_cores).
bool attention_uses_sm90(const AttnProblem& p);

// True when kAuto picks the tensor-core kernels for this problem and these tensor pointers.
bool attention_uses_tensor_cores(const AttnProblem& p, std::initializer_list<const void*> ptrs);

// Workspace bytes attention_fwd and attention_bwd need (the same for both): tile table i32
// [max(num_seqs, T) + 1], Di and log2-scaled lse f32 [Hq, T], when Hq > Hkv per-query-head fp32
// dK and dV partials [T, Hq, D] each (8·T·Hq·D bytes), and when the Hopper fused backward runs
// (bf16, D 64 or 128, no window, compute capability 9.0) its dQ accumulator f32 [Hq, T, D]
// (4·T·Hq·D bytes), dQ flags (8·T·Hq bytes), head-sum counters (4·T·Hkv bytes), its block order
// (8·T bytes) and that order's scratch (12·(⌈T / 128⌉ + 1) bytes). Depends on
// num_seqs only when it exceeds T (empty sequences), so it may be queried with num_seqs = 0 and
// no cu_seqlens; it grows with T.
size_t attention_workspace_bytes(const AttnProblem& p);

// The query heads per block G the Hopper backward runs for this problem: p.bwd_heads_per_block
// when set, else the divisor of Hq / Hkv whose simulated schedule (in the block order each G gets,
// p.bwd_block_order) is shortest (see the definition); 1 when the problem does not run the Hopper
// backward. Needs p.cu_host. std::invalid_argument for an unsupported shape, a
// bwd_heads_per_block that does not divide Hq / Hkv or a bwd_block_order not 0-2 (attention_fwd
// and attention_bwd refuse those too, whichever kernels run).
int attention_bwd_heads_per_block(const AttnProblem& p);

// Whether the Hopper backward's blocks run tile-major (every sequence's key tile 0, then every
// tile 1, …) rather than sequence by sequence, at G query heads per block: p.bwd_block_order when
// set (2 = tile-major), else tile-major for G > 1 (bench/README, session 28, times both).
bool attention_bwd_tile_major(const AttnProblem& p, int G);

// out = softmax(scale·q·kᵀ + causal (and p.window) mask within each sequence)·v; lse[h, t] = log Σ
// exp(scores) (natural log). Enqueued on `stream` (a cudaStream_t); workspace is device memory of
// at least attention_workspace_bytes(p).
void attention_fwd(const AttnProblem& p, void* out, float* lse, const void* q, const void* k,
                   const void* v, void* workspace, void* stream,
                   AttnKernels which = AttnKernels::kAuto);

// Backward of attention_fwd: overwrites dq, dk, dv. dK/dV of a KV head sum its query heads'
// contributions in head order; bitwise repeatable (no floating-point atomics).
void attention_bwd(const AttnProblem& p, void* dq, void* dk, void* dv, const void* dout,
                   const void* q, const void* k, const void* v, const void* out, const float* lse,
                   void* workspace, void* stream, AttnKernels which = AttnKernels::kAuto);

}  // namespace zt::cuda
