#include "text/bpe_json.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/unique_keys.h"

namespace zt::text {

namespace {

// nlohmann SAX handler: DOM for the document, vectors for model.vocab / model.merges; every
// event also goes to `keys`, which refuses a key repeated in an object (vocab included).
class Handler {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  Handler(TokenizerJson& out, std::string file, JsonKeyTracker& keys, const size_t& reached)
      : out_(out), file_(std::move(file)), keys_seen_(keys), reached_(reached) {}

  bool null() {
    keys_seen_.value();
    return value(Json(nullptr), "null");
  }
  bool boolean(bool v) {
    keys_seen_.value();
    return value(Json(v), "a boolean");
  }
  bool number_integer(number_integer_t v) {
    keys_seen_.value();
    if (mode_ == Mode::kVocab) return vocab_id(v);
    return value(Json(v), "a number");
  }
  bool number_unsigned(number_unsigned_t v) {
    keys_seen_.value();
    if (mode_ == Mode::kVocab) {
      return vocab_id(v > uint64_t(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v));
    }
    return value(Json(v), "a number");
  }
  bool number_float(number_float_t v, const string_t&) {
    keys_seen_.value();
    return value(Json(v), "a float");
  }
  bool binary(binary_t&) { return value(Json(nullptr), "binary"); }
  bool string(string_t& v) {
    keys_seen_.value();
    if (mode_ == Mode::kMerges) {
      size_t sp = v.find(' ');
      if (sp == std::string::npos || v.find(' ', sp + 1) != std::string::npos) bad_merge();
      auto& b = out_.bpe.merge_bytes;
      auto at = uint32_t(b.size());
      b += v;
      out_.bpe.merges.push_back(
          {at, uint32_t(sp), at + uint32_t(sp) + 1, uint32_t(v.size() - sp - 1)});
      return true;
    }
    if (mode_ == Mode::kMergePair) {
      if (pair_count_ < 2) {
        pair_[pair_count_] = {uint32_t(out_.bpe.merge_bytes.size()), uint32_t(v.size())};
        out_.bpe.merge_bytes += v;
      }
      ++pair_count_;
      return true;
    }
    return value(Json(std::move(v)), "a string");
  }
  bool key(string_t& k) {
    keys_seen_.key(k, reached_);
    if (mode_ == Mode::kVocab) {
      pending_ = {uint32_t(out_.bpe.vocab_bytes.size()), uint32_t(k.size())};
      out_.bpe.vocab_bytes += k;
    } else {
      keys_.back() = std::move(k);
    }
    return true;
  }
  bool start_object(std::size_t) {
    keys_seen_.open(false);
    if (mode_ == Mode::kDom && at_model_child("vocab")) {
      mode_ = Mode::kVocab;
      out_.has_vocab = true;
      return true;
    }
    if (mode_ != Mode::kDom) return unexpected("an object");
    open(Json::object());
    return true;
  }
  bool end_object() {
    keys_seen_.close();
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kDom;
      return true;
    }
    close();
    return true;
  }
  bool start_array(std::size_t) {
    keys_seen_.open(true);
    if (mode_ == Mode::kDom && at_model_child("merges")) {
      mode_ = Mode::kMerges;
      out_.has_merges = true;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_count_ = 0;
      return true;
    }
    if (mode_ != Mode::kDom) return unexpected("an array");
    open(Json::array());
    return true;
  }
  bool end_array() {
    keys_seen_.close();
    if (mode_ == Mode::kMergePair) {
      if (pair_count_ != 2) bad_merge();
      out_.bpe.merges.push_back({pair_[0].first, pair_[0].second, pair_[1].first, pair_[1].second});
      mode_ = Mode::kMerges;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kDom;
      return true;
    }
    close();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 2: ...".
    std::string what = e.what();
    auto p = what.find("] ");
    fail("{}: invalid JSON at byte {}: {}", file_, position,
         p == std::string::npos ? what : what.substr(p + 2));
  }

 private:
  enum class Mode { kDom, kVocab, kMerges, kMergePair };

  // True when the container about to open is root["model"][name].
  bool at_model_child(const char* name) const {
    return stack_.size() == 2 && stack_[0]->is_object() && keys_[0] == "model" &&
           stack_[1]->is_object() && keys_[1] == name;
  }
  Json* insert(Json v) {
    if (stack_.empty()) {
      out_.rest = std::move(v);
      return &out_.rest;
    }
    Json& top = *stack_.back();
    if (top.is_object()) {
      Json& slot = top[keys_.back()];
      slot = std::move(v);
      return &slot;
    }
    top.push_back(std::move(v));
    return &top.back();
  }
  void open(Json v) {
    stack_.push_back(insert(std::move(v)));
    keys_.emplace_back();
  }
  void close() {
    stack_.pop_back();
    keys_.pop_back();
  }
  bool value(Json v, const char* kind) {
    if (mode_ != Mode::kDom) return unexpected(kind);
    insert(std::move(v));
    return true;
  }
  bool vocab_id(int64_t id) {
    out_.bpe.vocab.push_back({pending_.first, pending_.second, id});
    return true;
  }
  bool unexpected(const char* kind) {
    if (mode_ == Mode::kVocab) {
      fail("{}: model.vocab['{}']: expected an integer id, got {}", file_,
           out_.bpe.vocab_bytes.substr(pending_.first, pending_.second), kind);
    }
    bad_merge();
  }
  [[noreturn]] void bad_merge() {
    fail("{}: model.merges[{}]: expected \"a b\" or [\"a\", \"b\"]", file_, out_.bpe.merges.size());
  }

  TokenizerJson& out_;
  std::string file_;
  JsonKeyTracker& keys_seen_;
  const size_t& reached_;  // bytes of the text the parser has read
  std::vector<Json*> stack_;
  std::vector<std::string> keys_;
  Mode mode_ = Mode::kDom;
  std::pair<uint32_t, uint32_t> pending_{0, 0};  // vocab key being read, in vocab_bytes
  std::pair<uint32_t, uint32_t> pair_[2];        // merge pair being read, in merge_bytes
  size_t pair_count_ = 0;
};

}  // namespace

TokenizerJson read_tokenizer_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open tokenizer file '{}': {}", path.string(), std::strerror(errno));
  std::string text;
  in.seekg(0, std::ios::end);
  auto size = in.tellg();
  if (size > 0) {
    text.resize(static_cast<size_t>(size));
    in.seekg(0);
    in.read(text.data(), size);
  }
  if (!in) fail("cannot read tokenizer file '{}'", path.string());
  TokenizerJson out;
  JsonKeyTracker keys(text, path.string());
  size_t reached = 0;
  Handler h(out, path.string(), keys, reached);
  const char* base = text.data();
  Json::sax_parse(OffsetIterator(base, base, &reached),
                  OffsetIterator(base + text.size(), base, &reached), &h);
  if (!out.rest.is_object()) fail("{}: expected a JSON object at the top level", path.string());
  return out;
}

namespace json_fields {

const Json* member(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

bool get_bool(const Json& obj, const char* key, bool dflt, const std::string& file,
              const std::string& path) {
  const Json* v = member(obj, key);
  if (!v || v->is_null()) return dflt;
  if (!v->is_boolean()) fail("{}: {}.{} must be true or false, got {}", file, path, key, v->dump());
  return v->get<bool>();
}

std::optional<std::string> get_string(const Json& obj, const char* key, const std::string& file,
                                      const std::string& path) {
  const Json* v = member(obj, key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_string()) fail("{}: {}.{} must be a string, got {}", file, path, key, v->dump());
  return v->get<std::string>();
}

std::string type_of(const Json& obj, const std::string& file, const std::string& path) {
  if (!obj.is_object()) fail("{}: {} must be an object or null, got {}", file, path, obj.dump());
  auto t = get_string(obj, "type", file, path);
  if (!t) fail("{}: {}.type is missing", file, path);
  return *t;
}

const Json& get_array(const Json& obj, const char* key, const std::string& file,
                      const std::string& path) {
  const Json* v = member(obj, key);
  if (!v || !v->is_array()) fail("{}: {}.{} must be an array", file, path, key);
  return *v;
}

}  // namespace json_fields

}  // namespace zt::text
