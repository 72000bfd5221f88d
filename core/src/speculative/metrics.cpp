#include <fmt/format.h>

#include <algorithm>

#include "specd/error.hpp"
#include "specd/spec_metrics.hpp"

namespace specd::spec {
namespace {

// a - b element by element; b may be shorter (positions or k values seen later).
std::vector<uint64_t> minus(std::vector<uint64_t> a, const std::vector<uint64_t>& b) {
  for (size_t i = 0; i < b.size() && i < a.size(); ++i) a[i] -= b[i];
  return a;
}

}  // namespace

void PolicyMetrics::choose(int32_t k) {
  const auto i = static_cast<size_t>(k);
  if (chosen_k.size() <= i) chosen_k.resize(i + 1, 0);
  ++chosen_k[i];
}

void SpecMetrics::record(int32_t k, int32_t drafted, int32_t accepted, int32_t emitted) {
  SPECD_CHECK(
      drafted >= 0 && drafted <= k && accepted >= 0 && accepted <= drafted && emitted >= 0 && emitted <= accepted + 1,
      ErrorCode::kInternal,
      fmt::format("inconsistent speculative outcome k={} drafted={} accepted={} emitted={}", k, drafted, accepted,
                  emitted));
  if (drafted == 0) return;
  ++num_drafts;
  draft_tokens += static_cast<uint64_t>(drafted);
  accepted_tokens += static_cast<uint64_t>(accepted);
  emitted_tokens += static_cast<uint64_t>(emitted);
  draft_slots += static_cast<uint64_t>(k) + 1;
  if (drafted_at.size() < static_cast<size_t>(drafted)) {
    drafted_at.resize(static_cast<size_t>(drafted), 0);
    accepted_at.resize(static_cast<size_t>(drafted), 0);
  }
  for (int32_t i = 0; i < drafted; ++i) ++drafted_at[static_cast<size_t>(i)];
  for (int32_t i = 0; i < accepted; ++i) ++accepted_at[static_cast<size_t>(i)];
}

void SpecMetrics::add_times(double propose_s, double score_s, double verify_s) {
  ++num_steps;
  propose_seconds += propose_s;
  score_seconds += score_s;
  verify_seconds += verify_s;
}

SpecMetrics SpecMetrics::since(const SpecMetrics& before) const {
  SpecMetrics d = *this;
  d.num_steps -= before.num_steps;
  d.num_drafts -= before.num_drafts;
  d.draft_tokens -= before.draft_tokens;
  d.accepted_tokens -= before.accepted_tokens;
  d.emitted_tokens -= before.emitted_tokens;
  d.draft_slots -= before.draft_slots;
  d.drafted_at = minus(drafted_at, before.drafted_at);
  d.accepted_at = minus(accepted_at, before.accepted_at);
  d.propose_seconds -= before.propose_seconds;
  d.score_seconds -= before.score_seconds;
  d.verify_seconds -= before.verify_seconds;
  for (ProposerSeries& s : d.proposer_series)
    for (const ProposerSeries& e : before.proposer_series)
      if (e.name == s.name) {
        s.count -= e.count;
        s.sum -= e.sum;
      }
  PolicyMetrics& p = d.policy;
  const PolicyMetrics& b = before.policy;
  p.steps -= b.steps;
  p.chosen_k = minus(policy.chosen_k, b.chosen_k);
  p.probes -= b.probes;
  p.trimmed -= b.trimmed;
  p.drafts -= b.drafts;
  p.predicted_accepted -= b.predicted_accepted;
  p.accepted -= b.accepted;
  p.predicted_seconds -= b.predicted_seconds;
  p.observed_seconds -= b.observed_seconds;
  p.abs_error_seconds -= b.abs_error_seconds;
  p.predicted_propose_seconds -= b.predicted_propose_seconds;
  p.observed_propose_seconds -= b.observed_propose_seconds;
  return d;
}

double SpecMetrics::acceptance_rate() const {
  return draft_tokens == 0 ? 0.0 : static_cast<double>(accepted_tokens) / static_cast<double>(draft_tokens);
}

double SpecMetrics::mean_acceptance_length() const {
  return num_drafts == 0 ? 0.0 : 1.0 + static_cast<double>(accepted_tokens) / static_cast<double>(num_drafts);
}

double SpecMetrics::system_efficiency() const {
  return draft_slots == 0 ? 0.0 : static_cast<double>(emitted_tokens) / static_cast<double>(draft_slots);
}

double SpecMetrics::acceptance_at(size_t position) const {
  if (position >= drafted_at.size() || drafted_at[position] == 0) return 0.0;
  return static_cast<double>(accepted_at[position]) / static_cast<double>(drafted_at[position]);
}

std::string SpecMetrics::summary() const {
  std::string per_position;
  for (size_t i = 0; i < drafted_at.size(); ++i)
    per_position += fmt::format("{}{:.2f}", i == 0 ? "" : " ", acceptance_at(i));
  std::string out = fmt::format(
      "acceptance {:.3f} ({}/{}), mean length {:.2f}, efficiency {:.2f}, per position [{}], propose {:.1f} ms "
      "score {:.1f} ms verify {:.1f} ms",
      acceptance_rate(), accepted_tokens, draft_tokens, mean_acceptance_length(), system_efficiency(), per_position,
      propose_seconds * 1e3, score_seconds * 1e3, verify_seconds * 1e3);
  if (policy.steps > 0) out += "; dynamic k: " + policy.summary();
  return out;
}

std::string PolicyMetrics::summary() const {
  std::string hist;
  for (size_t k = 0; k < chosen_k.size(); ++k)
    if (chosen_k[k] > 0) hist += fmt::format("{}{}:{}", hist.empty() ? "" : " ", k, chosen_k[k]);
  std::string trimmed;
  if (this->trimmed > 0) trimmed = fmt::format(" ({} drafts trimmed by confidence)", this->trimmed);
  return fmt::format(
      "chosen k [{}]{}, accepted {} of {:.1f} predicted over {} drafts, step time {:.1f} ms observed vs {:.1f} ms "
      "predicted over {} steps (mean |error| {:.1f}%; propose {:.1f} ms observed vs {:.1f} ms predicted)",
      hist, trimmed, accepted, predicted_accepted, drafts, observed_seconds * 1e3, predicted_seconds * 1e3, steps,
      observed_seconds > 0 ? 100.0 * abs_error_seconds / observed_seconds : 0.0, observed_propose_seconds * 1e3,
      predicted_propose_seconds * 1e3);
}

}  // namespace specd::spec
