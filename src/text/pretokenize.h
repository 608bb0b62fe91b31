// Pre-tokenizers of HF `tokenizers`: Split (regex or literal, with the five delimiter behaviours
// and `invert`), ByteLevel (optional prefix space, optional GPT-2 regex) and Sequence for
// byte-level BPE; Metaspace for SentencePiece-style BPE. Regexes run on PCRE2 (JIT, UTF + UCP),
// translated so that `\s` means what it means in Oniguruma, which HF uses: the Unicode White_Space
// property (PCRE2's own `\s` adds U+180E).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "io/json.h"

namespace zt::text {

// Per-thread PCRE2 match state (match data, JIT stack). Not thread-safe: one per thread.
class RegexScratch {
 public:
  RegexScratch();
  ~RegexScratch();
  RegexScratch(const RegexScratch&) = delete;
  RegexScratch& operator=(const RegexScratch&) = delete;

 private:
  friend class Regex;
  void* match_data_ = nullptr;  // pcre2_match_data_8*
  void* match_ctx_ = nullptr;   // pcre2_match_context_8*
  void* jit_stack_ = nullptr;   // pcre2_jit_stack_8*
};

// A compiled pattern. Immutable after compile(); shareable between threads.
class Regex {
 public:
  // Compiles an Oniguruma-syntax pattern (or, with literal, a plain string). Throws zt::Error
  // "<where>: cannot compile regex '<pattern>': <PCRE2 message> at offset N".
  static Regex compile(std::string_view pattern, bool literal, std::string_view where);

  // Every match in `subject` as [begin, end) byte ranges, in order, with the iteration rules of
  // the Rust `onig` crate's find_iter (an empty match right after the previous match is skipped
  // and the search moves on by one character). `subject` must be valid UTF-8.
  void find_all(std::string_view subject, RegexScratch& scratch,
                std::vector<std::pair<uint32_t, uint32_t>>& out) const;

 private:
  std::shared_ptr<void> code_;  // pcre2_code_8
  bool jit_ = false;
};

// The compiled obj["pattern"] of a Split / Replace component: {"Regex": …} (Oniguruma syntax) or
// {"String": …} (a non-empty literal). Throws zt::Error naming file and path otherwise.
Regex pattern_field(const Json& obj, const std::string& file, const std::string& path);

// Rewrites an Oniguruma pattern for PCRE2 with HF's Unicode data: `\s` / `\S` become explicit
// White_Space classes (see above), `\p{L}` / `\p{N}` (and `\pL`, `\P{L}`, ...) gain the letters
// and numbers of Unicode 15-16 that HF's Oniguruma knows and PCRE2 10.42 does not.
std::string translate_onig_pattern(std::string_view pattern);

// One pre-tokenized word: bytes [begin, end) of the string being split, plus a virtual leading
// space added by ByteLevel's add_prefix_space (it aligns with the word's first character).
struct Word {
  uint32_t begin;
  uint32_t end;
  bool prefix_space;
};

// HF SplitDelimiterBehavior.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct SplitStep {
  Regex regex;
  SplitBehavior behavior;
  bool invert;
};
struct ByteLevelStep {
  bool add_prefix_space;
  bool use_regex;
};

// HF's Metaspace (SentencePiece-style): every ' ' becomes `replacement` (U+2581 "▁"), a
// replacement is prepended to a piece not starting with one (always; first: only to the piece at
// the start of the input; never), and with `split` the piece is split before every replacement
// (MergedWithNext).
struct MetaspaceStep {
  enum class Prepend { kAlways, kNever, kFirst };
  std::string replacement;
  Prepend prepend;
  bool split;
};

// Scratch buffers of PreTokenizer::run (per thread).
struct PreTokenizeScratch {
  RegexScratch regex;
  std::vector<std::pair<uint32_t, uint32_t>> matches;
  std::vector<std::pair<std::pair<uint32_t, uint32_t>, bool>> splits;
  std::vector<Word> next;
  std::string prefixed;
};

// Output of PreTokenizer::run_metaspace: the transformed text, per byte of it the [first, last]
// byte of the input character it comes from, and the words as ranges of the text.
struct MetaspaceText {
  std::string text;
  std::vector<std::pair<uint32_t, uint32_t>> source;
  std::vector<Word> words;
};

// The pre-tokenizer pipeline: steps applied in order; ByteLevel (at most one) must come last.
class PreTokenizer {
 public:
  // Appends the steps of a tokenizer.json "pre_tokenizer" (Split, ByteLevel, Sequence; null adds
  // none). Throws zt::Error naming file and path for other types or bad fields
  // ("pre_tokenizer.pretokenizers[0].type 'Whitespace' is not supported").
  void add_from_json(const Json& p, const std::string& file, const std::string& path);
  // Appends a step. Throws zt::Error naming `where` for a step after ByteLevel.
  void add_split(SplitStep step, std::string_view where);
  void add_byte_level(ByteLevelStep step, std::string_view where);

  // True when a ByteLevel step maps words to the byte alphabet (the BPE then works on bytes).
  bool byte_level() const { return byte_level_; }
  // The Metaspace step, when the pre-tokenizer is one (it is then the only step); else null.
  const MetaspaceStep* metaspace() const { return metaspace_ ? &*metaspace_ : nullptr; }

  // Metaspace on s[begin, end) (metaspace() must be set); `input_start`: the piece starts at byte
  // 0 of the input (prepend scheme "first").
  void run_metaspace(std::string_view s, uint32_t begin, uint32_t end, bool input_start,
                     PreTokenizeScratch& scratch, MetaspaceText& out) const;

  // Splits s[begin, end) into words (appended to `words`, in order, never empty).
  void run(std::string_view s, uint32_t begin, uint32_t end, PreTokenizeScratch& scratch,
           std::vector<Word>& words) const;

 private:
  void apply_split(const SplitStep& st, std::string_view s, const Word& w, PreTokenizeScratch& sc,
                   std::vector<Word>& out) const;
  void apply_byte_level(const ByteLevelStep& st, std::string_view s, const Word& w,
                        PreTokenizeScratch& sc, std::vector<Word>& out) const;

  std::vector<std::variant<SplitStep, ByteLevelStep>> steps_;
  std::shared_ptr<Regex> gpt2_;  // ByteLevel's own regex, compiled when use_regex
  std::optional<MetaspaceStep> metaspace_;
  std::optional<SplitStep> metaspace_split_;  // literal replacement, MergedWithNext
  bool byte_level_ = false;
};

}  // namespace zt::text
