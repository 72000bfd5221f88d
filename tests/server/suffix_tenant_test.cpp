// Suffix decoding's global cache over HTTP (docs/server.md "Tenants", docs/proposers.md
// "suffix"): with share_across_requests: false a request drafts from the finished outputs of its
// own tenant only — the API key it authenticated with together with its `user` — and the
// proposer's observations reach /metrics as specd_spec_proposer_observation_sum{name}.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "server_test_util.hpp"

namespace specd::test {
namespace {

// The value of one series line of /metrics (0 when absent: a counter not yet incremented).
double series_value(const std::string& metrics, const std::string& series) {
  const size_t at = metrics.find("\n" + series + " ");
  return at == std::string::npos ? 0.0 : std::stod(metrics.substr(at + series.size() + 2));
}

TEST(ServerSuffixTenants, OutputsDraftOnlyForTheirTenantAndObservationsReachMetrics) {
  const std::string file =
      write_config("suffix-tenants", "  api_keys: [\"k1\", \"k2\"]\n", "  max_num_seqs: 8\n  max_queue: 64\n");
  std::ofstream(file, std::ios::app)
      << "speculative:\n  num_speculative_tokens: 4\n  dynamic: false\n"
         "  proposer: {name: suffix, share_across_requests: false}\n  verifier: {name: greedy}\n";
  ServerProcess s(file);
  ASSERT_TRUE(s.ready()) << s.log();
  const auto call = [&](const std::string& key, const std::string& user) {
    json body = completion("Tenants keep their own text", 32);
    body["user"] = user;
    const HttpResponse r =
        http_call(s.port(), "POST", "/v1/completions", body.dump(), {"Authorization: Bearer " + key});
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json::parse(r.body)["choices"][0]["text"].get<std::string>() : std::string();
  };
  const std::string hits =
      R"(specd_spec_proposer_observation_sum{proposer="suffix",verifier="greedy",name="global_hits"})";
  const std::string lookups =
      R"(specd_spec_proposer_observations_total{proposer="suffix",verifier="greedy",name="lookups"})";
  const auto metrics = [&] { return http_call(s.port(), "GET", "/metrics", "", {"Authorization: Bearer k1"}).body; };

  const std::string first = call("k1", "alice");
  const double h0 = series_value(metrics(), hits);
  EXPECT_GT(series_value(metrics(), lookups), 0.0) << "the proposer's observations reach /metrics";
  // The same prompt under another key, or the same key with another user: another tenant, whose
  // drafts never come from alice's output (greedy: the text is the same anyway).
  EXPECT_EQ(call("k2", "alice"), first);
  EXPECT_EQ(call("k1", "bob"), first);
  const double h1 = series_value(metrics(), hits);
  EXPECT_EQ(h1, h0) << "another tenant drafted from alice's output";
  // alice again: her earlier output is in the global cache and drafts for her.
  EXPECT_EQ(call("k1", "alice"), first);
  EXPECT_GT(series_value(metrics(), hits), h1) << "the tenant's own finished output did not draft";
}

}  // namespace
}  // namespace specd::test
