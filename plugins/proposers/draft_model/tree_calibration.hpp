// TreeCalibration: what a draft tree's node is worth to the verifier, learned from the trees it
// verified, for the tree drafter's choice of nodes (draft_tree.hpp).
//
// EAGLE-2 ranks nodes by the draft's probability of their whole path, a stand-in for the chance
// that the verifier accepts them. The draft's probabilities are not that chance: at temperature 0
// a node is accepted when it is the target's argmax, which a confident draft's first choice is
// far more often than its probability says and its second choice far less. On llama-160m with
// its EAGLE-3 head (demo prompt, depth 4, top_k 2) a tree of 4 nodes gave 4.20 tokens per step
// where the chain of 4 gave 4.50 (its 4th node was a sibling where the chain's 4th level would
// have been accepted), and a tree of 8 gave 4.20 too: no sibling was ever accepted.
//
// So each node's value is a learned acceptance estimate: per sibling rank (the draft's first,
// second, third-or-later choice under its parent) and draft-probability bucket (tenths), the
// decayed counts of such nodes tried by the verifier and accepted, around the draft probability
// itself as a prior (kPrior pseudo-observations). Before any evidence it is the draft
// probability, i.e. EAGLE-2's ranking. A node's score is the sum of the logs of its path's
// estimates, so a child never scores above its parent and a budget's best nodes form a tree.
//
// observe() takes a verified tree and the accepted path (on_accept's emitted tokens): siblings
// are tried in node order, so at each accepted node its children up to the accepted one were
// tried (the last accepted), later ones were not; where the path stopped, every child was tried
// and rejected. Not thread-safe: the proposer's calls come from one thread.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

namespace specd::proposers {

class TreeCalibration {
 public:
  // A drafted node as the verifier saw it: its token, its parent (an earlier node, -1 for a
  // root), its rank among its siblings and the draft's probability of it given its parent.
  struct Node {
    int32_t token;
    int32_t parent;
    int32_t rank;
    float prob;
  };

  static constexpr int32_t kRanks = 3;     // first, second, third or later choice
  static constexpr int32_t kBuckets = 10;  // draft probability in tenths
  static constexpr double kPrior = 4.0;    // pseudo-observations at the draft probability
  static constexpr double kCap = 500.0;    // counts are scaled down past this (recent trees count)

  // The estimated chance that the verifier accepts a node, given its parent was accepted.
  double accept(int32_t rank, double prob) const {
    const Cell& c = cells_[index(rank, prob)];
    const double p = std::clamp(prob, 0.0, 1.0);
    return (c.accepted + kPrior * p) / (c.tried + kPrior);
  }

  // One verified tree: its nodes (parents before children, siblings in the order they were
  // tried) and the accepted drafts' tokens, root first.
  void observe(std::span<const Node> nodes, std::span<const int32_t> accepted) {
    int32_t parent = -1;
    for (size_t depth = 0; depth <= accepted.size(); ++depth) {
      int32_t next = -1;
      for (size_t j = 0; j < nodes.size() && next < 0; ++j) {
        const Node& n = nodes[j];
        if (n.parent != parent) continue;
        const bool hit = depth < accepted.size() && n.token == accepted[depth];
        count(n.rank, n.prob, hit);
        if (hit) next = static_cast<int32_t>(j);
      }
      if (next < 0) return;
      parent = next;
    }
  }

 private:
  struct Cell {
    double tried = 0;
    double accepted = 0;
  };

  static size_t index(int32_t rank, double prob) {
    const auto r = static_cast<size_t>(std::clamp(rank, 0, kRanks - 1));
    const auto b = static_cast<size_t>(std::clamp(static_cast<int32_t>(prob * kBuckets), 0, kBuckets - 1));
    return r * kBuckets + b;
  }

  void count(int32_t rank, double prob, bool hit) {
    Cell& c = cells_[index(rank, prob)];
    c.tried += 1;
    c.accepted += hit ? 1 : 0;
    if (c.tried > kCap) {
      c.accepted *= kCap / c.tried;
      c.tried = kCap;
    }
  }

  std::array<Cell, static_cast<size_t>(kRanks* kBuckets)> cells_{};
};

}  // namespace specd::proposers
