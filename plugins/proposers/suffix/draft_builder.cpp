#include "draft_builder.hpp"

#include <algorithm>

namespace specd::suffix {

void DraftBuilder::clear() {
  nodes_.assign(1, Node{-1, 0, 0, {}});
  total_ = 0;
}

void DraftBuilder::add(std::span<const int32_t> continuation, int32_t max_len) {
  if (nodes_.empty()) clear();
  ++total_;
  ++nodes_[0].count;
  int32_t at = 0;
  const auto n = std::min<size_t>(continuation.size(), static_cast<size_t>(std::max(max_len, 0)));
  for (size_t i = 0; i < n; ++i) {
    int32_t next = -1;
    for (int32_t c : nodes_[static_cast<size_t>(at)].children)
      if (nodes_[static_cast<size_t>(c)].token == continuation[i]) next = c;
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.push_back(Node{continuation[i], 0, nodes_[static_cast<size_t>(at)].depth + 1, {}});
      nodes_[static_cast<size_t>(at)].children.push_back(next);
    }
    ++nodes_[static_cast<size_t>(next)].count;
    at = next;
  }
}

Draft DraftBuilder::build(bool tree, int32_t max_len, int32_t budget, double min_prob) const {
  Draft d;
  if (total_ == 0 || nodes_.empty()) return d;
  const double total = total_;
  auto share = [&](int32_t node) { return nodes_[static_cast<size_t>(node)].count / total; };
  if (!tree) {
    int32_t at = 0;
    while (static_cast<int32_t>(d.tokens.size()) < max_len) {
      int32_t best = -1;
      for (int32_t c : nodes_[static_cast<size_t>(at)].children)
        if (best < 0 || nodes_[static_cast<size_t>(c)].count > nodes_[static_cast<size_t>(best)].count) best = c;
      if (best < 0 || share(best) < min_prob) break;
      d.parents.push_back(static_cast<int32_t>(d.tokens.size()) - 1);
      d.tokens.push_back(nodes_[static_cast<size_t>(best)].token);
      d.confidence.push_back(static_cast<float>(nodes_[static_cast<size_t>(best)].count) /
                             static_cast<float>(nodes_[static_cast<size_t>(at)].count + 1));
      d.expected += share(best);
      at = best;
    }
    return d;
  }
  // Best first: the frontier holds (trie node, its draft parent); a node's children join the
  // frontier once it is taken, so a parent is always drafted before its children.
  struct Open {
    int32_t node, parent;
  };
  std::vector<Open> frontier;
  for (int32_t c : nodes_[0].children) frontier.push_back({c, -1});
  while (static_cast<int32_t>(d.tokens.size()) < budget && !frontier.empty()) {
    size_t pick = 0;
    for (size_t i = 1; i < frontier.size(); ++i)
      if (nodes_[static_cast<size_t>(frontier[i].node)].count > nodes_[static_cast<size_t>(frontier[pick].node)].count)
        pick = i;
    const Open o = frontier[pick];
    frontier.erase(frontier.begin() + static_cast<std::ptrdiff_t>(pick));
    const Node& node = nodes_[static_cast<size_t>(o.node)];
    if (share(o.node) < min_prob || node.depth > max_len) continue;
    const auto index = static_cast<int32_t>(d.tokens.size());
    d.tokens.push_back(node.token);
    d.parents.push_back(o.parent);
    d.expected += share(o.node);
    for (int32_t c : node.children) frontier.push_back({c, index});
  }
  return d;
}

}  // namespace specd::suffix
