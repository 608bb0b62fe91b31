// JSON Lines / JSON array readers (nlohmann::ordered_json keeps keys in file order).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
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

bool is_blank(std::string_view s) {
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return false;
  }
  return true;
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

// The byte ranges [begin, end) of the rows of one JSON Lines line `text`: pyarrow's JSON reader
// (HF datasets' "json" builder) reads `{"a": 1} {"a": 2}` and `{"a": 1}{"a": 2}` on one line as
// two rows. The line is cut only where an object closes at depth 0 and the next non-blank byte
// opens another; the rest of the line after the last cut is one range, whose parse then says what
// is wrong with it. (An object spanning lines, which pyarrow also reads, is refused.)
std::vector<std::pair<size_t, size_t>> line_rows(std::string_view text) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t start = 0, depth = 0;
  bool in_string = false, escaped = false;
  const auto whole = [&] {
    out.emplace_back(start, text.size());
    return out;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return whole();
      if (--depth == 0 && c == '}') {
        size_t next = i + 1;
        while (next < text.size() &&
               (text[next] == ' ' || text[next] == '\t' || text[next] == '\r'))
          ++next;
        if (next == text.size()) break;
        if (text[next] != '{') return whole();
        out.emplace_back(start, i + 1);
        start = next;
        i = next - 1;
      }
    }
  }
  return whole();
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
  std::vector<LineSpan> lines;
  int64_t line_no = 0;
  // A UTF-8 byte order mark is no part of line 1, which may then be blank (an editor's BOM and
  // empty first line).
  const size_t start = buf.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  for (size_t pos = start; pos < buf.size();) {
    size_t nl = buf.find('\n', pos);
    if (nl == std::string::npos) nl = buf.size();
    ++line_no;
    if (!is_blank(std::string_view(buf).substr(pos, nl - pos))) lines.push_back({pos, nl, line_no});
    pos = nl + 1;
  }
  // Several rows on one line are each a row (line_rows); most lines hold one.
  std::vector<std::vector<std::pair<size_t, size_t>>> cuts(lines.size());
  const int64_t n_lines = static_cast<int64_t>(lines.size());
#pragma omp parallel for schedule(dynamic, 256) if (n_lines >= 4096)
  for (int64_t i = 0; i < n_lines; ++i)
    cuts[i] =
        line_rows(std::string_view(buf).substr(lines[i].begin, lines[i].end - lines[i].begin));
  size_t n_rows = 0;
  for (const auto& c : cuts) n_rows += c.size();
  if (n_rows != lines.size()) {
    std::vector<LineSpan> spans;
    spans.reserve(n_rows);
    for (size_t i = 0; i < lines.size(); ++i)
      for (const auto& [b, e] : cuts[i])
        spans.push_back({lines[i].begin + b, lines[i].begin + e, lines[i].line, b});
    lines = std::move(spans);
  }
  std::vector<Json> rows(lines.size());
  FirstError err;
  const int64_t n = static_cast<int64_t>(lines.size());
#pragma omp parallel for schedule(dynamic, 64) if (n >= 4096)
  for (int64_t i = 0; i < n; ++i) {
    const LineSpan& l = lines[i];
    const char* b = buf.data() + l.begin;
    const char* e = buf.data() + l.end;
    try {
      // Refuses a key given twice (HF datasets' JSON reader, pyarrow, refuses such a row: "Column
      // ... was specified twice in row ...") and nesting deeper than kMaxJsonDepth.
      JsonKeyTracker keys(std::string_view(b, e - b), file, l.line, fmt::format("row {}: ", i));
      rows[i] = parse_json_tracked(std::string_view(b, e - b), keys);
      if (!rows[i].is_object()) {
        err.offer(i, fmt::format("{}:{}: row {} is a JSON {}, expected an object", file, l.line, i,
                                 rows[i].type_name()));
      }
    } catch (const Json::parse_error& ex) {
      const std::string_view text(b, e - b);
      if (auto bad = find_invalid_utf8(text)) {
        err.offer(i, fmt::format("{}:{}: row {}: invalid UTF-8 at byte offset {} of the line "
                                 "(byte {} of the file)",
                                 file, l.line, i, l.column + *bad, l.begin + *bad));
      } else {
        err.offer(i, fmt::format("{}:{}:{}: invalid JSON: {}{}", file, l.line, l.column + ex.byte,
                                 parse_reason(ex.what()),
                                 cr_only_hint(std::string_view(b - l.column, l.column + (e - b)),
                                              l.column + ex.byte)));
      }
    } catch (const Error& ex) {
      err.offer(i, ex.what());
    }
  }
  if (err.key != INT64_MAX) {
    // A pretty-printed single object fails on its first line; say what the file really is.
    // (One line holds no pretty-printed object: its error is the row's own.)
    if (lines.size() > 1 && buf[lines[0].begin] == '{' && !find_too_deep_json(buf)) {
      Json whole = Json::parse(buf, nullptr, /*allow_exceptions=*/false);
      if (whole.is_object()) {
        fail(
            "{}: the file holds one JSON object; expected one object per line (JSON Lines) or an "
            "array of row objects",
            file);
      }
    }
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
  bool in_string = false;
  for (size_t i = 0; i < buf.size(); ++i) {
    const char c = buf[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (c == '\\') {
        ++i;  // an escape is two bytes, neither a quote nor a newline that counts
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
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
    JsonKeyTracker keys(buf, file);
    all = parse_json_tracked(buf, keys);
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
  check_no_nul(buf, file.string());  // the whole file: its lines' nesting is counted line by line
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
