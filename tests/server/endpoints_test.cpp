// The server's smaller endpoints and headers (issue 35): CORS, /tokenize and /detokenize,
// system_fingerprint, the stream's finish chunk, tools a template cannot render, and the prefix
// cache's usage.prompt_tokens_details.cached_tokens.
#include <map>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "server/openai_response.hpp"
#include "server_test_util.hpp"

namespace specd::test {
namespace {

// CORS: browsers preflight with OPTIONS and read Access-Control-Allow-Origin on every answer
// (streams and errors too). The default allows any origin; a list allows its origins only; an
// empty list turns CORS off (OPTIONS is then a 405 like any method without a route).
TEST_F(Server, CorsPreflightAndHeaders) {
  HttpResponse pre = http_call(port(), "OPTIONS", "/v1/chat/completions", "",
                               {"Origin: https://app.example", "Access-Control-Request-Method: POST",
                                "Access-Control-Request-Headers: authorization, content-type"});
  EXPECT_EQ(pre.status, 204) << pre.body;
  EXPECT_EQ(pre.headers["access-control-allow-origin"], "*");
  EXPECT_NE(pre.headers["access-control-allow-methods"].find("POST"), std::string::npos);
  EXPECT_EQ(pre.headers["access-control-allow-headers"], "authorization, content-type");
  const std::vector<std::string> origin = {"Origin: https://app.example"};
  EXPECT_EQ(http_call(port(), "GET", "/v1/models", "", origin).headers["access-control-allow-origin"], "*");
  json stream = completion("cors", 2);
  stream["stream"] = true;
  HttpResponse sse = http_call(port(), "POST", "/v1/completions", stream.dump(), origin);
  EXPECT_EQ(sse.status, 200);
  EXPECT_EQ(sse.headers["access-control-allow-origin"], "*");
  HttpResponse bad = http_call(port(), "POST", "/v1/completions", "{", origin);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.headers["access-control-allow-origin"], "*");
  EXPECT_EQ(http_call(port(), "GET", "/v1/models").headers.count("access-control-allow-origin"), 0u)
      << "no Origin, no CORS header";
}

TEST(ServerCors, AListAllowsItsOriginsAndAnEmptyListTurnsCorsOff) {
  ServerProcess listed(write_config("cors-list", "  cors_allow_origins: [\"https://a.example\"]\n"));
  ASSERT_TRUE(listed.ready()) << listed.log();
  HttpResponse r = http_call(listed.port(), "GET", "/v1/models", "", {"Origin: https://a.example"});
  EXPECT_EQ(r.headers["access-control-allow-origin"], "https://a.example");
  EXPECT_EQ(r.headers["vary"], "Origin");
  r = http_call(listed.port(), "GET", "/v1/models", "", {"Origin: https://evil.example"});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.count("access-control-allow-origin"), 0u);

  ServerProcess off(write_config("cors-off", "  cors_allow_origins: []\n"));
  ASSERT_TRUE(off.ready()) << off.log();
  EXPECT_EQ(http_call(off.port(), "OPTIONS", "/v1/completions", "", {"Origin: https://a.example"}).status, 405);
  EXPECT_EQ(http_call(off.port(), "GET", "/v1/models", "", {"Origin: https://a.example"})
                .headers.count("access-control-allow-origin"),
            0u);
}

// /tokenize counts what a request will cost: a prompt as a completion encodes it, and a chat
// as the chat template renders it (its count is the chat completion's usage.prompt_tokens);
// /detokenize turns ids back into text.
TEST_F(Server, TokenizeAndDetokenize) {
  HttpResponse r = http_call(port(), "POST", "/tokenize", json{{"prompt", "The quick brown fox"}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json t = json::parse(r.body);
  const auto ids = t["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(t["count"], ids.size());
  EXPECT_EQ(t["max_model_len"], 256);
  const HttpResponse done = post("/v1/completions", completion("The quick brown fox", 1));
  EXPECT_EQ(json::parse(done.body)["usage"]["prompt_tokens"], ids.size());
  r = http_call(port(), "POST", "/tokenize",
                json{{"prompt", "The quick brown fox"}, {"add_special_tokens", false}}.dump());
  const auto bare = json::parse(r.body)["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(bare.size() + 1, ids.size()) << "without the BOS";
  r = http_call(port(), "POST", "/detokenize", json{{"tokens", bare}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["prompt"], "The quick brown fox");

  const json messages = json::array({{{"role", "user"}, {"content", "Say hi"}}});
  r = http_call(port(), "POST", "/tokenize", json{{"messages", messages}}.dump());  // model: optional
  ASSERT_EQ(r.status, 200) << r.body;
  const HttpResponse chat =
      post("/v1/chat/completions", json{{"model", kModel}, {"messages", messages}, {"max_tokens", 1}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(json::parse(r.body)["count"], json::parse(chat.body)["usage"]["prompt_tokens"]);

  EXPECT_EQ(http_call(port(), "POST", "/tokenize", json{{"prompt", "x"}, {"messages", messages}}.dump()).status, 400);
  EXPECT_EQ(http_call(port(), "POST", "/tokenize", json{{"prompt", 5}}.dump()).status, 400);
  // A text longer than the context (256) could never be a prompt: refused, naming the limit.
  r = http_call(port(), "POST", "/tokenize", json{{"prompt", std::string(60000, 'z')}}.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("more than 256 tokens"), std::string::npos) << r.body;
  EXPECT_EQ(http_call(port(), "POST", "/tokenize", json{{"model", "other"}, {"prompt", "x"}}.dump()).status, 404);
  EXPECT_EQ(http_call(port(), "POST", "/detokenize", json{{"tokens", {1, 99999999}}}.dump()).status, 400);
  EXPECT_EQ(http_call(port(), "POST", "/detokenize", json{{"tokens", "1 2"}}.dump()).status, 400);
  r = http_call(port(), "POST", "/detokenize", json{{"tokens", std::vector<int32_t>(257, 5)}}.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("more than the context length 256"), std::string::npos) << r.body;
}

// system_fingerprint, as OpenAI's responses carry it: in whole responses and in every chunk,
// the same for every request to one server, and another for another configuration.
TEST_F(Server, SystemFingerprintIsStableAndNamesTheConfiguration) {
  const HttpResponse a = post("/v1/completions", completion("fingerprint", 2));
  const HttpResponse b = post("/v1/completions", completion("another", 2));
  ASSERT_EQ(a.status, 200) << a.body;
  const std::string fp = json::parse(a.body)["system_fingerprint"].get<std::string>();
  EXPECT_EQ(fp.rfind(std::string("specd-") + SPECD_VERSION + "-", 0), 0u) << fp;
  EXPECT_EQ(json::parse(b.body)["system_fingerprint"], fp);
  const HttpResponse streamed = post("/v1/completions", completion("fingerprint", 3, true));
  int chunks = 0;
  for (const std::string& ev : sse_events(streamed.body)) {
    if (ev == "[DONE]") continue;
    EXPECT_EQ(json::parse(ev)["system_fingerprint"], fp) << ev;
    ++chunks;
  }
  EXPECT_GT(chunks, 0);

  specd::config::EngineConfig other = specd::config::load_file(write_config("fp-a", ""));
  specd::config::EngineConfig dtype = other;
  dtype.model.dtype = "bf16";
  EXPECT_EQ(server::system_fingerprint(other), fp);
  EXPECT_NE(server::system_fingerprint(dtype), fp);
}

// OpenAI and llama-server end each choice of a stream with a chunk that carries finish_reason
// alone: an empty delta (chat) or empty text (completions), after the last content.
TEST_F(Server, AStreamEndsEachChoiceWithAChunkThatCarriesOnlyTheFinishReason) {
  json chat = {{"model", kModel},
               {"messages", json::array({{{"role", "user"}, {"content", "Count"}}})},
               {"max_tokens", 4},
               {"temperature", 0},
               {"stream", true}};
  for (const bool is_chat : {true, false}) {
    const HttpResponse r =
        is_chat ? post("/v1/chat/completions", chat) : post("/v1/completions", completion("Count", 4, true));
    ASSERT_EQ(r.status, 200) << r.body;
    std::vector<json> chunks;
    for (const std::string& ev : sse_events(r.body))
      if (ev != "[DONE]") chunks.push_back(json::parse(ev));
    ASSERT_GE(chunks.size(), 3u) << r.body;
    const json& last = chunks.back()["choices"][0];
    EXPECT_EQ(last["finish_reason"], "length") << last;
    if (is_chat) {
      EXPECT_EQ(last["delta"], json::object()) << last;
    } else {
      EXPECT_EQ(last["text"], "") << last;
    }
    for (size_t i = 0; i + 1 < chunks.size(); ++i)
      EXPECT_TRUE(chunks[i]["choices"][0]["finish_reason"].is_null()) << chunks[i];
  }
}

// `tools` are never dropped silently: the tiny model's fallback template does not render them
// and it has no tool-call parser, so a request with tools is a 400 naming `tools` (also with
// tool_choice "none": the model would not see them), unless the operator opts in.
TEST_F(Server, ToolsTheTemplateCannotRenderAreRefusedUnlessTheOperatorOptsIn) {
  const json tools = json::array(
      {{{"type", "function"},
        {"function",
         {{"name", "get_weather"}, {"parameters", {{"type", "object"}, {"properties", json::object()}}}}}}});
  json body = {{"model", kModel},
               {"messages", json::array({{{"role", "user"}, {"content", "Weather?"}}})},
               {"max_tokens", 2},
               {"tools", tools}};
  HttpResponse r = post("/v1/chat/completions", body);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "tools") << r.body;
  body["tool_choice"] = "none";
  r = post("/v1/chat/completions", body);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(json::parse(r.body)["error"]["message"].get<std::string>().find("does not render tools"), std::string::npos)
      << r.body;

  ServerProcess lenient(write_config("tools-lenient", "  allow_unsupported_tools: true\n"));
  ASSERT_TRUE(lenient.ready()) << lenient.log();
  body.erase("tool_choice");
  r = http_call(lenient.port(), "POST", "/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
}

// A prompt sent again finds its full KV blocks in the prefix cache: usage reports them as
// cached_tokens (whole blocks, never the last prompt token), and /metrics counts the lookups.
TEST_F(Server, ARepeatedPromptReportsItsCachedTokens) {
  std::string prompt;
  for (int i = 0; i < 12; ++i) prompt += "the cache keeps blocks of sixteen tokens ";
  const HttpResponse first = post("/v1/completions", completion(prompt, 2));
  const HttpResponse again = post("/v1/completions", completion(prompt, 2));
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_EQ(again.status, 200) << again.body;
  const json u1 = json::parse(first.body)["usage"], u2 = json::parse(again.body)["usage"];
  EXPECT_EQ(u1["prompt_tokens_details"]["cached_tokens"], 0) << u1;
  const int cached = u2["prompt_tokens_details"]["cached_tokens"].get<int>();
  const int prompt_tokens = u2["prompt_tokens"].get<int>();
  EXPECT_GT(cached, 0) << u2;
  EXPECT_LT(cached, prompt_tokens);
  EXPECT_EQ(cached % 16, 0);
  EXPECT_EQ(json::parse(first.body)["choices"][0]["text"], json::parse(again.body)["choices"][0]["text"]);
  const std::string metrics = http_call(port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("specd_prefix_cache_hits_total"), std::string::npos);
  EXPECT_NE(metrics.find("specd_prefix_cache_queries_total"), std::string::npos);
}

// /v1/completions with a list of prompts, as OpenAI and vLLM accept it: prompt i's choices are
// numbered i * n.., each the same as that prompt alone, usage sums them, and a stream carries
// every choice, one usage chunk and one [DONE]. A bad prompt of the list is named.
TEST_F(Server, AListOfPromptsGetsItsChoicesNumberedInPromptOrder) {
  const json prompts = json::array({"Hello there", "The quick brown fox", json::array({1, 450, 4996})});
  std::vector<std::string> alone;
  int prompt_tokens = 0;
  for (const json& p : prompts) {
    json one = completion("", 3);
    one["prompt"] = p;
    const HttpResponse r = post("/v1/completions", one);
    ASSERT_EQ(r.status, 200) << r.body;
    alone.push_back(json::parse(r.body)["choices"][0]["text"]);
    prompt_tokens += json::parse(r.body)["usage"]["prompt_tokens"].get<int>();
  }
  json body = completion("", 3);
  body["prompt"] = prompts;
  body["n"] = 2;
  const HttpResponse r = post("/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  ASSERT_EQ(j["choices"].size(), 6u) << j;
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["text"], alone[i / 2]) << "choice " << i << " is prompt " << i / 2 << "'s";
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(j["usage"]["completion_tokens"], 18);

  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  const HttpResponse st = post("/v1/completions", body);
  ASSERT_EQ(st.status, 200) << st.body;
  std::map<int, std::string> text;
  int done = 0, usage_chunks = 0;
  for (const std::string& ev : sse_events(st.body)) {
    if (ev == "[DONE]") {
      ++done;
      continue;
    }
    const json c = json::parse(ev);
    if (c["choices"].empty()) {
      ++usage_chunks;
      EXPECT_EQ(c["usage"]["prompt_tokens"], prompt_tokens);
      EXPECT_EQ(c["usage"]["completion_tokens"], 18);
      continue;
    }
    text[c["choices"][0]["index"].get<int>()] += c["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(done, 1);
  EXPECT_EQ(usage_chunks, 1);
  ASSERT_EQ(text.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(text[i], alone[static_cast<size_t>(i / 2)]) << i;

  json bad = completion("", 2);
  bad["prompt"] = json::array({"fine", 5});
  HttpResponse e = post("/v1/completions", bad);
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.body.find("prompt[1]"), std::string::npos) << e.body;
  bad["prompt"] = json::array({"fine", json::array({1, 99999999})});
  e = post("/v1/completions", bad);
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.body.find("prompt[1]"), std::string::npos) << e.body;
  bad["prompt"] = json::array();
  for (int i = 0; i < 65; ++i) bad["prompt"].push_back("p");
  EXPECT_EQ(post("/v1/completions", bad).status, 400);
  bad["prompt"] = json::array({"a", "b"});
  bad["n"] = 40;
  e = post("/v1/completions", bad);
  EXPECT_EQ(e.status, 400) << "80 choices in all";
  EXPECT_EQ(json::parse(e.body)["error"]["param"], "n");
}

}  // namespace
}  // namespace specd::test
