// AcceptanceModel: how likely each sequence's next drafts are to be accepted, for the dynamic
// speculation policy (policy.hpp; docs/speculative.md "Dynamic speculation").
//
// accept[j] = P(draft j is accepted | drafts 0..j-1 were), j < k_max. The expected number of
// tokens a step emits for a row given k drafts is then 1 + Σ_{j<k} Π_{i<=j} accept[i].
//
// Evidence is one value in [0, 1] per verified position (the drafts up to and including the
// first rejection): 1/0 for accepted/rejected, or, under a lossless verifier, the probability
// that rejection sampling accepts the draft, Σ_v min(p_j(v), q_j(v)) (q one-hot for a proposer
// without draft probabilities), which has the same mean and less noise.
//
//   proposer-wide prior  per position, exponentially decayed sums over every sequence's
//                        evidence, one observation per step: the mean of the step's rows that
//                        reached the position (about the last 200 steps with verified drafts
//                        count, at every position, so evidence at a depth no longer drafted
//                        fades). Rows of one step are not independent evidence: a batch of
//                        the same prompt meets the same hard token at once, and counted row by
//                        row, 8 rejections in the first step of such a batch put the prior at
//                        0.18 and kept an EAGLE-3 head that accepts 0.93 plain for whole
//                        requests at batch 8 (0.56x its static k = 4). A position with little
//                        evidence leans on the position before it (position 0 on 0.5) and, by
//                        one pseudo-observation, on "accepted": a depth the policy has not tried
//                        looks a little better than the one before it, so it gets tried
//                        (optimism under uncertainty) and the estimate there becomes measured;
//                        where evidence is plentiful the pseudo-observation is negligible
//   per sequence         per position, decayed sums with the prior as kPriorWeight pseudo-
//                        observations; every step the sequence is planned the sums decay
//                        (about the last 10 steps count), so a sequence that stops drafting
//                        drifts back to the prior and the policy tries it again when the prior
//                        says so
//
// Not thread-safe: the engine's step thread owns it.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "specd/request.hpp"

namespace specd::speculative {

class AcceptanceModel {
 public:
  explicit AcceptanceModel(int32_t k_max);

  int32_t k_max() const { return k_max_; }
  // accept[j] for j < accept.size() (<= k_max) for sequence `id` (the prior for an unseen one).
  void predict(RequestId id, std::span<double> accept) const;
  // A step was planned for `id`: its evidence ages by one step.
  void age(RequestId id);
  // Evidence of one verified draft of `id` (positions 0..n-1) joins its sums at once and the
  // prior's as a step of its own.
  void observe(RequestId id, std::span<const double> evidence);
  // The same for one row of a step: the prior takes the step's rows when end_step() is called.
  void observe_in_step(RequestId id, std::span<const double> evidence);
  void end_step();
  void release(RequestId id) { seqs_.erase(id); }

  // The proposer-wide acceptance at position j.
  double prior(int32_t j) const { return prior_[static_cast<size_t>(j)]; }

 private:
  struct Evidence {
    std::vector<float> accepted;  // [k_max] decayed sums of evidence
    std::vector<float> seen;      // [k_max] decayed counts
  };
  Evidence& state(RequestId id);
  void update_prior();

  int32_t k_max_;
  Evidence global_;
  Evidence step_;              // the current step's rows: sums and row counts per position
  std::vector<double> prior_;  // [k_max]
  std::unordered_map<RequestId, Evidence> seqs_;
};

}  // namespace specd::speculative
