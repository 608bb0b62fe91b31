// Dataset readers: JSON Lines, JSON arrays and Parquet against pyarrow's decoding of the same
// files, and the error messages for malformed input.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include <cmath>
#include <limits>

#include "data/rows.h"
#include "data/utf8.h"
#include "test_util.h"

namespace zt::data {
namespace {

using zt::testing::error_of;
using zt::testing::shared_data;
using zt::testing::TempDir;
using zt::testing::test_data;
using zt::testing::write_file;

std::vector<std::string> keys_of(const Json& row) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : row.items()) keys.push_back(k);
  return keys;
}

TEST(Utf8, FindsFirstInvalidByte) {
  EXPECT_EQ(find_invalid_utf8("plain ascii text, long enough for the fast path"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("h\xC3\xA9llo \xE4\xB8\xAD \xF0\x9F\x98\x80"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("abc\xFF"), 3u);
  EXPECT_EQ(find_invalid_utf8("ab\xC0\xAF"), 2u);                   // overlong '/'
  EXPECT_EQ(find_invalid_utf8("x\xED\xA0\x80"), 1u);                // surrogate U+D800
  EXPECT_EQ(find_invalid_utf8("0123456789\xF4\x90\x80\x80"), 10u);  // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("\xE4\xB8"), 0u);                     // truncated sequence
  EXPECT_EQ(find_invalid_utf8("a\x80"), 1u);                        // stray continuation byte
  EXPECT_EQ(find_invalid_utf8("abcdefgh\xC3\x28"), 8u);             // bad continuation
}

TEST(Readers, NoRobotsParquetEqualsPyarrowRows) {
  const auto rows = read_rows(shared_data("datasets/no_robots/test.parquet"));
  const auto expected = read_rows(shared_data("datasets/no_robots/test.expected_rows.jsonl"));
  ASSERT_EQ(rows.size(), 500u);
  ASSERT_EQ(expected.size(), 500u);
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i], expected[i]) << "row " << i;
  }
  // Keys in column order, messages as list<struct<content, role>>.
  EXPECT_EQ(keys_of(rows[0]),
            (std::vector<std::string>{"prompt", "prompt_id", "messages", "category"}));
  EXPECT_EQ(keys_of(rows[0]["messages"][0]), (std::vector<std::string>{"content", "role"}));
  EXPECT_EQ(rows[0]["messages"][1]["role"], "user");
  EXPECT_EQ(rows[0]["messages"][1]["content"], "Where did chocolate originate?");
}

TEST(Readers, EveryColumnTypeEqualsPyarrowRows) {
  const auto file = test_data("sft/types.parquet");
  // The fixture really has several row groups (read back as several chunks).
  EXPECT_EQ(parquet::ParquetFileReader::OpenFile(file.string())->metadata()->num_row_groups(), 4);
  const auto rows = read_rows(file);
  const auto expected = read_rows(test_data("sft/types.expected.jsonl"));
  ASSERT_EQ(rows.size(), 10u);
  ASSERT_EQ(expected.size(), 10u);
  for (size_t i = 0; i < rows.size(); ++i) ASSERT_EQ(rows[i], expected[i]) << "row " << i;
  EXPECT_EQ(keys_of(rows[0]),
            (std::vector<std::string>{"s", "ls", "i64", "i8", "u32", "f32", "f64", "b", "n", "l",
                                      "ll", "fl", "st", "messages", "cat", "m"}));
  EXPECT_EQ(rows[1]["f32"].get<double>(), static_cast<double>(0.1f));
  EXPECT_EQ(rows[1]["i64"].get<int64_t>(), -1099511627777);
  EXPECT_EQ(rows[9]["u32"].get<uint64_t>(), 4000000009u);
  EXPECT_EQ(rows[4]["cat"], "green");  // dictionary-encoded
  EXPECT_TRUE(rows[4]["s"].is_null());
  EXPECT_TRUE(rows[6]["st"].is_null());
  EXPECT_EQ(rows[1]["m"], Json::parse(R"([["k1", 1], ["k2", null]])"));
  EXPECT_EQ(rows[3]["fl"], Json::parse("[1.5, -0.75]"));
}

TEST(Readers, JsonArrayAndJsonLines) {
  const auto kto = read_rows(shared_data("datasets/messages/kto_en_demo.json"));
  ASSERT_EQ(kto.size(), 300u);
  EXPECT_EQ(keys_of(kto[0]), (std::vector<std::string>{"messages", "label"}));
  EXPECT_EQ(kto[0]["label"], true);
  EXPECT_EQ(kto[0]["messages"][0]["role"], "user");
  const auto c4 = read_rows(shared_data("datasets/text/c4_demo.jsonl"));
  ASSERT_EQ(c4.size(), 300u);
  EXPECT_EQ(c4[0]["text"].get<std::string>().substr(0, 26), "Don\xE2\x80\x99t think you need all");

  TempDir dir;
  // Blank lines are skipped; CRLF and a BOM are accepted; a .json file may hold JSON Lines.
  write_file(dir / "a.jsonl", "\xEF\xBB\xBF{\"x\": 1}\r\n\n  \n{\"x\": 2, \"y\": \"\xC3\xA9\"}\n");
  const auto a = read_rows(dir / "a.jsonl");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1], Json::parse("{\"x\": 2, \"y\": \"\xC3\xA9\"}"));
  write_file(dir / "b.json", "{\"x\": 1}\n{\"x\": 3}\n");
  const auto b = read_rows(dir / "b.json");
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[1]["x"], 3);
  // A BOM on a line of its own (then blank lines) was read as a row: "1:4: invalid JSON:
  // unexpected end of input".
  for (const char* name : {"c.jsonl", "c.json"}) {
    write_file(dir / name, "\xEF\xBB\xBF\r\n\n{\"x\": 1}\n{\"x\": 2}\n");
    const auto c = read_rows(dir / name);
    ASSERT_EQ(c.size(), 2u) << name;
    EXPECT_EQ(c[1]["x"], 2);
  }
}

// HF datasets' json loader reads a file's columns as the union of every row's keys in the order
// they first appear, with None where a row lacks a key (datasets 4 on these files: a.jsonl gives
// columns ['messages', 'prompt', 'completion', 'zeta', 'alpha'], b.json ['text', 'b', 'a']).
// row_lines gives each row's line: its own in JSON Lines, its '{' in an array.
TEST(Readers, JsonColumnsAreTheUnionOfTheRowsKeys) {
  TempDir dir;
  write_file(dir / "a.jsonl",
             "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n"
             "\n"
             "{\"prompt\": \"p\", \"completion\": \"c\", \"zeta\": 1}\n"
             "{\"alpha\": 2, \"prompt\": \"q\", \"completion\": null}\n");
  std::vector<int64_t> lines;
  const auto a = read_rows(dir / "a.jsonl", nullptr, &lines);
  ASSERT_EQ(a.size(), 3u);
  const std::vector<std::string> columns = {"messages", "prompt", "completion", "zeta", "alpha"};
  // Row 0 has every column (null where it lacks one); later rows keep their own keys.
  EXPECT_EQ(keys_of(a[0]), columns);
  EXPECT_EQ(keys_of(a[1]), (std::vector<std::string>{"prompt", "completion", "zeta"}));
  EXPECT_EQ(keys_of(a[2]), (std::vector<std::string>{"alpha", "prompt", "completion"}));
  EXPECT_EQ(a[0]["prompt"], Json());
  EXPECT_EQ(a[0]["alpha"], Json());
  EXPECT_EQ(a[0]["messages"][0]["content"], "hi");
  EXPECT_FALSE(a[1].contains("messages"));
  EXPECT_EQ(a[1]["zeta"], 1);
  EXPECT_EQ(a[2]["alpha"], 2);
  EXPECT_EQ(a[2]["prompt"], "q");
  EXPECT_EQ(a[2]["completion"], Json());
  EXPECT_EQ(lines, (std::vector<int64_t>{1, 3, 4}));

  // A JSON array alike; brackets and quotes inside strings do not move the lines.
  write_file(dir / "b.json",
             "[{\"text\": \"a ]}{[\\\"\"},\n {\"b\": 1, \"text\": \"x\"},\n\n {\"a\": 2}]");
  const auto b = read_rows(dir / "b.json", nullptr, &lines);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(keys_of(b[0]), (std::vector<std::string>{"text", "b", "a"}));
  EXPECT_EQ(b[0]["text"], "a ]}{[\"");
  EXPECT_EQ(b[0]["a"], Json());
  EXPECT_EQ(b[2], Json::parse(R"({"a": 2})"));
  EXPECT_EQ(lines, (std::vector<int64_t>{1, 2, 4}));

  // A later row keeps its own key order; row 0 takes the columns' (its own keys first).
  write_file(dir / "c.jsonl", "{\"x\": 1, \"y\": 2}\n{\"y\": 3, \"x\": 4, \"z\": 5}\n");
  const auto c = read_rows(dir / "c.jsonl");
  EXPECT_EQ(keys_of(c[0]), (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(keys_of(c[1]), (std::vector<std::string>{"y", "x", "z"}));
  EXPECT_EQ(c[1]["x"], 4);
  // Parquet has a schema: no lines are given.
  read_rows(shared_data("datasets/no_robots/test.parquet"), nullptr, &lines);
  EXPECT_TRUE(lines.empty());
}

TEST(ReaderErrors, MalformedJsonLineNamesFileAndLine) {
  TempDir dir;
  const auto f = dir / "bad.jsonl";
  write_file(f, "{\"a\": 1}\n\n{\"a\": 2,}\n{\"a\": 3}\n");
  const std::string msg = error_of([&] { read_rows(f); });
  EXPECT_EQ(msg.rfind(f.string() + ":3:9: invalid JSON: syntax error", 0), 0u) << msg;
}

TEST(ReaderErrors, CrOnlyLineEndingsAreNamed) {
  TempDir dir;
  const auto f = dir / "mac.jsonl";
  // Rows that a CR alone separates are read, as pyarrow reads them (datasets 4.8.5: [{'a': 1},
  // {'a': 2}]); a bad row there gets the hint.
  write_file(f, "{\"a\": 1}\r{\"a\": 2}\r");
  const auto rows = read_rows(f);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1]["a"], 2);
  write_file(f, "{\"a\": 1}\r{\"a\": 2,}\r");
  EXPECT_EQ(error_of([&] { read_rows(f); }),
            f.string() +
                ":1:18: invalid JSON: syntax error while parsing object key - unexpected '}'; "
                "expected string literal; the file has CR-only line endings (old Mac style): "
                "expected LF or CRLF");
  // CRLF is read; its own errors get no hint.
  write_file(f, "{\"a\": 1}\r\n{\"a\": 2,}\r\n");
  const std::string msg = error_of([&] { read_rows(f); });
  EXPECT_EQ(msg.rfind(f.string() + ":2:9: invalid JSON: syntax error", 0), 0u) << msg;
  EXPECT_EQ(msg.find("CR-only"), std::string::npos) << msg;
}

// Several objects on one line are each a row, as pyarrow's JSON reader (datasets' "json"
// builder) reads them: datasets 4.8.5 reads `{"text":"a"} {"text":"b"}` + `{"text":"c"}` as
// ['a', 'b', 'c'] and `{"text":"a"}{"text":"b"}` as ['a', 'b']; anything else after an object is
// refused (datasets: "Trailing data").
TEST(Readers, SeveralObjectsOnOneJsonLine) {
  TempDir dir;
  const auto f = dir / "two.jsonl";
  write_file(f,
             "{\"text\": \"a\"} {\"text\": \"b}{\\\"\"}\t{\"text\": \"c\"}\n\n"
             "{\"text\": \"d\"}{\"text\": {\"e\": [1]}}\n");
  std::vector<int64_t> lines;
  const auto rows = read_rows(f, nullptr, &lines);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[1]["text"], "b}{\"");
  EXPECT_EQ(rows[2]["text"], "c");
  EXPECT_EQ(rows[4]["text"]["e"][0], 1);
  EXPECT_EQ(lines, (std::vector<int64_t>{1, 1, 1, 3, 3}));
  // An error names the row's line, its column in the line and its row number.
  write_file(f, "{\"a\": 1}\n{\"a\": 2} {\"a\": 3,}\n");
  std::string msg = error_of([&] { read_rows(f); });
  EXPECT_EQ(msg.rfind(f.string() + ":2:18: invalid JSON: syntax error", 0), 0u) << msg;
  write_file(f, "{\"a\": 1} {\"a\": 1, \"a\": 2}\n");
  msg = error_of([&] { read_rows(f); });
  EXPECT_NE(msg.find("row 1: duplicate key 'a'"), std::string::npos) << msg;
  write_file(f, "{\"a\": 1} x\n");
  msg = error_of([&] { read_rows(f); });
  EXPECT_EQ(msg.rfind(f.string() + ":1:10: invalid JSON: syntax error", 0), 0u) << msg;
  // Garbage after the second row of a line is named where it is.
  write_file(f, "{\"a\": 1} {\"a\": 2} x\n");
  msg = error_of([&] { read_rows(f); });
  EXPECT_EQ(msg.rfind(f.string() + ":1:19: invalid JSON: syntax error", 0), 0u) << msg;
}

TEST(ReaderErrors, FirstBadLineWinsWhateverTheThreads) {
  TempDir dir;
  std::string text;
  for (int i = 1; i <= 2000; ++i) {
    text += (i == 1500 || i == 1900) ? "{oops}\n" : fmt::format("{{\"i\": {}}}\n", i);
  }
  write_file(dir / "many.jsonl", text);
  const std::string msg = error_of([&] { read_rows(dir / "many.jsonl"); });
  EXPECT_EQ(msg.rfind((dir / "many.jsonl").string() + ":1500:", 0), 0u) << msg;
}

TEST(ReaderErrors, InvalidUtf8InJsonLineGivesRowAndByteOffset) {
  TempDir dir;
  const auto f = dir / "utf.jsonl";
  write_file(f, "{\"a\": \"ok\"}\n\n{\"a\": \"ok\"}\n{\"a\": \"bad \xFF here\"}\n");
  const std::string msg = error_of([&] { read_rows(f); });
  EXPECT_EQ(
      msg,
      f.string() + ":4: row 2: invalid UTF-8 at byte offset 11 of the line (byte 36 of the file)");
}

// A NUL byte ends the JSON parser's input: the rest of the line was dropped without a word. Refused
// wherever it is (a line's middle, a crash-truncated tail of NULs, a .json array's tail).
TEST(ReaderErrors, NulByteIsRefusedWithItsPlace) {
  TempDir dir;
  const auto f = dir / "nul.jsonl";
  write_file(f, std::string("{\"p\": \"a\"}\n{\"p\": \"b\"}\0{\"p\": \"c\"}\n", 33));
  EXPECT_EQ(error_of([&] { read_rows(f); }),
            f.string() + ":2:11: a NUL byte: not JSON text (a truncated or binary file?)");
  const auto t = dir / "tail.jsonl";
  write_file(t, std::string("{\"p\": \"a\"}\n\0\0\0\0", 15));
  EXPECT_EQ(error_of([&] { read_rows(t); }).rfind(t.string() + ":2:1: a NUL byte", 0), 0u);
  const auto j = dir / "arr.json";
  write_file(j, std::string("[{\"p\": 1}]\0garbage", 18));
  EXPECT_EQ(error_of([&] { read_rows(j); }).rfind(j.string() + ":1:11: a NUL byte", 0), 0u);
}

// A UTF-16 file (PowerShell's `>`, Notepad's "Unicode") is text, not a truncated or binary file:
// the error names its encoding and how to convert it.
TEST(ReaderErrors, Utf16FileIsNamedAsSuch) {
  TempDir dir;
  const auto le = dir / "le.jsonl";
  write_file(le, std::string("\xFF\xFE{\0\"\0p\0\"\0:\0 \0\"\0a\0\"\0}\0\r\0\n\0", 26));
  EXPECT_EQ(error_of([&] { read_rows(le); }),
            le.string() +
                ":1:4: a NUL byte: the text is UTF-16LE (byte order mark FF FE), expected UTF-8 "
                "(convert it, e.g. iconv -f UTF-16LE -t UTF-8)");
  const auto be = dir / "be.json";
  write_file(be, std::string("\0[\0{\0}\0]", 8));
  EXPECT_EQ(error_of([&] { read_rows(be); }),
            be.string() +
                ":1:1: a NUL byte: the text is UTF-16BE, expected UTF-8 (convert it, e.g. iconv -f "
                "UTF-16BE -t UTF-8)");
}

// Without a byte order mark the encoding is read from the NULs around the first character:
// UTF-32 is tested before UTF-16 ("{\0\0\0" was named UTF-16LE, "\0\0\0{" no encoding at all),
// and a first line that is empty ("\n\0", "\0\n") still tells the byte order.
TEST(ReaderErrors, BomLessUtf16AndUtf32AreNamedByTheirNuls) {
  TempDir dir;
  const auto named = [](const std::filesystem::path& f, const std::string& at,
                        const std::string& enc) {
    return f.string() + ":" + at + ": a NUL byte: the text is " + enc +
           ", expected UTF-8 (convert it, e.g. iconv -f " + enc + " -t UTF-8)";
  };
  const struct {
    const char* name;
    std::string bytes;
    const char* at;  // line:column of the first NUL
    const char* enc;
  } cases[] = {
      {"le16.jsonl", std::string("\n\0{\0}\0\n\0", 8), "2:1", "UTF-16LE"},
      {"be16.jsonl", std::string("\0\n\0{\0}\0\n", 8), "1:1", "UTF-16BE"},
      {"le32.jsonl", std::string("{\0\0\0}\0\0\0\n\0\0\0", 12), "1:2", "UTF-32LE"},
      {"be32.json", std::string("\0\0\0[\0\0\0]", 8), "1:1", "UTF-32BE"},
      {"le32nl.jsonl", std::string("\n\0\0\0{\0\0\0}\0\0\0", 12), "2:1", "UTF-32LE"},
      {"be32nl.jsonl", std::string("\0\0\0\n\0\0\0{\0\0\0}", 12), "1:1", "UTF-32BE"},
  };
  for (const auto& c : cases) {
    const auto f = dir / c.name;
    write_file(f, c.bytes);
    EXPECT_EQ(error_of([&] { read_rows(f); }), named(f, c.at, c.enc)) << c.name;
  }
}

TEST(ReaderErrors, InvalidUtf8InJsonArrayGivesRowAndByteOffset) {
  TempDir dir;
  const auto f = dir / "utf.json";
  write_file(f, "[\n {\"a\": \"x\"},\n {\"a\": [\"y\", {\"b\": 1}]},\n {\"a\": \"\xC3\x28\"}\n]\n");
  const std::string msg = error_of([&] { read_rows(f); });
  EXPECT_EQ(msg, f.string() + ":4: row 2: invalid UTF-8 at byte offset 48 of the file");
}

TEST(ReaderErrors, MalformedJsonArrayAndNonObjectRows) {
  TempDir dir;
  write_file(dir / "a.json", "[\n  {\"a\": 1},\n  {\"a\": tru}\n]");
  EXPECT_EQ(error_of([&] {
              read_rows(dir / "a.json");
            }).rfind((dir / "a.json").string() + ":3:12: invalid JSON: syntax error", 0),
            0u);
  write_file(dir / "b.json", "[{\"a\": 1}, 7]");
  EXPECT_EQ(error_of([&] { read_rows(dir / "b.json"); }),
            (dir / "b.json").string() + ": row 1 is a JSON number, expected an object");
  write_file(dir / "c.jsonl", "{\"a\": 1}\n[1, 2]\n");
  EXPECT_EQ(error_of([&] { read_rows(dir / "c.jsonl"); }),
            (dir / "c.jsonl").string() + ":2: row 1 is a JSON array, expected an object");
}

// Objects spanning lines (pretty-printed, one after another) are each a row, as pyarrow's JSON
// reader reads them: datasets 4.8.5 reads "{\n \"prompt\": \"a\",\n \"completion\": \"b\"\n}\n{…}"
// as two rows and a file holding one pretty-printed object as one row (both were refused). An
// error inside such an object names its own line and column.
TEST(Readers, ObjectsSpanningLinesAreRows) {
  TempDir dir;
  const auto f = dir / "pretty.jsonl";
  write_file(f,
             "{\n \"prompt\": \"a\",\n \"completion\": \"b\"\n}\n{\n \"prompt\": \"c\",\n "
             "\"completion\": \"d\"\n} {\"prompt\": \"e\",\n\"completion\": \"f\"}\n");
  std::vector<int64_t> lines;
  const auto rows = read_rows(f, nullptr, &lines);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["completion"], "b");
  EXPECT_EQ(rows[1]["prompt"], "c");
  EXPECT_EQ(rows[2]["completion"], "f");
  EXPECT_EQ(lines, (std::vector<int64_t>{1, 5, 8}));
  write_file(dir / "d.json", "{\n  \"a\": 1\n}\n");
  const auto one = read_rows(dir / "d.json");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0]["a"], 1);
  write_file(f, "{\"a\": 1}\n{\n  \"a\": 2,\n  \"b\": tru\n}\n");
  std::string msg = error_of([&] { read_rows(f); });
  EXPECT_EQ(
      msg.rfind(f.string() + ":2:1: invalid JSON: the object that starts here is not closed on its "
                             "line, and read on as an object spanning lines it fails at line 4, "
                             "column 11: syntax error",
                0),
      0u)
      << msg;
  // A key given twice in an object spanning lines names its own line.
  write_file(f, "{\"a\": 1}\n{\n  \"a\": 2,\n  \"a\": 3\n}\n");
  msg = error_of([&] { read_rows(f); });
  EXPECT_NE(msg.find(f.string() + ":4: row 1: duplicate key 'a' (first given at line 3)"),
            std::string::npos)
      << msg;
  // Many rows each left open on their line add up to one nesting too deep: named at the first.
  std::string unclosed;
  for (int i = 0; i < 1500; ++i) unclosed += "{\"prompt\": \"q\", \"completion\": \"a\"\n";
  write_file(f, "{\"a\": 1}\n" + unclosed);
  msg = error_of([&] { read_rows(f); });
  EXPECT_EQ(msg.rfind(f.string() + ":2:1: invalid JSON: the object that starts here is not closed "
                                   "on its line, and read on as an object spanning lines it nests "
                                   "deeper than 1000 at line 1002, column 1",
                      0),
            0u)
      << msg;
  // A row left open (a broken line) is named at its start; the parse runs on to the end.
  write_file(f, "{\"a\": 1}\n{\"a\": 2,\n\"b\": 3\n");
  msg = error_of([&] { read_rows(f); });
  EXPECT_EQ(msg.rfind(f.string() + ":2:1: invalid JSON: the object that starts here is not closed "
                                   "on its line, and read on as an object spanning lines it fails "
                                   "at line 4, column 1: syntax error",
                      0),
            0u)
      << msg;
}

// NaN, Infinity and -Infinity, which Python's json.dump writes and pyarrow reads (datasets 4.8.5
// reads `{"text":"a","s":NaN,"t":[Infinity,-Infinity,1]}` as s nan, t [inf, -inf, 1.0]), are read
// as those numbers in a JSON Lines row and a JSON array (they were "invalid literal"); inside a
// string they are text, and a word that only starts like one is still an error.
TEST(Readers, NonFiniteLiteralsAsPythonWritesThem) {
  TempDir dir;
  const auto f = dir / "nf.jsonl";
  write_file(f,
             "{\"text\": \"NaN\", \"s\": NaN, \"t\": [Infinity, -Infinity, 1, -2.5e0]}\n"
             "{\"text\": \"b\", \"s\": 1.5, \"t\": [2]}\n");
  for (const auto& [file, bytes] :
       {std::pair{f, std::string()},
        std::pair{dir / "nf.json",
                  std::string("[{\"text\": \"NaN\", \"s\": NaN, \"t\": [Infinity,-Infinity,1,"
                              "-2.5e0]},\n {\"text\": \"b\", \"s\": 1.5, \"t\": [2]}]")}}) {
    if (!bytes.empty()) write_file(file, bytes);
    const auto rows = read_rows(file);
    ASSERT_EQ(rows.size(), 2u) << file;
    EXPECT_EQ(rows[0]["text"], "NaN");
    EXPECT_TRUE(std::isnan(rows[0]["s"].get<double>()));
    EXPECT_EQ(rows[0]["t"][0].get<double>(), std::numeric_limits<double>::infinity());
    EXPECT_EQ(rows[0]["t"][1].get<double>(), -std::numeric_limits<double>::infinity());
    EXPECT_EQ(rows[0]["t"][2], 1);
    EXPECT_EQ(rows[0]["t"][3].get<double>(), -2.5);
    EXPECT_EQ(rows[1]["s"].get<double>(), 1.5);
  }
  write_file(f, "{\"text\": \"a\", \"s\": -NaN, \"t\": -1}\n");  // pyarrow reads -NaN too
  EXPECT_TRUE(std::isnan(read_rows(f)[0]["s"].get<double>()));
  EXPECT_EQ(read_rows(f)[0]["t"], -1);
  write_file(f, "{\"text\": \"a\", \"s\": NaNa}\n");
  const std::string msg = error_of([&] { read_rows(f); });
  EXPECT_EQ(msg.rfind(f.string() + ":1:20: invalid JSON: syntax error", 0), 0u) << msg;
}

TEST(ReaderErrors, TruncatedAndCorruptParquet) {
  TempDir dir;
  const std::string bytes = read_file_bytes(shared_data("datasets/no_robots/test.parquet"));
  write_file(dir / "half.parquet", bytes.substr(0, bytes.size() / 2));
  const std::string msg = error_of([&] { read_rows(dir / "half.parquet"); });
  EXPECT_EQ(msg.rfind((dir / "half.parquet").string() + ": not a readable parquet file: ", 0), 0u)
      << msg;
  // Footer intact but data pages overwritten: the decoder fails, still naming the file.
  std::string corrupt = bytes;
  for (size_t i = 4; i < corrupt.size() / 2; ++i) corrupt[i] = static_cast<char>(i * 7);
  write_file(dir / "corrupt.parquet", corrupt);
  const std::string msg2 = error_of([&] { read_rows(dir / "corrupt.parquet"); });
  EXPECT_EQ(msg2.rfind((dir / "corrupt.parquet").string() + ": ", 0), 0u) << msg2;
  EXPECT_NE(msg2.find("parquet"), std::string::npos) << msg2;
}

TEST(ReaderErrors, InvalidUtf8InParquetGivesRowColumnAndByteOffset) {
  const auto f = test_data("sft/bad_utf8.parquet");
  EXPECT_EQ(error_of([&] { read_rows(f); }),
            f.string() + ": row 3, column 'text': invalid UTF-8 at byte offset 4 of the string");
}

// CSV, which the users' sft.py loads by extension as HF datasets does (it was refused as an
// unknown extension). Expected rows: datasets 4.4.1 load_dataset("csv") on the same bytes — types
// inferred per column, a quoted field with a comma, a newline and doubled quotes, an empty field
// and "NA" read as None.
TEST(Readers, CsvAsHfDatasetsReadsIt) {
  TempDir dir;
  write_file(dir / "a.csv",
             "id,prompt,completion,score\n1,\"Hello, world\",\"line one\nline two\",0.5\n"
             "2,Q?,,1.5\n3,NA,\"say \"\"hi\"\"\",2\n");
  const std::vector<Json> rows = read_rows(dir / "a.csv");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], Json::parse(R"({"id": 1, "prompt": "Hello, world",
                                     "completion": "line one\nline two", "score": 0.5})"));
  EXPECT_EQ(rows[1], Json::parse(R"({"id": 2, "prompt": "Q?", "completion": null, "score": 1.5})"));
  EXPECT_EQ(rows[2],
            Json::parse(R"({"id": 3, "prompt": null, "completion": "say \"hi\"", "score": 2.0})"));
  write_file(dir / "bad.csv", "prompt,completion\nQ?,A,extra\n");
  EXPECT_EQ(error_of([&] { read_rows(dir / "bad.csv"); })
                .rfind((dir / "bad.csv").string() +
                           ": line 2 (row 0) has 3 fields, the header line has 2: ",
                       0),
            0u);
}

TEST(ReaderErrors, UnknownExtensionAndMissingFile) {
  TempDir dir;
  write_file(dir / "x.tsv", "a\tb\n");
  EXPECT_EQ(error_of([&] { read_rows(dir / "x.tsv"); }),
            (dir / "x.tsv").string() +
                ": unsupported dataset file extension '.tsv'; expected .jsonl, .json, .parquet or "
                ".csv");
  EXPECT_EQ(error_of([&] { read_rows(dir / "none.jsonl"); }),
            (dir / "none.jsonl").string() + ": cannot open: No such file or directory");
}

}  // namespace
}  // namespace zt::data
