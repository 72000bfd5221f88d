#include <gtest/gtest.h>

#include "specd/error.hpp"
#include "specd/spec_metrics.hpp"

using specd::spec::SpecMetrics;

TEST(SpecMetrics, FormulasFromArchitecture) {
  SpecMetrics m;
  m.record(4, 4, 4, 5);  // all accepted + bonus
  m.record(4, 4, 1, 2);  // first accepted, then the recovered token
  m.record(4, 3, 0, 1);  // proposer had only 3; none accepted
  m.record(4, 0, 0, 1);  // no draft: plain decode, not a draft
  EXPECT_EQ(m.num_drafts, 3u);
  EXPECT_EQ(m.draft_tokens, 11u);
  EXPECT_EQ(m.accepted_tokens, 5u);
  EXPECT_DOUBLE_EQ(m.acceptance_rate(), 5.0 / 11.0);
  EXPECT_DOUBLE_EQ(m.mean_acceptance_length(), 1.0 + 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(m.system_efficiency(), 8.0 / 15.0);
  EXPECT_DOUBLE_EQ(m.acceptance_at(0), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(m.acceptance_at(1), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(m.acceptance_at(3), 1.0 / 2.0);
  EXPECT_DOUBLE_EQ(m.acceptance_at(9), 0.0);
}

TEST(SpecMetrics, CountersAddUpAcrossOutcomesAndSteps) {
  SpecMetrics a;
  a.record(2, 2, 1, 2);
  a.record(5, 5, 5, 6);
  a.add_times(0.001, 0.010, 0.0005);
  EXPECT_EQ(a.num_drafts, 2u);
  EXPECT_EQ(a.accepted_tokens, 6u);
  EXPECT_EQ(a.drafted_at.size(), 5u);
  EXPECT_DOUBLE_EQ(a.acceptance_at(0), 1.0);
  EXPECT_DOUBLE_EQ(a.acceptance_at(1), 0.5);
  EXPECT_EQ(a.num_steps, 1u);
  EXPECT_NE(a.summary().find("acceptance 0.857 (6/7)"), std::string::npos) << a.summary();
}

TEST(SpecMetrics, InconsistentOutcomeIsAnInternalError) {
  SpecMetrics m;
  EXPECT_THROW(m.record(2, 3, 0, 1), specd::Error);
  EXPECT_THROW(m.record(4, 2, 3, 1), specd::Error);
  EXPECT_THROW(m.record(4, 2, 1, 3), specd::Error);
}
