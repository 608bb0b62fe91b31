// Added tokens (tokenizer.json "added_tokens"), matched in the text before pre-tokenisation the way
// HF `AddedVocabulary::find_matches` does: leftmost-longest non-overlapping matches of the token
// contents, then per token: single_word (no word character, Rust regex `\w`, touching either side),
// lstrip (take the whitespace run before it, not past the previous match), rstrip (take the
// whitespace run after it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zt::text {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

// One part of a split text: [begin, end) bytes, and the added token's id (or -1 for plain text).
struct AddedSplit {
  uint32_t begin;
  uint32_t end;
  int32_t id;
};

// Matches a fixed set of added tokens (a byte trie). Immutable after construction; thread-safe.
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `patterns[k]` is the text to find for tokens[k] (its content, or its normalized content).
  AddedTokenMatcher(std::vector<AddedToken> tokens, const std::vector<std::string>& patterns);

  bool empty() const { return tokens_.empty(); }

  // Splits s into plain parts and added-token parts covering it in order (plain parts are never
  // empty; an empty s gives nothing). Results are appended to out.
  void split(std::string_view s, std::vector<AddedSplit>& out) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> next;  // sorted by byte
    int32_t token = -1;                                   // index into tokens_ when a pattern ends
  };
  int32_t child(int32_t node, unsigned char b) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
};

}  // namespace zt::text
