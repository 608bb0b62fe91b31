// Override values in Hydra 1.3's grammar (io/hydra_override.h). The expected values are Hydra's:
// the input → value facts of hydra's tests/test_overrides_parser.py (v1.3.2) and its grammar
// (hydra/grammar/OverrideLexer.g4: INT is [+-]?('0'|[1-9](_?DIGIT)*), so `007` is three INT tokens,
// a string).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "core/error.h"
#include "io/hydra_override.h"
#include "io/hydra_sweep.h"

namespace {

// The value of the override `k=<value>`.
zt::Json value_of(const std::string& value) { return zt::parse_override_value("k=" + value, 1); }

// The error message of the override `k=<value>`, or "<no error>".
std::string error_of(const std::string& value) {
  try {
    zt::parse_override_value("k=" + value, 1);
  } catch (const zt::Error& e) {
    return e.what();
  }
  return "<no error>";
}

const double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST(HydraOverride, NumbersFollowTheLexersIntAndFloatRules) {
  EXPECT_EQ(value_of("0"), zt::Json(0));
  EXPECT_EQ(value_of("-1"), zt::Json(-1));
  EXPECT_EQ(value_of("+1"), zt::Json(1));
  EXPECT_EQ(value_of("1_000"), zt::Json(1000));
  EXPECT_EQ(value_of("10_0"), zt::Json(100));
  EXPECT_TRUE(value_of("1_000").is_number_integer());
  // Not one INT token: text. A leading 0 is an INT of its own (`007` is 0, 0, 7).
  for (const char* s :
       {"007",   "0042",   "-010",  "010",       "1__0",     "1___0___", "_1",       "1_",
        "10abc", "123abc", "0x10",  "1_.5",      "00.5",     "1.5.2",    "0.foo",    "1e",
        "e5",    "-.",     "12:30", "value-1.0", "infinity", "nano",     "-infinity"})
    EXPECT_EQ(value_of(s), zt::Json(s)) << s;
  EXPECT_EQ(value_of("0.0"), zt::Json(0.0));
  EXPECT_EQ(value_of("0.51"), zt::Json(0.51));
  EXPECT_EQ(value_of("1e-05"), zt::Json(1e-05));
  EXPECT_EQ(value_of("-3.14"), zt::Json(-3.14));
  EXPECT_EQ(value_of("3.1_4"), zt::Json(3.14));
  EXPECT_EQ(value_of("10e0"), zt::Json(10.0));
  EXPECT_EQ(value_of("-10e1"), zt::Json(-100.0));
  EXPECT_EQ(value_of("1e3"), zt::Json(1000.0));
  EXPECT_TRUE(value_of("1e3").is_number_float());
  EXPECT_EQ(value_of(".5"), zt::Json(0.5));
  EXPECT_EQ(value_of("-.5"), zt::Json(-0.5));
  EXPECT_EQ(value_of("1."), zt::Json(1.0));
  EXPECT_TRUE(value_of("1.").is_number_float());
  EXPECT_EQ(value_of("1.e2"), zt::Json(100.0));
  EXPECT_EQ(value_of("1_0.2_5"), zt::Json(10.25));
  EXPECT_EQ(value_of("1e1_0"), zt::Json(1e10));
  EXPECT_EQ(value_of("inf"), zt::Json(kInf));
  EXPECT_EQ(value_of("INF"), zt::Json(kInf));
  EXPECT_EQ(value_of("+inf"), zt::Json(kInf));
  EXPECT_EQ(value_of("-inf"), zt::Json(-kInf));
  EXPECT_TRUE(std::isnan(value_of("nan").get<double>()));
  EXPECT_TRUE(std::isnan(value_of("NaN").get<double>()));
  // The whole value one int outside int64: its text, as a YAML file's (the key's check names its
  // range, cli/run_config.h); inside a list, dict or call it is refused.
  EXPECT_EQ(value_of("99999999999999999999"), zt::Json("99999999999999999999"));
  EXPECT_EQ(value_of(" 1_000_000_000_000_000_000_000 "), zt::Json("1_000_000_000_000_000_000_000"));
  EXPECT_EQ(value_of("-9223372036854775809"), zt::Json("-9223372036854775809"));
  EXPECT_EQ(value_of("9223372036854775807"), zt::Json(INT64_C(9223372036854775807)));
  EXPECT_EQ(value_of("-9223372036854775808"), zt::Json(INT64_MIN));
  EXPECT_EQ(error_of("[1, 99999999999999999999]"),
            "override 'k=[1, 99999999999999999999]': the integer 99999999999999999999 at "
            "character 7 does not fit in 64 bits (zerotune's integers are from "
            "-9223372036854775808 to 9223372036854775807)");
  EXPECT_EQ(error_of("{a: -9223372036854775809}"),
            "override 'k={a: -9223372036854775809}': the integer -9223372036854775809 at "
            "character 7 does not fit in 64 bits (zerotune's integers are from "
            "-9223372036854775808 to 9223372036854775807)");
  EXPECT_EQ(error_of("int(99999999999999999999)"),
            "override 'k=int(99999999999999999999)': the integer 99999999999999999999 at "
            "character 7 does not fit in 64 bits (zerotune's integers are from "
            "-9223372036854775808 to 9223372036854775807)");
}

TEST(HydraOverride, WordsAndText) {
  for (const char* s : {"true", "True", "TRUE", "trUe"})
    EXPECT_EQ(value_of(s), zt::Json(true)) << s;
  for (const char* s : {"false", "False", "FALSE", "faLse"})
    EXPECT_EQ(value_of(s), zt::Json(false)) << s;
  for (const char* s : {"null", "NULL", "NuLL"}) EXPECT_TRUE(value_of(s).is_null()) << s;
  // An ID may hold '-': these are words, not null / true.
  for (const char* s : {"null-x", "true_x", "yes", "on", "abc", "abc123", "abc-123", "foo-bar_10",
                        ".", "-", "/", "+", "$", "%", "*", "@", "?", "|", "\\"})
    EXPECT_EQ(value_of(s), zt::Json(s)) << s;
  EXPECT_EQ(value_of("/-\\+.$%*@?|"), zt::Json("/-\\+.$%*@?|"));
  EXPECT_EQ(value_of("a.b.c"), zt::Json("a.b.c"));
  EXPECT_EQ(value_of("list.0.bar"), zt::Json("list.0.bar"));
  EXPECT_EQ(value_of("Qwen/Qwen2.5-1.5B"), zt::Json("Qwen/Qwen2.5-1.5B"));
  EXPECT_EQ(value_of("c:\\foo\\a-b.txt"), zt::Json("c:\\foo\\a-b.txt"));
  EXPECT_EQ(value_of("http://h:1"), zt::Json("http://h:1"));
  EXPECT_EQ(value_of("a:b"), zt::Json("a:b"));
  EXPECT_EQ(value_of("x : y"), zt::Json("x : y"));
  // Spaces inside stay, around go (also tabs, also right after the '=').
  EXPECT_EQ(value_of("  x y  "), zt::Json("x y"));
  EXPECT_EQ(value_of(" \tvalue \t"), zt::Json("value"));
  EXPECT_EQ(value_of("value \t 123"), zt::Json("value \t 123"));
  EXPECT_EQ(value_of("a b c\t-\t1 2 3"), zt::Json("a b c\t-\t1 2 3"));
  EXPECT_EQ(value_of(" 1 "), zt::Json(1));
  // `key=` and `key=  `: the empty string.
  EXPECT_EQ(value_of(""), zt::Json(""));
  EXPECT_EQ(value_of("   "), zt::Json(""));
}

TEST(HydraOverride, EscapesInUnquotedValues) {
  EXPECT_EQ(value_of("a\\,b"), zt::Json("a,b"));
  EXPECT_EQ(value_of("a\\ b"), zt::Json("a b"));
  EXPECT_EQ(value_of("a\\:b"), zt::Json("a:b"));
  EXPECT_EQ(value_of("a\\=b"), zt::Json("a=b"));
  EXPECT_EQ(value_of("a\\(b"), zt::Json("a(b"));
  EXPECT_EQ(value_of("a\\[b"), zt::Json("a[b"));
  EXPECT_EQ(value_of("a\\\\b"), zt::Json("a\\b"));
  EXPECT_EQ(value_of("\\ ab"), zt::Json(" ab"));
  EXPECT_EQ(value_of("ab\\\t"), zt::Json("ab\t"));
  EXPECT_EQ(value_of("ab\\\\"), zt::Json("ab\\"));
  EXPECT_EQ(value_of("\\,"), zt::Json(","));
  EXPECT_EQ(value_of("f\\(a\\, b\\)"), zt::Json("f(a, b)"));
  EXPECT_EQ(value_of("\\[a\\, b\\]"), zt::Json("[a, b]"));
  EXPECT_EQ(value_of("\\{a\\: b\\}"), zt::Json("{a: b}"));
  EXPECT_EQ(value_of("job\\{a\\=1\\,b\\=2\\,c\\=3\\}"), zt::Json("job{a=1,b=2,c=3}"));
  EXPECT_EQ(value_of("\\\\\\(\\)\\[\\]\\{\\}\\:\\=\\ \\\t\\,"), zt::Json("\\()[]{}:= \t,"));
  // A backslash before any other character is text.
  EXPECT_EQ(value_of("a\\b"), zt::Json("a\\b"));
  // `$\{x\}` is the text ${x}, which OmegaConf then reads as an interpolation, as Hydra's.
  EXPECT_EQ(value_of("$\\{foo.bar\\}"), zt::Json("${foo.bar}"));
}

TEST(HydraOverride, QuotedValuesAreText) {
  for (const char* s : {"007", "true", "null", "100", "3.14", "nan", "inf", "false"}) {
    EXPECT_EQ(value_of(std::string("'") + s + "'"), zt::Json(s)) << s;
    EXPECT_EQ(value_of(std::string("\"") + s + "\""), zt::Json(s)) << s;
  }
  EXPECT_EQ(value_of("''"), zt::Json(""));
  EXPECT_EQ(value_of("'a\\'b'"), zt::Json("a'b"));
  EXPECT_EQ(value_of("\"a\\\"b\""), zt::Json("a\"b"));
  EXPECT_EQ(value_of("'foo \\'bar'"), zt::Json("foo 'bar"));
  EXPECT_EQ(value_of("'foo \\\\\\'bar'"), zt::Json("foo \\'bar"));
  EXPECT_EQ(value_of("\"foo \\\\\\\"bar\""), zt::Json("foo \\\"bar"));
  EXPECT_EQ(value_of("'foo\\bar'"), zt::Json("foo\\bar"));
  EXPECT_EQ(value_of("'foo\\\\bar'"), zt::Json("foo\\\\bar"));
  EXPECT_EQ(value_of("'foo bar\\\\'"), zt::Json("foo bar\\"));
  EXPECT_EQ(value_of("'foo \\\\\\\\\\'bar\\' \\\\\\\\\\\\'"), zt::Json("foo \\\\'bar' \\\\\\"));
  EXPECT_EQ(value_of("'\t []{},=+~'"), zt::Json("\t []{},=+~"));
  EXPECT_EQ(value_of("'  foo,bar\t'"), zt::Json("  foo,bar\t"));
  EXPECT_EQ(value_of("\"[1,'2',3]\""), zt::Json("[1,'2',3]"));
  EXPECT_EQ(value_of("'a \"b\"'"), zt::Json("a \"b\""));
  EXPECT_EQ(value_of("'שלום'"), zt::Json("שלום"));
  EXPECT_EQ(value_of("'a ${b}'"), zt::Json("a ${b}"));
  EXPECT_EQ(value_of("'a \\${b}'"), zt::Json("a \\${b}"));
  EXPECT_EQ(value_of("'a \\'${b}\\''"), zt::Json("a '${b}'"));
  EXPECT_EQ(value_of("'${foo:\\'b,a,r\\'}'"), zt::Json("${foo:'b,a,r'}"));
}

TEST(HydraOverride, ListsAndDicts) {
  EXPECT_EQ(value_of("[]"), zt::Json::array());
  EXPECT_EQ(value_of("[1,a,'b c',[2]]"), (zt::Json{1, "a", "b c", zt::Json{2}}));
  EXPECT_EQ(value_of("[1 ]"), zt::Json{1});
  EXPECT_EQ(value_of("[ 1 , 2 ,\t3 ]"), (zt::Json{1, 2, 3}));
  EXPECT_EQ(value_of("[[[a]]]"), (zt::Json{zt::Json{zt::Json{"a"}}}));
  EXPECT_EQ(value_of("['[a,b]']"), zt::Json{"[a,b]"});
  EXPECT_EQ(value_of("['a\\\\', 'b\\\\']"), (zt::Json{"a\\", "b\\"}));
  EXPECT_EQ(value_of("[007, null, true, x y]"), (zt::Json{"007", nullptr, true, "x y"}));
  EXPECT_EQ(value_of("{}"), zt::Json::object());
  EXPECT_EQ(value_of("{enable_thinking:false}"), (zt::Json{{"enable_thinking", false}}));
  EXPECT_EQ(value_of("{a: 1, b: [x,y]}"), (zt::Json{{"a", 1}, {"b", {"x", "y"}}}));
  EXPECT_EQ(value_of("{a:10,b:{c:[1,2]}}"), (zt::Json{{"a", 10}, {"b", {{"c", {1, 2}}}}}));
  EXPECT_EQ(value_of("{a:10,b:{}}"), (zt::Json{{"a", 10}, {"b", zt::Json::object()}}));
  EXPECT_EQ(value_of("{u:http://h:1, s:'x:y'}"), (zt::Json{{"u", "http://h:1"}, {"s", "x:y"}}));
  EXPECT_EQ(value_of("{white spaces: 1}"), (zt::Json{{"white spaces", 1}}));
  EXPECT_EQ(value_of("{ white  space\t: 2}"), (zt::Json{{"white  space", 2}}));
  EXPECT_EQ(value_of("{123id: 0}"), (zt::Json{{"123id", 0}}));
  EXPECT_EQ(value_of("{/-\\+.$%*@?|: 1}"), (zt::Json{{"/-\\+.$%*@?|", 1}}));
  EXPECT_EQ(value_of("{\\\\\\(\\)\\[\\]\\{\\}\\:\\=\\ \\\t\\,: 1}"),
            (zt::Json{{"\\()[]{}:= \t,", 1}}));
  // Typed keys, as the text Hydra's str() gives them (JSON keys are strings).
  EXPECT_EQ(value_of("{123: 1, 0: 2, -1: 3, 1_0: 4}"),
            (zt::Json{{"123", 1}, {"0", 2}, {"-1", 3}, {"10", 4}}));
  EXPECT_EQ(value_of("{3.14: 0, 1e3: 1}"), (zt::Json{{"3.14", 0}, {"1000.0", 1}}));
  EXPECT_EQ(value_of("{true: 1, fAlSe: 0, null: 5}"),
            (zt::Json{{"true", 1}, {"false", 0}, {"null", 5}}));
  EXPECT_EQ(value_of("{a_b: 1, ab 123.5 True: 2, null false: 3}"),
            (zt::Json{{"a_b", 1}, {"ab 123.5 True", 2}, {"null false", 3}}));
  // A key given twice: Hydra keeps the last; refused, as in zerotune's files.
  EXPECT_EQ(error_of("{a: 1, b: 2, a: 3}"),
            "override 'k={a: 1, b: 2, a: 3}': duplicate key 'a' at character 16 (first given at "
            "character 4)");
  EXPECT_EQ(error_of("{10: 1, 1_0: 2}"),
            "override 'k={10: 1, 1_0: 2}': duplicate key '10' at character 11 (first given at "
            "character 4)");
}

TEST(HydraOverride, InterpolationsAreKeptAsText) {
  EXPECT_EQ(value_of("${oc.env:HOME}"), zt::Json("${oc.env:HOME}"));
  EXPECT_EQ(value_of("${a}"), zt::Json("${a}"));
  EXPECT_EQ(value_of("xyz_${a.b.c}"), zt::Json("xyz_${a.b.c}"));
  EXPECT_EQ(value_of("${f:USER,root}"), zt::Json("${f:USER,root}"));
  EXPECT_EQ(value_of("${foo:[1,2,3]}"), zt::Json("${foo:[1,2,3]}"));
  EXPECT_EQ(value_of("run_${oc.env:X,dflt}/out"), zt::Json("run_${oc.env:X,dflt}/out"));
  EXPECT_EQ(value_of("\\${x}"), zt::Json("\\${x}"));  // OmegaConf's escape, resolved later
  EXPECT_EQ(value_of("[${a},${oc.env:B,c},b]"), (zt::Json{"${a}", "${oc.env:B,c}", "b"}));
  EXPECT_EQ(value_of("{a:${oc.env:X}}"), (zt::Json{{"a", "${oc.env:X}"}}));
  // Nested: to its matching '}' (Hydra's lexer wants these quoted; OmegaConf reads them alike).
  EXPECT_EQ(value_of("${oc.env:A,${b}}"), zt::Json("${oc.env:A,${b}}"));
  EXPECT_EQ(value_of("{a:${oc.env:A,${b}}}"), (zt::Json{{"a", "${oc.env:A,${b}}"}}));
  EXPECT_EQ(value_of("${oc.env:A,'{'}"), zt::Json("${oc.env:A,'{'}"));        // Hydra's first '}'
  EXPECT_EQ(value_of("'${oc.env:A,\\'}\\'}'"), zt::Json("${oc.env:A,'}'}"));  // a '}' quoted
  EXPECT_EQ(error_of("${oc.env:A"),
            "override 'k=${oc.env:A': the '${' at character 3 starts no interpolation (it is "
            "empty or has no closing '}')");
  EXPECT_EQ(error_of("${}"),
            "override 'k=${}': the '${' at character 3 starts no interpolation (it is empty or "
            "has no closing '}')");
}

TEST(HydraOverride, CastFunctions) {
  EXPECT_EQ(value_of("int(10.0)"), zt::Json(10));
  EXPECT_EQ(value_of("int(3.7)"), zt::Json(3));
  EXPECT_EQ(value_of("int(-3.7)"), zt::Json(-3));
  EXPECT_EQ(value_of("int(1e6)"), zt::Json(1000000));
  EXPECT_EQ(value_of("int('10')"), zt::Json(10));
  EXPECT_EQ(value_of("int(true)"), zt::Json(1));
  EXPECT_EQ(value_of("int(value=7)"), zt::Json(7));
  EXPECT_EQ(value_of("str(10.0)"), zt::Json("10.0"));
  EXPECT_EQ(value_of("str(1e6)"), zt::Json("1000000.0"));
  EXPECT_EQ(value_of("str(1e-5)"), zt::Json("1e-05"));
  EXPECT_EQ(value_of("str(1e16)"), zt::Json("1e+16"));
  EXPECT_EQ(value_of("str(1)"), zt::Json("1"));
  EXPECT_EQ(value_of("str(true)"), zt::Json("true"));
  EXPECT_EQ(value_of("str(inf)"), zt::Json("inf"));
  EXPECT_EQ(value_of("str(007)"), zt::Json("007"));
  EXPECT_EQ(value_of("str([1,2])"), (zt::Json{"1", "2"}));
  EXPECT_EQ(value_of("str(\t  [  1,\t2  ]\t   )"), (zt::Json{"1", "2"}));
  EXPECT_EQ(value_of("str({a:10})"), (zt::Json{{"a", "10"}}));
  EXPECT_EQ(value_of("bool(10.0)"), zt::Json(true));
  EXPECT_EQ(value_of("bool(0)"), zt::Json(false));
  EXPECT_EQ(value_of("bool('true')"), zt::Json(true));
  EXPECT_EQ(value_of("bool(FALSE)"), zt::Json(false));
  EXPECT_EQ(value_of("bool(null)"), zt::Json(false));
  EXPECT_EQ(value_of("bool([0,1,2])"), (zt::Json{false, true, true}));
  EXPECT_EQ(value_of("float(10)"), zt::Json(10.0));
  EXPECT_TRUE(value_of("float(10)").is_number_float());
  EXPECT_EQ(value_of("float(float(10))"), zt::Json(10.0));
  EXPECT_EQ(value_of("float(' 1_0.5 ')"), zt::Json(10.5));
  EXPECT_EQ(value_of("float(true)"), zt::Json(1.0));
  EXPECT_EQ(value_of("float([1,[2]])"), (zt::Json{1.0, zt::Json{2.0}}));
  EXPECT_EQ(value_of("[int(1.5), str(2)]"), (zt::Json{1, "2"}));
  EXPECT_EQ(error_of("int(inf)"),
            "override 'k=int(inf)': int(inf): cannot convert float infinity to integer");
  EXPECT_EQ(error_of("int(nan)"),
            "override 'k=int(nan)': int(nan): cannot convert float NaN to integer");
  EXPECT_EQ(error_of("int('10.0')"),
            "override 'k=int('10.0')': int('10.0'): invalid literal for int() with base 10: "
            "'10.0'");
  EXPECT_EQ(error_of("int([a,1])"),
            "override 'k=int([a,1])': int([a,1]): invalid literal for int() with base 10: 'a'");
  EXPECT_EQ(error_of("float('true')"),
            "override 'k=float('true')': float('true'): could not convert string to float: "
            "'true'");
  EXPECT_EQ(error_of("bool('10')"),
            "override 'k=bool('10')': bool('10'): Cannot cast '10' to bool");
  EXPECT_EQ(error_of("int(null)"),
            "override 'k=int(null)': int(null): null cannot be cast (only bool() takes it)");
  EXPECT_EQ(error_of("int()"), "override 'k=int()': int(): no positional args or value specified");
  EXPECT_EQ(error_of("int(1,value=2)"),
            "override 'k=int(1,value=2)': int(1,value=2): cannot use both position and named "
            "arguments");
  EXPECT_EQ(error_of("int(x=2)"),
            "override 'k=int(x=2)': int(x=2): unexpected keyword argument 'x'");
  EXPECT_EQ(error_of("int(value=1,2)"),
            "override 'k=int(value=1,2)': int(…): positional argument follows keyword argument");
}

TEST(HydraOverride, SortAndOtherFunctions) {
  EXPECT_EQ(value_of("sort([2,3,1])"), (zt::Json{1, 2, 3}));
  EXPECT_EQ(value_of("sort([2,3,1],reverse=true)"), (zt::Json{3, 2, 1}));
  EXPECT_EQ(value_of("sort(list=[1,2,3], reverse=True)"), (zt::Json{3, 2, 1}));
  EXPECT_EQ(value_of("sort(list=[])"), zt::Json::array());
  EXPECT_EQ(value_of("sort([b,a,'c'])"), (zt::Json{"a", "b", "c"}));
  EXPECT_EQ(value_of("sort([1.5,1,true])"), (zt::Json{1, true, 1.5}));  // stable: 1 == True
  EXPECT_EQ(value_of("sort(1)"), zt::Json(1));
  EXPECT_EQ(value_of("sort({a:10})"), (zt::Json{{"a", 10}}));
  EXPECT_EQ(error_of("sort([1,a])"),
            "override 'k=sort([1,a])': sort([1,a]): sort() takes a list of numbers or a list of "
            "strings (Python's '<' compares no other mix)");
  EXPECT_EQ(error_of("sort([1],reverse=1)"),
            "override 'k=sort([1],reverse=1)': sort([1],reverse=1): mismatch type argument "
            "reverse: int is incompatible with bool");
  EXPECT_EQ(error_of("shuffle([1,2])"),
            "override 'k=shuffle([1,2])': shuffle() gives a random order on each run and "
            "zerotune's runs are deterministic; write the list in the order wanted");
  EXPECT_EQ(error_of("foo(1)"),
            "override 'k=foo(1)': unknown function 'foo' in 'foo(1)' (Hydra's functions: bool, "
            "choice, float, glob, int, interval, range, shuffle, sort, str, tag); as text, '(' is "
            "escaped (\\() or the value is quoted");
  EXPECT_NE(error_of("foo (1)").find("unknown function 'foo'"), std::string::npos);
  // Sweeps, whether hydra_sweep caught them first or not.
  const std::string sweep = std::string(zt::kSweepRefused);
  for (const char* s : {"a,b", "choice(a,b)", "range(1,3)", "interval(0,1)", "glob(*)",
                        "tag(a,choice(1))", "str(1,2)", "sort(3,2,1)", "[1,2],[3]"})
    EXPECT_EQ(error_of(s), std::string("override 'k=") + s + "': " + sweep) << s;
}

TEST(HydraOverride, ErrorsNameTheOverrideAndWhereAndWhat) {
  EXPECT_EQ(error_of("'abc"),
            "override 'k='abc': the quote ' at character 3 is never closed (a quote inside a "
            "quoted value is escaped: \\')");
  EXPECT_EQ(error_of("\"a\\\""),
            "override 'k=\"a\\\"': the quote \" at character 3 is never closed (a quote inside a "
            "quoted value is escaped: \\\")");
  EXPECT_EQ(error_of("[1,2"),
            "override 'k=[1,2': expected ',' or ']' at character 7, found the end of the value");
  EXPECT_EQ(error_of("[1,"),
            "override 'k=[1,': expected a value at character 6, found the end of "
            "the value");
  EXPECT_EQ(error_of("{a:1"),
            "override 'k={a:1': expected ',' or '}' at character 7, found the end of the value");
  EXPECT_EQ(error_of("{a}"),
            "override 'k={a}': expected ':' after a dict key at character 5, found '}'; as text, "
            "'}' is escaped with a backslash (\\}) or the value is quoted ('…')");
  EXPECT_EQ(error_of("{'a': 1}"),
            "override 'k={'a': 1}': expected a dict key (unquoted) at character 4, found ''a''");
  EXPECT_EQ(error_of("{${k}: 1}"),
            "override 'k={${k}: 1}': expected a dict key (unquoted) at character 4, found '${k}'");
  EXPECT_EQ(error_of("[]aa"),
            "override 'k=[]aa': expected the end of the value at character 5, found 'aa'");
  EXPECT_EQ(error_of("a=b"),
            "override 'k=a=b': expected the end of the value at character 4, found '='; as text, "
            "'=' is escaped with a backslash (\\=) or the value is quoted ('…')");
  EXPECT_EQ(error_of("A[B"),
            "override 'k=A[B': expected the end of the value at character 4, found '['; as text, "
            "'[' is escaped with a backslash (\\[) or the value is quoted ('…')");
  EXPECT_EQ(error_of("'a' "),
            "override 'k='a' ': expected the end of the value at character 6, found whitespace");
  EXPECT_EQ(error_of("a'b'"),
            "override 'k=a'b'': expected the end of the value at character 4, found ''b''");
  EXPECT_EQ(error_of("x~y"),
            "override 'k=x~y': character 4 ('~') is not allowed in an unquoted value by Hydra's "
            "override grammar; quote the value ('…' or \"…\")");
  EXPECT_EQ(error_of("café"),
            "override 'k=café': character 6 ('é') is not allowed in an unquoted value by Hydra's "
            "override grammar; quote the value ('…' or \"…\")");
  EXPECT_EQ(value_of("'café'"), zt::Json("café"));
  EXPECT_EQ(error_of("]"),
            "override 'k=]': expected a value at character 3, found ']'; as text, "
            "']' is escaped with a backslash (\\]) or the value is quoted ('…')");
  // Deep nesting is refused, not a stack overflow.
  EXPECT_EQ(error_of(std::string(100000, '[')),
            "override 'k=" + std::string(100000, '[') +
                "': lists, dicts and function calls nest more than 200 levels deep");
  std::string deep = std::string(150, '[') + std::string(150, ']');
  EXPECT_EQ(value_of(deep).size(), 1u);
}

TEST(HydraOverride, UnquoteHydraString) {
  EXPECT_EQ(zt::unquote_hydra_string("''"), "");
  EXPECT_EQ(zt::unquote_hydra_string("'\\\\'"), "\\");
  EXPECT_EQ(zt::unquote_hydra_string("\"\\\\\\\\\""), "\\\\");
  EXPECT_EQ(zt::unquote_hydra_string("'abc\\\\'"), "abc\\");
  EXPECT_EQ(zt::unquote_hydra_string("\"abc\\\\\\\"def\\\\\\'ghi\\\\\\\\\""),
            "abc\\\"def\\\\\\'ghi\\\\");
}
