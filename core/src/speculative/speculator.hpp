// Speculator: the proposer and verifier stages of an engine step (ARCHITECTURE.md "One engine
// step"), working on the rows of a sched::StepBatch:
//
//   plan(batch)      dynamic speculation: the policy picks k_i for the rows of requests that
//                    speculate dynamically (policy.hpp; row.lookahead)
//   propose(batch)   the proposer plugin drafts up to k_i tokens for every row that speculates
//                    (row.drafts, row.draft_probs)
//   (scorer)         one target forward scores [last token, d_0 .. d_{m-1}] of every row
//   observe(batch)   prefill chunks and plain decodes reach the proposer (on_prefill, target
//                    hidden states buffered for the next propose)
//   verify(batch)    each drafted row's m+1 logit rows → the request's sampling transform →
//                    probabilities; the verifier of the row's A/B arm accepts a prefix and
//                    emits one more token (row.num_accepted, row.emitted); shadow arms verify
//                    the same rows and only record (ArmVerifiers, row.shadows)
//   (Scheduler::commit appends the tokens and rolls the KV back; the output processor
//    detokenizes and applies stop strings)
//   accept(row)      a row that speculated and goes on: hidden states of its committed
//                    positions and on_accept, so the proposer rolls back its own state
//   end_step(...)    the step's measured times teach the policy's cost model
//
// A failing plugin call fails the rows it covered (row.error), never the step. It owns the plugin
// registry, the model host (draft / MTP models with their own KV) and the plugin instances (the
// A/B arms' verifiers included), plus reusable batch buffers. Used by one thread at a time:
// propose / observe / verify / accept run where the step executes (the model worker with async
// scheduling), and so do plan / end_step; release between steps; the A/B assignment (assign,
// has_arm, arm_list) touches only the assigner and runs on the engine thread at any time. The
// engine keeps the acceptance metrics, the A/B arms' included (they are recorded with the
// outputs), and copies the policy's counters when it collects a step.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.hpp"
#include "model/llama.hpp"
#include "model/weights.hpp"
#include "plugin/registry.hpp"
#include "sched/scheduler.hpp"
#include "sched/step_batch.hpp"
#include "speculative/arm_verifiers.hpp"
#include "speculative/arms.hpp"
#include "speculative/model_host.hpp"
#include "speculative/policy.hpp"
#include "speculative/scorer.hpp"
#include "specd/error.hpp"

namespace specd::speculative {

class Speculator {
 public:
  // Loads plugins from the search path (plugins.paths, SPECD_PLUGIN_PATH, built-in) and
  // creates the configured proposer (which may load models through the model host) and
  // verifier. Throws specd::Error naming the component and the reason. leader: the engine's
  // tensor-parallel leader (null on a single rank), for the models the proposer loads.
  Speculator(const config::EngineConfig& cfg, std::shared_ptr<const model::LlamaWeights> target,
             int32_t block_size, int64_t max_model_len, int64_t vocab_size, dist::Leader* leader = nullptr);
  ~Speculator();

  ModelHost& host() { return *host_; }
  const std::string& proposer_name() const { return proposer_->name(); }
  const ArmVerifiers& arms() const { return *arms_; }
  int32_t max_k() const { return proposer_->capabilities().max_k; }
  int32_t default_k() const { return default_k_; }
  // The proposer wants the target's hidden states of every position (the scorer returns them).
  bool wants_hidden() const { return proposer_->capabilities().needs_target_hidden != 0; }

  // The scorer `speculative.scorer` names once the engine's target and KV cache exist: the
  // built-in multi-query scorer (mqa) or a scorer plugin on the model host.
  std::unique_ptr<Scorer> make_scorer(const config::ComponentConfig& scorer, model::LlamaModel& model,
                                      kv::KvCache& kv);

  // The request's A/B arm (arms.hpp); nullopt for an unknown arm name.
  std::optional<ArmAssignment> assign(const std::string& arm, const std::string& user, RequestId id);
  bool has_arm(const std::string& name) const { return assigner_->find(name).has_value(); }
  // "a, b": the arm names, for messages.
  std::string arm_list() const { return assigner_->list(); }

  // Times the target's forward at start-up for the policy's cost model (cost_model.hpp), on a
  // scratch sequence of `kv`; max_tokens: the largest step worth measuring.
  void calibrate(model::LlamaModel& model, kv::KvCache& kv, int32_t max_tokens);

  void plan(sched::StepBatch& batch) { policy_->plan(batch, policy_metrics_); }
  void propose(sched::StepBatch& batch);
  void observe(sched::StepBatch& batch);
  // Returns whether any row was verified (the step counts as a speculative step).
  bool verify(sched::StepBatch& batch);
  void accept(sched::StepRow& row);
  // After verify, before commit, where the step executes: propose_s = the propose call,
  // target_s = the target's forward through verification.
  void end_step(const sched::StepBatch& batch, double propose_s, double target_s) {
    policy_->observe_step(batch, propose_s, target_s, policy_metrics_);
  }
  // The policy's counters (spec_metrics.hpp); read only while no step executes.
  const spec::PolicyMetrics& policy_metrics() const { return policy_metrics_; }
  // The sequence ended or was preempted: the proposer's state for it is freed (its hosted KV is
  // the scheduler's to free).
  void release(RequestId id);

 private:
  struct SeqState {
    bool prefilled = false;   // the chunk that ends the (re-)prefill went through on_prefill
    int64_t next_pos = 0;     // hidden states: positions < next_pos were received from the engine
    std::vector<float> rows;  // positions [next_pos - rows/H, next_pos) not yet proposed with
  };
  void pass_hidden(std::span<sched::StepRow* const> rows, specd_propose_batch& batch);
  void check_drafts(std::span<sched::StepRow* const> rows) const;
  void prefill(std::span<sched::StepRow* const> rows);
  void add_hidden(const sched::StepRow& row, int32_t n);
  // The policy's acceptance evidence from the rows the last verify() verified
  // (acceptance_model.hpp).
  void observe_acceptance();
  // Fails the rows a failed call covered: "speculative decoding failed: <what>".
  void fail(std::span<sched::StepRow* const> rows, const char* stage, const Error& e);
  void fail(sched::StepRow& row, const char* stage, const Error& e);

  plugin::Registry registry_;  // first: the plugin libraries outlive the instances
  std::unique_ptr<ModelHost> host_;
  std::unique_ptr<plugin::ProposerInstance> proposer_;
  std::unique_ptr<ArmVerifiers> arms_;
  std::optional<ArmAssigner> assigner_;  // set once the arms exist
  int32_t default_k_;
  int64_t vocab_;
  int64_t hidden_size_;
  // The proposer gets on_prefill / on_accept / on_release (abi.h, keeps_state).
  bool keeps_state_;
  std::unique_ptr<SpeculationPolicy> policy_;
  spec::PolicyMetrics policy_metrics_;  // the engine copies them when it collects a step
  std::unordered_map<RequestId, SeqState> seqs_;

  // Per-step buffers, reused.
  std::vector<sched::StepRow*> rows_;
  std::vector<specd_sequence> seqs_buf_;
  std::vector<int32_t> max_draft_, draft_tokens_, num_drafted_, num_new_, num_hidden_;
  std::vector<float> draft_probs_, hidden_buf_;
  std::vector<double> evidence_;
  int32_t k_max_ = 0;  // drafts buffer stride of the current step
};

}  // namespace specd::speculative
