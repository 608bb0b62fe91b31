// Tokenizer: loads a tokenizer.json into the components of normalize.h, pretokenize*.h and
// bpe_model.h and runs HF `tokenizers`' pipeline (TokenizerImpl::encode_single_sequence, then
// post_process; decode):
//   added tokens (non-normalized) → NFC → added tokens (normalized) → pre-tokenizer → BPE
//   → post-processors (ByteLevel offset trimming, TemplateProcessing) → ids and byte offsets.
// Loading and validating tokenizer.json, decoding and the vocabulary are here; the encoding in
// tokenizer_encode.cpp, Tokenizer::Impl in tokenizer_impl.h.
#include "text/tokenizer.h"

#include <algorithm>
#include <unordered_map>

#include "core/error.h"
#include "core/log.h"
#include "text/bpe_json.h"
#include "text/bpe_model.h"
#include "text/decoder.h"
#include "text/normalize.h"
#include "text/pretokenize.h"
#include "text/pretokenize_added.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

namespace zt::text {

using namespace json_fields;
using namespace tokenizer_detail;

// ---- loading --------------------------------------------------------------------------------

void Tokenizer::Impl::parse_post_processor(const Json& p, const std::string& path) {
  if (p.is_null()) return;
  std::string type = type_of(p, file, path);
  if (type == "Sequence") {
    const Json& list = get_array(p, "processors", file, path);
    for (size_t k = 0; k < list.size(); ++k) {
      parse_post_processor(list[k], fmt::format("{}.processors[{}]", path, k));
    }
  } else if (type == "ByteLevel") {
    post.emplace_back(ByteLevelPost{get_bool(p, "trim_offsets", true, file, path),
                                    get_bool(p, "add_prefix_space", true, file, path)});
  } else if (type == "TemplateProcessing") {
    const Json& single = get_array(p, "single", file, path);
    const Json* specials = member(p, "special_tokens");
    TemplatePost t;
    for (size_t k = 0; k < single.size(); ++k) {
      const Json& piece = single[k];
      std::string ppath = fmt::format("{}.single[{}]", path, k);
      if (piece.is_object() && piece.contains("Sequence")) {
        auto id = get_string(piece["Sequence"], "id", file, ppath + ".Sequence");
        if (id != "A")
          fail("{}: {}.Sequence.id '{}' in a single-sequence template", file, ppath,
               id.value_or(""));
        t.pieces.emplace_back();
      } else if (piece.is_object() && piece.contains("SpecialToken")) {
        auto name = get_string(piece["SpecialToken"], "id", file, ppath + ".SpecialToken");
        const Json* st =
            specials && specials->is_object() && name ? member(*specials, name->c_str()) : nullptr;
        const Json* ids = st ? member(*st, "ids") : nullptr;
        if (!ids || !ids->is_array()) {
          fail("{}: {}: special token '{}' has no ids in {}.special_tokens", file, ppath,
               name.value_or(""), path);
        }
        std::vector<int32_t> v;
        for (const Json& i : *ids) {
          if (!i.is_number_unsigned()) fail("{}: {}.special_tokens ids must be ids", file, path);
          v.push_back(i.get<int32_t>());
        }
        if (v.empty()) continue;
        t.pieces.push_back(std::move(v));
      } else {
        fail("{}: {} must be {{\"Sequence\": ...}} or {{\"SpecialToken\": ...}}", file, ppath);
      }
    }
    post.emplace_back(std::move(t));
  } else {
    fail("{}: {}.type '{}' is not supported (supported: ByteLevel, TemplateProcessing, Sequence)",
         file, path, type);
  }
}

void Tokenizer::Impl::build_matchers() {
  std::vector<AddedToken> raw, norm;
  std::vector<std::string> raw_pat, norm_pat;
  NormalizeScratch nsc;
  for (const auto& a : added) {
    if (a.normalized) {  // matched on the normalized text: AddedVocabulary normalizes the content
      std::string p = a.content;
      if (!normalizer.empty() && !normalizer.is_stable(p, nsc)) {
        std::vector<ByteSpan> align;
        normalizer.normalize(a.content, 0, p, align, nsc);
      }
      norm.push_back(a);
      norm_pat.push_back(std::move(p));
    } else {
      raw.push_back(a);
      raw_pat.push_back(a.content);
    }
  }
  raw_matcher = AddedTokenMatcher(std::move(raw), raw_pat);
  norm_matcher = AddedTokenMatcher(std::move(norm), norm_pat);
}

void Tokenizer::Impl::build_id_tables() {
  int32_t max_id = model.max_id();
  for (const auto& t : added) max_id = std::max(max_id, t.id);
  vocab_size = max_id + 1;
  decoded.clear();
  present.assign(size_t(vocab_size), false);
  special.assign(size_t(vocab_size), false);
  added_index.assign(size_t(vocab_size), -1);
  for (int32_t id = 0; id <= model.max_id(); ++id)
    present[size_t(id)] = model.id_to_token(id).has_value();
  FlatStringMap special_contents;
  for (size_t k = 0; k < added.size(); ++k) {
    const AddedToken& t = added[k];
    added_index[size_t(t.id)] = int32_t(k);
    present[size_t(t.id)] = true;
    added_ids.insert_or_assign(t.content, t.id);
    if (t.special) special_contents.insert_or_assign(t.content, 1);
  }
  // ByteLevel decoder: a token whose characters are all in the byte alphabet becomes those
  // bytes, any other token its own UTF-8 (pre_tokenizers/byte_level.rs, Decoder impl).
  unicode::ByteLevelAlphabet alphabet;
  decoded_begin.assign(size_t(vocab_size) + 1, 0);
  for (size_t id = 0; id < size_t(vocab_size); ++id) {
    decoded_begin[id] = uint32_t(decoded.size());
    if (!present[id]) continue;
    std::string_view tok = token_of(int32_t(id));
    special[id] = special_contents.find(tok).has_value();
    if (!alphabet.to_bytes(tok, decoded)) decoded.append(tok);
  }
  decoded_begin[size_t(vocab_size)] = uint32_t(decoded.size());
}

namespace {

// Refuses an added token whose id in the file is not the id HF `tokenizers` gives it. HF reads no
// id from added_tokens (TokenizerVisitor → AddedVocabulary::add_tokens; checked with 0.23.3): a
// token whose content is in model.vocab takes its vocabulary id (HF only warns), one listed
// before takes the id it had, and any other the next id: the number of vocabulary tokens, or one
// past the largest added id when that is larger. zerotune read the file's ids, so on such a file
// the ids it trained on were not the ones HF encodes to; no id is right for both, so the file
// is refused, naming the entry, its content, its id and the id HF gives (or the other token of
// that id). The same token listed twice (one content, one id) is one token, as in HF.
// `added[i]` is added_tokens[file_index[i]] (entries with empty content left out, as HF skips
// them).
void refuse_ids_hf_reassigns(const BpeModel& model, const std::vector<AddedToken>& added,
                             const std::vector<size_t>& file_index, const std::string& f) {
  int32_t vocab_count = 0;
  for (int32_t id = 0; id <= model.max_id(); ++id) vocab_count += model.id_to_token(id) ? 1 : 0;
  std::unordered_map<std::string_view, size_t> first_with_content;  // -> `added` index
  std::unordered_map<int32_t, size_t> first_with_id;                // -> `added` index
  int32_t max_id = -1;                                              // of the added tokens so far
  for (size_t i = 0; i < added.size(); ++i) {
    const AddedToken& a = added[i];
    const std::string path = fmt::format("added_tokens[{}]", file_index[i]);
    if (const auto v = model.token_to_id(a.content)) {
      if (*v != a.id) {
        fail(
            "{}: {} '{}' has id {}, but model.vocab has '{}' as id {} (the id HF `tokenizers` "
            "gives it); an added token in the vocabulary needs its vocabulary id",
            f, path, a.content, a.id, a.content, *v);
      }
    } else if (auto it = first_with_content.find(a.content); it != first_with_content.end()) {
      const size_t first = it->second;
      if (added[first].id != a.id) {
        fail(
            "{}: {} '{}' has id {}, but added_tokens[{}] '{}' has id {} (the id HF `tokenizers` "
            "gives it); a token listed twice needs one id",
            f, path, a.content, a.id, file_index[first], a.content, added[first].id);
      }
      continue;
    } else {
      const int32_t next = max_id >= vocab_count || vocab_count == 0 ? max_id + 1 : vocab_count;
      if (auto it = first_with_id.find(a.id); it != first_with_id.end()) {
        const size_t first = it->second;
        fail(
            "{}: {} '{}' has id {}, the id of added_tokens[{}] '{}'; each added token needs an id "
            "of its own",
            f, path, a.content, a.id, file_index[first], added[first].content);
      }
      if (const auto t = model.id_to_token(a.id)) {
        fail(
            "{}: {} '{}' has id {}, the id of model.vocab token '{}' (HF `tokenizers` gives '{}' "
            "id {}); each added token needs an id of its own",
            f, path, a.content, a.id, *t, a.content, next);
      }
      if (a.id != next) {
        fail(
            "{}: {} '{}' has id {}, but HF `tokenizers` gives it id {}: it numbers the added "
            "tokens outside model.vocab in file order, on from the vocabulary's {} tokens",
            f, path, a.content, a.id, next, vocab_count);
      }
    }
    first_with_content.emplace(a.content, i);
    first_with_id.emplace(a.id, i);
    max_id = std::max(max_id, a.id);
  }
}

}  // namespace

Tokenizer Tokenizer::load(const std::filesystem::path& tokenizer_json) {
  // A model directory is accepted too: its tokenizer.json.
  std::error_code ec;
  std::filesystem::path path = tokenizer_json;
  if (std::filesystem::is_directory(path, ec)) path /= "tokenizer.json";
  TokenizerJson tj = read_tokenizer_json(path);
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.file = path.string();
  const std::string& f = m.file;
  const Json& j = tj.rest;
  auto field = [&](const char* key) -> const Json& {
    static const Json kNull;
    const Json* v = member(j, key);
    return v ? *v : kNull;
  };

  m.normalizer = Normalizer::from_json(field("normalizer"), f, "normalizer");
  m.pre.add_from_json(field("pre_tokenizer"), f, "pre_tokenizer");

  const Json& mj = field("model");
  if (!mj.is_object()) fail("{}: model must be an object", f);
  if (auto type = get_string(mj, "type", f, "model"); type && *type != "BPE") {
    fail("{}: model.type '{}' is not supported (only BPE)", f, *type);
  }
  if (!tj.has_vocab) fail("{}: model.vocab must be an object of token -> id", f);
  if (!tj.has_merges) fail("{}: model.merges must be an array", f);
  if (const Json* d = member(mj, "dropout"); d && !d->is_null() && !(d->is_number() && *d == 0)) {
    fail("{}: model.dropout {} is not supported (BPE dropout is random)", f, d->dump());
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (auto v = get_string(mj, key, f, "model"); v && !v->empty()) {
      fail("{}: model.{} '{}' is not supported", f, key, *v);
    }
  }
  BpeOptions opts;
  opts.byte_level = m.pre.byte_level();
  opts.ignore_merges = get_bool(mj, "ignore_merges", false, f, "model");
  opts.unk_token = get_string(mj, "unk_token", f, "model");
  opts.fuse_unk = get_bool(mj, "fuse_unk", false, f, "model");
  opts.byte_fallback = get_bool(mj, "byte_fallback", false, f, "model");
  m.model = BpeModel(tj.bpe, opts, f);
  tj.bpe = BpeSource();

  std::vector<AddedToken>& added = m.added;
  std::vector<size_t> file_index;  // added[i] is added_tokens[file_index[i]]
  if (const Json* at = member(j, "added_tokens"); at && !at->is_null()) {
    if (!at->is_array()) fail("{}: added_tokens must be an array", f);
    for (size_t k = 0; k < at->size(); ++k) {
      const Json& t = (*at)[k];
      std::string path = fmt::format("added_tokens[{}]", k);
      if (!t.is_object()) fail("{}: {} must be an object", f, path);
      const Json* id = member(t, "id");
      if (!id || !id->is_number_unsigned() || id->get<uint64_t>() > INT32_MAX) {
        fail("{}: {}.id must be a non-negative integer", f, path);
      }
      AddedToken a;
      a.id = id->get<int32_t>();
      auto content = get_string(t, "content", f, path);
      if (!content) fail("{}: {}.content is missing", f, path);
      a.content = *content;
      a.special = get_bool(t, "special", false, f, path);
      a.single_word = get_bool(t, "single_word", false, f, path);
      a.lstrip = get_bool(t, "lstrip", false, f, path);
      a.rstrip = get_bool(t, "rstrip", false, f, path);
      a.normalized = get_bool(t, "normalized", !a.special, f, path);
      if (unicode::find_invalid_utf8(a.content)) fail("{}: {}.content is not UTF-8", f, path);
      if (a.content.empty()) continue;  // HF's AddedVocabulary skips empty tokens
      added.push_back(std::move(a));
      file_index.push_back(k);
    }
  }
  refuse_ids_hf_reassigns(m.model, added, file_index, f);
  m.build_matchers();
  m.parse_post_processor(field("post_processor"), "post_processor");
  m.decoder = Decoder::from_json(field("decoder"), f, "decoder");
  m.byte_level_decoder = m.decoder.byte_level_only();
  for (const char* key : {"truncation", "padding"}) {
    if (!field(key).is_null()) log::warn("{}: '{}' settings are ignored", f, key);
  }
  m.build_id_tables();
  return Tokenizer(std::move(impl));
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

// ---- decoding and vocabulary ----------------------------------------------------------------

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& m = *impl_;
  auto keep = [&](int32_t id) {
    return id >= 0 && id < m.vocab_size && m.present[size_t(id)] &&
           !(skip_special_tokens && m.special[size_t(id)]);
  };
  if (m.byte_level_decoder) {
    std::string bytes;
    for (int32_t id : ids) {
      if (!keep(id)) continue;
      bytes.append(m.decoded, m.decoded_begin[size_t(id)],
                   m.decoded_begin[size_t(id) + 1] - m.decoded_begin[size_t(id)]);
    }
    return unicode::utf8_lossy(bytes);
  }
  std::vector<std::string> tokens;
  for (int32_t id : ids) {
    if (keep(id)) tokens.emplace_back(m.token_of(id));
  }
  return m.decoder.decode(std::move(tokens));
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = impl_->added_ids.find(token)) return id;
  return impl_->model.token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || id >= impl_->vocab_size || !impl_->present[size_t(id)]) {
    fail("tokenizer '{}': id {} is not in the vocabulary (size {})", impl_->file, id,
         impl_->vocab_size);
  }
  return std::string(impl_->token_of(id));
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

void Tokenizer::set_special_tokens_template(std::optional<int32_t> bos,
                                            std::optional<int32_t> eos) {
  Impl& m = *impl_;
  for (const std::optional<int32_t>& id : {bos, eos})
    if (id && (*id < 0 || *id >= m.vocab_size || !m.present[size_t(*id)]))
      fail("tokenizer '{}': {} is not a token id of this tokenizer", m.file, *id);
  tokenizer_detail::TemplatePost t;
  if (bos) t.pieces.push_back({*bos});
  t.pieces.emplace_back();  // the sequence
  if (eos) t.pieces.push_back({*eos});
  m.post.clear();
  m.post.emplace_back(std::move(t));
}

Tokenizer::AddResult Tokenizer::add_special_token(std::string_view content) {
  if (content.empty()) fail("tokenizer '{}': an added token cannot be empty", impl_->file);
  if (unicode::find_invalid_utf8(content))
    fail("tokenizer '{}': added token '{}' is not UTF-8", impl_->file, content);
  Impl& m = *impl_;
  if (auto id = m.added_ids.find(content)) return {*id, false, false};
  AddedToken a;
  a.content = std::string(content);
  a.special = true;
  a.normalized = false;
  const std::optional<int32_t> in_vocab = m.model.token_to_id(content);
  a.id = in_vocab ? *in_vocab : m.vocab_size;
  m.added.push_back(std::move(a));
  m.build_matchers();
  m.build_id_tables();
  return {m.added.back().id, true, !in_vocab};
}

}  // namespace zt::text
