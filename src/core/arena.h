// Arena: one allocation per memory pool ("parameters", "gradients", "activations", …) with
// non-owning views carved out of it (DESIGN §4). Used in two phases:
//   1. planning: reserve(name, bytes) for every buffer the run will need (no memory touched);
//   2. allocate(): one allocation of the planned total; an out-of-memory here throws zt::Error
//      naming the pool, the bytes asked for and the device — at start-up, never mid-run.
// Then ptr(slot) / tensor(slot) give the carved views. Every view starts at a multiple of
// Arena::kAlignment (64 B) from the base. The carving logic knows nothing about the device: memory
// comes from a MemoryResource (host here; the CUDA backend supplies a device one) or from a base
// pointer the caller already owns (adopt()).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

namespace zt {

// The zt::Error Arena::allocate throws when its MemoryResource refuses the pool: a caller that
// knows which setting sized the pool (the trainer: the micro-batch's tokens) catches it to name
// that setting; anything else sees a plain zt::Error.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

// Source of raw memory for an Arena. Implementations: HostMemory (below); the CUDA backend adds
// device / pinned-host ones. Not thread-safe by itself.
class MemoryResource {
 public:
  virtual ~MemoryResource() = default;
  // Returns `bytes` bytes aligned to `alignment` (a power of two ≥ 64), or nullptr when the memory
  // is not available (the Arena turns that into the out-of-memory error). Never throws for OOM.
  virtual void* allocate(size_t bytes, size_t alignment) = 0;
  // Frees a pointer returned by allocate() with the same `bytes`.
  virtual void deallocate(void* p, size_t bytes) = 0;
  // Where the memory lives; copied into the Device of every Tensor carved from it.
  virtual Device device() const = 0;
  // "host", "cuda:0", … for messages.
  virtual std::string name() const = 0;
};

// Plain host memory (aligned operator new). `limit_bytes` (0 = none) makes allocate() refuse any
// request above it — used by tests to provoke the out-of-memory path, and usable as a host budget.
class HostMemory final : public MemoryResource {
 public:
  explicit HostMemory(size_t limit_bytes = 0) : limit_(limit_bytes) {}
  void* allocate(size_t bytes, size_t alignment) override;
  void deallocate(void* p, size_t bytes) override;
  Device device() const override { return Device::kCPU; }
  std::string name() const override { return "host"; }

 private:
  size_t limit_;
};

// Round `n` up to a multiple of `a` (a power of two).
constexpr size_t align_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }

class Arena {
 public:
  static constexpr size_t kAlignment = 64;  // bytes; every view's offset is a multiple of this
  using Slot = int32_t;                     // index of a reserved view, returned by reserve()

  // An arena for pool `pool` ("parameters", …) whose memory will come from `memory` (which must
  // outlive the Arena). Nothing is allocated until allocate().
  Arena(std::string pool, MemoryResource& memory);
  // An arena for pool `pool` with no resource: memory must be given with adopt().
  explicit Arena(std::string pool);
  ~Arena();
  Arena(Arena&& other) noexcept;
  Arena& operator=(Arena&& other) noexcept;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // ---- planning (only before allocate()/adopt(); after them: zt::Error naming the pool and view)

  // Reserves `bytes` bytes (0 allowed: a zero-size view at an aligned offset) for view `name`.
  // Names must be unique within the pool (zt::Error otherwise). Returns the slot.
  Slot reserve(std::string name, size_t bytes);
  // Reserves a tensor view of `shape` (≤ 4 dims) and `dtype`; tensor(slot) returns it with that
  // shape. Throws zt::Error on a negative dimension or more than 4 dims.
  Slot reserve(std::string name, DType dtype, std::initializer_list<int64_t> shape);
  Slot reserve(std::string name, DType dtype, std::span<const int64_t> shape);

  // Total bytes of the single allocation, = end of the last view rounded up to kAlignment.
  size_t planned_bytes() const { return planned_; }

  // ---- memory

  // One allocation of max(planned_bytes(), kAlignment) from the MemoryResource. Throws
  // OutOfMemoryError "out of memory: pool 'activations' needs 123456789 bytes (117.7 MiB) on host
  // (3 views; largest 'x' 100000000 bytes)" when the resource refuses; also when already allocated
  // or built without a resource.
  void allocate();
  // Uses caller-owned memory [base, base + capacity) on `device` instead of allocate() (e.g. a
  // slab from another allocator); the Arena never frees it. Throws zt::Error naming the pool when
  // capacity < planned_bytes() or base is not kAlignment-aligned.
  void adopt(void* base, size_t capacity, Device device);
  // Frees the allocation (not adopted memory); views become invalid; planning is kept, so
  // allocate() can be called again.
  void release();
  bool allocated() const { return live_; }

  // ---- views (only after allocate()/adopt(); zt::Error otherwise, or for a bad slot)

  // Start of the view `slot` (base + offset(slot)).
  void* ptr(Slot slot) const;
  // The view as a Tensor with its reserved dtype and shape; a slot reserved by bytes gives a 1-D
  // kU8 tensor of that many bytes.
  Tensor tensor(Slot slot) const;
  // The view reinterpreted as `dtype` with `shape`; zt::Error (naming pool, view, both sizes) when
  // the shape needs more bytes than were reserved.
  Tensor view(Slot slot, DType dtype, std::initializer_list<int64_t> shape) const;
  // Slot of the view called `name`; zt::Error naming pool and view when absent.
  Slot find(std::string_view name) const;

  size_t offset(Slot slot) const;  // bytes from base
  size_t bytes(Slot slot) const;   // reserved bytes
  const std::string& name(Slot slot) const;
  size_t size() const { return views_.size(); }  // number of views
  const std::string& pool() const { return pool_; }
  Device device() const { return device_; }
  void* base() const { return base_; }

  // Sets every byte of the allocation to zero (host memory only; zt::Error for a device arena —
  // the backend clears device memory with its own op).
  void zero_host();

 private:
  struct View {
    std::string name;
    size_t offset = 0;
    size_t bytes = 0;
    DType dtype = DType::kU8;
    int ndim = 0;
    std::array<int64_t, Tensor::kMaxDims> shape{};
  };
  const View& at(Slot slot) const;
  void require_live(std::string_view what) const;

  std::string pool_;
  MemoryResource* memory_ = nullptr;
  std::vector<View> views_;
  std::unordered_map<std::string, Slot> index_;  // name -> slot
  size_t planned_ = 0;
  void* base_ = nullptr;
  size_t capacity_ = 0;
  bool owned_ = false;  // base_ came from memory_->allocate
  bool live_ = false;   // allocate() or adopt() happened
  Device device_ = Device::kCPU;
};

// "117.7 MiB" — human-readable byte counts for messages (B, KiB, MiB, GiB, TiB; one decimal).
std::string format_bytes(size_t bytes);

}  // namespace zt
