#include "text/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "text/bpe_json.h"
#include "text/unicode.h"

namespace zt::text {

namespace {

// GPT-2's pre-tokenization regex, as HF's ByteLevel pre-tokenizer uses it (use_regex: true).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The White_Space code points as the inside of a PCRE2 character class.
constexpr std::string_view kWhiteSpaceClass =
    R"(\x{9}-\x{D}\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

pcre2_code* code_of(const std::shared_ptr<void>& p) { return static_cast<pcre2_code*>(p.get()); }

}  // namespace

RegexScratch::RegexScratch() {
  match_data_ = pcre2_match_data_create(1, nullptr);
  match_ctx_ = pcre2_match_context_create(nullptr);
  jit_stack_ = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  if (!match_data_ || !match_ctx_ || !jit_stack_) throw std::bad_alloc();
  pcre2_jit_stack_assign(static_cast<pcre2_match_context*>(match_ctx_), nullptr,
                         static_cast<pcre2_jit_stack*>(jit_stack_));
}

RegexScratch::~RegexScratch() {
  pcre2_match_data_free(static_cast<pcre2_match_data*>(match_data_));
  pcre2_match_context_free(static_cast<pcre2_match_context*>(match_ctx_));
  pcre2_jit_stack_free(static_cast<pcre2_jit_stack*>(jit_stack_));
}

std::string translate_onig_pattern(std::string_view p) {
  const std::string letters = "\\p{L}" + unicode::hf_extra_letters_class();
  const std::string numbers = "\\p{N}" + unicode::hf_extra_numbers_class();
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  // Appends a class body: as is inside a class, else wrapped in [...] / [^...].
  auto put = [&](std::string_view body, bool negated) {
    if (in_class) {
      out += body;
    } else {
      out += negated ? "[^" : "[";
      out += body;
      out += ']';
    }
  };
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[++i];
      if (e == 's' || (e == 'S' && !in_class)) {
        put(kWhiteSpaceClass, e == 'S');
        continue;
      }
      if ((e == 'p' || (e == 'P' && !in_class)) && i + 1 < p.size()) {
        // \p{L}, \pL, \p{N}, \pN: add the letters / numbers of HF's newer Unicode data.
        std::string_view rest = p.substr(i + 1);
        size_t len = 0;
        char name = 0;
        if (rest.size() >= 3 && rest[0] == '{' && rest[2] == '}') {
          name = rest[1];
          len = 3;
        } else if (!rest.empty() && rest[0] != '{') {
          name = rest[0];
          len = 1;
        }
        if (name == 'L' || name == 'N') {
          put(name == 'L' ? letters : numbers, e == 'P');
          i += len;
          continue;
        }
      }
      out += '\\';
      out += e;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX [:name:]
      size_t close = p.find(":]", i + 2);
      if (close != std::string_view::npos) {
        out.append(p.substr(i, close + 2 - i));
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

Regex Regex::compile(std::string_view pattern, bool literal, std::string_view where) {
  std::string translated = literal ? std::string(pattern) : translate_onig_pattern(pattern);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()),
                                   translated.size(), opts, &err, &err_off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    fail("{}: cannot compile regex '{}': {} at offset {}", where, pattern,
         reinterpret_cast<const char*>(msg), err_off);
  }
  Regex r;
  r.code_ =
      std::shared_ptr<void>(code, [](void* c) { pcre2_code_free(static_cast<pcre2_code*>(c)); });
  r.jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return r;
}

void Regex::find_all(std::string_view subject, RegexScratch& scratch,
                     std::vector<std::pair<uint32_t, uint32_t>>& out) const {
  out.clear();
  auto* md = static_cast<pcre2_match_data*>(scratch.match_data_);
  auto* mc = static_cast<pcre2_match_context*>(scratch.match_ctx_);
  const auto* subj = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t n = subject.size();
  size_t search = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (search <= n) {
    int rc = jit_ ? pcre2_jit_match(code_of(code_), subj, n, search, 0, md, mc)
                  : pcre2_match(code_of(code_), subj, n, search, PCRE2_NO_UTF_CHECK, md, mc);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      fail("tokenizer: regex match failed: {}", reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t s = ov[0], e = ov[1];
    if (s == e && have_last && last_end == e) {
      // onig's FindMatches: skip an empty match glued to the previous one, advance one char.
      if (search >= n) break;
      search = unicode::char_end(subject, search);
      continue;
    }
    out.emplace_back(uint32_t(s), uint32_t(e));
    search = e;
    have_last = true;
    last_end = e;
  }
}

void PreTokenizer::add_split(SplitStep step, std::string_view where) {
  if (byte_level_) fail("{}: a Split pre-tokenizer after ByteLevel is not supported", where);
  if (metaspace_) fail("{}: a pre-tokenizer combined with Metaspace is not supported", where);
  steps_.emplace_back(std::move(step));
}

void PreTokenizer::add_byte_level(ByteLevelStep step, std::string_view where) {
  if (byte_level_) fail("{}: more than one ByteLevel pre-tokenizer is not supported", where);
  if (metaspace_) fail("{}: a pre-tokenizer combined with Metaspace is not supported", where);
  byte_level_ = true;
  if (step.use_regex && !gpt2_) {
    gpt2_ = std::make_shared<Regex>(Regex::compile(kGpt2Pattern, false, where));
  }
  steps_.emplace_back(step);
}

void PreTokenizer::run(std::string_view s, uint32_t begin, uint32_t end, PreTokenizeScratch& sc,
                       std::vector<Word>& words) const {
  if (begin >= end) return;
  size_t base = words.size();
  words.push_back({begin, end, false});
  for (const auto& step : steps_) {
    sc.next.clear();
    for (size_t k = base; k < words.size(); ++k) {
      if (const auto* sp = std::get_if<SplitStep>(&step)) {
        apply_split(*sp, s, words[k], sc, sc.next);
      } else {
        apply_byte_level(std::get<ByteLevelStep>(step), s, words[k], sc, sc.next);
      }
    }
    words.resize(base);
    words.insert(words.end(), sc.next.begin(), sc.next.end());
  }
}

void PreTokenizer::apply_split(const SplitStep& st, std::string_view s, const Word& w,
                               PreTokenizeScratch& sc, std::vector<Word>& out) const {
  std::string_view piece = s.substr(w.begin, w.end - w.begin);
  st.regex.find_all(piece, sc.regex, sc.matches);
  // (range, is_match) covering the whole piece, as Pattern::find_matches.
  auto& splits = sc.splits;
  splits.clear();
  uint32_t prev = 0;
  for (auto [a, b] : sc.matches) {
    if (prev != a) splits.push_back({{prev, a}, st.invert});
    splits.push_back({{a, b}, !st.invert});
    prev = b;
  }
  if (prev != piece.size()) splits.push_back({{prev, uint32_t(piece.size())}, st.invert});
  auto emit = [&](uint32_t a, uint32_t b) {
    if (a < b) out.push_back({w.begin + a, w.begin + b, false});
  };
  switch (st.behavior) {
    case SplitBehavior::kIsolated:
      for (auto& [r, m] : splits) emit(r.first, r.second);
      break;
    case SplitBehavior::kRemoved:
      for (auto& [r, m] : splits)
        if (!m) emit(r.first, r.second);
      break;
    case SplitBehavior::kContiguous: {
      // Runs of matches (and of non-matches) are merged together.
      std::vector<std::pair<uint32_t, uint32_t>> acc;
      bool prev_match = false;
      for (auto& [r, m] : splits) {
        if (m == prev_match && !acc.empty()) {
          acc.back().second = r.second;
        } else {
          acc.push_back(r);
        }
        prev_match = m;
      }
      for (auto [a, b] : acc) emit(a, b);
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      std::vector<std::pair<uint32_t, uint32_t>> acc;
      bool prev_match = false;
      for (auto& [r, m] : splits) {
        if (m && !prev_match && !acc.empty()) {
          acc.back().second = r.second;
        } else {
          acc.push_back(r);
        }
        prev_match = m;
      }
      for (auto [a, b] : acc) emit(a, b);
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      std::vector<std::pair<uint32_t, uint32_t>> acc;
      bool prev_match = false;
      for (auto it = splits.rbegin(); it != splits.rend(); ++it) {
        auto& [r, m] = *it;
        if (m && !prev_match && !acc.empty()) {
          acc.back().first = r.first;
        } else {
          acc.push_back(r);
        }
        prev_match = m;
      }
      for (auto it = acc.rbegin(); it != acc.rend(); ++it) emit(it->first, it->second);
      break;
    }
  }
}

void PreTokenizer::apply_byte_level(const ByteLevelStep& st, std::string_view s, const Word& w,
                                    PreTokenizeScratch& sc, std::vector<Word>& out) const {
  bool prefix = st.add_prefix_space && s[w.begin] != ' ';
  if (!st.use_regex) {
    out.push_back({w.begin, w.end, prefix});
    return;
  }
  std::string_view piece = s.substr(w.begin, w.end - w.begin);
  if (prefix) {
    sc.prefixed.assign(1, ' ');
    sc.prefixed.append(piece);
    piece = sc.prefixed;
  }
  gpt2_->find_all(piece, sc.regex, sc.matches);
  // Isolated: matches and the gaps between them, empty ones dropped.
  uint32_t shift = prefix ? 1 : 0;
  auto emit = [&](uint32_t a, uint32_t b) {
    if (a >= b) return;
    if (prefix && a == 0) {
      out.push_back({w.begin, w.begin + b - shift, true});
    } else {
      out.push_back({w.begin + a - shift, w.begin + b - shift, false});
    }
  };
  uint32_t prev = 0;
  for (auto [a, b] : sc.matches) {
    emit(prev, a);
    emit(a, b);
    prev = b;
  }
  emit(prev, uint32_t(piece.size()));
}

Regex pattern_field(const Json& obj, const std::string& file, const std::string& path) {
  using namespace json_fields;
  const Json* pat = member(obj, "pattern");
  std::optional<std::string> regex, literal;
  if (pat && pat->is_object()) {
    regex = get_string(*pat, "Regex", file, path + ".pattern");
    literal = get_string(*pat, "String", file, path + ".pattern");
  }
  if (!regex && !literal) {
    fail("{}: {}.pattern must be {{\"Regex\": ...}} or {{\"String\": ...}}", file, path);
  }
  if (literal && literal->empty()) fail("{}: {}.pattern.String must not be empty", file, path);
  return Regex::compile(regex ? *regex : *literal, !regex,
                        fmt::format("{}: {}.pattern", file, path));
}

void PreTokenizer::add_from_json(const Json& p, const std::string& file, const std::string& path) {
  using namespace json_fields;
  if (p.is_null()) return;
  std::string type = type_of(p, file, path);
  std::string where = fmt::format("{}: {}", file, path);
  if (type == "Sequence") {
    const Json& list = get_array(p, "pretokenizers", file, path);
    for (size_t k = 0; k < list.size(); ++k) {
      add_from_json(list[k], file, fmt::format("{}.pretokenizers[{}]", path, k));
    }
  } else if (type == "Split") {
    Regex pattern = pattern_field(p, file, path);
    std::string behavior = get_string(p, "behavior", file, path).value_or("Isolated");
    SplitBehavior sb;
    if (behavior == "Isolated") {
      sb = SplitBehavior::kIsolated;
    } else if (behavior == "Removed") {
      sb = SplitBehavior::kRemoved;
    } else if (behavior == "MergedWithPrevious") {
      sb = SplitBehavior::kMergedWithPrevious;
    } else if (behavior == "MergedWithNext") {
      sb = SplitBehavior::kMergedWithNext;
    } else if (behavior == "Contiguous") {
      sb = SplitBehavior::kContiguous;
    } else {
      fail(
          "{}: {}.behavior '{}' is not one of Isolated, Removed, MergedWithPrevious, "
          "MergedWithNext, Contiguous",
          file, path, behavior);
    }
    add_split(SplitStep{std::move(pattern), sb, get_bool(p, "invert", false, file, path)}, where);
  } else if (type == "ByteLevel") {
    add_byte_level(ByteLevelStep{get_bool(p, "add_prefix_space", true, file, path),
                                 get_bool(p, "use_regex", true, file, path)},
                   where);
  } else if (type == "Metaspace") {
    if (!steps_.empty() || metaspace_) {
      fail("{}: a pre-tokenizer combined with Metaspace is not supported", where);
    }
    MetaspaceStep m;
    m.replacement = get_string(p, "replacement", file, path).value_or("\u2581");
    size_t i = 0;
    if (m.replacement.empty() ||
        (unicode::next_code_point(m.replacement, i), i) != m.replacement.size()) {
      fail("{}: {}.replacement must be one character, got '{}'", file, path, m.replacement);
    }
    // Serialisations before tokenizers 0.19 have add_prefix_space instead of prepend_scheme.
    auto scheme = get_string(p, "prepend_scheme", file, path);
    if (!scheme) {
      scheme = get_bool(p, "add_prefix_space", true, file, path) ? "always" : "never";
    }
    if (*scheme == "always") {
      m.prepend = MetaspaceStep::Prepend::kAlways;
    } else if (*scheme == "never") {
      m.prepend = MetaspaceStep::Prepend::kNever;
    } else if (*scheme == "first") {
      m.prepend = MetaspaceStep::Prepend::kFirst;
    } else {
      fail("{}: {}.prepend_scheme '{}' is not one of always, never, first", file, path, *scheme);
    }
    m.split = get_bool(p, "split", true, file, path);
    metaspace_split_.emplace(SplitStep{Regex::compile(m.replacement, true, where + ".replacement"),
                                       SplitBehavior::kMergedWithNext, false});
    metaspace_ = std::move(m);
  } else {
    fail("{}: {}.type '{}' is not supported (supported: Split, ByteLevel, Metaspace, Sequence)",
         file, path, type);
  }
}

void PreTokenizer::run_metaspace(std::string_view s, uint32_t begin, uint32_t end, bool input_start,
                                 PreTokenizeScratch& sc, MetaspaceText& out) const {
  const MetaspaceStep& m = *metaspace_;
  out.text.clear();
  out.source.clear();
  out.words.clear();
  if (begin >= end) return;
  // Replace ' ' by the replacement (aligned with the space), then prepend (aligned with the
  // first character), as Metaspace::pre_tokenize.
  for (uint32_t i = begin; i < end;) {
    uint32_t b = i;
    size_t j = i;
    unicode::next_code_point(s, j);
    i = uint32_t(j);
    std::string_view ch = s[b] == ' ' ? std::string_view(m.replacement) : s.substr(b, i - b);
    out.text += ch;
    out.source.insert(out.source.end(), ch.size(), {b, i - 1});
  }
  bool starts = out.text.compare(0, m.replacement.size(), m.replacement) == 0;
  bool prepend = !starts && (m.prepend == MetaspaceStep::Prepend::kAlways ||
                             (m.prepend == MetaspaceStep::Prepend::kFirst && input_start));
  if (prepend) {
    auto first = out.source.front();
    out.text.insert(0, m.replacement);
    out.source.insert(out.source.begin(), m.replacement.size(), first);
  }
  const auto n = uint32_t(out.text.size());
  if (!m.split) {
    out.words.push_back({0, n, false});
    return;
  }
  apply_split(*metaspace_split_, out.text, Word{0, n, false}, sc, out.words);
}

}  // namespace zt::text
