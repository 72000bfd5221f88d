#include "sampling/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "constrain/constraint.hpp"
#include "specd/error.hpp"
#include "specd/kernels/argmax.hpp"
#include "specd/kernels/softmax.hpp"
#include "specd/kernels/top_k_top_p.hpp"
#include "specd/sdk/gumbel.hpp"
#include "specd/sdk/philox.hpp"

namespace specd::sampling {
namespace {

bool adjusts_logits(const SamplingParams& p, const TokenHistory& h) {
  return !p.logit_bias.empty() || (p.min_tokens > 0 && h.num_generated() < static_cast<size_t>(p.min_tokens)) ||
         p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
}

// vLLM's order: logit_bias and min_tokens, then the penalties (apply_penalties).
void adjust_logits(std::span<float> logits, const SamplingParams& p, const TokenHistory& h) {
  const size_t V = logits.size();
  for (const auto& [id, bias] : p.logit_bias)
    if (id >= 0 && static_cast<size_t>(id) < V) logits[static_cast<size_t>(id)] += bias;
  if (p.min_tokens > 0 && h.num_generated() < static_cast<size_t>(p.min_tokens))
    for (int32_t id : h.stop_ids)
      if (id >= 0 && static_cast<size_t>(id) < V)
        logits[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool counted = p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  if (!repetition && !counted) return;
  // Per-token counts of generated tokens and a seen mark for prompt tokens, reset through the
  // list of tokens touched (no per-call pass over the vocabulary).
  thread_local std::vector<int32_t> count;
  thread_local std::vector<uint8_t> in_prompt;
  thread_local std::vector<int32_t> touched;
  if (count.size() < V) {
    count.assign(V, 0);
    in_prompt.assign(V, 0);
  }
  touched.clear();
  auto touch = [&](int32_t t) {
    const auto u = static_cast<size_t>(t);
    if (t < 0 || u >= V) return false;
    if (count[u] == 0 && in_prompt[u] == 0) touched.push_back(t);
    return true;
  };
  if (repetition)
    for (int32_t t : h.prompt)
      if (touch(t)) in_prompt[static_cast<size_t>(t)] = 1;
  for (std::span<const int32_t> part : {h.generated, h.drafts})
    for (int32_t t : part)
      if (touch(t)) ++count[static_cast<size_t>(t)];
  for (int32_t t : touched) {
    const auto u = static_cast<size_t>(t);
    float& x = logits[u];
    if (repetition) x = x > 0.0f ? x / p.repetition_penalty : x * p.repetition_penalty;
    if (count[u] > 0) x -= p.frequency_penalty * static_cast<float>(count[u]) + p.presence_penalty;
    count[u] = 0;
    in_prompt[u] = 0;
  }
}

}  // namespace

void transform_logits_to_probs(std::span<const float> raw, const SamplingParams& p, const TokenHistory& history,
                               std::span<float> probs) {
  const size_t V = raw.size();
  SPECD_CHECK(probs.size() == V && V > 0, ErrorCode::kInternal,
              "transform_logits_to_probs: probs must have the logits' (non-zero) size");
  const auto cols = static_cast<int64_t>(V);
  std::span<const float> logits = raw;
  if (adjusts_logits(p, history) || history.constraint != nullptr) {
    std::copy(raw.begin(), raw.end(), probs.begin());
    adjust_logits(probs, p, history);
    if (history.constraint != nullptr) history.constraint->mask_logits(probs, history.drafts, history.stop_ids);
    logits = probs;  // softmax and argmax below read and write the same buffer (they may alias)
  }
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

int32_t sample_token(std::span<const float> logits, const SamplingParams& params, const TokenHistory& history,
                     uint64_t seed, uint64_t step, std::span<float> probs_scratch, Sampler sampler) {
  // Greedy on unadjusted logits: the argmax itself, without the one-hot distribution and a
  // second pass over it (the same token; a few microseconds per step on a small model).
  if (params.temperature == 0.0f && !logits.empty() && !adjusts_logits(params, history) &&
      history.constraint == nullptr) {
    int32_t best = 0;
    kernels::argmax(kernels::Device::kCpu, logits.data(), 1, static_cast<int64_t>(logits.size()), &best);
    return best;
  }
  transform_logits_to_probs(logits, params, history, probs_scratch);
  if (params.temperature == 0.0f) {
    return static_cast<int32_t>(std::max_element(probs_scratch.begin(), probs_scratch.end()) - probs_scratch.begin());
  }
  if (sampler == Sampler::kGumbel) {
    const int32_t token =
        sdk::gumbel_sample(probs_scratch.data(), static_cast<int64_t>(probs_scratch.size()), seed, step);
    SPECD_CHECK(token >= 0, ErrorCode::kInternal, "sample_token: all-zero distribution");
    return token;
  }
  return sample_from_probs(probs_scratch, sample_uniform(seed, step));
}

}  // namespace specd::sampling
