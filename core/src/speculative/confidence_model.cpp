#include "speculative/confidence_model.hpp"

#include <algorithm>
#include <cmath>

namespace specd::speculative {

bool ConfidenceModel::known(float c) { return std::isfinite(c) && c >= 0; }

size_t ConfidenceModel::bucket(float c) {
  const double x = std::clamp(static_cast<double>(c), 0.0, 1.0);
  return std::min(kBuckets - 1, static_cast<size_t>(x * static_cast<double>(kBuckets)));
}

double ConfidenceModel::predict(float c, double fallback) const {
  if (!known(c)) return fallback;
  const size_t b = bucket(c);
  const double prior = std::min(static_cast<double>(c), 1.0);
  return (accepted_[b] + kPriorWeight * prior) / (seen_[b] + kPriorWeight);
}

void ConfidenceModel::observe(float c, double evidence) {
  if (!known(c)) return;
  const size_t b = bucket(c);
  accepted_[b] = kDecay * accepted_[b] + std::clamp(evidence, 0.0, 1.0);
  seen_[b] = kDecay * seen_[b] + 1.0;
}

}  // namespace specd::speculative
