// Speculator: the speculative half of an engine step (ARCHITECTURE.md "One engine step").
//
//   propose(items)           proposer plugin drafts up to k_i tokens per decoding sequence
//   (engine)                 ONE target forward scores [last token, d_0 .. d_{n-1}] of every
//                            sequence with all logits (multi-query over the paged KV)
//   verify(items, logits)    each row → the request's sampling transform → probabilities;
//                            the verifier plugin accepts a prefix and emits one more token
//   (engine)                 truncates the target KV past the accepted tokens, appends the
//                            emitted ones (stop conditions apply), then on_accept()
//
// It owns the plugin registry, the model host (draft / MTP models with their own KV) and the
// two plugin instances, plus reusable batch buffers. Used from the engine's step thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.hpp"
#include "model/forward.hpp"
#include "model/weights.hpp"
#include "plugin/registry.hpp"
#include "sched/scheduler.hpp"
#include "spec/model_host.hpp"
#include "specd/spec_metrics.hpp"

namespace specd::spec {

class Speculator {
 public:
  // Loads plugins from the search path (plugins.paths, SPECD_PLUGIN_PATH, built-in) and
  // creates the configured proposer (which may load models through the model host) and
  // verifier. Throws specd::Error naming the component and the reason.
  Speculator(const config::EngineConfig& cfg, std::shared_ptr<const model::LlamaWeights> target,
             int32_t block_size, int64_t max_model_len, int64_t vocab_size);
  ~Speculator();

  ModelHost& host() { return *host_; }
  const std::string& proposer_name() const { return proposer_->name(); }
  const std::string& verifier_name() const { return verifier_->name(); }
  const specd_proposer_caps& proposer_caps() const { return proposer_->capabilities(); }
  int32_t default_k() const { return default_k_; }

  struct Item {
    sched::Sequence* seq = nullptr;
    int32_t max_draft = 0;    // k_i for this step
    int32_t num_drafted = 0;  // filled by propose()
    size_t slot = 0;          // filled by propose(): this item's row in the draft buffers
  };

  // ---- target hidden states (proposers with needs_target_hidden, e.g. mtp) -----------------
  // The engine then runs the target with hidden states for every new token and hands them
  // over here. Invariant: a sequence of length L has hidden states for positions 0..L-2; the
  // proposer got every position before next_pos, and this object buffers the rest until the
  // next propose (ABI specd_propose_batch.num_hidden). Sequences with spec_k == 0 are skipped.
  bool wants_hidden() const { return proposer_->capabilities().needs_target_hidden != 0; }
  int64_t hidden_size() const { return hidden_size_; }
  // True until the chunk that ends the sequence's (re-)prefill went through prefill().
  bool in_prefill(RequestId id) const;
  struct PrefillChunk {
    const sched::Sequence* seq = nullptr;
    int32_t start = 0;  // positions [start, start + n) went through the target
    int32_t n = 0;
    bool last = false;       // the chunk ends the prefill (the step samples after it)
    const float* hidden = nullptr;  // [n, hidden_size]
  };
  // Calls the proposer's on_prefill for these chunks (one batch). Throws specd::Error
  // (kPluginCall) when the proposer fails; the engine then fails these sequences.
  void prefill(std::span<const PrefillChunk> chunks);
  // Hidden states of newly committed positions [pos, pos + n) of a decoding sequence (a plain
  // decode, or the accepted prefix of a scored step); passed on with the next propose.
  void add_hidden(const sched::Sequence& seq, int64_t pos, const float* rows, int32_t n);

  // Drafts for every item. Throws specd::Error (kPluginCall) when the proposer fails.
  void propose(std::span<Item> items);
  std::span<const int32_t> drafts(size_t item) const;

  // items: any subset of the proposed items (each keeps its slot). first_row[i]: the forward
  // output row of item i's first scored position; item i has 1 + num_drafted rows. Results
  // are indexed like `items`. Throws specd::Error (kPluginCall) when the verifier fails.
  void verify(std::span<const Item> items, const model::ForwardOutput& fwd, std::span<const int32_t> first_row);
  int32_t num_accepted(size_t item) const { return num_accepted_[item]; }
  // The accepted drafts followed by the verifier's token: num_accepted + 1 tokens.
  std::span<const int32_t> emitted(size_t item) const;

  // After the engine appended `emitted` (possibly cut short by a stop condition, in which case
  // the sequence is released instead).
  void on_accept(const sched::Sequence& seq, int32_t num_accepted, std::span<const int32_t> emitted);
  // The sequence ended or was preempted: proposer state and hosted-model KV are freed.
  void release(RequestId id);

 private:
  void fill_sequences(std::span<const Item> items);
  struct HiddenState {
    bool prefilled = false;
    int64_t next_pos = 0;     // positions < next_pos were received from the engine
    std::vector<float> rows;  // positions [next_pos - rows/H, next_pos) not yet proposed with
  };

  plugin::Registry registry_;  // first: the plugin libraries outlive the instances
  std::unique_ptr<ModelHost> host_;
  std::unique_ptr<plugin::ProposerInstance> proposer_;
  std::unique_ptr<plugin::VerifierInstance> verifier_;
  int32_t default_k_;
  int64_t vocab_;
  int64_t hidden_size_;
  std::unordered_map<RequestId, HiddenState> hidden_;
  std::vector<specd_sequence> prefill_seqs_;
  std::vector<int32_t> prefill_new_, num_hidden_;
  std::vector<float> hidden_buf_;
  int32_t k_max_ = 0;     // drafts buffer stride of the current step
  int32_t k_verify_ = 0;  // out_tokens stride - 1 of the current step

  std::vector<specd_sequence> seqs_;
  std::vector<int32_t> max_draft_, draft_tokens_, num_drafted_, out_tokens_, num_accepted_;
  std::vector<float> draft_probs_, target_probs_;
  std::vector<uint64_t> seeds_, steps_;
  std::vector<int32_t> verify_drafts_, verify_counts_;
  std::vector<float> verify_q_;
};

}  // namespace specd::spec
