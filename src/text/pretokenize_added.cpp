#include "text/pretokenize_added.h"

#include <algorithm>

#include "text/unicode.h"

namespace zt::text {

namespace {

// Code point that ends at byte `end` of s (s valid UTF-8, end > 0).
char32_t code_point_before(std::string_view s, size_t end) {
  size_t b = unicode::char_begin(s, end - 1);
  return unicode::next_code_point(s, b);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens,
                                     const std::vector<std::string>& patterns)
    : tokens_(std::move(tokens)) {
  nodes_.emplace_back();
  for (size_t k = 0; k < tokens_.size(); ++k) {
    const std::string& p = patterns[k];
    if (p.empty()) continue;
    int32_t node = 0;
    for (unsigned char b : p) {
      int32_t nx = child(node, b);
      if (nx < 0) {
        nx = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        auto& next = nodes_[node].next;
        next.insert(std::upper_bound(next.begin(), next.end(), std::make_pair(b, int32_t(-1))),
                    {b, nx});
      }
      node = nx;
    }
    if (nodes_[node].token < 0) nodes_[node].token = static_cast<int32_t>(k);  // first one wins
    first_byte_[static_cast<unsigned char>(p[0])] = true;
  }
}

int32_t AddedTokenMatcher::child(int32_t node, unsigned char b) const {
  for (const auto& [c, nx] : nodes_[node].next) {
    if (c == b) return nx;
    if (c > b) break;
  }
  return -1;
}

void AddedTokenMatcher::split(std::string_view s, std::vector<AddedSplit>& out) const {
  const size_t n = s.size();
  uint32_t start_offset = 0;
  size_t i = 0;
  while (i < n) {
    if (!first_byte_[static_cast<unsigned char>(s[i])]) {
      ++i;
      continue;
    }
    // Longest pattern starting at i.
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t j = i; j < n; ++j) {
      node = child(node, static_cast<unsigned char>(s[j]));
      if (node < 0) break;
      if (nodes_[node].token >= 0) {
        best = nodes_[node].token;
        best_end = j + 1;
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    const size_t ms = i, me = best_end;
    i = me;  // matches never overlap, whatever happens to this one below
    const AddedToken& tok = tokens_[best];
    if (tok.single_word) {
      bool start_ok = ms == 0 || !unicode::is_word_char(code_point_before(s, ms));
      size_t k = me;
      bool stop_ok = me == n || !unicode::is_word_char(unicode::next_code_point(s, k));
      if (!start_ok || !stop_ok) continue;
    }
    size_t start = ms, stop = me;
    if (tok.lstrip) {
      size_t ws = ms;
      while (ws > 0 && unicode::is_white_space(code_point_before(s, ws))) {
        ws = unicode::char_begin(s, ws - 1);
      }
      start = std::max<size_t>(ws, start_offset);
    }
    if (tok.rstrip) {
      while (stop < n) {
        size_t k = stop;
        if (!unicode::is_white_space(unicode::next_code_point(s, k))) break;
        stop = k;
      }
    }
    if (start_offset < start) out.push_back({start_offset, uint32_t(start), -1});
    out.push_back({uint32_t(start), uint32_t(stop), tok.id});
    start_offset = uint32_t(stop);
  }
  if (start_offset < n) out.push_back({start_offset, uint32_t(n), -1});
}

}  // namespace zt::text
