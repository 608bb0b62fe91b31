#include "io/yaml_load.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <array>
#include <map>
#include <sstream>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/unique_keys.h"

namespace zt {
namespace {

// Event-stream pass before the tree is built: counts documents, nesting, and the size every
// anchored node will have once its aliases are expanded (yaml-cpp's tree shares aliased nodes,
// but every reader after it walks them once per alias).
class Scan : public YAML::EventHandler {
 public:
  explicit Scan(const std::string& origin) : origin_(origin) {}

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ > 1)
      fail(
          "{}:{}: a second YAML document starts here; zerotune reads one document per file, as "
          "OmegaConf "
          "does (\"expected a single document in the stream\")",
          origin_, mark.line + 1);
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t anchor) override { leaf(anchor); }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                const std::string&) override {
    leaf(anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto it = size_.find(anchor);
    if (it == size_.end())
      fail(
          "{}:{}: an alias inside the node it refers to (a recursive structure); zerotune does not "
          "read it",
          origin_, mark.line + 1);
    expanded_ += it->second;
    if (expanded_ > kMaxYamlAliasNodes)
      fail(
          "{}:{}: YAML aliases expand to more than {} nodes (aliases of aliases, as in a \"billion "
          "laughs\" "
          "file); OmegaConf refuses such a file too",
          origin_, mark.line + 1, kMaxYamlAliasNodes);
    add(it->second);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Open {
    YAML::anchor_t anchor;
    uint64_t size;  // nodes so far, this one included, aliases expanded
  };
  void add(uint64_t n) {
    if (!open_.empty()) open_.back().size += n;
  }
  void leaf(YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor) size_[anchor] = 1;
    add(1);
  }
  void open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (static_cast<int>(open_.size()) >= kMaxYamlDepth)
      fail("{}:{}: nesting depth exceeds {}", origin_, mark.line + 1, kMaxYamlDepth);
    open_.push_back({anchor, 1});
  }
  void close() {
    const Open o = open_.back();
    open_.pop_back();
    if (o.anchor != YAML::NullAnchor) size_[o.anchor] = o.size;
    add(o.size);
  }

  const std::string& origin_;
  int documents_ = 0;
  uint64_t expanded_ = 0;
  std::vector<Open> open_;
  std::unordered_map<YAML::anchor_t, uint64_t> size_;  // anchored nodes that are complete
};

bool is_merge_key(const YAML::Node& key) {
  return key.IsScalar() && key.Scalar() == "<<" &&
         (key.Tag() == "?" || key.Tag() == "tag:yaml.org,2002:merge");
}

const char* kind(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "null";
  }
}

// Resolves the merge keys of `node` and everything below it, in place. (yaml-cpp's Node::operator=
// re-points the node it is applied to, so entries are only ever copy-constructed here.)
void resolve_merges(YAML::Node node, const std::string& origin) {
  if (node.IsSequence()) {
    for (YAML::Node child : node) resolve_merges(child, origin);
    return;
  }
  if (!node.IsMap()) return;
  bool has_merge = false;
  for (const auto& kv : node) {
    resolve_merges(kv.second, origin);  // a merged mapping is flattened before it is merged
    has_merge = has_merge || is_merge_key(kv.first);
  }
  if (!has_merge) return;
  std::vector<std::pair<YAML::Node, YAML::Node>> merged, own;
  for (const auto& kv : node) {
    if (!is_merge_key(kv.first)) {
      own.emplace_back(kv.first, kv.second);
      continue;
    }
    const YAML::Node& v = kv.second;
    const int line = kv.first.Mark().line + 1;
    std::vector<YAML::Node> sources;
    if (v.IsMap()) {
      sources.push_back(v);
    } else if (v.IsSequence()) {
      for (const YAML::Node& m : v) {
        if (!m.IsMap())
          fail(
              "{}:{}: the merge key '<<' takes a mapping or a list of mappings; this list holds {}",
              origin, line, kind(m));
        sources.push_back(m);
      }
    } else {
      fail(
          "{}:{}: the merge key '<<' takes a mapping or a list of mappings (e.g. <<: *base), got "
          "{}",
          origin, line, kind(v));
    }
    for (size_t i = sources.size(); i-- > 0;)
      for (const auto& e : sources[i]) merged.emplace_back(e.first, e.second);
  }
  merged.insert(merged.end(), own.begin(), own.end());
  // The last entry of a key wins; the key stays where it first appeared.
  std::vector<size_t>
      winner;  // per distinct key, in order of first appearance: the entry that wins
  std::map<std::string, size_t> winner_of;  // key -> its slot in `winner`
  for (size_t i = 0; i < merged.size(); ++i) {
    const YAML::Node& k = merged[i].first;
    if (k.IsScalar()) {
      auto [it, fresh] = winner_of.emplace(k.Scalar(), winner.size());
      if (!fresh) {
        winner[it->second] = i;
        continue;
      }
    }
    winner.push_back(i);
  }
  std::vector<YAML::Node> keys;
  for (const auto& kv : node) keys.push_back(kv.first);
  for (const YAML::Node& k : keys) node.remove(k);
  for (size_t w : winner) node.force_insert(merged[w].first, merged[w].second);
}

// The 1-based line and column (in bytes) of byte `at` of `text`, lines ending at '\n'.
std::pair<size_t, size_t> line_and_column(std::string_view text, size_t at) {
  const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + at, '\n'));
  const size_t line_start = at == 0 ? std::string_view::npos : text.rfind('\n', at - 1);
  return {line, line_start == std::string_view::npos ? at + 1 : at - line_start};
}

// Throws for the first NEL, U+2028 or U+2029 of `text` (io/yaml_load.h says why).
void refuse_yaml11_line_breaks(std::string_view text, const std::string& origin) {
  struct Break {
    std::string_view utf8, name, escape;
  };
  static constexpr std::array<Break, 3> kBreaks = {
      {{"\xC2\x85", "U+0085 (NEXT LINE)", "\\x85"},
       {"\xE2\x80\xA8", "U+2028 (LINE SEPARATOR)", "\\u2028"},
       {"\xE2\x80\xA9", "U+2029 (PARAGRAPH SEPARATOR)", "\\u2029"}}};
  size_t first = std::string_view::npos;
  const Break* found = nullptr;
  for (const Break& b : kBreaks) {
    const size_t at = text.find(b.utf8);
    if (at < first) first = at, found = &b;
  }
  if (found == nullptr) return;
  const auto [line, column] = line_and_column(text, first);
  fail(
      "{}:{}:{}: character {} is a line break to PyYAML (YAML 1.1, which OmegaConf and accelerate "
      "read this file with) and not to zerotune's YAML reader, so the two read different values; "
      "remove it, or write it as the escape {} inside double quotes",
      origin, line, column, found->name, found->escape);
}

}  // namespace

int64_t first_invalid_utf8_byte(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char b = p[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    // The sequence length and the range its second byte must lie in (RFC 3629's table).
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;  // no overlong forms
      if (b == 0xED) hi = 0x9F;  // no surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;  // no overlong forms
      if (b == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
      return static_cast<int64_t>(i);
    }
    if (i + len > n || p[i + 1] < lo || p[i + 1] > hi) return static_cast<int64_t>(i);
    for (size_t k = 2; k < len; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return static_cast<int64_t>(i);
    i += len;
  }
  return -1;
}

YAML::Node load_yaml(const std::string& text, const std::string& origin, bool json, bool lenient) {
  if (const int64_t bad = first_invalid_utf8_byte(text); bad >= 0) {
    const size_t at = static_cast<size_t>(bad);
    const auto [line, col] = line_and_column(text, at);
    fail("{}:{}:{}: byte 0x{:02X} is not UTF-8 (byte {} of the text); YAML must be UTF-8 text",
         origin, line, col, static_cast<unsigned char>(text[at]), at);
  }
  if (!json && !lenient) refuse_yaml11_line_breaks(text, origin);
  {
    std::istringstream in(text);
    YAML::Parser parser(in);
    Scan scan(origin);
    while (parser.HandleNextDocument(scan)) {
    }
  }
  YAML::Node root = YAML::Load(text);
  if (!lenient) check_unique_yaml_keys(root, origin);
  resolve_merges(root, origin);
  return root;
}

}  // namespace zt
