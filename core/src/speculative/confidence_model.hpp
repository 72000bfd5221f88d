// ConfidenceModel: what a proposer's stated confidence in a draft is worth, for the dynamic
// speculation policy (policy.hpp "Trimming"; docs/speculative.md "Proposer confidence").
//
// A proposer that declares reports_confidence (ABI 1.6) gives each draft c in [0, 1], its own
// estimate that the draft is accepted given the drafts before it were: suffix decoding's share of
// the earlier continuations that agree. Such estimates are rarely calibrated (one earlier
// occurrence says 0.5 and is right 98% of the time on one workload, 30% on another), so the
// policy uses c as a key: it learns, for drafts of similar confidence (the same tenth of [0, 1]),
// how their measured acceptance compares with the estimate it would use without confidence, and
// scales that estimate by it:
//
//   predict(c, h) = min(1, h · (A_b + kPriorWeight) / (H_b + kPriorWeight)),  b = the bucket of c
//
// h is the acceptance model's estimate for the draft's sequence and position (which keeps what
// the position says: a draft deep in a chain whose start was accepted is likelier to be accepted
// than the first). A_b is the evidence (acceptance_model.hpp: 1/0 or the lossless acceptance
// probability) and H_b the sum of h of the verified drafts whose confidence fell in bucket b,
// both decayed by kDecay per observation in the bucket (about the last 200 count) and by
// kStepDecay per step (age()), so that a bucket whose drafts stopped being scored drifts back to
// a factor of 1 and gets tried again. Without evidence the policy does what it does without
// confidence.
//
// Not thread-safe: the engine's step thread owns it.
#pragma once

#include <array>
#include <cstddef>

namespace specd::speculative {

class ConfidenceModel {
 public:
  static constexpr size_t kBuckets = 10;
  static constexpr double kPriorWeight = 2.0;
  static constexpr double kDecay = 0.995;
  static constexpr double kStepDecay = 0.998;

  // Whether c is a confidence at all (finite, >= 0); a proposer leaves -1 where it has none.
  static bool known(float c);
  // P(accepted | confidence c) for a draft whose estimate without confidence is h; h itself
  // where c is not known().
  double predict(float c, double h) const;
  // One verified draft of confidence c (not known(): ignored), estimate h, evidence in [0, 1].
  void observe(float c, double h, double evidence);
  // One planned step passed: every bucket's evidence ages.
  void age();

  double evidence_in(size_t bucket) const { return seen_[bucket]; }

 private:
  static size_t bucket(float c);
  std::array<double, kBuckets> accepted_{};   // A_b
  std::array<double, kBuckets> predicted_{};  // H_b
  std::array<double, kBuckets> seen_{};       // decayed count, for evidence_in
};

}  // namespace specd::speculative
