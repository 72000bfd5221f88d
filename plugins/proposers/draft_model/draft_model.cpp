// draft_model: a smaller causal LM (a second checkpoint, or the target's first N layers) drafts
// k tokens autoregressively. The draft runs through the host's model services and keeps its own
// paged KV there, keyed by seq_id.
//
// KV bookkeeping (D = the draft's cached length of a sequence, L = the sequence's length):
//  - The draft's cached tokens are always a prefix of the sequence (prompt + emitted tokens).
//  - A forward returns logits only for tokens it is fed, so a propose must feed at least one
//    token: on_prefill caches every prompt token except the last (D = L - 1), and after every
//    on_accept D < L holds again (see on_accept).
//  - propose(k): step 0 feeds the catch-up tokens [D, L) in one go and yields d0; step j >= 1
//    feeds d_{j-1} and yields d_j. Afterwards the draft holds the L context tokens plus
//    d0..d_{k-2}: D = L + k - 1.
//  - draft_p_min: a sequence whose draft j falls below the confidence cut-off stops at j drafts;
//    the draft holds L + j tokens (d_{j-1} was fed), still <= L + n + 1 after any on_accept.
//  - on_accept(n): the accepted drafts d0..d_{n-1} equal the sequence's next tokens, the rest
//    do not, so keep D = min(D, L + n). That drops every rejected draft and is < L + n + 1,
//    the new sequence length: the next propose catches up on the target's token (and on
//    d_{k-1} when all k were accepted).
// Every step is ONE batched forward over all sequences still drafting, so a propose costs
// max_i k_i forward calls. With `tree:` it drafts a tree instead (draft_tree.hpp): `depth`
// forwards, the node budget k, and on_accept rolls the draft back to the sequence (D = L).
#include <specd/sdk/model_client.hpp>
#include <specd/sdk/plugin.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "draft_support.hpp"
#include "draft_tree.hpp"

namespace {

using specd::sdk::ModelClient;
namespace sdk = specd::sdk;

struct Settings {
  std::string model;                 // checkpoint directory, or "" for a self-draft
  int32_t layers = 0;                // > 0: the target's first `layers` layers
  float temperature = 0;             // 0 = greedy drafting
  float draft_p_min = 0;             // stop at the first draft whose confidence is below this (0 = off)
  bool gumbel_drafts = false;        // draft_sampler: gumbel (sampled drafts share the coupled noise)
  int32_t dtype = -1;                // specd_dtype or -1 (the checkpoint's own; a self-draft: the target's)
  specd::proposers::TreeShape tree;  // depth > 0: draft trees (draft_tree.hpp)
};

Settings read_settings(sdk::Params& params) {
  Settings s;
  const bool has_model = params.has("model");
  const bool has_layers = params.has("layers");
  s.model = params.get_string("model", "");
  s.layers = static_cast<int32_t>(params.get_int("layers", 0, 1, 1 << 20));
  if (has_model && has_layers) {
    params.error("layers", "give either `model` (a draft checkpoint) or `layers` (self-draft), not both");
  } else if (!has_model && !has_layers) {
    params.error("model",
                 "required: `model` (a draft checkpoint directory) or `layers` (self-draft from the "
                 "target's first N layers)");
  } else if (has_model && s.model.empty()) {
    params.error("model", "must be a non-empty checkpoint directory");
  }
  s.temperature = specd::proposers::read_temperature(params);
  s.draft_p_min = specd::proposers::read_draft_p_min(params);
  s.gumbel_drafts = specd::proposers::read_gumbel_drafts(params);
  const std::string dtype = params.get_choice(
      "dtype", "auto", {"auto", "f32", "f16", "bf16", "q8_0", "q4_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"});
  if (dtype == "f32") s.dtype = SPECD_DTYPE_F32;
  if (dtype == "f16") s.dtype = SPECD_DTYPE_F16;
  if (dtype == "bf16") s.dtype = SPECD_DTYPE_BF16;
  if (dtype == "q8_0") s.dtype = SPECD_DTYPE_Q8_0;
  if (dtype == "q4_0") s.dtype = SPECD_DTYPE_Q4_0;
  if (dtype == "q4_k") s.dtype = SPECD_DTYPE_Q4_K;
  if (dtype == "q5_k") s.dtype = SPECD_DTYPE_Q5_K;
  if (dtype == "q6_k") s.dtype = SPECD_DTYPE_Q6_K;
  if (dtype == "q3_k") s.dtype = SPECD_DTYPE_Q3_K;
  if (dtype == "q2_k") s.dtype = SPECD_DTYPE_Q2_K;
  s.tree = specd::proposers::read_tree_shape(params);
  if (s.tree.depth > 0 && s.temperature > 0)
    params.error("temperature", "must be 0 with `tree`: a tree's children are the draft's top-k tokens");
  if (s.tree.depth > 0 && s.draft_p_min > 0)
    params.error("draft_p_min", "applies to chains; a tree's size is its node budget (tree.max_nodes, k)");
  return s;
}

class DraftModelProposer : public sdk::Proposer {
 public:
  DraftModelProposer(sdk::Host host, sdk::Params& params)
      : host_(host), log_(host.log()), settings_(read_settings(params)) {
    params.check();  // report parameter mistakes before loading anything
    if (host.models() == nullptr)
      throw sdk::Error("draft_model proposer needs the host's model services, and this host provides none",
                       SPECD_ERR_UNSUPPORTED);
    client_.emplace(*host.models(), host.host_ctx(), "draft_model");

    specd_model* target = client_->load("", 0, -1);
    specd_model_info target_info{};
    try {
      target_info = client_->info(target);
    } catch (...) {
      client_->release(target);
      throw;
    }
    client_->release(target);
    if (settings_.layers > target_info.num_layers)
      throw sdk::Error(sdk::detail::concat("draft_model: ", params.path(), ".layers = ", settings_.layers,
                                           " exceeds the target's ", target_info.num_layers, " layers"));

    draft_ = client_->load(settings_.model, settings_.layers, settings_.dtype);
    try {
      const specd_model_info info = client_->info(draft_);
      if (info.vocab_size != target_info.vocab_size)
        throw sdk::Error(sdk::detail::concat("draft_model: the draft's vocabulary (", info.vocab_size,
                                             " tokens) differs from the target's (", target_info.vocab_size,
                                             " tokens)"));
      vocab_ = info.vocab_size;
      max_context_ = info.max_context;
    } catch (...) {
      client_->release(draft_);
      throw;
    }
    log_.info("draft_model proposer: ",
              settings_.model.empty()
                  ? "self-draft from the target's first " + std::to_string(settings_.layers) + " layers"
                  : "draft " + settings_.model,
              ", temperature ", settings_.temperature,
              settings_.draft_p_min > 0 ? ", draft_p_min " + std::to_string(settings_.draft_p_min) : std::string());
  }

  ~DraftModelProposer() override {
    for (const auto& [id, state] : seqs_) client_->drop(draft_, id);
    client_->release(draft_);
  }
  DraftModelProposer(const DraftModelProposer&) = delete;
  DraftModelProposer& operator=(const DraftModelProposer&) = delete;

  static void validate(sdk::Params& params) { read_settings(params); }

  sdk::ProposerCaps capabilities() const override {
    sdk::ProposerCaps caps;
    caps.produces_draft_probs = settings_.temperature > 0;
    caps.needs_target_hidden = false;
    caps.keeps_state = true;
    caps.supports_variable_k = true;
    caps.drafts_trees = settings_.tree.depth > 0;
    caps.max_tree_depth = settings_.tree.depth;
    return caps;
  }

  void on_prefill(const sdk::PrefillBatch& batch) override {
    begin_call();
    for (int32_t i = 0; i < batch.size(); ++i) {
      const sdk::Sequence seq = batch.seq(i);
      seqs_.try_emplace(seq.id);
      // Everything but the last token: a propose needs one unseen token to get logits from.
      int64_t end = static_cast<int64_t>(seq.tokens.size()) - 1;
      if (max_context_ > 0) end = std::min<int64_t>(end, max_context_);
      const int64_t cached = client_->seq_length(draft_, seq.id);
      if (end <= cached) continue;
      add_row(seq.id, seq.tokens.subspan(static_cast<size_t>(cached), static_cast<size_t>(end - cached)));
    }
    if (!seq_ids_.empty()) run_forward();
  }

  void propose(sdk::ProposeBatch& batch) override {
    if (batch.vocab_size() != vocab_)
      throw sdk::Error(sdk::detail::concat("draft_model: the draft's vocabulary (", vocab_,
                                           " tokens) differs from the target's (", batch.vocab_size(), " tokens)"));
    work_.clear();
    if (settings_.tree.depth > 0) return propose_tree(batch);
    int32_t steps = 0;
    for (int32_t i = 0; i < batch.size(); ++i) {
      const int32_t k = batch.max_draft(i);
      const sdk::Sequence seq = batch.seq(i);
      const int64_t len = static_cast<int64_t>(seq.tokens.size());
      if (k <= 0 || len == 0) continue;
      SeqState& state = seqs_[seq.id];
      const int64_t cached = catch_up_start(seq.id, state, len);
      int32_t count = k;  // after drafting the draft holds len + count - 1 tokens
      if (max_context_ > 0) count = static_cast<int32_t>(std::min<int64_t>(count, max_context_ - len + 1));
      if (count <= 0) continue;
      state.context_len = len;
      state.drafted = count;
      state.pending = true;
      work_.push_back({i, seq.id, cached, count});
      steps = std::max(steps, count);
    }
    drafts_.assign(work_.size() * static_cast<size_t>(std::max(steps, 1)), -1);

    for (int32_t j = 0; j < steps; ++j) {
      begin_call();
      rows_.clear();
      for (size_t w = 0; w < work_.size(); ++w) {
        const Work& work = work_[w];
        if (work.count <= j) continue;
        if (j == 0) {
          const sdk::Sequence seq = batch.seq(work.index);
          add_row(work.id, seq.tokens.subspan(static_cast<size_t>(work.cached)));
        } else {
          add_row(work.id, {&drafts_[w * steps + j - 1], 1});
        }
        rows_.push_back(w);
      }
      if (rows_.empty()) break;  // every sequence stopped at the confidence cut-off
      run_forward();
      for (size_t r = 0; r < rows_.size(); ++r) {
        const size_t w = rows_[r];
        const sdk::Sequence seq = batch.seq(work_[w].index);
        const std::span<float> logits(logits_.data() + r * static_cast<size_t>(vocab_), static_cast<size_t>(vocab_));
        if (!specd::proposers::mask_by_grammar(host_, work_[w].id, {&drafts_[w * steps], static_cast<size_t>(j)},
                                               logits)) {
          work_[w].count = j;  // the grammar allows nothing here: the draft ends
          seqs_[work_[w].id].drafted = j;
          continue;
        }
        std::span<float> probs;
        if (settings_.temperature > 0) probs = batch.draft_probs(work_[w].index, j);
        drafts_[w * steps + j] = specd::proposers::choose_draft(logits, settings_.temperature, seq.seed, seq.step, j,
                                                                probs, settings_.gumbel_drafts);
        if (settings_.draft_p_min > 0 &&
            specd::proposers::confidence(logits, settings_.temperature, probs) < settings_.draft_p_min) {
          // Not confident: draft j is dropped and the sequence stops drafting. The draft model
          // then holds the context plus d_0..d_{j-1}, which on_accept rolls back like any draft.
          work_[w].count = j;
          seqs_[work_[w].id].drafted = j;
        }
      }
    }
    for (size_t w = 0; w < work_.size(); ++w)
      batch.set_draft(work_[w].index, {&drafts_[w * steps], static_cast<size_t>(work_[w].count)});
  }

  void on_accept(uint64_t seq_id, int32_t num_accepted, std::span<const int32_t> emitted) override {
    auto it = seqs_.find(seq_id);
    if (it == seqs_.end() || !it->second.pending) return;  // nothing drafted: nothing to roll back
    if (num_accepted < 0 || num_accepted > it->second.drafted ||
        static_cast<int64_t>(emitted.size()) != static_cast<int64_t>(num_accepted) + 1)
      throw sdk::Error(sdk::detail::concat("draft_model: on_accept for sequence ", seq_id, ": ", num_accepted,
                                           " accepted of ", it->second.drafted, " drafts with ", emitted.size(),
                                           " emitted tokens"));
    if (!it->second.tree.empty()) {  // the tree drafter learns what its nodes were worth
      calibration_.observe(it->second.tree, emitted.first(static_cast<size_t>(num_accepted)));
      it->second.tree.clear();
    }
    // A tree's nodes sit in the draft's cache in the order they were fed, not as the accepted
    // path: keep only the sequence's tokens and let the next propose catch up.
    roll_back(seq_id, it->second, settings_.tree.depth > 0 ? 0 : num_accepted);
  }

  void on_release(uint64_t seq_id) override {
    if (seqs_.erase(seq_id) > 0) client_->drop(draft_, seq_id);
  }

 private:
  struct SeqState {
    int64_t context_len = 0;                                    // sequence length at the last propose that drafted
    int32_t drafted = 0;                                        // drafts proposed then
    bool pending = false;                                       // drafted and not yet settled by on_accept
    std::vector<specd::proposers::TreeCalibration::Node> tree;  // the last tree drafted, until on_accept
  };
  struct Work {
    int32_t index;  // row in the propose batch
    uint64_t id;
    int64_t cached;  // draft's cached length before this propose
    int32_t count;   // drafts to make
  };

  // The draft's cached length of a sequence of `len` tokens, made < len so that the next forward
  // has a token to give logits for: on_accept is due before the next propose (without it, every
  // draft of the last step goes), and a host that never prefilled the last token gets it refed.
  int64_t catch_up_start(uint64_t id, SeqState& state, int64_t len) {
    int64_t cached = client_->seq_length(draft_, id);
    if (state.pending) cached = roll_back(id, state, 0);
    if (cached >= len) {
      client_->truncate(draft_, id, len - 1);
      cached = len - 1;
    }
    return cached;
  }

  // Tree drafting (draft_tree.hpp): the sequences' catch-up, then one TreeDrafter call.
  void propose_tree(sdk::ProposeBatch& batch) {
    if (!batch.takes_trees()) throw sdk::Error("draft_model: `tree` is set but the host takes chains only");
    tree_seqs_.clear();
    for (int32_t i = 0; i < batch.size(); ++i) {
      const int32_t k = batch.max_draft(i);
      const sdk::Sequence seq = batch.seq(i);
      const auto len = static_cast<int64_t>(seq.tokens.size());
      if (k <= 0 || len == 0) continue;
      SeqState& state = seqs_[seq.id];
      const int64_t cached = catch_up_start(seq.id, state, len);
      // The tree's deepest node sits at len - 1 + depth in the draft's positions.
      if (max_context_ > 0 && len + settings_.tree.depth > max_context_) continue;
      state.context_len = len;
      state.drafted = k;
      state.pending = true;
      work_.push_back({i, seq.id, cached, k});
      tree_seqs_.push_back({seq.id, seq.tokens.subspan(static_cast<size_t>(cached)), k});
    }
    if (tree_seqs_.empty()) return;
    specd::proposers::TreeDrafter drafter(*client_, draft_, vocab_, settings_.tree);
    drafter.set_calibration(&calibration_);
    drafter.draft(tree_seqs_);
    for (size_t w = 0; w < work_.size(); ++w) {
      batch.set_tree(work_[w].index, drafter.tokens(w), drafter.parents(w));
      SeqState& state = seqs_[work_[w].id];
      state.drafted = static_cast<int32_t>(drafter.tokens(w).size());
      state.tree.assign(drafter.kept(w).begin(), drafter.kept(w).end());
    }
  }

  // Keeps the context plus the accepted drafts: D = min(D, context_len + n). Returns D.
  int64_t roll_back(uint64_t seq_id, SeqState& state, int32_t num_accepted) {
    const int64_t cached = client_->seq_length(draft_, seq_id);
    const int64_t keep = std::min<int64_t>(cached, state.context_len + num_accepted);
    if (keep < cached) client_->truncate(draft_, seq_id, keep);
    state.pending = false;
    return keep;
  }

  void begin_call() {
    seq_ids_.clear();
    num_new_.clear();
    tokens_.clear();
  }
  void add_row(uint64_t id, std::span<const int32_t> tokens) {
    seq_ids_.push_back(id);
    num_new_.push_back(static_cast<int32_t>(tokens.size()));
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  }
  // One forward over the rows added since begin_call; logits of each row's last token.
  void run_forward() {
    logits_.resize(seq_ids_.size() * static_cast<size_t>(vocab_));
    specd_forward_batch fb{};
    fb.struct_size = sizeof(fb);
    fb.num_seqs = static_cast<int32_t>(seq_ids_.size());
    fb.seq_ids = seq_ids_.data();
    fb.num_new = num_new_.data();
    fb.tokens = tokens_.data();
    fb.all_logits = 0;
    fb.logits = logits_.data();
    client_->forward(draft_, fb);
  }

  sdk::Host host_;  // the allowed_tokens service (structured output)
  sdk::Logger log_;
  Settings settings_;
  std::optional<ModelClient> client_;
  specd_model* draft_ = nullptr;
  int32_t vocab_ = 0;
  int32_t max_context_ = 0;
  std::unordered_map<uint64_t, SeqState> seqs_;
  // Per-call buffers, reused across calls.
  std::vector<Work> work_;
  std::vector<specd::proposers::TreeDrafter::Seq> tree_seqs_;
  specd::proposers::TreeCalibration calibration_;  // trees: what nodes were worth to the verifier
  std::vector<int32_t> drafts_;                    // [work, steps]
  std::vector<size_t> rows_;                       // forward row -> work index
  std::vector<uint64_t> seq_ids_;
  std::vector<int32_t> num_new_;
  std::vector<int32_t> tokens_;
  std::vector<float> logits_;
};

}  // namespace

SPECD_PLUGIN("draft_model", "1.0.0",
             specd::sdk::proposer<DraftModelProposer>(
                 "draft_model", "A smaller causal LM (or the target's first N layers) drafts k tokens"))
