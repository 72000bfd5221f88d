// eagle3: drafts with an EAGLE-3 head (docs/proposers.md "eagle3"; the head's layout and math:
// docs/model-formats.md "EAGLE-3 heads"), built on the SDK alone.
//
// The head runs through model services with its own paged KV. Its position p takes the target's
// three auxiliary states at p (fused by the head's fc) and the token x_{p+1}, and predicts
// x_{p+2}; it also outputs its own estimate of the next position's state, which the draft steps
// feed back instead of the target's (EAGLE's feature extrapolation).
//
//  - The target's states come with on_prefill and propose (aux_hidden_layers: the head's
//    config, a pinned `aux_layers`, or the public default 2, L/2, L-3). They are buffered until
//    the token after their position is known.
//  - on_prefill feeds the head every prompt position whose next token is known (all but the
//    chunk's last) in one forward without logits, as draft_model feeds its draft the prompt.
//    Left to the first propose, the prompt's catch-up made that call cost a whole prefill of
//    the head (40 ms for a 411-token prompt on llama-160m), and the dynamic policy, which times
//    every propose, then kept k at 0 for the rest of the request (0.93x plain, where static
//    k = 4 ran 2.5x).
//  - propose: one catch-up forward per call over every sequence's buffered positions (the
//    target's fused states, 3 x hidden wide), whose last row gives the first draft's logits and
//    the roots' input state; then one forward per draft level with tree attention
//    (draft_tree.hpp): `tree: {depth, top_k, max_nodes}` for EAGLE-2-style dynamic trees, else a
//    chain of k (top_k 1).
//  - The head's KV keeps the positions fed with the target's states; on_accept drops the draft
//    positions (the next catch-up feeds the committed ones with the target's real states).
#include <specd/sdk/model_client.hpp>
#include <specd/sdk/plugin.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "draft_tree.hpp"

namespace {

namespace sdk = specd::sdk;
using specd::proposers::TreeCalibration;
using specd::proposers::TreeDrafter;
using specd::proposers::TreeShape;

struct Settings {
  std::string model;
  TreeShape tree;
  std::vector<int32_t> aux_layers;  // pinned target layers (else the head's, else the default)
};

Settings read_settings(sdk::Params& params) {
  Settings s;
  s.model = params.require_string("model");
  s.tree = specd::proposers::read_tree_shape(params);
  for (const int64_t l : params.get_int_list("aux_layers", 0, 1 << 20)) s.aux_layers.push_back(static_cast<int32_t>(l));
  if (!s.aux_layers.empty() && s.aux_layers.size() != 3)
    params.error("aux_layers", "an EAGLE-3 head fuses 3 target layers, got " + std::to_string(s.aux_layers.size()));
  return s;
}

class Eagle3Proposer : public sdk::Proposer {
 public:
  Eagle3Proposer(sdk::Host host, sdk::Params& params) : log_(host.log()), settings_(read_settings(params)) {
    params.check();
    if (host.models() == nullptr)
      throw sdk::Error("eagle3 proposer needs the host's model services, and this host provides none",
                       SPECD_ERR_UNSUPPORTED);
    client_.emplace(*host.models(), host.host_ctx(), "eagle3");
    const specd_model_info target = client_->info(nullptr);
    target_vocab_ = target.vocab_size;
    head_ = client_->load(settings_.model, 0, -1);
    try {
      info_ = client_->info(head_);
      if (info_.struct_size < sizeof(info_) || info_.kind != SPECD_MODEL_EAGLE3)
        throw sdk::Error("eagle3: " + settings_.model + " is not an EAGLE-3 head (config.json architectures)");
      choose_layers(target.num_layers);
    } catch (...) {
      client_->release(head_);
      throw;
    }
    log_.info(
        "eagle3 proposer: head ", settings_.model, ", target layers ", layers_[0], ", ", layers_[1], ", ", layers_[2],
        settings_.tree.depth > 0
            ? ", tree depth " + std::to_string(settings_.tree.depth) + " top_k " + std::to_string(settings_.tree.top_k)
            : std::string(", chains"));
  }
  ~Eagle3Proposer() override {
    for (const auto& [id, state] : seqs_) client_->drop(head_, id);
    client_->release(head_);
  }
  Eagle3Proposer(const Eagle3Proposer&) = delete;
  Eagle3Proposer& operator=(const Eagle3Proposer&) = delete;

  static void validate(sdk::Params& params) { read_settings(params); }

  sdk::ProposerCaps capabilities() const override {
    sdk::ProposerCaps caps;
    caps.keeps_state = true;
    caps.supports_variable_k = true;
    caps.drafts_trees = settings_.tree.depth > 0;
    caps.max_tree_depth = settings_.tree.depth;
    caps.aux_hidden_layers = layers_;
    return caps;
  }

  void on_prefill(const sdk::PrefillBatch& batch) override {
    seqs_in_call_.clear();
    work_.clear();
    const auto width = static_cast<size_t>(info_.input_hidden_width);
    for (int32_t i = 0; i < batch.size(); ++i) {
      const sdk::Sequence seq = batch.seq(i);
      SeqState& st = buffer(seq.id, batch.target_aux_hidden(i));
      // Positions [fed, fed + n) have their states and their next token (the prompt so far).
      const auto due = static_cast<int64_t>(st.states.size() / width);
      const int64_t n = std::min<int64_t>(due, static_cast<int64_t>(seq.tokens.size()) - 1 - st.fed);
      if (n <= 0) continue;
      if (client_->seq_length(head_, seq.id) > st.fed) client_->truncate(head_, seq.id, st.fed);
      work_.push_back({i, seq.id, static_cast<int32_t>(n)});
      seqs_in_call_.push_back({seq.id, seq.tokens.subspan(static_cast<size_t>(st.fed + 1), static_cast<size_t>(n)), 0,
                               std::span<const float>(st.states).first(static_cast<size_t>(n) * width)});
    }
    if (work_.empty()) return;
    TreeDrafter feeder(*client_, head_, target_vocab_, settings_.tree, {info_.hidden_size, info_.input_hidden_width});
    feeder.feed(seqs_in_call_);
    for (const Work& w : work_) {
      SeqState& st = seqs_[w.id];
      st.fed += w.k;
      st.states.erase(st.states.begin(),
                      st.states.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(w.k) * width));
    }
  }

  void propose(sdk::ProposeBatch& batch) override {
    seqs_in_call_.clear();
    work_.clear();
    for (int32_t i = 0; i < batch.size(); ++i) {
      const sdk::Sequence seq = batch.seq(i);
      SeqState& st = buffer(seq.id, batch.target_aux_hidden(i));
      const auto len = static_cast<int64_t>(seq.tokens.size());
      const int32_t k = batch.max_draft(i);
      // The head's positions [fed, len - 1) are due: their states are buffered, their next tokens known.
      const auto due = static_cast<int64_t>(st.states.size() / static_cast<size_t>(info_.input_hidden_width));
      if (st.fed + due != len - 1)
        throw sdk::Error(sdk::detail::concat("eagle3: sequence ", seq.id, " of length ", len,
                                             " has target states up to ", st.fed + due, ", expected ", len - 1));
      if (k <= 0 || due == 0) continue;
      if (client_->seq_length(head_, seq.id) > st.fed) client_->truncate(head_, seq.id, st.fed);
      work_.push_back({i, seq.id, k});
      seqs_in_call_.push_back({seq.id, seq.tokens.subspan(static_cast<size_t>(st.fed + 1)), k, st.states});
    }
    if (work_.empty()) return;
    TreeShape shape = settings_.tree;
    if (shape.depth <= 0) {  // a chain of the longest k asked for
      shape.top_k = 1;
      for (const Work& w : work_) shape.depth = std::max(shape.depth, w.k);
    }
    TreeDrafter drafter(*client_, head_, batch.vocab_size(), shape, {info_.hidden_size, info_.input_hidden_width});
    if (settings_.tree.depth > 0) drafter.set_calibration(&calibration_);
    drafter.draft(seqs_in_call_);
    for (size_t w = 0; w < work_.size(); ++w) {
      SeqState& st = seqs_[work_[w].id];
      st.fed += static_cast<int64_t>(seqs_in_call_[w].catch_up.size());
      st.states.clear();
      if (settings_.tree.depth > 0) {
        batch.set_tree(work_[w].index, drafter.tokens(w), drafter.parents(w));
        st.tree.assign(drafter.kept(w).begin(), drafter.kept(w).end());
      } else {
        batch.set_draft(work_[w].index, drafter.tokens(w));
      }
    }
  }

  void on_accept(uint64_t seq_id, int32_t num_accepted, std::span<const int32_t> emitted) override {
    auto it = seqs_.find(seq_id);
    if (it == seqs_.end()) return;
    if (!it->second.tree.empty()) {  // the tree drafter learns what its nodes were worth
      const auto n = std::min(static_cast<size_t>(std::max(num_accepted, 0)), emitted.size());
      calibration_.observe(it->second.tree, emitted.first(n));
      it->second.tree.clear();
    }
    // Draft positions go; the committed ones come back with the target's states.
    if (client_->seq_length(head_, seq_id) > it->second.fed) client_->truncate(head_, seq_id, it->second.fed);
  }

  void on_release(uint64_t seq_id) override {
    if (seqs_.erase(seq_id) > 0) client_->drop(head_, seq_id);
  }

 private:
  struct SeqState {
    int64_t fed = 0;                          // head positions fed with the target's states: [0, fed)
    std::vector<float> states;                // target states of positions [fed, ...), input_hidden_width each
    std::vector<TreeCalibration::Node> tree;  // the last tree drafted, until on_accept
  };
  struct Work {
    int32_t index;
    uint64_t id;
    int32_t k;  // drafts asked for (on_prefill: positions fed)
  };

  SeqState& buffer(uint64_t id, std::span<const float> rows) {
    SeqState& st = seqs_[id];
    st.states.insert(st.states.end(), rows.begin(), rows.end());
    return st;
  }

  // Pinned layers, else the head's, else 2, L/2, L-3 of the target.
  void choose_layers(int32_t target_layers) {
    if (!settings_.aux_layers.empty()) {
      layers_ = settings_.aux_layers;
    } else if (info_.num_aux_layers == 3) {
      layers_.assign(info_.aux_layers, info_.aux_layers + 3);
    } else {
      if (target_layers < 5)
        throw sdk::Error(sdk::detail::concat("eagle3: the target has ", target_layers,
                                             " layers, too shallow for the default layers 2, L/2, L-3; pin them "
                                             "with speculative.proposer.aux_layers"));
      layers_ = {2, target_layers / 2, target_layers - 3};
    }
    if (info_.input_hidden_width != 3 * static_cast<int32_t>(info_.hidden_size))
      log_.info("eagle3: the head fuses ", info_.input_hidden_width, "-wide target states into ", info_.hidden_size);
  }

  sdk::Logger log_;
  Settings settings_;
  std::optional<sdk::ModelClient> client_;
  specd_model* head_ = nullptr;
  specd_model_info info_{};
  int32_t target_vocab_ = 0;
  std::vector<int32_t> layers_;
  std::unordered_map<uint64_t, SeqState> seqs_;
  std::vector<Work> work_;
  std::vector<TreeDrafter::Seq> seqs_in_call_;
  TreeCalibration calibration_;  // trees: what nodes were worth to the verifier
};

}  // namespace

SPECD_PLUGIN("eagle3", "1.0.0",
             specd::sdk::proposer<Eagle3Proposer>("eagle3",
                                                  "An EAGLE-3 head drafts from the target's low, middle and high "
                                                  "layer states (chains or dynamic trees)"))
