// Every template construct the engine supports, each rendered byte-identically to transformers'
// own jinja2 environment (tests/data/chat_template/constructs.json, made by
// tools/make_chat_template_goldens.py): text, `{% generation %}` byte spans, and the templates
// jinja2 rejects, which must raise zt::Error too.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/json.h"
#include "text/chat_template.h"

namespace zt::text {
namespace {

struct Case {
  std::string name;
  Json data;
};

std::vector<Case> load_cases() {
  std::ifstream f(std::string(ZT_TEST_DATA) + "/chat_template/constructs.json");
  if (!f) return {};
  Json all = Json::parse(f);
  std::vector<Case> out;
  for (const auto& c : all) out.push_back({c["name"].get<std::string>(), c});
  return out;
}

class JinjaConstruct : public ::testing::TestWithParam<Case> {};

TEST_P(JinjaConstruct, MatchesJinja2) {
  const Json& c = GetParam().data;
  const std::string tpl = c["template"].get<std::string>();
  if (c.contains("jinja2_error")) {
    // jinja2 raised (at parse or render time); so must we, with the template name in the text.
    try {
      ChatTemplate t(tpl, "case");
      (void)t.render(c["context"]);
      ADD_FAILURE() << "no error; jinja2 raised " << c["jinja2_error"];
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("case", 0), 0u) << e.what();
    }
    return;
  }
  ChatTemplate t(tpl, "case");
  RenderResult r = t.render(c["context"]);
  EXPECT_EQ(r.text, c["text"].get<std::string>());
  std::vector<std::pair<size_t, size_t>> spans;
  for (const auto& s : c["spans"]) spans.emplace_back(s[0].get<size_t>(), s[1].get<size_t>());
  EXPECT_EQ(r.generation_spans, spans);
  EXPECT_EQ(t.has_generation_blocks(), tpl.find("generation") != std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Golden, JinjaConstruct, ::testing::ValuesIn(load_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

TEST(JinjaConstructGoldens, FileHasAllCases) {
  std::vector<Case> cases = load_cases();
  ASSERT_GE(cases.size(), 85u) << "constructs.json missing or truncated";
  size_t errors = 0, with_spans = 0;
  for (const auto& c : cases) {
    errors += c.data.contains("jinja2_error");
    with_spans += c.data.contains("spans") && !c.data["spans"].empty();
  }
  EXPECT_GE(errors, 15u);
  EXPECT_GE(with_spans, 5u);
}

}  // namespace
}  // namespace zt::text
