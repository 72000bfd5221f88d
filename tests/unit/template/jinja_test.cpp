// The Jinja interpreter's own behaviour where the oracle cannot show it: clear errors for bad
// templates, the sandbox, and the limits that keep hostile templates and data from exhausting
// the process.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "template/ast.hpp"
#include "template/interpreter.hpp"
#include "template/value.hpp"

namespace specd::jinja {
namespace {

std::string render(const std::string& source, const std::unordered_map<std::string, Value>& vars = {},
                   const RenderLimits& limits = {}) {
  Interpreter in(limits, std::chrono::system_clock::time_point{});
  return in.render(*parse(source), vars);
}

std::string error_of(const std::string& source, const std::unordered_map<std::string, Value>& vars = {},
                     const RenderLimits& limits = {}) {
  try {
    render(source, vars, limits);
  } catch (const TemplateError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Jinja, SyntaxErrorsNameTheLine) {
  EXPECT_EQ(error_of("a\nb\n{% if x %}never closed"), "line 3: unexpected end of template; expected 'elif'");
  EXPECT_EQ(error_of("{{ 1 + }}"), "line 1: unexpected token, got '}}'");
  EXPECT_EQ(error_of("x\n{% frobnicate %}"), "line 2: unknown statement 'frobnicate'");
  EXPECT_EQ(error_of("{% break %}"), "line 1: 'break' outside of a for loop");
  EXPECT_EQ(error_of("{{ 'unterminated }}"), "line 1: unterminated string");
  EXPECT_EQ(error_of("{% include 'x.j2' %}"),
            "line 1: 'include' is not available: chat templates render without a template loader");
  EXPECT_EQ(error_of("{{ x | nosuchfilter }}"), "line 1: no filter named 'nosuchfilter'");
}

// Invalid UTF-8 before a whitespace-stripping tag is kept byte for byte (Python's Jinja would
// not see such bytes at all; we must not throw std::out_of_range, found by fuzz_chat_template).
TEST(Jinja, InvalidUtf8BeforeAStrippingTagRendersByteForByte) {
  const std::string junk = "a\xff\xfe \n";
  EXPECT_EQ(render(junk + "{%- if true %}b{% endif %}"),
            "a\xff\xfe"
            "b");
  EXPECT_EQ(render("x\xff\xff\xff {%- set y = 1 %}z"), "x\xff\xff\xffz");
  EXPECT_EQ(render("\xc3\xa9 \xe3\x80\x80{{- 'k' }}"), "\xc3\xa9k");  // U+3000 is a space, é is not
}

TEST(Jinja, UndefinedValuesFailWhenUsedAndPrintAsNothing) {
  EXPECT_EQ(render("[{{ missing }}][{{ missing | length }}][{% for x in missing %}{% endfor %}]"), "[][0][]");
  auto d = make_dict();
  d->set(Value("role"), Value("user"));
  EXPECT_EQ(error_of("{{ m.content.strip() }}", {{"m", Value(d)}}), "'dict object' has no attribute 'content'");
  EXPECT_EQ(error_of("{{ missing + 1 }}"), "'missing' is undefined");
  EXPECT_EQ(error_of("{{ raise_exception('custom message') }}"), "custom message");
}

TEST(Jinja, TheSandboxRefusesToModifyListsAndDicts) {
  EXPECT_EQ(error_of("{% set l = [1] %}{{ l.append(2) }}"), "access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(error_of("{% set d = {} %}{{ d.update({'a': 1}) }}"),
            "access to attribute 'update' of 'dict' object is unsafe.");
  EXPECT_EQ(render("{% set ns = namespace(a=1) %}{% set ns.a = ns.a + 1 %}{{ ns.a }}"), "2");
  EXPECT_EQ(error_of("{% set d = {} %}{% set d.a = 1 %}"), "line 1: cannot assign attribute on non-namespace object");
}

TEST(Jinja, LimitsStopHostileTemplates) {
  EXPECT_EQ(error_of("{{ range(100001) | length }}"),
            "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  // Bounds at the ends of int64 (2**63-1 once went through a double, became 2**63 and converted
  // back with undefined behaviour: an empty range).
  EXPECT_EQ(error_of("{{ range(9223372036854775807) | length }}"),
            "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  EXPECT_EQ(error_of("{{ range(-9223372036854775807, 9223372036854775807) | length }}"),
            "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  // Steps of 2**62 across the whole int64 range: exact, as Python's range.
  EXPECT_EQ(render("{{ range(5, -9223372036854775807, -4611686018427387904) | list }}"),
            "[5, -4611686018427387899, -9223372036854775803]");
  EXPECT_EQ(render("{{ range(3, 0, -1) | list }}{{ range(0) | list }}{{ range(2, 9, 3) | list }}"),
            "[3, 2, 1][][2, 5, 8]");
  // Nesting in the source is refused at compile time, without recursing on it.
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += "(";
  EXPECT_NE(error_of("{{ " + deep + "1" + std::string(200, ')') + " }}").find("nests deeper than 64 levels"),
            std::string::npos);
  std::string blocks;
  for (int i = 0; i < 100; ++i) blocks += "{% if true %}";
  EXPECT_NE(error_of(blocks).find("nests deeper than 64 levels"), std::string::npos);
  // So is size: 70k expressions are 210k tokens (an 8 MB template of them took 500 MB to parse).
  std::string many;
  for (int i = 0; i < 70000; ++i) many += "{{ 'x' }}";
  EXPECT_NE(error_of(many).find("more than 200000 tokens"), std::string::npos);
  EXPECT_EQ(render(many.substr(0, 9 * 60000)).size(), 60000u);
  // Unbounded macro recursion, loops and output are cut off with an error.
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("recursed deeper than"),
            std::string::npos);
  RenderLimits small;
  small.max_steps = 1000;
  EXPECT_NE(error_of("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", {}, small)
                .find("more than 1000 loop iterations"),
            std::string::npos);
  small.max_steps = RenderLimits{}.max_steps;
  small.max_output_bytes = 1 << 20;
  EXPECT_NE(error_of("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", {}, small).find("larger than 1 MiB"),
            std::string::npos);
  // A namespace that holds itself cannot be printed forever.
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}").find("nested deeper than 64"),
            std::string::npos);
  EXPECT_EQ(error_of("{{ 9223372036854775807 + 1 }}"), "integer overflow (templates compute with 64-bit integers)");
}

TEST(Jinja, DataDeeperThanTheLimitIsRefused) {
  nlohmann::json j = 1;
  for (int i = 0; i < 100; ++i) j = nlohmann::json::array({j});
  EXPECT_THROW(from_json(j), TemplateError);
}

TEST(Jinja, PythonFloatReprAndJson) {
  EXPECT_EQ(float_repr(0.1), "0.1");
  EXPECT_EQ(float_repr(1e16), "1e+16");
  EXPECT_EQ(float_repr(123.0), "123.0");
  EXPECT_EQ(float_repr(1.5e-5), "1.5e-05");
  EXPECT_EQ(float_repr(-2.5e300), "-2.5e+300");
  JsonStyle style;
  EXPECT_EQ(to_json(from_json(nlohmann::ordered_json::parse(R"({"b": [1, 2.0, "\u0001é"], "a": null})")), style),
            R"({"b": [1, 2.0, "\u0001é"], "a": null})");
}

}  // namespace
}  // namespace specd::jinja
