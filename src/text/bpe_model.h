// The BPE model of HF `tokenizers` (models/bpe): a vocabulary, merge ranks keyed by the pair of
// ids, and the merge loop that repeatedly applies the lowest-ranked merge present in a word
// (leftmost first among equal ranks). Byte-level models work on the raw bytes of a word (each byte
// one initial symbol via the GPT-2 byte alphabet); others on its UTF-8 characters.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/unicode.h"

namespace zt::text {

// Open-addressing map from byte strings to int32 values; keys are copied into one arena (no
// allocation per entry). Used for the 151k-entry vocabularies and the per-thread word cache.
class FlatStringMap {
 public:
  struct Ref {
    uint32_t offset;
    uint32_t length;
  };
  void reserve(size_t n);
  // Inserts or overwrites; returns where the key is stored (see view()).
  Ref insert_or_assign(std::string_view key, int32_t value);
  std::optional<int32_t> find(std::string_view key) const;
  std::string_view view(Ref r) const { return {arena_.data() + r.offset, r.length}; }
  size_t size() const { return size_; }
  void clear();

 private:
  struct Slot {
    uint32_t offset;
    uint32_t length;  // kEmpty when free
    int32_t value;
    uint32_t tag;  // high hash bits, to skip most key comparisons
  };
  static constexpr uint32_t kEmpty = ~uint32_t{0};
  size_t probe(std::string_view key, uint64_t h) const;
  void grow();

  std::vector<Slot> slots_;
  std::string arena_;
  size_t size_ = 0;
};

// Token strings of a tokenizer.json model, as read from the file: vocab entries and merge pairs
// are (offset, length) ranges of the arenas.
struct BpeSource {
  std::string vocab_bytes;
  struct VocabEntry {
    uint32_t offset, length;
    int64_t id;
  };
  std::vector<VocabEntry> vocab;
  std::string merge_bytes;
  struct MergeEntry {
    uint32_t a_offset, a_length, b_offset, b_length;
  };
  std::vector<MergeEntry> merges;  // in rank order
};

// Per-thread word cache: word bytes -> token ids and their [begin, end) byte spans in the word.
class BpeCache {
 public:
  static constexpr size_t kMaxEntries = 1 << 16;  // cleared when full
  static constexpr size_t kMaxWordBytes = 256;    // longer words are not cached (as HF)
  struct Entry {
    uint32_t first;  // index into ids_/spans_
    uint32_t count;
  };
  std::optional<Entry> find(std::string_view word) const;
  void insert(std::string_view word, const int32_t* ids, const std::pair<uint32_t, uint32_t>* spans,
              size_t n);
  const int32_t* ids(const Entry& e) const { return ids_.data() + e.first; }
  const std::pair<uint32_t, uint32_t>* spans(const Entry& e) const {
    return spans_.data() + e.first;
  }

 private:
  FlatStringMap map_;  // word -> index into entries_
  std::vector<Entry> entries_;
  std::vector<int32_t> ids_;
  std::vector<std::pair<uint32_t, uint32_t>> spans_;
};

// Per-thread scratch of the merge loop.
struct BpeScratch {
  struct Symbol {
    int32_t id;
    int32_t prev, next;   // linked list (heap path)
    uint32_t begin, end;  // byte span in the word
  };
  std::vector<Symbol> symbols;
  std::vector<int32_t> rank, merged;               // per adjacent pair (small-word path)
  std::vector<std::pair<uint64_t, int32_t>> heap;  // ((rank << 32) | pos, new id)
  std::vector<int32_t> ids;
  std::vector<std::pair<uint32_t, uint32_t>> spans;
};

struct BpeOptions {
  bool byte_level = true;      // words are raw bytes mapped through the byte alphabet
  bool ignore_merges = false;  // a word that is itself in the vocabulary is one token
  std::optional<std::string> unk_token;
  bool fuse_unk = false;
  bool byte_fallback = false;  // unknown pieces become <0xXX> tokens when those exist
};

class BpeModel {
 public:
  BpeModel() = default;
  // Vocabulary (tokens in vocabulary form, e.g. "Ġthe") and merges (rank = index) of `src`.
  // Throws zt::Error prefixed by `where` for an id outside [0, 2^31), or a merge naming a token
  // that is not in the vocabulary, or whose concatenation is not ("model.merges[12] 'a b':
  // merged token 'ab' is not in model.vocab").
  BpeModel(const BpeSource& src, BpeOptions options, std::string_view where);

  // Appends the tokens of one word (raw bytes for a byte-level model, else UTF-8 text) to
  // scratch.ids / scratch.spans (spans are [begin, end) bytes of the word), using `cache`.
  void tokenize(std::string_view word, BpeCache& cache, BpeScratch& scratch) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // Vocabulary form of an id (e.g. "Ġthe"), nullopt when no token has this id.
  std::optional<std::string_view> id_to_token(int32_t id) const;
  int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }
  bool byte_level() const { return options_.byte_level; }

 private:
  struct MergeSlot {
    uint64_t key;  // (left id << 32) | right id; kEmpty when free
    int32_t rank;
    int32_t new_id;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  const MergeSlot* find_merge(int32_t a, int32_t b) const;
  void insert_merge(int32_t a, int32_t b, int32_t rank, int32_t new_id);
  bool initial_symbols(std::string_view word, BpeScratch& s) const;
  void merge_small(BpeScratch& s) const;
  void merge_heap(BpeScratch& s) const;

  BpeOptions options_;
  FlatStringMap vocab_;                          // vocabulary form -> id
  FlatStringMap word_to_id_;                     // byte-level: raw bytes -> id (for ignore_merges)
  std::vector<FlatStringMap::Ref> id_to_token_;  // in vocab_; length kNoToken when no token
  static constexpr uint32_t kNoToken = ~uint32_t{0};
  std::array<int32_t, 256> byte_id_{};  // byte-level: id of each single byte, -1 if none
  std::vector<MergeSlot> merges_;
  uint64_t merge_mask_ = 0;
  int merge_shift_ = 60;
  unicode::ByteLevelAlphabet alphabet_;
};

}  // namespace zt::text
