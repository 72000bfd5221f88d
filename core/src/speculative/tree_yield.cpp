#include "speculative/tree_yield.hpp"

#include <algorithm>

namespace specd::speculative {
namespace {

constexpr double kDecay = 0.98;  // per verified tree, at every node count

}  // namespace

TreeYield::TreeYield(int32_t n_max)
    : accepted_(static_cast<size_t>(std::max(n_max, 1)) + 1, 0.0),
      trees_(static_cast<size_t>(std::max(n_max, 1)) + 1, 0.0) {}

void TreeYield::observe(int32_t nodes, int32_t depth, int32_t accepted) {
  if (nodes <= 0) return;
  deepest_ = std::max(deepest_, depth);
  for (size_t n = 0; n < trees_.size(); ++n) {
    accepted_[n] *= kDecay;
    trees_[n] *= kDecay;
  }
  const auto n = static_cast<size_t>(std::min<int64_t>(nodes, static_cast<int64_t>(trees_.size()) - 1));
  accepted_[n] += std::clamp(accepted, 0, depth);
  trees_[n] += 1.0;
}

double TreeYield::yield(std::span<const double> accept, int32_t nodes) const {
  const int32_t levels = std::min<int32_t>({nodes, deepest_, static_cast<int32_t>(accept.size())});
  double chain = 0, run = 1;
  for (int32_t j = 0; j < levels; ++j) {
    run *= accept[static_cast<size_t>(j)];
    chain += run;
  }
  const auto n = static_cast<size_t>(std::min<int64_t>(nodes, static_cast<int64_t>(trees_.size()) - 1));
  return (accepted_[n] + chain) / (trees_[n] + 1.0);
}

void TreeYield::shape(std::span<double> accept) const {
  if (deepest_ <= 0 || accept.empty()) return;
  curve_.resize(accept.size());
  for (size_t n = 0; n < accept.size(); ++n) curve_[n] = yield(accept, static_cast<int32_t>(n) + 1);
  // Increments, non-increasing and >= 0, as continuation probabilities: run_j = Π_{m<=j} accept[m]
  // is node j + 1's increment.
  double before = 0, last_run = 1;
  for (size_t j = 0; j < accept.size(); ++j) {
    const double run = std::clamp(curve_[j] - before, 0.0, last_run);
    accept[j] = last_run > 0 ? run / last_run : 0.0;
    before += run;
    last_run = run;
  }
}

}  // namespace specd::speculative
