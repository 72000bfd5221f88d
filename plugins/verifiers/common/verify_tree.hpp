// Draft trees on the CPU (ABI 1.3, specd_verify_batch.draft_parents): the same Rules as chains,
// applied node by node. Node j is tested through a view whose position 0 is the node: its
// parent's target row (row parent + 1; row 0 for a root), its own draft row and token, and a
// random counter of (accepted so far) + (sibling rank << 16). For a chain the rank is always 0,
// so a chain sent as a tree verifies exactly as a chain does, uniforms included.
//
// Two ways to walk a tree, chosen by the Rule:
//  * kTreeResidual (rejection): multi-candidate rejection sampling (SpecInfer; Miao et al.
//    2024). At each accepted node the children are tried in node order against the current
//    target distribution p; a rejected child x (drawn from q) turns p into
//    normalize(max(0, p - q)) for the next sibling (q one-hot at x without draft
//    probabilities). When every child is rejected, the token is the rule's recover() from the
//    last p and q, as for a chain; at a leaf, bonus(). Lossless when siblings are independent
//    draws from their q, or deterministic choices (one-hot q).
//  * otherwise (greedy, typical acceptance): each node passes or fails on its own; the
//    accepted path is the deepest node whose ancestors all pass (ties: the lowest node index),
//    then recover() at its row when it has children, bonus() when it is a leaf.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "verify_cpu.hpp"

namespace specd::verifiers {

// Sibling ranks are packed above the depth in the random counter.
inline constexpr uint32_t kSiblingShift = 16;

inline const int32_t* tree_parents(const specd_verify_batch& b) {
  if (b.struct_size < offsetof(specd_verify_batch, out_nodes) + sizeof(int32_t*)) return nullptr;
  return b.draft_parents;
}

// Sequence i's parents: each in [-1, j); the output buffer for the accepted nodes is present.
inline Status check_tree(const specd_verify_batch& b, int32_t i) {
  if (b.out_nodes == nullptr) return invalid("verify batch: draft_parents given but out_nodes is null");
  const int32_t* parents = b.draft_parents + static_cast<int64_t>(i) * b.k_max;
  for (int32_t j = 0; j < b.num_drafted[i]; ++j)
    if (parents[j] < -1 || parents[j] >= j)
      return invalid("sequence ", i, ": tree node ", j, " has parent ", parents[j], ", outside [-1, ", j, ")");
  return {};
}

// Node `node` (or none: -1) seen at position 0, against target row `target` with random
// counter `counter`.
inline SequenceView node_view(const SequenceView& s, const float* target, int32_t node, uint32_t counter) {
  SequenceView v = s;
  v.num_drafted = node >= 0 ? 1 : 0;
  v.target = target;
  if (node >= 0) {
    v.draft = s.draft != nullptr ? s.draft + static_cast<int64_t>(node) * s.vocab : nullptr;
    v.drafts = s.drafts + node;
  }
  v.counter_base = counter;
  return v;
}

// p <- normalize(max(0, p - q)) for rejected node `node` (q its draft row, else one-hot at its
// token), written to `out`. Returns false when nothing is left (p == q up to rounding): the
// caller keeps p.
inline bool residual(const SequenceView& s, const float* p, int32_t node, float* out) {
  const float* q = s.draft != nullptr ? s.draft + static_cast<int64_t>(node) * s.vocab : nullptr;
  const int32_t x = s.drafts[node];
  double total = 0.0;
  for (int64_t t = 0; t < s.vocab; ++t) {
    const float d = p[t] - (q != nullptr ? q[t] : (t == x ? 1.0f : 0.0f));
    out[t] = d > 0.0f ? d : 0.0f;
    total += out[t];
  }
  if (!(total > 0.0)) return false;
  const auto inv = static_cast<float>(1.0 / total);
  for (int64_t t = 0; t < s.vocab; ++t) out[t] *= inv;
  return true;
}

// The accepted path of sequence s (nodes, root first) and the emitted token, or -1 when no
// token could be drawn. children: node lists per parent (index parent + 1).
template <class Rule>
int32_t walk_tree(const Rule& rule, const SequenceView& s, const int32_t* parents,
                  const std::vector<std::vector<int32_t>>& children, CpuOps& ops, std::vector<int32_t>& path,
                  CpuScratch& scratch) {
  path.clear();
  int32_t at = -1;  // the last accepted node (-1: the last committed token)
  if constexpr (Rule::kTreeResidual) {
    for (;;) {
      const auto depth = static_cast<uint32_t>(path.size());
      const float* p = s.target_row(at + 1);
      const std::vector<int32_t>& kids = children[static_cast<size_t>(at + 1)];
      if (kids.empty()) {
        Rule r = rule;
        return r.bonus(node_view(s, p, -1, depth), 0, ops);
      }
      bool descended = false;
      for (size_t i = 0; i < kids.size() && !descended; ++i) {
        Rule r = rule;
        if (r.accept(node_view(s, p, kids[i], depth + (static_cast<uint32_t>(i) << kSiblingShift)), 0, ops)) {
          path.push_back(kids[i]);
          at = kids[i];
          descended = true;
        } else if (i + 1 == kids.size()) {
          return r.recover(node_view(s, p, kids[i], depth), 0, ops);
        } else {
          std::vector<float>& next = scratch.residual[i % 2];
          next.resize(static_cast<size_t>(s.vocab));
          if (residual(s, p, kids[i], next.data())) p = next.data();
        }
      }
    }
  } else {
    // Every node's own test, then the deepest node whose ancestors all pass.
    const int32_t n = s.num_drafted;
    std::vector<int32_t>& depth = scratch.depth;
    depth.assign(static_cast<size_t>(n), 0);
    int32_t best = -1, best_depth = 0;
    for (int32_t j = 0; j < n; ++j) {
      const int32_t parent = parents[j];
      if (parent >= 0 && depth[static_cast<size_t>(parent)] == 0) continue;  // an ancestor failed
      const int32_t d = parent >= 0 ? depth[static_cast<size_t>(parent)] : 0;
      Rule r = rule;
      if (!r.accept(node_view(s, s.target_row(parent + 1), j, static_cast<uint32_t>(d)), 0, ops)) continue;
      depth[static_cast<size_t>(j)] = d + 1;
      if (d + 1 > best_depth) best = j, best_depth = d + 1;
    }
    for (int32_t j = best; j >= 0; j = parents[j]) path.insert(path.begin(), j);
    at = best;
    const std::vector<int32_t>& kids = children[static_cast<size_t>(at + 1)];
    Rule r = rule;
    const SequenceView v =
        node_view(s, s.target_row(at + 1), kids.empty() ? -1 : kids.front(), static_cast<uint32_t>(path.size()));
    return kids.empty() ? r.bonus(v, 0, ops) : r.recover(v, 0, ops);
  }
}

// The tree counterpart of verify_on_cpu (verify_cpu.hpp), for a batch with draft_parents.
template <class Rule>
Status verify_tree_on_cpu(const specd_verify_batch& b, const Uses& uses, const Rule& rule, CpuScratch& scratch) {
  if (Status st = check_batch(b, uses); !st.ok()) return st;
  const int64_t width = static_cast<int64_t>(b.k_max) + 1;
  CpuOps ops{&scratch};
  std::vector<std::vector<int32_t>>& children = scratch.children;
  std::vector<int32_t>& path = scratch.path;
  for (int32_t i = 0; i < b.num_seqs; ++i) {
    if (Status st = check_sequence(b, i, uses, i); !st.ok()) return st;
    if (Status st = check_tree(b, i); !st.ok()) return st;
    const SequenceView s = sequence_view(b, i, uses);
    const int32_t* parents = b.draft_parents + static_cast<int64_t>(i) * b.k_max;
    children.resize(static_cast<size_t>(s.num_drafted) + 1);
    for (auto& c : children) c.clear();
    for (int32_t j = 0; j < s.num_drafted; ++j) children[static_cast<size_t>(parents[j] + 1)].push_back(j);
    const int32_t emitted = walk_tree(rule, s, parents, children, ops, path, scratch);
    const auto accepted = static_cast<int32_t>(path.size());
    if (emitted < 0)
      return {SPECD_ERR_INTERNAL, "sequence " + std::to_string(i) + ", depth " + std::to_string(accepted) +
                                      ": no token could be drawn (empty distribution)"};
    int32_t* out = b.out_tokens + i * width;
    int32_t* nodes = b.out_nodes + static_cast<int64_t>(i) * b.k_max;
    for (int32_t d = 0; d < accepted; ++d) out[d] = s.drafts[path[static_cast<size_t>(d)]];
    out[accepted] = emitted;
    for (int64_t pos = accepted + 1; pos < width; ++pos) out[pos] = -1;
    for (int32_t d = 0; d < b.k_max; ++d) nodes[d] = d < accepted ? path[static_cast<size_t>(d)] : -1;
    b.num_accepted[i] = accepted;
  }
  return {};
}

}  // namespace specd::verifiers
