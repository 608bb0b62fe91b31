// Parquet reader: Arrow C++ (from the pyarrow wheel) decodes the file into an arrow::Table, which
// arrow_table_rows turns into one ordered JSON object per row, keys in column order (the CSV
// reader, rows_csv.cpp, builds its table itself and shares that step).
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/util/float16.h>
#include <parquet/arrow/reader.h>

#include <climits>
#include <map>
#include <optional>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "data/arrow_rows.h"
#include "data/rows.h"
#include "data/utf8.h"

namespace zt::data {
namespace {

// An Arrow array with its nested arrays resolved up front. Arrow boxes struct fields and
// dictionaries lazily and not thread-safely, so the tree is built on one thread and then only read.
struct Node {
  std::shared_ptr<arrow::Array> array;
  std::vector<std::string> names;  // struct field names
  std::vector<Node> children;      // list: values; struct: fields; map: keys, items; dict: values
};

// HF datasets (Arrow) refuses an ambiguous name ("Multiple matches for FieldRef.Name(prompt)");
// so does zerotune, instead of keeping one of the two values: throws zt::Error
//   "FILE: WHAT 'NAME' occurs N times"
// for the first name in `names` given more than once.
void check_unique_names(const std::vector<std::string>& names, const std::string& file,
                        const std::string& what) {
  std::map<std::string, int> count;
  for (const auto& n : names) ++count[n];
  for (const auto& n : names)
    if (count[n] > 1) fail("{}: {} '{}' occurs {} times", file, what, n, count[n]);
}

// Whether zerotune reads arrays of this type (build_node resolves the nested ones; value_at reads
// the scalars).
bool readable_type(arrow::Type::type t) {
  switch (t) {
    case arrow::Type::LIST:
    case arrow::Type::LARGE_LIST:
    case arrow::Type::FIXED_SIZE_LIST:
    case arrow::Type::MAP:
    case arrow::Type::STRUCT:
    case arrow::Type::DICTIONARY:
    case arrow::Type::NA:
    case arrow::Type::BOOL:
    case arrow::Type::INT8:
    case arrow::Type::INT16:
    case arrow::Type::INT32:
    case arrow::Type::INT64:
    case arrow::Type::UINT8:
    case arrow::Type::UINT16:
    case arrow::Type::UINT32:
    case arrow::Type::UINT64:
    case arrow::Type::HALF_FLOAT:
    case arrow::Type::FLOAT:
    case arrow::Type::DOUBLE:
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING:
    case arrow::Type::STRING_VIEW:
      return true;
    default:
      return false;
  }
}

// Where in a column of Arrow type `type` (the column's name: `path`) the first type zerotune does
// not read sits, and that type: {"image.bytes", "binary"} for HF datasets' Image feature
// struct<bytes: binary, path: string>, {"stamps[]", "timestamp[us]"} for list<timestamp>. Nullopt
// when zerotune reads all of it.
std::optional<std::pair<std::string, std::string>> unreadable_part(const arrow::DataType& type,
                                                                   const std::string& path) {
  switch (type.id()) {
    case arrow::Type::LIST:
    case arrow::Type::LARGE_LIST:
    case arrow::Type::FIXED_SIZE_LIST:
      return unreadable_part(*type.field(0)->type(), path + "[]");
    case arrow::Type::MAP: {
      const auto& m = static_cast<const arrow::MapType&>(type);
      if (auto k = unreadable_part(*m.key_type(), path + ".key")) return k;
      return unreadable_part(*m.item_type(), path + ".value");
    }
    case arrow::Type::STRUCT:
      for (const auto& f : type.fields())
        if (auto p = unreadable_part(*f->type(), path + "." + f->name())) return p;
      return std::nullopt;
    case arrow::Type::DICTIONARY:
      return unreadable_part(*static_cast<const arrow::DictionaryType&>(type).value_type(), path);
    default:
      if (readable_type(type.id())) return std::nullopt;
      return std::make_pair(path, type.ToString());
  }
}

Node build_node(const std::shared_ptr<arrow::Array>& a, const std::string& file,
                const std::string& column) {
  Node n{a, {}, {}};
  switch (a->type_id()) {
    case arrow::Type::LIST:
      n.children.push_back(
          build_node(static_cast<const arrow::ListArray&>(*a).values(), file, column));
      break;
    case arrow::Type::LARGE_LIST:
      n.children.push_back(
          build_node(static_cast<const arrow::LargeListArray&>(*a).values(), file, column));
      break;
    case arrow::Type::FIXED_SIZE_LIST:
      n.children.push_back(
          build_node(static_cast<const arrow::FixedSizeListArray&>(*a).values(), file, column));
      break;
    case arrow::Type::MAP: {
      const auto& m = static_cast<const arrow::MapArray&>(*a);
      n.children.push_back(build_node(m.keys(), file, column));
      n.children.push_back(build_node(m.items(), file, column));
      break;
    }
    case arrow::Type::STRUCT: {
      const auto& s = static_cast<const arrow::StructArray&>(*a);
      for (int k = 0; k < s.num_fields(); ++k) {
        n.names.push_back(s.struct_type()->field(k)->name());
        n.children.push_back(build_node(s.field(k), file, column));
      }
      check_unique_names(n.names, file, fmt::format("column '{}': struct field", column));
      break;
    }
    case arrow::Type::DICTIONARY:
      n.children.push_back(
          build_node(static_cast<const arrow::DictionaryArray&>(*a).dictionary(), file, column));
      break;
    default:
      if (!readable_type(a->type_id()))
        fail(
            "{}: column '{}' has Arrow type {}, which zerotune does not read (supported: string, "
            "integer, float, bool, null, list, struct, map, dictionary)",
            file, column, a->type()->ToString());
      break;  // a scalar: read by value_at
  }
  return n;
}

struct Where {
  const std::string& file;
  const std::string& column;
  int64_t row;  // 0-based row of the file
};

Json string_value(std::string_view s, const Where& w) {
  if (auto bad = find_invalid_utf8(s)) {
    fail("{}: row {}, column '{}': invalid UTF-8 at byte offset {} of the string", w.file, w.row,
         w.column, *bad);
  }
  return Json(std::string(s));
}

template <typename ListT>
Json list_value(const Node& n, int64_t i, const Where& w);

Json value_at(const Node& n, int64_t i, const Where& w) {
  const arrow::Array& a = *n.array;
  if (a.IsNull(i)) return nullptr;
  switch (a.type_id()) {
    case arrow::Type::NA:
      return nullptr;
    case arrow::Type::BOOL:
      return static_cast<const arrow::BooleanArray&>(a).Value(i);
    case arrow::Type::INT8:
      return static_cast<int64_t>(static_cast<const arrow::Int8Array&>(a).Value(i));
    case arrow::Type::INT16:
      return static_cast<int64_t>(static_cast<const arrow::Int16Array&>(a).Value(i));
    case arrow::Type::INT32:
      return static_cast<int64_t>(static_cast<const arrow::Int32Array&>(a).Value(i));
    case arrow::Type::INT64:
      return static_cast<const arrow::Int64Array&>(a).Value(i);
    case arrow::Type::UINT8:
      return static_cast<uint64_t>(static_cast<const arrow::UInt8Array&>(a).Value(i));
    case arrow::Type::UINT16:
      return static_cast<uint64_t>(static_cast<const arrow::UInt16Array&>(a).Value(i));
    case arrow::Type::UINT32:
      return static_cast<uint64_t>(static_cast<const arrow::UInt32Array&>(a).Value(i));
    case arrow::Type::UINT64:
      return static_cast<const arrow::UInt64Array&>(a).Value(i);
    case arrow::Type::HALF_FLOAT:
      return arrow::util::Float16::FromBits(static_cast<const arrow::HalfFloatArray&>(a).Value(i))
          .ToDouble();
    case arrow::Type::FLOAT:
      return static_cast<double>(static_cast<const arrow::FloatArray&>(a).Value(i));
    case arrow::Type::DOUBLE:
      return static_cast<const arrow::DoubleArray&>(a).Value(i);
    case arrow::Type::STRING:
      return string_value(static_cast<const arrow::StringArray&>(a).GetView(i), w);
    case arrow::Type::LARGE_STRING:
      return string_value(static_cast<const arrow::LargeStringArray&>(a).GetView(i), w);
    case arrow::Type::STRING_VIEW:
      return string_value(static_cast<const arrow::StringViewArray&>(a).GetView(i), w);
    case arrow::Type::LIST:
      return list_value<arrow::ListArray>(n, i, w);
    case arrow::Type::LARGE_LIST:
      return list_value<arrow::LargeListArray>(n, i, w);
    case arrow::Type::FIXED_SIZE_LIST:
      return list_value<arrow::FixedSizeListArray>(n, i, w);
    case arrow::Type::MAP: {
      const auto& m = static_cast<const arrow::MapArray&>(a);
      Json out = Json::array();
      for (int64_t k = m.value_offset(i); k < m.value_offset(i) + m.value_length(i); ++k) {
        out.push_back(Json::array({value_at(n.children[0], k, w), value_at(n.children[1], k, w)}));
      }
      return out;
    }
    case arrow::Type::STRUCT: {
      Json out = Json::object();
      for (size_t k = 0; k < n.children.size(); ++k)
        out[n.names[k]] = value_at(n.children[k], i, w);
      return out;
    }
    case arrow::Type::DICTIONARY:
      return value_at(n.children[0], static_cast<const arrow::DictionaryArray&>(a).GetValueIndex(i),
                      w);
    default:
      fail("{}: column '{}': unexpected Arrow type {}", w.file, w.column, a.type()->ToString());
  }
}

template <typename ListT>
Json list_value(const Node& n, int64_t i, const Where& w) {
  const auto& l = static_cast<const ListT&>(*n.array);
  Json out = Json::array();
  const int64_t begin = l.value_offset(i), len = l.value_length(i);
  for (int64_t k = begin; k < begin + len; ++k) out.push_back(value_at(n.children[0], k, w));
  return out;
}

std::shared_ptr<arrow::Table> read_table(const std::string& file) {
  try {
    auto opened = arrow::io::ReadableFile::Open(file);
    if (!opened.ok()) fail("{}: cannot open: {}", file, opened.status().message());
    parquet::arrow::FileReaderBuilder builder;
    arrow::Status st = builder.Open(*opened);
    if (!st.ok()) fail("{}: not a readable parquet file: {}", file, st.message());
    parquet::ArrowReaderProperties props;
    props.set_use_threads(true);
    std::unique_ptr<parquet::arrow::FileReader> reader;
    st = builder.properties(props)->Build(&reader);
    if (!st.ok()) fail("{}: not a readable parquet file: {}", file, st.message());
    arrow::Result<std::shared_ptr<arrow::Table>> table = reader->ReadTable();
    if (!table.ok()) fail("{}: corrupt parquet data: {}", file, table.status().message());
    return *table;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // parquet::ParquetException and friends
    fail("{}: corrupt parquet file: {}", file, e.what());
  }
}

}  // namespace

std::vector<Json> read_parquet_rows(const std::filesystem::path& path,
                                    std::vector<std::string>* left_out) {
  const std::string file = path.string();
  return arrow_table_rows(read_table(file), file, left_out);
}

std::vector<Json> arrow_table_rows(const std::shared_ptr<arrow::Table>& table,
                                   const std::string& file, std::vector<std::string>* left_out) {
  check_unique_names(table->schema()->field_names(), file, "column");
  const int64_t num_rows = table->num_rows();
  std::vector<Json> rows(static_cast<size_t>(num_rows), Json::object());
  for (int c = 0; c < table->num_columns(); ++c) {
    const std::string& name = table->field(c)->name();
    // A column of a type zerotune does not read (a timestamp, a date, a decimal, bytes), or that
    // holds one at any depth (HF datasets' Image feature struct<bytes: binary, path: string>, a
    // list<timestamp>), is left out of the rows, as TRL never looks at columns other than the ones
    // its dataset kind names: naming such a column as data then finds no column of that name,
    // after this note.
    const arrow::DataType& type = *table->field(c)->type();
    if (const auto part = unreadable_part(type, name)) {
      const std::string where =
          part->first == name ? "" : fmt::format(" (it holds {} at {})", part->second, part->first);
      log::info(
          "{}: column '{}' (Arrow type {}) is not read{}: zerotune reads string, integer, float, "
          "bool, null, list, struct, map and dictionary columns, and leaves this one out of the "
          "rows",
          file, name, type.ToString(), where);
      if (left_out != nullptr) {
        left_out->push_back(part->first == name
                                ? fmt::format("{} ({})", name, part->second)
                                : fmt::format("{} ({} at {})", name, part->second, part->first));
      }
      continue;
    }
    int64_t base = 0;
    for (const auto& chunk : table->column(c)->chunks()) {
      const Node node = build_node(chunk, file, name);
      const int64_t len = chunk->length();
      int64_t err_row = INT64_MAX;
      std::string err_msg;
#pragma omp parallel for schedule(dynamic, 256) if (len >= 4096)
      for (int64_t i = 0; i < len; ++i) {
        try {
          Json v = value_at(node, i, Where{file, name, base + i});
          rows[base + i][name] = std::move(v);
        } catch (const std::exception& e) {
#pragma omp critical(zt_parquet_first_error)
          if (base + i < err_row) err_row = base + i, err_msg = e.what();
        }
      }
      if (err_row != INT64_MAX) throw Error(err_msg);
      base += len;
    }
  }
  return rows;
}

}  // namespace zt::data
