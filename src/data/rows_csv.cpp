// CSV reader: a `.csv` file read as HF datasets' csv builder reads it. datasets (4.8.5) calls
// `pandas.read_csv(file, iterator=True, chunksize=10_000)` with pandas' defaults, turns each chunk
// into Arrow with `pa.Table.from_pandas` and casts every later chunk to the first chunk's schema.
// Here: a quote-aware splitter with pandas' C tokenizer rules (split_records), pandas' header
// naming (column_names), pandas' per-chunk type inference (infer_column), Arrow's cast kernel for
// the later chunks (as datasets' table_cast), then arrow_table_rows. Goldens:
// tools/make_csv_goldens.py → tests/data/csv/pandas_csv_cases.json.
#include <arrow/api.h>
#include <arrow/compute/api.h>
#include <arrow/compute/initialize.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <string_view>

#include "core/error.h"
#include "data/arrow_rows.h"
#include "data/rows.h"
#include "data/utf8.h"

namespace zt::data {
namespace {

// Rows per chunk of datasets' csv builder (`pd.read_csv(..., chunksize=10_000)`): types are
// inferred per chunk; blank and whitespace-only lines are not rows and do not count.
constexpr int64_t kCsvChunkRows = 10000;

// pandas' default NA spellings (`pandas._libs.parsers.STR_NA_VALUES`, pandas 3.1), matched
// exactly (no trimming, case-sensitive), quoted or not.
constexpr std::array<std::string_view, 19> kNaValues = {
    "",     "#N/A", "#N/A N/A", "#NA",  "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A",  "NA",       "NULL", "NaN",     "None",     "n/a",  "nan",  "null"};

bool is_na(std::string_view s) {
  return std::find(kNaValues.begin(), kNaValues.end(), s) != kNaValues.end();
}

// One record of the file: its fields, and the 1-based line it starts on.
struct Record {
  std::vector<std::string> fields;
  int64_t line = 0;
};

// Splits `bytes` into records as pandas' C tokenizer does with read_csv's defaults (delimiter ',',
// quotechar '"' with doubled quotes, no escape or comment character, skip_blank_lines): a leading
// UTF-8 BOM is dropped; "\n", "\r\n" and a lone "\r" end a line; a line that is empty or holds
// only spaces and tabs is no record; a field starting with '"' is quoted (commas and line breaks
// inside are text, "" is one quote) and what follows its closing quote up to the next comma is
// appended as text; a quote inside an unquoted field is text. Throws zt::Error naming `file` and
// the line for a quoted field the file ends inside (pandas: "EOF inside string").
std::vector<Record> split_records(std::string_view bytes, const std::string& file) {
  std::vector<Record> out;
  size_t p = 0;
  const size_t n = bytes.size();
  if (bytes.substr(0, 3) == "\xEF\xBB\xBF") p = 3;
  int64_t line = 1;
  auto at_eol = [&](size_t q) { return q >= n || bytes[q] == '\n' || bytes[q] == '\r'; };
  auto eat_eol = [&](size_t& q) {  // at a line end (or the file's end): past it
    if (q >= n) return;
    if (bytes[q] == '\r' && q + 1 < n && bytes[q + 1] == '\n') ++q;
    ++q;
    ++line;
  };
  while (p < n) {
    size_t q = p;
    while (q < n && (bytes[q] == ' ' || bytes[q] == '\t')) ++q;
    if (at_eol(q)) {  // blank or whitespace-only line
      p = q;
      eat_eol(p);
      continue;
    }
    Record rec;
    rec.line = line;
    while (true) {
      std::string field;
      if (p < n && bytes[p] == '"') {
        const int64_t quote_line = line;
        ++p;
        while (true) {
          if (p >= n)
            fail(
                "{}: line {}: the file ends inside a quoted field that starts there (pandas: EOF "
                "inside string)",
                file, quote_line);
          const char c = bytes[p];
          if (c == '"') {
            if (p + 1 < n && bytes[p + 1] == '"') {
              field += '"';
              p += 2;
              continue;
            }
            ++p;
            break;
          }
          if (c == '\n' || (c == '\r' && !(p + 1 < n && bytes[p + 1] == '\n'))) ++line;
          field += c;
          ++p;
        }
      }
      while (p < n && bytes[p] != ',' && bytes[p] != '\n' && bytes[p] != '\r') field += bytes[p++];
      rec.fields.push_back(std::move(field));
      if (p < n && bytes[p] == ',') {
        ++p;
        continue;
      }
      eat_eol(p);
      break;
    }
    out.push_back(std::move(rec));
  }
  return out;
}

// Column names from the header record as pandas' C parser gives them: an empty name is
// "Unnamed: I" (I its 0-based column index); a name given before is renamed "NAME.K" with the
// first K that no column is named yet, named columns first and then the unnamed ones (pandas
// `mangle_dupe_names`: x,x,x.1 → x, x.2, x.1).
std::vector<std::string> column_names(const std::vector<std::string>& header) {
  std::vector<std::string> names = header;
  std::vector<size_t> order, unnamed;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty()) {
      names[i] = fmt::format("Unnamed: {}", i);
      unnamed.push_back(i);
    } else {
      order.push_back(i);
    }
  }
  order.insert(order.end(), unnamed.begin(), unnamed.end());
  auto named_now = [&](const std::string& s) {
    return std::find(names.begin(), names.end(), s) != names.end();
  };
  std::map<std::string, int64_t> counts;
  for (const size_t i : order) {
    const std::string old = names[i];
    std::string col = old;
    int64_t cur = counts.count(col) ? counts[col] : 0;
    while (cur > 0) {
      counts[old] = cur + 1;
      col = fmt::format("{}.{}", old, cur);
      if (named_now(col))
        ++cur;
      else
        cur = counts.count(col) ? counts[col] : 0;
    }
    names[i] = col;
    counts[col] = cur + 1;
  }
  return names;
}

// The text a number may be surrounded by: pandas' number parsers skip leading and trailing ASCII
// whitespace (" 5 " is 5; text stays as written).
std::string_view trim_space(std::string_view s) {
  auto sp = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  };
  while (!s.empty() && sp(s.front())) s.remove_prefix(1);
  while (!s.empty() && sp(s.back())) s.remove_suffix(1);
  return s;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// An integer as pandas' int parser reads it: [+-]digits (leading zeros allowed), whitespace
// around. `negative` and `magnitude` (saturated at UINT64_MAX; `overflow` beyond it).
struct IntToken {
  bool negative = false, overflow = false;
  uint64_t magnitude = 0;
};
std::optional<IntToken> parse_int(std::string_view s) {
  s = trim_space(s);
  IntToken t;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    t.negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (!all_digits(s)) return std::nullopt;
  for (const char c : s) {
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (t.magnitude > (std::numeric_limits<uint64_t>::max() - d) / 10) {
      t.overflow = true;
      t.magnitude = std::numeric_limits<uint64_t>::max();
      break;
    }
    t.magnitude = t.magnitude * 10 + d;
  }
  return t;
}

constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

bool fits_int64(const IntToken& t) {
  return !t.overflow && (t.negative ? t.magnitude <= kInt64Max + 1 : t.magnitude <= kInt64Max);
}

int64_t to_int64(const IntToken& t) {
  if (!t.negative) return static_cast<int64_t>(t.magnitude);
  return t.magnitude == kInt64Max + 1 ? std::numeric_limits<int64_t>::min()
                                      : -static_cast<int64_t>(t.magnitude);
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x | 0x20) == y;  // b is lower case letters
         });
}

// A float as pandas' float parser reads it: [+-] then "inf" or "infinity" (any case), or digits
// with an optional '.' (".5", "5." included) and an optional exponent e[+-]digits; whitespace
// around. "nan" is no float here (pandas reads its NA spellings as NA first; "+nan" stays text).
// The value is correctly rounded (strtod).
std::optional<double> parse_float(std::string_view s) {
  s = trim_space(s);
  std::string_view body = s;
  bool negative = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (iequals(body, "inf") || iequals(body, "infinity"))
    return negative ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  size_t i = 0, digits = 0;
  while (i < body.size() && body[i] >= '0' && body[i] <= '9') ++i, ++digits;
  if (i < body.size() && body[i] == '.') {
    ++i;
    while (i < body.size() && body[i] >= '0' && body[i] <= '9') ++i, ++digits;
  }
  if (digits == 0) return std::nullopt;
  if (i < body.size() && (body[i] == 'e' || body[i] == 'E')) {
    ++i;
    if (i < body.size() && (body[i] == '+' || body[i] == '-')) ++i;
    if (!all_digits(body.substr(i))) return std::nullopt;
    i = body.size();
  }
  if (i != body.size()) return std::nullopt;
  const std::string text(s);
  return std::strtod(text.c_str(), nullptr);  // ±HUGE_VAL beyond double's range, as pandas' inf
}

// pandas' bool spellings: "true" / "false" in any case, nothing around.
std::optional<bool> parse_bool(std::string_view s) {
  if (iequals(s, "true")) return true;
  if (iequals(s, "false")) return false;
  return std::nullopt;
}

// One column of one chunk: each row's field, nullopt where the row is shorter than the header.
using ChunkColumn = std::vector<std::optional<std::string>>;

template <typename Builder, typename T>
void append(Builder& b, const std::optional<T>& v) {
  arrow::Status st = v ? b.Append(*v) : b.AppendNull();
  if (!st.ok()) fail("CSV: Arrow builder: {}", st.message());
}

template <typename Builder>
std::shared_ptr<arrow::Array> finish(Builder& b) {
  std::shared_ptr<arrow::Array> a;
  arrow::Status st = b.Finish(&a);
  if (!st.ok()) fail("CSV: Arrow builder: {}", st.message());
  return a;
}

struct Where {
  const std::string& file;
  const std::string& column;
  int64_t first_row;                  // 0-based row of the chunk's first row
  const std::vector<int64_t>& lines;  // 1-based line of each row of the chunk
};

// One chunk's column as pandas.read_csv infers it and pa.Table.from_pandas converts it (checked
// against pandas 3.1 / datasets 4.8.5): NA spellings and missing fields are null; then the
// non-null values all integers → int64 (with a null: float64, as pandas' ints cannot hold NaN;
// beyond int64 and all ≥ 0 without nulls: uint64), all numbers → float64, all "true"/"false" (any
// case) → bool (nulls kept), no value at all → float64 of nulls, else text (large_string, as pandas
// 3's str dtype) holding every value as written. Throws zt::Error naming file, line, row and
// column for an integer below int64's or above uint64's range (pandas hands datasets Python ints
// Arrow cannot convert: "Python int too large to convert to C long").
std::shared_ptr<arrow::Array> infer_column(const ChunkColumn& col, const Where& w) {
  const size_t n = col.size();
  std::vector<bool> null(n);
  size_t values = 0;
  bool all_int = true, all_float = true, all_bool = true, any_big = false, all_uint = true;
  std::optional<size_t> out_of_range;
  for (size_t i = 0; i < n; ++i) {
    null[i] = !col[i] || is_na(*col[i]);
    if (null[i]) continue;
    ++values;
    const std::string& s = *col[i];
    if (all_int) {
      if (const auto t = parse_int(s)) {
        if (!fits_int64(*t)) any_big = true;
        if (t->negative && t->magnitude > 0) all_uint = false;
        if (t->overflow || (t->negative && t->magnitude > kInt64Max + 1))
          out_of_range = out_of_range.value_or(i);
      } else {
        all_int = false;
      }
    }
    if (all_float && !parse_float(s)) all_float = false;
    if (all_bool && !parse_bool(s)) all_bool = false;
  }
  const bool any_null = values < n;
  if (values == 0) {
    arrow::DoubleBuilder b;
    for (size_t i = 0; i < n; ++i) append(b, std::optional<double>());
    return finish(b);
  }
  if (all_int && !any_big && !any_null) {
    arrow::Int64Builder b;
    for (size_t i = 0; i < n; ++i) append(b, std::optional<int64_t>(to_int64(*parse_int(*col[i]))));
    return finish(b);
  }
  if (all_int && any_big && !any_null) {
    if (all_uint && !out_of_range) {
      arrow::UInt64Builder b;
      for (size_t i = 0; i < n; ++i)
        append(b, std::optional<uint64_t>(parse_int(*col[i])->magnitude));
      return finish(b);
    }
    if (out_of_range) {
      const size_t i = *out_of_range;
      fail(
          "{}: line {} (row {}), column '{}': integer {} is beyond 64 bits (HF datasets fails on "
          "it: pandas reads it as a Python int that Arrow cannot convert)",
          w.file, w.lines[i], w.first_row + static_cast<int64_t>(i), w.column, *col[i]);
    }
    // above int64 and negative values together: pandas keeps the column as text
  } else if (all_float && !(all_int && any_big)) {
    arrow::DoubleBuilder b;
    for (size_t i = 0; i < n; ++i)
      append(b, null[i] ? std::optional<double>() : parse_float(*col[i]));
    return finish(b);
  } else if (all_bool) {
    arrow::BooleanBuilder b;
    for (size_t i = 0; i < n; ++i) append(b, null[i] ? std::optional<bool>() : parse_bool(*col[i]));
    return finish(b);
  }
  arrow::LargeStringBuilder b;
  for (size_t i = 0; i < n; ++i)
    append(b,
           null[i] ? std::optional<std::string_view>() : std::optional<std::string_view>(*col[i]));
  return finish(b);
}

// Arrow's compute functions live in libarrow_compute, registered once per process.
void init_arrow_compute() {
  static std::once_flag once;
  std::call_once(once, [] {
    arrow::Status st = arrow::compute::Initialize();
    if (!st.ok()) fail("Arrow compute initialisation failed: {}", st.message());
  });
}

// `a` (a later chunk's column) cast to `type` (the first chunk's), as datasets' table_cast casts
// it: Arrow's safe cast (an int64 or float64 or bool as text is Arrow's formatting: 3.1, 7, true; a
// float64 with a fraction to int64, or text to a number, fails). Throws zt::Error naming file,
// line, row, column and the value for the first value that does not cast.
std::shared_ptr<arrow::Array> cast_to_first(const std::shared_ptr<arrow::Array>& a,
                                            const std::shared_ptr<arrow::DataType>& type,
                                            const ChunkColumn& col, const Where& w,
                                            int64_t first_chunk_rows) {
  if (a->type()->Equals(*type)) return a;
  init_arrow_compute();
  const arrow::compute::CastOptions safe = arrow::compute::CastOptions::Safe();
  auto cast = arrow::compute::Cast(*a, type, safe);
  if (cast.ok()) return *cast;
  for (int64_t i = 0; i < a->length(); ++i) {
    auto one = arrow::compute::Cast(*a->Slice(i, 1), type, safe);
    if (one.ok()) continue;
    fail(
        "{}: line {} (row {}), column '{}': value '{}' cannot be read as {}, the type rows 0-{} "
        "give this column: HF datasets reads a CSV in chunks of {} rows, casts each later chunk "
        "to the first chunk's column types and fails here ({})",
        w.file, w.lines[static_cast<size_t>(i)], w.first_row + i, w.column,
        col[static_cast<size_t>(i)].value_or(""), type->ToString(), first_chunk_rows - 1,
        kCsvChunkRows, one.status().message());
  }
  fail("{}: column '{}': rows {}-{} cannot be cast to {}: {}", w.file, w.column, w.first_row,
       w.first_row + a->length() - 1, type->ToString(), cast.status().message());
}

}  // namespace

std::vector<Json> read_csv_rows(const std::filesystem::path& path,
                                std::vector<std::string>* left_out) {
  const std::string file = path.string();
  std::vector<Record> records = split_records(read_file_bytes(path), file);  // bytes freed here
  if (records.empty())
    fail(
        "{}: no header line: the CSV file is empty (HF datasets fails: No columns to parse from "
        "file)",
        file);
  for (const std::string& name : records[0].fields) {
    if (auto bad = find_invalid_utf8(name))  // a UTF-16 file, say: datasets fails to decode it
      fail(
          "{}: line {}: column name has invalid UTF-8 at byte offset {} (HF datasets reads CSV as "
          "UTF-8)",
          file, records[0].line, *bad);
  }
  const std::vector<std::string> names = column_names(records[0].fields);
  const size_t ncols = names.size();
  const int64_t num_rows = static_cast<int64_t>(records.size()) - 1;
  for (int64_t r = 0; r < num_rows; ++r) {
    const Record& rec = records[static_cast<size_t>(r) + 1];
    if (rec.fields.size() > ncols)
      fail(
          "{}: line {} (row {}) has {} fields, the header line has {}: HF datasets fails on it "
          "(pandas: \"Expected {} fields\"), or reads the first field as an index when every row "
          "has one more; zerotune refuses it (quote a field that holds a comma)",
          file, rec.line, r, rec.fields.size(), ncols, ncols);
  }
  std::vector<arrow::ArrayVector> chunks(ncols);
  std::vector<std::shared_ptr<arrow::DataType>> types(ncols);
  int64_t first_chunk_rows = 0;
  for (int64_t begin = 0; begin < num_rows; begin += kCsvChunkRows) {
    const int64_t end = std::min(num_rows, begin + kCsvChunkRows);
    std::vector<int64_t> lines;
    for (int64_t r = begin; r < end; ++r) lines.push_back(records[static_cast<size_t>(r) + 1].line);
    for (size_t c = 0; c < ncols; ++c) {
      ChunkColumn col;
      col.reserve(static_cast<size_t>(end - begin));
      for (int64_t r = begin; r < end; ++r) {
        auto& fields = records[static_cast<size_t>(r) + 1].fields;
        if (c < fields.size())
          col.emplace_back(std::move(fields[c]));
        else
          col.emplace_back(std::nullopt);  // a short row: pandas fills NaN
      }
      const Where w{file, names[c], begin, lines};
      std::shared_ptr<arrow::Array> a = infer_column(col, w);
      if (begin == 0) {
        types[c] = a->type();
        first_chunk_rows = end;
      } else {
        a = cast_to_first(a, types[c], col, w, first_chunk_rows);
      }
      chunks[c].push_back(std::move(a));
    }
  }
  std::vector<Record>().swap(records);  // the fields now live in the Arrow arrays alone
  std::vector<std::shared_ptr<arrow::Field>> fields;
  std::vector<std::shared_ptr<arrow::ChunkedArray>> columns;
  for (size_t c = 0; c < ncols; ++c) {
    // A header-only file: no chunk gives a type; the columns hold no rows.
    const auto type = types[c] ? types[c] : arrow::large_utf8();
    fields.push_back(arrow::field(names[c], type));
    columns.push_back(std::make_shared<arrow::ChunkedArray>(chunks[c], type));
  }
  return arrow_table_rows(arrow::Table::Make(arrow::schema(fields), columns, num_rows), file,
                          left_out);
}

}  // namespace zt::data
