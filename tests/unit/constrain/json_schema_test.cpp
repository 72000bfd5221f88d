// JSON Schema, json_object and choice → GBNF (core/src/constrain/json_schema.hpp): each keyword
// with accepted and rejected instances, recursion through $ref, refusals naming the keyword and
// its place, and hostile schemas refused quickly.
#include "constrain/json_schema.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "constrain/grammar.hpp"
#include "constrain/matcher.hpp"
#include "specd/error.hpp"

namespace {

using nlohmann::ordered_json;
using specd::constrain::compile_gbnf;
using specd::constrain::full_match;
using specd::constrain::Grammar;
using specd::constrain::json_schema_to_gbnf;
using specd::constrain::Matcher;
using GrammarPtr = std::shared_ptr<const Grammar>;

GrammarPtr schema(const ordered_json& s) {
  return compile_gbnf(json_schema_to_gbnf(s), "json_schema");
}
GrammarPtr schema(const char* text) {
  return schema(ordered_json::parse(text));
}

std::string error_of(const ordered_json& s) {
  try {
    schema(s);
  } catch (const specd::Error& e) {
    EXPECT_EQ(e.code(), specd::ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "";
}
std::string error_of(const char* text) {
  return error_of(ordered_json::parse(text));
}

void expect_matches(const GrammarPtr& g, std::initializer_list<const char*> yes,
                    std::initializer_list<const char*> no) {
  for (const char* s : yes) EXPECT_TRUE(full_match(g, s)) << "should match: " << s;
  for (const char* s : no) EXPECT_FALSE(full_match(g, s)) << "should not match: " << s;
}

TEST(JsonSchema, PrimitiveTypesAndNullable) {
  expect_matches(schema(R"({"type": "string"})"), {R"("")", R"("a\"b\\c\n\u00e9")", "\"\xC3\xA9\""},
                 {R"(abc)", R"("a)", "\"a\nb\"", R"("\x")", R"("\u12")"});
  expect_matches(schema(R"({"type": "integer"})"), {"0", "-7", "123456789012345678"},
                 {"01", "1.5", "1e3", "+1", "-", "1234567890123456789"});
  expect_matches(schema(R"({"type": "number"})"), {"0", "-0.5", "3.25", "1e10", "2E-3", "10.0"},
                 {".5", "1.", "01", "1e", "NaN", "Infinity"});
  expect_matches(schema(R"({"type": "boolean"})"), {"true", "false"}, {"True", "1", "null"});
  expect_matches(schema(R"({"type": "null"})"), {"null"}, {"nul", "\"null\""});
  expect_matches(schema(R"({"type": ["string", "null"]})"), {"null", R"("x")"}, {"1", "true"});
  expect_matches(schema(R"({"type": ["integer", "number"]})"), {"1", "1.5"}, {R"("1")"});
}

TEST(JsonSchema, EmptySchemaAndTrueAcceptAnyValue) {
  for (const char* s : {"{}", "true", R"({"title": "anything", "description": "at all"})"}) {
    expect_matches(schema(s), {"1", R"("s")", "null", R"({"a": [1, {"b": null}]})", "[]", "{}"}, {"", "[1,]", "{a}"});
  }
  EXPECT_NE(error_of("false").find("allows no value"), std::string::npos);
}

TEST(JsonSchema, ObjectsKeepPropertyOrderRequiredAndOptional) {
  const auto g = schema(R"({"type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
    "required": ["b"]})");
  expect_matches(g,
                 {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"b":"x","c":true})", R"({"a":1,"b":"x","c":false})",
                  R"({ "a" : 1 ,
  "b":"x" })"},
                 {"{}", R"({"a":1})", R"({"b":"x","a":1})", R"({"b":1})", R"({"b":"x",})", R"({"b":"x","d":1})",
                  R"({"b":"x","b":"y"})"});
  Matcher m(g);
  EXPECT_TRUE(m.accept("{\"na") == false);  // no property starts with "na"
  EXPECT_TRUE(m.accept("{\"b"));
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept("\":\"x\"}"));
  EXPECT_TRUE(m.closed());
}

TEST(JsonSchema, AllOptionalPropertiesAndRequiredOnlyKeys) {
  const auto g = schema(R"({"properties": {"x": {"type": "null"}, "y": {"type": "null"}}})");
  expect_matches(g, {"{}", R"({"x":null})", R"({"y":null})", R"({"x":null,"y":null})"},
                 {R"({"y":null,"x":null})", R"({,"y":null})", "[]"});
  const auto only_required = schema(R"({"type": "object", "required": ["id"]})");
  expect_matches(only_required, {R"({"id":[1]})", R"({"id":"x"})"}, {"{}", R"({"other":1})"});
  const auto false_prop = schema(R"({"properties": {"a": false, "b": {"const": 1}}})");
  expect_matches(false_prop, {"{}", R"({"b":1})"}, {R"({"a":1})"});
}

TEST(JsonSchema, AdditionalPropertiesFalseTrueOrSchema) {
  const char* base = R"({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"])";
  expect_matches(schema((std::string(base) + R"(, "additionalProperties": false})").c_str()), {R"({"id":1})"},
                 {R"({"id":1,"x":2})"});
  const auto open = schema((std::string(base) + R"(, "additionalProperties": true})").c_str());
  expect_matches(open, {R"({"id":1})", R"({"id":1,"x":[2],"y":{}})", R"({"id":1,"i":2})", R"({"id":1,"idx":2})"},
                 {R"({"id":1,"id":2})", R"({"x":2,"id":1})", R"({"id":1,"x":})"});
  const auto typed = schema((std::string(base) + R"(, "additionalProperties": {"type": "string"}})").c_str());
  expect_matches(typed, {R"({"id":1,"k":"v"})", R"({"id":1,"ide":"v"})"}, {R"({"id":1,"k":2})"});
  // A listed key spelled with an escape is not generated as an extra key (it would shadow "id").
  EXPECT_FALSE(full_match(open, R"({"id":1,"\u0069d":"v"})"));
  const auto only_extra = schema(R"({"type": "object", "additionalProperties": {"type": "integer"}})");
  expect_matches(only_extra, {"{}", R"({"a":1,"b":2})"}, {R"({"a":"1"})"});
}

TEST(JsonSchema, EnumConstAndTypeFilter) {
  expect_matches(schema(R"({"enum": ["red", 1, null, [1, 2], {"k": "v"}, "a\"b"]})"),
                 {R"("red")", "1", "null", "[1,2]", R"({"k":"v"})", R"("a\"b")"}, {R"("blue")", "2", "[1, 2]"});
  expect_matches(schema(R"({"const": "fixed"})"), {R"("fixed")"}, {R"("other")"});
  expect_matches(schema(R"({"type": "string", "enum": ["a", 1, "b"]})"), {R"("a")", R"("b")"}, {"1"});
  expect_matches(schema(R"({"enum": ["a", "b"], "const": "b"})"), {R"("b")"}, {R"("a")"});
  EXPECT_NE(error_of(R"({"type": "integer", "enum": ["a"]})").find("no 'enum'/'const' value"), std::string::npos);
  EXPECT_NE(error_of(R"({"enum": ["a"], "minLength": 2})").find("'minLength'"), std::string::npos);
}

TEST(JsonSchema, ArraysItemsPrefixItemsAndCounts) {
  expect_matches(schema(R"({"type": "array", "items": {"type": "integer"}})"), {"[]", "[1]", "[1, 2 ,3]"},
                 {"[1,]", "[,1]", R"(["a"])", "[1 2]"});
  expect_matches(schema(R"({"type": "array", "minItems": 2, "maxItems": 3})"), {"[1,2]", "[1,\"a\",null]"},
                 {"[]", "[1]", "[1,2,3,4]"});
  const auto tuple = schema(R"({"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": {"type": "null"}})");
  expect_matches(tuple, {"[]", R"(["a"])", R"(["a",1])", R"(["a",1,null,null])"},
                 {"[1]", R"(["a","b"])", R"(["a",1,2])"});
  const auto closed = schema(R"({"prefixItems": [{"const": 1}, {"const": 2}], "items": false, "minItems": 1})");
  expect_matches(closed, {"[1]", "[1,2]"}, {"[]", "[1,2,3]", "[2]"});
  const auto draft7 = schema(R"({"items": [{"const": "x"}], "minItems": 2})");  // tuple form; minItems asks more
  expect_matches(draft7, {R"(["x",{}])"}, {R"(["x"])", R"(["y",1])"});
  EXPECT_NE(error_of(R"({"minItems": 3, "maxItems": 2})").find("minItems"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "array", "maxItems": -1})").find("non-negative"), std::string::npos);
}

TEST(JsonSchema, LargeCountsUseRepetitionsOfBlocks) {
  const auto g = schema(R"({"type": "string", "minLength": 12000, "maxLength": 25001})");
  EXPECT_FALSE(full_match(g, "\"" + std::string(11999, 'a') + "\""));
  EXPECT_TRUE(full_match(g, "\"" + std::string(12000, 'a') + "\""));
  EXPECT_TRUE(full_match(g, "\"" + std::string(20000, 'a') + "\""));
  EXPECT_TRUE(full_match(g, "\"" + std::string(25001, 'a') + "\""));
  EXPECT_FALSE(full_match(g, "\"" + std::string(25002, 'a') + "\""));
  const auto items = schema(R"({"type": "array", "items": {"const": 0}, "maxItems": 10001})");
  std::string arr = "[0";
  for (int i = 1; i < 10001; ++i) arr += ",0";
  EXPECT_TRUE(full_match(items, arr + "]"));
  EXPECT_FALSE(full_match(items, arr + ",0]"));
  EXPECT_NE(error_of(R"({"type": "string", "minLength": 5000000})").find("minimum count"), std::string::npos);
  // A maximum past any generation is read as no maximum (json_schema.hpp).
  EXPECT_TRUE(full_match(schema(R"({"type": "string", "maxLength": 4294967296})"), R"("abc")"));
}

TEST(JsonSchema, StringLengthsCountEscapesAsOneCharacter) {
  const auto g = schema(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  expect_matches(g, {R"("ab")", R"("\n\t")", R"("a\u00e9b")", "\"\xC3\xA9\xC3\xA9\""},
                 {R"("a")", R"("abcd")", R"("\n")"});
}

TEST(JsonSchema, PatternIsASearchOverTheDecodedValue) {
  expect_matches(schema(R"({"type": "string", "pattern": "^[a-z]+-\\d{2}$"})"), {R"("abc-12")"},
                 {R"("abc-1")", R"("Abc-12")", R"("abc-12x")"});
  expect_matches(schema(R"({"type": "string", "pattern": "\\d"})"), {R"("a1b")", R"("9")"}, {R"("ab")"});
  expect_matches(schema(R"({"type": "string", "pattern": "^\"q\"$"})"), {R"("\"q\"")"}, {R"(""q"")"});
  EXPECT_NE(error_of(R"({"type": "string", "pattern": "(a"})").find("'pattern': regex: unbalanced"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "string", "pattern": "a", "maxLength": 3})").find("'pattern' together"),
            std::string::npos);
}

TEST(JsonSchema, Formats) {
  auto fmt = [](const char* f) { return schema(ordered_json{{"type", "string"}, {"format", f}}); };
  expect_matches(fmt("date"), {R"("2024-02-29")", R"("1999-12-31")"},
                 {R"("2024-13-01")", R"("2024-00-10")", R"("2024-01-32")", R"("24-01-01")"});
  expect_matches(fmt("time"), {R"("23:59:59Z")", R"("08:00:00.123+05:30")"}, {R"("24:00:00Z")", R"("12:00:00")"});
  expect_matches(fmt("date-time"), {R"("2024-05-01T12:30:00Z")"}, {R"("2024-05-01 12:30:00Z")"});
  expect_matches(fmt("email"), {R"("a.b+c@example.com")"}, {R"("a@b")", R"("@x.com")", R"("a b@x.com")"});
  expect_matches(fmt("uuid"), {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567e89b12d3a456426614174000")"});
  expect_matches(fmt("uri"), {R"("https://example.com/a?b=c%20d")"}, {R"("no scheme")", R"("http://a b")"});
  expect_matches(fmt("ipv4"), {R"("192.168.0.255")"}, {R"("256.1.1.1")", R"("1.2.3")"});
  expect_matches(fmt("hostname"), {R"("a-b.example")"}, {R"("-a.example")"});
  EXPECT_NE(error_of(R"({"type": "string", "format": "color"})").find("unsupported format 'color'"), std::string::npos);
}

TEST(JsonSchema, IntegerBoundsMatchExactlyTheIntegersInRange) {
  struct Case {
    const char* schema;
    long lo, hi;
  };
  const Case cases[] = {
      {R"({"type": "integer", "minimum": 0})", 0, 1L << 40},
      {R"({"type": "integer", "minimum": -15, "maximum": 27})", -15, 27},
      {R"({"type": "integer", "exclusiveMinimum": -100, "exclusiveMaximum": 1000})", -99, 999},
      {R"({"type": "integer", "minimum": 7, "maximum": 1234})", 7, 1234},
      {R"({"type": "integer", "minimum": -1234, "maximum": -56})", -1234, -56},
      {R"({"type": "integer", "minimum": 2.5, "maximum": 99.5})", 3, 99},
      {R"({"type": "integer", "maximum": 10})", -(1L << 40), 10},
      {R"({"type": "integer", "minimum": 5, "maximum": 5})", 5, 5},
      {R"({"type": "integer", "minimum": 0, "exclusiveMinimum": true, "maximum": 3})", 1, 3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.schema);
    const auto g = schema(c.schema);
    for (long n = -1500; n <= 1500; ++n) ASSERT_EQ(full_match(g, std::to_string(n)), n >= c.lo && n <= c.hi) << n;
    EXPECT_FALSE(full_match(g, "-0"));
    EXPECT_FALSE(full_match(g, "007"));
  }
  EXPECT_NE(error_of(R"({"type": "integer", "minimum": 3, "maximum": 2})").find("no integer"), std::string::npos);
}

TEST(JsonSchema, NumberBoundsAreSoundAndCoverCanonicalDecimals) {
  struct Case {
    const char* schema;
    double lo, hi;
    bool lo_ex, hi_ex;
  };
  const Case cases[] = {
      {R"({"type": "number", "minimum": 0})", 0, 1e300, false, false},
      {R"({"type": "number", "exclusiveMinimum": 0})", 0, 1e300, true, false},
      {R"({"type": "number", "minimum": 0, "maximum": 1})", 0, 1, false, false},
      {R"({"type": "number", "minimum": -2, "exclusiveMaximum": 3})", -2, 3, false, true},
      {R"({"type": "number", "exclusiveMinimum": -3, "maximum": -1})", -3, -1, true, false},
      {R"({"type": "number", "maximum": 0})", -1e300, 0, false, false},
  };
  const char* numbers[] = {"-12",  "-3.5",  "-3",    "-2.999", "-2.5", "-2",  "-1.01", "-1",    "-0.5",
                           "0",    "0.0",   "0.001", "0.5",    "1",    "1.0", "1.00",  "1.001", "2",
                           "2.75", "2.999", "3",     "3.0",    "3.5",  "12",  "100.25"};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.schema);
    const auto g = schema(c.schema);
    for (const char* n : numbers) {
      const double v = std::strtod(n, nullptr);
      const bool in = (c.lo_ex ? v > c.lo : v >= c.lo) && (c.hi_ex ? v < c.hi : v <= c.hi);
      EXPECT_EQ(full_match(g, n), in) << n;
    }
    EXPECT_FALSE(full_match(g, "-0.0"));  // never needed: 0 is written without a sign
  }
  EXPECT_NE(error_of(R"({"type": "number", "minimum": 0.5})").find("non-integer minimum"), std::string::npos);
}

TEST(JsonSchema, AnyOfOneOfAndSiblingKeywords) {
  const auto g = schema(R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]})");
  expect_matches(g, {"5", R"("ab")"}, {R"("abc")", "null"});
  expect_matches(schema(R"({"oneOf": [{"const": 1}, {"const": 2}]})"), {"1", "2"}, {"3"});
  const auto distributed =
      schema(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "additionalProperties": false, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]})");
  expect_matches(distributed, {R"({"a":1})", R"({"b":2})", R"({"a":1,"b":2})"}, {"{}", R"({"c":1})"});
}

TEST(JsonSchema, AllOfMergesOrRefusesNamingIt) {
  const auto g = schema(R"({"allOf": [
    {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}, "required": ["a"]},
    {"properties": {"b": {"type": "string"}, "a": {"maximum": 9}}, "required": ["b"]}]})");
  expect_matches(g, {R"({"a":3,"b":"x"})"}, {R"({"a":10,"b":"x"})", R"({"a":3})", R"({"b":"x"})"});
  EXPECT_NE(error_of(R"({"allOf": [{"pattern": "a"}, {"pattern": "b"}]})")
                .find("allOf: cannot merge two different 'pattern'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"allOf": [{"type": "string"}, {"type": "integer"}]})").find("no common type"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"allOf": [{"properties": {"a": {}}, "additionalProperties": false},
                                   {"properties": {"b": {}}}]})")
                .find("additionalProperties"),
            std::string::npos);
}

TEST(JsonSchema, RefsToDefsDefinitionsAndRootIncludingRecursion) {
  const auto tree = schema(R"({"type": "object", "properties": {
      "value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#"}}},
    "required": ["value"], "additionalProperties": false})");
  expect_matches(
      tree,
      {R"({"value":1})", R"({"value":1,"children":[]})",
       R"({"value":1,"children":[{"value":2,"children":[{"value":3,"children":[{"value":4}]}]},{"value":5}]})"},
      {R"({"value":1,"children":[{}]})", R"({"value":1,"children":[{"value":"x"}]})"});
  const auto defs = schema(
      R"({"$defs": {"node": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
      "required": ["next"]}}, "$ref": "#/$defs/node"})");
  expect_matches(defs, {R"({"next":null})", R"({"next":{"next":{"next":null}}})"}, {R"({"next":{}})"});
  const auto old = schema(R"({"definitions": {"id": {"type": "integer", "minimum": 1}},
    "properties": {"a": {"$ref": "#/definitions/id"}, "b": {"$ref": "#/definitions/id", "maximum": 5}}})");
  expect_matches(old, {R"({"a":7,"b":5})"}, {R"({"a":0})", R"({"b":6})"});
  EXPECT_NE(error_of(R"({"$ref": "#/$defs/missing"})").find("points to nothing"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref": "https://example.com/s.json"})").find("not local"), std::string::npos);
  EXPECT_NE(error_of(R"({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"})").find("cycle"),
            std::string::npos);
}

TEST(JsonSchema, RefusesUnsupportedKeywordsNamingThemAndTheirPlace) {
  const char* refused[] = {"not",
                           "multipleOf",
                           "patternProperties",
                           "propertyNames",
                           "dependentRequired",
                           "dependentSchemas",
                           "if",
                           "then",
                           "else",
                           "contains",
                           "unevaluatedProperties",
                           "minProperties",
                           "maxProperties",
                           "uniqueItems",
                           "frobnicate"};
  for (const char* k : refused) {
    ordered_json inner = {{"type", "object"},
                          {k, k == std::string("uniqueItems") ? ordered_json(true) : ordered_json(1)}};
    const ordered_json s = {{"type", "object"}, {"properties", {{"a", inner}}}};
    EXPECT_NE(error_of(s).find(std::string("json_schema: unsupported keyword '") + k + "' at /properties/a"),
              std::string::npos)
        << k << ": " << error_of(s);
  }
  EXPECT_TRUE(full_match(schema(R"({"type": "array", "uniqueItems": false})"), "[1,1]"));
  for (const char* k : {"title", "description", "$schema", "$id", "$comment", "examples", "default", "deprecated",
                        "readOnly", "writeOnly"}) {
    EXPECT_TRUE(full_match(schema(ordered_json{{"type", "null"}, {k, "x"}}), "null")) << k;
  }
}

TEST(JsonSchema, WhitespaceIsBounded) {
  const auto g = schema(R"({"type": "array", "items": {"type": "integer"}})");
  EXPECT_TRUE(full_match(g, "[" + std::string(specd::constrain::kMaxWhitespace, ' ') + "1]"));
  EXPECT_FALSE(full_match(g, "[" + std::string(specd::constrain::kMaxWhitespace + 1, ' ') + "1]"));
  EXPECT_FALSE(full_match(g, " [1]"));  // no whitespace around the value
  Matcher m(g);
  EXPECT_TRUE(m.accept("[1" + std::string(specd::constrain::kMaxWhitespace, '\n')));
  EXPECT_FALSE(m.accept(" "));
}

TEST(JsonSchema, HostileSchemasFailQuicklyWithClearErrors) {
  const auto t0 = std::chrono::steady_clock::now();
  ordered_json deep = {{"type", "integer"}};
  for (int i = 0; i < 10000; ++i) deep = ordered_json{{"type", "array"}, {"items", std::move(deep)}};
  EXPECT_NE(error_of(deep).find("the schema document nests deeper than 256"), std::string::npos);
  ordered_json schema_deep = {{"type", "integer"}};  // shallow as JSON, too deep as schemas
  for (int i = 0; i < 70; ++i) schema_deep = ordered_json{{"type", "array"}, {"items", std::move(schema_deep)}};
  EXPECT_NE(error_of(schema_deep).find("the schema nests deeper than 64 at /items/items"), std::string::npos);

  ordered_json big_enum = {{"enum", ordered_json::array()}};
  for (int i = 0; i < 1000000; ++i) big_enum["enum"].push_back(i);
  EXPECT_NE(error_of(big_enum).find("more than 10000 values"), std::string::npos);

  ordered_json wide = {{"enum", ordered_json::array()}};  // 10,000 values of 1 KB: over the text limit
  for (int i = 0; i < 10000; ++i) wide["enum"].push_back(std::to_string(i) + std::string(1000, 'x'));
  EXPECT_NE(error_of(wide).find("exceed"), std::string::npos);

  ordered_json deep_value = ordered_json::array();
  for (int i = 0; i < 10000; ++i) deep_value = ordered_json::array({std::move(deep_value)});
  EXPECT_NE(error_of(ordered_json{{"const", std::move(deep_value)}}).find("nests deeper than 256"), std::string::npos);
  ordered_json value_deep = ordered_json::array();  // within the document bound, too deep as a value
  for (int i = 0; i < 100; ++i) value_deep = ordered_json::array({std::move(value_deep)});
  EXPECT_NE(error_of(ordered_json{{"const", std::move(value_deep)}}).find("nests too deeply"), std::string::npos);

  ordered_json diamond = {{"$defs", ordered_json::object()}};  // 2^40 paths through allOf
  diamond["$defs"]["d0"] = {{"type", "object"}};
  auto def = [](int i) {
    std::string name = "d";
    name += std::to_string(i);
    return name;
  };
  for (int i = 1; i <= 40; ++i) {
    const std::string prev = "#/$defs/" + def(i - 1);
    diamond["$defs"][def(i)] = {{"allOf", {{{"$ref", prev}}, {{"$ref", prev}}}}};
  }
  diamond["$ref"] = "#/$defs/d40";
  EXPECT_NE(error_of(diamond).find("more than 1000 schemas"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

TEST(JsonObject, AnyObjectAtTheTop) {
  const auto g = compile_gbnf(specd::constrain::json_object_gbnf(), "json_object");
  expect_matches(g, {"{}", R"({"a": [1, 2.5, {"b": null}], "c": "d"})"}, {"[]", "1", R"("s")", "{"});
}

TEST(Choice, ExactlyOneOfTheStrings) {
  const auto g = compile_gbnf(specd::constrain::choice_to_gbnf({"yes", "no", "maybe \"so\"", "yes"}), "choice");
  expect_matches(g, {"yes", "no", "maybe \"so\""}, {"ye", "yesno", "", "Yes"});
  EXPECT_THROW(specd::constrain::choice_to_gbnf({}), specd::Error);
  EXPECT_THROW(specd::constrain::choice_to_gbnf(std::vector<std::string>(10001, "x")), specd::Error);
}

}  // namespace
