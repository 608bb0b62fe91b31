#include "text/bpe_model.h"

#include <xxhash.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <functional>

#include "core/error.h"

namespace zt::text {

namespace {
uint64_t hash_bytes(std::string_view s) { return XXH3_64bits(s.data(), s.size()); }
}  // namespace

void FlatStringMap::reserve(size_t n) {
  size_t cap = 16;
  while (cap * 7 < n * 10) cap <<= 1;  // load factor <= 0.7
  if (cap <= slots_.size()) return;
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(cap, Slot{0, kEmpty, 0, 0});
  for (const Slot& s : old) {
    if (s.length == kEmpty) continue;
    std::string_view key(arena_.data() + s.offset, s.length);
    slots_[probe(key, hash_bytes(key))] = s;
  }
}

void FlatStringMap::clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{0, kEmpty, 0, 0});
  arena_.clear();
  size_ = 0;
}

// Index of the slot holding `key`, or of the free slot where it would go.
size_t FlatStringMap::probe(std::string_view key, uint64_t h) const {
  const size_t mask = slots_.size() - 1;
  const auto tag = uint32_t(h >> 32);
  for (size_t i = size_t(h) & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.length == kEmpty) return i;
    if (s.tag == tag && s.length == key.size() &&
        std::memcmp(arena_.data() + s.offset, key.data(), key.size()) == 0) {
      return i;
    }
  }
}

FlatStringMap::Ref FlatStringMap::insert_or_assign(std::string_view key, int32_t value) {
  if ((size_ + 1) * 10 > slots_.size() * 7) reserve(std::max<size_t>(size_ * 2, 16));
  uint64_t h = hash_bytes(key);
  Slot& s = slots_[probe(key, h)];
  if (s.length == kEmpty) {
    s = Slot{uint32_t(arena_.size()), uint32_t(key.size()), value, uint32_t(h >> 32)};
    arena_.append(key);
    ++size_;
  } else {
    s.value = value;
  }
  return Ref{s.offset, s.length};
}

std::optional<int32_t> FlatStringMap::find(std::string_view key) const {
  if (slots_.empty()) return std::nullopt;
  const Slot& s = slots_[probe(key, hash_bytes(key))];
  if (s.length == kEmpty) return std::nullopt;
  return s.value;
}

std::optional<BpeCache::Entry> BpeCache::find(std::string_view word) const {
  auto k = map_.find(word);
  if (!k) return std::nullopt;
  return entries_[size_t(*k)];
}

void BpeCache::insert(std::string_view word, const int32_t* ids,
                      const std::pair<uint32_t, uint32_t>* spans, size_t n) {
  if (word.size() >= kMaxWordBytes) return;
  if (entries_.size() >= kMaxEntries) {
    map_.clear();
    entries_.clear();
    ids_.clear();
    spans_.clear();
  }
  map_.insert_or_assign(word, int32_t(entries_.size()));
  entries_.push_back(Entry{static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(n)});
  ids_.insert(ids_.end(), ids, ids + n);
  spans_.insert(spans_.end(), spans, spans + n);
}

BpeModel::BpeModel(const BpeSource& src, BpeOptions options, std::string_view where)
    : options_(std::move(options)) {
  int64_t max_id = -1;
  vocab_.reserve(src.vocab.size());
  for (const auto& e : src.vocab) max_id = std::max(max_id, e.id);
  if (max_id > INT32_MAX) max_id = INT32_MAX;
  id_to_token_.assign(size_t(max_id + 1), FlatStringMap::Ref{0, kNoToken});
  for (const auto& e : src.vocab) {
    std::string_view tok(src.vocab_bytes.data() + e.offset, e.length);
    if (e.id < 0 || e.id > INT32_MAX) {
      fail("{}: model.vocab['{}'] = {} is not a valid id", where, tok, e.id);
    }
    id_to_token_[size_t(e.id)] = vocab_.insert_or_assign(tok, static_cast<int32_t>(e.id));
  }
  byte_id_.fill(-1);
  if (options_.byte_level) {
    word_to_id_.reserve(src.vocab.size());
    std::string raw;
    for (size_t id = 0; id < id_to_token_.size(); ++id) {
      if (id_to_token_[id].length == kNoToken) continue;
      std::string_view tok = vocab_.view(id_to_token_[id]);
      raw.clear();
      if (alphabet_.to_bytes(tok, raw)) word_to_id_.insert_or_assign(raw, int32_t(id));
    }
    for (int b = 0; b < 256; ++b) {
      if (auto id = vocab_.find(alphabet_.byte_to_utf8[b])) byte_id_[b] = *id;
    }
  }
  size_t cap = 16;
  int bits = 4;
  while (cap < src.merges.size() * 2) {
    cap <<= 1;
    ++bits;
  }
  merges_.assign(cap, MergeSlot{kEmpty, 0, 0});
  merge_mask_ = cap - 1;
  merge_shift_ = 64 - bits;
  std::string joined;
  for (size_t r = 0; r < src.merges.size(); ++r) {
    const auto& m = src.merges[r];
    std::string_view a(src.merge_bytes.data() + m.a_offset, m.a_length);
    std::string_view b(src.merge_bytes.data() + m.b_offset, m.b_length);
    auto ia = vocab_.find(a);
    auto ib = vocab_.find(b);
    if (!ia || !ib) {
      fail("{}: model.merges[{}] '{} {}': token '{}' is not in model.vocab", where, r, a, b,
           ia ? b : a);
    }
    joined.assign(a).append(b);
    auto in = vocab_.find(joined);
    if (!in) {
      fail("{}: model.merges[{}] '{} {}': merged token '{}' is not in model.vocab", where, r, a, b,
           joined);
    }
    insert_merge(*ia, *ib, static_cast<int32_t>(r), *in);
  }
}

const BpeModel::MergeSlot* BpeModel::find_merge(int32_t a, int32_t b) const {
  uint64_t key = (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
  uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> merge_shift_;
  for (uint64_t i = h & merge_mask_;; i = (i + 1) & merge_mask_) {
    const MergeSlot& s = merges_[i];
    if (s.key == key) return &s;
    if (s.key == kEmpty) return nullptr;
  }
}

void BpeModel::insert_merge(int32_t a, int32_t b, int32_t rank, int32_t new_id) {
  uint64_t key = (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
  uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> merge_shift_;
  for (uint64_t i = h & merge_mask_;; i = (i + 1) & merge_mask_) {
    MergeSlot& s = merges_[i];
    if (s.key == key || s.key == kEmpty) {  // a repeated pair keeps its last rank, as HF
      s = MergeSlot{key, rank, new_id};
      return;
    }
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  return vocab_.find(token);
}

std::optional<std::string_view> BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || size_t(id) >= id_to_token_.size()) return std::nullopt;
  const auto& r = id_to_token_[size_t(id)];
  if (r.length == kNoToken) return std::nullopt;
  return vocab_.view(r);
}

// Initial symbols of a word, as BPE::merge_word: one per byte (byte-level) or per character;
// unknown ones become <0xXX> byte tokens (byte_fallback) or the unk token (fused when fuse_unk),
// or are dropped. Returns false when no symbol is left.
bool BpeModel::initial_symbols(std::string_view word, BpeScratch& s) const {
  auto& syms = s.symbols;
  syms.clear();
  if (options_.byte_level) {
    bool all_known = true;
    for (size_t i = 0; i < word.size(); ++i) {
      int32_t id = byte_id_[static_cast<unsigned char>(word[i])];
      if (id < 0) {
        all_known = false;
        break;
      }
      syms.push_back({id, int32_t(i) - 1, int32_t(i) + 1, uint32_t(i), uint32_t(i + 1)});
    }
    if (all_known) {
      if (!syms.empty()) syms.back().next = -1;
      return !syms.empty();
    }
    syms.clear();
  }
  // Spans are cumulative, as Word::add: a dropped piece shifts the later ones (an HF quirk).
  struct Pending {
    int32_t id = -1;  // -1: no pending unknown piece
    uint32_t len = 0;
  };
  Pending unk;
  uint32_t at = 0;
  auto push = [&](int32_t id, uint32_t len) {
    int32_t k = static_cast<int32_t>(syms.size());
    syms.push_back({id, k - 1, k + 1, at, at + len});
    at += len;
  };
  for (size_t i = 0; i < word.size();) {
    size_t b = i;
    std::string_view unit;
    int32_t id = -1;
    if (options_.byte_level) {
      unsigned char byte = static_cast<unsigned char>(word[i++]);
      unit = alphabet_.byte_to_utf8[byte];
      id = byte_id_[byte];
    } else {
      unicode::next_code_point(word, i);
      unit = word.substr(b, i - b);
      if (auto v = vocab_.find(unit)) id = *v;
    }
    const auto len = uint32_t(i - b);
    if (id >= 0) {
      if (unk.id >= 0) push(unk.id, unk.len);
      unk.id = -1;
      push(id, len);
      continue;
    }
    if (options_.byte_fallback) {
      std::vector<int32_t> fb;
      for (unsigned char c : unit) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", c);
        auto v = vocab_.find(std::string_view(name));
        if (!v) break;
        fb.push_back(*v);
      }
      if (fb.size() == unit.size()) {  // HF adds these without flushing a pending unk first
        for (int32_t f : fb) push(f, 1);
        continue;
      }
    }
    if (options_.unk_token) {
      auto unk_id = vocab_.find(*options_.unk_token);
      if (!unk_id) {
        fail("tokenizer: model.unk_token '{}' is not in model.vocab", *options_.unk_token);
      }
      if (unk.id >= 0 && options_.fuse_unk) {
        unk.len += len;
      } else {
        if (unk.id >= 0) push(unk.id, unk.len);
        unk = Pending{*unk_id, len};
      }
    }
  }
  if (unk.id >= 0) push(unk.id, unk.len);
  if (!syms.empty()) syms.back().next = -1;
  return !syms.empty();
}

// Words of up to 64 symbols: rank of every adjacent pair in an array, scan for the minimum.
void BpeModel::merge_small(BpeScratch& s) const {
  auto& syms = s.symbols;
  auto& rank = s.rank;
  auto& merged = s.merged;
  size_t m = syms.size();
  rank.resize(m > 0 ? m - 1 : 0);
  merged.resize(rank.size());
  auto pair_rank = [&](size_t i) {
    const MergeSlot* slot = find_merge(syms[i].id, syms[i + 1].id);
    rank[i] = slot ? slot->rank : INT32_MAX;
    merged[i] = slot ? slot->new_id : -1;
  };
  for (size_t i = 0; i + 1 < m; ++i) pair_rank(i);
  while (!rank.empty()) {
    size_t best = 0;
    int32_t br = rank[0];
    for (size_t i = 1; i < rank.size(); ++i) {
      if (rank[i] < br) {
        br = rank[i];
        best = i;
      }
    }
    if (br == INT32_MAX) break;
    syms[best].id = merged[best];
    syms[best].end = syms[best + 1].end;
    syms.erase(syms.begin() + long(best) + 1);
    size_t drop = best + 1 < rank.size() ? best + 1 : best;
    rank.erase(rank.begin() + long(drop));
    merged.erase(merged.begin() + long(drop));
    if (best > 0) pair_rank(best - 1);
    if (best + 1 < syms.size()) pair_rank(best);
  }
}

// Longer words: a min-heap of (rank, position) over a linked list of symbols; stale entries are
// recognised by the pair no longer producing the entry's token.
void BpeModel::merge_heap(BpeScratch& s) const {
  auto& syms = s.symbols;
  auto& heap = s.heap;
  heap.clear();
  auto cmp = [](const std::pair<uint64_t, int32_t>& a, const std::pair<uint64_t, int32_t>& b) {
    return a.first > b.first;
  };
  auto push = [&](int32_t pos) {
    int32_t nx = syms[size_t(pos)].next;
    if (nx < 0) return;
    const MergeSlot* slot = find_merge(syms[size_t(pos)].id, syms[size_t(nx)].id);
    if (!slot) return;
    heap.emplace_back((uint64_t(uint32_t(slot->rank)) << 32) | uint32_t(pos), slot->new_id);
    std::push_heap(heap.begin(), heap.end(), cmp);
  };
  for (size_t i = 0; i + 1 < syms.size(); ++i) push(int32_t(i));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    auto [key, new_id] = heap.back();
    heap.pop_back();
    auto pos = size_t(uint32_t(key));
    BpeScratch::Symbol& a = syms[pos];
    if (a.id < 0 || a.next < 0) continue;
    BpeScratch::Symbol& b = syms[size_t(a.next)];
    const MergeSlot* slot = find_merge(a.id, b.id);
    if (!slot || slot->new_id != new_id) continue;
    a.id = new_id;
    a.end = b.end;
    a.next = b.next;
    if (b.next >= 0) syms[size_t(b.next)].prev = int32_t(pos);
    b.id = -1;
    if (a.prev >= 0) push(a.prev);
    push(int32_t(pos));
  }
  size_t w = 0;
  for (int32_t i = 0; i >= 0; i = syms[size_t(i)].next) syms[w++] = syms[size_t(i)];
  syms.resize(w);
}

void BpeModel::tokenize(std::string_view word, BpeCache& cache, BpeScratch& s) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    const auto& map = options_.byte_level ? word_to_id_ : vocab_;
    if (auto id = map.find(word)) {
      s.ids.push_back(*id);
      s.spans.emplace_back(0, uint32_t(word.size()));
      return;
    }
  }
  if (auto e = cache.find(word)) {
    s.ids.insert(s.ids.end(), cache.ids(*e), cache.ids(*e) + e->count);
    s.spans.insert(s.spans.end(), cache.spans(*e), cache.spans(*e) + e->count);
    return;
  }
  if (!initial_symbols(word, s)) return;
  if (s.symbols.size() <= 64) {
    merge_small(s);
  } else {
    merge_heap(s);
  }
  size_t first = s.ids.size();
  for (const auto& sym : s.symbols) {
    s.ids.push_back(sym.id);
    s.spans.emplace_back(sym.begin, sym.end);
  }
  cache.insert(word, s.ids.data() + first, s.spans.data() + first, s.ids.size() - first);
}

}  // namespace zt::text
