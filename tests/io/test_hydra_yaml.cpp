#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "io/hydra_yaml.h"
#include "io/yaml_writer.h"

namespace {

std::filesystem::path write_tmp(const std::string& name, const std::string& text) {
  auto dir = std::filesystem::temp_directory_path() / "zt_test_hydra";
  std::filesystem::create_directories(dir);
  auto p = dir / name;
  std::ofstream(p) << text;
  return p;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const zt::Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST(YamlScalar, OmegaConfTyping) {
  EXPECT_EQ(zt::yaml_scalar_to_json("1e-5", false).get<double>(), 1e-5);
  EXPECT_TRUE(zt::yaml_scalar_to_json("1e-5", false).is_number_float());
  EXPECT_EQ(zt::yaml_scalar_to_json("2_000", false).get<int64_t>(), 2000);
  EXPECT_EQ(zt::yaml_scalar_to_json("True", false).get<bool>(), true);
  EXPECT_TRUE(zt::yaml_scalar_to_json("null", false).is_null());
  EXPECT_TRUE(zt::yaml_scalar_to_json("~", false).is_null());
  EXPECT_EQ(zt::yaml_scalar_to_json("42", true).get<std::string>(), "42");
  EXPECT_EQ(zt::yaml_scalar_to_json("Qwen/Qwen2.5-1.5B", false).get<std::string>(),
            "Qwen/Qwen2.5-1.5B");
  EXPECT_EQ(zt::yaml_scalar_to_json("1.5.2", false).get<std::string>(), "1.5.2");
  // YAML 1.1 as PyYAML resolves it (what OmegaConf gives): a leading 0 is octal, 0b binary, and a
  // leading 0 followed by 8 or 9 is no int at all but a string.
  EXPECT_EQ(zt::yaml_scalar_to_json("017", false).get<int64_t>(), 15);
  EXPECT_EQ(zt::yaml_scalar_to_json("-010", false).get<int64_t>(), -8);
  EXPECT_EQ(zt::yaml_scalar_to_json("0b101", false).get<int64_t>(), 5);
  EXPECT_EQ(zt::yaml_scalar_to_json("0x1F", false).get<int64_t>(), 31);
  EXPECT_EQ(zt::yaml_scalar_to_json("0", false).get<int64_t>(), 0);
  EXPECT_EQ(zt::yaml_scalar_to_json("-0", false).get<int64_t>(), 0);
  EXPECT_EQ(zt::yaml_scalar_to_json("+42", false).get<int64_t>(), 42);
  EXPECT_EQ(zt::yaml_scalar_to_json("08", false).get<std::string>(), "08");
  EXPECT_EQ(zt::yaml_scalar_to_json("0.5", false).get<double>(), 0.5);
  EXPECT_EQ(zt::yaml_scalar_to_json("0_7", false).get<int64_t>(), 7);
  EXPECT_EQ(zt::yaml_scalar_to_json("1_000", false).get<int64_t>(), 1000);
  for (const char* s :
       {"0X1F", "_1",  "0_x1", "__0x1F", "0b",    "0x",   "0o17", "1:60", "0:30", "1.5.2", "-.5",
        "inf",  "nan", "1e",   "e5",     "+.nan", "tRUE", "nULL", "Yes!", "y",    "n"})
    EXPECT_TRUE(zt::yaml_scalar_to_json(s, false).is_string()) << s;
  // YAML 1.1's other words and forms, as PyYAML resolves them inside OmegaConf's loader (checked
  // with OmegaConf 2.4: `a: yes` is True, `a: 12:30` is 750).
  for (const char* s : {"yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE"})
    EXPECT_EQ(zt::yaml_scalar_to_json(s, false), zt::Json(true)) << s;
  for (const char* s : {"no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE"})
    EXPECT_EQ(zt::yaml_scalar_to_json(s, false), zt::Json(false)) << s;
  for (const char* s : {"Null", "NULL", ""})
    EXPECT_TRUE(zt::yaml_scalar_to_json(s, false).is_null()) << s;
  EXPECT_EQ(zt::yaml_scalar_to_json("12:30", false).get<int64_t>(), 750);
  EXPECT_EQ(zt::yaml_scalar_to_json("-1:30", false).get<int64_t>(), -90);
  EXPECT_EQ(zt::yaml_scalar_to_json("1:0:5", false).get<int64_t>(), 3605);
  EXPECT_EQ(zt::yaml_scalar_to_json("1:30.5", false).get<double>(), 90.5);
  EXPECT_EQ(zt::yaml_scalar_to_json("1.", false).get<double>(), 1.0);
  EXPECT_EQ(zt::yaml_scalar_to_json(".5", false).get<double>(), 0.5);
  EXPECT_EQ(zt::yaml_scalar_to_json("1e5", false).get<double>(), 1e5);
  EXPECT_EQ(zt::yaml_scalar_to_json("1_0.2_5", false).get<double>(), 10.25);
  EXPECT_EQ(zt::yaml_scalar_to_json("-.INF", false).get<double>(),
            -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(zt::yaml_scalar_to_json(".NaN", false).get<double>()));
}

TEST(HydraYaml, InterpolationOverridesAndDroppedSections) {
  setenv("ZT_TEST_HYDRA_ENV", "from-env", 1);
  auto p = write_tmp("a.yaml", R"(defaults:
  - _self_
hydra:
  run: {dir: x}
exp_name: demo
exp_dir: runs/${exp_name}
n: 4
copy: ${n}
env: ${oc.env:ZT_TEST_HYDRA_ENV}
env_default: ${oc.env:ZT_TEST_HYDRA_UNSET,fallback}
trainer:
  lr: 1e-5
  steps: ???
  out: ${exp_dir}/final
)");
  zt::Json j = zt::load_hydra_yaml(p, {"n=8", "+trainer.extra=true"});
  EXPECT_FALSE(j.contains("defaults"));
  EXPECT_FALSE(j.contains("hydra"));
  EXPECT_EQ(j["exp_dir"], "runs/demo");
  EXPECT_EQ(j["copy"].get<int64_t>(), 8);  // typed whole-value interpolation sees the override
  EXPECT_EQ(j["env"], "from-env");
  EXPECT_EQ(j["env_default"], "fallback");
  EXPECT_EQ(j["trainer"]["lr"].get<double>(), 1e-5);
  EXPECT_EQ(j["trainer"]["steps"], "???");
  EXPECT_EQ(j["trainer"]["out"], "runs/demo/final");
  EXPECT_EQ(j["trainer"]["extra"], true);
  // `+key` adds a key: Hydra 1.3 refuses it where the config holds a value already (not null nor
  // '???'); `++key` adds or overrides.
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(p, {"+trainer.lr=1"}); }),
            "override '+trainer.lr=1': could not append to config: an item is already at "
            "'trainer.lr' in " +
                p.string() +
                " (as Hydra says). Either remove the + prefix: 'trainer.lr=1', or add a second + "
                "to add or override 'trainer.lr': '++trainer.lr=1'");
  const zt::Json added = zt::load_hydra_yaml(p, {"+trainer.steps=3", "++trainer.lr=2"});
  EXPECT_EQ(added["trainer"]["steps"].get<int64_t>(), 3);
  EXPECT_EQ(added["trainer"]["lr"].get<int64_t>(), 2);
  // The file's 010 is YAML 1.1's octal (PyYAML); an override's is no number at all in Hydra's
  // grammar (its INT is [+-]?(0|[1-9](_?[0-9])*): 010 is the tokens 0 and 10, so the string "010").
  auto oct = write_tmp("o.yaml", "a: 010\nb: 1\nc: 1\n");
  const zt::Json o = zt::load_hydra_yaml(oct, {"b=010", "c=1_0"});
  EXPECT_EQ(o["a"].get<int64_t>(), 8);
  EXPECT_EQ(o["b"], "010");
  EXPECT_EQ(o["c"].get<int64_t>(), 10);
}

// OmegaConf's relative interpolation (`${.b}` a key beside the value, each further dot one level
// up), an oc.env default that interpolates, and the escaped `\${...}` (the text itself).
TEST(HydraYaml, RelativeNestedAndEscapedInterpolation) {
  unsetenv("ZT_TEST_HYDRA_UNSET");
  auto p = write_tmp("rel.yaml", R"(exp_dir: logs/x
n: 3
trainer:
  output_dir: ${..exp_dir}/ckpts
  logging_dir: ${.output_dir}/tb
  steps: ${..n}
  deep:
    up2: ${...exp_dir}
    side: ${.leaf}
    leaf: 7
  list:
    - ${..steps}
    - 2
out: ${oc.env:ZT_TEST_HYDRA_UNSET,${exp_dir}/env}
typed: ${oc.env:ZT_TEST_HYDRA_UNSET,${n}}
lit: \${exp_dir} and ${n}
)");
  const zt::Json j = zt::load_hydra_yaml(p, {});
  EXPECT_EQ(j["trainer"]["output_dir"], "logs/x/ckpts");
  EXPECT_EQ(j["trainer"]["logging_dir"], "logs/x/ckpts/tb");
  EXPECT_EQ(j["trainer"]["steps"].get<int64_t>(), 3);
  EXPECT_EQ(j["trainer"]["deep"]["up2"], "logs/x");
  EXPECT_EQ(j["trainer"]["deep"]["side"].get<int64_t>(), 7);
  EXPECT_EQ(j["trainer"]["list"][0].get<int64_t>(), 3);  // in a list: the list is the holder
  EXPECT_EQ(j["out"], "logs/x/env");
  EXPECT_EQ(j["typed"], "3");  // a default is a string, as OmegaConf's str() makes it
  EXPECT_EQ(j["lit"], "${exp_dir} and 3");
  // The text an escaped interpolation or an environment variable leaves is final, also where
  // another key refers to it, before or after it (it was read as an interpolation again).
  setenv("ZT_TEST_HYDRA_DOLLAR", "${nope}", 1);
  auto esc = write_tmp("esc.yaml",
                       "before: pre-${name}\nname: \\${x}\nafter: ${name}/post\n"
                       "env: ${oc.env:ZT_TEST_HYDRA_DOLLAR}\nenv_ref: ${env}\n");
  const zt::Json e = zt::load_hydra_yaml(esc, {});
  EXPECT_EQ(e["before"], "pre-${x}");
  EXPECT_EQ(e["name"], "${x}");
  EXPECT_EQ(e["after"], "${x}/post");
  EXPECT_EQ(e["env"], "${nope}");
  EXPECT_EQ(e["env_ref"], "${nope}");
  auto up = write_tmp("up.yaml", "a: 1\nb: ${..a}\n");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(up, {}); }),
            up.string() + ": 'b' interpolates '${..a}', which goes above the top of the config");
  auto miss = write_tmp("miss.yaml", "t:\n  a: ${.nope}\n");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(miss, {}); }),
            miss.string() + ": 't.a' interpolates '${.nope}', but no key 't.nope' exists");
}

// Hydra's other override forms: ++key=value (add or override) and ~key / ~key=value (delete).
TEST(HydraYaml, ForceAddAndDeleteOverrides) {
  auto p = write_tmp("ov.yaml", "a: 1\nt:\n  seed: 3\n  lr: 0.5\n");
  std::vector<std::string> seen;
  const zt::Json j =
      zt::load_hydra_yaml(p, {"++a=2", "++t.extra=x", "~t.seed", "~t.lr=0.5"}, {}, &seen);
  EXPECT_EQ(j["a"].get<int64_t>(), 2);
  EXPECT_EQ(j["t"]["extra"], "x");
  EXPECT_FALSE(j["t"].contains("seed"));
  EXPECT_FALSE(j["t"].contains("lr"));
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "t.extra", "t.seed", "t.lr"}));
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(p, {"~t.nope"}); }),
            "override '~t.nope': cannot delete 't.nope': it is not in " + p.string());
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(p, {"~t.seed=4"}); }),
            "override '~t.seed=4': cannot delete 't.seed': its value is 3, not 4");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(p, {"++=1"}); }),
            "override '++=1' is not of the form key.path=value");
  // A dict in Hydra's grammar needs no space after a key's colon (YAML would read one key
  // "enable_thinking:false"); escaped and quoted colons and a value's own colons stay. (A quoted
  // key, 'a:b', is refused by Hydra's grammar: its dictKey is never quoted.)
  const zt::Json d = zt::load_hydra_yaml(
      p, {"+kw={enable_thinking:false,n:2,a\\:b:c,s:'x:y',u:http://h:1,l:[1,2]}", "+v=a:b"});
  EXPECT_EQ(d["kw"], (zt::Json{{"enable_thinking", false},
                               {"n", 2},
                               {"a:b", "c"},
                               {"s", "x:y"},
                               {"u", "http://h:1"},
                               {"l", {1, 2}}}));
  EXPECT_EQ(d["v"], "a:b");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(p, {"+kw={'a:b':c}"}); }),
            "override '+kw={'a:b':c}': expected a dict key (unquoted) at character 6, found "
            "''a:b''");
  // Hydra's own settings on the command line are accepted and change nothing.
  const zt::Json h = zt::load_hydra_yaml(
      p, {"hydra.run.dir=.", "hydra/job_logging=disabled", "++hydra.output_subdir=null"});
  EXPECT_EQ(h, zt::load_hydra_yaml(p, {}));
}

// `key=` sets the empty string, as Hydra's parser does (YAML would read the empty text as null);
// `key=null` stays null and `~key=` deletes only a key that holds the empty string.
TEST(HydraYaml, EmptyOverrideValueIsEmptyString) {
  auto p = write_tmp("empty.yaml", "exp_name: demo\nn: 1\ns: ''\n");
  const zt::Json j = zt::load_hydra_yaml(p, {"exp_name=", "n=null", "+added="});
  EXPECT_EQ(j["exp_name"], "");
  EXPECT_TRUE(j["n"].is_null());
  EXPECT_EQ(j["added"], "");
  EXPECT_FALSE(zt::load_hydra_yaml(p, {"~s="}).contains("s"));
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(p, {"~n="}); }),
            "override '~n=': cannot delete 'n': its value is 1, not \"\"");
}

// oc.env's defaults as OmegaConf 2.3 gives them: the default typed by its grammar, then str() of
// it (env() returns str(default)), so `1.50` is "1.5", `true` "True", `+1_000` "1000" (they were
// kept as written); a quoted default is its text as written, null (any case) None, and text the
// grammar does not type (0x10, 007, 1__0, yes) stays as written. An interpolated value, in the
// default or inside a string, is str() of it too (True, 1.5, -inf, None; they were true, null).
// The values are OmegaConf 2.3.0's for this file.
TEST(HydraYaml, EnvDefaultsAreStrOfTheTypedDefault) {
  unsetenv("ZT_TEST_HYDRA_UNSET");
  auto p = write_tmp("envdef.yaml", R"(a: ${oc.env:ZT_TEST_HYDRA_UNSET, 5 }
b: ${oc.env:ZT_TEST_HYDRA_UNSET,'abc'}
c: ${oc.env:ZT_TEST_HYDRA_UNSET,}
d: ${oc.env:ZT_TEST_HYDRA_UNSET,NULL}
e: x/${oc.env:ZT_TEST_HYDRA_UNSET,true}
f: ${oc.env:ZT_TEST_HYDRA_UNSET,1.50}
g: ${oc.env:ZT_TEST_HYDRA_UNSET,'1.50'}
h: ${oc.env:ZT_TEST_HYDRA_UNSET,"1.50"}
i: ${oc.env:ZT_TEST_HYDRA_UNSET,+1_000}
j: ${oc.env:ZT_TEST_HYDRA_UNSET,-0}
k: ${oc.env:ZT_TEST_HYDRA_UNSET,0x10}
l: ${oc.env:ZT_TEST_HYDRA_UNSET,007}
m: ${oc.env:ZT_TEST_HYDRA_UNSET,1e-5}
n: ${oc.env:ZT_TEST_HYDRA_UNSET,2e16}
o: ${oc.env:ZT_TEST_HYDRA_UNSET,-INF}
p: ${oc.env:ZT_TEST_HYDRA_UNSET,FALSE}
q: ${oc.env:ZT_TEST_HYDRA_UNSET,123456789012345678901234567890}
r: ${oc.env:ZT_TEST_HYDRA_UNSET,1__0}
s: ${oc.env:ZT_TEST_HYDRA_UNSET,yes}
t: ${oc.env:ZT_TEST_HYDRA_UNSET,'null'}
u: ${oc.env:ZT_TEST_HYDRA_UNSET,5.}
v: ${oc.env:ZT_TEST_HYDRA_UNSET,.5}
w: ${oc.env:ZT_TEST_HYDRA_UNSET,1.0e1_0}
flag: on
fl: 1.50
inf: -.inf
nul: ~
x: ${oc.env:ZT_TEST_HYDRA_UNSET,${flag}}
y: ${oc.env:ZT_TEST_HYDRA_UNSET,${fl}}
z: ${oc.env:ZT_TEST_HYDRA_UNSET,'${flag}'}
aa: ${oc.env:ZT_TEST_HYDRA_UNSET,${inf}}
ab: ${oc.env:ZT_TEST_HYDRA_UNSET,${nul}}
ac: run-${flag}-${fl}-${inf}-${nul}
ad: ${oc.env:ZT_TEST_HYDRA_UNSET,nan}
)");
  const zt::Json j = zt::load_hydra_yaml(p, {});
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"a", "5"},
      {"b", "abc"},
      {"c", ""},
      {"e", "x/True"},
      {"f", "1.5"},
      {"g", "1.50"},
      {"h", "1.50"},
      {"i", "1000"},
      {"j", "0"},
      {"k", "0x10"},
      {"l", "007"},
      {"m", "1e-05"},
      {"n", "2e+16"},
      {"o", "-inf"},
      {"p", "False"},
      {"q", "123456789012345678901234567890"},
      {"r", "1__0"},
      {"s", "yes"},
      {"t", "null"},
      {"u", "5.0"},
      {"v", "0.5"},
      {"w", "10000000000.0"},
      {"x", "True"},
      {"y", "1.5"},
      {"z", "True"},
      {"aa", "-inf"},
      {"ac", "run-True-1.5--inf-None"},
      {"ad", "nan"}};
  for (const auto& [key, value] : expected) EXPECT_EQ(j[key], value) << key;
  EXPECT_TRUE(j["d"].is_null());
  EXPECT_TRUE(j["ab"].is_null());
  // A list or dict made text: OmegaConf writes Python's str() of it ("[1, 2]", "{'a': 1}");
  // zerotune refuses it. A set variable needs no default: the list there is no error.
  auto l = write_tmp("envdef_list.yaml", "a: ${oc.env:ZT_TEST_HYDRA_UNSET,[1,2]}\n");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(l, {}); }),
            l.string() +
                ": 'a': '[1,2]' gives a list where OmegaConf makes text of it, Python's str() of "
                "the list (as in [1, 'a'] or {'a': 1}), which zerotune does not write; write the "
                "text wanted, quoted");
  setenv("ZT_TEST_HYDRA_SET", "v", 1);
  auto l2 = write_tmp("envdef_list2.yaml", "b: ${oc.env:ZT_TEST_HYDRA_SET,[1,2]}\n");
  EXPECT_EQ(zt::load_hydra_yaml(l2, {})["b"], "v");
  unsetenv("ZT_TEST_HYDRA_SET");
  auto d = write_tmp("envdef_dict.yaml", "kw: {a: 1}\ns: x${kw}\n");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(d, {}); }),
            d.string() +
                ": 's': '${kw}' gives a dict where OmegaConf makes text of it, Python's str() of "
                "the dict (as in [1, 'a'] or {'a': 1}), which zerotune does not write; write the "
                "text wanted, quoted");
}

// oc.env takes a variable name and one default; `${oc.env:X,a,b}` was read as the default "a,b",
// where OmegaConf raises (env() takes from 1 to 2 positional arguments but 3 were given). A comma
// in a quoted or escaped default, or in a nested interpolation, separates nothing.
TEST(HydraYaml, EnvTakesAtMostOneDefault) {
  unsetenv("ZT_TEST_HYDRA_UNSET");
  auto p = write_tmp("env3.yaml", "a: ${oc.env:ZT_TEST_HYDRA_UNSET,a,b}\n");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(p, {}); }),
            p.string() +
                ": 'a' interpolates '${oc.env:ZT_TEST_HYDRA_UNSET,a,b}', which gives oc.env 3 "
                "arguments; oc.env takes an environment variable name and at most one default "
                "(quote a default that holds a comma: 'a,b')");
  setenv("ZT_TEST_HYDRA_SET", "v", 1);  // refused whether the variable is set or not, as there
  EXPECT_NE(error_of([&] {
              zt::load_hydra_yaml(write_tmp("env3s.yaml", "a: ${oc.env:ZT_TEST_HYDRA_SET,a,b}\n"),
                                  {});
            }).find("which gives oc.env 3 arguments"),
            std::string::npos);
  auto q = write_tmp("env2.yaml",
                     "x: 1\na: ${oc.env:ZT_TEST_HYDRA_UNSET,'a,b'}\n"
                     "b: ${oc.env:ZT_TEST_HYDRA_UNSET,a\\,b}\n"
                     "c: ${oc.env:ZT_TEST_HYDRA_UNSET,${oc.env:ZT_TEST_HYDRA_UNSET,${x}}}\n"
                     "d: '${oc.env: ZT_TEST_HYDRA_SET }'\n");
  const zt::Json j = zt::load_hydra_yaml(q, {});
  EXPECT_EQ(j["a"], "a,b");
  EXPECT_EQ(j["b"], "a,b");
  EXPECT_EQ(j["c"], "1");
  EXPECT_EQ(j["d"], "v");
  unsetenv("ZT_TEST_HYDRA_SET");
}

// A quoted oc.env argument is text whose interpolations are resolved into it, as OmegaConf's
// grammar reads a quoted string: its quotes go, `\'` (in '…') and `\"` (in "…") are the quote,
// `\${x}` is the text ${x}, a backslash run before the closing quote is halved, and a whole
// interpolation in quotes gives its value's text. Defaults used to keep the quotes around an
// interpolation ("runs/x/ckpts" with the quotes) and the backslash of an escaped quote.
TEST(HydraYaml, EnvQuotedDefaultsResolveAndUnescape) {
  unsetenv("ZT_TEST_HYDRA_UNSET");
  setenv("ZT_TEST_HYDRA_SET", "v", 1);
  auto p = write_tmp("envq.yaml", R"Y(exp_dir: runs/x
b: B
n: 42
out: ${oc.env:ZT_TEST_HYDRA_UNSET,"${exp_dir}/ckpts"}
single: ${oc.env:ZT_TEST_HYDRA_UNSET,'${b}/x'}
esc: ${oc.env:ZT_TEST_HYDRA_UNSET,'\${x}'}
whole: ${oc.env:ZT_TEST_HYDRA_UNSET,"${n}"}
dq: ${oc.env:ZT_TEST_HYDRA_UNSET,"a\"b"}
sq: ${oc.env:ZT_TEST_HYDRA_UNSET,'a\'b'}
other_quote: ${oc.env:ZT_TEST_HYDRA_UNSET,'a\"b'}
trailing: ${oc.env:ZT_TEST_HYDRA_UNSET,'a\\'}
inner: ${oc.env:ZT_TEST_HYDRA_UNSET,'a\\b'}
set: ${oc.env:ZT_TEST_HYDRA_SET,"${exp_dir}/ckpts"}
)Y");
  const zt::Json j = zt::load_hydra_yaml(p, {});
  EXPECT_EQ(j["out"], "runs/x/ckpts");
  EXPECT_EQ(j["single"], "B/x");
  EXPECT_EQ(j["esc"], "${x}");
  EXPECT_EQ(j["whole"], "42");
  EXPECT_EQ(j["dq"], "a\"b");
  EXPECT_EQ(j["sq"], "a'b");
  EXPECT_EQ(j["other_quote"], "a\\\"b");  // `\"` inside '…' is text
  EXPECT_EQ(j["trailing"], "a\\");
  EXPECT_EQ(j["inner"], "a\\\\b");  // backslashes before plain text stay
  EXPECT_EQ(j["set"], "v");
  unsetenv("ZT_TEST_HYDRA_SET");
}

// oc.env's variable name is resolved before the variable is read, as OmegaConf resolves every
// resolver argument first: an interpolation (also a nested oc.env, or one inside the name), a
// quoted name. It was looked up as written (`${exp_name}`), so the default always won; the error
// for an unset variable names the variable looked up.
TEST(HydraYaml, EnvNameIsResolved) {
  unsetenv("ZT_TEST_HYDRA_UNSET");
  unsetenv("ZT_TEST_HYDRA_UNSET2");
  setenv("ZT_TEST_HYDRA_SET", "v", 1);
  auto p = write_tmp("envname.yaml", R"Y(exp_name: ZT_TEST_HYDRA_SET
suffix: SET
a: ${oc.env:${exp_name},dflt}
b: ${oc.env:${oc.env:ZT_TEST_HYDRA_UNSET,ZT_TEST_HYDRA_SET},d}
c: ${oc.env:'ZT_TEST_HYDRA_SET',d}
d: ${oc.env:ZT_TEST_HYDRA_${suffix},d}
e: 'x/${oc.env: ${exp_name} }'
)Y");
  const zt::Json j = zt::load_hydra_yaml(p, {});
  EXPECT_EQ(j["a"], "v");
  EXPECT_EQ(j["b"], "v");
  EXPECT_EQ(j["c"], "v");
  EXPECT_EQ(j["d"], "v");
  EXPECT_EQ(j["e"], "x/v");
  auto q = write_tmp("envname_unset.yaml",
                     "a: ${oc.env:${oc.env:ZT_TEST_HYDRA_UNSET,ZT_TEST_HYDRA_UNSET2}}\n");
  EXPECT_EQ(
      error_of([&] { zt::load_hydra_yaml(q, {}); }),
      q.string() + ": 'a' interpolates environment variable ZT_TEST_HYDRA_UNSET2 which is not set");
  // The default is resolved before the variable is read, so its error is raised though the
  // variable is set, as OmegaConf resolves a resolver's arguments before calling it.
  auto r = write_tmp("envname_def.yaml", "a: ${oc.env:ZT_TEST_HYDRA_SET,${nope}}\n");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(r, {}); }),
            r.string() + ": 'a' interpolates '${nope}', but no key 'nope' exists");
  unsetenv("ZT_TEST_HYDRA_SET");
}

// `${oc.env:}` names no variable: it said "environment variable  which is not set" (an empty name).
// An empty name with a default gives the default, as in OmegaConf (os.environ has no key '').
TEST(HydraYaml, EnvNeedsAVariableName) {
  for (const char* v : {"${oc.env:}", "${oc.env:''}"}) {
    auto p = write_tmp("envempty.yaml", std::string("x: 1\nt:\n  a: ") + v + "\n");
    EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(p, {}); }),
              p.string() + ": 't.a' interpolates '" + v +
                  "', which names no environment variable; oc.env needs one, as in "
                  "${oc.env:NAME} or ${oc.env:NAME,default}")
        << v;
  }
  auto q = write_tmp("envempty_def.yaml", "a: ${oc.env:,d}\n");
  EXPECT_EQ(zt::load_hydra_yaml(q, {})["a"], "d");
}

// An interpolation in an override is one token of Hydra's grammar, resolved as in the file: a
// resolver's colon and braces are not a YAML flow mapping, also inside a list or a dict, and a
// quoted one stays as it was.
TEST(HydraYaml, OverrideInterpolationsAreNotMappings) {
  setenv("ZT_TEST_HYDRA_STEPS", "7", 1);
  unsetenv("ZT_TEST_HYDRA_UNSET");
  auto p = write_tmp("ovi.yaml", "name: base\nsteps: 1\nt:\n  out: x\n");
  const zt::Json j = zt::load_hydra_yaml(
      p, {"steps=${oc.env:ZT_TEST_HYDRA_STEPS}", "name=run_${oc.env:ZT_TEST_HYDRA_UNSET,dflt}",
          "t.out=${name}/out", "+l=[${oc.env:ZT_TEST_HYDRA_STEPS},${steps},b]",
          "+kw={a:${oc.env:ZT_TEST_HYDRA_UNSET,${steps}},k:'${k}'}", "+s='${name}:x'", "+k=q"});
  EXPECT_EQ(j["steps"], "7");  // oc.env gives a string, as OmegaConf's (RunConfig types it)
  EXPECT_EQ(j["name"], "run_dflt");
  EXPECT_EQ(j["t"]["out"], "run_dflt/out");
  EXPECT_EQ(j["l"], (zt::Json{"7", "7", "b"}));
  EXPECT_EQ(j["kw"], (zt::Json{{"a", "7"}, {"k", "q"}}));
  EXPECT_EQ(j["s"], "run_dflt:x");
  // A resolver zerotune lacks is named as such, not read as a mapping.
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(p, {"name=${now:%Y}"}); }),
            p.string() +
                ": 'name' uses the resolver '${now:%Y}', which zerotune does not "
                "support (only oc.env) (given on the command line)");
}

// An interpolation error in a value an override set says so, as the other override errors do (an
// unset variable read as if the file had named it); one in the file does not.
TEST(HydraYaml, InterpolationErrorsOfOverridesSayCommandLine) {
  unsetenv("ZT_TEST_HYDRA_UNSET");
  auto p = write_tmp("ovenv.yaml", "name: base\nout: ${oc.env:ZT_TEST_HYDRA_UNSET}\nt:\n  a: 1\n");
  EXPECT_EQ(error_of([&] {
              zt::load_hydra_yaml(p, {"out=x", "name=${oc.env:ZT_TEST_HYDRA_UNSET}"});
            }),
            p.string() +
                ": 'name' interpolates environment variable ZT_TEST_HYDRA_UNSET which is not set "
                "(given on the command line)");
  EXPECT_EQ(error_of([&] {
              zt::load_hydra_yaml(p, {"out=x", "+l=[a,${oc.env:ZT_TEST_HYDRA_UNSET}]"});
            }),
            p.string() +
                ": 'l.1' interpolates environment variable ZT_TEST_HYDRA_UNSET which is not set "
                "(given on the command line)");
  EXPECT_EQ(error_of([&] {
              zt::load_hydra_yaml(p, {"t={b: '${nope}'}", "out=x"});
            }),
            p.string() +
                ": 't.b' interpolates '${nope}', but no key 'nope' exists (given on the command "
                "line)");
  // The file's own interpolation, beside an override of another key of its mapping.
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(p, {"t={b: 2}"}); }),
            p.string() +
                ": 'out' interpolates environment variable ZT_TEST_HYDRA_UNSET which is not set");
}

TEST(HydraYaml, Errors) {
  auto p = write_tmp("b.yaml", "a: 1\nb: ${nope.x}\n");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(p, {}); }),
            p.string() + ": 'b' interpolates '${nope.x}', but no key 'nope.x' exists");
  auto q = write_tmp("c.yaml", "a: 1\n");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(q, {"zz=3"}); }),
            "override 'zz=3': key 'zz' is not in " + q.string() + " (use +zz to add a new key)");
  // A misspelt key (a fresh user's trainer.lerning_rate) gets the closest key of the mapping where
  // the path left the file, in the path it names; a word that is not close gets none.
  auto m = write_tmp("m.yaml", "trainer:\n  learning_rate: 1.0e-05\n  seed: 1\n");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(m, {"trainer.lerning_rate=2"}); }),
            "override 'trainer.lerning_rate=2': key 'trainer.lerning_rate' is not in " +
                m.string() +
                " (did you mean 'trainer.learning_rate'? or use +trainer.lerning_rate to add a new "
                "key)");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(m, {"trainr.seed=2"}); }),
            "override 'trainr.seed=2': key 'trainr.seed' is not in " + m.string() +
                " (did you mean 'trainer.seed'? or use +trainr.seed to add a new key)");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(m, {"trainer.sed=2"}); }),
            "override 'trainer.sed=2': key 'trainer.sed' is not in " + m.string() +
                " (did you mean 'trainer.seed'? or use +trainer.sed to add a new key)");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(m, {"trainer.xy=2"}); }),
            "override 'trainer.xy=2': key 'trainer.xy' is not in " + m.string() +
                " (use +trainer.xy to add a new key)");
  // A key the application knows (`known`: it has a default there), absent from the file, is
  // suggested too, also below a section the file lacks.
  EXPECT_EQ(error_of([&] {
              zt::load_hydra_yaml(m, {"trainer.warmup_step=2"},
                                  {{"trainer.warmup_steps"}, {"compute.zero_stage"}});
            }),
            "override 'trainer.warmup_step=2': key 'trainer.warmup_step' is not in " + m.string() +
                " (did you mean 'trainer.warmup_steps'? or use +trainer.warmup_step to add a new "
                "key)");
  EXPECT_EQ(
      error_of([&] { zt::load_hydra_yaml(m, {"compute.zero_stag=2"}, {{"compute.zero_stage"}}); }),
      "override 'compute.zero_stag=2': key 'compute.zero_stag' is not in " + m.string() +
          " (did you mean 'compute.zero_stage'? or use +compute.zero_stag to add a new key)");
  // A known old name is suggested as its new name (`renamed_to`), unless the file has it.
  EXPECT_EQ(error_of([&] {
              zt::load_hydra_yaml(m, {"trainer.max_seq_lenght=2"},
                                  {{"trainer.max_seq_length", "trainer.max_length"}});
            }),
            "override 'trainer.max_seq_lenght=2': key 'trainer.max_seq_lenght' is not in " +
                m.string() +
                " (did you mean 'trainer.max_length'? or use +trainer.max_seq_lenght to add a new "
                "key)");
  EXPECT_EQ(error_of([&] {
              zt::load_hydra_yaml(m, {"trainer.sed=2"}, {{"trainer.seed", "x.y"}});
            }),
            "override 'trainer.sed=2': key 'trainer.sed' is not in " + m.string() +
                " (did you mean 'trainer.seed'? or use +trainer.sed to add a new key)");
  auto r = write_tmp("d.yaml", "a: [1, 2\n");
  EXPECT_NE(error_of([&] { zt::load_hydra_yaml(r, {}); }).find(r.string() + ":"),
            std::string::npos);
  auto s = write_tmp("e.yaml", "a: ${b}\nb: ${a}\n");
  EXPECT_NE(error_of([&] { zt::load_hydra_yaml(s, {}); }).find("interpolation loop"),
            std::string::npos);
  auto t = write_tmp("f.yaml", "a: ???\nb: ${a}\n");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(t, {}); }),
            t.string() + ": 'b' interpolates 'a', which is ??? (mandatory, not set)");
}

// The users' own sft.yaml starts with a defaults list that only configures Hydra's logging:
// accepted, as before config groups were composed (an override of Hydra's own groups may even come
// before other entries, which Hydra 1.3 refuses). An entry naming a config group whose directory or
// file is not there is refused naming the file and the entry, never dropped (a run with other
// values than the user's); the golden cases (test_hydra_compose.cpp) cover composition itself.
TEST(HydraYaml, DefaultsListHydraEntriesAndMissingGroups) {
  auto ok = write_tmp("h.yaml", R"(defaults:
  - override hydra/hydra_logging: disabled
  - override hydra/job_logging: disabled
  - override /hydra/launcher: basic
  - db: null
  - optional cache: null
  - _self_
a: 1
)");
  EXPECT_EQ(zt::load_hydra_yaml(ok, {}), zt::Json::parse(R"({"a": 1})"));
  const std::string dir = ok.parent_path().string();
  auto group = write_tmp("i.yaml", "defaults:\n  - optim: fast\n  - _self_\na: 1\n");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(group, {}); }).substr(0, 150),
            (group.string() +
             ": defaults: entry {\"optim\":\"fast\"}: there is no config group 'optim' (no "
             "directory " +
             dir + "/optim); config groups in " + dir)
                .substr(0, 150));
  auto plain = write_tmp("j.yaml", "defaults:\n  - db/mysql\na: 1\n");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(plain, {}); }),
            plain.string() + ": defaults: entry \"db/mysql\": there is no config " + dir +
                "/db/mysql.yaml");
  auto opt = write_tmp("k.yaml", "defaults:\n  - optional override trainer: big\n");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(opt, {}); }),
            opt.string() +
                ": defaults: entry {\"optional override trainer\":\"big\"}: no config group "
                "'trainer' in the defaults list to override");
  auto notlist = write_tmp("l.yaml", "defaults: _self_\na: 1\n");
  EXPECT_EQ(
      error_of([&] { zt::load_hydra_yaml(notlist, {}); }),
      notlist.string() + ": defaults: expected a list (Hydra's defaults list), got \"_self_\"");
  std::filesystem::create_directories(ok.parent_path() / "loop");
  write_tmp("loop/a.yaml", "defaults:\n  - b\nx: 1\n");
  write_tmp("loop/b.yaml", "defaults:\n  - a\ny: 2\n");
  auto loop = write_tmp("n.yaml", "defaults:\n  - loop: a\n  - _self_\n");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(loop, {}); }),
            dir + "/loop/b.yaml: defaults: entry \"a\": the defaults lists form a loop: " +
                loop.string() + " -> " + dir + "/loop/a.yaml -> " + dir + "/loop/b.yaml -> " + dir +
                "/loop/a.yaml");
  auto keyword = write_tmp("m.yaml", "defaults:\n  - overide db: x\n");
  EXPECT_EQ(error_of([&] { zt::load_hydra_yaml(keyword, {}); }),
            keyword.string() +
                ": defaults: entry {\"overide db\":\"x\"}: 'overide' is not a keyword of a "
                "defaults entry (optional, override)");
}

// args.yaml is the resolved config; a string in it that holds "${" — the text an escaped `\${x}`
// of the user's file leaves, an environment variable's value — was written as it is, so reading
// args.yaml back interpolated it. It is written with OmegaConf's escape and reads back the same.
TEST(HydraYaml, ArgsYamlKeepsInterpolationTextAsText) {
  const zt::Json j = {
      {"x", 1},      {"a", "${x}"},  {"b", R"(run_${x}/\${x})"}, {"c", R"(C:\\${x})"},
      {"d", "a${b"}, {"e", R"(\x)"}, {"l", {"${x}", "y"}}};
  const std::string text = zt::json_to_yaml(j);
  EXPECT_NE(text.find(R"(a: "\\${x}")"
                      "\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(zt::load_hydra_yaml(write_tmp("args_interp.yaml", text), {}), j) << text;
}

// Backslashes before "${", as OmegaConf 2.4 reads them (checked there): an odd run escapes the
// interpolation and stands for half its backslashes, an even run for half of them before the
// interpolated value; backslashes elsewhere are text.
TEST(HydraYaml, BackslashesBeforeInterpolationsAsOmegaConf) {
  auto p = write_tmp("bs.yaml", R"(b: 1
x: x\${b}
y: x\\${b}
z: x\\\${b}
w: C:\\foo_${b}
)");
  const zt::Json j = zt::load_hydra_yaml(p, {});
  EXPECT_EQ(j["x"], "x${b}");
  EXPECT_EQ(j["y"], R"(x\1)");
  EXPECT_EQ(j["z"], R"(x\${b})");
  EXPECT_EQ(j["w"], R"(C:\\foo_1)");
  // On the command line, after Hydra's grammar has read the value: unquoted, `\\` is its escape
  // of one backslash (so `x\\${b}` reaches OmegaConf as x\${b}, escaped), `\` before '$' is text;
  // quoted, backslashes before no quote are text. Also inside a list.
  const zt::Json o = zt::load_hydra_yaml(
      p, {R"(+o=[x\\${b}])", R"(+q=x\${b})", R"(+r=['x\\${b}'])", R"(+s=x\\\\${b})"});
  EXPECT_EQ(o["o"], zt::Json::array({"x${b}"}));
  EXPECT_EQ(o["q"], "x${b}");
  EXPECT_EQ(o["r"], zt::Json::array({R"(x\1)"}));
  EXPECT_EQ(o["s"], R"(x\1)");
}

// A string a YAML reader types was written plain: "12:30" is the integer 750 to PyYAML (and so to
// OmegaConf), "007" is 7 to YAML 1.2, " x" loses its space. What is not plainly a name or a path is
// quoted, and every value reads back as it was, here and as a Hydra config.
TEST(HydraYaml, ArgsYamlQuotesStringsThatReadAsOtherTypes) {
  const zt::Json j = {{"a", "12:30"},
                      {"b", "true"},
                      {"c", "007"},
                      {"d", ""},
                      {"e", " x"},
                      {"f", "-1"},
                      {"g", "~"},
                      {"h", "1e5"},
                      {"i", ".inf"},
                      {"j", "Null"},
                      {"k", "a: b # c"},
                      {"m", "Qwen/Qwen2.5-1.5B"},
                      {"n", "../data/train-1.jsonl"},
                      {"o", "two\nlines"},
                      {"p", std::numeric_limits<double>::infinity()},
                      {"q", 1e-5},
                      {"r", 1e20},
                      {"12:30", 1}};
  const std::string text = zt::json_to_yaml(j);
  EXPECT_EQ(text,
            "a: \"12:30\"\nb: \"true\"\nc: \"007\"\nd: \"\"\ne: \" x\"\nf: \"-1\"\ng: \"~\"\n"
            "h: \"1e5\"\ni: \".inf\"\nj: \"Null\"\nk: \"a: b # c\"\nm: Qwen/Qwen2.5-1.5B\n"
            "\"n\": ../data/train-1.jsonl\no: \"two\\nlines\"\np: .inf\nq: 1.0e-05\nr: 1.0e+20\n"
            "\"12:30\": 1\n");
  EXPECT_EQ(zt::load_yaml_file(write_tmp("args_types.yaml", text)), j);
  EXPECT_EQ(zt::load_hydra_yaml(write_tmp("args_types.yaml", text), {}), j);
}

TEST(HydraYaml, YamlRoundTrip) {
  zt::Json j = {{"a", 1}, {"b", "true"}, {"c", {{"d", 1.5}, {"e", nullptr}}}, {"f", {1, 2}}};
  auto p = write_tmp("g.yaml", zt::json_to_yaml(j));
  EXPECT_EQ(zt::load_yaml_file(p), j);
}

// args.yaml is read back by Python too: YAML 1.1's boolean words (PyYAML's yaml.safe_load reads
// `save_strategy: no` as False; y / n are booleans in YAML 1.1 itself) are written quoted, keys
// too, and still read back as the strings.
TEST(HydraYaml, Yaml11BooleanWordsAreQuoted) {
  const zt::Json j = {{"save_strategy", "no"},
                      {"run_name", "on"},
                      {"x", "Off"},
                      {"y", "YES"},
                      {"z", "n"},
                      {"w", "none"}};
  const std::string text = zt::json_to_yaml(j);
  EXPECT_EQ(
      text,
      "save_strategy: \"no\"\nrun_name: \"on\"\nx: \"Off\"\n\"y\": \"YES\"\nz: \"n\"\nw: none\n");
  EXPECT_EQ(zt::load_yaml_file(write_tmp("b11.yaml", text)), j);
}

// args.yaml is read back by PyYAML (yaml.safe_load, and OmegaConf through it), whose reader refuses
// the whole file for one unescaped character outside its printable set (lib/yaml/reader.py's
// NON_PRINTABLE: all but tab, LF, CR, U+0020–U+007E, U+0085, U+00A0–U+D7FF, U+E000–U+FFFD,
// U+10000–U+10FFFF) and whose scanner reads a raw U+0085, U+2028 or U+2029 as a line break.
// yaml-cpp's writer left DEL raw ("unacceptable character #x007f") and wrote U+FFFE, U+FFFF and
// U+10FFFF as U+FFFD. Those are escaped, the rest written as it is, and each string reads back as
// itself, here and through PyYAML 6.0 (checked with yaml.safe_load of this text).
TEST(HydraYaml, ArgsYamlEscapesWhatPyYamlReadsOnlyEscaped) {
  const zt::Json j = {{"del",
                       "a\x7f"
                       "b"},
                      {"c0", std::string("\x00\x01\x1b\x1f\t", 5)},
                      {"c1", "\xc2\x80\xc2\x85\xc2\x9f\xc2\xa0"},
                      {"fffe", "\xef\xbf\xbe"},
                      {"ffff", "\xef\xbf\xbf"},
                      {"max", "\xf4\x8f\xbf\xbf"},          // U+10FFFF: printable to PyYAML
                      {"fdd0", "\xef\xb7\x90"},             // a noncharacter, printable too
                      {"ls", "a\xe2\x80\xa8\xe2\x80\xa9"},  // U+2028, U+2029
                      {"bom", "\xef\xbb\xbf"},
                      {"fffd", "\xef\xbf\xbd"},
                      {"k\x7f", "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80"}};
  const std::string text = zt::json_to_yaml(j);
  EXPECT_EQ(text,
            "del: \"a\\x7fb\"\n"
            "c0: \"\\x00\\x01\\x1b\\x1f\\t\"\n"
            "c1: \"\\x80\\x85\\x9f\\xa0\"\n"
            "fffe: \"\\ufffe\"\n"
            "ffff: \"\\uffff\"\n"
            "max: \"\xf4\x8f\xbf\xbf\"\n"
            "fdd0: \"\xef\xb7\x90\"\n"
            "ls: \"a\\u2028\\u2029\"\n"
            "bom: \"\\ufeff\"\n"
            "fffd: \"\xef\xbf\xbd\"\n"
            "\"k\\x7f\": \"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\"\n");
  EXPECT_EQ(zt::load_yaml_file(write_tmp("args_escapes.yaml", text)), j);
  EXPECT_EQ(zt::load_hydra_yaml(write_tmp("args_escapes.yaml", text), {}), j);
}

// A byte that is not UTF-8 (an environment variable's Latin-1 value, say) has no YAML form: it is
// written as U+FFFD, and the file still reads. A key longer than PyYAML's simple keys (1024
// characters) is written after '?', as yaml-cpp writes one, and reads back.
TEST(HydraYaml, ArgsYamlWritesNonUtf8AsReplacementAndLongKeysAfterQuestionMark) {
  EXPECT_EQ(zt::json_to_yaml({{"a", "x\xe9y\xc3"}}), "a: \"x\xef\xbf\xbdy\xef\xbf\xbd\"\n");
  const std::string key = std::string(1020, 'k') + " \x7f";  // 1026 bytes written, quoted
  const zt::Json j = {{key, 1}, {"b", 2}};
  const std::string text = zt::json_to_yaml(j);
  EXPECT_EQ(text, "? \"" + std::string(1020, 'k') + " \\x7f\"\n: 1\nb: 2\n");
  EXPECT_EQ(zt::load_yaml_file(write_tmp("args_long_key.yaml", text)), j);
}

// YAML tags as OmegaConf's loader (PyYAML's SafeLoader) reads them: the core scalar tags give their
// type, others are refused naming file, line and tag. They were ignored: `!!python/object:os.system
// ls` read as the string "ls", `!!str 5` as the integer 5.
TEST(HydraYaml, TagsAreReadAsOmegaConfReadsThem) {
  auto p =
      write_tmp("tags.yaml",
                "a: !!str 5\nb: !!int \"7\"\nc: !!float 1\nd: !!bool yes\ne: !!null ~\nf: !!str\n"
                "g: !!seq [1]\nh: !!map {x: 1}\n");
  const zt::Json j = zt::load_yaml_file(p);
  EXPECT_EQ(j["a"], "5");
  EXPECT_EQ(j["b"], 7);
  EXPECT_TRUE(j["c"].is_number_float());
  EXPECT_EQ(j["c"], 1.0);
  EXPECT_EQ(j["d"], true);
  EXPECT_TRUE(j["e"].is_null());
  EXPECT_EQ(j["f"], "");
  EXPECT_EQ(j["g"], zt::Json::array({1}));
  EXPECT_EQ(j["h"]["x"], 1);
  p = write_tmp("tag_python.yaml", "x: 1\nexp_name: !!python/object:os.system ls\n");
  try {
    zt::load_yaml_file(p);
    ADD_FAILURE() << "no error";
  } catch (const zt::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              p.string() +
                  ":2: the YAML tag '!!python/object:os.system': zerotune takes the core tags "
                  "(!!str, !!int, !!float, !!bool, !!null, !!seq, !!map) and pathlib paths, as "
                  "OmegaConf's loader (PyYAML's SafeLoader) does, and no other; remove it");
  }
  // A pathlib path as OmegaConf writes one.
  p = write_tmp("tag_path.yaml",
                "out: !!python/object/apply:pathlib.PosixPath\n- runs\n- a\n"
                "abs: !!python/object/apply:pathlib.Path [x, /data, b]\n");
  const zt::Json paths = zt::load_yaml_file(p);
  EXPECT_EQ(paths["out"], "runs/a");
  EXPECT_EQ(paths["abs"], "/data/b");
  for (const std::string text :
       {"x: !custom 1\n", "x: !!binary aGVsbG8=\n", "x: !!set {a: null}\n"}) {
    p = write_tmp("tag_other.yaml", text);
    EXPECT_THROW(zt::load_yaml_file(p), zt::Error) << text;
  }
  p = write_tmp("tag_bad_int.yaml", "x: !!int abc\n");
  try {
    zt::load_yaml_file(p);
    ADD_FAILURE() << "no error";
  } catch (const zt::Error& e) {
    EXPECT_EQ(
        std::string(e.what()),
        p.string() +
            ":1: '!!int abc' is no int (as PyYAML's SafeLoader, which OmegaConf uses, reads it)");
  }
}
