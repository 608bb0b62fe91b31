// Duplicate mapping keys in the YAML and JSON files zerotune reads (hydra config, accelerate config,
// DeepSpeed JSON, config.json, tokenizer.json, tokenizer_config.json, safetensors index) are errors.
// yaml-cpp keeps both entries of a repeated key and nlohmann keeps the last one, so without these
// checks a merge leftover like `learning_rate: 1e-3` … `learning_rate: 0.5` silently picks one;
// OmegaConf (hydra) refuses such a file, and so does zerotune — naming the file, the line and the key.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/json.h"
#include "io/json_check.h"

namespace zt {

// Walks `node` depth first in file order; throws zt::Error
//   "ORIGIN:LINE: duplicate key 'a.b' (first given at line L)"
// at the second occurrence of a mapping key (scalar keys compared as written).
void check_unique_yaml_keys(const YAML::Node& node, const std::string& origin);

// Parses JSON `text` into a Json, refusing repeated object keys with the same message as above
// (LINE 1-based, the line of the second occurrence). A syntax error throws
//   "ORIGIN: invalid JSON: <nlohmann's reason, which names line and column>";
// a raw NUL byte or nesting deeper than kMaxJsonDepth throws as check_json_text says.
Json parse_json_unique_keys(std::string_view text, const std::string& origin);

// Bookkeeping for a JSON parser (DOM callback or SAX handler) that must refuse repeated keys: the
// caller reports containers opening and closing, primitive values, and keys with the byte offset
// the parser had reached when it reported the key (just past the key's closing quote).
class JsonKeyTracker {
 public:
  // `text` must outlive the tracker (line numbers are counted in it only when a duplicate is
  // found). Messages read "ORIGIN:LINE: PREFIXduplicate key …", LINE counted from `first_line` at
  // the start of `text` (a JSON Lines row passes its line and "row R: "). Runs check_json_text
  // (io/json_check.h) on `text`: a raw NUL byte or nesting deeper than kMaxJsonDepth throws, so no
  // parser fed by this tracker drops the rest of the text or builds a value too deep to copy.
  JsonKeyTracker(std::string_view text, std::string origin, size_t first_line = 1,
                 std::string prefix = {});

  void open(bool is_array);  // '{' (false) or '[' (true)
  void close();  // '}' or ']'
  void value();  // a primitive value (counts array elements for the key path)
  // Throws zt::Error naming origin, line, dotted key path and the first line when `key` repeats in
  // its object. Keys are kept in one buffer per object with an open-addressing index (a
  // tokenizer.json vocab has ~150k keys; a node per key would triple the parse time).
  void key(std::string_view key, size_t offset);

  // Line of byte `offset` of the text (first_line at offset 0).
  size_t line_of(size_t offset) const;

  // Throws zt::Error "ORIGIN:LINE: PREFIXwhat", LINE that of byte `offset` of the text.
  [[noreturn]] void fail_at(size_t offset, std::string_view what) const;

 private:
  struct KeyRef {
    uint32_t at, len;  // in Frame::blob
    size_t offset;     // in the text
  };
  struct Frame {
    bool is_array = false;
    int64_t index = -1;            // arrays: current element
    std::string blob;              // objects: the keys, concatenated
    std::vector<KeyRef> keys;      // in file order
    std::vector<uint32_t> table;   // open addressing: 0 = empty, else 1 + index into keys
    std::string_view name(const KeyRef& k) const { return std::string_view(blob).substr(k.at, k.len); }
  };
  void insert(Frame& f, uint32_t index);
  void element();  // a new element starts in the current container
  std::string path_to(std::string_view key) const;

  std::string_view text_;
  std::string origin_;
  size_t first_line_;
  std::string prefix_;
  std::vector<Frame> stack_;
};

// Json::parse of `text` with every parse event fed to `keys` (built on the same text): refuses
// repeated keys (as the tracker does); a syntax error throws Json::parse_error; a number beyond a
// double (`1e999`) throws zt::Error "ORIGIN:LINE: PREFIXinvalid JSON: number overflow parsing
// '1e999' …" (pyarrow's JSON reader, which HF datasets uses, refuses it too).
Json parse_json_tracked(std::string_view text, JsonKeyTracker& keys);

// A char iterator over a text that publishes how far it has been advanced, so a parser's callback
// can learn the offset it has reached (nlohmann reads its input through such an iterator pair).
class OffsetIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  OffsetIterator(const char* p, const char* base, size_t* reached) : p_(p), base_(base), reached_(reached) {}
  reference operator*() const { return *p_; }
  OffsetIterator& operator++() {
    ++p_;
    *reached_ = static_cast<size_t>(p_ - base_);
    return *this;
  }
  OffsetIterator operator++(int) {
    OffsetIterator t = *this;
    ++*this;
    return t;
  }
  bool operator==(const OffsetIterator& o) const { return p_ == o.p_; }
  bool operator!=(const OffsetIterator& o) const { return p_ != o.p_; }

 private:
  const char* p_;
  const char* base_;
  size_t* reached_;
};

}  // namespace zt
