// TreeYield: the dynamic policy's value of a draft tree's node budget. Nodes beyond the deepest
// tree verified are worth only what trees of that size were seen to accept; the curve it hands
// the policy is a valid acceptance curve (each value in [0, 1], increments never growing); and
// with it the policy budgets a tree proposer of depth 4 four nodes where a row costs something,
// where the chain curve had it draft every node.
#include "speculative/tree_yield.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "decoding_batch.hpp"
#include "speculative/policy.hpp"

namespace specd::speculative {
namespace {

std::vector<double> shaped(const TreeYield& t, std::vector<double> accept) {
  t.shape(accept);
  return accept;
}

double chain_yield(const std::vector<double>& accept, int32_t levels) {
  return expected_tokens(accept, levels) - 1;
}

// A memory-bound target (10 ms a step, 0.2 ms per extra token) and cheap drafts (1 ms a call).
void teach_memory_bound(SpeculationPolicy& p) {
  std::vector<TargetSample> target;
  for (int32_t t = 1; t <= 1024; t *= 2) target.push_back({t, t, 0.010 + 0.0002 * t});
  target.push_back({1024, 1, 0.010 + 0.0002 * 1024});
  p.cost().set_target_prior(target);
  for (int i = 0; i < 60; ++i) p.cost().observe_propose(1 + i % 8, 1 + i % 8, 0.001);
}

StepBase one_row() {
  StepBase base;
  base.tokens = base.logit_rows = base.emitted = 1;
  return base;
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

// The first trees a dynamic policy drafts are small (two nodes). Bounded by the deepest tree
// seen, deeper nodes were then worth nothing and the budget stayed at 2 nodes (EAGLE-3 depth 4 on
// llama-160m); bounded by the proposer's depth (ABI 1.9), the budgets up to that depth keep the
// chain's value until trees of their size show otherwise.
TEST(TreeYield, TheProposersDepthBoundsTreesNotTheFirstSmallOnes) {
  const std::vector<double> chain(8, 0.9);
  TreeYield seen(8), declared(8);
  declared.set_max_depth(4);
  for (int i = 0; i < 5; ++i) {
    seen.observe(2, 2, 2);  // two nodes, two levels, both accepted
    declared.observe(2, 2, 2);
  }
  EXPECT_EQ(seen.depth_bound(), 2);
  EXPECT_EQ(declared.depth_bound(), 4);
  const std::vector<double> a = shaped(seen, chain), b = shaped(declared, chain);
  EXPECT_NEAR(expected_tokens(a, 4), expected_tokens(a, 2), 1e-12) << "nothing past the second node";
  // The third and fourth nodes: worth the chain's 2.44 and 3.10 levels, past the 1.95 the 2-node
  // trees showed (increments clamped to the one before, the concave curve the search needs).
  EXPECT_NEAR(expected_tokens(b, 4) - expected_tokens(b, 2), 2 * (chain_yield(chain, 3) - declared.yield(chain, 2)),
              1e-9);
  EXPECT_GT(expected_tokens(b, 4) - expected_tokens(b, 2), 0.9);
  EXPECT_NEAR(expected_tokens(b, 8), expected_tokens(b, 4), 1e-12) << "never past the proposer's depth";

  // With a memory-bound target the policy budgets the declared tree its depth, the other 2 nodes.
  SpeculationPolicy p(8, 1024, true);
  teach_memory_bound(p);
  const StepBase base = one_row();
  std::vector<int32_t> k(1);
  p.choose_k(base, std::vector<PlanRow>{{8, a}}, k);
  EXPECT_EQ(k[0], 2);
  p.choose_k(base, std::vector<PlanRow>{{8, b}}, k);
  EXPECT_EQ(k[0], 4);
}

// A tree drafter makes a chain where it is confident and branches where it is not: its chains
// are trees of their size too, or each budget would be valued by its unsure steps alone.
TEST(TreeYield, ATreeProposersChainsCountAsItsTrees) {
  SpeculationPolicy p(4, 1024, true);
  p.set_trees(true, 4);
  testing::DecodingBatch d(1, 4);
  const std::vector<int32_t> drafts = {7, 7, 7, 7};
  const std::vector<double> evidence(4, 1.0);
  spec::PolicyMetrics m;
  d.fill();
  p.plan(d.batch, m);
  sched::StepRow& row = d.batch.rows[0];
  row.drafts = drafts;  // no parents: a chain
  row.num_accepted = 4;
  p.observe_verified(row, evidence, m);
  p.observe_step(d.batch, 0.001, 0.010, m);
  EXPECT_EQ(p.tree_yield().deepest(), 4);
  const std::vector<double> half(4, 0.5);
  EXPECT_NEAR(p.tree_yield().yield(half, 4), (4 + 8 * 0.9375) / 9, 1e-12) << "one 4-node tree that accepted 4";
}

// A batch of 8 copies of a prompt whose first drafts are all rejected (llama-160m's demo prompt):
// that one step must not leave only the first node worth drafting. Counted as heavily as the
// chain figure, it halved 2 nodes' value, the concave curve gave nodes 2-8 nothing, and the
// EAGLE-3 head drafted 1-node trees for whole requests at batch 8 (0.88x static 4 nodes).
TEST(TreeYield, OneBadFirstStepLeavesDeeperNodesTheirValue) {
  TreeYield t(8);
  t.set_max_depth(4);
  for (int i = 0; i < 8; ++i) t.observe_in_step(2, 2, 0);
  t.end_step();
  const std::vector<double> chain = {0.78, 0.85, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9};  // after that step
  const std::vector<double> a = shaped(t, chain);
  EXPECT_GT(expected_tokens(a, 4) - expected_tokens(a, 1),
            0.8 * (expected_tokens(chain, 4) - expected_tokens(chain, 1)));
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

// A tree's propose takes min(budget, depth) draft steps: fitted on 8-node trees of depth 4, the
// cost model prices a 4-node tree as dear (the same four forwards) and a 2-node tree by its two,
// where read as 8 steps the fit had put a 4-node tree at about half an 8-node one.
TEST(TreeYield, ATreesDraftStepsAreItsLevels) {
  CostModel tree, chain;
  tree.set_max_draft_steps(4);
  for (int i = 0; i < 40; ++i) {
    tree.observe_propose(8, 8, 0.004);
    chain.observe_propose(8, 8, 0.004);
    tree.observe_propose(2, 2, 0.002);
    chain.observe_propose(2, 2, 0.002);
  }
  EXPECT_NEAR(tree.propose_seconds(8, 8), 0.004, 2e-4);
  EXPECT_NEAR(tree.propose_seconds(4, 4), 0.004, 3e-4) << "four levels, as an 8-node tree";
  EXPECT_NEAR(tree.propose_seconds(2, 2), 0.002, 2e-4);
  EXPECT_LT(chain.propose_seconds(4, 4), 0.0029) << "read as 8 steps, 4 nodes look half price";
}

// A memory-bound target (extra rows cost 2% of a step each) and a tree proposer of depth 4 with
// a 0.9-acceptance head: with the chain curve the policy budgets all 8 nodes, with the tree curve
// 4 (the nodes past depth 4 were never seen to add anything).
TEST(TreeYield, ThePolicyBudgetsATreeItsDepth) {
  SpeculationPolicy p(8, 1024, true);
  teach_memory_bound(p);
  const StepBase base = one_row();
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
