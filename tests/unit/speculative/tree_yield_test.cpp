// TreeYield: the dynamic policy's value of a draft tree's node budget. Nodes beyond the deepest
// tree verified are worth only what trees of that size were seen to accept; the curve it hands
// the policy is a valid acceptance curve (each value in [0, 1], increments never growing); and
// with it the policy budgets a tree proposer of depth 4 four nodes where a row costs something,
// where the chain curve had it draft every node.
#include "speculative/tree_yield.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "speculative/policy.hpp"

namespace specd::speculative {
namespace {

std::vector<double> shaped(const TreeYield& t, std::vector<double> accept) {
  t.shape(accept);
  return accept;
}

TEST(TreeYield, LeavesTheChainCurveUntilATreeIsVerified) {
  TreeYield t(8);
  const std::vector<double> chain = {0.9, 0.8, 0.85, 0.7, 0.9, 0.9, 0.9, 0.9};
  EXPECT_EQ(shaped(t, chain), chain);
}

// A step's trees are one observation per node count (their mean), as a step's rows are for the
// acceptance model: 8 copies of a prompt rejecting their first drafts together are one bad step.
TEST(TreeYield, AStepsTreesAreOneObservation) {
  const std::vector<double> chain(8, 0.9);
  TreeYield batch(8), single(8), rows(8);
  for (int i = 0; i < 8; ++i) {
    batch.observe_in_step(8, 4, i < 4 ? 0 : 4);
    rows.observe(8, 4, 0);
  }
  batch.end_step();
  single.observe(8, 4, 2);  // the step's mean
  EXPECT_DOUBLE_EQ(batch.yield(chain, 8), single.yield(chain, 8));
  EXPECT_LT(rows.yield(chain, 8), 0.5) << "eight trees, eight observations";
  EXPECT_GT(batch.yield(chain, 8), 2.0);
}

TEST(TreeYield, NodesBeyondTheDeepestTreeAddNothingUnlessTreesShowedIt) {
  TreeYield t(8);
  for (int i = 0; i < 20; ++i) t.observe(8, 4, 3);  // depth-4 trees of 8 nodes accepting 3
  const std::vector<double> chain(8, 0.9);
  const std::vector<double> a = shaped(t, chain);
  // Up to the depth: the chain's own curve.
  for (int32_t n = 1; n <= 4; ++n) EXPECT_NEAR(expected_tokens(a, n), expected_tokens(chain, n), 1e-12) << n;
  // Beyond it: nothing more (trees of 5..7 nodes were never seen, so 8 gains nothing over 4 on a
  // concave curve), where the chain curve promised 2.2 more tokens.
  EXPECT_NEAR(expected_tokens(a, 8), expected_tokens(chain, 4), 1e-12);
  EXPECT_GT(expected_tokens(chain, 8) - expected_tokens(chain, 4), 2.0);
}

TEST(TreeYield, SiblingsAreWorthWhatTreesOfThatSizeAccepted) {
  const std::vector<double> chain(8, 0.7);  // a chain of 4 expects 1.77 accepted drafts
  TreeYield without(8), with(8);
  for (int i = 0; i < 50; ++i) {
    without.observe(4, 4, 2);  // 4 nodes: about the chain's figure
    with.observe(4, 4, 2);
    with.observe(5, 4, 3);  // a fifth node (a sibling) raised it to 3
  }
  const std::vector<double> a = shaped(without, chain), b = shaped(with, chain);
  EXPECT_NEAR(expected_tokens(a, 5), expected_tokens(a, 4), 1e-12);
  // Worth the most a concave curve allows after the fourth node's increment (0.7^3 = 0.343 at
  // the third): the fifth node adds that much.
  EXPECT_NEAR(expected_tokens(b, 5) - expected_tokens(b, 4), 0.343, 1e-9);
}

// Trees of 8 nodes (depth 4) that accepted more than 4 levels' chain figure: nodes 5-8 share the
// difference, where the concave curve would have given the 8th nothing after unseen 5-7.
TEST(TreeYield, NodeCountsNotShownLieBetweenTheShownOnes) {
  TreeYield t(8);
  for (int i = 0; i < 50; ++i) t.observe(8, 4, 4);
  const std::vector<double> chain(8, 0.8);  // 4 levels: 2.36 accepted drafts
  const std::vector<double> a = shaped(t, chain);
  const double e4 = expected_tokens(a, 4), e8 = expected_tokens(a, 8);
  for (int32_t n = 5; n <= 8; ++n)
    EXPECT_NEAR(expected_tokens(a, n) - expected_tokens(a, n - 1), (e8 - e4) / 4, 1e-9) << n;
  EXPECT_GT(e8 - e4, 1.4);  // 8 nodes accept ~4 of 4 levels: ~1.6 more than the chain's 2.36
  EXPECT_NEAR(t.yield(chain, 8), (50 * 0.98 * 4 + 2.3616) / 51, 0.1);
}

TEST(TreeYield, HandsThePolicyAValidConcaveCurve) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 200; ++trial) {
    TreeYield t(12);
    for (int i = 0; i < 30; ++i) {
      const int32_t nodes = 1 + static_cast<int32_t>(rng() % 12), depth = 1 + static_cast<int32_t>(rng() % 6);
      t.observe(nodes, depth, static_cast<int32_t>(rng() % (depth + 1)));
    }
    std::vector<double> a(12);
    for (double& x : a) x = u(rng);
    t.shape(a);
    double last = 1, before = 0;
    for (int32_t n = 1; n <= 12; ++n) {
      ASSERT_GE(a[static_cast<size_t>(n - 1)], 0.0);
      ASSERT_LE(a[static_cast<size_t>(n - 1)], 1.0);
      const double inc = expected_tokens(a, n) - 1 - before;
      ASSERT_LE(inc, last + 1e-12) << "trial " << trial << " n " << n;
      ASSERT_GE(inc, -1e-12);
      last = inc;
      before += inc;
    }
  }
}

// A memory-bound target (extra rows cost 2% of a step each) and a tree proposer of depth 4 with
// a 0.9-acceptance head: with the chain curve the policy budgets all 8 nodes, with the tree curve
// 4 (the nodes past depth 4 were never seen to add anything).
TEST(TreeYield, ThePolicyBudgetsATreeItsDepth) {
  SpeculationPolicy p(8, 1024, true);
  std::vector<TargetSample> target;
  for (int32_t t = 1; t <= 1024; t *= 2) target.push_back({t, t, 0.010 + 0.0002 * t});
  target.push_back({1024, 1, 0.010 + 0.0002 * 1024});
  p.cost().set_target_prior(target);
  for (int i = 0; i < 60; ++i) p.cost().observe_propose(1 + i % 8, 1 + i % 8, 0.001);
  StepBase base;
  base.tokens = base.logit_rows = base.emitted = 1;
  std::vector<double> chain(8, 0.9);
  std::vector<int32_t> k(1);
  p.choose_k(base, std::vector<PlanRow>{{8, chain}}, k);
  EXPECT_EQ(k[0], 8);
  TreeYield t(8);
  for (int i = 0; i < 20; ++i) t.observe(8, 4, 3);
  t.shape(chain);
  p.choose_k(base, std::vector<PlanRow>{{8, chain}}, k);
  EXPECT_EQ(k[0], 4);
}

}  // namespace
}  // namespace specd::speculative
