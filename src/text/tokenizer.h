// HF `tokenizer.json` BPE tokenizer, byte-level (Qwen2/2.5/3, Llama 3, OLMo 2, SmolLM3, Phi-4) or
// SentencePiece-style (byte_fallback with Metaspace or Prepend/Replace normalizers: Llama 2,
// Mistral, Gemma, Phi-3): normalizer, pre-tokenizer, BPE model, added tokens, post-processor and
// decoder, reproducing the `tokenizers` library's ids exactly. Other model types (WordPiece,
// Unigram, …) are rejected.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zt::text {

// Ids of one text plus, per token, the [begin, end) byte range of the input it came from.
struct Encoding {
  std::vector<int32_t> ids;
  std::vector<std::pair<uint32_t, uint32_t>> offsets;  // bytes into the original input
};

class Tokenizer {
 public:
  // Parses a tokenizer.json. Throws zt::Error naming the file and the offending field for a
  // malformed file or an unsupported component type ("model.type 'WordPiece' is not supported"),
  // and for an added_tokens entry whose id is not the one HF `tokenizers` gives it (a content of
  // model.vocab or of an earlier entry with another id, an id of another token, a gap), naming the
  // entry, its content and both ids.
  static Tokenizer load(const std::filesystem::path& tokenizer_json);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids of `text` (UTF-8). Added/special tokens in the text are recognised; with
  // add_special_tokens the post-processor's tokens (e.g. Llama-3's BOS) are added, as HF's
  // `tokenizer(text)` does; without, as `tokenizer(text, add_special_tokens=False)`.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  Encoding encode_with_offsets(std::string_view text, bool add_special_tokens = false) const;
  // Encodes many texts on `num_threads` threads (0 = all cores); result[i] = encode(texts[i]).
  std::vector<std::vector<int32_t>> encode_batch(std::span<const std::string> texts,
                                                 int num_threads = 0,
                                                 bool add_special_tokens = false) const;
  // Inverse of encode (the file's decoder chain); invalid UTF-8 becomes U+FFFD as HF does.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // Token string (vocab form, e.g. "Ġthe") of an id; throws zt::Error when out of range.
  std::string id_to_token(int32_t id) const;
  // One past the largest id, added tokens included.
  int32_t vocab_size() const;

  // Registers `content` as an added special token (special, normalized false, no strip or
  // single_word), as transformers does for a special token of tokenizer_config.json that
  // tokenizer.json's added_tokens lack: its vocabulary id when the BPE vocabulary has that token,
  // else the next id (vocab_size()). An existing added token is left as it is. Not thread-safe:
  // call before encoding. Throws zt::Error for empty or non-UTF-8 content.
  struct AddResult {
    int32_t id = -1;
    bool added = false;   // false: it already was an added token
    bool new_id = false;  // the id is past the vocabulary (vocab_size() grew by one)
  };
  AddResult add_special_token(std::string_view content);

  // Replaces tokenizer.json's post-processor with the single-sequence template
  // `[bos] $A [eos]` (each part only when given): what transformers' LlamaTokenizerFast /
  // GemmaTokenizerFast / … `update_post_processor` installs from tokenizer_config.json's
  // add_bos_token / add_eos_token. Affects encode(…, add_special_tokens = true) only. The ids must
  // be tokens of this tokenizer (zt::Error otherwise).
  void set_special_tokens_template(std::optional<int32_t> bos, std::optional<int32_t> eos);

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace zt::text
