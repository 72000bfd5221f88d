// Speculator: the speculative stages of an engine step (ARCHITECTURE.md "One engine step"),
// working on the rows of a sched::StepBatch. The engine calls it once per stage and never
// reaches inside:
//
//   propose(batch)   the dynamic-k policy picks k_i for the rows of requests that speculate
//                    dynamically (policy.hpp; row.lookahead), then the proposer plugin drafts up
//                    to k_i tokens for every row that speculates (row.drafts, row.draft_probs)
//   (scorer)         one target forward scores [last token, d_0 .. d_{m-1}] of every row
//   (engine)         rows without drafts sample their token
//   verify(batch)    prefill chunks and plain decodes reach the proposer (on_prefill, target
//                    hidden states buffered for the next propose: proposer_feed.hpp); each
//                    drafted row's m+1 logit rows → the request's sampling transform →
//                    probabilities → the verifier of the row's A/B arm accepts a prefix and
//                    emits one more token (row.num_accepted, row.emitted; shadow arms only
//                    record: arm_verifiers.hpp); the step's times teach the policy's cost model
//   (Scheduler::commit appends the tokens and rolls the KV back)
//   accept(row)      a row that speculated and goes on: the hidden states of its committed
//                    positions and on_accept, so the proposer rolls back its own state
//   release(id)      the sequence ended or was preempted: the proposer's state for it goes
//
// Speculation off (no `speculative` section, or enabled: false) is a Speculator too: it loads
// no plugin, has no arms and proposes nothing (every request's k is 0), so the engine's step has
// no branch for it.
//
// A failing plugin call fails the rows it covered (row.error), never the step. It owns the plugin
// registry, the model host (draft / MTP models with their own KV), the plugin instances (the A/B
// arms' verifiers included), the policy and the A/B accounting, plus reusable batch buffers.
//
// Threading: propose / verify / accept run where the step executes (the model worker with async
// scheduling); release and collect run on the engine thread between steps; accounting() is the
// engine thread's at any time (arm_accounting.hpp). The set-up calls (hosted KV, scorer,
// calibrate, describe) run once, before the first step.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/llama.hpp"
#include "model/weights.hpp"
#include "plugin/registry.hpp"
#include "sched/scheduler.hpp"
#include "sched/step_batch.hpp"
#include "specd/engine.hpp"
#include "specd/error.hpp"
#include "speculative/arm_accounting.hpp"
#include "speculative/arm_record.hpp"
#include "speculative/arm_verifiers.hpp"
#include "speculative/model_host.hpp"
#include "speculative/policy.hpp"
#include "speculative/proposer_feed.hpp"
#include "speculative/scorer.hpp"

namespace specd::speculative {

class Speculator {
 public:
  // With cfg.speculative.enabled: loads plugins from the search path (plugins.paths,
  // SPECD_PLUGIN_PATH, built-in) and creates the configured proposer (which may load models
  // through the model host) and the arms' verifiers. Throws specd::Error naming the component
  // and the reason. models: where the proposer's models are built and run (the engine's
  // factory; it must outlive the speculator). Without it: speculation off (see the file comment).
  // placement: the target's (ModelHost: the hosted models that can follow it do).
  Speculator(const config::EngineConfig& cfg, std::shared_ptr<const model::LlamaWeights> target, int32_t block_size,
             int64_t max_model_len, int64_t vocab_size, tp::ModelFactory& models, model::Placement placement = {});
  ~Speculator();
  Speculator(const Speculator&) = delete;
  Speculator& operator=(const Speculator&) = delete;

  // ---- set-up, before the first step ----
  // The proposer's largest k (0: no limit, or speculation off).
  int32_t max_k() const;
  // The KV caches of the hosted models, which the scheduler rolls back with the target's (null
  // when none can exist), their bytes per block, and their sizing (docs/speculative.md).
  sched::HostedKv* hosted_kv();
  // Prefix caching in the hosted models' caches (ModelHost::set_prefix_caching), as the target's.
  void set_prefix_caching(bool on);
  size_t hosted_bytes_per_block() const;
  void allocate_hosted_kv(int32_t num_blocks);
  // The scorer `speculative.scorer` names, on the engine's target and KV cache: the built-in
  // multi-query scorer (mqa; always when off) or a scorer plugin on the model host.
  std::unique_ptr<Scorer> make_scorer(model::LlamaModel& model, kv::KvCache& kv);
  // Times the target's forward for the policy's cost model (cost_model.hpp), on a scratch
  // sequence of `kv`; max_tokens: the largest step worth measuring. Nothing when off.
  void calibrate(model::LlamaModel& model, kv::KvCache& kv, int32_t max_tokens);
  // The speculative part of EngineInfo (proposer, verifiers, arms, k).
  void describe(EngineInfo& info, const Scorer& scorer) const;

  // ---- the step, where it executes ----
  // The proposer wants the target's hidden states of every position (the scorer returns them).
  bool wants_hidden() const;
  void propose(sched::StepBatch& batch);
  // Returns whether any row was verified (the step counts as a speculative step).
  bool verify(sched::StepBatch& batch);
  void accept(sched::StepRow& row);

  // ---- the engine thread ----
  // Once a step is collected: its A/B record moved into `into` (arm_record.hpp), and the policy's
  // counters (spec_metrics.hpp).
  void collect(ArmStepRecord& into, spec::PolicyMetrics& policy);
  void release(sched::SeqId id);
  // The sequence finished (a stop or the length limit), before its release: the proposer's
  // on_finish (ABI 1.4).
  void finish(const sched::Sequence& seq);
  // The proposer's own observations so far (ABI 1.4 record).
  std::vector<spec::ProposerSeries> observations() const;
  ArmAccounting& accounting() { return *accounting_; }

  // Structured output: draft tokens the grammar cut before scoring, and tokens of forced text it
  // added (apply_grammar). Thread-safe.
  uint64_t grammar_cut_drafts() const { return grammar_cut_.load(std::memory_order_relaxed); }
  uint64_t grammar_forced_drafts() const { return grammar_forced_.load(std::memory_order_relaxed); }

 private:
  bool on() const { return proposer_ != nullptr; }
  void check_drafts(std::span<sched::StepRow* const> rows) const;
  // Structured output (rows_[i] drafted into slot i of the buffers): drafts a request's grammar
  // forbids end a chain there, or leave a tree with their subtrees, before any forward is spent
  // on them; a chain with room left goes on with the text the grammar forces (row.num_forced).
  void apply_grammar(bool with_probs, size_t probs_stride);
  std::atomic<uint64_t> grammar_cut_{0}, grammar_forced_{0};  // read by Engine::stats on another thread
  void observe(sched::StepBatch& batch);
  void prefill(std::span<sched::StepRow* const> rows);
  void split_features(std::vector<float>& features, specd_tensor_view& final_view, specd_tensor_view& aux_view);
  // The policy's acceptance evidence from the rows the last verify() verified
  // (acceptance_model.hpp).
  void observe_acceptance();
  // Fails the rows a failed call covered: "speculative decoding failed: <what>".
  void fail(std::span<sched::StepRow* const> rows, const char* stage, const Error& e);
  void fail(sched::StepRow& row, const char* stage, const Error& e);

  config::ComponentConfig scorer_cfg_;
  plugin::Registry registry_;  // before the instances: the plugin libraries outlive them
  std::unique_ptr<ModelHost> host_;
  std::unique_ptr<plugin::ProposerInstance> proposer_;  // null: speculation off
  std::unique_ptr<ArmVerifiers> arms_;
  std::unique_ptr<ArmAccounting> accounting_;
  int32_t default_k_ = 0;
  bool dynamic_ = false;
  int64_t vocab_;
  int64_t hidden_size_;
  // The proposer gets on_prefill / on_accept / on_release (abi.h, keeps_state).
  bool keeps_state_ = false;
  std::unique_ptr<SpeculationPolicy> policy_;
  spec::PolicyMetrics policy_metrics_;  // the engine copies them when it collects a step
  std::optional<ProposerFeed> feed_;
  std::chrono::steady_clock::time_point proposed_at_;  // the end of this step's propose
  double propose_s_ = 0;                               // and its length

  // Per-step buffers, reused.
  std::vector<sched::StepRow*> rows_;
  std::vector<specd_sequence> seqs_buf_;
  std::vector<int32_t> max_draft_, draft_tokens_, draft_parents_, num_drafted_, num_new_, num_hidden_;
  std::vector<float> draft_confidence_;  // [rows, k_max] when the policy trims (ABI 1.6)
  std::vector<int32_t> remap_;
  std::vector<char> keep_;
  std::vector<float> draft_probs_, hidden_buf_, aux_buf_, feature_buf_;
  // The target layers whose hidden states the proposer reads (abi.h aux_hidden_layers).
  std::vector<int32_t> aux_layers_;
  std::vector<double> evidence_;
  int32_t k_max_ = 0;  // drafts buffer stride of the current step
};

}  // namespace specd::speculative
