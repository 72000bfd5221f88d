// Tree drafting for the model-backed proposers (draft_model's `tree:` setting), in the EAGLE-2
// style: the draft model expands a dynamic tree level by level and the most likely nodes become
// the draft.
//
//  - Level 1: the catch-up forward's last row gives the top_k tokens after the sequence: the
//    roots (score = log p).
//  - Level d + 1: the top_k nodes of level d with the highest score (the log probability of
//    their whole path) are fed in ONE forward with tree attention (model services
//    tree_sizes / tree_parents: each attends to the prefix and its own ancestors); each gives
//    its top_k children, scored by their path's log probability.
//  - Scores are EAGLE-2's path log probabilities until the proposer's TreeCalibration
//    (tree_calibration.hpp) has seen verified trees; then each node counts with its learned
//    chance of acceptance (by sibling rank and draft probability) instead of its probability.
//  - After `depth` levels the node budget (the propose's max_draft) keeps the highest-scoring
//    nodes. A sequence whose budget is b stops expanding after level b: a node deeper than b
//    needs more than b nodes with its ancestors, so the cost of a call follows min(b, depth).
//    A child never scores above its parent, so the kept set holds every kept node's ancestors;
//    it goes out in (depth, creation) order, parents before children.
// Children are deterministic top-k choices, so no draft probabilities go with them: the
// verifier treats them as one-hot, which keeps rejection sampling lossless.
//
// KV: the draft model's cache holds the sequence's tokens then every node fed (in feed order),
// as the tree region. The proposer's on_accept rolls it back to the sequence's tokens; the next
// propose catches up on the accepted tokens and the target's one.
//
// With a hidden width (an EAGLE-3 head, plugins/proposers/eagle3/) every fed row also takes an
// input state: the catch-up rows their Seq::catch_up_hidden (the target's fused states, of
// catch_up_width), a root the catch-up's last hidden output, any other node its parent's hidden
// output. A chain is a tree with top_k 1.
#pragma once

#include <specd/sdk/model_client.hpp>
#include <specd/sdk/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

#include "tree_calibration.hpp"

namespace specd::proposers {

struct TreeShape {
  int32_t depth = 0;      // levels of nodes (0: chains, no tree)
  int32_t top_k = 0;      // children per expanded node, and nodes expanded per level
  int32_t max_nodes = 0;  // cap on the node budget (0: the propose's max_draft alone)
};

inline TreeShape read_tree_shape(sdk::Params& params) {
  TreeShape t;
  if (!params.section("tree")) return t;
  t.depth = static_cast<int32_t>(params.get_int("tree.depth", 4, 1, 64));
  t.top_k = static_cast<int32_t>(params.get_int("tree.top_k", 2, 1, 16));
  t.max_nodes = static_cast<int32_t>(params.get_int("tree.max_nodes", 0, 0, 1024));
  return t;
}

// The drafting of one propose call, for every sequence at once.
class TreeDrafter {
 public:
  struct Seq {
    uint64_t id;
    std::span<const int32_t> catch_up;            // tokens the draft has not seen, the sequence's last one included
    int32_t budget;                               // nodes to keep
    std::span<const float> catch_up_hidden = {};  // hidden mode: [catch_up.size(), catch_up_width]
  };
  struct HiddenMode {
    int32_t hidden = 0;          // the model's hidden size; 0: no input states (a causal LM)
    int32_t catch_up_width = 0;  // width of the catch-up rows' states
  };
  struct Node {
    int32_t token;
    int32_t parent;  // node index, -1 for a root
    int32_t depth;   // 1 for a root
    float score;     // log probability of the path
    int32_t fed;     // index in the draft's tree region once fed, else -1
    int32_t in;      // hidden mode: its input state, a row of outs_ (the parent's output)
    int32_t out;     // hidden mode: its output state once fed, a row of outs_, else -1
    int32_t rank;    // among its siblings (0: the draft's first choice)
    float prob;      // the draft's probability of it given its parent
  };

  TreeDrafter(sdk::ModelClient& client, specd_model* model, int32_t vocab, const TreeShape& shape)
      : client_(client), model_(model), vocab_(vocab), shape_(shape) {}
  TreeDrafter(sdk::ModelClient& client, specd_model* model, int32_t vocab, const TreeShape& shape, HiddenMode hidden)
      : client_(client), model_(model), vocab_(vocab), shape_(shape), hidden_(hidden) {}

  // Feeds every sequence's catch-up rows (with their input states in hidden mode) into the
  // model's KV and nothing else: no logits (ABI 1.7), no drafts. A later draft() catches up from
  // there. (eagle3 feeds the prompt in on_prefill, so a first propose is not the prompt's.)
  void feed(std::span<const Seq> seqs) { catch_up(seqs, /*logits=*/false); }

  // Node values learned from verified trees (nullptr: the draft's probabilities); it must outlive
  // draft().
  void set_calibration(const TreeCalibration* calibration) { calibration_ = calibration; }

  // Drafts every sequence's tree; nodes(i) / parents(i) / tokens(i) give the result.
  void draft(std::span<const Seq> seqs) {
    nodes_.assign(seqs.size(), {});
    regions_.assign(seqs.size(), {});
    outs_.assign(seqs.size(), {});
    // Level 1: the catch-up rows.
    catch_up(seqs, /*logits=*/true);
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (hidden_.hidden > 0) keep_output(i, i);  // outs_[i] row 0: the roots' input
      expand(i, -1, row_logits(i), 0.0f, 1);
    }
    // Levels 2..depth: the best top_k nodes of the last level, fed as a tree.
    for (int32_t d = 1; d < shape_.depth; ++d) {
      begin();
      std::vector<std::vector<int32_t>> fed(seqs.size());
      for (size_t i = 0; i < seqs.size(); ++i) {
        if (seqs[i].budget <= d) continue;  // a node at depth d + 1 could not be kept
        fed[i] = best_of_level(nodes_[i], d);
        if (fed[i].empty()) continue;
        std::vector<int32_t>& region = regions_[i];
        for (int32_t n : fed[i]) {
          Node& node = nodes_[i][static_cast<size_t>(n)];
          node.fed = static_cast<int32_t>(region.size());
          region.push_back(node.parent < 0 ? -1 : nodes_[i][static_cast<size_t>(node.parent)].fed);
          tokens_scratch_.push_back(node.token);
          if (hidden_.hidden > 0) {
            const float* in = outs_[i].data() + static_cast<size_t>(node.in) * static_cast<size_t>(hidden_.hidden);
            inputs_.insert(inputs_.end(), in, in + hidden_.hidden);
          }
        }
        add_row(seqs[i].id, tokens_scratch_, region);
        tokens_scratch_.clear();
      }
      if (seq_ids_.empty()) break;
      forward(/*all_logits=*/true, hidden_.hidden);
      size_t row = 0;
      for (size_t i = 0; i < seqs.size(); ++i)
        for (int32_t n : fed[i]) {
          if (hidden_.hidden > 0) nodes_[i][static_cast<size_t>(n)].out = keep_output(i, row);
          const Node node = nodes_[i][static_cast<size_t>(n)];
          expand(i, n, {logits_.data() + row++ * static_cast<size_t>(vocab_), static_cast<size_t>(vocab_)}, node.score,
                 node.depth + 1);
        }
    }
    for (size_t i = 0; i < seqs.size(); ++i) keep_best(i, seqs[i].budget);
  }

  std::span<const int32_t> tokens(size_t i) const { return out_tokens_[i]; }
  std::span<const int32_t> parents(size_t i) const { return out_parents_[i]; }
  // The kept nodes as TreeCalibration::observe takes them (parents as in parents(i)).
  std::span<const TreeCalibration::Node> kept(size_t i) const { return out_kept_[i]; }

 private:
  // One forward of the catch-up rows; with logits, each sequence's last row's.
  void catch_up(std::span<const Seq> seqs, bool logits) {
    begin();
    for (const Seq& s : seqs) {
      add_row(s.id, s.catch_up, {});
      inputs_.insert(inputs_.end(), s.catch_up_hidden.begin(), s.catch_up_hidden.end());
    }
    forward(/*all_logits=*/false, hidden_.catch_up_width, logits);
  }

  // The top_k children of `parent` from its logits row, scored base + log p.
  void expand(size_t i, int32_t parent, std::span<const float> logits, float base, int32_t depth) {
    const float max = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (const float l : logits) sum += std::exp(static_cast<double>(l - max));
    const float log_z = max + static_cast<float>(std::log(sum));
    order_.resize(logits.size());
    std::iota(order_.begin(), order_.end(), 0);
    const auto k = std::min<size_t>(static_cast<size_t>(shape_.top_k), order_.size());
    std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(k), order_.end(),
                      [&](int32_t a, int32_t b) {
                        return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
                               (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
                      });
    const int32_t in = parent < 0 ? 0 : nodes_[i][static_cast<size_t>(parent)].out;
    for (size_t c = 0; c < k; ++c) {
      const int32_t t = order_[c];
      const float log_p = logits[static_cast<size_t>(t)] - log_z;
      const auto rank = static_cast<int32_t>(c);
      const float p = std::exp(log_p);
      const float value = calibration_ == nullptr
                              ? log_p
                              : static_cast<float>(std::log(std::max(calibration_->accept(rank, p), 1e-30)));
      nodes_[i].push_back({t, parent, depth, base + value, -1, in, -1, rank, p});
    }
  }

  // Indices of the top_k nodes of depth d by score (ties: the earlier node).
  std::vector<int32_t> best_of_level(const std::vector<Node>& nodes, int32_t d) const {
    std::vector<int32_t> level;
    for (size_t n = 0; n < nodes.size(); ++n)
      if (nodes[n].depth == d) level.push_back(static_cast<int32_t>(n));
    std::stable_sort(level.begin(), level.end(), [&](int32_t a, int32_t b) {
      return nodes[static_cast<size_t>(a)].score > nodes[static_cast<size_t>(b)].score;
    });
    if (level.size() > static_cast<size_t>(shape_.top_k)) level.resize(static_cast<size_t>(shape_.top_k));
    return level;
  }

  // The `budget` best nodes, in (depth, creation) order with parents remapped.
  void keep_best(size_t i, int32_t budget) {
    if (shape_.max_nodes > 0) budget = std::min(budget, shape_.max_nodes);
    const std::vector<Node>& nodes = nodes_[i];
    std::vector<int32_t> order(nodes.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      const Node &x = nodes[static_cast<size_t>(a)], &y = nodes[static_cast<size_t>(b)];
      return x.score > y.score || (x.score == y.score && x.depth < y.depth);
    });
    order.resize(std::min(order.size(), static_cast<size_t>(std::max(budget, 0))));
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      const Node &x = nodes[static_cast<size_t>(a)], &y = nodes[static_cast<size_t>(b)];
      return x.depth < y.depth || (x.depth == y.depth && a < b);
    });
    std::vector<int32_t> out_index(nodes.size(), -1);
    out_tokens_.resize(nodes_.size());
    out_parents_.resize(nodes_.size());
    out_kept_.resize(nodes_.size());
    out_tokens_[i].clear();
    out_parents_[i].clear();
    out_kept_[i].clear();
    for (int32_t n : order) {
      const Node& node = nodes[static_cast<size_t>(n)];
      const int32_t parent = node.parent < 0 ? -1 : out_index[static_cast<size_t>(node.parent)];
      if (node.parent >= 0 && parent < 0) continue;  // its parent fell out (cannot happen: scores fall)
      out_index[static_cast<size_t>(n)] = static_cast<int32_t>(out_tokens_[i].size());
      out_tokens_[i].push_back(node.token);
      out_parents_[i].push_back(parent);
      out_kept_[i].push_back({node.token, parent, node.rank, node.prob});
    }
  }

  // Appends hidden output row `row` of the last forward to sequence i's states; returns its index.
  int32_t keep_output(size_t i, size_t row) {
    const auto H = static_cast<size_t>(hidden_.hidden);
    outs_[i].insert(outs_[i].end(), hidden_out_.data() + row * H, hidden_out_.data() + (row + 1) * H);
    return static_cast<int32_t>(outs_[i].size() / H) - 1;
  }

  void begin() {
    inputs_.clear();
    seq_ids_.clear();
    num_new_.clear();
    tokens_.clear();
    tree_sizes_.clear();
    tree_parents_.clear();
  }
  void add_row(uint64_t id, std::span<const int32_t> tokens, std::span<const int32_t> region) {
    seq_ids_.push_back(id);
    num_new_.push_back(static_cast<int32_t>(tokens.size()));
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    tree_sizes_.push_back(static_cast<int32_t>(region.size()));
    tree_parents_.insert(tree_parents_.end(), region.begin(), region.end());
  }
  // input_width: the width of inputs_' rows in hidden mode; logits false: the KV (and hidden
  // states) only.
  void forward(bool all_logits, int32_t input_width = 0, bool logits = true) {
    const size_t rows = all_logits ? tokens_.size() : seq_ids_.size();
    logits_.resize(logits ? rows * static_cast<size_t>(vocab_) : 0);
    specd_forward_batch fb{};
    fb.struct_size = sizeof(fb);
    fb.num_seqs = static_cast<int32_t>(seq_ids_.size());
    fb.seq_ids = seq_ids_.data();
    fb.num_new = num_new_.data();
    fb.tokens = tokens_.data();
    fb.all_logits = all_logits ? 1 : 0;
    fb.logits = logits ? logits_.data() : nullptr;
    fb.tree_sizes = tree_sizes_.data();
    fb.tree_parents = tree_parents_.data();
    if (hidden_.hidden > 0) {
      hidden_out_.resize(rows * static_cast<size_t>(hidden_.hidden));
      fb.input_hidden = inputs_.data();
      fb.input_hidden_width = input_width;
      fb.hidden = hidden_out_.data();
    }
    client_.forward(model_, fb);
  }
  std::span<const float> row_logits(size_t r) const {
    return {logits_.data() + r * static_cast<size_t>(vocab_), static_cast<size_t>(vocab_)};
  }

  sdk::ModelClient& client_;
  specd_model* model_;
  int32_t vocab_;
  TreeShape shape_;
  HiddenMode hidden_;
  std::vector<std::vector<Node>> nodes_;
  std::vector<std::vector<float>> outs_;  // hidden mode: per sequence, output states [rows, hidden]
  std::vector<float> inputs_, hidden_out_;
  std::vector<std::vector<int32_t>> regions_;  // per sequence: parents of the fed nodes (region indices)
  std::vector<std::vector<int32_t>> out_tokens_, out_parents_;
  std::vector<std::vector<TreeCalibration::Node>> out_kept_;
  const TreeCalibration* calibration_ = nullptr;
  std::vector<uint64_t> seq_ids_;
  std::vector<int32_t> num_new_, tokens_, tree_sizes_, tree_parents_, tokens_scratch_, order_;
  std::vector<float> logits_;
};

}  // namespace specd::proposers
