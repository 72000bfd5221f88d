// CostModel: what one engine step costs, learned on the machine and model at hand, for the
// dynamic speculation policy (policy.hpp; docs/speculative.md "Dynamic speculation").
//
//   target_seconds(T, R)    the step's target work: one forward of T tokens of which R need
//                           logits, plus sampling and verification of those R rows
//   propose_seconds(L, S, C)  one propose call that drafts up to L tokens for a sequence (L
//                           draft steps, the largest k_i) and S tokens in all (Σ k_i), for rows
//                           that went C steps in all without drafting since they last drafted
//                           (catch-up: a draft model feeds the tokens it has not seen first)
//
// Target: a start-up calibration times real forwards (T = 1, 2, 4, ... with logits for every
// token, and one with a single logit row) and gives the prior shape P(T) at R = T plus the cost
// c of one logit row; prediction = m(T) · (P(T) − c · (T − R)), where m(T) is a correction
// interpolated between knots (T = 1, 2, 3, 4, 6, 8, 12, ...) and learned from the steps that run
// as log(observed / prior) per knot: the mean of its first 3 observations, then an EWMA with
// bounded steps (a step shape the policy just tried, e.g. the first with drafts at a batch
// size, is learned within a few steps rather than ~20). A knot with few observations leans on the
// correction of all observations, so a machine that got slower is seen at every T at once. (A
// batch of many sequences pays per sequence what the one-sequence calibration never saw, and the
// factor carries that onto larger steps too: 16 rows of llama-160m with an EAGLE-3 head, 21.4 ms
// a plain step against 12.9 calibrated, had their first drafts priced at 36 ms where they took
// about 27. Leaning on the plain step's cost plus the calibration's for the extra tokens fixed
// that, but under-priced a compute-bound batch of 32, which then drafted at 0.77-0.84x plain;
// reverted, docs/speculative.md "Batches and trees under dynamic k".) The prediction never falls
// below that of any knot at or below T (cost grows with T). The first step near each knot is not
// learned (it pays its shape's one-off costs).
//
// Propose: seconds = a + b · L + c · (S + C) (a per call, b per draft step: a draft model's
// forward; c per token through the draft: a draft, or a catch-up token fed before the first
// draft), fitted by exponentially weighted least squares (ridge towards 0), each coefficient
// kept >= 0. Without C a row that resumes drafting after many plain steps (a probe) makes one
// call look expensive, and the fit charges that to a, b and c: every later prediction is too
// high and the policy keeps k = 0. C shares c rather than getting its own coefficient: it is
// rarely non-zero, and a free coefficient fitted on those few calls (the first of a run, on a
// busy machine) came out 5x too dear. Until the first propose call it predicts 0.
// A tree proposer's draft steps are its levels: a budget of n nodes takes min(n, depth) forwards
// (set_max_draft_steps), not n. Fitted on L = n, a tree of 3 nodes' whole call was put mostly on
// b (the ridge spreads a cost that never varies over a and b as 1 : L) and a 4th node looked 30%
// dearer to draft than it was.
//
// All times in seconds. Not thread-safe: the engine's step thread owns it.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace specd::model {
class LlamaModel;
}
namespace specd::kv {
class KvCache;
}

namespace specd::speculative {

struct TargetSample {
  int32_t tokens = 0;      // T
  int32_t logit_rows = 0;  // R
  double seconds = 0;
};

class CostModel {
 public:
  // Knots cover T up to max_tokens (the scheduler's token budget).
  explicit CostModel(int32_t max_tokens = 2048);

  // The prior from start-up measurements: samples with R = T give P at their T (interpolated
  // between them, extrapolated past the last with the slope of the last two), a sample with
  // R < T gives c. Resets what was learned.
  void set_target_prior(std::span<const TargetSample> samples);

  double target_seconds(double tokens, double logit_rows) const;
  double propose_seconds(int32_t draft_steps, int32_t draft_tokens, double catch_up = 0) const;

  void observe_target(int32_t tokens, int32_t logit_rows, double seconds);
  void observe_propose(int32_t draft_steps, int32_t draft_tokens, double seconds, int32_t catch_up = 0);

  double logit_row_seconds() const { return logit_row_s_; }
  // A proposer's draft steps never exceed this (a tree's depth; 0: no limit): L above it is
  // priced, and observed, as this many steps.
  void set_max_draft_steps(int32_t steps) { max_draft_steps_ = std::max(steps, 0); }

 private:
  struct Knot {
    int32_t tokens = 0;
    double prior = 0;     // P(T) at this knot, seconds
    double log_corr = 0;  // EWMA of log(observed / prior)
    double weight = 0;    // observations (interpolation weights), capped
    double scale = 1;     // exp(effective_log_correction): refreshed after every change, read per plan
    bool shown = false;   // a step near this knot was seen (its first one is not learned)
  };
  // The knots around T and the weight of the lower one (1 at or below the first knot).
  size_t bracket(double tokens, double& lower_weight) const;
  double prior_at(double tokens) const;
  // A knot's correction, leaning on the machine-wide one while it has few observations.
  double effective_log_correction(const Knot& k) const;
  double log_correction_at(double tokens) const;
  // Each knot's scale from its correction and the global one (the policy prices dozens of step
  // shapes per plan; each used to take an exp per knot below it).
  void refresh_scales();

  std::vector<Knot> knots_;
  double logit_row_s_ = 0;
  double global_log_corr_ = 0;  // EWMA of log(observed / prior) over every observation

  // Propose: decayed normal equations of y = x·β, x = (1, L, S + C).
  static constexpr size_t kProposeFeatures = 3;
  std::array<double, kProposeFeatures * kProposeFeatures> xtx_{};
  std::array<double, kProposeFeatures> xty_{};
  std::array<double, kProposeFeatures> beta_{};
  bool propose_seen_ = false;
  int32_t max_draft_steps_ = 0;
  int32_t draft_steps(int32_t l) const { return max_draft_steps_ > 0 ? std::min(l, max_draft_steps_) : l; }
};

// Times forwards of the engine's target on a scratch sequence (its KV blocks are freed again)
// for T = 1, 2, 4, ... up to max_tokens while the total stays within budget_s, plus one
// forward with a single logit row; returns the samples for CostModel::set_target_prior.
std::vector<TargetSample> calibrate_target(model::LlamaModel& model, kv::KvCache& kv, int32_t max_tokens,
                                           double budget_s);

}  // namespace specd::speculative
