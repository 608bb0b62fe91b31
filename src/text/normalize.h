// Unicode NFC for the tokenizer's `normalizer`, with the byte alignments HF `tokenizers` keeps
// between the normalized and the original text (so token offsets point into the input).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/json.h"

namespace zt::text {

// Reads a tokenizer.json "normalizer": true for NFC (alone or inside Sequences, which may also be
// empty), false for null / an empty Sequence. Throws zt::Error "<file>: normalizer.normalizers[1]
// .type 'Lowercase' is not supported (supported: NFC, Sequence)" for anything else.
bool normalizer_is_nfc(const Json& normalizer, const std::string& file, const std::string& path);

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

}  // namespace zt::text
