// CudaOps: construction, memory ops, synchronize (with the kernel-side error record), and the
// argument checks + launches of the elementwise, embedding, RMSNorm, RoPE, SwiGLU and reduction
// ops (kernels in cuda_elementwise.cu, cuda_embedding.cu, cuda_rmsnorm.cu, cuda_reduce.cu). The
// checks are the CPU backend's (backend/op_checks.h), with tensors required in device memory.
#include "backend/cuda/cuda_ops.h"

#include <cuda_runtime.h>

#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/op_checks.h"
#include "core/error.h"

namespace zt {

using opcheck::check_float;
using opcheck::check_workspace;

namespace {

cudaStream_t stream_of(Stream s) { return static_cast<cudaStream_t>(s.handle); }

// t in device memory with data (when non-empty), any shape.
void check_dev(std::string_view op, std::string_view arg, const Tensor& t) {
  opcheck::check_device(op, arg, t, Device::kCUDA);
  if (t.data == nullptr && t.numel() > 0) fail("{}: {} {} has no data", op, arg, t.describe());
}

// The "no error" state of the status record (cuda_kernels.h): key = UINT64_MAX, vocab 0, op none.
void fill_clear_status(int32_t* host) {
  host[cuda::kStatusKey] = -1;
  host[cuda::kStatusKey + 1] = -1;
  host[cuda::kStatusVocab] = 0;
  host[cuda::kStatusOp] = static_cast<int32_t>(cuda::StatusOp::kNone);
}

// Clears the device record through the pinned mirror, on `stream`, and waits for it.
void reset_status(int32_t* dev, int32_t* host, cudaStream_t stream) {
  fill_clear_status(host);
  cuda::check(cudaMemcpyAsync(dev, host, cuda::kStatusInts * sizeof(int32_t),
                              cudaMemcpyHostToDevice, stream),
              "synchronize");
  cuda::check(cudaStreamSynchronize(stream), "synchronize");
}

}  // namespace

CudaOps::CudaOps(CudaOpsOptions options) : opt_(options) {
  const int n = cuda_device_count();
  if (n == 0)
    fail("CudaOps: no CUDA device is visible (no driver, or CUDA_VISIBLE_DEVICES hides all)");
  if (opt_.device < 0 || opt_.device >= n)
    fail("CudaOps: CUDA device {} does not exist ({} visible)", opt_.device, n);
  if (opt_.ce_chunk_rows < 1) fail("CudaOps: ce_chunk_rows ({}) must be >= 1", opt_.ce_chunk_rows);
  cuda::check(cudaSetDevice(opt_.device), "CudaOps");
  cudaDeviceProp prop{};
  cuda::check(cudaGetDeviceProperties(&prop, opt_.device), "CudaOps");
  name_ = fmt::format("cuda:{} {} (sm_{}{}, {} SMs, {})", opt_.device, prop.name, prop.major,
                      prop.minor, prop.multiProcessorCount, format_bytes(prop.totalGlobalMem));
  const size_t bytes = cuda::kStatusInts * sizeof(int32_t);
  try {
    cuda::check(cudaMalloc(reinterpret_cast<void**>(&dev_status_), bytes), "CudaOps");
    cuda::check(cudaHostAlloc(reinterpret_cast<void**>(&host_status_), bytes, cudaHostAllocDefault),
                "CudaOps");
    fill_clear_status(host_status_);
    cuda::check(cudaMemcpy(dev_status_, host_status_, bytes, cudaMemcpyHostToDevice), "CudaOps");
    init_matmul();
  } catch (...) {
    if (dev_status_) (void)cudaFree(dev_status_);
    if (host_status_) (void)cudaFreeHost(host_status_);
    throw;
  }
}

CudaOps::~CudaOps() {
  for (Stream& st : ce_side_)
    if (st.handle != nullptr) (void)cudaStreamDestroy(static_cast<cudaStream_t>(st.handle));
  for (Event& ev : ce_ev_)
    if (ev.handle != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(ev.handle));
  destroy_matmul();
  (void)cudaFree(dev_status_);
  (void)cudaFreeHost(host_status_);
}

std::string CudaOps::name() const { return name_; }

Stream CudaOps::create_stream() {
  cudaStream_t st = nullptr;
  cuda::check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "create_stream");
  return {st};
}

void CudaOps::destroy_stream(Stream s) {
  if (s.handle) (void)cudaStreamDestroy(stream_of(s));
}

Event CudaOps::create_event() {
  cudaEvent_t e = nullptr;
  cuda::check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "create_event");
  return {e};
}

void CudaOps::destroy_event(Event e) {
  if (e.handle) (void)cudaEventDestroy(static_cast<cudaEvent_t>(e.handle));
}

void CudaOps::record_event(Event e, Stream s) {
  cuda::check(cudaEventRecord(static_cast<cudaEvent_t>(e.handle), stream_of(s)), "record_event");
}

void CudaOps::wait_event(Stream waiter, Event e) {
  cuda::check(cudaStreamWaitEvent(stream_of(waiter), static_cast<cudaEvent_t>(e.handle), 0),
              "wait_event");
}

void CudaOps::synchronize_event(Event e) {
  cuda::check(cudaEventSynchronize(static_cast<cudaEvent_t>(e.handle)), "synchronize_event");
}

void CudaOps::bind_thread() { cuda::check(cudaSetDevice(opt_.device), "bind_thread"); }

void CudaOps::zero(const Tensor& x, Stream s) {
  check_dev("zero", "x", x);
  if (x.numel() > 0) cuda::check(cudaMemsetAsync(x.data, 0, x.nbytes(), stream_of(s)), "zero");
}

void CudaOps::copy_from_host(const Tensor& dst, const void* src, Stream s) {
  check_dev("copy_from_host", "dst", dst);
  if (dst.numel() > 0)
    cuda::check(cudaMemcpyAsync(dst.data, src, dst.nbytes(), cudaMemcpyHostToDevice, stream_of(s)),
                "copy_from_host");
}

void CudaOps::copy_to_host(void* dst, const Tensor& src, Stream s) {
  check_dev("copy_to_host", "src", src);
  if (src.numel() > 0)
    cuda::check(cudaMemcpyAsync(dst, src.data, src.nbytes(), cudaMemcpyDeviceToHost, stream_of(s)),
                "copy_to_host");
}

void CudaOps::synchronize(Stream s) {
  const cudaStream_t st = stream_of(s);
  cuda::check(cudaMemcpyAsync(host_status_, dev_status_, cuda::kStatusInts * sizeof(int32_t),
                              cudaMemcpyDeviceToHost, st),
              "synchronize");
  cuda::check(cudaStreamSynchronize(st), "synchronize");
  const auto op = static_cast<cuda::StatusOp>(host_status_[cuda::kStatusOp]);
  if (op == cuda::StatusOp::kNone) return;
  uint64_t key = 0;
  std::memcpy(&key, host_status_ + cuda::kStatusKey, sizeof(key));
  const int64_t pos = static_cast<int64_t>(key >> 32);
  const auto value = static_cast<int32_t>(static_cast<uint32_t>(key));
  const int32_t vocab = host_status_[cuda::kStatusVocab];
  reset_status(dev_status_, host_status_, st);
  switch (op) {
    case cuda::StatusOp::kEmbeddingBwd:
      fail("embedding_bwd: token id {} at position {} is outside the vocabulary [0, {})", value,
           pos, vocab);
    case cuda::StatusOp::kCrossEntropy:
      fail(
          "linear_cross_entropy_fwd_bwd: target {} at position {} is outside the vocabulary "
          "[0, {}) and is not -100",
          value, pos, vocab);
    default:
      fail("embedding_fwd: token id {} at position {} is outside the vocabulary [0, {})", value,
           pos, vocab);
  }
}

void CudaOps::cast(const Tensor& dst, const Tensor& src, Stream s) {
  opcheck::check_cast(dst, src);
  check_dev("cast", "dst", dst);
  check_dev("cast", "src", src);
  if (dst.dtype == src.dtype) {
    if (dst.numel() > 0 && dst.data != src.data)
      cuda::check(
          cudaMemcpyAsync(dst.data, src.data, dst.nbytes(), cudaMemcpyDeviceToDevice, stream_of(s)),
          "cast");
    return;
  }
  cuda::launch_cast(dst.data, dst.dtype, src.data, src.dtype, src.numel(), stream_of(s));
}

void CudaOps::add(const Tensor& out, const Tensor& a, const Tensor& b, Stream s) {
  opcheck::check_add(out, a, b);
  check_dev("add", "out", out);
  check_dev("add", "a", a);
  check_dev("add", "b", b);
  cuda::launch_add(out.data, a.data, b.data, out.dtype, out.numel(), stream_of(s));
}

void CudaOps::embedding_fwd(const Tensor& out, const Tensor& table, const Tensor& ids, Stream s,
                            float scale) {
  const opcheck::EmbeddingDims d = opcheck::check_embedding_fwd(out, table, ids, Device::kCUDA);
  check_float("embedding_fwd", "table", table);
  // Ids are checked on the device: a bad one is reported by the next synchronize().
  cuda::launch_embedding_fwd(out.data, table.data, table.dtype, ids.as<int32_t>(), d.T, d.V, d.H,
                             scale, dev_status_, stream_of(s));
}

size_t CudaOps::embedding_workspace_bytes(const Tensor& ids) const {
  // A shape-only query: the tensor may be a host-side descriptor without data.
  opcheck::check_shape("embedding_workspace_bytes", "ids", ids, {-1}, ids.device, false);
  return cuda::embedding_bwd_workspace_bytes(ids.dim(0));
}

void CudaOps::embedding_bwd(const Tensor& dtable, const Tensor& dout, const Tensor& ids, float beta,
                            const Tensor& workspace, Stream s, float scale) {
  const opcheck::EmbeddingDims d = opcheck::check_embedding_bwd(dtable, dout, ids, Device::kCUDA);
  check_float("embedding_bwd", "dout", dout);
  if (d.T > INT32_MAX) fail("embedding_bwd: {} ids, at most {} supported", d.T, INT32_MAX);
  const size_t need = cuda::embedding_bwd_workspace_bytes(d.T);
  check_workspace("embedding_bwd", workspace, need);
  if (need > 0) check_dev("embedding_bwd", "workspace", workspace);
  cuda::launch_embedding_bwd(dtable.as<float>(), dout.data, dout.dtype, ids.as<int32_t>(), d.T, d.V,
                             d.H, beta, scale, workspace.data, need > 0 ? workspace.nbytes() : 0,
                             dev_status_, stream_of(s));
}

void CudaOps::rmsnorm_fwd(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& w,
                          float eps, Stream s, RmsNormStyle style) {
  const opcheck::MatrixDims d = opcheck::check_rmsnorm_fwd(y, rstd, x, w, Device::kCUDA);
  cuda::launch_rmsnorm_fwd(y.data, rstd.as<float>(), x.data, w.data, x.dtype, d.rows, d.cols, eps,
                           style, stream_of(s));
}

void CudaOps::rmsnorm_bwd(const Tensor& dx, bool accumulate_dx, const Tensor& dw, float beta_dw,
                          const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd,
                          Stream s, RmsNormStyle style) {
  const opcheck::MatrixDims d = opcheck::check_rmsnorm_bwd(dx, dw, dy, x, w, rstd, Device::kCUDA);
  cuda::launch_rmsnorm_bwd(dx.data, accumulate_dx, dw.as<float>(), beta_dw, dy.data, x.data, w.data,
                           rstd.as<float>(), x.dtype, d.rows, d.cols, style, stream_of(s));
}

void CudaOps::bias_grad(const Tensor& db, const Tensor& dy, float beta, Stream s) {
  const opcheck::MatrixDims d = opcheck::check_bias_grad(db, dy, Device::kCUDA);
  cuda::launch_bias_grad(db.as<float>(), dy.data, dy.dtype, d.rows, d.cols, beta, stream_of(s));
}

void CudaOps::rope_tables(const Tensor& cos, const Tensor& sin, const Tensor& pos,
                          const Tensor& inv_freq, float attention_scaling, Stream s) {
  const opcheck::RopeDims d = opcheck::check_rope_tables(cos, sin, pos, inv_freq, Device::kCUDA);
  cuda::launch_rope_tables(cos.as<float>(), sin.as<float>(), pos.as<int32_t>(),
                           inv_freq.as<float>(), d.T, d.half, attention_scaling, stream_of(s));
}

void CudaOps::rope_fwd(const Tensor& x, const Tensor& cos, const Tensor& sin, Stream s) {
  const opcheck::RopeDims d = opcheck::check_rope("rope_fwd", x, cos, sin, Device::kCUDA);
  cuda::launch_rope(x.data, x.dtype, cos.as<float>(), sin.as<float>(), d.T, d.heads, d.half,
                    d.head_dim, 1.0f, stream_of(s));
}

void CudaOps::rope_bwd(const Tensor& dx, const Tensor& cos, const Tensor& sin, Stream s) {
  const opcheck::RopeDims d = opcheck::check_rope("rope_bwd", dx, cos, sin, Device::kCUDA);
  cuda::launch_rope(dx.data, dx.dtype, cos.as<float>(), sin.as<float>(), d.T, d.heads, d.half,
                    d.head_dim, -1.0f, stream_of(s));
}

void CudaOps::swiglu_fwd(const Tensor& out, const Tensor& gate, const Tensor& up, Stream s,
                         GluActivation act) {
  opcheck::check_swiglu_fwd(out, gate, up);
  check_dev("swiglu_fwd", "out", out);
  check_dev("swiglu_fwd", "gate", gate);
  check_dev("swiglu_fwd", "up", up);
  cuda::launch_swiglu_fwd(out.data, gate.data, up.data, out.dtype, out.numel(), act, stream_of(s));
}

void CudaOps::swiglu_bwd(const Tensor& dgate, const Tensor& dup, const Tensor& dout,
                         const Tensor& gate, const Tensor& up, Stream s, GluActivation act) {
  opcheck::check_swiglu_bwd(dgate, dup, dout, gate, up);
  check_dev("swiglu_bwd", "dgate", dgate);
  check_dev("swiglu_bwd", "dup", dup);
  check_dev("swiglu_bwd", "dout", dout);
  check_dev("swiglu_bwd", "gate", gate);
  check_dev("swiglu_bwd", "up", up);
  cuda::launch_swiglu_bwd(dgate.data, dup.data, dout.data, gate.data, up.data, gate.dtype,
                          gate.numel(), act, stream_of(s));
}

size_t CudaOps::sumsq_workspace_bytes(const Tensor& x) const {
  return cuda::sumsq_workspace_bytes(x.numel());
}

void CudaOps::sumsq(double* out, const Tensor& x, const Tensor& workspace, Stream s) {
  check_float("sumsq", "x", x);
  check_dev("sumsq", "x", x);
  check_workspace("sumsq", workspace, sumsq_workspace_bytes(x));
  check_dev("sumsq", "workspace", workspace);
  cuda::launch_sumsq(out, x.data, x.dtype, x.numel(), workspace.data, stream_of(s));
}

}  // namespace zt
