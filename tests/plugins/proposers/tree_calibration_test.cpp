// TreeCalibration: the tree drafter's learned value of a node. Before evidence a node is worth
// its draft probability (EAGLE-2's ranking); a verified tree teaches each tried node's (rank,
// probability) cell whether it was accepted, following the verifier's order (siblings in node
// order, the rest untried); and where a draft's first choices are accepted far more often than
// their probability says and its second choices never, a 4-node budget goes to the chain.
#include "tree_calibration.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace specd::proposers {
namespace {

using Node = TreeCalibration::Node;

TEST(TreeCalibration, WithoutEvidenceANodeIsWorthItsDraftProbability) {
  const TreeCalibration c;
  for (const double p : {0.0, 0.05, 0.3, 0.71, 1.0}) {
    EXPECT_DOUBLE_EQ(c.accept(0, p), p);
    EXPECT_DOUBLE_EQ(c.accept(1, p), p);
  }
}

// Roots a (first choice) and b; a's children c and d. The path [a, d]: a accepted, c tried and
// rejected, d accepted; b was never tried (a came first); d had no children.
TEST(TreeCalibration, LearnsWhatTheVerifierTried) {
  TreeCalibration c;
  const std::vector<Node> tree = {{10, -1, 0, 0.65f}, {11, -1, 1, 0.25f}, {12, 0, 0, 0.55f}, {13, 0, 1, 0.35f}};
  const std::vector<int32_t> path = {10, 13};
  c.observe(tree, path);
  const double k = TreeCalibration::kPrior;
  EXPECT_NEAR(c.accept(0, 0.65), (1 + k * 0.65) / (1 + k), 1e-6) << "a: accepted";
  EXPECT_NEAR(c.accept(1, 0.25), 0.25, 1e-6) << "b: never tried";
  EXPECT_NEAR(c.accept(0, 0.55), (0 + k * 0.55) / (1 + k), 1e-6) << "c: tried, rejected";
  EXPECT_NEAR(c.accept(1, 0.35), (1 + k * 0.35) / (1 + k), 1e-6) << "d: accepted";
  // The same tree with nothing accepted: both roots tried and rejected, nothing deeper.
  TreeCalibration none;
  none.observe(tree, {});
  EXPECT_LT(none.accept(0, 0.65), 0.65);
  EXPECT_LT(none.accept(1, 0.25), 0.25);
  EXPECT_DOUBLE_EQ(none.accept(0, 0.55), 0.55);
}

// A confident draft whose first choice (p 0.6-0.7) is the target's argmax 95% of the time and
// whose second choice (p 0.2-0.3) never is: after 200 such trees a path of three first choices
// is worth more than one second choice, where by draft probability (0.65^3 = 0.27 against 0.25)
// they were about even, and the best 4 nodes of a depth-4 tree are the chain.
TEST(TreeCalibration, AConfidentDraftsBudgetGoesToTheChain) {
  TreeCalibration c;
  for (int i = 0; i < 200; ++i) {
    // Roots x (0.65) and y (0.25); x's children x1 (0.65) and y1 (0.25); the path: x, x1 (or x, y1
    // rejected as well in 5% of the trees, where the target chose something else).
    const std::vector<Node> tree = {{1, -1, 0, 0.65f}, {2, -1, 1, 0.25f}, {3, 0, 0, 0.65f}, {4, 0, 1, 0.25f}};
    const std::vector<int32_t> path = i % 20 == 0 ? std::vector<int32_t>{1} : std::vector<int32_t>{1, 3};
    c.observe(tree, path);
  }
  EXPECT_GT(c.accept(0, 0.65), 0.9);
  EXPECT_LT(c.accept(1, 0.25), 0.1);
  const double chain3 = std::pow(c.accept(0, 0.65), 3), sibling = c.accept(1, 0.25);
  EXPECT_GT(chain3, 5 * sibling);
  EXPECT_LT(std::pow(0.65, 3), 1.1 * 0.25) << "by draft probability they were about even";
}

}  // namespace
}  // namespace specd::proposers
