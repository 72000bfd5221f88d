// The server's smaller endpoints and headers: CORS, /tokenize and /detokenize (issue 35).
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
  EXPECT_EQ(http_call(port(), "POST", "/tokenize", json{{"model", "other"}, {"prompt", "x"}}.dump()).status, 404);
  EXPECT_EQ(http_call(port(), "POST", "/detokenize", json{{"tokens", {1, 99999999}}}.dump()).status, 400);
  EXPECT_EQ(http_call(port(), "POST", "/detokenize", json{{"tokens", "1 2"}}.dump()).status, 400);
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

}  // namespace
}  // namespace specd::test
