// NFC = canonical decomposition, canonical ordering, canonical composition (UAX #15), written here
// so that every output character carries the "change" HF's alignment-tracking NFC gives it:
// 0 = replaces one original character, +1 = inserted, -n = replaces one and removes n more.
#include "text/normalize.h"

#include <utf8proc.h>

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "text/bpe_json.h"
#include "text/unicode.h"

namespace zt::text {

namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;

// HF's NFC has Unicode 9.0 data: newer combining marks and decompositions are unknown to it (they
// act as plain starters), so they are ignored here too (unicode::hf_nfc_unknown).

// Canonical decomposition of one code point (recursive, Hangul included) into buf; returns length.
int decompose(char32_t c, utf8proc_int32_t* buf, int cap) {
  if (unicode::hf_nfc_unknown(c)) {
    buf[0] = static_cast<utf8proc_int32_t>(c);
    return 1;
  }
  utf8proc_int32_t bc = 0;
  auto n =
      utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buf, cap, UTF8PROC_DECOMPOSE, &bc);
  return n < 0 || n > cap ? -1 : static_cast<int>(n);
}

// Primary composite of (a, b), or nullopt (composition exclusions honoured: UTF8PROC_STABLE).
std::optional<char32_t> compose(char32_t a, char32_t b) {
  utf8proc_int32_t buf[2] = {static_cast<utf8proc_int32_t>(a), static_cast<utf8proc_int32_t>(b)};
  auto n = utf8proc_normalize_utf32(
      buf, 2, static_cast<utf8proc_option_t>(UTF8PROC_COMPOSE | UTF8PROC_STABLE));
  if (n == 1 && !unicode::hf_nfc_unknown(static_cast<char32_t>(buf[0]))) {
    return static_cast<char32_t>(buf[0]);
  }
  return std::nullopt;
}

int ccc(char32_t c) {
  if (unicode::hf_nfc_unknown(c)) return 0;
  return utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->combining_class;
}

struct Item {
  char32_t c;
  int ccc;
  int change;
};

}  // namespace

NfcNormalizer::NfcNormalizer() : maybe_unstable_((kMaxCodePoint + 1 + 63) / 64, 0) {
  auto set = [this](char32_t c) { maybe_unstable_[c >> 6] |= uint64_t{1} << (c & 63); };
  utf8proc_int32_t buf[16];
  for (char32_t c = 0x80; c <= kMaxCodePoint; ++c) {
    if ((c >= 0xD800 && c <= 0xDFFF) || unicode::hf_nfc_unknown(c)) continue;
    const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
    if (p->combining_class != 0) set(c);
    if (p->decomp_seqindex == UINT16_MAX || p->decomp_type != 0) continue;
    int n = decompose(c, buf, 16);
    if (n < 1) {
      set(c);
      continue;
    }
    for (int k = 1; k < n; ++k) set(static_cast<char32_t>(buf[k]));  // can be a composition's 2nd
    auto m = utf8proc_normalize_utf32(
        buf, n, static_cast<utf8proc_option_t>(UTF8PROC_COMPOSE | UTF8PROC_STABLE));
    if (m != 1 || static_cast<char32_t>(buf[0]) != c) set(c);  // NFC(c) != c
  }
  // Hangul vowel and trailing jamo compose algorithmically with what precedes them.
  for (char32_t c = 0x1161; c <= 0x1175; ++c) set(c);
  for (char32_t c = 0x11A8; c <= 0x11C2; ++c) set(c);
}

bool NfcNormalizer::is_stable(std::string_view s) const {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    i = unicode::skip_ascii(p, n, i);
    if (i >= n) break;
    char32_t c = unicode::next_code_point(s, i);
    if ((maybe_unstable_[c >> 6] >> (c & 63)) & 1) return false;
  }
  return true;
}

void NfcNormalizer::normalize(std::string_view s, uint32_t base, std::string& out,
                              std::vector<ByteSpan>& align) const {
  out.clear();
  align.clear();
  // Original characters and their byte spans.
  std::vector<ByteSpan> spans;
  std::vector<Item> items;
  utf8proc_int32_t buf[16];
  for (size_t i = 0; i < s.size();) {
    size_t b = i;
    char32_t c = unicode::next_code_point(s, i);
    spans.emplace_back(base + uint32_t(b), base + uint32_t(i));
    int n = decompose(c, buf, 16);
    if (n < 1) {
      buf[0] = static_cast<utf8proc_int32_t>(c);
      n = 1;
    }
    for (int k = 0; k < n; ++k) {
      char32_t d = static_cast<char32_t>(buf[k]);
      items.push_back({d, ccc(d), k == 0 ? 0 : 1});
    }
  }
  // Canonical ordering: stable sort of every run of non-starters by combining class.
  for (size_t i = 0; i < items.size();) {
    if (items[i].ccc == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < items.size() && items[j].ccc != 0) ++j;
    std::stable_sort(items.begin() + long(i), items.begin() + long(j),
                     [](const Item& a, const Item& b) { return a.ccc < b.ccc; });
    i = j;
  }
  // Canonical composition. `starter` is the composition candidate, `held` the non-starters after
  // it that did not compose (emitted after it), `last` the class of the last held one (-1: none).
  std::vector<Item> composed, held;
  std::optional<Item> starter;
  int last = -1;
  for (const Item& it : items) {
    if (!starter) {
      if (it.ccc != 0) {
        composed.push_back(it);
      } else {
        starter = it;
      }
      continue;
    }
    bool blocked = last >= 0 && last >= it.ccc;
    if (!blocked) {
      if (auto r = compose(starter->c, it.c)) {
        starter = Item{*r, 0, starter->change + it.change - 1};
        continue;
      }
    }
    if (it.ccc == 0) {
      composed.push_back(*starter);
      composed.insert(composed.end(), held.begin(), held.end());
      held.clear();
      starter = it;
      last = -1;
    } else {
      held.push_back(it);
      last = it.ccc;
    }
  }
  if (starter) composed.push_back(*starter);
  composed.insert(composed.end(), held.begin(), held.end());
  // Alignments, as NormalizedString::transform: walk the original characters in order.
  size_t cursor = 0;
  for (const Item& it : composed) {
    ByteSpan a;
    if (it.change > 0) {
      a = cursor == 0 ? ByteSpan{base, base} : spans[cursor - 1];
    } else {
      a = cursor < spans.size() ? spans[cursor]
                                : (spans.empty() ? ByteSpan{base, base} : spans.back());
      cursor += 1 + size_t(-it.change);
    }
    size_t before = out.size();
    unicode::append_utf8(out, it.c);
    align.insert(align.end(), out.size() - before, a);
  }
}

Normalizer Normalizer::from_json(const Json& n, const std::string& file, const std::string& path) {
  Normalizer out;
  out.parse(n, file, path);
  return out;
}

void Normalizer::parse(const Json& n, const std::string& file, const std::string& path) {
  using namespace json_fields;
  if (n.is_null()) return;
  std::string type = type_of(n, file, path);
  if (type == "Sequence") {
    const Json& list = get_array(n, "normalizers", file, path);
    for (size_t k = 0; k < list.size(); ++k) {
      parse(list[k], file, fmt::format("{}.normalizers[{}]", path, k));
    }
  } else if (type == "NFC") {
    if (!nfc_) nfc_ = std::make_shared<const NfcNormalizer>();
    steps_.push_back({Step::Kind::kNfc, {}, nullptr});
  } else if (type == "Prepend") {
    auto p = get_string(n, "prepend", file, path);
    if (!p) fail("{}: {}.prepend must be a string", file, path);
    steps_.push_back({Step::Kind::kPrepend, *p, nullptr});
  } else if (type == "Replace") {
    auto re = std::make_shared<const Regex>(pattern_field(n, file, path));
    auto content = get_string(n, "content", file, path);
    if (!content) fail("{}: {}.content must be a string", file, path);
    steps_.push_back({Step::Kind::kReplace, *content, std::move(re)});
  } else {
    fail("{}: {}.type '{}' is not supported (supported: NFC, Prepend, Replace, Sequence)", file,
         path, type);
  }
}

bool Normalizer::is_stable(std::string_view s, NormalizeScratch& sc) const {
  for (const Step& st : steps_) {
    switch (st.kind) {
      case Step::Kind::kNfc:
        if (!nfc_->is_stable(s)) return false;
        break;
      case Step::Kind::kPrepend:
        if (!s.empty() && !st.text.empty()) return false;
        break;
      case Step::Kind::kReplace:
        st.regex->find_all(s, sc.regex, sc.matches);
        if (!sc.matches.empty()) return false;
        break;
    }
  }
  return true;
}

void Normalizer::normalize(std::string_view s, uint32_t base, std::string& out,
                           std::vector<ByteSpan>& align, NormalizeScratch& sc) const {
  // Identity alignment: every byte maps to its character's range.
  out.assign(s);
  align.resize(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t b = i;
    unicode::next_code_point(s, i);
    for (size_t k = b; k < i; ++k) align[k] = {base + uint32_t(b), base + uint32_t(i)};
  }
  std::string& t = sc.text;
  std::vector<ByteSpan>& ta = sc.align;
  for (const Step& st : steps_) {
    t.clear();
    ta.clear();
    switch (st.kind) {
      case Step::Kind::kNfc: {
        if (nfc_->is_stable(out)) continue;
        std::vector<ByteSpan> inner;
        nfc_->normalize(out, 0, t, inner);
        // inner maps into `out`; compose with out's alignment.
        for (const auto& [a, b] : inner) {
          ta.push_back(b > a ? ByteSpan{align[a].first, align[b - 1].second}
                             : (a < align.size() ? ByteSpan{align[a].first, align[a].first}
                                                 : ByteSpan{base, base}));
        }
        break;
      }
      case Step::Kind::kPrepend: {
        if (out.empty() || st.text.empty()) continue;
        t = st.text;
        ta.assign(st.text.size(), align[0]);
        t += out;
        ta.insert(ta.end(), align.begin(), align.end());
        break;
      }
      case Step::Kind::kReplace: {
        st.regex->find_all(out, sc.regex, sc.matches);
        if (sc.matches.empty()) continue;
        uint32_t prev = 0;
        for (auto [a, b] : sc.matches) {
          t.append(out, prev, a - prev);
          ta.insert(ta.end(), align.begin() + prev, align.begin() + a);
          // The content takes the alignment of the match's last character (or, for an empty
          // match, of the character before it).
          ByteSpan span = b > a ? align[b - 1] : (a > 0 ? align[a - 1] : ByteSpan{base, base});
          t += st.text;
          ta.insert(ta.end(), st.text.size(), span);
          prev = b;
        }
        t.append(out, prev, std::string::npos);
        ta.insert(ta.end(), align.begin() + prev, align.end());
        break;
      }
    }
    out.swap(t);
    align.swap(ta);
  }
}

}  // namespace zt::text
