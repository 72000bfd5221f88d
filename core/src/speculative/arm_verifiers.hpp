// ArmVerifiers: the verify stage of an engine step for every A/B arm (docs/ab-testing.md).
//
// There is one verifier plugin instance per arm (speculative.arms; without arms, one arm
// "default" with speculative.verifier). For the drafted rows of a step:
//
//   1. each row's m+1 logit rows go through the request's sampling transform once, into one
//      buffer shared by every arm: target probabilities [rows, k+1, V], drafts, draft
//      probabilities, seeds and step counters (the verifiers draw their uniforms from
//      (seed, step, position), so every arm sees the same uniforms: common random numbers);
//   2. rows are grouped by serving arm, and each arm's verifier verifies its own rows, filling
//      row.num_accepted and row.emitted (a failing verifier fails its arm's rows only); row i
//      of the buffers gets row.ab_row = i in the step's ArmStepRecord (arm_record.hpp), which
//      holds the serving verifier's Σ log p of what it emitted;
//   3. every shadow arm (speculative.shadow) verifies the rows the other arms served, with the
//      same buffers and its own output buffers, drafts cut to its k. Nothing it decides is
//      emitted: the outcome goes to the record. A failing shadow verifier is logged and
//      counted; the requests go on.
//
// No extra forward runs for a shadow arm: its cost is its verifier call, measured per call
// (ArmStepRecord::calls; ShadowOutcome::seconds per row).
//
// Threading: verify() runs where the step executes (the model worker with async scheduling);
// the engine takes the step's record when it collects the step (take_record) and hands it to
// ArmAccounting on the engine thread. The arms themselves (names, k, weights, verifier names
// and capabilities) never change after construction, so the engine thread may read them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "plugin/registry.hpp"
#include "sched/step_batch.hpp"
#include "speculative/arm_record.hpp"

namespace specd::speculative {

struct Arm {
  std::string name;
  std::unique_ptr<plugin::VerifierInstance> verifier;
  int32_t k = 0;  // the arm's k cap (its own num_speculative_tokens or the engine's)
  double weight = 1.0;
  bool shadow = false;
};

class ArmVerifiers {
 public:
  // Creates every arm's verifier; throws specd::Error naming the arm and the reason.
  ArmVerifiers(const config::SpeculativeConfig& cfg, const plugin::Registry& registry, int64_t vocab_size);
  ~ArmVerifiers();

  size_t size() const { return arms_.size(); }
  const Arm& arm(size_t i) const { return arms_[i]; }
  // Some arm's verifier reads draft probabilities.
  bool needs_draft_probs() const { return needs_draft_probs_; }

  // Verifies `rows` (drafted, not failed, each with seq->arm set); see the file comment.
  // Returns whether any row was verified.
  bool verify(std::span<sched::StepRow* const> rows);
  // After verify(), where the step executes: the rows it verified, in buffer order (grouped by
  // serving arm), and row i's target probabilities at draft position j ([V]) and draft
  // probabilities there ([V]; nullptr when none were copied). Dynamic speculation's acceptance
  // evidence reads them (Speculator).
  std::span<sched::StepRow* const> verified_rows() const { return rows_; }
  const float* target_probs(size_t i, size_t j) const {
    return target_probs_.data() + (i * (static_cast<size_t>(k_) + 1) + j) * static_cast<size_t>(vocab_);
  }
  const float* draft_probs(size_t i, size_t j) const {
    return with_probs_ ? draft_probs_.data() + (i * static_cast<size_t>(k_) + j) * static_cast<size_t>(vocab_)
                       : nullptr;
  }
  // The record of the last verify(), moved into `into` (whose old buffers are reused); read once
  // the step is done.
  void take_record(ArmStepRecord& into);

 private:
  // Rows [lo, hi) of the step's buffers, all served by one arm.
  struct Range {
    size_t arm, lo, hi;
  };
  void fill(std::span<sched::StepRow* const> rows);
  void serve(const Range& r);
  void shadow(size_t s, const Range& r);
  // The verify batch of rows [lo, hi) with the given per-row draft counts and outputs.
  specd_verify_batch slice(const Range& r, const int32_t* num_drafted, int32_t* out_tokens, int32_t* num_accepted,
                           int32_t* out_nodes, bool with_probs) const;
  // The drafts before logit row j of `row`: the first j, or for a tree the path to node j - 1.
  std::span<const int32_t> drafts_before(const sched::StepRow& row, size_t j);
  // Nodes [0, a) of row i (of its first `drafted`) are a root-to-node path whose tokens were emitted.
  bool is_path(size_t i, int32_t drafted, const int32_t* out_nodes, const int32_t* out_tokens, int32_t a) const;
  // Throws specd::Error when the verifier's result for a row of r is out of range.
  void check(const Arm& arm, const Range& r, const int32_t* num_drafted, const int32_t* out_tokens,
             const int32_t* num_accepted, const int32_t* out_nodes) const;
  // Σ log p of the first n tokens of row i of `tokens` ([rows, k+1]); `nodes`: the accepted path
  // of a tree step ([rows, k]).
  float logprob(size_t i, const int32_t* tokens, int32_t n, const int32_t* nodes) const;

  std::vector<Arm> arms_;
  int64_t vocab_;
  bool any_shadow_ = false;
  bool needs_draft_probs_ = false;

  // Per-step buffers, reused. Row i of the step is rows_[i] (grouped by serving arm).
  std::vector<sched::StepRow*> rows_;
  std::vector<Range> ranges_;
  int32_t k_ = 0;            // largest draft count of the step: buffer stride
  bool with_probs_ = false;  // draft probabilities were copied
  std::vector<float> target_probs_, draft_probs_;
  std::vector<int32_t> drafts_, num_drafted_, out_tokens_, num_accepted_;
  bool trees_ = false;  // some row of the step drafted a tree: every row goes as a tree
  std::vector<int32_t> parents_, out_nodes_, shadow_nodes_, path_;
  std::vector<uint64_t> seeds_, steps_;
  std::vector<int32_t> shadow_drafted_, shadow_tokens_, shadow_accepted_;
  ArmStepRecord record_;
  std::vector<bool> shadow_warned_;  // [arm] its shadow failure was logged (once per arm)
};

}  // namespace specd::speculative
