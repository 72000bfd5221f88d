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
//      row.num_accepted, row.emitted and row.emitted_logprob (a failing verifier fails its
//      arm's rows only);
//   3. every shadow arm (speculative.shadow) verifies the rows the other arms served, with the
//      same buffers and its own output buffers, drafts cut to its k. Nothing it decides is
//      emitted: the outcome goes to row.shadows. A failing shadow verifier is logged and
//      counted; the requests go on.
//
// No extra forward runs for a shadow arm: its cost is its verifier call, measured per call
// (calls(): ShadowMetrics::counterfactual.verify_seconds; ShadowOutcome::seconds per row).
//
// Threading: verify() runs where the step executes (the model worker with async scheduling).
// The A/B metrics are the engine's (like the engine-wide acceptance metrics): it adds this
// step's calls() when it collects the step (record_calls) and each row's outcome when it
// processes the row's output (record_row), both on the engine thread. The arms themselves
// (names, k, weights, verifier names and capabilities) never change after construction.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "plugin/registry.hpp"
#include "sched/step_batch.hpp"
#include "specd/spec_metrics.hpp"

namespace specd::speculative {

struct Arm {
  std::string name;
  std::unique_ptr<plugin::VerifierInstance> verifier;
  int32_t k = 0;  // the arm's k cap (its own num_speculative_tokens or the engine's)
  double weight = 1.0;
  bool shadow = false;
};

// One verifier call of a step: an arm serving its own rows (served == arm), or a shadow arm
// verifying the rows another arm served.
struct VerifierCall {
  int32_t arm = 0;
  int32_t served = 0;
  double seconds = 0;
  bool failed = false;
};

// The engine's A/B metrics (see the file comment). record_calls: per call, steps served or
// shadowed, verify seconds and shadow failures. record_row: a row its arm served was committed
// with `emitted` tokens appended (stop conditions may cut the accepted + 1 the verifier
// emitted); k = the row's k cap (lookahead).
void record_calls(std::vector<spec::ArmMetrics>& m, std::span<const VerifierCall> calls);
void record_row(std::vector<spec::ArmMetrics>& m, int32_t arm, int32_t k, int32_t drafted, int32_t accepted,
                int32_t emitted, float emitted_logprob, std::span<const sched::ShadowOutcome> shadows);

class ArmVerifiers {
 public:
  // Creates every arm's verifier; throws specd::Error naming the arm and the reason.
  ArmVerifiers(const config::SpeculativeConfig& cfg, const plugin::Registry& registry, int64_t vocab_size);
  ~ArmVerifiers();

  size_t size() const { return arms_.size(); }
  const Arm& arm(size_t i) const { return arms_[i]; }
  bool any_shadow() const { return any_shadow_; }
  // Some arm's verifier reads draft probabilities.
  bool needs_draft_probs() const { return needs_draft_probs_; }

  // Verifies `rows` (drafted, not failed, each with seq->arm set); see the file comment.
  // Returns whether any row was verified.
  bool verify(std::span<sched::StepRow* const> rows);
  // The verifier calls of the last verify(), in order (read once the step is done).
  std::span<const VerifierCall> calls() const { return calls_; }
  // All-zero metrics, one per arm, each with a shadow entry per arm.
  std::vector<spec::ArmMetrics> zero_metrics() const;

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
                           bool with_probs) const;
  // Throws specd::Error when the verifier's result for a row of r is out of range.
  void check(const Arm& arm, const Range& r, const int32_t* num_drafted, const int32_t* out_tokens,
             const int32_t* num_accepted) const;
  // Σ log p of the first n tokens of row i of `tokens` ([rows, k+1]).
  float logprob(size_t i, const int32_t* tokens, int32_t n) const;

  std::vector<Arm> arms_;
  int64_t vocab_;
  bool any_shadow_ = false;
  bool needs_draft_probs_ = false;

  // Per-step buffers, reused. Row i of the step is rows_[i] (grouped by serving arm).
  std::vector<sched::StepRow*> rows_;
  std::vector<Range> ranges_;
  int32_t k_ = 0;             // largest draft count of the step: buffer stride
  bool with_probs_ = false;   // draft probabilities were copied
  std::vector<float> target_probs_, draft_probs_;
  std::vector<int32_t> drafts_, num_drafted_, out_tokens_, num_accepted_;
  std::vector<uint64_t> seeds_, steps_;
  std::vector<int32_t> shadow_drafted_, shadow_tokens_, shadow_accepted_;
  std::vector<sched::ShadowOutcome> outcomes_;  // [rows, arms]
  std::vector<VerifierCall> calls_;
  std::vector<bool> shadow_warned_;  // [arm] its shadow failure was logged (once per arm)
};

}  // namespace specd::speculative
