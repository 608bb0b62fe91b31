// Tokenizer::Impl, the loaded tokenizer, and the per-thread state its encoding uses; shared by
// tokenizer.cpp (loading, decoding, the vocabulary) and tokenizer_encode.cpp (the encoding
// pipeline). Internal to src/text.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "io/json.h"
#include "text/bpe_model.h"
#include "text/decoder.h"
#include "text/normalize.h"
#include "text/pretokenize.h"
#include "text/pretokenize_added.h"
#include "text/tokenizer.h"

namespace zt::text {

namespace tokenizer_detail {

// ---- post-processors -----------------------------------------------------------------------

struct ByteLevelPost {
  bool trim_offsets;
  bool add_prefix_space;
};
struct TemplatePost {
  // The single-sequence template: an empty piece stands for the sequence, any other piece is
  // the ids of a special token.
  std::vector<std::vector<int32_t>> pieces;
};
using PostStep = std::variant<ByteLevelPost, TemplatePost>;

// ---- per-thread state ----------------------------------------------------------------------

struct Context {
  PreTokenizeScratch pre;
  NormalizeScratch norm_scratch;
  MetaspaceText meta;
  BpeCache cache;
  BpeScratch bpe;
  std::vector<AddedSplit> outer, inner;
  std::vector<Word> words;
  std::string norm, prefixed;
  std::vector<ByteSpan> align;
  std::vector<bool> matched;  // offsets mode: token i is an added-token match
};

}  // namespace tokenizer_detail

struct Tokenizer::Impl {
  using Context = tokenizer_detail::Context;
  using PostStep = tokenizer_detail::PostStep;

  std::string file;
  Normalizer normalizer;
  PreTokenizer pre;
  BpeModel model;
  AddedTokenMatcher raw_matcher;   // added tokens with normalized: false, on the input
  AddedTokenMatcher norm_matcher;  // normalized: true, on the normalized text
  std::vector<PostStep> post;
  Decoder decoder;
  bool byte_level_decoder = false;  // the decoder is ByteLevel alone: decoded[] below
  // Per id (added tokens override the model, as AddedVocabulary::id_to_token).
  int32_t vocab_size = 0;
  std::vector<AddedToken> added;
  std::vector<int32_t> added_index;  // per id: index into `added`, or -1
  std::vector<bool> present, special;
  // ByteLevel decoder output of id i: decoded[decoded_begin[i], decoded_begin[i + 1]).
  std::vector<uint32_t> decoded_begin;
  std::string decoded;
  FlatStringMap added_ids;  // content -> id
  mutable std::mutex pool_mu;
  mutable std::vector<std::unique_ptr<Context>> pool;

  void parse_post_processor(const Json& p, const std::string& path);
  void build_id_tables();
  void build_matchers();  // raw_matcher / norm_matcher from `added`
  // Token string of an id (added token content, else vocabulary form); the id must be present.
  std::string_view token_of(int32_t id) const {
    int32_t a = added_index[size_t(id)];
    return a >= 0 ? std::string_view(added[size_t(a)].content) : *model.id_to_token(id);
  }

  std::unique_ptr<Context> acquire() const {
    std::lock_guard<std::mutex> lock(pool_mu);
    if (pool.empty()) return std::make_unique<Context>();
    auto c = std::move(pool.back());
    pool.pop_back();
    return c;
  }
  void release(std::unique_ptr<Context> c) const {
    std::lock_guard<std::mutex> lock(pool_mu);
    pool.push_back(std::move(c));
  }
  // Holds a pooled context; returns it to the pool when it goes out of scope.
  class Lease {
   public:
    explicit Lease(const Impl& impl) : impl_(impl), ctx_(impl.acquire()) {}
    ~Lease() { impl_.release(std::move(ctx_)); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Context& operator*() const { return *ctx_; }

   private:
    const Impl& impl_;
    std::unique_ptr<Context> ctx_;
  };

  template <bool kOffsets>
  void encode_into(std::string_view text, bool add_special, Context& c, std::vector<int32_t>& ids,
                   std::vector<ByteSpan>* offs) const;
  template <bool kOffsets>
  void encode_segment(std::string_view text, uint32_t a, uint32_t b, Context& c,
                      std::vector<int32_t>& ids, std::vector<ByteSpan>* offs) const;
  template <bool kOffsets>
  void post_process(bool add_special, std::string_view text, Context& c, std::vector<int32_t>& ids,
                    std::vector<ByteSpan>* offs) const;
};

}  // namespace zt::text
