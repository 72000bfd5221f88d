#include "speculative/acceptance_model.hpp"

#include <algorithm>

namespace specd::speculative {
namespace {

constexpr float kPriorDecay = 0.995f;  // per step with verified drafts, at every position
constexpr float kSeqDecay = 0.9f;      // per planned step of the sequence
constexpr double kPriorWeight = 2.0;   // pseudo-observations of the prior in a sequence's estimate
constexpr double kChainWeight = 2.0;   // pseudo-observations of position j-1 in the prior at j
constexpr double kInitial = 0.5;       // the chain's start: position 0 before any evidence
constexpr double kOptimism = 1.0;      // pseudo-observations of "accepted" in the prior at every j

}  // namespace

AcceptanceModel::AcceptanceModel(int32_t k_max)
    : k_max_(std::max(k_max, 1)),
      global_{std::vector<float>(static_cast<size_t>(k_max_), 0.0f),
              std::vector<float>(static_cast<size_t>(k_max_), 0.0f)},
      step_(global_),
      prior_(static_cast<size_t>(k_max_), kInitial) {
  update_prior();
}

void AcceptanceModel::update_prior() {
  double previous = kInitial;
  for (size_t j = 0; j < prior_.size(); ++j) {
    prior_[j] =
        (global_.accepted[j] + kChainWeight * previous + kOptimism) / (global_.seen[j] + kChainWeight + kOptimism);
    previous = prior_[j];
  }
}

void AcceptanceModel::predict(RequestId id, std::span<double> accept) const {
  const size_t n = std::min(accept.size(), prior_.size());
  const auto it = seqs_.find(id);
  for (size_t j = 0; j < n; ++j) {
    if (it == seqs_.end()) {
      accept[j] = prior_[j];
    } else {
      accept[j] = (it->second.accepted[j] + kPriorWeight * prior_[j]) / (it->second.seen[j] + kPriorWeight);
    }
  }
}

AcceptanceModel::Evidence& AcceptanceModel::state(RequestId id) {
  auto [it, inserted] = seqs_.try_emplace(id);
  if (inserted) {
    it->second.accepted.assign(static_cast<size_t>(k_max_), 0.0f);
    it->second.seen.assign(static_cast<size_t>(k_max_), 0.0f);
  }
  return it->second;
}

void AcceptanceModel::age(RequestId id) {
  Evidence& e = state(id);
  for (size_t j = 0; j < e.seen.size(); ++j) {
    e.accepted[j] *= kSeqDecay;
    e.seen[j] *= kSeqDecay;
  }
}

void AcceptanceModel::observe(RequestId id, std::span<const double> evidence) {
  observe_in_step(id, evidence);
  end_step();
}

void AcceptanceModel::observe_in_step(RequestId id, std::span<const double> evidence) {
  Evidence& e = state(id);
  const size_t n = std::min(evidence.size(), e.seen.size());
  for (size_t j = 0; j < n; ++j) {
    const auto x = static_cast<float>(std::clamp(evidence[j], 0.0, 1.0));
    e.accepted[j] += x;
    e.seen[j] += 1.0f;
    step_.accepted[j] += x;
    step_.seen[j] += 1.0f;
  }
}

void AcceptanceModel::end_step() {
  if (step_.seen[0] == 0.0f) return;                  // no row of the step verified a draft
  for (size_t j = 0; j < global_.seen.size(); ++j) {  // positions the step did not reach age too
    global_.accepted[j] *= kPriorDecay;
    global_.seen[j] *= kPriorDecay;
    if (step_.seen[j] > 0.0f) {  // one observation: the mean of the rows that reached j
      global_.accepted[j] += step_.accepted[j] / step_.seen[j];
      global_.seen[j] += 1.0f;
    }
    step_.accepted[j] = step_.seen[j] = 0.0f;
  }
  update_prior();
}

}  // namespace specd::speculative
