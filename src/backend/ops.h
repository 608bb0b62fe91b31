// Ops: the device interface the model is written against (DESIGN §4). One instance per device;
// implementations: backend/cpu (OpenMP + OpenBLAS, the reference) and backend/cuda.
//
// Conventions shared by every op:
// - Tensors are non-owning row-major views; on a CUDA backend their pointers are device pointers.
//   Shapes are given as [rows, cols] etc.; an op checks dims/dtypes and throws zt::Error naming
//   the op, the argument and what it got vs expected.
// - Floating-point storage is kF32 or kBF16 ("bf16-storage": loads widen to fp32, arithmetic is
//   fp32, stores round to nearest even). Index tensors are kI32.
// - Ops never allocate. Scratch memory is a `workspace` byte tensor (kU8, any shape) of at least
//   the bytes the matching `*_workspace_bytes` query returns for the same shapes/dtypes.
// - Every op is enqueued on a Stream (cudaStream_t on CUDA; ignored on the CPU, where ops run
//   synchronously). Results that come back to the host (sumsq, cross-entropy stats) are written to
//   host memory and are valid once the stream is synchronised.
// - Deterministic: reductions run in a fixed order that does not depend on the thread count
//   or on buffer addresses; no floating-point atomics.
// - "beta" arguments: 0 overwrites the output, 1 accumulates into it (out = beta*out + result).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/layer_kinds.h"
#include "core/stream.h"
#include "core/tensor.h"

namespace zt {

// Whether a matmul operand is used as stored (kN) or transposed (kT).
enum class Trans : uint8_t { kN, kT };

// Sequence boundaries of a padding-free micro-batch: example i occupies rows
// [cu_seqlens[i], cu_seqlens[i+1]) of every [T, …] activation. Attention never crosses them.
struct Varlen {
  Tensor cu_seqlens;                 // [n+1] i32 on the op's device; 0 = first, T = last
  std::span<const int32_t> cu_host;  // the same n+1 values in host memory
  int64_t max_seqlen = 0;            // max_i (cu[i+1] - cu[i]), for workspace and launch sizes
  int64_t num_seqs() const { return static_cast<int64_t>(cu_host.size()) - 1; }
};

// What linear_cross_entropy_fwd_bwd returns (host memory).
struct CeStats {
  double loss_sum = 0.0;  // sum over target tokens of CE(logits_t, target_t), nats (unscaled)
  int64_t correct = 0;    // target tokens with argmax(logits_t) == target_t (first max wins)
  int64_t count = 0;      // target tokens (targets != -100)
  // sum over target tokens of the entropy of softmax(logits_t), nats (TRL logs its mean as
  // `entropy`).
  double entropy_sum = 0.0;
};

// Workspace budget of the fused LM-head cross-entropy's chunk (CpuOpsOptions / CudaOpsOptions
// ce_budget_bytes): the [rows, V] logits block (fp32, or bf16 on the GPU when the LM head
// computes in bf16) and the chunk's hidden-row buffers. 512 MiB: 1600 rows for Qwen2.5-1.5B in
// bf16 on the GPU (V 151936, H 1536) — the logits block 0.45 GiB instead of 2048 rows' 0.58 GiB.
// Timed on an H200 at 8803d08 (bench_cuda_lm_head, 8192 rows): 21.0 ms against 20.2 ms at a
// 2 GiB budget (bench/README.md).
inline constexpr size_t kCeBudgetBytes = size_t{512} << 20;

// Rows per chunk of the fused LM-head cross-entropy: min(max_rows, T) when that many rows'
// buffers (row_bytes each) fit in budget_bytes; else the most rows that fit, rounded down to a
// multiple of `quantum` when at least one quantum fits; at least 1. The result depends on the
// chunk only through the order in which the chunks' weight gradients are added and the GEMM
// shapes: a given budget gives given bits (every ZeRO stage and offload uses the same chunk);
// another chunk changes low bits.
inline int64_t ce_rows_for_budget(int64_t T, int64_t max_rows, size_t budget_bytes,
                                  size_t row_bytes, int64_t quantum = 1) {
  // min(T, max_rows, the budget's rows rounded down to the quantum): non-decreasing in T, so the
  // workspace planned for the largest T serves every smaller one (a T between the rounded and
  // the unrounded budget rows must not get a larger chunk than the largest T).
  const int64_t want = std::min(max_rows, T);
  int64_t c = static_cast<int64_t>(
      std::min<size_t>(budget_bytes / std::max<size_t>(row_bytes, 1), INT64_MAX));
  if (c >= quantum) c -= c % quantum;
  return std::max<int64_t>(std::min(want, c), 1);
}

class Ops {
 public:
  virtual ~Ops() = default;
  virtual Device device() const = 0;
  // "cpu (2 threads, OpenBLAS)" etc., for logs.
  virtual std::string name() const = 0;

  // ---- streams and events: ordering between the queues of one device. The CPU backend runs
  // every op synchronously, so these defaults are no-ops there. A CUDA stream made here is
  // non-blocking (no implicit ordering with the legacy default stream, which the model uses).

  // A new stream / event (zt::Error when the device refuses), and their destruction (null handles
  // are ignored; never throws: OwnedHandle calls it from a noexcept reset).
  virtual Stream create_stream() { return {}; }
  virtual void destroy_stream(Stream) {}
  virtual Event create_event() { return {}; }
  virtual void destroy_event(Event) {}
  // Marks the point of s reached by what is enqueued so far.
  virtual void record_event(Event, Stream) {}
  // Work enqueued on `waiter` afterwards runs after the last record_event of e has been reached
  // (an event never recorded does not block).
  virtual void wait_event(Stream /*waiter*/, Event /*e*/) {}
  // Blocks the calling thread until the last record_event of e has been reached.
  virtual void synchronize_event(Event) {}
  // Makes the calling thread's ops address this Ops' device. A thread other than the one that
  // built the Ops calls it once before its first call (CUDA's current device is per thread:
  // cudaSetDevice); no-op on the CPU.
  virtual void bind_thread() {}

  // ---- memory

  // x[:] = 0 (any dtype).
  virtual void zero(const Tensor& x, Stream s) = 0;
  // dst (device) = the dst.nbytes() bytes at host pointer src; and the reverse. On CUDA the host
  // memory must stay valid until the stream is synchronised.
  virtual void copy_from_host(const Tensor& dst, const void* src, Stream s) = 0;
  virtual void copy_to_host(void* dst, const Tensor& src, Stream s) = 0;
  // Waits until everything enqueued on s has finished (no-op on the CPU).
  virtual void synchronize(Stream s) = 0;
  // dst = src converted (f32 <-> bf16, or a copy for equal dtypes); same numel.
  virtual void cast(const Tensor& dst, const Tensor& src, Stream s) = 0;
  // out = a + b, elementwise, same numel; out may alias a or b.
  virtual void add(const Tensor& out, const Tensor& a, const Tensor& b, Stream s) = 0;

  // ---- embedding (HF nn.Embedding)

  // out[T, H] = to_dtype(table[ids[t], :] · scale); ids [T] i32. scale is 1 except for the
  // Gemma families (√hidden, rounded to the table's dtype by the caller as HF's
  // `embed_scale.to(weight.dtype)`). An id outside [0, V) throws zt::Error naming the position
  // and value (CPU; CUDA reports it after the step).
  virtual void embedding_fwd(const Tensor& out, const Tensor& table, const Tensor& ids, Stream s,
                             float scale = 1.0f) = 0;
  // Scratch bytes embedding_bwd needs for ids [T] (0 on the CPU; the CUDA backend sorts the ids).
  virtual size_t embedding_workspace_bytes(const Tensor& ids) const = 0;
  // dtable[V, H] (f32) = beta*dtable + scatter-add of scale·dout[T, H] rows at ids[t] (the
  // product in fp32). Rows are added in token order (deterministic; parallel over columns).
  virtual void embedding_bwd(const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                             float beta, const Tensor& workspace, Stream s, float scale = 1.0f) = 0;

  // ---- RMSNorm (HF LlamaRMSNorm / Qwen2RMSNorm / Olmo2RMSNorm / Gemma3RMSNorm, by style)

  // rstd[t] = 1/sqrt(mean_j(x32[t,j]^2) + eps) (f32 [T]); y[t,j] by `style` (core/layer_kinds.h):
  // kLlama: w[j] * to_dtype(x32[t,j]*rstd[t]) — the normalised value is rounded to x's storage
  // dtype *before* the weight multiply, as HF does; kOlmo2: to_dtype(w[j]*x32[t,j]*rstd[t]);
  // kGemma: to_dtype((1 + w[j])*x32[t,j]*rstd[t]). x, y [T, H]; w [H]. Per-head q/k norms are
  // this op on a [T·heads, D] view with w [D].
  virtual void rmsnorm_fwd(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& w,
                           float eps, Stream s, RmsNormStyle style = RmsNormStyle::kLlama) = 0;
  // Backward of rmsnorm_fwd. dw[H] (f32) = beta_dw*dw + sum_t dy[t,:]*n[t,:] (n the normalised
  // value — rounded to x's dtype for kLlama — rows summed in order t = 0..T-1); dx[T,H] =
  // (accumulate_dx ? dx : 0) + rstd*(g - n̂*mean_j(g*n̂)) with g = dy*w' (w' = w, or 1 + w for
  // kGemma) and n̂ = x*rstd (the cast is treated as identity). dx may alias dy.
  virtual void rmsnorm_bwd(const Tensor& dx, bool accumulate_dx, const Tensor& dw, float beta_dw,
                           const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd,
                           Stream s, RmsNormStyle style = RmsNormStyle::kLlama) = 0;

  // ---- matmul (fp32 accumulate)

  // C[M, N] = alpha * op(A) · op(B) + beta * C + bias[N] (bias broadcast over rows; empty Tensor
  // = none). op(A) is [M, K]: A is [M, K] for kN, [K, M] for kT; op(B) is [K, N]: B is [K, N] for
  // kN, [N, K] for kT. All 2-D. Used as x·Wᵀ (kN, kT), dY·W (kN, kN) and dYᵀ·X (kT, kN).
  // A, B, C, bias: f32 or bf16 independently; products are summed in fp32.
  // beta_nonzero: whether the call will have beta != 0 (a backend may need less without it: the
  // CUDA one keeps no fp32 copy of a bf16 C that it only writes); true covers both.
  virtual size_t matmul_workspace_bytes(const Tensor& C, const Tensor& A, Trans ta, const Tensor& B,
                                        Trans tb, bool beta_nonzero = true) const = 0;
  virtual void matmul(const Tensor& C, const Tensor& A, Trans ta, const Tensor& B, Trans tb,
                      const Tensor& bias, float alpha, float beta, const Tensor& workspace,
                      Stream s) = 0;
  // db[N] (f32) = beta*db + sum over rows of dy[M, N] (rows summed in order) — a bias gradient.
  virtual void bias_grad(const Tensor& db, const Tensor& dy, float beta, Stream s) = 0;

  // ---- RoPE (HF rotate_half form: the head vector is split in halves, not interleaved)

  // cos/sin [T, D/2] f32: angle = inv_freq[i] * float(pos[t]) (fp32 product, as HF's fp32
  // `inv_freq @ position_ids`), cos = cos(angle)*attention_scaling, sin likewise. pos [T] i32,
  // inv_freq [D/2] f32. (HF's emb = cat(freqs, freqs) is implied: both halves use index i.)
  virtual void rope_tables(const Tensor& cos, const Tensor& sin, const Tensor& pos,
                           const Tensor& inv_freq, float attention_scaling, Stream s) = 0;
  // In place on x [T, heads, D] with cos/sin [T, R/2], R ≤ D even (R < D: partial rotary, HF
  // Phi-3's `partial_rotary_factor`): the first R elements of each head rotate, x' = x*cos +
  // rotate_half(x)*sin, rotate_half([a, b]) = [-b, a] over those R: x'[i] = x[i]c_i -
  // x[i+R/2]s_i, x'[i+R/2] = x[i+R/2]c_i + x[i]s_i; elements [R, D) pass unchanged.
  virtual void rope_fwd(const Tensor& x, const Tensor& cos, const Tensor& sin, Stream s) = 0;
  // In place on dx [T, heads, D]: the transpose of the rotation (rotation by -angle).
  virtual void rope_bwd(const Tensor& dx, const Tensor& cos, const Tensor& sin, Stream s) = 0;

  // ---- attention (causal, GQA, varlen; HF eager attention maths with an fp32 softmax)

  // out[T, Hq, D] = softmax(scale * q·kᵀ + mask) · v, with q [T, Hq, D], k, v [T, Hkv, D];
  // query head h reads KV head h / (Hq/Hkv). The mask is causal within each sequence and, with
  // window W > 0 (sliding-window attention, HF `sliding_window`), also drops keys W or more
  // positions back: query i of a sequence sees keys j with i - W < j <= i (transformers'
  // `sliding_window_overlay`: kv_idx > q_idx - W). window 0 = no limit. lse [Hq, T] f32 gets the
  // log-sum-exp of each row's scaled scores (saved for the backward).
  virtual size_t attention_workspace_bytes(const Tensor& q, const Tensor& k,
                                           const Varlen& seqs) const = 0;
  virtual void attention_fwd(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Varlen& seqs, float scale,
                             const Tensor& workspace, Stream s, int64_t window = 0) = 0;
  // Backward of attention_fwd: writes (overwrites) dq [T, Hq, D], dk, dv [T, Hkv, D] from dout and
  // the forward's q, k, v, out, lse. Contributions of the Hq/Hkv query heads to one KV head are
  // summed in head order. window as in the forward.
  virtual void attention_bwd(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                             const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& out, const Tensor& lse, const Varlen& seqs, float scale,
                             const Tensor& workspace, Stream s, int64_t window = 0) = 0;

  // ---- gated MLP activation (HF: act_fn(gate_proj(x)) * up_proj(x); act_fn = silu for SwiGLU,
  // gelu_pytorch_tanh for GeGLU: core/layer_kinds.h)

  // out = act(gate) * up (act(g) in fp32, the product rounded once); all [T, I]. silu(g) =
  // g / (1 + exp(-g)); gelu_tanh(g) = 0.5g(1 + tanh(√(2/π)(g + 0.044715g³))) (torch's
  // approximate="tanh").
  virtual void swiglu_fwd(const Tensor& out, const Tensor& gate, const Tensor& up, Stream s,
                          GluActivation act = GluActivation::kSilu) = 0;
  // dup = dout*act(gate); dgate = dout*up*act'(gate), silu'(g) = σ(g)(1 + g(1 - σ(g))),
  // gelu_tanh'(g) = 0.5(1 + t) + 0.5g(1 - t²)·√(2/π)(1 + 3·0.044715g²) with t the tanh above.
  // dgate may alias gate and dup may alias up (elementwise, in place).
  virtual void swiglu_bwd(const Tensor& dgate, const Tensor& dup, const Tensor& dout,
                          const Tensor& gate, const Tensor& up, Stream s,
                          GluActivation act = GluActivation::kSilu) = 0;

  // ---- fused LM head + cross-entropy (HF ForCausalLMLoss with reduction "sum")

  // For every row t with targets[t] != -100: logits_t = hidden[t] · weightᵀ (fp32 accumulate,
  // rounded to bf16 when hidden and weight are both bf16 — HF's bf16 lm_head; never stored for
  // more than a chunk of rows), loss_t = logsumexp(logits_t) - logits_t[target] and the argmax in
  // fp32.
  // stats = {Σ loss_t, #argmax hits, #targets, Σ entropy(softmax(logits_t)) in fp64}. When
  // dhidden is non-empty, also the gradient of grad_scale * Σ loss_t: dhidden[T, H] =
  // grad_scale*(softmax - onehot)·weight (rows without a target get 0) and dweight[V, H] (f32) =
  // beta_dw*dweight + grad_scale*(softmax - onehot)ᵀ·hidden
  // (chunks accumulated in row order; chunk rows: at most ce_rows_for_budget from the backend's
  // ce_budget_bytes and ce_chunk_rows — the CUDA backend shares the rows evenly between as many
  // chunks as that needs). hidden [T, H]; weight [V, H]; targets [T] i32 in [0, V) or
  // -100 (else zt::Error naming the position and value).
  virtual size_t linear_cross_entropy_workspace_bytes(const Tensor& hidden,
                                                      const Tensor& weight) const = 0;
  virtual void linear_cross_entropy_fwd_bwd(CeStats* stats, const Tensor& dhidden,
                                            const Tensor& dweight, float beta_dw,
                                            const Tensor& hidden, const Tensor& weight,
                                            const Tensor& targets, float grad_scale,
                                            const Tensor& workspace, Stream s) = 0;

  // ---- reductions

  // *out = Σ x_i² in fp64 (x f32 or bf16, any shape), summed in fixed blocks of
  // kSumsqBlock elements whose partials are added in block order — independent of threads.
  static constexpr int64_t kSumsqBlock = 16384;
  virtual size_t sumsq_workspace_bytes(const Tensor& x) const = 0;
  virtual void sumsq(double* out, const Tensor& x, const Tensor& workspace, Stream s) = 0;
};

// A stream or event owned by the object that holds it: made by ops.create_stream() /
// create_event() and destroyed through the same Ops when it is reset, reassigned or destroyed
// (so a constructor that throws after making some leaks none, and no destructor lists them).
// Move-only; converts to the plain handle every Ops call takes. Destroying a CUDA stream or
// event with work still pending on it is allowed (CUDA releases it when the work is done); the
// holders synchronise first where buffers must outlive that work.
template <class Handle, Handle (Ops::*kCreate)(), void (Ops::*kDestroy)(Handle)>
class OwnedHandle {
 public:
  OwnedHandle() = default;
  // Throws zt::Error when the device refuses (as create_stream / create_event).
  explicit OwnedHandle(Ops& ops) : ops_(&ops), h_((ops.*kCreate)()) {}
  OwnedHandle(OwnedHandle&& o) noexcept : ops_(o.ops_), h_(o.h_) { o.h_ = {}; }
  OwnedHandle& operator=(OwnedHandle&& o) noexcept {
    if (this != &o) {
      reset();
      ops_ = o.ops_;
      h_ = o.h_;
      o.h_ = {};
    }
    return *this;
  }
  OwnedHandle(const OwnedHandle&) = delete;
  OwnedHandle& operator=(const OwnedHandle&) = delete;
  ~OwnedHandle() { reset(); }
  operator Handle() const { return h_; }  // NOLINT(google-explicit-constructor): a handle
  void reset() noexcept {
    if (ops_ != nullptr && h_.handle != nullptr) (ops_->*kDestroy)(h_);
    h_ = {};
  }

 private:
  Ops* ops_ = nullptr;
  Handle h_{};
};
using OwnedStream = OwnedHandle<Stream, &Ops::create_stream, &Ops::destroy_stream>;
using OwnedEvent = OwnedHandle<Event, &Ops::create_event, &Ops::destroy_event>;

}  // namespace zt
