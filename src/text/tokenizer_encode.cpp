// Tokenizer encoding: one text, with or without byte offsets, or a batch of texts over OpenMP
// threads, through the pipeline described in tokenizer.cpp (added tokens, normalizer,
// pre-tokenizer, BPE model, post-processors).
#include <omp.h>

#include <algorithm>
#include <exception>
#include <mutex>
#include <variant>

#include "core/error.h"
#include "text/tokenizer.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

namespace zt::text {

using namespace tokenizer_detail;

// ---- encoding -------------------------------------------------------------------------------

template <bool kOffsets>
void Tokenizer::Impl::encode_into(std::string_view text, bool add_special, Context& c,
                                  std::vector<int32_t>& ids, std::vector<ByteSpan>* offs) const {
  if (text.size() >= UINT32_MAX) fail("tokenizer: text of {} bytes is too long", text.size());
  if (auto bad = unicode::find_invalid_utf8(text)) {
    fail("tokenizer: text is not valid UTF-8 (byte {} of {})", *bad, text.size());
  }
  c.outer.clear();
  if constexpr (kOffsets) c.matched.assign(ids.size(), false);
  if (raw_matcher.empty()) {
    if (!text.empty()) c.outer.push_back({0, uint32_t(text.size()), -1});
  } else {
    raw_matcher.split(text, c.outer);
  }
  for (const AddedSplit& sp : c.outer) {
    if (sp.id >= 0) {
      ids.push_back(sp.id);
      if constexpr (kOffsets) {
        offs->emplace_back(sp.begin, sp.end);
        c.matched.push_back(true);
      }
    } else {
      encode_segment<kOffsets>(text, sp.begin, sp.end, c, ids, offs);
    }
  }
  post_process<kOffsets>(add_special, text, c, ids, offs);
}

template <bool kOffsets>
void Tokenizer::Impl::encode_segment(std::string_view text, uint32_t a, uint32_t b, Context& c,
                                     std::vector<int32_t>& ids, std::vector<ByteSpan>* offs) const {
  std::string_view seg = text.substr(a, b - a);
  const bool identity = normalizer.empty() || normalizer.is_stable(seg, c.norm_scratch);
  std::string_view view = seg;
  if (!identity) {
    normalizer.normalize(seg, a, c.norm, c.align, c.norm_scratch);
    view = c.norm;
  }
  // Original byte range of normalized bytes [p0, p1] (inclusive): whole characters.
  auto original = [&](uint32_t p0, uint32_t p1) -> ByteSpan {
    if (identity) {
      return {a + uint32_t(unicode::char_begin(view, p0)),
              a + uint32_t(unicode::char_end(view, p1))};
    }
    return {c.align[p0].first, c.align[p1].second};
  };
  c.inner.clear();
  if (norm_matcher.empty()) {
    if (!view.empty()) c.inner.push_back({0, uint32_t(view.size()), -1});
  } else {
    norm_matcher.split(view, c.inner);
  }
  for (const AddedSplit& sp : c.inner) {
    if (sp.id >= 0) {
      ids.push_back(sp.id);
      if constexpr (kOffsets) {
        offs->push_back(original(sp.begin, sp.end - 1));
        c.matched.push_back(true);
      }
      continue;
    }
    if (pre.metaspace()) {
      // SentencePiece-style: words of the Metaspace text; offsets go back through its sources.
      const bool input_start = original(sp.begin, sp.begin).first == 0;
      pre.run_metaspace(view, sp.begin, sp.end, input_start, c.pre, c.meta);
      for (const Word& w : c.meta.words) {
        c.bpe.ids.clear();
        c.bpe.spans.clear();
        model.tokenize(std::string_view(c.meta.text).substr(w.begin, w.end - w.begin), c.cache,
                       c.bpe);
        ids.insert(ids.end(), c.bpe.ids.begin(), c.bpe.ids.end());
        if constexpr (kOffsets) {
          for (auto [ts, te] : c.bpe.spans) {
            offs->push_back(original(c.meta.source[w.begin + ts].first,
                                     c.meta.source[w.begin + te - 1].second));
          }
          c.matched.resize(offs->size(), false);
        }
      }
      continue;
    }
    c.words.clear();
    pre.run(view, sp.begin, sp.end, c.pre, c.words);
    for (const Word& w : c.words) {
      std::string_view wb = view.substr(w.begin, w.end - w.begin);
      if (w.prefix_space) {
        c.prefixed.assign(1, ' ');
        c.prefixed.append(wb);
        wb = c.prefixed;
      }
      c.bpe.ids.clear();
      c.bpe.spans.clear();
      model.tokenize(wb, c.cache, c.bpe);
      ids.insert(ids.end(), c.bpe.ids.begin(), c.bpe.ids.end());
      if constexpr (kOffsets) {
        const uint32_t last = uint32_t(view.size()) - 1;
        auto pos = [&](uint32_t x) {
          uint32_t p = w.prefix_space ? (x == 0 ? w.begin : w.begin + x - 1) : w.begin + x;
          return std::min(p, last);
        };
        for (auto [ts, te] : c.bpe.spans) offs->push_back(original(pos(ts), pos(te - 1)));
        c.matched.resize(offs->size(), false);
      }
    }
  }
}

template <bool kOffsets>
void Tokenizer::Impl::post_process(bool add_special, std::string_view text, Context& c,
                                   std::vector<int32_t>& ids, std::vector<ByteSpan>* offs) const {
  for (const PostStep& step : post) {
    if (const auto* bl = std::get_if<ByteLevelPost>(&step)) {
      if constexpr (!kOffsets) continue;
      if (!bl->trim_offsets) continue;
      // processors ByteLevel::process_offsets: drop leading/trailing 'Ġ' and whitespace of the
      // token's text — for an added-token match the matched text, stripped spaces included.
      for (size_t i = 0; i < ids.size(); ++i) {
        std::string_view tok = token_of(ids[i]);
        if (c.matched[i]) tok = text.substr((*offs)[i].first, (*offs)[i].second - (*offs)[i].first);
        auto is_space = [](char32_t ch) { return ch == 0x120 || unicode::is_white_space(ch); };
        uint32_t lead = 0, trail = 0;
        for (size_t k = 0; k < tok.size();) {
          if (!is_space(unicode::next_code_point(tok, k))) break;
          ++lead;
        }
        for (size_t k = tok.size(); k > 0;) {
          size_t b = unicode::char_begin(tok, k - 1);
          size_t kk = b;
          if (!is_space(unicode::next_code_point(tok, kk))) break;
          ++trail;
          k = b;
        }
        // HF trims character offsets (Python's encode converts to characters first): move the
        // byte offsets by whole characters of the text.
        auto& [s, e] = (*offs)[i];
        if (lead > 0) {
          bool first = i == 0 || s == 0;
          if (first && bl->add_prefix_space && lead == 1) lead = 0;
          for (uint32_t k = 0; k < lead && s < e; ++k) s = uint32_t(unicode::char_end(text, s));
        }
        if (trail > 0) {
          uint32_t p = e, k = 0;
          for (; k < trail && p > 0; ++k) p = uint32_t(unicode::char_begin(text, p - 1));
          if (k == trail) e = std::max(p, s);
        }
      }
    } else if (add_special) {
      const auto& t = std::get<TemplatePost>(step);
      std::vector<int32_t> new_ids;
      std::vector<ByteSpan> new_offs;
      for (const auto& piece : t.pieces) {
        if (piece.empty()) {
          new_ids.insert(new_ids.end(), ids.begin(), ids.end());
          if constexpr (kOffsets) new_offs.insert(new_offs.end(), offs->begin(), offs->end());
        } else {
          new_ids.insert(new_ids.end(), piece.begin(), piece.end());
          if constexpr (kOffsets) new_offs.insert(new_offs.end(), piece.size(), ByteSpan{0, 0});
        }
      }
      if constexpr (kOffsets) {  // the template's tokens are not matches
        std::vector<bool> flags;
        for (const auto& piece : t.pieces) {
          if (piece.empty()) {
            flags.insert(flags.end(), c.matched.begin(), c.matched.end());
          } else {
            flags.insert(flags.end(), piece.size(), false);
          }
        }
        c.matched.swap(flags);
      }
      ids.swap(new_ids);
      if constexpr (kOffsets) offs->swap(new_offs);
    }
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  Impl::Lease lease(*impl_);
  std::vector<int32_t> ids;
  impl_->encode_into<false>(text, add_special_tokens, *lease, ids, nullptr);
  return ids;
}

Encoding Tokenizer::encode_with_offsets(std::string_view text, bool add_special_tokens) const {
  Impl::Lease lease(*impl_);
  Encoding e;
  impl_->encode_into<true>(text, add_special_tokens, *lease, e.ids, &e.offsets);
  return e;
}

std::vector<std::vector<int32_t>> Tokenizer::encode_batch(std::span<const std::string> texts,
                                                          int num_threads,
                                                          bool add_special_tokens) const {
  std::vector<std::vector<int32_t>> out(texts.size());
  const long n = static_cast<long>(texts.size());
  int threads = num_threads > 0 ? num_threads : omp_get_max_threads();
  threads = static_cast<int>(std::clamp<long>(threads, 1, std::max<long>(n, 1)));
  std::exception_ptr error;
  std::mutex error_mu;
  auto run = [&](long i, Context& c) {
    try {
      impl_->encode_into<false>(texts[size_t(i)], add_special_tokens, c, out[size_t(i)], nullptr);
    } catch (const Error& e) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::make_exception_ptr(Error(fmt::format("texts[{}]: {}", i, e.what())));
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
    }
  };
  if (threads == 1) {
    Impl::Lease lease(*impl_);
    for (long i = 0; i < n; ++i) run(i, *lease);
  } else {
#pragma omp parallel num_threads(threads)
    {
      Impl::Lease lease(*impl_);
#pragma omp for schedule(dynamic, 1)
      for (long i = 0; i < n; ++i) run(i, *lease);
    }
  }
  if (error) std::rethrow_exception(error);
  return out;
}

}  // namespace zt::text
