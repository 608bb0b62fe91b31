// The CSV reader against HF datasets 4.8.5 + pandas 3.1 (load_dataset("csv"): pandas.read_csv in
// chunks of 10,000 rows, each chunk's types inferred, later chunks cast to the first one's).
// Goldens: tools/make_csv_goldens.py → tests/data/csv/pandas_csv_cases.json.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "data/rows.h"
#include "test_util.h"

namespace zt::data {
namespace {

using zt::testing::error_of;
using zt::testing::TempDir;
using zt::testing::test_data;
using zt::testing::write_file;

const Json& goldens() {
  static const Json g = [] {
    std::ifstream in(test_data("csv/pandas_csv_cases.json"));
    std::stringstream ss;
    ss << in.rdbuf();
    return Json::parse(ss.str());
  }();
  return g;
}

// The generated cases' bytes: the C++ twin of chunk_case in tools/make_csv_goldens.py.
std::string chunk_case(const std::string& name) {
  std::string out;
  if (name == "chunk_str_then_num" || name == "chunk_str_then_bool") {
    out = "prompt,completion\n";
    for (int i = 0; i < 10000; ++i) out += fmt::format("Question {},answer {}\n", i, i);
    for (int i = 0; i < 10000; ++i) {
      out += name == "chunk_str_then_num"
                 ? fmt::format("Q{}: what number?,{}\n", i, i % 2 == 0 ? "3.10" : "007")
                 : fmt::format("Is {} even?,{}\n", i, i % 2 == 0 ? "True" : "False");
    }
  } else if (name == "chunk_num_then_str") {
    out = "prompt,completion\n";
    for (int i = 0; i < 10000; ++i) out += fmt::format("Q{},{}\n", i, i);
    for (int i = 0; i < 5; ++i) out += fmt::format("Q{},word{}\n", i, i);
  } else if (name == "chunk_empty_then_str_extra") {
    out = "prompt,completion,notes\n";
    for (int i = 0; i < 10000; ++i) out += fmt::format("Q{},A{},\n", i, i);
    for (int i = 0; i < 10; ++i) out += fmt::format("Q{},A{},checked by reviewer\n", i, i);
  } else if (name == "chunk_int_then_na") {
    out = "prompt,n\n";
    for (int i = 0; i < 10000; ++i) out += fmt::format("Q{},{}\n", i, i);
    for (int i = 0; i < 10; ++i) out += fmt::format("Q{},{}\n", i, i % 2 ? "" : std::to_string(i));
  } else if (name == "chunk_blank_lines") {
    out = "prompt,completion\n";
    for (int i = 0; i < 10000; ++i)
      out += fmt::format("Question {},answer {}\n{}", i, i, i % 1000 == 0 ? "\n  \n" : "");
    for (int i = 0; i < 3; ++i) out += fmt::format("Q{},00{}\n", i, i);
  } else {
    ADD_FAILURE() << "no recipe for generated case " << name;
  }
  return out;
}

// The error zerotune gives for each case datasets fails on or zerotune refuses (a substring, after
// the file name).
const std::map<std::string, std::string>& expected_errors() {
  static const std::map<std::string, std::string> e = {
      {"long_row", ": line 3 (row 1) has 3 fields, the header line has 2: "},
      {"index_col", ": line 2 (row 0) has 3 fields, the header line has 2: "},
      {"unterminated_quote",
       ": line 2: the file ends inside a quoted field that starts there (pandas: EOF inside "
       "string)"},
      {"empty_file", ": no header line: the CSV file is empty"},
      {"chunk_num_then_str",
       ": line 10002 (row 10000), column 'completion': value 'word0' cannot be read as int64, the "
       "type rows 0-9999 give this column: HF datasets reads a CSV in chunks of 10000 rows"},
      {"chunk_empty_then_str_extra",
       ": line 10002 (row 10000), column 'notes': value 'checked by reviewer' cannot be read as "
       "double, the type rows 0-9999 give this column"},
  };
  return e;
}

// The JSON kind a value of a column of Arrow type `type` has in zerotune's rows.
bool kind_matches(const Json& v, const std::string& type) {
  if (v.is_null()) return true;
  if (type == "int64" || type == "uint64") return v.is_number_integer();
  if (type == "double") return v.is_number_float();
  if (type == "bool") return v.is_boolean();
  if (type == "large_string") return v.is_string();
  return false;
}

// A golden value as zerotune's rows hold it ({"float": "inf"} is an infinite float).
Json golden_value(const Json& v) {
  if (v.is_object() && v.contains("float"))
    return v["float"] == "inf" ? std::numeric_limits<double>::infinity()
                               : -std::numeric_limits<double>::infinity();
  return v;
}

TEST(CsvPandas, EveryGoldenCase) {
  const Json& g = goldens();
  ASSERT_EQ(g["datasets"], "4.8.5");
  ASSERT_GE(g["cases"].size(), 40u);
  TempDir dir;
  for (const Json& c : g["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const auto file = dir / (name + ".csv");
    write_file(file,
               c.contains("generated") ? chunk_case(c["generated"]) : c["csv"].get<std::string>());
    const auto err = expected_errors().find(name);
    if (name == "header_only") {  // datasets: "corresponds to no data"; zerotune: no rows
      EXPECT_TRUE(read_rows(file).empty());
      continue;
    }
    if (c.contains("error") || c["zt_refuses"].get<bool>()) {
      ASSERT_NE(err, expected_errors().end()) << "no expected error for " << name;
      const std::string msg = error_of([&] { read_rows(file); });
      EXPECT_EQ(msg.rfind(file.string() + err->second, 0), 0u) << msg;
      continue;
    }
    ASSERT_EQ(err, expected_errors().end());
    const std::vector<Json> rows = read_rows(file);
    ASSERT_EQ(static_cast<int64_t>(rows.size()), c["num_rows"].get<int64_t>());
    const Json& columns = c["columns"];
    for (size_t r = 0; r < rows.size(); ++r) {
      ASSERT_EQ(rows[r].size(), columns.size()) << "row " << r;
      size_t k = 0;
      for (const auto& [key, v] : rows[r].items()) {
        ASSERT_EQ(key, columns[k].get<std::string>()) << "row " << r;
        ASSERT_TRUE(kind_matches(v, c["types"][k])) << "row " << r << " " << key << ": " << v;
        ++k;
      }
    }
    for (const auto& [r, want] : c["rows"].items()) {
      const Json& got = rows[std::stoul(r)];
      for (const auto& [key, v] : want.items()) {
        const Json w = golden_value(v);
        if (w.is_number_float()) {
          ASSERT_TRUE(got[key].is_number_float()) << "row " << r << " " << key;
          const double a = got[key].get<double>(), b = w.get<double>();
          EXPECT_EQ(a, b) << "row " << r << " " << key;
          EXPECT_EQ(std::signbit(a), std::signbit(b)) << "row " << r << " " << key;  // -0.0
        } else {
          EXPECT_EQ(got[key], w) << "row " << r << " " << key;
        }
      }
    }
  }
}

// The rules the goldens show, spelt out (the values datasets 4.8.5 gives).
TEST(CsvPandas, LaterChunkCastToFirstChunksTypes) {
  TempDir dir;
  write_file(dir / "a.csv", chunk_case("chunk_str_then_num"));
  const std::vector<Json> rows = read_rows(dir / "a.csv");
  ASSERT_EQ(rows.size(), 20000u);
  EXPECT_EQ(rows[9999]["completion"], "answer 9999");
  EXPECT_EQ(rows[10000]["completion"], "3.1");  // "3.10": float64 in chunk 2, cast to text
  EXPECT_EQ(rows[10001]["completion"], "7");    // "007": 7.0, float64 as all of chunk 2
  write_file(dir / "b.csv", chunk_case("chunk_str_then_bool"));
  EXPECT_EQ(read_rows(dir / "b.csv")[10000]["completion"], "true");
}

TEST(CsvPandas, HeaderNamesAsPandasMangles) {
  TempDir dir;
  write_file(dir / "a.csv", "x,x,x.1,,note,note,\n1,2,3,4,5,6,7\n");
  const std::vector<Json> rows = read_rows(dir / "a.csv");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0], Json::parse(R"({"x": 1, "x.2": 2, "x.1": 3, "Unnamed: 3": 4, "note": 5,
                                     "note.1": 6, "Unnamed: 6": 7})"));
}

TEST(CsvPandas, BlankShortRowsAndNaSpellings) {
  TempDir dir;
  write_file(dir / "a.csv", "prompt,completion,n\n \t\nq,None,1\n\nr,<NA>\ns,\"NA\",3\n  \n");
  const std::vector<Json> rows = read_rows(dir / "a.csv");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], Json::parse(R"({"prompt": "q", "completion": null, "n": 1.0})"));
  EXPECT_EQ(rows[1], Json::parse(R"({"prompt": "r", "completion": null, "n": null})"));
  EXPECT_TRUE(rows[0]["n"].is_number_float());  // ints with a null are float64 in pandas
}

}  // namespace
}  // namespace zt::data

namespace zt::data {
namespace {

// A UTF-16 file (datasets: "'utf-8' codec can't decode byte 0xff"): refused at its header.
TEST(CsvPandas, Utf16HeaderRefused) {
  TempDir dir;
  write_file(dir / "a.csv", std::string("\xFF\xFEp\0,\0q\0\n\0", 10));
  EXPECT_EQ(error_of([&] { read_rows(dir / "a.csv"); }),
            (dir / "a.csv").string() +
                ": line 1: column name has invalid UTF-8 at byte offset 0 (HF datasets reads CSV "
                "as UTF-8)");
}

}  // namespace
}  // namespace zt::data
