#include "speculative/confidence_model.hpp"

#include <algorithm>
#include <cmath>

namespace specd::speculative {

bool ConfidenceModel::known(float c) {
  return std::isfinite(c) && c >= 0;
}

size_t ConfidenceModel::bucket(float c) {
  const double x = std::clamp(static_cast<double>(c), 0.0, 1.0);
  return std::min(kBuckets - 1, static_cast<size_t>(x * static_cast<double>(kBuckets)));
}

double ConfidenceModel::predict(float c, double h) const {
  if (!known(c)) return h;
  const size_t b = bucket(c);
  return std::min(1.0, h * (accepted_[b] + kPriorWeight) / (predicted_[b] + kPriorWeight));
}

void ConfidenceModel::observe(float c, double h, double evidence) {
  if (!known(c)) return;
  const size_t b = bucket(c);
  accepted_[b] = kDecay * accepted_[b] + std::clamp(evidence, 0.0, 1.0);
  predicted_[b] = kDecay * predicted_[b] + std::clamp(h, 0.0, 1.0);
  seen_[b] = kDecay * seen_[b] + 1.0;
}

void ConfidenceModel::age() {
  for (size_t b = 0; b < kBuckets; ++b) {
    accepted_[b] *= kStepDecay;
    predicted_[b] *= kStepDecay;
    seen_[b] *= kStepDecay;
  }
}

}  // namespace specd::speculative
