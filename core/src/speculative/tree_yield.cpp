#include "speculative/tree_yield.hpp"

#include <algorithm>

namespace specd::speculative {
namespace {

constexpr double kDecay = 0.98;  // per step that verified trees, at every node count
constexpr double kShown = 0.5;   // decayed trees of a node count for it to count as shown
// Observations the chain figure counts as, for node counts within the depth bound (past it: 1).
// There a tree of n nodes keeps the n likeliest nodes and yields about the chain of n levels
// (llama-160m's EAGLE-3 head, batch 1, static budgets: 2.86 / 3.71 / 4.20 tokens per step for 2 /
// 3 / 4 nodes, the chain curve 2.87 / 3.68 / 4.37), and the chain figure already carries every
// tree's evidence per depth. Counted as one observation, the first step's trees, which a batch of
// one hard prompt rejected together, halved the value of 2 nodes; the concave curve then gave
// every node after the first nothing, and 1-node trees were drafted for the rest of the request.
constexpr double kChainWeightWithinBound = 8.0;

}  // namespace

TreeYield::TreeYield(int32_t n_max)
    : accepted_(static_cast<size_t>(std::max(n_max, 1)) + 1, 0.0),
      trees_(static_cast<size_t>(std::max(n_max, 1)) + 1, 0.0),
      step_accepted_(trees_.size(), 0.0),
      step_trees_(trees_.size(), 0.0) {}

void TreeYield::observe(int32_t nodes, int32_t depth, int32_t accepted) {
  observe_in_step(nodes, depth, accepted);
  end_step();
}

void TreeYield::observe_in_step(int32_t nodes, int32_t depth, int32_t accepted) {
  if (nodes <= 0) return;
  deepest_ = std::max(deepest_, depth);
  const auto n = static_cast<size_t>(std::min<int64_t>(nodes, static_cast<int64_t>(trees_.size()) - 1));
  step_accepted_[n] += std::clamp(accepted, 0, depth);
  step_trees_[n] += 1.0;
  step_pending_ = true;
}

void TreeYield::end_step() {
  if (!step_pending_) return;
  step_pending_ = false;
  for (size_t n = 0; n < trees_.size(); ++n) {
    accepted_[n] *= kDecay;
    trees_[n] *= kDecay;
    if (step_trees_[n] > 0) {  // one observation: the mean of the step's trees of n nodes
      accepted_[n] += step_accepted_[n] / step_trees_[n];
      trees_[n] += 1.0;
    }
    step_accepted_[n] = step_trees_[n] = 0.0;
  }
}

double TreeYield::yield(std::span<const double> accept, int32_t nodes) const {
  const int32_t levels = std::min<int32_t>({nodes, depth_bound(), static_cast<int32_t>(accept.size())});
  double chain = 0, run = 1;
  for (int32_t j = 0; j < levels; ++j) {
    run *= accept[static_cast<size_t>(j)];
    chain += run;
  }
  const auto n = static_cast<size_t>(std::min<int64_t>(nodes, static_cast<int64_t>(trees_.size()) - 1));
  const double w = nodes <= depth_bound() ? kChainWeightWithinBound : 1.0;
  return (accepted_[n] + w * chain) / (trees_[n] + w);
}

void TreeYield::shape(std::span<double> accept) const {
  if (deepest_ <= 0 || accept.empty()) return;  // before the first verified tree: the chain curve
  const size_t count = accept.size();
  curve_.resize(count);
  for (size_t n = 0; n < count; ++n) curve_[n] = yield(accept, static_cast<int32_t>(n) + 1);
  // Past the depth bound, a node count no tree has shown lies on the line between the counts
  // around it that have (the depth's own count counts as shown): 8-node trees that accepted more
  // than 4 levels give nodes 5-7 their share instead of nothing, which the concave curve would
  // otherwise pass on to the 8th as nothing too.
  size_t below = static_cast<size_t>(std::min<int64_t>(depth_bound(), static_cast<int64_t>(count))) - 1;
  for (size_t n = below + 1; n < count; ++n) {
    if (trees_[std::min(n + 1, trees_.size() - 1)] < kShown) continue;
    for (size_t m = below + 1; m < n; ++m)
      curve_[m] =
          curve_[below] + (curve_[n] - curve_[below]) * static_cast<double>(m - below) / static_cast<double>(n - below);
    below = n;
  }
  for (size_t m = below + 1; m < count; ++m) curve_[m] = curve_[below];
  // The curve's increments, each clamped to [0, the one before] (non-increasing: what a node adds
  // that the one before it could not is dropped, never passed on), as continuation
  // probabilities: run_j = Π_{m<=j} accept[m] is node j + 1's increment.
  double before = 0, last_run = 1;
  for (size_t j = 0; j < count; ++j) {
    const double run = std::clamp(curve_[j] - before, 0.0, last_run);
    accept[j] = last_run > 0 ? run / last_run : 0.0;
    before = curve_[j];
    last_run = run;
  }
}

}  // namespace specd::speculative
