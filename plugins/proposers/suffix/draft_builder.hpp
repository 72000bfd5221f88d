// Drafts from continuations (suffix decoding): the tokens that followed each earlier occurrence
// of the matched suffix go into a trie with counts; a node's probability is the share of the
// continuations that pass through it (Arctic Inference's estimate). A chain follows the most
// frequent child while that share stays at least min_prob; a tree adds nodes best first (highest
// share; ties: the continuation added first, which the proposer makes the most recent) up to a
// node budget, each at least min_prob. Siblings come in
// the order they were added, which is their share's order, so a verifier tries the likelier one
// first.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace specd::suffix {

struct Draft {
  std::vector<int32_t> tokens;
  std::vector<int32_t> parents;  // tree: each node's parent (-1: a root); chain: i - 1
  double expected = 0;           // Σ of the nodes' shares: the expected accepted length under the estimate
  // Chain: per token, the share of the continuations through its parent that go on with it,
  // counting one more that does not (n agreeing continuations give n / (n + 1)): the proposer's
  // confidence that the token is accepted given the ones before it were (ABI 1.6).
  std::vector<float> confidence;
};

class DraftBuilder {
 public:
  // Starts a new trie.
  void clear();
  // Adds one continuation (its first max_len tokens).
  void add(std::span<const int32_t> continuation, int32_t max_len);
  int32_t num_continuations() const { return total_; }
  // The chain (tree = false, at most max_len tokens) or tree (at most budget nodes, depth at most
  // max_len) of nodes whose share is at least min_prob.
  Draft build(bool tree, int32_t max_len, int32_t budget, double min_prob) const;

 private:
  struct Node {
    int32_t token;
    int32_t count;
    int32_t depth;
    std::vector<int32_t> children;  // node indices
  };
  std::vector<Node> nodes_;  // nodes_[0] is the root (no token)
  int32_t total_ = 0;
};

}  // namespace specd::suffix
