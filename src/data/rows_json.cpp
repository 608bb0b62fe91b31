// JSON Lines / JSON array readers (nlohmann::ordered_json keeps keys in file order).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_set>

#include "core/error.h"
#include "data/rows.h"
#include "data/utf8.h"
#include "io/json_check.h"
#include "io/unique_keys.h"

namespace zt::data {
namespace {

// nlohmann's what() is "[json.exception.parse_error.101] parse error at …: <reason>"; keep
// <reason>.
std::string parse_reason(const char* what) {
  std::string_view w(what);
  const size_t p = w.find("parse error");
  if (p != std::string_view::npos) {
    const size_t c = w.find(": ", p);
    if (c != std::string_view::npos) return std::string(w.substr(c + 2));
  }
  return std::string(w);
}

int64_t line_of(std::string_view buf, size_t offset) {
  int64_t line = 1;
  for (size_t i = 0; i < offset && i < buf.size(); ++i) line += buf[i] == '\n';
  return line;
}

// A hint for the error path: a '\r' not followed by '\n' in the first `upto` bytes of `line` means
// the file has CR-only (old Mac) line endings, so many rows were read as one line.
std::string cr_only_hint(std::string_view line, size_t upto) {
  const size_t end = std::min(upto, line.size());
  for (size_t i = 0; i < end; ++i) {
    if (line[i] == '\r' && i + 1 < line.size() && line[i + 1] != '\n')
      return "; the file has CR-only line endings (old Mac style): expected LF or CRLF";
  }
  return "";
}

// SAX handler that counts the elements of the top-level array seen so far; used only on the
// error path to name the row that holds an invalid byte.
struct RowCounter {
  int depth = 0;
  int64_t count = 0;
  void value() { count += depth == 1; }
  bool null() { return value(), true; }
  bool boolean(bool) { return value(), true; }
  bool number_integer(Json::number_integer_t) { return value(), true; }
  bool number_unsigned(Json::number_unsigned_t) { return value(), true; }
  bool number_float(Json::number_float_t, const Json::string_t&) { return value(), true; }
  bool string(Json::string_t&) { return value(), true; }
  bool binary(Json::binary_t&) { return value(), true; }
  bool start_object(std::size_t) { return value(), ++depth, true; }
  bool key(Json::string_t&) { return true; }
  bool end_object() { return --depth, true; }
  bool start_array(std::size_t) { return value(), ++depth, true; }
  bool end_array() { return --depth, true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }
};

struct LineSpan {
  size_t begin, end;  // bytes of the file
  int64_t line;       // 1-based
  size_t column = 0;  // 0-based byte of `begin` in its line (a row after another on one line)
};

// Where a byte scan of JSON text is with respect to strings: feed() each byte in order; it returns
// true for the bytes of a string, its quotes included (a backslash escapes the byte after it).
struct JsonStringState {
  bool in = false, escaped = false;
  bool feed(char c) {
    if (in) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in = false;
      return true;
    }
    if (c == '"') in = true;
    return in;
  }
};

// The rows of a JSON Lines file, as pyarrow's JSON reader (HF datasets' "json" builder) reads it:
// a sequence of JSON objects separated by whitespace (space, tab, CR, LF), so one object a line,
// several on one line (`{"a": 1} {"a": 2}`, `{"a": 1}{"a": 2}`), an object spanning lines
// (pretty-printed) and CR-only line ends all give one row per object (datasets 4.8.5). A value that
// opens with `{` or `[` ends where it closes at depth 0 (strings skipped); anything else at depth 0
// (a stray `}`, a scalar, garbage) is a range to the end of its line, whose parse says what is
// wrong with it; an object left open runs to the end of the file.
//
// scan_rows appends the rows that start on the line at `pos` (its first byte; `line` 1-based) and
// returns the first byte after that line's end — after the end of the line where the last of them
// closes when `cross_lines`. Without `cross_lines` it returns npos as soon as a row runs past the
// line's end, appending nothing: each line is scanned on its own, in parallel, and only the lines
// where that happens are scanned again in order (stream_rows).
size_t scan_rows(std::string_view buf, size_t pos, int64_t line, bool cross_lines,
                 std::vector<LineSpan>& out) {
  const size_t first_out = out.size();
  size_t line_begin = pos;
  size_t i = pos;
  while (i < buf.size()) {
    const char c = buf[i];
    if (c == '\n') return i + 1;
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    LineSpan row{i, buf.size(), line, i - line_begin};
    if (c != '{' && c != '[') {
      const size_t nl = buf.find('\n', i);
      row.end = nl == std::string_view::npos ? buf.size() : nl;
      out.push_back(row);
      i = row.end;
      continue;
    }
    size_t depth = 0;
    JsonStringState str;
    for (; i < buf.size(); ++i) {
      const char d = buf[i];
      if (d == '\n') {
        if (!cross_lines) {
          out.resize(first_out);
          return std::string_view::npos;
        }
        ++line;
        line_begin = i + 1;
      }
      if (str.feed(d)) {
        continue;
      } else if (d == '{' || d == '[') {
        ++depth;
      } else if ((d == '}' || d == ']') && --depth == 0) {
        row.end = ++i;
        break;
      }
    }
    out.push_back(row);
  }
  return buf.size();
}

// Every row of the JSON Lines file `buf` from byte `start` (scan_rows' rules).
std::vector<LineSpan> stream_rows(std::string_view buf, size_t start) {
  std::vector<size_t> line_starts;
  for (size_t pos = start; pos < buf.size();) {
    line_starts.push_back(pos);
    const void* nl = std::memchr(buf.data() + pos, '\n', buf.size() - pos);
    pos = nl ? static_cast<size_t>(static_cast<const char*>(nl) - buf.data()) + 1 : buf.size();
  }
  // Lines are scanned in blocks (one result vector a block, not a line), in parallel.
  constexpr size_t kBlock = 4096;
  const size_t n = line_starts.size();
  const int64_t blocks = static_cast<int64_t>((n + kBlock - 1) / kBlock);
  std::vector<std::vector<LineSpan>> rows(static_cast<size_t>(blocks));
  std::vector<uint32_t> first(n + 1, 0);  // a line's first row in its block's vector
  std::vector<uint8_t> open(n, 0);        // a row there runs past the line's end
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const size_t lo = static_cast<size_t>(b) * kBlock, hi = std::min(n, lo + kBlock);
    for (size_t k = lo; k < hi; ++k) {
      first[k] = static_cast<uint32_t>(rows[b].size());
      open[k] = scan_rows(buf, line_starts[k], static_cast<int64_t>(k) + 1, false, rows[b]) ==
                std::string_view::npos;
    }
  }
  std::vector<LineSpan> out;
  for (size_t k = 0; k < n;) {
    if (!open[k]) {
      const auto& r = rows[k / kBlock];
      const size_t end = (k + 1) % kBlock == 0 || k + 1 == n ? r.size() : first[k + 1];
      out.insert(out.end(), r.begin() + first[k], r.begin() + static_cast<std::ptrdiff_t>(end));
      ++k;
      continue;
    }
    const size_t next = scan_rows(buf, line_starts[k], static_cast<int64_t>(k) + 1, true, out);
    while (k < n && line_starts[k] < next) ++k;
  }
  return out;
}

// Python's json and pyarrow's JSON reader (datasets' json builder: `NaN` → nan, `Infinity` → inf,
// checked with datasets 4.8.5; pyarrow also reads `-NaN`) read the bare literals NaN, Infinity and
// -Infinity, which JSON does not have (datasets reads a `.json` array through pandas, which makes
// them null and garbles the numbers beside them; zerotune reads them as numbers there too). A file
// Python's `json.dump` wrote (its default allow_nan=True) holds them, e.g. a NaN score beside the
// rows. Only when `text` fails to parse and holds one outside a string: each is replaced by a
// number of the same length (so offsets and lines stay), the copy parsed, and the numbers at those
// places — counted in file order, which the ordered Json keeps (duplicate keys are refused) — set
// to the non-finite value. Returns nullopt when `text` holds none.
struct NonFinite {
  std::string text;                           // `text` with the literals replaced
  std::vector<std::pair<size_t, double>> at;  // (ordinal among the numbers, value)
};
std::optional<NonFinite> replace_non_finite(std::string_view text) {
  NonFinite nf{std::string(text), {}};
  size_t numbers = 0;
  JsonStringState str;
  bool boundary = true;  // a value may start here
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (str.feed(c)) {
      boundary = false;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    if (c == '[' || c == '{' || c == ',' || c == ':') {
      boundary = true;
      continue;
    }
    if (!boundary) continue;
    boundary = false;
    static constexpr std::pair<std::string_view, std::string_view> kWords[] = {
        {"NaN", "0e0"}, {"-NaN", "-0e0"}, {"Infinity", "0.000000"}, {"-Infinity", "-0.000000"}};
    bool replaced = false;
    for (const auto& [word, number] : kWords) {
      if (text.substr(i, word.size()) != word) continue;
      const size_t end = i + word.size();
      if (end < text.size() &&
          std::string_view(" \t\r\n,]}").find(text[end]) == std::string_view::npos)
        continue;
      nf.text.replace(i, word.size(), number);
      nf.at.emplace_back(numbers++, word.ends_with("NaN") ? std::numeric_limits<double>::quiet_NaN()
                                    : word[0] == '-'      ? -std::numeric_limits<double>::infinity()
                                                     : std::numeric_limits<double>::infinity());
      i = end - 1;
      replaced = true;
      break;
    }
    if (!replaced && (c == '-' || (c >= '0' && c <= '9'))) ++numbers;
  }
  if (nf.at.empty()) return std::nullopt;
  return nf;
}

// Sets the numbers of `v` whose ordinal (in file order) `nf.at` names to its values.
void set_non_finite(Json& v, const NonFinite& nf, size_t& ordinal, size_t& next) {
  if (next == nf.at.size()) return;
  if (v.is_number()) {
    if (ordinal++ == nf.at[next].first) v = nf.at[next++].second;
  } else if (v.is_object() || v.is_array()) {
    for (auto& e : v) set_non_finite(e, nf, ordinal, next);
  }
}

// parse_json_tracked, reading NaN / Infinity / -Infinity as Python's json does
// (replace_non_finite). `keys` is rebuilt on the copy by `make_keys` when one is found.
template <typename MakeKeys>
Json parse_data_json(std::string_view text, const MakeKeys& make_keys) {
  try {
    JsonKeyTracker keys = make_keys(text);
    return parse_json_tracked(text, keys);
  } catch (const Json::parse_error&) {
    const std::optional<NonFinite> nf = replace_non_finite(text);
    if (!nf) throw;
    JsonKeyTracker keys = make_keys(nf->text);
    Json v = parse_json_tracked(nf->text, keys);
    size_t ordinal = 0, next = 0;
    set_non_finite(v, *nf, ordinal, next);
    return v;
  }
}

// Where byte `at` of `buf` lies: its 1-based line and 0-based column, counted from row `l`'s
// start (the error path only).
struct Position {
  int64_t line;
  size_t column;
  size_t line_begin;
};
Position position(std::string_view buf, const LineSpan& l, size_t at) {
  at = std::min(at, buf.size());
  Position p{l.line, 0, l.begin - l.column};
  for (size_t i = l.begin; i < at; ++i)
    if (buf[i] == '\n') ++p.line, p.line_begin = i + 1;
  p.column = at - p.line_begin;
  return p;
}

// One error per thread at most; the one of the first row wins, so the message is deterministic.
struct FirstError {
  int64_t key = INT64_MAX;
  std::string message;
  void offer(int64_t k, std::string msg) {
#pragma omp critical(zt_rows_first_error)
    if (k < key) key = k, message = std::move(msg);
  }
};

std::vector<Json> parse_lines(const std::string& buf, const std::string& file,
                              std::vector<int64_t>* row_lines) {
  // A UTF-8 byte order mark is no part of line 1, which may then be blank (an editor's BOM and
  // empty first line).
  const size_t start = buf.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  const std::vector<LineSpan> lines = stream_rows(buf, start);
  std::vector<Json> rows(lines.size());
  FirstError err;
  const int64_t n = static_cast<int64_t>(lines.size());
#pragma omp parallel for schedule(dynamic, 64) if (n >= 4096)
  for (int64_t i = 0; i < n; ++i) {
    const LineSpan& l = lines[i];
    const char* b = buf.data() + l.begin;
    const char* e = buf.data() + l.end;
    try {
      // A row spanning lines that nests too deep is most likely many rows each left open on its
      // line (their depths add up): say so, at its first line, before the depth check below
      // names a line far into the file.
      if (std::memchr(b, '\n', e - b) != nullptr) {
        if (const auto deep = find_too_deep_json(std::string_view(b, e - b))) {
          const Position p = position(buf, l, l.begin + *deep);
          err.offer(i,
                    fmt::format("{}:{}:{}: invalid JSON: the object that starts here is not "
                                "closed on its line, and read on as an object spanning lines "
                                "it nests deeper than {} at line {}, column {}",
                                file, l.line, l.column + 1, kMaxJsonDepth, p.line, p.column + 1));
          continue;
        }
      }
      // Refuses a key given twice (HF datasets' JSON reader, pyarrow, refuses such a row: "Column
      // ... was specified twice in row ...") and nesting deeper than kMaxJsonDepth.
      rows[i] = parse_data_json(std::string_view(b, e - b), [&](std::string_view t) {
        return JsonKeyTracker(t, file, l.line, fmt::format("row {}: ", i));
      });
      if (!rows[i].is_object()) {
        err.offer(i, fmt::format("{}:{}: row {} is a JSON {}, expected an object", file, l.line, i,
                                 rows[i].type_name()));
      }
    } catch (const Json::parse_error& ex) {
      const std::string_view text(b, e - b);
      if (auto bad = find_invalid_utf8(text)) {
        const Position p = position(buf, l, l.begin + *bad);
        err.offer(i, fmt::format("{}:{}: row {}: invalid UTF-8 at byte offset {} of the line "
                                 "(byte {} of the file)",
                                 file, p.line, i, p.column, l.begin + *bad));
      } else {
        // ex.byte: 1-based, the byte the parser stopped at (one past the range at its end).
        const Position p = position(buf, l, l.begin + ex.byte - std::min<size_t>(ex.byte, 1));
        if (p.line == l.line) {
          err.offer(i, fmt::format(
                           "{}:{}:{}: invalid JSON: {}{}", file, p.line, p.column + 1,
                           parse_reason(ex.what()),
                           cr_only_hint(std::string_view(buf).substr(p.line_begin), p.column + 1)));
        } else {  // an object left open on its line (a broken row, or one spanning lines)
          err.offer(i, fmt::format("{}:{}:{}: invalid JSON: the object that starts here is not "
                                   "closed on its line, and read on as an object spanning lines "
                                   "it fails at line {}, column {}: {}",
                                   file, l.line, l.column + 1, p.line, p.column + 1,
                                   parse_reason(ex.what())));
        }
      }
    } catch (const Error& ex) {
      err.offer(i, ex.what());
    }
  }
  if (err.key != INT64_MAX) {
    throw Error(err.message);
  }
  if (row_lines != nullptr) {
    row_lines->clear();
    for (const LineSpan& l : lines) row_lines->push_back(l.line);
  }
  return rows;
}

// The 1-based line of each element's first byte in a JSON array `buf` already parsed (so well
// formed): a scan that skips strings and counts depth.
std::vector<int64_t> array_element_lines(const std::string& buf) {
  std::vector<int64_t> out;
  int64_t line = 1;
  int depth = 0;
  JsonStringState str;
  for (const char c : buf) {
    if (c == '\n') ++line;  // never inside a string of well-formed JSON
    if (str.feed(c)) continue;
    if (c == '{' || c == '[') {
      if (depth == 1) out.push_back(line);
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return out;
}

// HF datasets' json loader: a file's columns are the union of every row's keys, in the order they
// first appear (checked with datasets 4: `{"a"}`, `{"b", "a"}` gives columns a, b), and a row that
// lacks a key has null there. Row 0 — where TRL decides the dataset's kind and the
// completion_only_loss default (next(iter(dataset))) — is rewritten to have every column, in that
// order. Later rows keep their own keys: the row readers treat an absent column as they treat a
// null one (both an error where the kind needs a value, both "none" for an optional column), and
// filling every row of a sparse file with nulls would multiply its memory (one row with 20 extra
// keys in 300k rows: ×2.7).
void unify_columns(std::vector<Json>& rows) {
  if (rows.empty()) return;
  std::vector<std::string> columns;
  std::unordered_set<std::string> seen;
  for (const Json& r : rows)
    for (const auto& [key, value] : r.items())
      if (seen.insert(key).second) columns.push_back(key);
  Json& r0 = rows.front();
  bool same = r0.size() == columns.size();
  size_t k = 0;
  for (auto it = r0.begin(); same && it != r0.end(); ++it, ++k) same = it.key() == columns[k];
  if (same) return;
  Json u = Json::object();
  for (const std::string& c : columns) {
    const auto it = r0.find(c);
    u[c] = it == r0.end() ? Json() : std::move(*it);
  }
  r0 = std::move(u);
}

// The 0-based row (element of the top-level array) that byte `offset` of `buf` lies in.
int64_t row_at(const std::string& buf, size_t offset) {
  RowCounter counter;
  Json::sax_parse(std::string_view(buf).substr(0, offset), &counter);
  return counter.count - 1;
}

std::vector<Json> parse_array(const std::string& buf, const std::string& file,
                              std::vector<int64_t>* row_lines) {
  if (const auto deep = find_too_deep_json(buf))
    fail("{}:{}: row {}: JSON nesting depth exceeds {}", file, line_of(buf, *deep),
         row_at(buf, *deep), kMaxJsonDepth);
  Json all;
  try {
    all = parse_data_json(buf, [&](std::string_view t) { return JsonKeyTracker(t, file); });
  } catch (const Json::parse_error& ex) {
    if (auto bad = find_invalid_utf8(buf)) {
      fail("{}:{}: row {}: invalid UTF-8 at byte offset {} of the file", file, line_of(buf, *bad),
           row_at(buf, *bad), *bad);
    }
    const size_t at = ex.byte > 0 ? ex.byte - 1 : 0;
    const size_t line_start = buf.rfind('\n', at == 0 ? 0 : at - 1);
    const size_t col = line_start == std::string::npos ? at + 1 : at - line_start;
    fail("{}:{}:{}: invalid JSON: {}", file, line_of(buf, at), col, parse_reason(ex.what()));
  }
  if (!all.is_array()) fail("{}: expected a JSON array of row objects", file);
  auto& arr = all.get_ref<Json::array_t&>();
  for (size_t i = 0; i < arr.size(); ++i) {
    if (!arr[i].is_object()) {
      fail("{}: row {} is a JSON {}, expected an object", file, i, arr[i].type_name());
    }
  }
  if (row_lines != nullptr) *row_lines = array_element_lines(buf);
  return std::vector<Json>(std::make_move_iterator(arr.begin()),
                           std::make_move_iterator(arr.end()));
}

}  // namespace

std::string read_file_bytes(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open: {}", file.string(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    fail("{}: cannot stat: {}", file.string(), std::strerror(e));
  }
  std::string buf(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < buf.size()) {
    const ssize_t r = ::read(fd, buf.data() + got, buf.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const int e = errno;
      ::close(fd);
      fail("{}: read failed after {} of {} bytes: {}", file.string(), got, buf.size(),
           r == 0 ? "unexpected end of file" : std::strerror(e));
    }
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  return buf;
}

std::vector<Json> read_json_rows(const std::filesystem::path& file,
                                 std::vector<int64_t>* row_lines) {
  const std::string buf = read_file_bytes(file);
  check_no_nul(buf, file.string());  // the whole file: the rows are checked one by one after
  size_t first = 0;
  if (buf.compare(0, 3, "\xEF\xBB\xBF") == 0) first = 3;  // UTF-8 byte order mark
  while (first < buf.size() &&
         (buf[first] == ' ' || buf[first] == '\t' || buf[first] == '\r' || buf[first] == '\n')) {
    ++first;
  }
  std::vector<Json> rows = first < buf.size() && buf[first] == '['
                               ? parse_array(buf, file.string(), row_lines)
                               : parse_lines(buf, file.string(), row_lines);
  unify_columns(rows);
  return rows;
}

std::vector<Json> read_rows(const std::filesystem::path& file, std::vector<std::string>* left_out,
                            std::vector<int64_t>* row_lines) {
  const std::string ext = file.extension().string();
  if (row_lines != nullptr) row_lines->clear();
  if (ext == ".jsonl" || ext == ".json") return read_json_rows(file, row_lines);
  if (ext == ".parquet") return read_parquet_rows(file, left_out);
  if (ext == ".csv") return read_csv_rows(file, left_out);
  fail("{}: unsupported dataset file extension '{}'; expected .jsonl, .json, .parquet or .csv",
       file.string(), ext);
}

}  // namespace zt::data
