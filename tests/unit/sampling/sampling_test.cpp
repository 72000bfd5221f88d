#include "sampling/sampling.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "specd/request.hpp"
#include "specd/sdk/philox.hpp"

namespace specd::sampling {
namespace {

// logits chosen so that softmax(logits) = {0.4, 0.3, 0.2, 0.1} at temperature 1.
std::vector<float> four() {
  return {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
}

std::vector<float> probs_of(const std::vector<float>& logits, const SamplingParams& p) {
  std::vector<float> out(logits.size());
  transform_logits_to_probs(logits, p, {}, out);
  return out;
}

void expect_probs(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "token " << i;
}

TEST(Transform, TemperatureOneIsSoftmax) {
  expect_probs(probs_of(four(), {}), {0.4, 0.3, 0.2, 0.1});
}

TEST(Transform, TemperatureZeroIsOneHotArgmax) {
  SamplingParams p;
  p.temperature = 0;
  p.top_k = 3;                                            // ignored
  expect_probs(probs_of({1, 5, 5, 2}, p), {0, 1, 0, 0});  // tie: lowest id
}

TEST(Transform, TemperatureSharpensAndFlattens) {
  SamplingParams p;
  p.temperature = 0.5f;  // p^2 normalized
  expect_probs(probs_of(four(), p), {0.16 / 0.30, 0.09 / 0.30, 0.04 / 0.30, 0.01 / 0.30});
  p.temperature = 1e6f;
  const auto flat = probs_of(four(), p);
  for (float x : flat) EXPECT_NEAR(x, 0.25, 1e-5);
}

TEST(Transform, TopK) {
  SamplingParams p;
  p.top_k = 2;
  expect_probs(probs_of(four(), p), {0.4 / 0.7, 0.3 / 0.7, 0, 0});
  p.top_k = 10;  // larger than the vocabulary: no-op
  expect_probs(probs_of(four(), p), {0.4, 0.3, 0.2, 0.1});
  p.top_k = -1;
  expect_probs(probs_of(four(), p), {0.4, 0.3, 0.2, 0.1});
}

TEST(Transform, TopP) {
  SamplingParams p;
  p.top_p = 0.7f;  // 0.4 + 0.3 reaches 0.7
  expect_probs(probs_of(four(), p), {0.4 / 0.7, 0.3 / 0.7, 0, 0});
  p.top_p = 0.71f;
  expect_probs(probs_of(four(), p), {0.4 / 0.9, 0.3 / 0.9, 0.2 / 0.9, 0});
  p.top_p = 0.01f;  // the most likely token always stays
  expect_probs(probs_of(four(), p), {1, 0, 0, 0});
}

TEST(Transform, MinP) {
  SamplingParams p;
  p.min_p = 0.45f;  // keep p >= 0.18
  expect_probs(probs_of(four(), p), {0.4 / 0.9, 0.3 / 0.9, 0.2 / 0.9, 0});
}

TEST(Transform, Combined) {
  SamplingParams p;
  p.min_p = 0.3f;  // drops 0.1
  p.top_k = 3;     // no further effect
  p.top_p = 0.6f;  // 0.4, then 0.3 (0.4 < 0.6 of the kept 0.9 mass -> 0.54)... keeps 2
  expect_probs(probs_of(four(), p), {0.4 / 0.7, 0.3 / 0.7, 0, 0});
}

TEST(Sample, InverseCdf) {
  const std::vector<float> p = {0.4f, 0.0f, 0.5f, 0.1f};
  EXPECT_EQ(sample_from_probs(p, 0.0f), 0);
  EXPECT_EQ(sample_from_probs(p, 0.39f), 0);
  EXPECT_EQ(sample_from_probs(p, 0.41f), 2);  // never the zero-probability token 1
  EXPECT_EQ(sample_from_probs(p, 0.95f), 3);
  EXPECT_EQ(sample_from_probs(p, 0.99999994f), 3);
}

TEST(Sample, UsesThePhiloxSampleLane) {
  EXPECT_EQ(sample_uniform(42, 7, 0), sdk::philox_uniform(42, 7, 0, sdk::kLaneSample));
  EXPECT_NE(sample_uniform(42, 7, 0), sample_uniform(42, 8, 0));
}

TEST(Sample, SeededReproducibleAndDistributionCorrect) {
  SamplingParams p;
  std::vector<float> scratch(4);
  std::vector<int32_t> a, b;
  for (uint64_t step = 0; step < 64; ++step) {
    a.push_back(sample_token(four(), p, {}, 1234, step, scratch));
    b.push_back(sample_token(four(), p, {}, 1234, step, scratch));
  }
  EXPECT_EQ(a, b);
  std::vector<int32_t> c;
  for (uint64_t step = 0; step < 64; ++step) c.push_back(sample_token(four(), p, {}, 99, step, scratch));
  EXPECT_NE(a, c);
  // Frequencies over many steps follow the distribution (4-sigma bounds).
  std::map<int32_t, int> count;
  const int n = 20000;
  for (uint64_t step = 0; step < static_cast<uint64_t>(n); ++step)
    ++count[sample_token(four(), p, {}, 5, step, scratch)];
  const double want[] = {0.4, 0.3, 0.2, 0.1};
  for (int t = 0; t < 4; ++t) {
    const double sd = std::sqrt(want[t] * (1 - want[t]) / n);
    EXPECT_NEAR(count[t] / static_cast<double>(n), want[t], 4 * sd) << t;
  }
}

TEST(Params, ValidationNamesTheField) {
  SamplingParams p;
  EXPECT_EQ(validate_sampling_params(p), "");
  p.top_p = 0;
  EXPECT_NE(validate_sampling_params(p).find("top_p"), std::string::npos);
  p = {};
  p.temperature = -1;
  EXPECT_NE(validate_sampling_params(p).find("temperature"), std::string::npos);
  p = {};
  p.max_tokens = 0;
  EXPECT_NE(validate_sampling_params(p).find("max_tokens"), std::string::npos);
  p = {};
  p.min_p = 2;
  EXPECT_NE(validate_sampling_params(p).find("min_p"), std::string::npos);
  p = {};
  p.top_k = -5;
  EXPECT_NE(validate_sampling_params(p).find("top_k"), std::string::npos);
  p = {};
  p.stop = {""};
  EXPECT_NE(validate_sampling_params(p).find("stop"), std::string::npos);
}

// ---- logit_bias, min_tokens and penalties (vLLM's order and formulas) ----------------------

std::vector<float> probs_with(const std::vector<float>& logits, const SamplingParams& p, const TokenHistory& h) {
  std::vector<float> out(logits.size());
  transform_logits_to_probs(logits, p, h, out);
  return out;
}

std::vector<double> softmax_of(const std::vector<double>& x) {
  double sum = 0;
  for (double v : x) sum += std::exp(v);
  std::vector<double> out;
  for (double v : x) out.push_back(std::exp(v) / sum);
  return out;
}

TEST(Controls, FrequencyAndPresencePenaltiesCountGeneratedTokensAndDraftsNotThePrompt) {
  SamplingParams p;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  const std::vector<int32_t> prompt = {3, 3, 3}, generated = {0, 0}, drafts = {0, 1};
  const TokenHistory h{prompt, generated, drafts, {}};
  const std::vector<float> l = four();
  // token 0 generated 3 times (2 committed + 1 draft), token 1 once; the prompt's 3s don't count.
  expect_probs(probs_with(l, p, h), softmax_of({l[0] - 1.5 - 0.25, l[1] - 0.5 - 0.25, l[2], l[3]}));
  // Without the drafts the counts are the committed ones only.
  expect_probs(probs_with(l, p, {prompt, generated, {}, {}}), softmax_of({l[0] - 1.0 - 0.25, l[1], l[2], l[3]}));
}

TEST(Controls, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogitsOfPromptAndOutput) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  const std::vector<int32_t> prompt = {0}, generated = {3};
  const std::vector<float> l = {2.0f, 1.0f, 0.0f, -1.0f};
  expect_probs(probs_with(l, p, {prompt, generated, {}, {}}), softmax_of({1.0, 1.0, 0.0, -2.0}));
}

TEST(Controls, GreedyPicksTheArgmaxOfPenalizedLogits) {
  SamplingParams p;
  p.temperature = 0;
  p.frequency_penalty = 2.0f;
  const std::vector<int32_t> generated = {0};
  expect_probs(probs_with(four(), p, {{}, generated, {}, {}}), {0, 1, 0, 0});
  expect_probs(probs_with(four(), p, {}), {1, 0, 0, 0});
}

TEST(Controls, LogitBiasAddsToTheLogit) {
  SamplingParams p;
  p.logit_bias = {{3, 100.0f}};
  p.temperature = 0;
  expect_probs(probs_with(four(), p, {}), {0, 0, 0, 1});
  p.temperature = 1;
  p.logit_bias = {{0, -100.0f}};
  const std::vector<float> l = four();
  expect_probs(probs_with(l, p, {}), softmax_of({l[0] - 100.0, l[1], l[2], l[3]}));
}

TEST(Controls, MinTokensMasksStopIdsUntilEnoughAreGenerated) {
  SamplingParams p;
  p.temperature = 0;
  p.min_tokens = 3;
  const std::vector<int32_t> stop = {0}, two = {2, 2}, three = {2, 2, 2}, one = {2};
  expect_probs(probs_with(four(), p, {{}, two, {}, stop}), {0, 1, 0, 0});    // 2 generated: 0 masked
  expect_probs(probs_with(four(), p, {{}, one, one, stop}), {0, 1, 0, 0});   // 1 + 1 draft: still masked
  expect_probs(probs_with(four(), p, {{}, three, {}, stop}), {1, 0, 0, 0});  // 3 generated: allowed
}

}  // namespace
}  // namespace specd::sampling
