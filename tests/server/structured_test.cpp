// Structured output through the OpenAI surface (docs/structured-output.md): response_format
// json_schema / json_object, vLLM's guided_* and structured_outputs; the output satisfies its
// constraint, streamed as it is whole; two constraints or one that does not compile are a 400
// naming the field; /metrics counts constrained requests and grammar masks.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <regex>
#include <string>

#include "server_test_util.hpp"

namespace specd::test {
namespace {

json with(json body, const std::string& key, json value) {
  body[key] = std::move(value);
  return body;
}

std::string text_of(const HttpResponse& r) {
  const json j = json::parse(r.body);
  const json& c = j["choices"][0];
  return c.contains("text") ? c["text"].get<std::string>() : c["message"]["content"].get<std::string>();
}

const json kSchema = {
    {"type", "object"},
    {"properties",
     {{"answer", {{"enum", {"yes", "no"}}}}, {"score", {{"type", "integer"}, {"minimum", 0}, {"maximum", 9}}}}},
    {"required", {"answer", "score"}},
    {"additionalProperties", false}};

TEST_F(Server, JsonSchemaOutputValidates) {
  json chat = {{"model", kModel},
               {"messages", {{{"role", "user"}, {"content", "Is it raining?"}}}},
               {"max_tokens", 300},
               {"temperature", 0}};
  chat["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "verdict"}, {"schema", kSchema}}}};
  const HttpResponse r = post("/v1/chat/completions", chat);
  ASSERT_EQ(r.status, 200) << r.body;
  const json out = json::parse(text_of(r));
  EXPECT_TRUE(out["answer"] == "yes" || out["answer"] == "no") << out;
  EXPECT_TRUE(out["score"].is_number_integer() && out["score"] >= 0 && out["score"] <= 9) << out;
  EXPECT_EQ(out.size(), 2u) << out;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["finish_reason"], "stop");

  // Streamed: the same text, chunk by chunk.
  chat["stream"] = true;
  const HttpResponse s = post("/v1/chat/completions", chat);
  std::string streamed;
  for (const std::string& ev : sse_events(s.body)) {
    if (ev == "[DONE]") continue;
    const json j = json::parse(ev);
    if (!j["choices"].empty() && j["choices"][0]["delta"].contains("content"))
      streamed += j["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(streamed, text_of(r));
}

TEST_F(Server, GuidedChoiceRegexAndStructuredOutputs) {
  const json choices = {"red", "green", "blue"};
  const std::string c =
      text_of(post("/v1/completions", with(completion("Pick a colour:", 20), "guided_choice", choices)));
  EXPECT_TRUE(c == "red" || c == "green" || c == "blue") << c;
  const std::string re = "[a-z]{2,5}-[0-9]{3}";
  const std::string r = text_of(post("/v1/completions", with(completion("Code:", 30), "guided_regex", re)));
  EXPECT_TRUE(std::regex_match(r, std::regex(re))) << r;
  const std::string g =
      text_of(post("/v1/completions", with(completion("Sum:", 30), "structured_outputs",
                                           {{"grammar", "root ::= [1-9] \" + \" [1-9] \" = \" [0-9]{1,2}"}})));
  EXPECT_TRUE(std::regex_match(g, std::regex("[1-9] \\+ [1-9] = [0-9]{1,2}"))) << g;
  const std::string o = text_of(post("/v1/completions", with(completion("JSON:", 300), "guided_json", kSchema)));
  EXPECT_TRUE(json::accept(o)) << o;
}

TEST_F(Server, BadOrConflictingConstraintsAre400NamingTheField) {
  HttpResponse r = post("/v1/completions",
                        with(with(completion("x", 5), "guided_regex", "a+"), "guided_choice", json::array({"a"})));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("guided_regex and guided_choice"), std::string::npos) << r.body;
  r = post("/v1/completions", with(completion("x", 5), "guided_json", {{"type", "string"}, {"not", {{"const", "a"}}}}));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("'not'"), std::string::npos) << r.body;
  r = post("/v1/completions", with(completion("x", 5), "guided_grammar", "root ::= root \"a\" | \"b\""));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("left-recursive"), std::string::npos) << r.body;
  r = post("/v1/completions", with(completion("x", 5), "response_format", {{"type", "xml"}}));
  EXPECT_EQ(r.status, 400) << r.body;
  // An unknown type is named clipped, not echoed whole (a 60 KB type gave a 60 KB answer).
  r = post("/v1/completions", with(completion("x", 5), "response_format", {{"type", std::string(60000, 'r')}}));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_LT(r.body.size(), 1000u) << r.body.substr(0, 200);
  EXPECT_EQ(post("/v1/completions", completion("still serving", 3)).status, 200);
}

TEST_F(Server, MetricsCountStructuredRequestsAndMasks) {
  ASSERT_EQ(post("/v1/completions", with(completion("n:", 10), "guided_regex", "[0-9]{1,3}")).status, 200);
  const HttpResponse m = http_call(port(), "GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  std::smatch hit;
  ASSERT_TRUE(std::regex_search(m.body, hit, std::regex("\nspecd_structured_requests_total ([0-9.e+]+)")));
  EXPECT_GE(std::stod(hit[1]), 1.0);
  ASSERT_TRUE(
      std::regex_search(m.body, hit, std::regex("\nspecd_grammar_masks_total\\{source=\"computed\"\\} ([0-9.e+]+)")));
  EXPECT_GE(std::stod(hit[1]), 1.0);
}

}  // namespace
}  // namespace specd::test
