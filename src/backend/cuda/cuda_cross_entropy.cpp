// CudaOps::linear_cross_entropy_fwd_bwd: the LM head fused with the token cross-entropy (HF
// `ForCausalLMLoss` on `logits.float()`, reduction "sum"; CPU reference
// backend/cpu/cpu_cross_entropy.cpp). [T, V] logits never exist: the rows that have a target are
// compacted (prompt tokens cost nothing) and processed in chunks of C rows — ce_chunk_rows, fewer
// (a multiple of 64) when they do not fit in ce_budget_bytes (chunk_rows below), the rows shared
// evenly between the chunks:
//
//   hc[nc, H]      = hidden[rows]                         (gather, in the compute dtype)
//   logits[nc, V]  = hc · weightᵀ                         (cuBLASLt, fp32 accumulate, stored
//                                                          in the compute dtype)
//   per row        : max, log-sum-exp, loss, first argmax, entropy (fp32), and in place
//                    G = grad_scale·(softmax - onehot)    (one kernel, two reads of the row)
//   dhc[P][nc, H]  = G[:, slice p] · weight[slice p, :]   (cuBLASLt, fp32 out, P vocabulary
//                    slices on P streams) → dhidden[rows] = Σ_p in slice order (the scatter)
//   dweight[V, H]  = (c0 == 0 ? beta_dw : 1)·dweight + Gᵀ · hc   (cuBLASLt, fp32 accumulate)
//
// Compute dtype: bf16 when hidden and weight are both bf16 — the GEMMs then run on tensor cores,
// the logits are stored in bf16 (each the fp32-accumulated dot product rounded once, as HF's bf16
// `lm_head` returns them and as Liger's fused linear cross-entropy computes them; the CPU
// reference rounds them the same way), the softmax, loss, argmax and entropy are computed from
// them in fp32, and G is written over them in bf16 for the two backward products. Halving the
// logits' bytes doubles the rows a chunk holds in the same budget, which halves the re-reads of
// the fp32 weight gradient (one read-modify-write of [V, H] per chunk) and the softmax's traffic.
// Otherwise fp32 throughout (a bf16 operand widened exactly), G in place in fp32.
//
// Statistics: per-row loss / entropy (fp64) and argmax hits land in device arrays indexed by the
// compacted row and are reduced in one fixed order at the end (ce_reduce_stats), so they do not
// depend on the chunk size. The op synchronises the stream twice: after compacting the targets
// (the host needs the count to size the chunks, and an out-of-range target is thrown before any
// work — naming its position and value, as the CPU does), and at the end to fill *stats (a plain
// host struct). Once per micro-batch, each costs a few microseconds of idle GPU.
//
// Workspace (linear_cross_entropy_workspace_bytes), with e = 2 (bf16 compute) or 4: 24·T (rows,
// per-row stats) + C·H·(e + 4·P) + e·C·V (logits / G, the gathered rows and the P = kCeDhParts
// input-gradient partials: these within ce_budget_bytes) + 32 MiB + (P − 1)·4 MiB
// (cuBLASLt) [+ 4·V·H for an f32 copy of a bf16 weight beside f32 hidden]. Qwen2.5-1.5B, bf16,
// T = 8192, P = 4: the default 512 MiB budget gives C = 1600: 486.2 MB (logits) + 44.2 MB
// + 0.2 MB + 46.1 MB ≈ 0.58 GB (C = 2048, the cap: 622.3 MB + 56.6 MB + 0.2 MB + 46.1 MB
// ≈ 0.73 GB).
#include <algorithm>
#include <cstdint>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_cross_entropy_kernels.h"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace zt {

namespace {

constexpr char kOp[] = "linear_cross_entropy";

size_t round256(size_t n) { return (n + 255) & ~size_t{255}; }

// Byte offsets of the workspace regions (from a 256-byte aligned base) and the total asked for.
struct CeLayout {
  size_t info, stats, rows, loss, entropy, hit, hc, dhc, logits, w32, lt, lt_side, total;
};

// cuBLASLt workspace of each input-gradient slice product on a side stream.
constexpr size_t kSideLtBytes = size_t{4} << 20;

CeLayout ce_layout(int64_t T, int64_t H, int64_t V, int64_t C, DType ct, bool w32,
                   size_t lt_bytes) {
  CeLayout L{};
  size_t off = 0;
  const auto take = [&](size_t bytes) {
    const size_t o = off;
    off += round256(bytes);
    return o;
  };
  const auto n = [](int64_t a) { return static_cast<size_t>(a); };
  L.info = take(3 * sizeof(int64_t));
  L.stats = take(sizeof(cuda::CeDeviceStats));
  L.rows = take(n(T) * 4);
  L.loss = take(n(T) * 8);
  L.entropy = take(n(T) * 8);
  L.hit = take(n(T) * 4);
  L.hc = take(n(C) * n(H) * dtype_size(ct));
  L.dhc = take(n(kCeDhParts) * n(C) * n(H) * 4);  // the input-gradient partials
  L.logits = take(n(C) * n(V) * dtype_size(ct));
  L.w32 = w32 ? take(n(V) * n(H) * 4) : off;
  L.lt = take(lt_bytes);
  L.lt_side = take((kCeDhParts - 1) * kSideLtBytes);
  L.total = off + 256;  // slack to align the base
  return L;
}

void check_float(const char* arg, const Tensor& t) {
  if (t.dtype != DType::kF32 && t.dtype != DType::kBF16)
    fail("{}: {} has dtype {}, expected f32 or bf16", kOp, arg, dtype_name(t.dtype));
}

void check_device(const char* arg, const Tensor& t) {
  if (t.device != Device::kCUDA) fail("{}: {} {} is not in device memory", kOp, arg, t.describe());
  if (t.data == nullptr && t.numel() > 0) fail("{}: {} {} has no data", kOp, arg, t.describe());
}

void check_dims(const char* arg, const Tensor& t, std::initializer_list<int64_t> dims) {
  bool ok = t.ndim == static_cast<int>(dims.size());
  int i = 0;
  for (const int64_t d : dims) {
    if (ok && d >= 0 && t.dim(i) != d) ok = false;
    ++i;
  }
  if (!ok)
    fail("{}: {} is {}, expected shape {}", kOp, arg, t.describe(),
         shape_to_string(std::span<const int64_t>(dims.begin(), dims.size())));
}

DType compute_dtype(const Tensor& hidden, const Tensor& weight) {
  return hidden.dtype == DType::kBF16 && weight.dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
}

// Rows per chunk: each row takes a logits row [V] and a gathered hidden row [H] of the compute
// dtype and kCeDhParts fp32 gradient partials [H]; a multiple of kCeRowQuantum rows when one fits.
constexpr int64_t kCeRowQuantum = 64;  // the GEMMs' M dimension in whole tensor-core tiles
int64_t chunk_rows(const CudaOpsOptions& o, int64_t T, int64_t H, int64_t V, DType ct) {
  const size_t row = dtype_size(ct) * static_cast<size_t>(V) +
                     static_cast<size_t>(H) * (dtype_size(ct) + 4 * kCeDhParts);
  return ce_rows_for_budget(T, o.ce_chunk_rows, o.ce_budget_bytes, row, kCeRowQuantum);
}

}  // namespace

size_t CudaOps::linear_cross_entropy_workspace_bytes(const Tensor& hidden,
                                                     const Tensor& weight) const {
  check_dims("hidden", hidden, {-1, -1});
  check_dims("weight", weight, {-1, hidden.dim(1)});
  check_float("hidden", hidden);
  check_float("weight", weight);
  const int64_t T = hidden.dim(0), H = hidden.dim(1), V = weight.dim(0);
  const DType ct = compute_dtype(hidden, weight);
  const int64_t C = chunk_rows(opt_, T, H, V, ct);
  return ce_layout(T, H, V, C, ct, weight.dtype != ct, kLtWorkspaceBytes).total;
}

void CudaOps::linear_cross_entropy_fwd_bwd(CeStats* stats, const Tensor& dhidden,
                                           const Tensor& dweight, float beta_dw,
                                           const Tensor& hidden, const Tensor& weight,
                                           const Tensor& targets, float grad_scale,
                                           const Tensor& workspace, Stream s) {
  check_dims("hidden", hidden, {-1, -1});
  const int64_t T = hidden.dim(0), H = hidden.dim(1);
  check_dims("weight", weight, {-1, H});
  const int64_t V = weight.dim(0);
  check_dims("targets", targets, {T});
  if (targets.dtype != DType::kI32)
    fail("{}: targets has dtype {}, expected i32", kOp, dtype_name(targets.dtype));
  check_float("hidden", hidden);
  check_float("weight", weight);
  check_device("hidden", hidden);
  check_device("weight", weight);
  check_device("targets", targets);
  const bool grad = dhidden.data != nullptr;
  if (grad) {
    check_dims("dhidden", dhidden, {T, H});
    check_float("dhidden", dhidden);
    check_device("dhidden", dhidden);
    check_dims("dweight", dweight, {V, H});
    if (dweight.dtype != DType::kF32)
      fail("{}: dweight has dtype {}, expected f32", kOp, dtype_name(dweight.dtype));
    check_device("dweight", dweight);
  }
  if (H == 0) fail("{}: hidden {} has no columns", kOp, hidden.describe());
  const size_t need = linear_cross_entropy_workspace_bytes(hidden, weight);
  if (workspace.nbytes() < need || workspace.data == nullptr)
    fail("{}: workspace has {} bytes, {} needed", kOp, workspace.nbytes(), need);
  if (workspace.device != Device::kCUDA) fail("{}: workspace is not in device memory", kOp);

  const cudaStream_t cs = static_cast<cudaStream_t>(s.handle);
  const DType ct = compute_dtype(hidden, weight);
  const int64_t C = chunk_rows(opt_, T, H, V, ct);
  const bool bf16 = ct == DType::kBF16;
  const CeLayout L = ce_layout(T, H, V, C, ct, weight.dtype != ct, kLtWorkspaceBytes);
  char* base = static_cast<char*>(workspace.data);
  base += (256 - (reinterpret_cast<uintptr_t>(base) & 255u)) & 255u;
  const auto at = [&](size_t off) { return base + off; };
  auto* info = reinterpret_cast<int64_t*>(at(L.info));
  auto* dstats = reinterpret_cast<cuda::CeDeviceStats*>(at(L.stats));
  auto* rows = reinterpret_cast<int32_t*>(at(L.rows));
  auto* loss = reinterpret_cast<double*>(at(L.loss));
  auto* entropy = reinterpret_cast<double*>(at(L.entropy));
  auto* hit = reinterpret_cast<int32_t*>(at(L.hit));
  void* hc = at(L.hc);
  auto* dhc = reinterpret_cast<float*>(at(L.dhc));
  void* logits = at(L.logits);  // [C, V] of the compute dtype
  void* lt_ws = at(L.lt);

  // Rows with a target, and the first invalid target (thrown before any work).
  int64_t host_info[3] = {0, -1, 0};
  if (T > 0) {
    cuda::ce_compact_targets(targets.as<int32_t>(), T, V, rows, info, cs);
    cuda::check(cudaMemcpyAsync(host_info, info, sizeof(host_info), cudaMemcpyDeviceToHost, cs),
                kOp);
    cuda::check(cudaStreamSynchronize(cs), kOp);
  }
  if (host_info[1] >= 0)
    fail("{}: target {} at position {} is outside [0, {}) and not -100", kOp, host_info[2],
         host_info[1], V);
  const int64_t n = host_info[0];

  if (grad) {
    if (dhidden.nbytes() > 0)
      cuda::check(cudaMemsetAsync(dhidden.data, 0, dhidden.nbytes(), cs), kOp);
    if (n == 0 && beta_dw == 0.0f && dweight.nbytes() > 0)
      cuda::check(cudaMemsetAsync(dweight.data, 0, dweight.nbytes(), cs), kOp);
    else if (n == 0 && beta_dw != 1.0f)
      cuda::ce_scale(dweight.as<float>(), dweight.numel(), beta_dw, cs);
  }
  const void* w = weight.data;
  if (weight.dtype != ct && n > 0) {
    const Tensor w32(at(L.w32), DType::kF32, {V, H}, Device::kCUDA);
    cast(w32, weight, s);
    w = w32.data;
  }
  const GemmView W{w, ct, V, H, H};
  // The input-gradient product's vocabulary slices: kCeDhParts of `slice` columns (a multiple of
  // 64), the last one shorter; fewer when V is small. A function of V alone, so the same bits.
  const int64_t slice = (V + kCeDhParts * 64 - 1) / (kCeDhParts * 64) * 64;
  const int parts = static_cast<int>((V + slice - 1) / slice);
  if (grad && n > 0 && ce_side_[0].handle == nullptr) {  // first use: the side streams and events
    try {
      for (Stream& st : ce_side_) st = create_stream();
      for (Event& ev : ce_ev_) ev = create_event();
    } catch (...) {  // all or none: a later call must not find some made and skip the rest
      for (Stream& st : ce_side_) destroy_stream(std::exchange(st, Stream{}));
      for (Event& ev : ce_ev_) destroy_event(std::exchange(ev, Event{}));
      throw;
    }
  }
  // As many chunks as C rows need, of equal rows (rounded up to the quantum, at most C): n = 8192
  // at C = 1600 runs five chunks of 1408 rows and one of 1152, where chunks of C would leave a
  // 192-row tail that pays a whole [V, H] weight-gradient pass for a sliver of work. A function
  // of n and C alone, so the same bits for the same batch.
  const int64_t chunks = (n + C - 1) / C;
  const int64_t step =
      chunks == 0 ? C
                  : std::min(C, ((n + chunks - 1) / chunks + kCeRowQuantum - 1) / kCeRowQuantum *
                                    kCeRowQuantum);
  for (int64_t c0 = 0; c0 < n; c0 += step) {
    const int64_t nc = std::min(step, n - c0);
    const GemmView hcv{hc, ct, nc, H, H};
    cuda::ce_gather_rows(hc, bf16, hidden.data, hidden.dtype == DType::kBF16, rows + c0, nc, H, cs);
    gemm(kOp, GemmView{logits, ct, nc, V, V}, hcv, Trans::kN, W, Trans::kT, nullptr, 1.0f, 0.0f,
         lt_ws, s);
    cuda::ce_softmax_rows(logits, bf16, nc, V, rows + c0, targets.as<int32_t>(), grad_scale, grad,
                          loss + c0, entropy + c0, hit + c0, cs);
    if (!grad) continue;
    // G [nc, V] over the logits, in the compute dtype.
    const GemmView G{logits, ct, nc, V, V};
    // dh = G·W [nc, H] over K = V: few output tiles and a long K, so one product leaves most SMs
    // idle. It runs as `parts` vocabulary slices at once (partial p: G[:, slice p]·W[slice p, :]
    // into dhc + p·C·H; slice 0 and the weight gradient on the caller's stream, the others on side
    // streams with a 4 MiB cuBLASLt workspace each), added in slice order by the scatter: a fixed
    // order.
    cuda::check(cudaEventRecord(static_cast<cudaEvent_t>(ce_ev_[0].handle), cs), kOp);
    for (int p = 1; p < parts; ++p) {
      const auto side = static_cast<cudaStream_t>(ce_side_[p - 1].handle);
      cuda::check(cudaStreamWaitEvent(side, static_cast<cudaEvent_t>(ce_ev_[0].handle), 0), kOp);
    }
    // The side streams joined back into the caller's (their work ordered before whatever the
    // caller does next with the workspace) — also when a product throws after the fork.
    const auto join = [&] {
      for (int p = 1; p < parts; ++p) {
        const auto ev = static_cast<cudaEvent_t>(ce_ev_[p].handle);
        cuda::check(cudaEventRecord(ev, static_cast<cudaStream_t>(ce_side_[p - 1].handle)), kOp);
        cuda::check(cudaStreamWaitEvent(cs, ev, 0), kOp);
      }
    };
    try {
      for (int p = 0; p < parts; ++p) {
        const int64_t k0 = p * slice, kn = std::min(slice, V - k0);
        const GemmView Gp{static_cast<const char*>(logits) + k0 * dtype_size(ct), ct, nc, kn,
                          G.ld};
        const GemmView Wp{static_cast<const char*>(w) + k0 * H * dtype_size(ct), ct, kn, H, H};
        const GemmView Dp{dhc + p * C * H, DType::kF32, nc, H, H};
        if (p == 0)
          gemm(kOp, Dp, Gp, Trans::kN, Wp, Trans::kN, nullptr, 1.0f, 0.0f, lt_ws, s);
        else
          gemm(kOp, Dp, Gp, Trans::kN, Wp, Trans::kN, nullptr, 1.0f, 0.0f,
               at(L.lt_side + (p - 1) * kSideLtBytes), ce_side_[p - 1], kSideLtBytes);
      }
      gemm(kOp, GemmView{dweight.data, DType::kF32, V, H, H}, G, Trans::kT, hcv, Trans::kN, nullptr,
           1.0f, c0 == 0 ? beta_dw : 1.0f, lt_ws, s);
    } catch (...) {
      try {
        join();
      } catch (...) {  // the first error is the one to report
      }
      throw;
    }
    join();
    cuda::ce_scatter_rows(dhidden.data, dhidden.dtype == DType::kBF16, dhc, parts, C * H, rows + c0,
                          nc, H, cs);
  }
  cuda::ce_reduce_stats(loss, entropy, hit, n, dstats, cs);
  cuda::CeDeviceStats hs{};
  cuda::check(cudaMemcpyAsync(&hs, dstats, sizeof(hs), cudaMemcpyDeviceToHost, cs), kOp);
  cuda::check(cudaStreamSynchronize(cs), kOp);
  *stats = CeStats{hs.loss_sum, hs.correct, hs.count, hs.entropy_sum};
}

}  // namespace zt
