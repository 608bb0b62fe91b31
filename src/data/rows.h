// Dataset readers: every row of a JSON Lines, JSON array or Parquet file as a JSON object whose
// keys are in column (file) order, as HF `datasets` would present the row.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "io/json.h"

namespace zt::data {

// Reads all rows of `file`, dispatching on the extension:
// - `.jsonl`: one JSON object per non-blank line, or several side by side on one line (`{…} {…}`:
//   each a row, as pyarrow's JSON reader reads them; an object that spans lines is refused);
// - `.json`: a JSON array of objects, or JSON Lines when the file does not start with '[' (as HF
//   `datasets`' json loader accepts both);
// - `.parquet`: via Arrow C++; string, integer, float, bool, null, list, large_list,
//   fixed_size_list, struct (e.g. `list<struct<content, role>>` messages), map (as a list of
//   [key, value] pairs) and dictionary-encoded columns, any number of row groups and chunks; a
//   column of another type (timestamp, binary, decimal …), or holding one at any depth (an HF
//   Image feature `struct<bytes: binary, path: string>`), is left out of the rows with a note;
// - `.csv`: as read_csv_rows below (the users' sft.py loads csv by extension, as HF datasets).
// Rows are returned in file order. Throws zt::Error: malformed JSON → "FILE:LINE:COL: …" (JSON
// Lines: plus a hint naming CR-only line endings when the line holds a CR not followed by LF); a
// raw NUL byte → "FILE:LINE:COL: a NUL byte: …"; a row that is not an object; invalid UTF-8 →
// "FILE: row R …: invalid UTF-8 at byte offset B …" (row 0-based, as `dataset[R]`; JSON also names
// the line); unreadable/corrupt parquet → names the file and Arrow's reason; an unknown extension;
// a key given twice in a JSON row → "FILE:LINE: row R: duplicate key 'K' (first given at line
// L)"; a row nested deeper than kMaxJsonDepth → "FILE:LINE: row R: JSON nesting depth exceeds
// 1000"; a parquet column or struct field name given twice → "FILE: column 'C' occurs N times" /
// "FILE: column 'C': struct field 'F' occurs N times" (HF datasets refuses all of these, but for a
// key given twice in a `.json` array, which its pandas path reads keeping the last value: refused
// here all the same, as the row's meaning is unclear). JSON reads NaN, Infinity and -Infinity as
// numbers (Python's json.dump writes them; pyarrow reads them; in a `.json` array datasets' pandas
// path makes them null).
// `left_out`, when given, receives each parquet column left out, as "NAME (TYPE)" or "NAME (TYPE at
// PATH)", for the dataset-kind error to name.
// JSON row 0 has the columns HF `datasets`' json loader gives every row: the union of every row's
// keys, in the order they first appear, with null where row 0 lacks a key (pyarrow's JSON reader;
// checked with datasets 4 on .jsonl and array .json files), so TRL's `next(iter(dataset))` is row 0
// here. Later rows keep their own keys (an absent key reads as a null one: see unify_columns).
// `row_lines`, when given, receives the 1-based line where each JSON row starts (JSON Lines: its
// line; a JSON array: the line of its '{'), for errors to name; it is left empty for parquet and
// csv.
std::vector<Json> read_rows(const std::filesystem::path& file,
                            std::vector<std::string>* left_out = nullptr,
                            std::vector<int64_t>* row_lines = nullptr);

// The two halves of read_rows, callable directly (no extension check); `row_lines` as above.
std::vector<Json> read_json_rows(const std::filesystem::path& file,
                                 std::vector<int64_t>* row_lines = nullptr);
std::vector<Json> read_parquet_rows(const std::filesystem::path& file,
                                    std::vector<std::string>* left_out = nullptr);
// `.csv` as HF datasets' csv builder reads it (datasets 4.8.5: pandas.read_csv's defaults in chunks
// of 10,000 rows, each chunk's types inferred, later chunks cast to the first chunk's types):
// see rows_csv.cpp for the rules; goldens tools/make_csv_goldens.py. Errors, each naming the file
// and the line (and row, column, value where there is one): a row with more fields than the
// header, a quoted field the file ends in, an empty file, an integer beyond 64 bits, a later
// chunk's value that does not cast to the first chunk's type (datasets fails on all of these);
// invalid UTF-8 as the parquet reader.
std::vector<Json> read_csv_rows(const std::filesystem::path& file,
                                std::vector<std::string>* left_out = nullptr);

// The whole content of `file` as bytes. Throws zt::Error naming the file when it cannot be read.
std::string read_file_bytes(const std::filesystem::path& file);

}  // namespace zt::data
