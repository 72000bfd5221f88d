// Hostile clients against the real `specd serve` on 127.0.0.1 (issue 14): deep JSON in every
// field, non-finite and underflowing numbers, chunked bodies over the limit, malformed HTTP,
// clients that send or read slowly or not at all, more connections than allowed, and a shutdown
// with all of those still connected. Each case gets a clear error (or its connection closed at
// its deadline) and the server stays healthy. Waits are bounded; loopback only.
#include <poll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fixture.hpp"
#include "http_client.hpp"
#include "server_process.hpp"

namespace specd::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

fs::path work_dir() {
  return fs::path(SPECD_TEST_WORK_DIR) / "server-hostile";
}

// Short deadlines so that the slow-client cases finish in seconds.
std::string hostile_config(const std::string& name, const std::string& extra = "") {
  fixture::Options o;
  static const fs::path tiny = fixture::write(o, work_dir() / "tiny");
  // One file per test: the tests run as parallel processes.
  const fs::path file =
      work_dir() / (name + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".yaml");
  std::ofstream(file) << "model:\n  path: " << tiny.string() << "\n  max_model_len: 2048\n  num_threads: 1\n"
                      << "scheduler:\n  max_num_seqs: 8\n  max_queue: 16\nkv_cache:\n  memory_mib: 64\n"
                      << "server:\n  model_name: tiny\n  max_body_bytes: 1048576\n  max_tokens_limit: 2000\n"
                      << "  idle_timeout_s: 2\n  header_timeout_s: 1\n  body_timeout_s: 1\n  write_timeout_s: 2\n"
                      << "  shutdown_timeout_s: 1\n"
                      << extra << "logging:\n  level: info\n";
  return file.string();
}

std::string nested(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

// True once the server closes `c` (EOF or reset) within `bound`; data it sends is skipped.
bool closed_within(HttpConnection& c, std::chrono::milliseconds bound) {
  const auto end = Clock::now() + bound;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{c.fd(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[4096];
    if (::recv(c.fd(), buf, sizeof(buf), 0) <= 0) return true;
  }
}

json error_of(const HttpResponse& r) {
  json j = json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("error") ? j["error"] : json();
}

class Hostile : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(work_dir());
    server_ = std::make_unique<ServerProcess>(hostile_config("hostile"));
    ASSERT_TRUE(server_->ready()) << server_->log();
  }
  void TearDown() override {
    if (!server_) return;
    EXPECT_EQ(http_call(port(), "GET", "/health").status, 200) << "the server is not healthy after the case";
    EXPECT_EQ(server_->stop(std::chrono::seconds(20)), 0) << server_->log();
  }
  int port() const { return server_->port(); }
  HttpResponse post(const std::string& body, const std::string& path = "/v1/completions") const {
    return http_call(port(), "POST", path, body);
  }
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(Hostile, DeepJsonInEveryFieldIs400WithoutEchoingIt) {
  const std::string deep = nested(70000);  // ~140 KB: killed the worker thread's stack before
  for (const char* field : {"logit_bias", "tools", "functions", "response_format", "tool_choice", "metadata", "user",
                            "prompt", "stop", "speculative", "stream_options", "max_tokens"}) {
    const HttpResponse r = post(std::string("{\"model\":\"tiny\",\"prompt\":\"x\",\"") + field + "\":" + deep + "}");
    EXPECT_EQ(r.status, 400) << field << ": " << r.body.substr(0, 300);
    const json e = error_of(r);
    ASSERT_TRUE(e.is_object()) << field;
    EXPECT_NE(e["message"].get<std::string>().find("nesting deeper than 64"), std::string::npos) << e;
    EXPECT_LT(r.body.size(), 600u) << field;
  }
  const HttpResponse chat =
      post("{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":" + deep + "}]}", "/v1/chat/completions");
  EXPECT_EQ(chat.status, 400) << chat.body.substr(0, 300);
  // Within the limit, a rejected value is named by its field and type, not dumped.
  const HttpResponse shallow = post("{\"model\":\"tiny\",\"prompt\":\"x\",\"logit_bias\":" + nested(60) + "}");
  EXPECT_EQ(shallow.status, 400);
  EXPECT_EQ(error_of(shallow)["param"], "logit_bias");
  EXPECT_EQ(shallow.body.find("[["), std::string::npos) << shallow.body;
  EXPECT_EQ(post(json{{"model", "tiny"}, {"prompt", "still serving"}, {"max_tokens", 2}}.dump()).status, 200);
}

// The chat endpoint's own fields (issue 19: tools, logprobs, n, chat_template_kwargs, ...) get
// the same nesting limit before anything parses or renders them.
TEST_F(Hostile, DeepJsonInEveryChatFieldIs400) {
  const std::string deep = nested(70000);
  const std::string messages = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
  for (const char* field : {"tools", "chat_template_kwargs", "logprobs", "top_logprobs", "n", "logit_bias",
                            "min_tokens", "presence_penalty", "add_generation_prompt", "max_completion_tokens"}) {
    const HttpResponse r =
        post("{\"model\":\"tiny\"," + messages + ",\"" + field + "\":" + deep + "}", "/v1/chat/completions");
    EXPECT_EQ(r.status, 400) << field << ": " << r.body.substr(0, 300);
    const json e = error_of(r);
    ASSERT_TRUE(e.is_object()) << field;
    EXPECT_NE(e["message"].get<std::string>().find("nesting deeper than 64"), std::string::npos) << e;
    EXPECT_LT(r.body.size(), 600u) << field;
  }
  // Within the limit: template kwargs as deep as the body allows are served (the template's data
  // depth limit matches), and tool-call arguments nested past it (a JSON string) reach the
  // template as a string.
  const HttpResponse kwargs =
      post("{\"model\":\"tiny\",\"max_tokens\":2," + messages + ",\"chat_template_kwargs\":{\"x\":" + nested(62) + "}}",
           "/v1/chat/completions");
  EXPECT_EQ(kwargs.status, 200) << kwargs.body.substr(0, 300);
  json call = {{"model", "tiny"}, {"max_tokens", 2}};
  call["messages"] = json::array(
      {{{"role", "user"}, {"content", "x"}},
       {{"role", "assistant"},
        {"content", nullptr},
        {"tool_calls",
         {{{"id", "c"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", nested(70000)}}}}}}},
       {{"role", "tool"}, {"tool_call_id", "c"}, {"content", "1"}}});
  const HttpResponse args = post(call.dump(), "/v1/chat/completions");
  EXPECT_TRUE(args.status == 200 || args.status == 400) << args.status << " " << args.body.substr(0, 300);
  // Arguments within the JSON limit but past the template's data depth: a 400 naming them, not a 500.
  call["messages"][1]["tool_calls"][0]["function"]["arguments"] = "{\"a\":" + nested(62) + "}";
  const HttpResponse deep_args = post(call.dump(), "/v1/chat/completions");
  EXPECT_EQ(deep_args.status, 400) << deep_args.body.substr(0, 300);
  EXPECT_EQ(error_of(deep_args)["param"], "messages[1].tool_calls[0].function.arguments") << deep_args.body;
}

TEST_F(Hostile, NonFiniteAndUnderflowingNumbersAre400NamingTheField) {
  struct Case {
    std::string field, value;
  };
  for (const Case& c : {Case{"temperature", "1e400"}, Case{"temperature", "-1e400"}, Case{"top_p", "1e-300"},
                        Case{"min_p", "1e-320"}, Case{"temperature", "1e-45"}, Case{"max_tokens", "1e400"},
                        Case{"seed", "1e400"}, Case{"presence_penalty", "1e-300"}, Case{"frequency_penalty", "-1e-300"},
                        Case{"repetition_penalty", "1e-300"}, Case{"n", "1e400"}, Case{"logprobs", "1e400"}}) {
    const HttpResponse r = post("{\"model\":\"tiny\",\"prompt\":\"x\",\"" + c.field + "\":" + c.value + "}");
    EXPECT_EQ(r.status, 400) << c.field << "=" << c.value << ": " << r.body;
    EXPECT_EQ(error_of(r)["param"], c.field) << r.body;
  }
  // A logit_bias value that would round to 0 as a float is named by its token.
  const HttpResponse bias = post(R"({"model":"tiny","prompt":"x","logit_bias":{"5":1e-300}})");
  EXPECT_EQ(bias.status, 400) << bias.body;
  EXPECT_EQ(error_of(bias)["param"], "logit_bias.5") << bias.body;
}

// logit_bias keys are token ids in decimal digits: a sign, a space or an embedded NUL is refused,
// and a huge key is not echoed back whole.
TEST_F(Hostile, LogitBiasKeysAreDecimalDigitsAndNotEchoedWhole) {
  for (const char* key : {" 5", "+6", "7\\u00009", "-1", "0x5", "5.0", "", "99999999999999999999"}) {
    const HttpResponse r = post(std::string(R"({"model":"tiny","prompt":"x","logit_bias":{")") + key + R"(":1}})");
    EXPECT_EQ(r.status, 400) << key << ": " << r.body;
    EXPECT_EQ(error_of(r)["param"], "logit_bias") << r.body;
  }
  const HttpResponse huge =
      post(R"({"model":"tiny","prompt":"x","logit_bias":{")" + std::string(900000, '7') + R"(":1}})");
  EXPECT_EQ(huge.status, 400);
  EXPECT_LT(huge.body.size(), 2000u) << "the key was echoed whole";
  const HttpResponse ok = post(R"({"model":"tiny","prompt":"x","max_tokens":1,"logit_bias":{"5":1}})");
  EXPECT_EQ(ok.status, 200) << ok.body;
}

// Anything after the JSON value is refused, a NUL byte included (nlohmann's lexer ends the input
// at a NUL, so "{...}\0garbage" once parsed as "{...}").
TEST_F(Hostile, BytesAfterTheJsonBodyAre400) {
  const std::string body = R"({"model":"tiny","prompt":"x","max_tokens":1})";
  for (const std::string& tail :
       {std::string("garbage"), std::string("\0garbage", 8), std::string("\0", 1), std::string("}")}) {
    const HttpResponse r = post(body + tail);
    EXPECT_EQ(r.status, 400) << r.body;
  }
  EXPECT_EQ(post(body + " \n").status, 200);
}

// A chat of more messages than the context (2048) has tokens is refused before its messages
// become template values (100k one-letter messages took 145 MB to render and fail); 2048 pass.
TEST_F(Hostile, MoreMessagesThanContextTokensIs400) {
  nlohmann::json body = {{"model", "tiny"}, {"max_tokens", 1}};
  body["messages"] = nlohmann::json::array();
  for (int i = 0; i < 2049; ++i) body["messages"].push_back({{"role", "user"}, {"content", "m"}});
  HttpResponse r = post(body.dump(), "/v1/chat/completions");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("messages has 2049 entries, more than the context length 2048"), std::string::npos) << r.body;
  body["messages"].erase(body["messages"].begin());
  r = post(body.dump(), "/v1/chat/completions");
  EXPECT_EQ(r.status, 400) << r.body;  // the prompt is too long, but the messages are read
  EXPECT_EQ(r.body.find("entries"), std::string::npos) << r.body;
}

// Sends `chunks` as a chunked body (from a second thread, which stops at the first send error
// once the server stops reading) and returns the response.
HttpResponse post_chunked(int port, const std::vector<std::string>& chunks) {
  HttpConnection c(port, 10000);
  c.send_all(
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
      "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
  std::thread sender([&] {
    for (const std::string& data : chunks) {
      char size[32];
      std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
      if (!c.send_all(size + data + "\r\n")) return;
    }
    c.send_all("0\r\n\r\n");
  });
  HttpResponse r = c.read_response();
  sender.join();
  return r;
}

TEST_F(Hostile, ChunkedOrDeclaredBodyOverTheLimitIs413) {
  const std::vector<std::string> big(48, std::string(64 << 10, 'a'));  // 3 MiB > 1 MiB
  const HttpResponse r = post_chunked(port(), big);
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_NE(r.body.find("max_body_bytes"), std::string::npos) << r.body;
  // Content-Length over the limit: refused from the header alone.
  HttpConnection c(port(), 10000);
  ASSERT_TRUE(c.send_all("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2097152\r\n\r\n"));
  EXPECT_EQ(c.read_response().status, 413);
  // A client that writes its whole 48 MiB body before reading still gets the 413 (the server
  // drains the body after answering instead of resetting the connection).
  HttpConnection whole(port(), 20000);
  ASSERT_TRUE(whole.send_all("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 50331648\r\n\r\n"));
  const std::string mib(1 << 20, 'a');
  bool sent = true;
  for (int i = 0; i < 48 && sent; ++i) sent = whole.send_all(mib);
  EXPECT_TRUE(sent) << "the server reset the connection while the body was being sent";
  EXPECT_EQ(whole.read_response().status, 413);
  // A chunked body within the limit is served.
  const std::string body = json{{"model", "tiny"}, {"prompt", "chunked"}, {"max_tokens", 2}}.dump();
  const HttpResponse ok = post_chunked(port(), {body.substr(0, 10), body.substr(10, 10), body.substr(20)});
  EXPECT_EQ(ok.status, 200) << ok.body;
}

// A chat template's raise_exception message is clipped in the 400 (a template can make it as long
// as its budget allows: the round-2 campaign got a 10 MB error body back).
TEST(HostileTemplate, RaisedMessageIsClipped) {
  const fs::path tpl = work_dir() / "raise_long.jinja";
  fs::create_directories(work_dir());
  std::ofstream(tpl) << "{{ raise_exception('boom ' * 2000000) }}";
  ServerProcess s(hostile_config("raise_long", "  chat_template: " + tpl.string() + "\n"));
  ASSERT_TRUE(s.ready()) << s.log();
  const json body = {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 4}};
  const HttpResponse r = http_call(s.port(), "POST", "/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 400) << r.body.substr(0, 200);
  EXPECT_LT(r.body.size(), 2000u);
  EXPECT_NE(r.body.find("the chat template failed: boom boom"), std::string::npos) << r.body.substr(0, 200);
}

TEST_F(Hostile, MalformedRequestsGet4xx) {
  auto raw = [&](const std::string& bytes) {
    HttpConnection c(port(), 10000);
    c.send_all(bytes);
    return c.read_response();
  };
  EXPECT_EQ(raw("GARBAGE\r\n\r\n").status, 400);
  EXPECT_EQ(raw("GET /health HTTP/1.1\r\nX-Big: " + std::string(20 << 10, 'a') + "\r\n\r\n").status, 431);
  EXPECT_EQ(raw("POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").status, 400);
  HttpResponse wrong = raw("DELETE /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(error_of(wrong)["code"], "method_not_allowed");
  EXPECT_EQ(wrong.headers["allow"], "POST");
}

TEST_F(Hostile, SlowOrSilentClientsAreClosedAtTheirDeadlines) {
  using std::chrono::milliseconds;
  HttpConnection idle(port());  // never sends a byte: idle_timeout_s = 2
  HttpConnection slow_body(port());
  ASSERT_TRUE(slow_body.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"model\""));
  // One header byte per 200 ms: cut off at header_timeout_s = 1.
  HttpConnection slow_header(port());
  const std::string header = "GET /health HTTP/1.1\r\nX-Slow: ";
  bool header_closed = false;
  for (size_t i = 0; i < 25 && !header_closed; ++i) {
    header_closed = !slow_header.send_all(std::string(1, i < header.size() ? header[i] : 'a')) ||
                    closed_within(slow_header, milliseconds(200));
  }
  EXPECT_TRUE(header_closed) << "a client sending its header slowly held its connection for 5 s";
  EXPECT_TRUE(closed_within(slow_body, milliseconds(5000)));  // body_timeout_s = 1
  EXPECT_TRUE(closed_within(idle, milliseconds(5000)));
  // A keep-alive connection is closed once it has been idle that long.
  HttpConnection keep(port());
  ASSERT_TRUE(keep.send_all("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string got;
  for (int i = 0; i < 20 && got.find("\r\n\r\n") == std::string::npos; ++i) got += keep.read_some();
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  EXPECT_TRUE(closed_within(keep, milliseconds(6000)));
}

TEST(HostileLimits, MoreSlowClientsThanConnectionsLeaveHealthAnswerable) {
  fs::create_directories(work_dir());
  ServerProcess capped(hostile_config("capped", "  max_connections: 8\n"));
  ASSERT_TRUE(capped.ready()) << capped.log();
  std::vector<std::unique_ptr<HttpConnection>> slow;
  for (int i = 0; i < 40; ++i) {
    slow.push_back(std::make_unique<HttpConnection>(capped.port()));
    slow.back()->send_all("GET /health HTTP/1.1\r\n");
  }
  for (int i = 0; i < 5; ++i) EXPECT_EQ(http_call(capped.port(), "GET", "/health").status, 200) << capped.log();
  EXPECT_EQ(http_call(capped.port(), "GET", "/metrics").status, 200);
  const std::string body = json{{"model", "tiny"}, {"prompt", "room"}, {"max_tokens", 2}}.dump();
  EXPECT_EQ(http_call(capped.port(), "POST", "/v1/completions", body).status, 200);
  slow.clear();
  EXPECT_EQ(capped.stop(std::chrono::seconds(20)), 0) << capped.log();
}

TEST(HostileLimits, WhenEveryConnectionIsBusyHealthIsStillAnswered) {
  fs::create_directories(work_dir());
  ServerProcess capped(hostile_config("busy", "  max_connections: 2\n"));
  ASSERT_TRUE(capped.ready()) << capped.log();
  json body = {{"model", "tiny"}, {"prompt", "busy"}, {"max_tokens", 1900}, {"ignore_eos", true}, {"stream", true}};
  HttpConnection a(capped.port()), b(capped.port());
  ASSERT_TRUE(a.send_request("POST", "/v1/completions", body.dump()));
  ASSERT_TRUE(b.send_request("POST", "/v1/completions", body.dump()));
  ASSERT_FALSE(a.read_some().empty());
  ASSERT_FALSE(b.read_some().empty());
  EXPECT_EQ(http_call(capped.port(), "GET", "/health").status, 200);
  const HttpResponse refused = http_call(capped.port(), "POST", "/v1/completions", body.dump());
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(error_of(refused)["code"], "too_many_connections");
  a.close();
  b.close();
  EXPECT_EQ(capped.stop(std::chrono::seconds(20)), 0) << capped.log();
}

double metric(int port, const std::string& series) {
  const std::string text = http_call(port, "GET", "/metrics").body;
  const size_t at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

TEST_F(Hostile, ClientThatLeavesANonStreamingRequestCancelsIt) {
  const std::string aborted = "specd_requests_total{finish_reason=\"abort\"}";
  const double before = metric(port(), aborted);
  {
    HttpConnection c(port());
    json body = {{"model", "tiny"}, {"prompt", "leave"}, {"max_tokens", 1900}, {"ignore_eos", true}};
    ASSERT_TRUE(c.send_request("POST", "/v1/completions", body.dump()));
    for (int i = 0; i < 200 && metric(port(), "specd_running_sequences") < 1; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }  // closes the socket while the request runs
  double after = before;
  for (int i = 0; i < 200 && after != before + 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    after = metric(port(), aborted);
  }
  EXPECT_EQ(after, before + 1) << "the abandoned request kept running";
}

TEST(HostileShutdown, SlowAndStuckClientsDoNotHoldTheShutdown) {
  fs::create_directories(work_dir());
  ServerProcess s(hostile_config("shutdown"));  // shutdown_timeout_s: 1
  ASSERT_TRUE(s.ready()) << s.log();
  HttpConnection slow(s.port());
  slow.send_all("GET /health HTTP/1.1\r\nX-Slow: a");
  // A long stream whose client never reads.
  HttpConnection stuck(s.port());
  json body = {{"model", "tiny"}, {"prompt", "stuck"}, {"max_tokens", 1900}, {"ignore_eos", true}, {"stream", true}};
  ASSERT_TRUE(stuck.send_request("POST", "/v1/completions", body.dump()));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  s.signal(SIGTERM);
  EXPECT_EQ(s.wait(std::chrono::seconds(15)), 0) << "the server did not exit on its own\n" << s.log();
  EXPECT_NE(s.log().find("server stopped"), std::string::npos) << s.log();
}

}  // namespace
}  // namespace specd::test
