// TreeYield: what a draft tree of n nodes yields, for the dynamic speculation policy when the
// proposer drafts trees (policy.hpp; docs/speculative.md "Draft trees").
//
// A tree's acceptance evidence is per depth (1 per accepted level, a 0 where its path stopped),
// and the policy values n drafts at 1 + Σ_{j<n} Π_{m<=j} accept[m]: read at n nodes, that values a
// tree of n nodes as a chain n deep. No tree is deeper than its proposer's depth setting, so past
// it the chain curve promised tokens no tree gives. On llama-160m an EAGLE-3 tree of 8 nodes
// (depth 4) was predicted 5.3 accepted drafts per step and gave 3.5, and dynamic speculation
// drafted all 8 nodes every step: 1.75x plain, where a chain of 4 ran 2.2x.
//
// TreeYield keeps, from the verified trees:
//  - the depth bound: the proposer's own (ABI 1.9 max_tree_depth), else the deepest tree seen
//    (every tree's yield is bounded by its levels). The deepest tree seen alone held EAGLE-3
//    trees (depth 4, top_k 2) on llama-160m to 2-3 nodes under dynamic k: the first plans drafted
//    1-2-node trees, often siblings at depth 1, and deeper nodes were worth nothing from then on;
//  - per node count n, decayed sums of the drafts accepted in trees of n nodes, one observation
//    per step (the mean of its trees of n nodes: a batch's rows are not independent evidence,
//    acceptance_model.hpp; about the last 50 steps count).
// shape() turns a row's per-depth estimates into a yield curve over node counts: the chain curve
// read at min(n, bound) levels, blended with what trees of n nodes accepted (the chain figure
// counts as 8 observations within the bound, where a tree of n nodes yields about a chain of n,
// and as one past it), so siblings are worth only what observed trees showed; past the
// bound a count no tree has shown lies on the line between the shown counts around it
// (flat after the last). The curve's increments are clamped non-negative and non-increasing
// (each node adds at most what the one before added: the policy's search takes the largest
// increments first) and written back as continuation probabilities, so the usual formula reads
// it: E(n) = 1 + the clamped curve at n. Before the first verified
// tree the chain curve stands (the first trees are then drafted at full size, and measured).
// Exploring upward (policy.hpp) tries n + 1 where the curve is flat, so a node count the trees
// have not shown gets measured. Not thread-safe: the engine's step thread owns it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace specd::speculative {

class TreeYield {
 public:
  explicit TreeYield(int32_t n_max);

  // A verified tree of `nodes` nodes, `depth` levels deep, whose accepted path had `accepted`
  // drafts: a step of its own (observe), or one row of a step that end_step() closes.
  void observe(int32_t nodes, int32_t depth, int32_t accepted);
  void observe_in_step(int32_t nodes, int32_t depth, int32_t accepted);
  void end_step();
  // accept: a row's per-depth estimates (AcceptanceModel::predict), rewritten as the tree curve.
  void shape(std::span<double> accept) const;

  // The proposer's deepest tree (0: unknown, the deepest verified tree bounds instead).
  void set_max_depth(int32_t depth) { max_depth_ = std::max(depth, 0); }
  int32_t deepest() const { return deepest_; }
  // The levels a tree may have: the proposer's depth, else the deepest verified (0: no bound yet).
  int32_t depth_bound() const { return max_depth_ > 0 ? max_depth_ : deepest_; }
  // The blended yield of n nodes for these estimates, before the curve is made concave.
  double yield(std::span<const double> accept, int32_t nodes) const;

 private:
  int32_t deepest_ = 0;
  int32_t max_depth_ = 0;
  std::vector<double> accepted_;                    // [n_max + 1] decayed sums of accepted drafts, per node count
  std::vector<double> trees_;                       // [n_max + 1] decayed counts of trees
  std::vector<double> step_accepted_, step_trees_;  // the current step's trees, per node count
  bool step_pending_ = false;
  mutable std::vector<double> curve_;
};

}  // namespace specd::speculative
