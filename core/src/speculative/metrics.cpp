#include "specd/spec_metrics.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "specd/error.hpp"

namespace specd::spec {

void SpecMetrics::record(int32_t k, int32_t drafted, int32_t accepted, int32_t emitted) {
  SPECD_CHECK(drafted >= 0 && drafted <= k && accepted >= 0 && accepted <= drafted && emitted >= 0 &&
                  emitted <= accepted + 1,
              ErrorCode::kInternal,
              fmt::format("inconsistent speculative outcome k={} drafted={} accepted={} emitted={}", k, drafted,
                          accepted, emitted));
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

SpecMetrics SpecMetrics::since(const SpecMetrics& before) const {
  SpecMetrics d = *this;
  d.num_steps -= before.num_steps;
  d.num_drafts -= before.num_drafts;
  d.draft_tokens -= before.draft_tokens;
  d.accepted_tokens -= before.accepted_tokens;
  d.emitted_tokens -= before.emitted_tokens;
  d.draft_slots -= before.draft_slots;
  for (size_t i = 0; i < before.drafted_at.size() && i < d.drafted_at.size(); ++i) {
    d.drafted_at[i] -= before.drafted_at[i];
    d.accepted_at[i] -= before.accepted_at[i];
  }
  d.propose_seconds -= before.propose_seconds;
  d.score_seconds -= before.score_seconds;
  d.verify_seconds -= before.verify_seconds;
  return d;
}

std::string SpecMetrics::summary() const {
  std::string per_position;
  for (size_t i = 0; i < drafted_at.size(); ++i)
    per_position += fmt::format("{}{:.2f}", i == 0 ? "" : " ", acceptance_at(i));
  return fmt::format(
      "acceptance {:.3f} ({}/{}), mean length {:.2f}, efficiency {:.2f}, per position [{}], propose {:.1f} ms "
      "score {:.1f} ms verify {:.1f} ms",
      acceptance_rate(), accepted_tokens, draft_tokens, mean_acceptance_length(), system_efficiency(), per_position,
      propose_seconds * 1e3, score_seconds * 1e3, verify_seconds * 1e3);
}

}  // namespace specd::spec
