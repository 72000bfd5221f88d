// ConfidenceModel: what a proposer's stated confidence in a draft is worth, for the dynamic
// speculation policy (policy.hpp "Trimming"; docs/speculative.md "Proposer confidence").
//
// A proposer that declares reports_confidence (ABI 1.6) gives each draft c in [0, 1], its own
// estimate that the draft is accepted given the drafts before it were: suffix decoding's share of
// the earlier continuations that agree. Such estimates are rarely calibrated (one earlier
// occurrence says 1.0 and is often wrong), so the policy maps c to a measured acceptance:
//
//   predict(c) = (A_b + kPriorWeight · c) / (N_b + kPriorWeight),  b = the bucket of c
//
// A_b and N_b are the evidence (acceptance_model.hpp: 1/0 or the lossless acceptance
// probability) of the drafts whose confidence fell in bucket b, exponentially decayed per
// observation in that bucket (about the last 200 count); the proposer's own c is the prior, worth
// kPriorWeight observations. Buckets are tenths of [0, 1]; the last one holds 1.
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

  // Whether c is a confidence at all (finite, >= 0); a proposer leaves -1 where it has none.
  static bool known(float c);
  // P(accepted | confidence c); `fallback` where c is not known().
  double predict(float c, double fallback) const;
  // One verified draft of confidence c (not known(): ignored) with evidence in [0, 1].
  void observe(float c, double evidence);

  double evidence_in(size_t bucket) const { return seen_[bucket]; }

 private:
  static size_t bucket(float c);
  std::array<double, kBuckets> accepted_{};
  std::array<double, kBuckets> seen_{};
};

}  // namespace specd::speculative
