// Speculative-decoding metrics (ARCHITECTURE.md "Metrics"), kept per engine, per request and
// per proposer/verifier arm. Plain counters: the owner serialises updates (the engine step
// thread); readers take copies.
//
//   acceptance rate          = accepted / draft tokens
//   mean acceptance length   = 1 + accepted / drafts          (tokens per target forward)
//   acceptance at position i = drafts whose draft i was accepted / drafts that had a draft i
//   system efficiency        = emitted / Σ(k_i + 1) over drafts (1.0 = every slot used)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace specd::spec {

// Dynamic speculation (speculative.dynamic; docs/speculative.md "Dynamic speculation"): what the
// policy chose and how well its models predicted what happened. Counters and sums; ratios are
// derived (predicted / observed).
struct PolicyMetrics {
  uint64_t steps = 0;              // steps with at least one row the policy planned
  std::vector<uint64_t> chosen_k;  // [k] rows the policy gave k drafts (0 = plain decoding)
  uint64_t probes = 0;             // rows given k = 1 to re-measure acceptance after a long pause
  uint64_t trimmed = 0;            // drafts cut after the proposer's confidence (policy.hpp "Trimming")
  // Rows the policy planned that drafted: expected accepted drafts (the acceptance model's
  // prediction for the drafts actually proposed) against the accepted drafts.
  uint64_t drafts = 0;
  double predicted_accepted = 0;
  uint64_t accepted = 0;
  // Steps the policy planned: the cost model's time for the step as it ran (propose + target
  // work, at the step's actual token counts) against the measured time, and Σ |difference|.
  double predicted_seconds = 0;
  double observed_seconds = 0;
  double abs_error_seconds = 0;
  double predicted_propose_seconds = 0;  // the propose call's part of the two above
  double observed_propose_seconds = 0;
  double calibration_seconds = 0;  // the start-up calibration of the target's cost

  void choose(int32_t k);
  // "chosen k [0:12 3:40 4:7], accepted 101 of 96.4 predicted over 47 drafts, step time 812.0 ms
  // observed vs 790.3 ms predicted over 59 steps (mean |error| 6.1%; propose 90.2 ms observed vs
  // 88.0 ms predicted)"
  std::string summary() const;
};

// One series a proposer records (ABI 1.4 record; docs/plugin-abi.md "Observations"): how many
// observations and their sum, since the engine started.
struct ProposerSeries {
  std::string name;
  uint64_t count = 0;
  double sum = 0;
};

struct SpecMetrics {
  uint64_t num_steps = 0;             // engine steps that ran the speculative loop
  uint64_t num_drafts = 0;            // (sequence, step) pairs with at least one draft token
  uint64_t draft_tokens = 0;          // tokens proposed
  uint64_t accepted_tokens = 0;       // draft tokens accepted
  uint64_t emitted_tokens = 0;        // tokens appended by drafted sequences (accepted + 1 each)
  uint64_t draft_slots = 0;           // Σ (k_i + 1) over drafts: the denominator of efficiency
  std::vector<uint64_t> drafted_at;   // [position] drafts that proposed a token there
  std::vector<uint64_t> accepted_at;  // [position] drafts whose token there was accepted
  double propose_seconds = 0;
  double score_seconds = 0;
  double verify_seconds = 0;
  PolicyMetrics policy;
  std::vector<ProposerSeries> proposer_series;  // the proposer's own observations

  // One sequence's outcome in one step: k = proposal budget, drafted <= k, accepted <=
  // drafted, emitted = tokens appended (accepted + 1 unless a stop condition cut it short).
  void record(int32_t k, int32_t drafted, int32_t accepted, int32_t emitted);
  void add_times(double propose_s, double score_s, double verify_s);

  double acceptance_rate() const;
  double mean_acceptance_length() const;
  double system_efficiency() const;
  double acceptance_at(size_t position) const;
  // Counters of `this` minus those of an earlier snapshot `before` (for a measured interval).
  SpecMetrics since(const SpecMetrics& before) const;

  // "acceptance 0.734 (2201/2998), mean length 3.20, efficiency 0.61, per position
  // [0.91 0.80 0.70 0.52], propose 12.1 ms score 80.2 ms verify 1.3 ms"
  std::string summary() const;
};

// A/B testing (docs/ab-testing.md): what one arm did while serving and, as a shadow, what it
// would have done with the drafts of the steps other arms served. Indexes are arm indexes
// (EngineInfo::arms).
//
//   token disagreement = differing_tokens / compared_tokens: at the positions both the shadow
//                        and the serving arm emit, how often their tokens differ (same uniforms)
//   mean log p         = logprob_sum / logprob_tokens: target log-probability (after the
//                        request's sampling transforms) of the tokens the verifier emitted
struct ShadowMetrics {
  // Counterfactual counters: drafts cut to the shadow arm's k, emitted = accepted + 1 (no stop
  // conditions), verify_seconds = the shadow verifier's calls, num_steps = steps it shadowed.
  SpecMetrics counterfactual;
  uint64_t compared_tokens = 0;
  uint64_t differing_tokens = 0;
  double logprob_sum = 0;
  uint64_t logprob_tokens = 0;
  uint64_t failures = 0;  // shadow verifier calls that failed (the served requests went on)
};

struct ArmMetrics {
  uint64_t num_requests = 0;  // requests assigned to the arm
  SpecMetrics serving;        // the steps it served; verify_seconds = its own verifier calls
  double logprob_sum = 0;
  uint64_t logprob_tokens = 0;
  // [serving arm] this arm as a shadow of that arm's steps (all zero where it is not one).
  std::vector<ShadowMetrics> shadow;
};

}  // namespace specd::spec
