#include "sampling/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "specd/error.hpp"
#include "specd/sdk/philox.hpp"

namespace specd::sampling {

void transform_logits_to_probs(std::span<const float> logits, const SamplingParams& p,
                               std::span<float> probs) {
  const size_t V = logits.size();
  SPECD_CHECK(probs.size() == V && V > 0, ErrorCode::kInternal,
              "transform_logits_to_probs: probs must have the logits' (non-zero) size");
  if (p.temperature == 0.0f) {
    size_t best = 0;
    for (size_t i = 1; i < V; ++i) {
      if (logits[i] > logits[best] || std::isnan(logits[best])) best = i;
    }
    std::fill(probs.begin(), probs.end(), 0.0f);
    probs[best] = 1.0f;
    return;
  }
  // Softmax of logits / T.
  const double inv_t = 1.0 / static_cast<double>(p.temperature);
  float m = -std::numeric_limits<float>::infinity();
  for (float x : logits) m = std::max(m, x);
  SPECD_CHECK(std::isfinite(m), ErrorCode::kInvalidArgument,
              "transform_logits_to_probs: logits have no finite maximum");
  double sum = 0.0;
  for (size_t i = 0; i < V; ++i) {
    const double e = std::exp((static_cast<double>(logits[i]) - m) * inv_t);
    probs[i] = static_cast<float>(e);
    sum += e;
  }
  float pmax = 0.0f;
  for (size_t i = 0; i < V; ++i) {
    probs[i] = static_cast<float>(probs[i] / sum);
    pmax = std::max(pmax, probs[i]);
  }
  // min-p: relative to the most likely token, so unaffected by later renormalization.
  if (p.min_p > 0.0f) {
    const float cut = p.min_p * pmax;
    for (float& x : probs) {
      if (x < cut) x = 0.0f;
    }
  }
  const bool use_top_k = p.top_k > 0 && static_cast<size_t>(p.top_k) < V;
  const bool use_top_p = p.top_p < 1.0f;
  if (use_top_k || use_top_p) {
    thread_local std::vector<int32_t> idx;
    idx.resize(V);
    std::iota(idx.begin(), idx.end(), 0);
    // Descending probability, ties by lower id so that results are deterministic.
    auto more_likely = [&](int32_t a, int32_t b) {
      return probs[static_cast<size_t>(a)] > probs[static_cast<size_t>(b)] ||
             (probs[static_cast<size_t>(a)] == probs[static_cast<size_t>(b)] && a < b);
    };
    size_t keep = V;
    if (use_top_k) {
      keep = static_cast<size_t>(p.top_k);
      std::nth_element(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(keep), idx.end(), more_likely);
      for (size_t i = keep; i < V; ++i) probs[static_cast<size_t>(idx[i])] = 0.0f;
    }
    if (use_top_p) {
      std::sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(keep), more_likely);
      double total = 0.0;
      for (size_t i = 0; i < keep; ++i) total += probs[static_cast<size_t>(idx[i])];
      // Keep token i while the mass before it is below top_p (the first always stays).
      double before = 0.0;
      for (size_t i = 0; i < keep; ++i) {
        const size_t id = static_cast<size_t>(idx[i]);
        if (i > 0 && before >= static_cast<double>(p.top_p) * total) {
          probs[id] = 0.0f;
        } else {
          before += probs[id];
        }
      }
    }
  }
  double kept = 0.0;
  for (float x : probs) kept += x;
  const auto inv = static_cast<float>(1.0 / kept);
  for (float& x : probs) x *= inv;
}

int32_t sample_from_probs(std::span<const float> probs, float u) {
  double total = 0.0;
  for (float x : probs) total += x;
  const double target = static_cast<double>(u) * total;
  double cum = 0.0;
  int32_t last_nonzero = -1;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.0f) continue;
    cum += probs[i];
    last_nonzero = static_cast<int32_t>(i);
    if (cum > target) return last_nonzero;
  }
  SPECD_CHECK(last_nonzero >= 0, ErrorCode::kInternal, "sample_from_probs: all-zero distribution");
  return last_nonzero;  // rounding left u*total at the very end
}

float sample_uniform(uint64_t seed, uint64_t step, uint32_t position) {
  return sdk::philox_uniform(seed, step, position, sdk::kLaneSample);
}

int32_t sample_token(std::span<const float> logits, const SamplingParams& params, uint64_t seed,
                     uint64_t step, std::span<float> probs_scratch) {
  transform_logits_to_probs(logits, params, probs_scratch);
  if (params.temperature == 0.0f) {
    return static_cast<int32_t>(std::max_element(probs_scratch.begin(), probs_scratch.end()) -
                                probs_scratch.begin());
  }
  return sample_from_probs(probs_scratch, sample_uniform(seed, step));
}

}  // namespace specd::sampling
