// trainer.deepspeed strings that name no file, against what transformers 4.57.1's HfDeepSpeedConfig
// reads from them (tests/data/cli/deepspeed_sources.json "strings",
// tools/make_deepspeed_source_goldens.py): JSON, URL-safe base64 of JSON (Python's lenient
// decoder: skipped characters, padding that ends the decoding early), or the error it raises.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/deepspeed_source.h"
#include "core/error.h"
#include "core/zt_test_util.h"
#include "io/json.h"
#include "text/unicode.h"

namespace fs = std::filesystem;
using zt::Json;
using zt::cli::python_urlsafe_b64decode;
using zt::cli::read_deepspeed_string;
using zt::testing::error_of;

namespace {

Json golden() {
  std::ifstream in(fs::path(ZT_TEST_DATA) / "cli" / "deepspeed_sources.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str());
}

TEST(DeepSpeedString, ReadsWhatHfDeepSpeedConfigReads) {
  const Json g = golden();
  ASSERT_EQ(g.at("transformers"), "4.57.1");
  size_t read = 0, value_errors = 0, attribute_errors = 0;
  for (const Json& c : g.at("strings")) {
    const std::string text = c.at("text");
    SCOPED_TRACE(text);
    if (c.contains("config")) {
      EXPECT_EQ(read_deepspeed_string(text).settings, c.at("config"));
      ++read;
      continue;
    }
    const std::string e = error_of([&] { read_deepspeed_string(text); });
    const std::string message = c.at("message");
    if (c.at("error") == "ValueError") {
      // transformers' message, quoted whole.
      EXPECT_NE(e.find("transformers' HfDeepSpeedConfig raises \"" + message + "\""),
                std::string::npos)
          << e;
      ++value_errors;
    } else {
      ASSERT_EQ(c.at("error"), "AttributeError");
      EXPECT_NE(e.find("not a mapping of DeepSpeed settings (transformers fails on it: "
                       "AttributeError: " +
                       message + ")"),
                std::string::npos)
          << e;
      ++attribute_errors;
    }
  }
  EXPECT_GE(read, 50u);
  EXPECT_GE(value_errors, 80u);
  EXPECT_EQ(attribute_errors, 6u);
}

// A long value is shown as its first 57 characters and "...", cut between characters: 2-, 3- and
// 4-byte ones where the 57th byte falls inside one.
TEST(DeepSpeedString, ALongValueIsCutBetweenCharacters) {
  std::string chars;  // 60 characters, 2 + 3 + 4 bytes each in turn
  for (int i = 0; i < 20; ++i) chars += "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";  // é € 😀
  const std::string e = error_of([&] { read_deepspeed_string("[\"" + chars + "\"]"); });
  EXPECT_EQ(zt::text::unicode::find_invalid_utf8(e), std::nullopt) << e;
  // ["  + 55 characters (18 triples and é) + "...": the dump has 64 characters.
  std::string shown = "[\"";
  for (int i = 0; i < 18; ++i) shown += "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  shown += "\xc3\xa9...";
  EXPECT_NE(e.find(" is JSON of the list " + shown + ", not a mapping"), std::string::npos) << e;
  // 60 characters are shown whole: ["  + 56 + "].
  const std::string whole = "[\"" + std::string(56, 'a') + "\"]";
  EXPECT_NE(error_of([&] {
              read_deepspeed_string(whole);
            }).find(" is JSON of the list " + whole + ", not a mapping"),
            std::string::npos);
  const std::string longer = "[\"" + std::string(57, 'a') + "\"]";
  EXPECT_NE(error_of([&] {
              read_deepspeed_string(longer);
            }).find(" is JSON of the list [\"" + std::string(55, 'a') + "..., not a mapping"),
            std::string::npos);
}

// How each was given: the start-up line says it.
TEST(DeepSpeedString, SaysHowTheSettingsWereGiven) {
  EXPECT_EQ(read_deepspeed_string(" {\"zero_optimization\": {}}").form, "a JSON string");
  EXPECT_EQ(read_deepspeed_string("e30=").form, "base64-encoded JSON");
  EXPECT_EQ(read_deepspeed_string("e30=").settings, Json::object());
}

// Python's decoder, byte for byte where the golden's JSON cannot show it: '-' / '_' and '+' / '/'
// alike, other characters skipped, the quad a '=' completes ends the decoding.
TEST(DeepSpeedString, DecodesBase64AsPythonDoes) {
  EXPECT_EQ(python_urlsafe_b64decode("-_-_"), std::string("\xfb\xff\xbf", 3));
  EXPECT_EQ(python_urlsafe_b64decode("+/+/"), std::string("\xfb\xff\xbf", 3));
  EXPECT_EQ(python_urlsafe_b64decode("YW Jj\n"), "abc");
  EXPECT_EQ(python_urlsafe_b64decode("YQ==YWJj"), "a");
  EXPECT_EQ(python_urlsafe_b64decode("YWI=YWJj"), "ab");
  EXPECT_EQ(python_urlsafe_b64decode("Y=Q=="), "a");  // a '=' after one character is skipped
  EXPECT_EQ(python_urlsafe_b64decode(""), "");
  EXPECT_EQ(python_urlsafe_b64decode("YWJjZA"), std::nullopt);        // "Incorrect padding"
  EXPECT_EQ(python_urlsafe_b64decode("YWJjZ"), std::nullopt);         // one character over
  EXPECT_EQ(python_urlsafe_b64decode("YWJj\xc3\xa9"), std::nullopt);  // not ASCII
}

}  // namespace
