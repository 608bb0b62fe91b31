// The tokenizer.json "decoder" of HF `tokenizers`: ByteLevel (byte-level BPE) and the
// SentencePiece-style steps Replace, ByteFallback, Fuse, Strip and Metaspace, alone or in a
// Sequence, applied to the token strings as each decoder's decode_chain does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/json.h"
#include "text/pretokenize.h"

namespace zt::text {

class Decoder {
 public:
  // Reads the "decoder" field (null: tokens are joined with spaces, as HF without a decoder).
  // Throws zt::Error "<file>: decoder.decoders[2].type 'CTC' is not supported (supported: ...)"
  // and names the field of a malformed step.
  static Decoder from_json(const Json& d, const std::string& file, const std::string& path);

  bool empty() const { return steps_.empty(); }
  // True when the decoder is exactly one ByteLevel step.
  bool byte_level_only() const;
  // The decoded text of `tokens` (vocabulary / added-token strings, in order). Invalid UTF-8
  // from ByteLevel becomes U+FFFD; ByteFallback's <0xXX> runs that are not UTF-8 become one
  // U+FFFD per byte token.
  std::string decode(std::vector<std::string> tokens) const;

 private:
  struct Step {
    enum class Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace } kind;
    std::shared_ptr<const Regex> pattern;  // Replace
    std::string text;                      // Replace: content; Strip / Metaspace: the character
    size_t start = 0, stop = 0;            // Strip
    bool prepend = false;                  // Metaspace: prepend_scheme is not "never"
  };
  void parse(const Json& d, const std::string& file, const std::string& path);
  std::vector<Step> steps_;
};

}  // namespace zt::text
