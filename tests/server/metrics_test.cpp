// The metrics registry's text format: families, labels with escaping, cumulative histograms.
#include "server/metrics.hpp"

#include <gtest/gtest.h>

#include "specd/error.hpp"

namespace specd::server {
namespace {

TEST(MetricsRegistry, RendersCountersGaugesAndHistograms) {
  MetricsRegistry reg;
  auto& drafts = reg.counter("specd_spec_draft_tokens_total", "Draft tokens.", {"proposer", "verifier"});
  drafts.with({"ngram", "rejection"}).inc(4);
  drafts.with({"ngram", "rejection"}).inc();
  drafts.with({"draft \"model\"", "greedy"}).inc(2);
  reg.gauge("specd_queue_depth", "Waiting.").with({}).set(3);
  auto& h = reg.histogram("specd_ttft_seconds", "TTFT.", {0.1, 1.0}).with({});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(5);
  const std::string text = reg.render();
  EXPECT_NE(text.find("# TYPE specd_spec_draft_tokens_total counter\n"), std::string::npos) << text;
  EXPECT_NE(text.find("specd_spec_draft_tokens_total{proposer=\"ngram\",verifier=\"rejection\"} 5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("proposer=\"draft \\\"model\\\"\""), std::string::npos) << text;
  EXPECT_NE(text.find("specd_queue_depth 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("specd_ttft_seconds_bucket{le=\"0.1\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("specd_ttft_seconds_bucket{le=\"1\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("specd_ttft_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("specd_ttft_seconds_count 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("specd_ttft_seconds_sum 5.55\n"), std::string::npos) << text;
}

TEST(MetricsRegistry, SameNameReturnsTheFamilyAndConflictsThrow) {
  MetricsRegistry reg;
  auto& a = reg.counter("x_total", "X.", {"a"});
  EXPECT_EQ(&a, &reg.counter("x_total", "X.", {"a"}));
  EXPECT_THROW(reg.gauge("x_total", "X."), Error);
  EXPECT_THROW(reg.counter("x_total", "X.", {"b"}), Error);
  EXPECT_THROW(reg.counter("bad name", "X."), Error);
  EXPECT_THROW(a.with({"1", "2"}), Error);
}

}  // namespace
}  // namespace specd::server
