// Proposer confidence (ABI 1.6) in the dynamic speculation policy: the calibration of stated
// confidences against measured acceptance, and trim(), which chooses each row's k after the
// proposer drafted its whole budget: confident drafts are kept where they pay, the rest cut, and a
// proposer that overstates its confidence is cut back once its drafts are seen to fail.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "decoding_batch.hpp"
#include "sched/scheduler.hpp"
#include "speculative/confidence_model.hpp"
#include "speculative/policy.hpp"

namespace specd::speculative {
namespace {

// A target that costs fixed + per_token * T seconds (R = T).
std::vector<TargetSample> linear_target(double fixed, double per_token) {
  std::vector<TargetSample> s;
  for (int32_t t = 1; t <= 1024; t *= 2) s.push_back({t, t, fixed + per_token * t});
  return s;
}

TEST(ConfidenceModel, ScalesTheEstimateByWhatDraftsOfThatConfidenceAchieved) {
  ConfidenceModel m;
  EXPECT_DOUBLE_EQ(m.predict(0.8f, 0.3), 0.3) << "no evidence: the estimate without confidence";
  EXPECT_DOUBLE_EQ(m.predict(-1.0f, 0.3), 0.3) << "no confidence";
  EXPECT_DOUBLE_EQ(m.predict(std::numeric_limits<float>::quiet_NaN(), 0.3), 0.3);
  // Drafts said 0.95 where the estimate was 0.6, and 30% were accepted: half the estimate.
  for (int i = 0; i < 1000; ++i) m.observe(0.95f, 0.6, i % 10 < 3 ? 1.0 : 0.0);
  // Drafts said 0.5 where the estimate was 0.5, and all were accepted: twice the estimate.
  for (int i = 0; i < 1000; ++i) m.observe(0.5f, 0.5, 1.0);
  EXPECT_NEAR(m.predict(0.95f, 0.6), 0.3, 0.01);
  EXPECT_NEAR(m.predict(0.95f, 0.9), 0.45, 0.01) << "a factor on the estimate, which keeps the position's";
  EXPECT_NEAR(m.predict(0.91f, 0.6), 0.3, 0.01) << "the same bucket";
  EXPECT_NEAR(m.predict(7.0f, 0.6), 0.3, 0.01) << "above 1 counts as 1";
  EXPECT_NEAR(m.predict(0.55f, 0.3), 0.6, 0.01);
  EXPECT_DOUBLE_EQ(m.predict(0.55f, 0.7), 1.0) << "at most 1";
  EXPECT_DOUBLE_EQ(m.predict(0.25f, 0.4), 0.4) << "other buckets: no evidence";
  m.observe(-1.0f, 0.5, 1.0);  // no confidence: nothing learnt
  const double seen = 200.0 * (1 - std::pow(0.995, 1000));
  EXPECT_NEAR(m.evidence_in(9), seen, 1e-6);
  // Evidence of drafts no longer scored fades step by step: back towards the estimate.
  for (int i = 0; i < 4000; ++i) m.age();
  EXPECT_NEAR(m.evidence_in(9), seen * std::pow(0.998, 4000), 1e-6);
  EXPECT_NEAR(m.predict(0.95f, 0.6), 0.6, 0.02);
}

// Decoding rows with lookahead 8; their drafts are filled by the caller.
struct Step : testing::DecodingBatch {
  explicit Step(int n) : DecodingBatch(n, 8) {}
};

const std::vector<int32_t> kDrafts = {5, 6, 7, 8, 9, 10, 11, 12};

TEST(SpeculationPolicy, TrimKeepsConfidentDraftsAndCutsTheRest) {
  SpeculationPolicy p(8, 1024, true);
  p.set_trimming(true);
  p.cost().set_target_prior(linear_target(0.010, 0.0001));  // memory-bound: a draft costs 1% of a step
  for (int i = 0; i < 500; ++i) {
    p.confidence().observe(0.95f, 0.5, 1.0);  // confident drafts: accepted, twice the estimate
    p.confidence().observe(0.15f, 0.5, 0.0);  // unconfident ones: rejected
  }
  Step s(2);
  s.fill();
  spec::PolicyMetrics m;
  p.plan(s.batch, m);
  ASSERT_TRUE(p.trim_pending());
  EXPECT_EQ(s.batch.rows[0].lookahead, 8) << "the proposer is asked for the whole budget";
  EXPECT_EQ(m.steps, 0u) << "the choice waits for the drafts";
  for (auto* r : s.rows) r->drafts = kDrafts;
  std::vector<float> conf(16, 0.95f);
  conf[8 + 2] = 0.15f;  // row 1: its third draft is a guess
  p.trim(s.rows, conf, 8, 0.0001, m);
  EXPECT_EQ(s.batch.rows[0].drafts.size(), 8u);
  EXPECT_EQ(s.batch.rows[1].drafts.size(), 2u) << "cut before the guess: nothing after it pays";
  EXPECT_EQ(s.batch.rows[1].lookahead, 8) << "rows keep the lookahead the proposer was given";
  EXPECT_EQ(m.trimmed, 6u);
  EXPECT_EQ(m.steps, 1u);
  ASSERT_EQ(m.chosen_k.size(), 9u);
  EXPECT_EQ(m.chosen_k[8], 1u);
  EXPECT_EQ(m.chosen_k[2], 1u);
}

TEST(SpeculationPolicy, TrimGoesPlainWhereDraftsCostAWholeStep) {
  SpeculationPolicy p(8, 1024, true);
  p.set_trimming(true);
  p.cost().set_target_prior(linear_target(0.0001, 0.001));  // compute-bound: each token costs a step
  for (int i = 0; i < 500; ++i) p.confidence().observe(0.55f, 0.5, i % 2 == 0 ? 1.0 : 0.0);
  Step s(2);
  s.fill();
  spec::PolicyMetrics m;
  p.plan(s.batch, m);
  for (auto* r : s.rows) r->drafts = kDrafts;
  const std::vector<float> conf(16, 0.55f);
  p.trim(s.rows, conf, 8, 0.0, m);
  EXPECT_TRUE(s.batch.rows[0].drafts.empty());
  EXPECT_TRUE(s.batch.rows[1].drafts.empty());
  EXPECT_EQ(m.trimmed, 16u);
  EXPECT_EQ(m.chosen_k[0], 2u);
}

// A proposer that says 0.95 for drafts the target never accepts: the first steps go by the
// acceptance estimate (an unseen sequence: drafting pays) and score all 8, the verified
// rejections teach the calibration, and the drafts are cut back.
TEST(SpeculationPolicy, OverstatedConfidenceIsLearntFromVerifiedDrafts) {
  SpeculationPolicy p(8, 1024, true);
  p.set_trimming(true);
  p.cost().set_target_prior(linear_target(0.010, 0.0005));
  Step s(1);
  spec::PolicyMetrics m;
  std::vector<size_t> scored;
  for (int step = 0; step < 40; ++step) {
    s.fill();
    p.plan(s.batch, m);
    sched::StepRow& row = s.batch.rows[0];
    row.drafts = kDrafts;
    p.trim(s.rows, std::vector<float>(8, 0.95f), 8, 0.0001, m);
    scored.push_back(row.drafts.size());
    row.num_accepted = 0;
    const std::vector<double> evidence = {0.0};  // the first draft is rejected
    if (row.drafted()) p.observe_verified(row, evidence, m);
  }
  EXPECT_EQ(scored.front(), 8u) << "as without confidence at first";
  for (size_t i = 30; i < scored.size(); ++i) EXPECT_LE(scored[i], 1u) << "step " << i;
  EXPECT_LT(p.confidence().predict(0.95f, 0.5), 0.3) << "learnt: well below the estimate";
}

// Without trimming the policy chooses k before the proposer runs, as before: no trim is pending.
TEST(SpeculationPolicy, WithoutTrimmingPlanChoosesBeforeThePropose) {
  SpeculationPolicy p(8, 1024, true);
  p.cost().set_target_prior(linear_target(0.0001, 0.001));
  for (int i = 0; i < 300; ++i) p.acceptance().observe(1, std::vector<double>{0.0});
  Step s(1);
  s.fill();
  spec::PolicyMetrics m;
  p.plan(s.batch, m);
  EXPECT_FALSE(p.trim_pending());
  EXPECT_EQ(s.batch.rows[0].lookahead, 0);
  EXPECT_EQ(m.steps, 1u);
}

}  // namespace
}  // namespace specd::speculative
