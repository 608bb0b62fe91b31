#include "core/arena.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "core/error.h"

namespace zt {

void* HostMemory::allocate(size_t bytes, size_t alignment) {
  if (limit_ != 0 && bytes > limit_) return nullptr;
  // aligned_alloc wants a size that is a multiple of the alignment; free() needs neither.
  return std::aligned_alloc(alignment, align_up(bytes == 0 ? 1 : bytes, alignment));
}

void HostMemory::deallocate(void* p, size_t /*bytes*/) { std::free(p); }

std::string format_bytes(size_t bytes) {
  static constexpr const char* kUnit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, kUnit[u]);
}

Arena::Arena(std::string pool, MemoryResource& memory) : pool_(std::move(pool)), memory_(&memory) {}

Arena::Arena(std::string pool) : pool_(std::move(pool)) {}

Arena::~Arena() { release(); }

Arena::Arena(Arena&& o) noexcept
    : pool_(std::move(o.pool_)),
      memory_(o.memory_),
      views_(std::move(o.views_)),
      index_(std::move(o.index_)),
      planned_(o.planned_),
      base_(std::exchange(o.base_, nullptr)),
      capacity_(std::exchange(o.capacity_, 0)),
      owned_(std::exchange(o.owned_, false)),
      live_(std::exchange(o.live_, false)),
      device_(o.device_) {}

Arena& Arena::operator=(Arena&& o) noexcept {
  if (this != &o) {
    release();
    pool_ = std::move(o.pool_);
    memory_ = o.memory_;
    views_ = std::move(o.views_);
    index_ = std::move(o.index_);
    planned_ = o.planned_;
    base_ = std::exchange(o.base_, nullptr);
    capacity_ = std::exchange(o.capacity_, 0);
    owned_ = std::exchange(o.owned_, false);
    live_ = std::exchange(o.live_, false);
    device_ = o.device_;
  }
  return *this;
}

Arena::Slot Arena::reserve(std::string name, size_t bytes) {
  if (live_)
    fail("arena '{}': cannot reserve '{}' ({} bytes) after the pool was allocated", pool_, name,
         bytes);
  if (index_.count(name)) fail("arena '{}': view '{}' reserved twice", pool_, name);
  View v;
  v.name = std::move(name);
  v.offset = align_up(planned_, kAlignment);
  v.bytes = bytes;
  v.dtype = DType::kU8;
  v.ndim = 1;
  v.shape[0] = static_cast<int64_t>(bytes);
  planned_ = align_up(v.offset + bytes, kAlignment);
  const Slot slot = static_cast<Slot>(views_.size());
  index_.emplace(v.name, slot);
  views_.push_back(std::move(v));
  return slot;
}

Arena::Slot Arena::reserve(std::string name, DType dtype, std::initializer_list<int64_t> shape) {
  return reserve(std::move(name), dtype, std::span<const int64_t>(shape.begin(), shape.size()));
}

Arena::Slot Arena::reserve(std::string name, DType dtype, std::span<const int64_t> shape) {
  if (shape.size() > static_cast<size_t>(Tensor::kMaxDims))
    fail("arena '{}': view '{}' has {} dimensions, at most {} supported", pool_, name, shape.size(),
         Tensor::kMaxDims);
  int64_t n;
  try {
    n = shape_numel(shape);
  } catch (const Error& e) {
    fail("arena '{}': view '{}': {}", pool_, name, e.what());
  }
  const Slot s = reserve(std::move(name), static_cast<size_t>(n) * dtype_size(dtype));
  View& v = views_[static_cast<size_t>(s)];
  v.dtype = dtype;
  v.ndim = static_cast<int>(shape.size());
  v.shape = {};
  for (size_t i = 0; i < shape.size(); ++i) v.shape[i] = shape[i];
  return s;
}

void Arena::allocate() {
  if (live_) fail("arena '{}': allocate() called twice", pool_);
  if (memory_ == nullptr)
    fail("arena '{}': no memory resource; give the memory with adopt()", pool_);
  const size_t bytes = planned_ < kAlignment ? kAlignment : planned_;
  void* p = memory_->allocate(bytes, kAlignment);
  if (p == nullptr) {
    size_t largest = 0;
    const View* lv = nullptr;
    for (const View& v : views_)
      if (lv == nullptr || v.bytes > largest) largest = v.bytes, lv = &v;
    throw OutOfMemoryError(fmt::format(
        "out of memory: pool '{}' needs {} bytes ({}) on {} ({} views; largest '{}' {} bytes)",
        pool_, bytes, format_bytes(bytes), memory_->name(), views_.size(),
        lv ? lv->name : std::string(), largest));
  }
  base_ = p;
  capacity_ = bytes;
  owned_ = true;
  live_ = true;
  device_ = memory_->device();
}

void Arena::adopt(void* base, size_t capacity, Device device) {
  if (live_) fail("arena '{}': adopt() on an arena that already has memory", pool_);
  if (base == nullptr) fail("arena '{}': adopt() given a null base pointer", pool_);
  if (reinterpret_cast<uintptr_t>(base) % kAlignment != 0)
    fail("arena '{}': adopted memory at {} is not {}-byte aligned", pool_, base, kAlignment);
  if (capacity < planned_)
    fail("arena '{}': adopted memory holds {} bytes, the plan needs {} bytes ({})", pool_, capacity,
         planned_, format_bytes(planned_));
  base_ = base;
  capacity_ = capacity;
  owned_ = false;
  live_ = true;
  device_ = device;
}

void Arena::release() {
  if (owned_ && base_ != nullptr && memory_ != nullptr) memory_->deallocate(base_, capacity_);
  base_ = nullptr;
  capacity_ = 0;
  owned_ = false;
  live_ = false;
}

const Arena::View& Arena::at(Slot slot) const {
  if (slot < 0 || static_cast<size_t>(slot) >= views_.size())
    fail("arena '{}': slot {} out of range ({} views)", pool_, slot, views_.size());
  return views_[static_cast<size_t>(slot)];
}

void Arena::require_live(std::string_view what) const {
  if (!live_) fail("arena '{}': view '{}' used before allocate()", pool_, what);
}

void* Arena::ptr(Slot slot) const {
  const View& v = at(slot);
  require_live(v.name);
  return static_cast<std::byte*>(base_) + v.offset;
}

Tensor Arena::tensor(Slot slot) const {
  const View& v = at(slot);
  Tensor t;
  t.data = ptr(slot);
  t.dtype = v.dtype;
  t.device = device_;
  t.ndim = v.ndim;
  t.shape = v.shape;
  return t;
}

Tensor Arena::view(Slot slot, DType dtype, std::initializer_list<int64_t> shape) const {
  const View& v = at(slot);
  Tensor t(ptr(slot), dtype, shape, device_);
  if (t.nbytes() > v.bytes)
    fail("arena '{}': view '{}' reserved {} bytes, {} needs {} bytes", pool_, v.name, v.bytes,
         t.describe(), t.nbytes());
  return t;
}

Arena::Slot Arena::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  if (it != index_.end()) return it->second;
  fail("arena '{}': no view named '{}'", pool_, name);
}

size_t Arena::offset(Slot slot) const { return at(slot).offset; }
size_t Arena::bytes(Slot slot) const { return at(slot).bytes; }
const std::string& Arena::name(Slot slot) const { return at(slot).name; }

void Arena::zero_host() {
  if (!live_) fail("arena '{}': zero_host() before allocate()", pool_);
  if (device_ != Device::kCPU) fail("arena '{}': zero_host() on device memory", pool_);
  std::memset(base_, 0, capacity_);
}

}  // namespace zt
