// trainer.lr_scheduler_kwargs (and transformers' other dict fields) given as a string: what
// TrainingArguments.__post_init__ makes of it, against tests/data/cli/dict_field_strings.json
// (tools/make_dict_field_goldens.py, transformers 4.57.1).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/dict_field_string.h"
#include "core/error.h"
#include "core/zt_test_util.h"
#include "io/json.h"

namespace fs = std::filesystem;
using zt::Json;
using zt::cli::convert_str_dict;
using zt::cli::hf_dict_field_value;
using zt::testing::error_of;

namespace {

Json golden() {
  std::ifstream in(fs::path(ZT_TEST_DATA) / "cli" / "dict_field_strings.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str());
}

// Every golden string gives transformers' value, types included (7 an int, 5.0 a float: the
// dumps are compared), or an error where json.loads raises.
TEST(DictFieldString, EqualsTrainingArgumentsPostInit) {
  const Json g = golden();
  ASSERT_EQ(g.at("transformers"), "4.57.1");
  size_t errors = 0, parsed = 0;
  for (const Json& c : g.at("cases")) {
    const Json text = c.at("text");
    if (c.contains("error")) {
      const std::string e = error_of([&] { hf_dict_field_value(text); });
      EXPECT_TRUE(e.starts_with("the string starts with '{' but is not valid JSON (")) << text << e;
      EXPECT_TRUE(
          e.ends_with("); transformers' TrainingArguments json.loads such a string "
                      "(JSONDecodeError)"))
          << text << e;
      ++errors;
      continue;
    }
    EXPECT_EQ(hf_dict_field_value(text).dump(), c.at("value").dump()) << text;
    parsed += c.at("value").is_object();
  }
  EXPECT_EQ(errors, 3u);
  EXPECT_GE(parsed, 5u);
  // Values other than strings are left as they are (a YAML mapping's strings too: transformers
  // converts only what it parsed).
  EXPECT_EQ(hf_dict_field_value(Json{{"min_lr", "0.1"}}), (Json{{"min_lr", "0.1"}}));
  EXPECT_EQ(hf_dict_field_value(nullptr), Json(nullptr));
}

// Python's int has no bound; zerotune's values are int64: beyond it, an error naming the key.
TEST(DictFieldString, DigitStringsBeyondInt64AreRefused) {
  EXPECT_EQ(convert_str_dict(Json{{"a", {{"b", "9223372036854775807"}}}}),
            (Json{{"a", {{"b", int64_t{9223372036854775807}}}}}));
  EXPECT_EQ(
      error_of([] {
        convert_str_dict(Json{{"a", {{"b", "9223372036854775808"}}}});
      }),
      "'a.b': \"9223372036854775808\" is an integer too large for zerotune (beyond 2^63 - 1)");
}

}  // namespace
