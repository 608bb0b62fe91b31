// ZeroEngine: checkpoint state (save_state / load_state), export of the master weights, memory
// accounting.
#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"
#include "zero/zero_engine.h"

namespace zt::zero {

namespace {

constexpr char kMagic[8] = {'Z', 'T', 'Z', 'E', 'R', 'O', '0', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kChunk = size_t{1} << 20;  // floats per device → host copy when saving

// The 64-byte header of a state file (host byte order; little-endian on every supported host).
// save_id and header_digest sit where version 1 first had reserved zeros: a file with 0 in both
// was written before they existed and loads without their checks (backward compatible, so the
// version stays 1). Offsets: save_id 48, header_digest 56.
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t world_size;
  uint32_t rank;
  uint32_t reserved0;
  uint64_t layout_hash;
  int64_t shard_elems;
  int64_t adam_step;
  uint64_t save_id;        // ZeroEngine::save_id() of the save: the same in every rank's file
  uint64_t header_digest;  // header_digest(): of these 64 bytes with this field 0
};
static_assert(sizeof(FileHeader) == 64);

// XXH3-64 of header `h` with its header_digest field 0, never 0 (0 marks a file without one).
uint64_t header_digest(FileHeader h) {
  h.header_digest = 0;
  const uint64_t d = XXH3_64bits(&h, sizeof h);
  return d != 0 ? d : 1;
}

// The header of the state file `path` (mapped as `file`): its length, magic, version and, before
// any other field is believed, its checksum checked (zt::Error naming the file).
FileHeader read_header(const std::filesystem::path& path, const MappedFile& file) {
  FileHeader h;
  if (file.size() < sizeof h)
    fail("{}: ZeRO state file of {} bytes is shorter than its {}-byte header", path.string(),
         file.size(), sizeof(FileHeader));
  std::memcpy(&h, file.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0)
    fail("{}: not a zerotune ZeRO state file (magic '{}', expected 'ZTZERO01')", path.string(),
         std::string(h.magic, sizeof h.magic));
  if (h.version != kVersion)
    fail("{}: ZeRO state version {} (expected {})", path.string(), h.version, kVersion);
  if (h.header_digest != 0 && h.header_digest != header_digest(h))
    fail(
        "{}: ZeRO state header checksum {:016x} does not match the header ({:016x}): the header "
        "is corrupt",
        path.string(), h.header_digest, header_digest(h));
  return h;
}

// A save id for messages: 0 is a file written before save ids.
std::string describe_save_id(uint64_t id) {
  return id != 0 ? fmt::format("{:016x}", id) : "0 (written before save ids)";
}

// Rank `rank`'s file under `dir` carries save id `id`, rank 0's `id0`: zt::Error naming both.
[[noreturn]] void fail_mixed_saves(const std::filesystem::path& dir, int rank, uint64_t id,
                                   uint64_t id0) {
  fail(
      "{}: ZeRO state of save id {}, but rank 0's file {} of save id {}: the directory mixes "
      "files of two saves",
      ZeroEngine::state_path(dir, rank).string(), describe_save_id(id),
      ZeroEngine::state_path(dir, 0).string(), describe_save_id(id0));
}

// save_id() after loading a save whose rank 0 file carries `id` and payload checksum `digest`:
// the save's id; for a file written before save ids, its checksum (a fingerprint of rank 0's
// shards), so that saves made from two such checkpoints still differ.
uint64_t loaded_save_id(uint64_t id, uint64_t digest) {
  if (id != 0) return id;
  return digest != 0 ? digest : 1;
}

// out[model offsets] ← a rank-major fp32 host buffer of group g (rank r's shard element j at
// src[r*stride + j - shift]), shard columns [lo, hi) only (default: all); data elements only.
void unpack_host(const ShardLayout& L, int g, const float* src, int64_t stride, int64_t shift,
                 float* out, int64_t lo = 0, int64_t hi = INT64_MAX) {
  for (int r = 0; r < L.world_size(); ++r)
    for (int i = L.tensor_begin(g); i < L.tensor_end(g); ++i) {
      const ShardTensor& t = L.tensor(i);
      const int64_t u0 = std::max(lo, t.shard_offset) - t.shard_offset;
      const int64_t u1 =
          std::min({hi, t.shard_offset + t.shard_elems, t.shard_offset + t.valid(r)}) -
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
  gatherer_->wait_all_ready();
  const int64_t S = layout_.shard_elems();
  const int64_t k = comm_.rank() - gatherer_->owned().rank0;  // this rank's block among the owned
  const bool host = optimizer_->host_state();
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.world_size = static_cast<uint32_t>(layout_.world_size());
  h.rank = static_cast<uint32_t>(comm_.rank());
  h.layout_hash = layout_.hash();
  h.shard_elems = S;
  h.adam_step = adam_step_;
  h.save_id = save_id_;
  h.header_digest = header_digest(h);
  const std::filesystem::path path = state_path(dir, comm_.rank());
  std::vector<float> buf;
  write_file_atomic(path, [&](const ByteSink& sink) {
    sink(&h, sizeof h);
    XXH3_state_t* st = XXH3_createState();
    XXH3_64bits_reset(st);
    for (int a = 0; a < 3; ++a) {  // master (whatever its storage), m, v: this rank's block
      const float* base = a == 0 ? nullptr : (a == 1 ? optimizer_->m() : optimizer_->v()) + k * S;
      for (int64_t off = 0; off < S; off += static_cast<int64_t>(kChunk)) {
        const int64_t n = std::min<int64_t>(static_cast<int64_t>(kChunk), S - off);
        const float* p = a == 0 ? nullptr : base + off;
        if (a == 0 || !host) {  // the master, or device memory: copy out first
          buf.resize(static_cast<size_t>(n));
          if (a == 0) {
            optimizer_->read_master(k * S + off, n, buf.data());
          } else {
            ops_.copy_to_host(buf.data(), dev(const_cast<float*>(p), n), stream_);
            ops_.synchronize(stream_);
          }
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

namespace {

// Rank `rank`'s state file under `dir`, mapped and checked against the layout `L` it must have
// been written in: present, magic, version, header checksum, W, rank, layout hash, size, step
// count and payload checksum (zt::Error naming the file, the field, the value found and the value
// expected). Its save id is compared by the caller (with rank 0's).
struct StateFile {
  MappedFile file;
  FileHeader header{};
  const float* payload = nullptr;  // master | m | v, [3][S] fp32
  uint64_t digest = 0;             // the payload's XXH3-64 (checked)
};

StateFile open_state_file(const std::filesystem::path& dir, const ShardLayout& L, int rank) {
  const std::filesystem::path path = ZeroEngine::state_path(dir, rank);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    fail(
        "{}: the checkpoint has no {} (rank {}'s master weights and optimizer state, of world "
        "size {}); it is incomplete (copied in part?) or not a zerotune checkpoint",
        dir.string(), path.filename().string(), rank, L.world_size());
  StateFile f;
  f.file = MappedFile(path);
  const int64_t S = L.shard_elems();
  const size_t payload = static_cast<size_t>(3 * S) * 4, want = sizeof(FileHeader) + payload + 8;
  f.header = read_header(path, f.file);
  const FileHeader& h = f.header;
  if (h.world_size != static_cast<uint32_t>(L.world_size()))
    fail(
        "{}: ZeRO state was written with world size {}, but rank 0's file of the same checkpoint "
        "with world size {}: the directory mixes two checkpoints",
        path.string(), h.world_size, L.world_size());
  if (h.rank != static_cast<uint32_t>(rank))
    fail("{}: ZeRO state belongs to rank {}, read as rank {}'s", path.string(), h.rank, rank);
  if (h.layout_hash != L.hash())
    fail(
        "{}: ZeRO state layout hash {:016x} does not match this model's {:016x} (different "
        "tensors or shapes)",
        path.string(), h.layout_hash, L.hash());
  if (h.shard_elems != S || f.file.size() != want)
    fail("{}: ZeRO state has shard size {} and {} bytes, expected {} and {} bytes", path.string(),
         h.shard_elems, f.file.size(), S, want);
  if (h.adam_step < 0)
    fail("{}: ZeRO state has a negative step count {}", path.string(), h.adam_step);
  const std::byte* data = f.file.data() + sizeof(FileHeader);
  uint64_t digest;
  std::memcpy(&digest, data + payload, sizeof digest);
  const uint64_t actual = XXH3_64bits(data, payload);
  if (digest != actual)
    fail(
        "{}: ZeRO state checksum {:016x} does not match its content ({:016x}): the file is "
        "corrupt",
        path.string(), digest, actual);
  f.payload = reinterpret_cast<const float*>(data);
  f.digest = digest;
  return f;
}

// out[0, n) ← elements [j0, j0 + n) of rank r's shard buffer in layout `to` of array a (0 master,
// 1 m, 2 v), read from the state files `from_files` (one per rank, [3][S_from]) of the same
// tensors cut in layout `from`; padding elements are 0. Element e of tensor i is at
// e mod S_i of rank e / S_i's shard in either layout (ShardLayout).
void reshard(const ShardLayout& to, int r, const ShardLayout& from,
             const std::vector<StateFile>& from_files, int a, int64_t j0, int64_t n, float* out) {
  const int64_t end = j0 + n, S_from = from.shard_elems();
  int64_t j = j0;
  for (int i = 0; i < to.num_tensors() && j < end; ++i) {
    const ShardTensor& t = to.tensor(i);
    const ShardTensor& u = from.tensor(i);
    const int64_t tend = std::min(end, t.shard_offset + t.shard_elems);
    while (j < tend) {
      const int64_t e = static_cast<int64_t>(r) * t.shard_elems + (j - t.shard_offset);
      if (e >= t.numel) {  // padding to the end of this shard
        std::fill(out + (j - j0), out + (tend - j0), 0.0f);
        j = tend;
        break;
      }
      const int64_t q = e / u.shard_elems, within = e - q * u.shard_elems;
      const int64_t len = std::min({tend - j, u.shard_elems - within, t.numel - e});
      std::memcpy(out + (j - j0),
                  from_files[static_cast<size_t>(q)].payload + a * S_from + u.shard_offset + within,
                  static_cast<size_t>(len) * 4);
      j += len;
    }
  }
}

}  // namespace

void ZeroEngine::load_state(const std::filesystem::path& dir) {
  // No gather may still read the compute weights this overwrites, nor an H2D copy the state.
  synchronize_all();
  // Rank 0's file says which world size the checkpoint was written with.
  const int saved_w = saved_world_size(dir);
  if (saved_w == layout_.world_size())
    load_own_state(dir);
  else
    load_resharded_state(dir, saved_w);
  reducer_.clear();
  ready_ = true;
  reset_step();
  optimizer_->round_into_weights();
  gatherer_->install();
  synchronize_all();
}

int ZeroEngine::saved_world_size(const std::filesystem::path& dir) const {
  const std::filesystem::path path = state_path(dir, 0);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    fail(
        "{}: the checkpoint has no {} (rank 0's master weights and optimizer state); it is "
        "incomplete (copied in part?) or not a zerotune checkpoint",
        dir.string(), path.filename().string());
  const MappedFile file(path);
  const FileHeader h = read_header(path, file);
  if (h.world_size < 1 || h.world_size > 1u << 20)
    fail("{}: ZeRO state has world size {} (expected 1 to {})", path.string(), h.world_size,
         1u << 20);
  return static_cast<int>(h.world_size);
}

void ZeroEngine::load_own_state(const std::filesystem::path& dir) {
  const bool host = optimizer_->host_state();
  const int64_t S = layout_.shard_elems();
  const int rank = comm_.rank(), W = layout_.world_size();
  // This rank's file. Whether it loaded goes to every rank below before anyone throws: a rank
  // that failed alone would leave the others waiting in the exchange.
  std::optional<StateFile> own;
  std::exception_ptr error;
  try {
    own.emplace(open_state_file(dir, layout_, rank));
  } catch (...) {
    error = std::current_exception();
  }
  // Each rank reads only its own file, so what the files say is compared through one all-gather
  // [W] (host memory, every rank reaches it): a bad file on any rank, or a file of another save,
  // fails every rank alike.
  struct Seen {
    uint64_t loaded = 0;   // 1: the file passed open_state_file's checks
    uint64_t save_id = 0;  // its header's
    uint64_t digest = 0;   // its payload checksum
  };
  const Seen mine{own ? 1u : 0u, own ? own->header.save_id : 0, own ? own->digest : 0};
  std::vector<Seen> seen(static_cast<size_t>(W));
  if (W > 1)
    comm_.all_gather_bytes(&mine, seen.data(), sizeof mine);
  else
    seen[0] = mine;
  if (error) std::rethrow_exception(error);
  for (int q = 0; q < W; ++q)
    if (seen[static_cast<size_t>(q)].loaded == 0)
      fail(
          "{}: rank {} could not load its {} (its own error says why); no rank loads the "
          "checkpoint",
          dir.string(), q, state_path(dir, q).filename().string());
  for (int q = 1; q < W; ++q)
    if (seen[static_cast<size_t>(q)].save_id != seen[0].save_id)
      fail_mixed_saves(dir, q, seen[static_cast<size_t>(q)].save_id, seen[0].save_id);
  const StateFile& f = *own;
  const int64_t k = rank - gatherer_->owned().rank0;
  optimizer_->write_master(k * S, S, f.payload);
  float* arrs[2] = {optimizer_->m(), optimizer_->v()};
  for (int a = 0; a < 2; ++a) {
    const float* src = f.payload + (a + 1) * S;
    if (host)
      std::memcpy(arrs[a] + k * S, src, static_cast<size_t>(S) * 4);
    else
      ops_.copy_from_host(dev(arrs[a] + k * S, S), src, stream_);
  }
  ops_.synchronize(stream_);
  adam_step_ = f.header.adam_step;
  save_id_ = loaded_save_id(seen[0].save_id, seen[0].digest);
  if (gatherer_->owned().ranks > 1)  // stage 0: every rank keeps every shard: all-gather them
    all_gather_loaded_state(f.payload);
}

void ZeroEngine::load_resharded_state(const std::filesystem::path& dir, int saved_w) {
  const bool host = optimizer_->host_state();
  const int64_t S = layout_.shard_elems();
  const ShardLayout from = layout_.with_world_size(saved_w);
  // Every file of the checkpoint, each checked in full (every rank reads them all).
  std::vector<StateFile> files;
  files.reserve(static_cast<size_t>(saved_w));
  for (int q = 0; q < saved_w; ++q) {
    files.push_back(open_state_file(dir, from, q));
    if (files.back().header.adam_step != files.front().header.adam_step)
      fail("{}: ZeRO state has step count {}, rank 0's {}: the directory mixes two checkpoints",
           files.back().file.path().string(), files.back().header.adam_step,
           files.front().header.adam_step);
    if (files.back().header.save_id != files.front().header.save_id)
      fail_mixed_saves(dir, q, files.back().header.save_id, files.front().header.save_id);
  }
  // This engine's blocks (one, or every rank's under stage 0), a chunk at a time.
  const Ownership& own = gatherer_->owned();
  float* arrs[2] = {optimizer_->m(), optimizer_->v()};
  std::vector<float> buf;
  for (int k = 0; k < own.ranks; ++k)
    for (int64_t off = 0; off < S; off += static_cast<int64_t>(kChunk)) {
      const int64_t n = std::min<int64_t>(static_cast<int64_t>(kChunk), S - off);
      buf.resize(static_cast<size_t>(n));
      for (int a = 0; a < 3; ++a) {
        reshard(layout_, own.rank0 + k, from, files, a, off, n, buf.data());
        if (a == 0) {
          optimizer_->write_master(k * S + off, n, buf.data());
        } else if (host) {
          std::memcpy(arrs[a - 1] + k * S + off, buf.data(), static_cast<size_t>(n) * 4);
        } else {
          ops_.copy_from_host(dev(arrs[a - 1] + k * S + off, n), buf.data(), stream_);
          ops_.synchronize(stream_);  // buf is refilled next
        }
      }
    }
  adam_step_ = files.front().header.adam_step;
  save_id_ = loaded_save_id(files.front().header.save_id, files.front().digest);
}

std::vector<float> ZeroEngine::full_master_weights() {
  require_ready("full_master_weights");
  require_between_steps("full_master_weights");
  gatherer_->wait_all_ready();
  const int W = layout_.world_size();
  const int64_t S = layout_.shard_elems();
  const bool root = comm_.rank() == 0, host = optimizer_->host_state();
  const float* master = optimizer_->master();  // null when it is kept split
  std::vector<float> out;
  if (root) out.assign(static_cast<size_t>(layout_.model_elems()), 0.0f);
  // Rank 0 holds every shard (stage 0; or alone, where host state is read in place — a device
  // state alone takes the chunked path below rather than a second full host copy).
  if (gatherer_->owned().ranks > 1 || (W == 1 && host)) {
    if (!root) return out;
    std::vector<float> staged;
    const float* src = master;
    if (!host ||
        master == nullptr) {  // read in pieces: a split master's halves are joined per piece
      staged.resize(static_cast<size_t>(W * S));
      for (int64_t off = 0; off < W * S; off += static_cast<int64_t>(kChunk))
        optimizer_->read_master(off, std::min<int64_t>(static_cast<int64_t>(kChunk), W * S - off),
                                staged.data() + off);
      src = staged.data();
    }
    for (int g = 0; g < layout_.num_groups(); ++g) unpack_host(layout_, g, src, S, 0, out.data());
    return out;
  }
  // Each group's shard columns, a bucket's worth at a time, all-gathered into the bucket (W = 1:
  // read straight into host memory).
  float* staging = reducer_.staging();  // [C] on the device
  float* bucket = reducer_.bucket();
  const int64_t chunk = reducer_.chunk();
  std::vector<float> staged, cols;
  for (int g = 0; g < layout_.num_groups(); ++g)
    for (int64_t j0 = layout_.group_shard_begin(g); j0 < layout_.group_shard_end(g); j0 += chunk) {
      const int64_t n = std::min(layout_.group_shard_end(g), j0 + chunk) - j0;
      if (W == 1) {  // nothing to gather (and no bucket)
        staged.resize(static_cast<size_t>(n));
        optimizer_->read_master(j0, n, staged.data());
        unpack_host(layout_, g, staged.data(), n, j0, out.data(), j0, j0 + n);
        continue;
      }
      const float* send = staging;  // host or split state: staged in device memory
      if (master == nullptr) {
        cols.resize(static_cast<size_t>(n));
        optimizer_->read_master(j0, n, cols.data());
        ops_.copy_from_host(dev(staging, n), cols.data(), stream_);
      } else if (host) {
        ops_.copy_from_host(dev(staging, n), master + j0, stream_);
      } else {
        send = master + j0;
      }
      comm_.all_gather(send, bucket, static_cast<size_t>(n), stream_);
      ops_.synchronize(stream_);  // cols is rewritten by the next chunk
      if (!root) continue;
      staged.resize(static_cast<size_t>(W * n));
      ops_.copy_to_host(staged.data(), dev(bucket, W * n), stream_);
      ops_.synchronize(stream_);
      unpack_host(layout_, g, staged.data(), n, j0, out.data(), j0, j0 + n);
    }
  return out;
}

void ZeroEngine::all_gather_loaded_state(const float* own_master) {
  const bool host = optimizer_->host_state();
  const int rank = comm_.rank(), W = layout_.world_size();
  const int64_t S = layout_.shard_elems();
  for (float* arr : {optimizer_->master(), optimizer_->m(), optimizer_->v()}) {
    if (arr == nullptr) continue;  // a split master: below
    if (host)
      reducer_.all_gather_host(arr);  // through the device staging, C columns at a time
    else
      comm_.all_gather(arr + rank * S, arr, static_cast<size_t>(S), stream_);  // in place
  }
  if (optimizer_->master() != nullptr) return;
  // The split master: this rank's block C columns at a time through the reducer's staging and
  // bucket (both free between steps), each other rank's block written back as master weights.
  float* staging = reducer_.staging();
  float* bucket = reducer_.bucket();
  const int64_t chunk = reducer_.chunk();
  std::vector<float> gathered;
  for (int64_t j0 = 0; j0 < S; j0 += chunk) {
    const int64_t n = std::min(chunk, S - j0);
    ops_.copy_from_host(dev(staging, n), own_master + j0, stream_);
    comm_.all_gather(staging, bucket, static_cast<size_t>(n), stream_);
    gathered.resize(static_cast<size_t>(W * n));
    ops_.copy_to_host(gathered.data(), dev(bucket, W * n), stream_);
    ops_.synchronize(stream_);
    for (int q = 0; q < W; ++q)
      if (q != rank) optimizer_->write_master(q * S + j0, n, gathered.data() + q * n);
  }
}

ZeroMemory ZeroEngine::memory() const {
  ZeroMemory mem;
  reducer_.append_pools(mem.pools);
  gatherer_->append_pools(mem.pools);
  optimizer_->append_pools(mem.pools);
  return mem;
}

}  // namespace zt::zero
