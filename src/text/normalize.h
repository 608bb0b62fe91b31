// The tokenizer's `normalizer`: Unicode NFC, Prepend and Replace (SentencePiece-style tokenizers:
// Llama 2, Mistral, Gemma), with the byte alignments HF `tokenizers` keeps between the normalized
// and the original text (so token offsets point into the input).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/json.h"
#include "text/pretokenize.h"

namespace zt::text {

// [begin, end) byte range of the original text.
using ByteSpan = std::pair<uint32_t, uint32_t>;

// NFC normaliser (utf8proc's Unicode data). Build once per tokenizer (≈5 ms: it tabulates which
// code points can change under NFC), then use from any number of threads.
class NfcNormalizer {
 public:
  NfcNormalizer();

  // True when NFC(s) == s is certain from a per-character quick check (every character has
  // canonical combining class 0, NFC_Quick_Check=Yes and composes with nothing before it).
  // `s` must be valid UTF-8. False means "maybe not": run normalize().
  bool is_stable(std::string_view s) const;

  // out = NFC(s); align[k] = original byte range, offset by `base`, of out's byte k, computed the
  // way HF `NormalizedString::nfc` does (unicode-normalization-alignments changes + transform):
  // a composed character aligns with the first character it consumed, an inserted one with the
  // character before it. `s` must be valid UTF-8.
  void normalize(std::string_view s, uint32_t base, std::string& out,
                 std::vector<ByteSpan>& align) const;

 private:
  std::vector<uint64_t> maybe_unstable_;  // bit c set: code point c may change NFC output
};

// Scratch buffers of Normalizer::normalize (per thread).
struct NormalizeScratch {
  RegexScratch regex;
  std::vector<std::pair<uint32_t, uint32_t>> matches;
  std::string text;
  std::vector<ByteSpan> align;
};

// A tokenizer.json "normalizer": NFC, Prepend (`prepend` before a non-empty text), Replace (every
// String or Regex match becomes `content`) and Sequences of them, applied in order as HF's
// normalizers do. Immutable after from_json; shareable between threads.
class Normalizer {
 public:
  // Reads the "normalizer" field (null: no normalizer). Throws zt::Error "<file>: normalizer
  // .normalizers[1].type 'Lowercase' is not supported (supported: NFC, Prepend, Replace,
  // Sequence)" for other types, and names the field for a malformed Prepend / Replace.
  static Normalizer from_json(const Json& n, const std::string& file, const std::string& path);

  bool empty() const { return steps_.empty(); }
  // True when normalize(s) == s for certain (NFC's quick check, no Prepend of a non-empty text,
  // no Replace match). `s` must be valid UTF-8.
  bool is_stable(std::string_view s, NormalizeScratch& scratch) const;
  // out = the normalized s; align[k] = the original byte range (offset by `base`) of out's byte k:
  // NFC as NfcNormalizer; a Prepend aligns with the first character, a Replace's content with
  // the last character of the match it replaces (NormalizedString::transform_range).
  void normalize(std::string_view s, uint32_t base, std::string& out, std::vector<ByteSpan>& align,
                 NormalizeScratch& scratch) const;

 private:
  struct Step {
    enum class Kind { kNfc, kPrepend, kReplace } kind;
    std::string text;                    // Prepend: the prefix; Replace: the content
    std::shared_ptr<const Regex> regex;  // Replace: the pattern (literal or regex)
  };
  void parse(const Json& n, const std::string& file, const std::string& path);
  std::vector<Step> steps_;
  std::shared_ptr<const NfcNormalizer> nfc_;
};

}  // namespace zt::text
