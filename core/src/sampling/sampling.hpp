// Logits → probabilities → token, per request. The transform is shared with the speculative
// scorer, which applies each request's transform to every one of the target's k+1 rows so that
// verifiers compare draft tokens against the distribution the request actually samples from.
#pragma once

#include <cstdint>
#include <span>

#include "specd/request.hpp"

namespace specd::constrain {
class SequenceConstraint;
}

namespace specd::sampling {

// What the sampler of one position knows of its sequence: the prompt, the tokens generated
// before the position (committed ones, then the drafts before it in a speculative row), and the
// stop ids min_tokens masks. Penalties and min_tokens read it; position i of a drafted row sees
// drafts 0..i-1 as generated, so it gets exactly the distribution plain decoding would.
struct TokenHistory {
  std::span<const int32_t> prompt;
  std::span<const int32_t> generated;
  std::span<const int32_t> drafts;
  std::span<const int32_t> stop_ids;
  // The sequence's structured-output state after its committed tokens (null = unconstrained):
  // tokens the grammar forbids after the drafts are masked (constrain/constraint.hpp).
  const constrain::SequenceConstraint* constraint = nullptr;
  size_t num_generated() const { return generated.size() + drafts.size(); }
};

// probs[i] = the probability that `params` draws token i from `logits`, in order:
//   logit_bias, min_tokens (stop ids -inf while fewer than min_tokens were generated),
//   repetition penalty (prompt and generated tokens), frequency and presence penalties
//   (generated tokens), the structured-output mask (history.constraint), then temperature 0 →
//   one-hot at argmax (ties: lowest id); else softmax(logits / temperature) → min-p → top-k →
//   top-p → renormalize.
// logits and probs have the vocabulary's size (may not alias). Allocation-free after the
// first call on a thread.
void transform_logits_to_probs(std::span<const float> logits, const SamplingParams& params, const TokenHistory& history,
                               std::span<float> probs);

// The token whose cumulative-probability interval contains u in [0, 1) (inverse CDF over
// token ids in order); never a zero-probability token.
int32_t sample_from_probs(std::span<const float> probs, float u);

// The uniform the request uses to sample the token emitted at speculative `position` of
// decode step `step` (Philox lane kLaneSample, as the verifiers key it). Plain decoding
// uses position 0.
float sample_uniform(uint64_t seed, uint64_t step, uint32_t position = 0);

// How a sampled token is drawn from its probabilities (model.sampler): the inverse CDF at one
// Philox uniform, or the counter-based Gumbel-max race of sdk/gumbel.hpp, whose noise the
// `coupled` verifier shares (same seed, same output with speculation on or off).
enum class Sampler { kInverseCdf, kGumbel };

// transform + draw: the token a request emits at `step` (greedy needs no randomness).
// probs_scratch must have the vocabulary's size.
int32_t sample_token(std::span<const float> logits, const SamplingParams& params, const TokenHistory& history,
                     uint64_t seed, uint64_t step, std::span<float> probs_scratch,
                     Sampler sampler = Sampler::kInverseCdf);

}  // namespace specd::sampling
