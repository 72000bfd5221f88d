// suffix: suffix decoding (Arctic Inference's method, as vLLM and TensorRT-LLM ship it). Each step
// it finds the longest suffix of the sequence (up to max_depth tokens) that occurred before, in
// the sequence itself (prompt + output) or in the outputs of finished requests (the global cache,
// per tenant unless share_across_requests), and drafts the continuation seen most often after
// it: a chain, or with `tree: true` a tree of the likelier continuations. The draft is at most
// floor((match length * max_spec_factor + max_spec_offset) * a) tokens long, where a is the
// sequence's recent acceptance (an average of accepted / drafted, starting at 1, floored at
// 0.25), and every token's share of the continuations is at least min_token_prob. A chain carries
// each token's confidence (ABI 1.6, draft_builder.hpp); where the host takes confidences (dynamic
// k) it chooses the length itself, so the draft is not scaled by the recent acceptance then.
//
// Observations (/metrics, ABI 1.4 record): lookups, hits, global_hits (the global cache supplied
// the draft), match_length (one per hit), global_cache_tokens (the cache's size after each
// finished request).
//
// Memory: per running sequence its index (token_index.hpp: about 40 to 60 bytes per token); the
// global cache holds at most global_cache_tokens tokens over all tenants (the same cost per
// token). docs/proposers.md has the parameters and the bound.
#include <specd/sdk/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "draft_builder.hpp"
#include "global_cache.hpp"
#include "token_index.hpp"

namespace {

using specd::suffix::DraftBuilder;
using specd::suffix::GlobalCache;
using specd::suffix::TokenIndex;

struct Options {
  int32_t max_depth = 32;
  double max_spec_factor = 1.0;
  double max_spec_offset = 0.0;
  double min_token_prob = 0.1;
  int32_t max_candidates = 64;
  int64_t global_cache_tokens = 262144;
  bool share_across_requests = true;
  bool tree = false;
  bool report_confidence = true;

  static Options read(specd::sdk::Params& p) {
    Options o;
    o.max_depth = static_cast<int32_t>(p.get_int("max_depth", o.max_depth, 1, 64));
    o.max_spec_factor = p.get_float("max_spec_factor", o.max_spec_factor, 0.0, 64.0);
    o.max_spec_offset = p.get_float("max_spec_offset", o.max_spec_offset, -64.0, 64.0);
    o.min_token_prob = p.get_float("min_token_prob", o.min_token_prob, 0.0, 1.0);
    o.max_candidates = static_cast<int32_t>(p.get_int("max_candidates", o.max_candidates, 1, 4096));
    o.global_cache_tokens = p.get_int("global_cache_tokens", o.global_cache_tokens, 0, int64_t{1} << 31);
    o.share_across_requests = p.get_bool("share_across_requests", o.share_across_requests);
    o.tree = p.get_bool("tree", o.tree);
    o.report_confidence = p.get_bool("report_confidence", o.report_confidence);
    return o;
  }
};

struct SequenceState {
  explicit SequenceState(int32_t max_depth) : index(max_depth) {}
  TokenIndex index;
  int64_t indexed = 0;     // tokens [0, indexed) are in the index
  int32_t first = -1;      // first token, to notice a reused id with a different text
  double acceptance = 1;   // recent accepted / drafted
  int32_t last_draft = 0;  // tokens drafted at the last propose
};

class SuffixProposer : public specd::sdk::Proposer {
 public:
  SuffixProposer(specd::sdk::Host host, specd::sdk::Params& params) : host_(host), o_(Options::read(params)) {
    if (o_.global_cache_tokens > 0) global_.emplace(o_.global_cache_tokens, o_.max_depth, o_.share_across_requests);
    host_.log().debug("suffix proposer: max_depth ", o_.max_depth, ", global cache ", o_.global_cache_tokens,
                      " tokens, ", o_.share_across_requests ? "shared" : "per tenant", o_.tree ? ", trees" : "");
  }

  static void validate(specd::sdk::Params& params) { (void)Options::read(params); }

  specd::sdk::ProposerCaps capabilities() const override {
    specd::sdk::ProposerCaps caps;
    caps.keeps_state = true;  // per-sequence indexes (on_release), acceptance (on_accept)
    caps.supports_variable_k = true;
    caps.max_k = o_.tree ? 0 : o_.max_depth;
    caps.drafts_trees = o_.tree;
    caps.max_tree_depth = o_.tree ? o_.max_depth : 0;
    caps.reports_confidence = o_.report_confidence && !o_.tree;
    return caps;
  }

  void propose(specd::sdk::ProposeBatch& batch) override {
    for (int32_t i = 0; i < batch.size(); ++i) {
      const specd::sdk::Sequence seq = batch.seq(i);
      SequenceState& st = state(seq);
      catch_up(st, seq.tokens);
      const int32_t k = batch.max_draft(i);
      st.last_draft = 0;
      if (k <= 0 || seq.tokens.empty()) continue;
      host_.record("lookups", 1);
      const bool host_cuts = batch.takes_confidence();
      const specd::suffix::Draft d = draft(st, seq, k, batch.takes_trees(), host_cuts);
      if (d.tokens.empty()) continue;
      if (o_.tree && batch.takes_trees()) {
        batch.set_tree(i, d.tokens, d.parents);
      } else {
        batch.set_draft(i, d.tokens);
        if (host_cuts) batch.set_confidence(i, d.confidence);
      }
      // Where the host cuts the chain, accepted / drafted no longer measures this draft length.
      if (!host_cuts) st.last_draft = static_cast<int32_t>(d.tokens.size());
    }
  }

  void on_accept(uint64_t seq_id, int32_t num_accepted, std::span<const int32_t>) override {
    auto it = states_.find(seq_id);
    if (it == states_.end() || it->second->last_draft <= 0) return;
    SequenceState& st = *it->second;
    st.acceptance = 0.7 * st.acceptance + 0.3 * (static_cast<double>(num_accepted) / st.last_draft);
  }

  void on_finish(const specd::sdk::Sequence& seq) override {
    if (!global_) return;
    const auto prompt =
        static_cast<size_t>(std::clamp<int64_t>(seq.num_prompt, 0, static_cast<int64_t>(seq.tokens.size())));
    global_->add(seq.tenant, seq.tokens.subspan(prompt));
    host_.record("global_cache_tokens", static_cast<double>(global_->tokens()));
  }

  void on_release(uint64_t seq_id) override { states_.erase(seq_id); }

 private:
  SequenceState& state(const specd::sdk::Sequence& seq) {
    std::unique_ptr<SequenceState>& st = states_[seq.id];
    const bool stale = st != nullptr && (static_cast<int64_t>(seq.tokens.size()) < st->indexed ||
                                         (!seq.tokens.empty() && st->first != seq.tokens[0]));
    if (st == nullptr || stale) st = std::make_unique<SequenceState>(o_.max_depth);
    return *st;
  }

  static void catch_up(SequenceState& st, std::span<const int32_t> tokens) {
    if (tokens.empty()) return;
    st.first = tokens[0];
    const auto len = static_cast<int64_t>(tokens.size());
    if (st.indexed < len) st.index.append(tokens.subspan(static_cast<size_t>(st.indexed)));
    st.indexed = len;
  }

  // The continuation at `start` of `index` (up to max_len tokens, to a separator or the end).
  void add_continuation(const TokenIndex& index, int64_t start, int32_t max_len) {
    cont_.clear();
    for (int64_t p = start; p < index.end() && static_cast<int32_t>(cont_.size()) < max_len; ++p) {
      if (index.at(p) == specd::suffix::kSeparator) break;
      cont_.push_back(index.at(p));
    }
    builder_.add(cont_, max_len);
  }

  specd::suffix::Draft draft(SequenceState& st, const specd::sdk::Sequence& seq, int32_t k, bool trees,
                             bool host_cuts) {
    const std::span<const int32_t> context =
        seq.tokens.last(std::min(seq.tokens.size(), static_cast<size_t>(o_.max_depth)));
    const int32_t own = st.index.find(context, o_.max_candidates, own_starts_);
    const TokenIndex* global = global_ ? global_->index_for(seq.tenant) : nullptr;
    const int32_t shared = global != nullptr ? global->find(context, o_.max_candidates, global_starts_) : 0;
    const int32_t match = std::max(own, shared);
    if (match == 0) return {};
    const double scale = host_cuts ? 1.0 : std::clamp(st.acceptance, 0.25, 1.0);
    const double allowed = std::floor((match * o_.max_spec_factor + o_.max_spec_offset) * scale);
    const bool tree = o_.tree && trees;  // a tree: k is a node budget, max_len its depth
    const int32_t max_len =
        static_cast<int32_t>(std::clamp<double>(allowed, 0, tree ? o_.max_depth : std::min(k, o_.max_depth)));
    if (max_len < 1) return {};
    builder_.clear();
    if (own == match)
      for (int64_t s : own_starts_) add_continuation(st.index, s, max_len);
    if (shared == match)
      for (int64_t s : global_starts_) add_continuation(*global, s, max_len);
    specd::suffix::Draft d = builder_.build(tree, max_len, k, o_.min_token_prob);
    if (!d.tokens.empty()) {
      host_.record("hits", 1);
      host_.record("match_length", match);
      if (shared == match) host_.record("global_hits", 1);
    }
    return d;
  }

  specd::sdk::Host host_;
  Options o_;
  std::optional<GlobalCache> global_;
  std::unordered_map<uint64_t, std::unique_ptr<SequenceState>> states_;
  DraftBuilder builder_;
  std::vector<int64_t> own_starts_, global_starts_;
  std::vector<int32_t> cont_;
};

}  // namespace

SPECD_PLUGIN("suffix", "1.0.0",
             specd::sdk::proposer<SuffixProposer>(
                 "suffix",
                 "Suffix decoding: continues the longest earlier match in the request and in finished outputs"))
