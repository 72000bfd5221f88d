#include "speculative/policy.hpp"

#include <algorithm>
#include <cmath>

#include "sched/scheduler.hpp"

namespace specd::speculative {

double expected_tokens(std::span<const double> accept, int32_t k) {
  double total = 1, run = 1;
  for (int32_t j = 0; j < k && static_cast<size_t>(j) < accept.size(); ++j) {
    run *= accept[static_cast<size_t>(j)];
    total += run;
  }
  return total;
}

double propose_cost(const StepBase& base, const CostModel& cost, int32_t steps, int32_t drafts, double catch_up) {
  return base.proposed_seconds >= 0 ? base.proposed_seconds : cost.propose_seconds(steps, drafts, catch_up);
}

double decode_seconds(const StepBase& base, double drafts, const CostModel& cost) {
  const double whole = cost.target_seconds(base.tokens + drafts, base.logit_rows + drafts);
  if (base.prefill_tokens <= 0) return whole;
  return whole - cost.target_seconds(base.tokens, base.logit_rows) +
         cost.target_seconds(base.tokens - base.prefill_tokens, base.logit_rows - base.prefill_rows);
}

Plan evaluate(const StepBase& base, std::span<const PlanRow> rows, std::span<const int32_t> k, const CostModel& cost,
              bool variable_k) {
  Plan p;
  p.tokens = base.emitted;
  int32_t steps = base.draft_steps, drafts = base.draft_tokens, planned = 0;
  double catch_up = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    p.tokens += expected_tokens(rows[i].accept, k[i]) - 1;  // the row's one plain token is in base
    steps = std::max(steps, k[i]);
    drafts += k[i];
    planned += k[i];
    if (k[i] > 0) catch_up += rows[i].catch_up;
  }
  if (!variable_k) {
    for (size_t i = 1; i < k.size(); ++i)
      if (k[i] != k[0]) return {};  // not a choice such a proposer can take
  }
  p.seconds = propose_cost(base, cost, steps, drafts, catch_up) + decode_seconds(base, planned, cost);
  return p;
}

SpeculationPolicy::SpeculationPolicy(int32_t k_max, int32_t max_tokens, bool variable_k)
    : cost_(max_tokens), acceptance_(k_max), tree_(k_max), variable_k_(variable_k), search_variable_(variable_k) {}

void SpeculationPolicy::sort_gains(std::span<const PlanRow> rows, int32_t max_k) {
  gains_.clear();
  for (size_t i = 0; i < rows.size(); ++i) {
    double run = 1;
    const int32_t n = std::min(rows[i].cap, max_k);
    for (int32_t j = 0; j < n; ++j) {
      run *= rows[i].accept[static_cast<size_t>(j)];
      gains_.push_back({run, static_cast<int32_t>(i), j == 0 ? rows[i].catch_up : 0.0});
    }
  }
  // A row's increments never grow, so (stable) the first S of them are a prefix per row.
  std::stable_sort(gains_.begin(), gains_.end(), [](const Gain& a, const Gain& b) { return a.value > b.value; });
}

Plan SpeculationPolicy::choose_k(const StepBase& base, std::span<const PlanRow> rows, std::span<int32_t> k) {
  std::fill(k.begin(), k.end(), 0);
  const Plan plain = evaluate(base, rows, k, cost_, true);
  // Drafting must beat plain decoding by kPlainMargin (see policy.hpp).
  const auto clearly_better = [&](const Plan& p) { return p.goodput() >= (1 + kPlainMargin) * plain.goodput(); };
  Plan best = plain;
  int32_t cap_max = 0, cap_min = rows.empty() ? 0 : rows.front().cap;
  for (const PlanRow& r : rows) {
    cap_max = std::max(cap_max, r.cap);
    cap_min = std::min(cap_min, r.cap);
  }
  if (!search_variable_) {  // one k for every row
    int32_t best_k = 0;
    for (int32_t u = 1; u <= cap_min; ++u) {
      std::fill(k.begin(), k.end(), u);
      const Plan p = evaluate(base, rows, k, cost_, false);
      if (p.goodput() > best.goodput()) {
        best = p;
        best_k = u;
      }
    }
    if (best_k > 0 && !clearly_better(best)) {
      best_k = 0;
      best = plain;
    }
    std::fill(k.begin(), k.end(), best_k);
    return best;
  }
  int32_t best_l = 0, best_s = 0;
  int32_t most = 0;  // the most drafts any L plans
  for (const PlanRow& r : rows) most += r.cap;
  decode_s_.resize(static_cast<size_t>(most) + 1);
  for (int32_t s = 1; s <= most; ++s) decode_s_[static_cast<size_t>(s)] = decode_seconds(base, s, cost_);
  // L below the static rows' largest k costs the same as L = that k with tighter caps: skip it,
  // but never past cap_max (planned rows that may draft less than the static rows still count).
  for (int32_t l = std::max(1, std::min(base.draft_steps, cap_max)); l <= cap_max; ++l) {
    sort_gains(rows, l);
    const int32_t steps = std::max(l, base.draft_steps);
    double tokens = base.emitted;
    double catch_up = 0;
    for (size_t s = 1; s <= gains_.size(); ++s) {
      tokens += gains_[s - 1].value;
      catch_up += gains_[s - 1].catch_up;
      const double seconds =
          propose_cost(base, cost_, steps, base.draft_tokens + static_cast<int32_t>(s), catch_up) + decode_s_[s];
      if (seconds > 0 && tokens / seconds > best.goodput()) {
        best = {tokens, seconds};
        best_l = l;
        best_s = static_cast<int32_t>(s);
      }
    }
  }
  if (best_s > 0 && !clearly_better(best)) return plain;
  if (best_s > 0) {
    sort_gains(rows, best_l);
    for (int32_t s = 0; s < best_s; ++s) ++k[static_cast<size_t>(gains_[static_cast<size_t>(s)].row)];
  }
  return best;
}

// The fewest idle steps before a probe costs at most kProbeBudget of the plain steps it follows:
// where a probe (one draft after its catch-up, and the row it adds to the target's forward) is
// dear beside a step (a tiny target whose step is 0.1 ms and a proposer call 2 ms; a batch that
// is compute-bound, where the extra row costs its share), probes thin out, past
// kMaxProbeInterval if need be.
int32_t SpeculationPolicy::probe_floor(const StepBase& base, int32_t catch_up) const {
  const double step = cost_.target_seconds(base.tokens, base.logit_rows);
  // The cost model's smoothed estimate even where this call's time is known (trimming): one slow
  // call must not hold the probes back for hundreds of steps.
  const double extra_row = std::max(0.0, cost_.target_seconds(base.tokens + 1, base.logit_rows + 1) - step);
  const double probe = cost_.propose_seconds(1, 1, catch_up) + extra_row;
  if (step <= 0 || probe <= 0) return 0;
  return static_cast<int32_t>(std::min<double>(1 << 30, std::ceil(probe / (kProbeBudget * step))));
}

Plan SpeculationPolicy::explore_up(const StepBase& base, std::span<const PlanRow> rows, std::span<int32_t> k,
                                   const Plan& best) {
  const int32_t largest = k.empty() ? 0 : *std::max_element(k.begin(), k.end());
  if (largest < 1) return best;  // plain decoding stays plain
  up_.assign(k.begin(), k.end());
  bool raised = false;
  for (size_t i = 0; i < k.size(); ++i) {
    if (k[i] == largest && k[i] < rows[i].cap) {
      ++up_[i];
      raised = true;
    }
  }
  if (!raised) return best;
  const Plan p = evaluate(base, rows, up_, cost_, search_variable_);
  if (p.seconds <= 0 || p.goodput() < (1 - kExploreBand) * best.goodput()) return best;
  std::copy(up_.begin(), up_.end(), k.begin());
  return p;
}

bool SpeculationPolicy::gather(sched::StepBatch& batch) {
  acceptance_.end_step();  // rows verified since the last step (observe_step folds them too)
  tree_.end_step();
  StepBase& base = base_;
  base = {};
  planned_rows_.clear();
  const auto k_max = static_cast<size_t>(acceptance_.k_max());
  for (sched::StepRow& row : batch.rows) {
    if (row.failed()) continue;
    base.tokens += row.n;
    const bool decoding = row.sample && row.n == 1;
    if (!decoding) base.prefill_tokens += row.n;
    if (!row.sample) continue;
    base.logit_rows += 1;
    if (!decoding) {
      base.prefill_rows += 1;
      continue;
    }
    base.emitted += 1;
    if (row.lookahead <= 0) continue;
    const RequestId id = row.seq->id;
    acceptance_.age(id);
    if (row.seq->dynamic_k) {
      planned_rows_.push_back(&row);
      continue;
    }
    // A static row drafts its lookahead (if the proposer finds that many).
    accept_.resize(k_max);
    predict(id, accept_);
    base.emitted += expected_tokens(accept_, row.lookahead) - 1;
    base.tokens += row.lookahead;
    base.logit_rows += row.lookahead;
    base.draft_steps = std::max(base.draft_steps, row.lookahead);
    base.draft_tokens += row.lookahead;
  }
  if (planned_rows_.empty()) {
    rows_.clear();
    return false;
  }
  const size_t n = planned_rows_.size();
  accept_.resize(n * k_max);
  rows_.resize(n);
  k_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const sched::StepRow& row = *planned_rows_[i];
    const std::span<double> a(accept_.data() + i * k_max, k_max);
    predict(row.seq->id, a);
    int32_t catch_up = 0;
    if (const auto it = drafted_len_.find(row.seq->id); it != drafted_len_.end())
      catch_up = static_cast<int32_t>(std::max<int64_t>(0, static_cast<int64_t>(row.seq->tokens.size()) - it->second));
    // The steps of drafting a resumed row's catch-up pays for (see policy.hpp "Catch-up").
    const int32_t remaining = row.seq->params.max_tokens - row.seq->num_generated();
    const double horizon = std::clamp(remaining / 2, 1, kCatchUpHorizon);
    rows_[i] = {std::min<int32_t>(row.lookahead, static_cast<int32_t>(k_max)), a, catch_up / horizon, catch_up};
  }
  return true;
}

void SpeculationPolicy::predict(RequestId id, std::span<double> accept) const {
  acceptance_.predict(id, accept);
  if (trees_) tree_.shape(accept);
}

void SpeculationPolicy::decide(spec::PolicyMetrics& metrics) {
  const size_t n = rows_.size();
  explore_up(base_, rows_, k_, choose_k(base_, rows_, k_));
  const bool drafting = base_.draft_steps > 0 || std::any_of(k_.begin(), k_.end(), [](int32_t k) { return k > 0; });
  idle_steps_ = drafting ? 0 : idle_steps_ + 1;
  if (drafting) probe_interval_ = kMinProbeInterval;
  if (idle_steps_ >= probe_interval_ && idle_steps_ >= probe_floor(base_, rows_[next_probe_ % n].catch_up_tokens)) {
    const size_t i = next_probe_++ % n;
    if (rows_[i].cap > 0) {
      k_[i] = 1;
      ++metrics.probes;
    }
    idle_steps_ = 0;
    probe_interval_ = std::min(2 * probe_interval_, kMaxProbeInterval);
  }
  ++metrics.steps;
  for (size_t i = 0; i < n; ++i) metrics.choose(k_[i]);
}

void SpeculationPolicy::plan(sched::StepBatch& batch, spec::PolicyMetrics& metrics) {
  trim_pending_ = trimmed_ = false;
  planned_ = gather(batch);
  if (!planned_) return;
  if (trimming_) {  // the proposer drafts each row's whole cap; trim() chooses
    for (size_t i = 0; i < rows_.size(); ++i) planned_rows_[i]->lookahead = rows_[i].cap;
    trim_pending_ = true;
    return;
  }
  search_variable_ = variable_k_;
  decide(metrics);
  for (size_t i = 0; i < rows_.size(); ++i) planned_rows_[i]->lookahead = k_[i];
}

void SpeculationPolicy::trim(std::span<sched::StepRow* const> rows, std::span<const float> confidence, size_t stride,
                             double propose_s, spec::PolicyMetrics& metrics) {
  if (!trim_pending_) return;
  trim_pending_ = false;
  trimmed_ = true;
  const auto k_max = static_cast<size_t>(acceptance_.k_max());
  const size_t n = planned_rows_.size();
  conf_.assign(n * k_max, -1.0f);
  prior_.assign(accept_.begin(), accept_.end());  // h: the estimates without confidence
  confidence_.age();
  size_t next = 0;  // rows and planned_rows_ are both in batch order
  for (size_t i = 0; i < n; ++i) {
    sched::StepRow* row = planned_rows_[i];
    size_t r = next;
    while (r < rows.size() && rows[r] != row) ++r;
    int32_t cap = 0;
    if (r < rows.size() && !row->failed() && !row->tree()) {
      next = r + 1;
      cap = static_cast<int32_t>(std::min(row->drafts.size(), std::min(k_max, stride)));
      for (size_t j = 0; j < static_cast<size_t>(cap); ++j) {
        const float c = confidence[r * stride + j];
        conf_[i * k_max + j] = c;
        accept_[i * k_max + j] = confidence_.predict(c, accept_[i * k_max + j]);
      }
    }
    rows_[i].cap = cap;
  }
  base_.proposed_seconds = std::max(0.0, propose_s);
  search_variable_ = true;  // the host cuts each row's draft itself
  decide(metrics);
  for (size_t i = 0; i < n; ++i) {
    sched::StepRow& row = *planned_rows_[i];
    if (row.tree() || row.drafts.size() <= static_cast<size_t>(k_[i])) continue;
    metrics.trimmed += row.drafts.size() - static_cast<size_t>(k_[i]);
    row.drafts = row.drafts.first(static_cast<size_t>(k_[i]));
  }
}

void SpeculationPolicy::observe_verified(const sched::StepRow& row, std::span<const double> evidence,
                                         spec::PolicyMetrics& metrics) {
  // A tree proposer's draft counts as a tree of its size even where it came out a chain: its
  // drafter makes a chain where it is confident and branches where it is not, and counting only
  // the branching ones valued every node budget by the drafter's unsure steps alone.
  if (trees_ && !row.drafts.empty() && !row.failed()) {
    int32_t deepest = static_cast<int32_t>(row.drafts.size());
    if (row.tree()) {  // parents come before their children: one pass gives every node's depth
      depth_.resize(row.draft_parents.size());
      deepest = 0;
      for (size_t j = 0; j < depth_.size(); ++j) {
        const int32_t parent = row.draft_parents[j];
        depth_[j] = parent >= 0 && static_cast<size_t>(parent) < j ? depth_[static_cast<size_t>(parent)] + 1 : 1;
        deepest = std::max(deepest, depth_[j]);
      }
    }
    tree_.observe_in_step(static_cast<int32_t>(row.drafts.size()), deepest, row.num_accepted);
  }
  // The prediction the plan was made with (rows keep their addresses until the next plan).
  const auto it = std::find(planned_rows_.begin(), planned_rows_.end(), &row);
  if (it != planned_rows_.end() && row.drafted()) {
    const auto i = static_cast<size_t>(it - planned_rows_.begin());
    ++metrics.drafts;
    metrics.predicted_accepted += expected_tokens(rows_[i].accept, static_cast<int32_t>(row.drafts.size())) - 1;
    metrics.accepted += static_cast<uint64_t>(row.num_accepted);
    // Trimmed: the calibration learns what each confidence was worth (a grammar may have
    // replaced drafts after the cut, so constrained rows teach nothing).
    if (trimmed_ && !row.seq->constraint) {
      const size_t m = std::min(evidence.size(), row.drafts.size());
      const auto k_max = static_cast<size_t>(acceptance_.k_max());
      for (size_t j = 0; j < m && j < k_max; ++j)
        confidence_.observe(conf_[i * k_max + j], prior_[i * k_max + j], evidence[j]);
    }
  }
  acceptance_.observe_in_step(row.seq->id, evidence);
}

void SpeculationPolicy::observe_step(const sched::StepBatch& batch, double propose_s, double target_s,
                                     spec::PolicyMetrics& metrics) {
  int32_t tokens = 0, logit_rows = 0, steps = 0, drafts = 0, catch_up = 0;
  for (const sched::StepRow& row : batch.rows) {
    const auto m = static_cast<int32_t>(row.drafts.size());
    tokens += row.n + m;
    if (!row.sample || row.failed()) continue;
    logit_rows += 1 + m;
    const auto len = static_cast<int64_t>(row.seq->tokens.size());
    const auto [it, first] = drafted_len_.try_emplace(row.seq->id, len);
    if (!row.speculates()) continue;
    steps = std::max(steps, row.lookahead);
    drafts += row.lookahead;
    if (!first) catch_up += static_cast<int32_t>(len - it->second);
    it->second = len + row.num_accepted + 1;  // its length once committed
  }
  if (planned_) {
    const double predicted_propose = cost_.propose_seconds(steps, drafts, catch_up);
    const double predicted = predicted_propose + cost_.target_seconds(tokens, logit_rows);
    metrics.predicted_seconds += predicted;
    metrics.observed_seconds += propose_s + target_s;
    metrics.abs_error_seconds += std::abs(predicted - propose_s - target_s);
    metrics.predicted_propose_seconds += predicted_propose;
    metrics.observed_propose_seconds += propose_s;
    planned_ = false;
  }
  acceptance_.end_step();
  tree_.end_step();
  cost_.observe_target(tokens, logit_rows, target_s);
  // The proposer's first call pays one-off costs (its buffers, the first touch of its weights and
  // KV): an EAGLE-3 head's took 14.8 ms where the same shape took 6-11 ms after it (batch 8), and
  // fitted alone it priced every later call 2-3x too dear. The fit starts with the second call.
  if (steps > 0 && propose_calls_++ > 0) cost_.observe_propose(steps, drafts, propose_s, catch_up);
}

}  // namespace specd::speculative
