// A/B arms through `specd serve`: the speculative.arm field and the X-Specd-Arm header pick the
// arm, the OpenAI `user` keeps one, an unknown arm is a 400 naming it, the response reports the
// arm (header and usage.arm), and /metrics has the per-arm and shadow series.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "fixture.hpp"
#include "http_client.hpp"
#include "server_process.hpp"

namespace specd::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Arms rejection (weight 1) and typical (weight `typical_weight`), typical shadowing rejection.
std::string ab_server_config(const std::string& typical_weight) {
  const fs::path dir = fs::path(SPECD_TEST_WORK_DIR) / "server-ab";
  fs::create_directories(dir);
  fixture::Options o;
  o.preset = "tiny";
  const fs::path model = fixture::write(o, dir / "tiny");
  const fs::path file = dir / ("ab-" + typical_weight + ".yaml");
  std::ofstream(file) << "model:\n  path: " << model.string() << "\n  max_model_len: 256\n  num_threads: 1\n"
                      << "kv_cache:\n  memory_mib: 32\nserver:\n  model_name: tiny\n"
                      << "speculative:\n  num_speculative_tokens: 3\n  proposer: {name: draft_model, layers: 1}\n"
                      << "  arms:\n    - {name: rejection, verifier: rejection}\n"
                      << "    - {name: typical, verifier: typical_acceptance, weight: " << typical_weight << "}\n"
                      << "  shadow: [typical]\n  ab_log: " << (dir / "ab.jsonl").string() << "\n";
  return file.string();
}

json request(const std::string& prompt) {
  return {{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}};
}

TEST(ServerAb, ArmSelectionReportingAndErrors) {
  ServerProcess s(ab_server_config("0"));
  ASSERT_TRUE(s.ready()) << s.log();
  // Weight 0: `typical` only serves when asked for; otherwise it shadows `rejection`.
  const HttpResponse plain = http_call(s.port(), "POST", "/v1/completions", request("Arms one").dump());
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_EQ(plain.headers.at("x-specd-arm"), "rejection");
  EXPECT_EQ(json::parse(plain.body)["usage"]["arm"], "rejection");

  json by_field = request("Arms two");
  by_field["speculative"] = {{"arm", "typical"}};
  const HttpResponse field = http_call(s.port(), "POST", "/v1/completions", by_field.dump());
  ASSERT_EQ(field.status, 200) << field.body;
  EXPECT_EQ(field.headers.at("x-specd-arm"), "typical");

  const HttpResponse header =
      http_call(s.port(), "POST", "/v1/completions", request("Arms three").dump(), {"X-Specd-Arm: typical"});
  ASSERT_EQ(header.status, 200) << header.body;
  EXPECT_EQ(json::parse(header.body)["usage"]["arm"], "typical");

  json chat = {
      {"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 6}, {"temperature", 0},
      {"stream", true},  {"stream_options", {{"include_usage", true}}},         {"user", "alice"}};
  const HttpResponse streamed = http_call(s.port(), "POST", "/v1/chat/completions", chat.dump());
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_EQ(streamed.headers.at("x-specd-arm"), "rejection") << "weight 0 arms are never picked for a user";
  EXPECT_NE(streamed.body.find("\"arm\":\"rejection\""), std::string::npos) << "usage.arm in the usage chunk";

  json unknown = request("Arms four");
  unknown["speculative"] = {{"arm", "greedy"}};
  const HttpResponse bad = http_call(s.port(), "POST", "/v1/completions", unknown.dump());
  EXPECT_EQ(bad.status, 400);
  const json err = json::parse(bad.body)["error"];
  EXPECT_EQ(err["message"], "unknown A/B arm 'greedy' (arms: rejection, typical)");
  EXPECT_EQ(err["param"], "speculative.arm");
  const HttpResponse bad_header =
      http_call(s.port(), "POST", "/v1/completions", request("x").dump(), {"X-Specd-Arm: nope"});
  EXPECT_EQ(bad_header.status, 400);
  EXPECT_EQ(json::parse(bad_header.body)["error"]["param"], "X-Specd-Arm");
  json both = request("x");
  both["speculative"] = {{"arm", "typical"}};
  EXPECT_EQ(http_call(s.port(), "POST", "/v1/completions", both.dump(), {"X-Specd-Arm: rejection"}).status, 400);
  json user_type = request("x");
  user_type["user"] = 5;
  EXPECT_EQ(http_call(s.port(), "POST", "/v1/completions", user_type.dump()).status, 400);

  const std::string metrics = http_call(s.port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("specd_spec_arm_requests_total{arm=\"rejection\"} 2"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("specd_spec_arm_requests_total{arm=\"typical\"} 2"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("specd_spec_shadow_draft_tokens_total{arm=\"typical\",serving_arm=\"rejection\"}"),
            std::string::npos)
      << metrics;
  EXPECT_NE(
      metrics.find("specd_spec_draft_tokens_total{proposer=\"draft_model\",verifier=\"rejection,typical_acceptance\"}"),
      std::string::npos);
  if (fs::exists("/usr/bin/promtool")) {
    const fs::path mf = fs::path(SPECD_TEST_WORK_DIR) / "server-ab" / "metrics.txt";
    std::ofstream(mf) << metrics;
    EXPECT_EQ(std::system(("/usr/bin/promtool check metrics < " + mf.string() + " > /dev/null 2>&1").c_str()), 0);
  }
}

TEST(ServerAb, UserIsStickyAndUsersSpreadOverArms) {
  ServerProcess s(ab_server_config("1"));
  ASSERT_TRUE(s.ready()) << s.log();
  std::set<std::string> seen;
  for (const char* user : {"u1", "u2", "u3", "u4", "u5", "u6"}) {
    std::set<std::string> arms;
    for (int i = 0; i < 3; ++i) {
      json r = request("Sticky " + std::to_string(i));
      r["user"] = user;
      const HttpResponse res = http_call(s.port(), "POST", "/v1/completions", r.dump());
      ASSERT_EQ(res.status, 200) << res.body;
      arms.insert(res.headers.at("x-specd-arm"));
    }
    EXPECT_EQ(arms.size(), 1u) << "every request of " << user << " on one arm";
    seen.insert(arms.begin(), arms.end());
  }
  EXPECT_EQ(seen.size(), 2u) << "a 1:1 split puts these six users on both arms";
}

}  // namespace
}  // namespace specd::test
