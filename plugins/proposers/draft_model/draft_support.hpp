// Pieces shared by the model-backed proposers (draft_model, mtp): the choice of a draft token
// from a row of logits (greedy, or an inverse-CDF sample driven by the request's Philox stream),
// restricted to what the request's grammar allows (structured output, ABI 1.5).
// Header-only, built into each plugin; SDK headers only (model services: sdk/model_client.hpp).
#pragma once

#include <specd/sdk/gumbel.hpp>
#include <specd/sdk/philox.hpp>
#include <specd/sdk/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace specd::proposers {

// Philox lane used to sample drafts; lanes 0 and 1 belong to the verifier (philox.hpp).
inline constexpr int kDraftLane = 2;

// Structured output: sets the logits of the tokens the sequence's grammar forbids after `prefix`
// (its drafts so far) to -inf, so that drafts are drawn from the constrained distribution and
// the host need not cut them. False when the grammar allows nothing there (past a stop token,
// or a complete text): the sequence stops drafting. True, logits untouched, when the sequence
// has no constraint (or the host predates ABI 1.5).
inline bool mask_by_grammar(const sdk::Host& host, uint64_t seq_id, std::span<const int32_t> prefix,
                            std::span<float> logits) {
  thread_local std::vector<uint64_t> mask;
  mask.assign((logits.size() + 63) / 64, 0);
  if (!host.allowed_tokens(seq_id, prefix, mask)) return true;
  if (std::all_of(mask.begin(), mask.end(), [](uint64_t w) { return w == 0; })) return false;
  for (size_t v = 0; v < logits.size(); ++v)
    if (((mask[v / 64] >> (v % 64)) & 1) == 0) logits[v] = -std::numeric_limits<float>::infinity();
  return true;
}

// Index of the largest logit; the lowest id wins ties.
inline int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t v = 1; v < logits.size(); ++v)
    if (logits[v] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(v);
  return best;
}

// probs = softmax(logits / temperature), temperature > 0. probs has logits.size() entries.
inline void softmax(std::span<const float> logits, float temperature, std::span<float> probs) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (size_t v = 0; v < logits.size(); ++v) {
    probs[v] = std::exp((logits[v] - max) / temperature);
    sum += probs[v];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (float& p : probs) p *= inv;
}

// Inverse CDF: the smallest t with probs[0] + ... + probs[t] > u (float running sum, ids in
// order). When rounding leaves the total at or below u, the last token with nonzero mass.
inline int32_t sample_inverse_cdf(std::span<const float> probs, float u) {
  float cdf = 0;
  int32_t last_nonzero = 0;
  for (size_t t = 0; t < probs.size(); ++t) {
    if (probs[t] <= 0) continue;
    cdf += probs[t];
    last_nonzero = static_cast<int32_t>(t);
    if (cdf > u) return last_nonzero;
  }
  return last_nonzero;
}

// Draft j of a sequence from its logits row: greedy when temperature == 0, else a sample from
// softmax(logits / temperature): the inverse CDF at u = philox_uniform(seed, step, j,
// kDraftLane), or (gumbel) the Gumbel-max race with the noise of generated position step + j
// (sdk/gumbel.hpp), which the `coupled` verifier shares. The probability row is written to probs
// (which must then be non-empty).
inline int32_t choose_draft(std::span<const float> logits, float temperature, uint64_t seed, uint64_t step, int32_t j,
                            std::span<float> probs, bool gumbel = false) {
  if (temperature <= 0) return argmax(logits);
  softmax(logits, temperature, probs);
  if (gumbel)
    return sdk::gumbel_sample(probs.data(), static_cast<int64_t>(probs.size()), seed, step + static_cast<uint64_t>(j));
  return sample_inverse_cdf(probs, sdk::philox_uniform(seed, step, static_cast<uint32_t>(j), kDraftLane));
}

// The `draft_sampler` parameter both proposers share: true for gumbel (drafts drawn with the
// noise the `coupled` verifier uses, which raises its acceptance), false for inverse_cdf.
inline bool read_gumbel_drafts(sdk::Params& params) {
  return params.get_choice("draft_sampler", "inverse_cdf", {"inverse_cdf", "gumbel"}) == "gumbel";
}

// The `temperature` parameter both proposers share.
inline float read_temperature(sdk::Params& params) {
  return static_cast<float>(params.get_float("temperature", 0.0, 0.0, 1.0e4));
}

// The `draft_p_min` parameter both proposers share (0 = off): drafting stops at the first
// position whose confidence is below it (as llama.cpp's --draft-p-min).
inline float read_draft_p_min(sdk::Params& params) {
  return static_cast<float>(params.get_float("draft_p_min", 0.0, 0.0, 1.0));
}

// The draft's confidence at a position: the largest probability of its distribution there,
// softmax(logits / temperature), with temperature 1 for greedy drafting (`probs`: the row
// choose_draft filled when temperature > 0). It depends only on the context and the earlier
// drafts, never on the token drawn at this position, so stopping on it only shortens the draft:
// rejection sampling stays lossless and greedy verification exact. For greedy drafting, logits
// more than 16 below the largest are left out of the sum (each adds under 1.2e-7 of it).
inline float confidence(std::span<const float> logits, float temperature, std::span<const float> probs) {
  if (temperature > 0 && !probs.empty()) return *std::max_element(probs.begin(), probs.end());
  const float max = *std::max_element(logits.begin(), logits.end());
  float sum = 0;
  for (const float l : logits)
    if (l > max - 16.0f) sum += std::exp(l - max);
  return 1.0f / sum;
}

}  // namespace specd::proposers
