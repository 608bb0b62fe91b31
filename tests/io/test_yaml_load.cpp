// Every YAML text zerotune reads goes through load_yaml (io/yaml_load.h): one document, bounded
// alias expansion and nesting, merge keys resolved as PyYAML/OmegaConf resolve them, duplicate keys
// still refused. The cases of ../shared/cases (yaml-second-document-ignored, yaml-alias-bomb-hangs,
// yaml-merge-key-refused) are read through load_hydra_yaml as `zerotune train` reads them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/zt_test_util.h"
#include "io/hydra_yaml.h"
#include "io/yaml_load.h"

namespace {

namespace fs = std::filesystem;
using zt::Json;
using zt::testing::error_of;
using zt::testing::TempDir;

fs::path case_dir(const std::string& name) {
  return fs::path(ZT_SHARED_DATA).parent_path() / "cases" / name;
}

// The YAML of `text` as JSON (via load_yaml_file, so scalars get OmegaConf's types).
Json yaml(const std::string& text) {
  TempDir d;
  std::ofstream(d / "f.yaml") << text;
  return zt::load_yaml_file(d / "f.yaml");
}

std::string yaml_error(const std::string& text) {
  return error_of([&] { zt::load_yaml(text, "f.yaml"); });
}

// The alias chain of yaml-alias-bomb-hangs/make_yaml.py: z_a0 lists 9 scalars, z_aI 9 aliases of
// z_a(I-1), so `levels` levels stand for 9^levels leaves.
std::string alias_bomb(int levels) {
  std::string s = "z_a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < levels; ++i) {
    s += "z_a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 9; ++k) s += (k ? ", *a" : "*a") + std::to_string(i - 1);
    s += "]\n";
  }
  return s;
}

TEST(YamlLoad, SecondDocumentIsAnErrorNamingItsLine) {
  EXPECT_EQ(yaml_error("a: 1\nb: 2\n---\nb: 3\n"),
            "f.yaml:3: a second YAML document starts here; zerotune reads one document per file, "
            "as OmegaConf "
            "does (\"expected a single document in the stream\")");
  EXPECT_EQ(yaml_error("a: 1\n---\n").substr(0, 42), "f.yaml:2: a second YAML document starts he");
  // One document with explicit markers is fine.
  EXPECT_EQ(yaml("---\na: 1\n...\n"), Json::parse(R"({"a": 1})"));
  // The case file: its second document (line 21) would set trainer.learning_rate: 0.5.
  const fs::path f = case_dir("yaml-second-document-ignored") / "sft.yaml";
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(f, {}); }).substr(0, f.string().size() + 45),
            f.string() + ":21: a second YAML document starts here; zero");
}

// YAML must be UTF-8, as PyYAML reads it: a Latin-1 byte is an error naming line and column (it
// became an "internal error", exit 70, once the value reached the JSON library). Overrides too.
TEST(YamlLoad, BytesThatAreNotUtf8AreNamed) {
  EXPECT_EQ(yaml_error("a: 1\nname: caf\xe9\n"),
            "f.yaml:2:10: byte 0xE9 is not UTF-8 (byte 14 of the text); YAML must be UTF-8 text");
  EXPECT_EQ(yaml("name: caf\xc3\xa9\n")["name"], "caf\xc3\xa9");
  EXPECT_EQ(zt::first_invalid_utf8_byte("ascii"), -1);
  EXPECT_EQ(zt::first_invalid_utf8_byte("\xe2\x82\xac \xf0\x9f\x98\x80"), -1);  // € 😀
  EXPECT_EQ(zt::first_invalid_utf8_byte("ab\xc0\x80"), 2);                      // overlong NUL
  EXPECT_EQ(zt::first_invalid_utf8_byte("\xed\xa0\x80"), 0);                    // a surrogate
  EXPECT_EQ(zt::first_invalid_utf8_byte("x\xf4\x90\x80\x80"), 1);               // above U+10FFFF
  EXPECT_EQ(zt::first_invalid_utf8_byte("x\xe2\x82"), 1);                       // cut short
  TempDir d;
  std::ofstream(d / "c.yaml") << "a: x\n";
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(d / "c.yaml", {"a=\xff"}); }),
            "override \"a=\"…: byte 0xFF at offset 2 is not UTF-8 (the command line must be UTF-8 "
            "text)");
}

// NEL, U+2028 and U+2029 are line breaks to PyYAML (YAML 1.1) and characters to yaml-cpp: PyYAML
// reads `a: b<NEL>c: d` as {a: b, c: d} and `a: 1 # x<NEL>b: 2` as {a: 1, b: 2}, folds "x<NEL>y"
// to "x y" and stops `a: x<LS>` at "x"; zerotune read them as text. They are refused, naming the
// line and column; the escapes \x85, \u2028, \u2029 inside double quotes give the characters in
// both, and
// a JSON text (DeepSpeed's) keeps them as characters, as Python's json does.
TEST(YamlLoad, Yaml11LineBreaksAreRefused) {
  const std::string tail =
      " is a line break to PyYAML (YAML 1.1, which OmegaConf and accelerate read this file with) "
      "and not to zerotune's YAML reader, so the two read different values; remove it, or write it "
      "as the escape ";
  EXPECT_EQ(yaml_error("x: 1\na: b\xc2\x85"
                       "c: d\n"),
            "f.yaml:2:5: character U+0085 (NEXT LINE)" + tail + "\\x85 inside double quotes");
  EXPECT_EQ(yaml_error("a: 1 # x\xc2\x85"
                       "b: 2\n"),
            "f.yaml:1:9: character U+0085 (NEXT LINE)" + tail + "\\x85 inside double quotes");
  EXPECT_EQ(yaml_error("a: \"x\xe2\x80\xa8y\"\n"), "f.yaml:1:6: character U+2028 (LINE SEPARATOR)" +
                                                       tail + "\\u2028 inside double quotes");
  EXPECT_EQ(
      yaml_error("a: x\xe2\x80\xa9\nb: 'y\xc2\x85'\n"),
      "f.yaml:1:5: character U+2029 (PARAGRAPH SEPARATOR)" + tail + "\\u2029 inside double quotes");
  EXPECT_EQ(yaml("a: \"x\\x85y\\u2028z\\u2029\"\n")["a"], "x\xc2\x85y\xe2\x80\xa8z\xe2\x80\xa9");
  // yaml-cpp's \N and \_ gave the bytes 0x85 and 0xA0 (not UTF-8: an "internal error" where the
  // value reached the JSON library); PyYAML's U+0085 and U+00A0, keys too.
  EXPECT_EQ(yaml("a: \"x\\Ny\\_z\\Lw\"\n\"k\\N\": 1\n"),
            Json::parse("{\"a\": \"x\\u0085y\\u00a0z\\u2028w\", \"k\\u0085\": 1}"));
  EXPECT_EQ(
      zt::load_yaml("{\"a\": \"x\xc2\x85y\"}", "ds.json", /*json=*/true)["a"].as<std::string>(),
      "x\xc2\x85y");
  TempDir d;
  std::ofstream(d / "sft.yaml") << "trainer:\n  seed: 1 # one\xe2\x80\xa8  max_steps: 5\n";
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(d / "sft.yaml", {}); }),
            (d / "sft.yaml").string() + ":2:16: character U+2028 (LINE SEPARATOR)" + tail +
                "\\u2028 inside double quotes");
}

TEST(YamlLoad, AliasExpansionIsBounded) {
  // 9^3 leaves expand to 8,289 nodes: read; the fourth level passes 10,000 at its first alias.
  EXPECT_EQ(yaml(alias_bomb(4))["z_a3"][8][8][8][8], "x");
  const std::string msg =
      "f.yaml:5: YAML aliases expand to more than 10000 nodes (aliases of aliases, as in a "
      "\"billion laughs\" "
      "file); OmegaConf refuses such a file too";
  EXPECT_EQ(yaml_error(alias_bomb(5)), msg);
  EXPECT_EQ(yaml_error(alias_bomb(10)), msg);  // 9^10 leaves: refused as quickly
  EXPECT_EQ(yaml_error(alias_bomb(40)), msg);
  // The limit itself: a list of 99 scalars (100 nodes) aliased 100 times is exactly 10,000.
  std::string list = "l: &l [";
  for (int i = 0; i < 99; ++i) list += i ? ", 1" : "1";
  list += "]\n";
  std::string uses = "u: [";
  for (int i = 0; i < 100; ++i) uses += i ? ", *l" : "*l";
  EXPECT_EQ(yaml(list + uses + "]\n")["u"].size(), 100u);
  EXPECT_EQ(yaml_error(list + uses + ", *l]\n").substr(0, 58),
            "f.yaml:2: YAML aliases expand to more than 10000 nodes (al");
  // Plain anchors and aliases of scalars, as users write them.
  EXPECT_EQ(yaml("eval_steps: &e 3\nsave_steps: *e\n"),
            Json::parse(R"({"eval_steps": 3, "save_steps": 3})"));
}

TEST(YamlLoad, AliasBombCaseNamesFileAndLine) {
  TempDir d;
  std::ifstream in(case_dir("yaml-alias-bomb-hangs") / "sft.yaml");
  std::string base((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const int base_lines = static_cast<int>(std::count(base.begin(), base.end(), '\n'));
  std::ofstream(d / "sft_10.yaml") << base << alias_bomb(10);
  const std::string want = (d / "sft_10.yaml").string() + ":" + std::to_string(base_lines + 5) +
                           ": YAML aliases expand to more than 10000 nodes";
  const std::string got = error_of([&] { zt::load_hydra_yaml(d / "sft_10.yaml", {}); });
  EXPECT_EQ(got.rfind(want, 0), 0u) << got;
}

TEST(YamlLoad, RecursiveAliasAndDeepNestingAreRefused) {
  EXPECT_EQ(yaml_error("a: 1\nb: &x\n  - 1\n  - *x\n"),
            "f.yaml:4: an alias inside the node it refers to (a recursive structure); zerotune "
            "does not read it");
  // Nesting: 400 levels are read (the top-level mapping and 399 lists), 401 refused; 200,000
  // (flow style) refused without a crash; block style names the line of the level too deep.
  EXPECT_EQ(yaml("a: " + std::string(399, '[') + std::string(399, ']') + "\n")["a"].size(), 1u);
  EXPECT_EQ(yaml_error("a: " + std::string(400, '[') + std::string(400, ']') + "\n"),
            "f.yaml:1: nesting depth exceeds 400");
  EXPECT_EQ(yaml_error(std::string(200000, '[') + std::string(200000, ']') + "\n"),
            "f.yaml:1: nesting depth exceeds 400");
  std::string block;
  for (int i = 0; i < 1200; ++i) block += std::string(static_cast<size_t>(i), ' ') + "k:\n";
  EXPECT_EQ(yaml_error(block), "f.yaml:401: nesting depth exceeds 400");
}

TEST(YamlLoad, MergeKeysResolveAsPyYaml) {
  // The mapping's own keys win over merged ones, wherever they are written.
  EXPECT_EQ(yaml("base: &b {x: 1, y: 2}\nd:\n  y: 5\n  <<: *b\n  z: 3\n")["d"],
            Json::parse(R"({"x": 1, "y": 5, "z": 3})"));
  // A list of mappings: earlier ones win; order is PyYAML's (the list last to first, then own
  // keys).
  EXPECT_EQ(
      yaml("a: &a {x: 1, y: 2}\nb: &b {y: 3, z: 4}\nd:\n  <<: [*a, *b]\n  w: 0\n")["d"].dump(),
      R"({"y":2,"z":4,"x":1,"w":0})");
  // Merged mappings may merge in turn; an inline mapping merges too; the anchor's own node is
  // unchanged.
  const Json j = yaml("a: &a {x: 1}\nb: &b {<<: *a, y: 2}\nc: {<<: *b, z: 3}\ne: {<<: {q: 9}}\n");
  EXPECT_EQ(j["c"], Json::parse(R"({"x": 1, "y": 2, "z": 3})"));
  EXPECT_EQ(j["b"], Json::parse(R"({"x": 1, "y": 2})"));
  EXPECT_EQ(j["a"], Json::parse(R"({"x": 1})"));
  EXPECT_EQ(j["e"], Json::parse(R"({"q": 9})"));
  // A quoted '<<' is an ordinary key.
  EXPECT_EQ(yaml("d: {\"<<\": 1}\n")["d"], Json::parse(R"({"<<": 1})"));
  // What cannot be merged.
  EXPECT_EQ(yaml_error("a: 1\nd:\n  <<: 3\n"),
            "f.yaml:3: the merge key '<<' takes a mapping or a list of mappings (e.g. <<: *base), "
            "got a scalar");
  EXPECT_EQ(
      yaml_error("a: &a {x: 1}\nd:\n  <<: [*a, [1]]\n"),
      "f.yaml:3: the merge key '<<' takes a mapping or a list of mappings; this list holds a list");
  // Duplicate keys are still refused among the mapping's own keys (and two merge keys).
  EXPECT_EQ(yaml_error("a: &a {x: 1}\nd:\n  <<: *a\n  y: 1\n  y: 2\n"),
            "f.yaml:5: duplicate key 'd.y' (first given at line 4)");
  EXPECT_EQ(yaml_error("a: &a {x: 1}\nd:\n  <<: *a\n  <<: *a\n"),
            "f.yaml:4: duplicate key 'd.<<' (first given at line 3)");
}

TEST(YamlLoad, MergeKeyCaseReadsAsOmegaConf) {
  // OmegaConf.load(sft.yaml).dataset.eval == {'path': 'data.jsonl'}.
  const Json cfg = zt::load_hydra_yaml(case_dir("yaml-merge-key-refused") / "sft.yaml", {});
  EXPECT_EQ(cfg["dataset"]["eval"], Json::parse(R"({"path": "data.jsonl"})"));
  EXPECT_EQ(cfg["dataset"]["train"], Json::parse(R"({"path": "data.jsonl"})"));
}

// An override's value is read in Hydra's grammar (io/hydra_override.h), not as YAML: a merge key or
// an anchor is refused there, as Hydra refuses its '<' and '&'.
TEST(YamlLoad, OverrideValuesAreNotYaml) {
  TempDir d;
  std::ofstream(d / "ok.yaml") << "trainer:\n  x: 1\n";
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(d / "ok.yaml", {"trainer.x={<<: {a: 1}, b: 2}"}); }),
            "override 'trainer.x={<<: {a: 1}, b: 2}': character 12 ('<') is not allowed in an "
            "unquoted value by Hydra's override grammar; quote the value ('…' or \"…\")");
  EXPECT_EQ(
      error_of([&] { zt::load_hydra_yaml(d / "ok.yaml", {"trainer.x=[&l [1, 2], *l, *l]"}); }),
      "override 'trainer.x=[&l [1, 2], *l, *l]': character 12 ('&') is not allowed in an unquoted "
      "value by Hydra's override grammar; quote the value ('…' or \"…\")");
}

}  // namespace
