// Request bodies (ordered JSON) parse in time linear in the number of object members: the
// builder (common/ordered_json_builder.hpp) gives exactly the DOM parser's document — member
// order, repeated keys (first position, last value), nesting, every value type — and the DOM
// parser's errors; an object with 200,000 members (whose DOM parse does ~2e10 key comparisons)
// parses.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>
#include <string>

#include "common/untrusted.hpp"

namespace specd {
namespace {

// A random document with small key sets (so keys repeat), nesting and every scalar type.
std::string random_document(std::mt19937& rng, int depth) {
  const int kind = depth >= 4 ? static_cast<int>(rng() % 5) : static_cast<int>(rng() % 7);
  switch (kind) {
    case 0:
      return "null";
    case 1:
      return rng() % 2 ? "true" : "false";
    case 2:
      return std::to_string(static_cast<int64_t>(rng()) - (1LL << 31));
    case 3:
      return std::to_string(rng() % 1000) + ".25e" + std::to_string(rng() % 20);
    case 4:
      return "\"s" + std::to_string(rng() % 10) + "\\u00e9\"";
    case 5: {
      std::string s = "[";
      for (int i = 0, n = static_cast<int>(rng() % 5); i < n; ++i)
        s += (i ? "," : "") + random_document(rng, depth + 1);
      return s + "]";
    }
    default: {
      std::string s = "{";
      for (int i = 0, n = static_cast<int>(rng() % 8); i < n; ++i)
        s += std::string(i ? "," : "") + "\"k" + std::to_string(rng() % 4) + "\":" + random_document(rng, depth + 1);
      return s + "}";
    }
  }
}

TEST(HostileJson, OrderedBodiesEqualTheDomParsersDocument) {
  std::mt19937 rng(11);
  for (int i = 0; i < 500; ++i) {
    const std::string text = "{\"a\":" + random_document(rng, 0) + ",\"b\":" + random_document(rng, 0) + "}";
    const nlohmann::ordered_json want = nlohmann::ordered_json::parse(text);
    const nlohmann::ordered_json got = parse_ordered_json(text);
    ASSERT_EQ(got, want) << text;
    ASSERT_EQ(got.dump(), want.dump()) << "member order: "
                                       << text;  // == on ordered_json ignores nothing, dump shows order
  }
  // Repeated keys: the first position, the last value.
  EXPECT_EQ(parse_ordered_json(R"({"x":1,"y":2,"x":3})").dump(), R"({"x":3,"y":2})");
}

TEST(HostileJson, OrderedBodiesReportTheDomParsersErrors) {
  try {
    parse_ordered_json(R"({"sampling": {"temperature": 1e400}})");
    FAIL();
  } catch (const JsonError& e) {
    EXPECT_TRUE(e.number_overflow);
    EXPECT_EQ(e.path, "sampling.temperature");
  }
  EXPECT_THROW(parse_ordered_json(R"({"a": [1, 2,]})"), JsonError);
  EXPECT_THROW(parse_ordered_json(R"({"a": 1} trailing)"), JsonError);
}

TEST(HostileJson, AnObjectWithManyMembersParses) {
  std::string text = "{";
  for (int i = 0; i < 200000; ++i) text += (i ? ",\"f" : "\"f") + std::to_string(i) + "\":" + std::to_string(i);
  text += ",\"f7\":\"again\"}";
  const nlohmann::ordered_json j = parse_ordered_json(text);
  ASSERT_EQ(j.size(), 200000u);
  EXPECT_EQ(j.begin().key(), "f0");
  EXPECT_EQ(j["f7"], "again");
  EXPECT_EQ(j["f199999"], 199999);
}

}  // namespace
}  // namespace specd
