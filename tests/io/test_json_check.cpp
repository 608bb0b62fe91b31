// Every JSON text zerotune reads is checked before a value is built (io/json_check.h): against
// kMaxJsonDepth, as nlohmann copies values recursively, so a row or config nested 200,000 deep
// crashed the process (case deep-json-row-segfault); 100,000 and 200,000 levels both get the error
// naming file and line. And for a raw NUL byte, where nlohmann's input ends: the rest of the file
// was dropped in silence.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/zt_test_util.h"
#include "io/json.h"
#include "io/json_check.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "io/unique_keys.h"

namespace {

using zt::Json;
using zt::testing::error_of;
using zt::testing::TempDir;

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonDepth, FindsTheFirstBracketTooDeepOutsideStrings) {
  EXPECT_EQ(zt::find_too_deep_json("[[]]", 2), std::nullopt);
  EXPECT_EQ(zt::find_too_deep_json("[[]]", 1), std::optional<size_t>(1));
  EXPECT_EQ(zt::find_too_deep_json(R"({"a": [{"b": 1}]})", 2), std::optional<size_t>(7));
  // Brackets in strings do not count, an escaped quote does not end the string.
  EXPECT_EQ(zt::find_too_deep_json(R"(["[[[", "\"[[[", {}])", 1), std::optional<size_t>(17));
  EXPECT_EQ(zt::find_too_deep_json(R"(["[[[", "\"[[["])", 1), std::nullopt);
  // Closing brackets at depth 0 (malformed text) do not go negative.
  EXPECT_EQ(zt::find_too_deep_json("]]][[", 2), std::nullopt);
  EXPECT_EQ(zt::find_too_deep_json(nested(1000)), std::nullopt);
  EXPECT_EQ(zt::find_too_deep_json(nested(1001)), std::optional<size_t>(1000));
}

TEST(JsonDepth, ParsersRefuseDeepTextNamingFileAndLine) {
  for (size_t depth : {1001u, 100000u, 200000u}) {
    const std::string text = "{\n \"a\": 1,\n \"b\": " + nested(depth) + "\n}\n";
    EXPECT_EQ(error_of([&] { zt::parse_json_unique_keys(text, "c.json"); }),
              "c.json:3: JSON nesting depth exceeds 1000")
        << depth;
    EXPECT_EQ(error_of([&] { zt::parse_json(text, "p.json"); }),
              "p.json:3: JSON nesting depth exceeds 1000")
        << depth;
  }
  EXPECT_EQ(zt::parse_json_unique_keys("{\"b\": " + nested(999) + "}", "c.json")["b"].size(), 1u);
  EXPECT_EQ(zt::parse_json("[1, 2]", "p.json"), Json::parse("[1, 2]"));
  EXPECT_THROW(zt::parse_json("[1, 2", "p.json"), Json::parse_error);
}

TEST(JsonDepth, ModelConfigAndSafetensorsIndexAndHeader) {
  TempDir d;
  std::ofstream(d / "config.json")
      << "{\"model_type\": \"qwen2\",\n \"x\": " << nested(200000) << "}";
  EXPECT_EQ(error_of([&] { zt::load_model_config(d.path()); }),
            (d / "config.json").string() + ":2: JSON nesting depth exceeds 1000");
  // A safetensors file whose header nests 200,000 deep.
  const std::string header = "{\"__metadata__\": {\"x\": " + nested(200000) + "}}";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  std::ofstream(d / "model.safetensors", std::ios::binary) << bytes << header;
  EXPECT_EQ(error_of([&] { zt::SafetensorsReader r(d.path()); }),
            (d / "model.safetensors").string() + " (header):1: JSON nesting depth exceeds 1000");
}

TEST(JsonText, NulByteIsRefusedNamingFileLineAndColumn) {
  const std::string nul(1, '\0');
  EXPECT_EQ(error_of([&] { zt::check_json_text("{}\n [1]" + nul + "[2]", "f.json"); }),
            "f.json:2:5: a NUL byte: not JSON text (a truncated or binary file?)");
  // A JSON Lines row: the line's number and a prefix.
  EXPECT_EQ(error_of([&] { zt::check_json_text(nul, "r.jsonl", 7, "row 3: "); }),
            "r.jsonl:7:1: row 3: a NUL byte: not JSON text (a truncated or binary file?)");
  EXPECT_EQ(error_of([&] { zt::parse_json("[1]" + nul + "[2]", "p.json"); }),
            "p.json:1:4: a NUL byte: not JSON text (a truncated or binary file?)");
  EXPECT_EQ(zt::parse_json("[\"\\u0000\"]", "p.json")[0].get<std::string>(), nul);  // spelled out
  TempDir d;
  // config.json with a second object after a NUL (it was read as the first alone).
  std::ofstream(d / "config.json", std::ios::binary) << "{\"model_type\": \"qwen2\"}\n"
                                                     << nul << "{\"model_type\": \"llama\"}";
  EXPECT_EQ(error_of([&] { zt::load_model_config(d.path()); }),
            (d / "config.json").string() +
                ":2:1: a NUL byte: not JSON text (a truncated or binary file?)");
  // A safetensors header padded with NULs instead of spaces.
  const std::string header = "{\"__metadata__\": {}}" + std::string(4, '\0');
  std::string bytes(8, '\0');
  bytes[0] = static_cast<char>(header.size());
  std::ofstream(d / "model.safetensors", std::ios::binary) << bytes << header;
  EXPECT_EQ(error_of([&] { zt::SafetensorsReader r(d.path()); }),
            (d / "model.safetensors").string() +
                " (header):1:21: a NUL byte: not JSON text (a truncated or binary file?)");
}

// A JSON Lines reader checks each line alone: a line after the first was split off after a '\n',
// which in UTF-16LE / UTF-32LE text leaves the line opening with that character's NULs. Such a
// line (the file's first line empty) was named UTF-16BE, or no encoding at all; a tail of NULs
// after a line (a crash-truncated file) is still no text.
TEST(JsonText, WideLineAfterTheFirstIsNamedWithItsByteOrder) {
  const auto enc_of = [](const std::string& line, size_t lineno) {
    return error_of([&] { zt::check_json_text(line, "m.jsonl", lineno); });
  };
  const auto named = [](const std::string& at, const std::string& enc) {
    return "m.jsonl:" + at + ": a NUL byte: the text is " + enc +
           ", expected UTF-8 (convert it, e.g. iconv -f " + enc + " -t UTF-8)";
  };
  EXPECT_EQ(enc_of(std::string("\0{\0}\0", 5), 2), named("2:1", "UTF-16LE"));
  EXPECT_EQ(enc_of(std::string("\0\0\0{\0\0\0}\0\0\0", 11), 2), named("2:1", "UTF-32LE"));
  // The same bytes as a file's first line: big-endian.
  EXPECT_EQ(enc_of(std::string("\0{\0}\0", 5), 1), named("1:1", "UTF-16BE"));
  EXPECT_EQ(enc_of(std::string("\0\0\0{\0\0\0}\0\0\0", 11), 1), named("1:1", "UTF-32BE"));
  for (const std::string& tail : {std::string(4, '\0'), std::string(1, '\0')})
    EXPECT_EQ(enc_of(tail, 3),
              "m.jsonl:3:1: a NUL byte: not JSON text (a truncated or binary file?)")
        << tail.size();
}

}  // namespace
