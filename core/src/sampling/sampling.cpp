#include "sampling/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "specd/error.hpp"
#include "specd/kernels/argmax.hpp"
#include "specd/kernels/softmax.hpp"
#include "specd/kernels/top_k_top_p.hpp"
#include "specd/sdk/philox.hpp"

namespace specd::sampling {

void transform_logits_to_probs(std::span<const float> logits, const SamplingParams& p,
                               std::span<float> probs) {
  const size_t V = logits.size();
  SPECD_CHECK(probs.size() == V && V > 0, ErrorCode::kInternal,
              "transform_logits_to_probs: probs must have the logits' (non-zero) size");
  const auto cols = static_cast<int64_t>(V);
  if (p.temperature == 0.0f) {
    int32_t best = 0;
    kernels::argmax(kernels::Device::kCpu, logits.data(), 1, cols, &best);
    std::fill(probs.begin(), probs.end(), 0.0f);
    probs[static_cast<size_t>(best)] = 1.0f;
    return;
  }
  float m = -std::numeric_limits<float>::infinity();
  for (float x : logits) m = std::max(m, x);
  SPECD_CHECK(std::isfinite(m), ErrorCode::kInvalidArgument,
              "transform_logits_to_probs: logits have no finite maximum");
  kernels::softmax(kernels::Device::kCpu, logits.data(), probs.data(), 1, cols, p.temperature);
  // min-p: relative to the most likely token, so unaffected by later renormalization.
  if (p.min_p > 0.0f) {
    float pmax = 0.0f;
    for (float x : probs) pmax = std::max(pmax, x);
    const float cut = p.min_p * pmax;
    for (float& x : probs) {
      if (x < cut) x = 0.0f;
    }
  }
  kernels::top_k_top_p(kernels::Device::kCpu, probs.data(), 1, cols, p.top_k, p.top_p);
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
