// ZeroEngine: checkpoint state (save_state / load_state), export of the master weights, memory
// accounting.
#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/file_util.h"
#include "optim/host_adamw.h"
#include "zero/zero_engine.h"

namespace zt::zero {

namespace {

constexpr char kMagic[8] = {'Z', 'T', 'Z', 'E', 'R', 'O', '0', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kChunk = size_t{1} << 20;  // floats per device → host copy when saving

// The 64-byte header of a state file (host byte order; little-endian on every supported host).
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t world_size;
  uint32_t rank;
  uint32_t reserved0;
  uint64_t layout_hash;
  int64_t shard_elems;
  int64_t adam_step;
  uint64_t reserved1[2];
};
static_assert(sizeof(FileHeader) == 64);

// out[model offsets] ← a rank-major fp32 host buffer of group g (rank r's shard element j at
// src[r*stride + j - shift]), shard columns [lo, hi) only (default: all); data elements only.
void unpack_host(const ShardLayout& L, int g, const float* src, int64_t stride, int64_t shift,
                 float* out, int64_t lo = 0, int64_t hi = INT64_MAX) {
  for (int r = 0; r < L.world_size(); ++r)
    for (int i = L.tensor_begin(g); i < L.tensor_end(g); ++i) {
      const ShardTensor& t = L.tensor(i);
      const int64_t u0 = std::max(lo, t.shard_offset) - t.shard_offset;
      const int64_t u1 = std::min({hi, t.shard_offset + t.shard_elems, t.shard_offset + t.valid(r)}) -
                         t.shard_offset;
      if (u0 < u1)
        std::memcpy(out + t.model_offset + r * t.shard_elems + u0,
                    src + r * stride + t.shard_offset + u0 - shift,
                    static_cast<size_t>(u1 - u0) * 4);
    }
}

}  // namespace

std::filesystem::path ZeroEngine::state_path(const std::filesystem::path& dir, int rank) {
  return dir / fmt::format("zero_state_rank{:05}.bin", rank);
}

void ZeroEngine::save_state(const std::filesystem::path& dir) const {
  require_ready("save_state");
  require_between_steps("save_state");
  const int64_t S = layout_.shard_elems();
  const int64_t k = comm_.rank() - owned_rank0();  // this rank's block among the owned ones
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.world_size = static_cast<uint32_t>(layout_.world_size());
  h.rank = static_cast<uint32_t>(comm_.rank());
  h.layout_hash = layout_.hash();
  h.shard_elems = S;
  h.adam_step = adam_step_;
  const std::filesystem::path path = state_path(dir, comm_.rank());
  std::vector<float> buf;
  write_file_atomic(path, [&](const ByteSink& sink) {
    sink(&h, sizeof h);
    XXH3_state_t* st = XXH3_createState();
    XXH3_64bits_reset(st);
    for (const float* arr : {master_, m_, v_}) {
      const float* base = arr + k * S;
      for (int64_t off = 0; off < S; off += static_cast<int64_t>(kChunk)) {
        const int64_t n = std::min<int64_t>(static_cast<int64_t>(kChunk), S - off);
        const float* p = base + off;
        if (!opt_.offload) {  // device memory: copy out first
          buf.resize(static_cast<size_t>(n));
          ops_.copy_to_host(buf.data(), dev(const_cast<float*>(p), DType::kF32, n), stream_);
          ops_.synchronize(stream_);
          p = buf.data();
        }
        XXH3_64bits_update(st, p, static_cast<size_t>(n) * 4);
        sink(p, static_cast<size_t>(n) * 4);
      }
    }
    const uint64_t digest = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    sink(&digest, sizeof digest);
  });
}

void ZeroEngine::load_state(const std::filesystem::path& dir) {
  ops_.synchronize(side_);  // no gather may still read the compute shards this overwrites
  ops_.synchronize(stream_);  // nor an H2D copy the pinned state this overwrites
  const int64_t S = layout_.shard_elems();
  const int rank = comm_.rank(), W = layout_.world_size();
  const std::filesystem::path path = state_path(dir, rank);
  {
    const MappedFile file(path);
    const size_t payload = static_cast<size_t>(3 * S) * 4, want = sizeof(FileHeader) + payload + 8;
    if (file.size() < sizeof(FileHeader))
      fail("{}: ZeRO state file of {} bytes is shorter than its {}-byte header", path.string(),
           file.size(), sizeof(FileHeader));
    FileHeader h;
    std::memcpy(&h, file.data(), sizeof h);
    if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0)
      fail("{}: not a zerotune ZeRO state file (magic '{}', expected 'ZTZERO01')", path.string(),
           std::string(h.magic, sizeof h.magic));
    if (h.version != kVersion)
      fail("{}: ZeRO state version {} (expected {})", path.string(), h.version, kVersion);
    if (h.world_size != static_cast<uint32_t>(W))
      fail(
          "{}: ZeRO state was written with world size {}, this run has world size {} (the shard "
          "layout depends on it)",
          path.string(), h.world_size, W);
    if (h.rank != static_cast<uint32_t>(rank))
      fail("{}: ZeRO state belongs to rank {}, read by rank {}", path.string(), h.rank, rank);
    if (h.layout_hash != layout_.hash())
      fail(
          "{}: ZeRO state layout hash {:016x} does not match this model's {:016x} (different "
          "tensors or shapes)",
          path.string(), h.layout_hash, layout_.hash());
    if (h.shard_elems != S || file.size() != want)
      fail("{}: ZeRO state has shard size {} and {} bytes, expected {} and {} bytes", path.string(),
           h.shard_elems, file.size(), S, want);
    if (h.adam_step < 0)
      fail("{}: ZeRO state has a negative step count {}", path.string(), h.adam_step);
    const std::byte* data = file.data() + sizeof(FileHeader);
    uint64_t digest;
    std::memcpy(&digest, data + payload, sizeof digest);
    const uint64_t actual = XXH3_64bits(data, payload);
    if (digest != actual)
      fail(
          "{}: ZeRO state checksum {:016x} does not match its content ({:016x}): the file is "
          "corrupt",
          path.string(), digest, actual);
    const int64_t k = rank - owned_rank0();
    float* arrs[3] = {master_, m_, v_};
    for (int a = 0; a < 3; ++a) {
      const std::byte* src = data + static_cast<size_t>(a * S) * 4;
      if (opt_.offload)
        std::memcpy(arrs[a] + k * S, src, static_cast<size_t>(S) * 4);
      else
        ops_.copy_from_host(dev(arrs[a] + k * S, DType::kF32, S), src, stream_);
    }
    ops_.synchronize(stream_);
    adam_step_ = h.adam_step;
  }
  if (opt_.stage == 0) {  // every rank keeps every shard: all-gather them (via device staging)
    for (float* arr : {master_, m_, v_}) {
      const Tensor own = dev(grad_shard_, DType::kF32, S),
                   full = dev(full_grad_, DType::kF32, W * S);
      if (opt_.offload)
        ops_.copy_from_host(own, arr + rank * S, stream_);
      else
        ops_.cast(own, dev(arr + rank * S, DType::kF32, S), stream_);
      ops_.synchronize(stream_);
      comm_.all_gather(grad_shard_, full_grad_, static_cast<size_t>(S), stream_.handle);
      if (opt_.offload)
        ops_.copy_to_host(arr, full, stream_);
      else
        ops_.cast(dev(arr, DType::kF32, W * S), full, stream_);
    }
    ops_.zero(dev(full_grad_, DType::kF32, W * S), stream_);
  }
  ops_.zero(dev(grad_shard_, DType::kF32, S), stream_);
  ready_ = true;
  reset_step();
  compute_from_master();
  install_weights();
  ops_.synchronize(stream_);
}

std::vector<float> ZeroEngine::full_master_weights() {
  require_ready("full_master_weights");
  require_between_steps("full_master_weights");
  const int W = layout_.world_size();
  const int64_t S = layout_.shard_elems();
  const bool root = comm_.rank() == 0;
  std::vector<float> out;
  if (root) out.assign(static_cast<size_t>(layout_.model_elems()), 0.0f);
  if (opt_.stage == 0) {  // every rank holds everything; rank 0 unpacks locally
    if (!root) return out;
    std::vector<float> host;
    const float* src = master_;
    if (!opt_.offload) {
      host.resize(static_cast<size_t>(W * S));
      ops_.copy_to_host(host.data(), dev(master_, DType::kF32, W * S), stream_);
      ops_.synchronize(stream_);
      src = host.data();
    }
    for (int g = 0; g < layout_.num_groups(); ++g) unpack_host(layout_, g, src, S, 0, out.data());
    return out;
  }
  std::vector<float> host;
  for (int g = 0; g < layout_.num_groups(); ++g)
    for (int64_t j0 = layout_.group_shard_begin(g); j0 < layout_.group_shard_end(g); j0 += chunk_) {
      const int64_t n = std::min(layout_.group_shard_end(g), j0 + chunk_) - j0;
      const float* send = master_ + j0;
      if (opt_.offload) {  // host state: stage it in device memory for the Comm
        ops_.copy_from_host(dev(grad_shard_, DType::kF32, n), master_ + j0, stream_);
        ops_.synchronize(stream_);
        send = grad_shard_;
      }
      comm_.all_gather(send, bucket_, static_cast<size_t>(n), stream_.handle);
      if (!root) continue;
      host.resize(static_cast<size_t>(W * n));
      ops_.copy_to_host(host.data(), dev(bucket_, DType::kF32, W * n), stream_);
      ops_.synchronize(stream_);
      unpack_host(layout_, g, host.data(), n, j0, out.data(), j0, j0 + n);
    }
  if (opt_.offload) ops_.zero(dev(grad_shard_, DType::kF32, S), stream_);
  return out;
}

ZeroMemory ZeroEngine::memory() const {
  ZeroMemory mem;
  for (const Arena* a : {&dev_, &host_})
    for (size_t s = 0; s < a->size(); ++s) {
      const auto slot = static_cast<Arena::Slot>(s);
      if (a->bytes(slot) > 0) mem.pools.push_back({a->name(slot), a->bytes(slot), a == &host_});
    }
  if (windowed_weights()) {
    mem.model_weights = 0;  // the engine's own "weights: …" pools above
  } else {
    mem.model_weights = static_cast<size_t>(layout_.model_elems()) * ces_;
  }
  return mem;
}

std::string ZeroEngine::host_adamw_description() const {
  return host_adam_ ? host_adam_->describe() : std::string();
}

size_t ZeroMemory::device_bytes() const {
  size_t n = model_weights;
  for (const PoolBytes& p : pools)
    if (!p.host) n += p.bytes;
  return n;
}

size_t ZeroMemory::host_bytes() const {
  size_t n = 0;
  for (const PoolBytes& p : pools)
    if (p.host) n += p.bytes;
  return n;
}

std::string ZeroMemory::describe() const {
  std::string dev, host;
  for (const PoolBytes& p : pools)
    (p.host ? host : dev) += fmt::format("{}{} {}", (p.host ? host : dev).empty() ? "" : ", ",
                                         p.name, format_bytes(p.bytes));
  return fmt::format("device {} ({}{}model weights {}); host {}{}{}{}",
                     format_bytes(device_bytes()), dev, dev.empty() ? "" : ", ",
                     format_bytes(model_weights), format_bytes(host_bytes()),
                     host.empty() ? "" : " (", host, host.empty() ? "" : ")");
}

}  // namespace zt::zero
