// SpeculationPolicy: dynamic speculation, k_i per sequence and per step (docs/speculative.md
// "Dynamic speculation"). After the scheduler has reserved each decoding row's largest k (its
// lookahead: the request's k, the proposer's max_k, what max_tokens and the context leave) and
// before the proposer runs, plan() lowers the lookahead of every row whose request speculates
// dynamically to the k_i in [0, lookahead] that maximises the step's expected goodput (SmartSpec):
//
//   G(k) = (N_0 + Σ_i E_i(k_i)) / (propose_seconds(L, S) + D(S_d))
//   D(S_d) = target_seconds(T_0 + S_d, R_0 + S_d) − target_seconds(T_0, R_0)
//            + target_seconds(T_0 − P, R_0 − P_R)
//
//   E_i(k)    expected tokens row i emits with k drafts: 1 + Σ_{j<k} Π_{m<=j} accept_i[m]
//             (AcceptanceModel)
//   N_0       expected tokens of the other decoding rows (plain decodes, static k)
//   S_d       Σ k_i over the planned rows; S adds the static rows' k; L = max k over all rows
//   T_0, R_0  tokens and logit rows of the step with every planned k_i = 0 (CostModel)
//   P, P_R    tokens and logit rows of the step's prefill chunks (prompt ends included)
//
// G is the goodput of the step's decoding part: its plain cost, plus what the drafts add to the
// whole step. Without prefill chunks D is the step's target time. With them, charging the
// chunks' time (and counting a prompt end's token) would make the step's plain goodput low and
// any draft look cheap next to it: a step that finishes a 900-token prompt would draft 8 tokens
// per row at a marginal cost above plain decoding's cost per token.
//
// k_i = 0 is plain decoding for that row. Exact under the model without catch-up (below): for a
// fixed L and S the time is fixed and, E_i being concave in k (its increments are products of
// probabilities), the best split of S drafts takes the S largest increments with at most
// min(cap_i, L) per row; the policy enumerates L and S and keeps the best (ties: the smaller S).
// choose_k() is that search, exposed for tests together with evaluate() (the objective for any k).
//
// Catch-up: a row that resumes drafting first feeds the proposer the C_i tokens it appended
// since it last drafted (a draft model's KV; cost_model.hpp), so propose_seconds takes
// Σ_{k_i > 0} C_i besides S. The search charges C_i with the row's first increment; with it the
// S largest increments are no longer always the best split (a row's first draft carries a fixed
// cost), so the result is the best of those candidates. Left out, a step that resumed 8 rows
// after 30 plain steps looked like any drafting step; at batch 8 the policy then alternated
// between plain runs and drafting steps that each paid ~10 ms of catch-up the plan never saw,
// and ran at 0.87x plain. But the catch-up is work deferred, not added (every committed token
// goes through the proposer once, drafting or not), paid once for the steps that draft after
// it, and it grows with every plain step: charged whole to one step, a batch that once went
// plain found resuming dearer at every step and never did (16 rows of llama-160m's demo prompt
// with its EAGLE-3 head: 0.77x static k = 4). A step is charged C_i / H_i, H_i = the steps of
// drafting it buys, taken as half the row's remaining tokens, at most kCatchUpHorizon.
//
// Plain unless clearly better: a plan that drafts is taken only when its goodput beats the plan
// with every planned k_i = 0 by kPlainMargin. Near break-even (a compute-bound batch, drafts of
// middling acceptance) the gain the model sees is smaller than its own error (a few percent on a
// busy machine, more at step shapes it has barely run), and a wrong call there costs more than
// it can win: the drafts run, the rows that drafted race ahead, and the batch ends ragged. The
// margin costs at most kPlainMargin where drafting truly is a little better.
//
// Exploring upward: the cost model learns only the step shapes that run, so a larger k whose
// cost it over-predicts would never be tried. When the best plan drafts (L >= 1), the plan that
// gives its largest-k rows one draft more is taken instead if the model rates it within
// kExploreBand of the best (a flat top, where the model's own error decides); the step then
// teaches the model that shape, and a larger k that really costs more drops out of the band.
// A plan that does not draft is never pushed into drafting, so a compute-bound batch stays plain.
//
// Trees (set_trees): a row's k is its node budget, and its acceptance curve is TreeYield's
// (tree_yield.hpp): the chain curve up to the proposer's tree depth (or, where it does not say,
// the deepest tree verified), blended with what trees of each size accepted.
//
// A proposer without variable k gets one k for every planned row. When no row has drafted for
// the probe interval's planned steps, one row (in turn) gets k = 1 so the acceptance prior keeps
// being measured. The interval starts at kMinProbeInterval after any step that drafted and
// doubles after each probe up to kMaxProbeInterval: one unlucky early rejection (a 0.9-acceptance
// self-draft whose first draft fails) is re-measured within a few steps instead of leaving a short
// request plain, and a batch that stays plain pays about one probe per kMaxProbeInterval steps.
// Probes also wait until the idle steps' time is 1 / kProbeBudget times a probe's predicted
// cost (its propose with the catch-up, and the row it adds to the target's forward), however
// long that takes: probes never cost more than kProbeBudget of the plain steps they follow.
// Where a proposer call is dear beside a step they thin out past kMaxProbeInterval, and where
// the catch-up alone costs more per idle token than kProbeBudget of a step (MTP heads over a
// cache-resident target: ~60 us per token against 0.3 ms steps), a row that went plain stays
// plain until the plan itself finds drafting worth its catch-up. Capped at kMaxProbeInterval,
// such probes cost MTP on the bundled model 17-20% of its plain speed.
//
// Trimming (a proposer that reports confidence, ABI 1.6; docs/speculative.md "Proposer
// confidence"): plan() gives each planned row its whole lookahead and the proposer drafts what it
// finds, with a confidence per draft. trim() then makes the same choice on what was drafted:
// accept_i[j] is the acceptance model's estimate scaled by what the ConfidenceModel learnt of
// drafts of draft j's confidence (the estimate alone where a draft has none), cap_i the row's draft count, and the
// propose time is the call's measured time, a constant (it is spent). The rows keep their lookahead (the proposer was
// asked for it, and hears on_accept as usual); only their drafts are cut to k_i. The calibration learns from the
// verified drafts' evidence against their confidence. Not thread-safe: the engine's step thread owns it.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "sched/step_batch.hpp"
#include "specd/spec_metrics.hpp"
#include "speculative/acceptance_model.hpp"
#include "speculative/confidence_model.hpp"
#include "speculative/cost_model.hpp"
#include "speculative/tree_yield.hpp"

namespace specd::speculative {

// The part of a step the policy does not choose.
struct StepBase {
  double tokens = 0;             // T_0: tokens through the target with every planned k_i = 0
  double logit_rows = 0;         // R_0
  double emitted = 0;            // N_0 plus the one token every planned row emits
  int32_t draft_steps = 0;       // the largest static k
  int32_t draft_tokens = 0;      // Σ static k
  double prefill_tokens = 0;     // P: of T_0, the prefill chunks'
  double prefill_rows = 0;       // P_R: of R_0, the prompt ends'
  double proposed_seconds = -1;  // >= 0: the proposer already ran, in this time (trimming)
};

// A row the policy plans: k_i in [0, cap]; accept[j] for j < cap.
struct PlanRow {
  int32_t cap = 0;
  std::span<const double> accept;
  // C_i / H_i: the share of the catch-up (tokens fed to the proposer before the row's first
  // draft) charged to this step (see "Catch-up" above).
  double catch_up = 0;
  int32_t catch_up_tokens = 0;  // C_i itself (a probe pays all of it)
};

struct Plan {
  double tokens = 0;   // expected tokens emitted by the step
  double seconds = 0;  // predicted propose + target time
  double goodput() const { return seconds > 0 ? tokens / seconds : 0; }
};

// 1 + Σ_{j<k} Π_{m<=j} accept[m].
double expected_tokens(std::span<const double> accept, int32_t k);
// The propose time charged to a step: the measured one when the proposer already ran.
double propose_cost(const StepBase& base, const CostModel& cost, int32_t steps, int32_t drafts, double catch_up);
// D: the target time charged to the step's decoding part with `drafts` planned drafts.
double decode_seconds(const StepBase& base, double drafts, const CostModel& cost);
// The objective for the choice k (k.size() == rows.size()).
Plan evaluate(const StepBase& base, std::span<const PlanRow> rows, std::span<const int32_t> k, const CostModel& cost,
              bool variable_k);

class SpeculationPolicy {
 public:
  static constexpr int32_t kMinProbeInterval = 8;
  static constexpr int32_t kMaxProbeInterval = 64;
  static constexpr double kProbeBudget = 0.02;  // a probe's cost against the idle steps before it
  static constexpr double kExploreBand = 0.02;
  static constexpr double kPlainMargin = 0.03;
  static constexpr int32_t kCatchUpHorizon = 16;

  // k_max: the largest k any request may get; max_tokens: the scheduler's token budget.
  SpeculationPolicy(int32_t k_max, int32_t max_tokens, bool variable_k);

  CostModel& cost() { return cost_; }
  AcceptanceModel& acceptance() { return acceptance_; }
  ConfidenceModel& confidence() { return confidence_; }
  // The proposer reports confidence and drafts chains: plan() leaves the planned rows their
  // lookahead and trim() chooses k_i after the proposer ran (see the file comment).
  void set_trimming(bool on) { trimming_ = on; }
  // plan() left rows for trim(): the propose call should take confidences.
  bool trim_pending() const { return trim_pending_; }
  // The proposer drafts trees: a row's k is its node budget, valued by TreeYield; max_depth is
  // the proposer's deepest tree (ABI 1.9 max_tree_depth; 0: unknown).
  void set_trees(bool on, int32_t max_depth = 0) {
    trees_ = on;
    tree_.set_max_depth(max_depth);
    cost_.set_max_draft_steps(on ? max_depth : 0);  // a tree of n nodes takes min(n, depth) levels
  }
  const TreeYield& tree_yield() const { return tree_; }

  // The search: fills k (size rows.size()) with the best choice (plain where the best that drafts
  // is within kPlainMargin of it) and returns its objective.
  Plan choose_k(const StepBase& base, std::span<const PlanRow> rows, std::span<int32_t> k);
  // Exploring upward (see the file comment): k holds choose_k's choice, `best` its objective;
  // raises the rows at the largest k by one where that plan is within kExploreBand of `best`.
  // Returns the objective of what k holds afterwards.
  Plan explore_up(const StepBase& base, std::span<const PlanRow> rows, std::span<int32_t> k, const Plan& best);
  // The fewest idle steps before a probe with this catch-up stays within kProbeBudget.
  int32_t probe_floor(const StepBase& base, int32_t catch_up) const;

  // Lowers row.lookahead of the rows whose sequence has dynamic_k set (see the file comment).
  void plan(sched::StepBatch& batch, spec::PolicyMetrics& metrics);
  // After the propose call (trim_pending()): rows are the rows that proposed, in batch order;
  // confidence[r * stride + j] is draft j of rows[r] (-1: none); propose_s the call's time. Cuts
  // the planned rows' drafts to the chosen k_i.
  void trim(std::span<sched::StepRow* const> rows, std::span<const float> confidence, size_t stride, double propose_s,
            spec::PolicyMetrics& metrics);
  // A verified row: `evidence` per verified position (acceptance_model.hpp); the proposer-wide
  // prior takes the step's rows as one observation at observe_step (or the next plan).
  void observe_verified(const sched::StepRow& row, std::span<const double> evidence, spec::PolicyMetrics& metrics);
  // The step's measured times (the propose call; the target's forward through verification):
  // the cost model learns them (the proposer's first call excepted); a planned step also records
  // predicted against observed time.
  void observe_step(const sched::StepBatch& batch, double propose_s, double target_s, spec::PolicyMetrics& metrics);
  void release(RequestId id) {
    acceptance_.release(id);
    drafted_len_.erase(id);
  }

 private:
  struct Gain {
    double value;
    int32_t row;
    double catch_up;  // the row's charged catch-up on its first increment, else 0
  };
  // The S largest increments for a largest k of L, in order, in gains_.
  void sort_gains(std::span<const PlanRow> rows, int32_t max_k);
  // plan()'s first half: base_, planned_rows_ and rows_ (caps, the acceptance model's estimates,
  // catch-up) from the batch. Returns whether any row is planned.
  bool gather(sched::StepBatch& batch);
  // The choice for rows_ over base_ (choose_k, explore_up, probes) into k_, counted in metrics.
  void decide(spec::PolicyMetrics& metrics);
  // accept[j] for sequence id: the acceptance model's, as a tree curve for a tree proposer.
  void predict(RequestId id, std::span<double> accept) const;

  CostModel cost_;
  AcceptanceModel acceptance_;
  ConfidenceModel confidence_;
  TreeYield tree_;
  bool trees_ = false;
  bool variable_k_;       // the proposer takes a k per row
  bool search_variable_;  // the search may give rows different k (variable_k_, or trimming)
  bool trimming_ = false;
  bool trim_pending_ = false;  // plan() left this step's choice to trim()
  bool trimmed_ = false;       // this step's choice was trim()'s: conf_ holds its confidences
  bool planned_ = false;       // this step had planned rows
  int32_t idle_steps_ = 0;     // planned steps in a row without any draft
  int32_t probe_interval_ = kMinProbeInterval;
  int64_t propose_calls_ = 0;  // proposer calls seen by observe_step (the first is not fitted)
  uint32_t next_probe_ = 0;
  // Per-step buffers, reused.
  std::vector<Gain> gains_;
  std::vector<double> decode_s_;  // choose_k: decode_seconds of S planned drafts, the same for every L
  std::vector<PlanRow> rows_;
  std::vector<sched::StepRow*> planned_rows_;
  std::vector<double> accept_;  // [planned rows, k_max]
  std::vector<int32_t> k_;
  std::vector<int32_t> up_;     // explore_up's candidate
  std::vector<int32_t> depth_;  // observe_verified: a tree's node depths
  StepBase base_;               // this step's, from gather()
  std::vector<float> conf_;     // [planned rows, k_max] the drafts' confidences (trim())
  std::vector<double> prior_;   // [planned rows, k_max] their estimates without confidence
  // Per sequence: its length after the last step it drafted in (or when first seen), so that
  // a drafting row's catch-up (cost_model.hpp) is its length now minus this.
  std::unordered_map<RequestId, int64_t> drafted_len_;
};

}  // namespace specd::speculative
