// The counter-based Gumbel-max sampler (sdk/gumbel.hpp, model.sampler: gumbel): its draws follow
// the distribution (chi-square goodness of fit, with a negative control that the test rejects),
// depend only on (seed, position), skip filtered-out tokens, and with shared noise two close
// distributions draw the same token far more often than independent draws would.
#include "specd/sdk/gumbel.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sampling/sampling.hpp"
#include "specd/request.hpp"

namespace specd::sampling {
namespace {

// Pearson's statistic of `n` draws at positions 0..n-1 against `want`.
double chi_square(const std::vector<float>& p, const std::vector<double>& want, uint64_t seed, int n) {
  std::vector<int> count(p.size(), 0);
  for (int g = 0; g < n; ++g)
    ++count[static_cast<size_t>(sdk::gumbel_sample(p.data(), 6, seed, static_cast<uint64_t>(g)))];
  double x2 = 0;
  for (size_t t = 0; t < p.size(); ++t) {
    const double e = want[t] * n;
    x2 += (count[t] - e) * (count[t] - e) / e;
  }
  return x2;
}

TEST(GumbelSample, DrawsFollowTheDistributionAndANegativeControlFails) {
  const std::vector<float> p = {0.35f, 0.25f, 0.2f, 0.1f, 0.07f, 0.03f};
  const std::vector<double> right(p.begin(), p.end());
  const std::vector<double> wrong = {0.3, 0.3, 0.2, 0.1, 0.07, 0.03};  // 0.05 moved between two tokens
  // 5 degrees of freedom: P(X2 > 20.5) = 0.001.
  EXPECT_LT(chi_square(p, right, 7, 40000), 20.5);
  EXPECT_GT(chi_square(p, wrong, 7, 40000), 20.5) << "the test must be able to fail";
}

TEST(GumbelSample, DependsOnlyOnSeedAndPositionAndSkipsFilteredTokens) {
  const std::vector<float> p = {0.5f, 0.0f, 0.5f, 0.0f, 0.0f};
  int differ = 0;
  for (uint64_t g = 0; g < 200; ++g) {
    const int32_t t = sdk::gumbel_sample(p.data(), 5, 42, g);
    EXPECT_TRUE(t == 0 || t == 2) << t;
    EXPECT_EQ(t, sdk::gumbel_sample(p.data(), 5, 42, g));
    differ += t != sdk::gumbel_sample(p.data(), 5, 43, g);
  }
  EXPECT_GT(differ, 50) << "another seed, other noise";
  const std::vector<float> none = {0.0f, 0.0f};
  EXPECT_EQ(sdk::gumbel_sample(none.data(), 2, 1, 0), -1);
}

TEST(GumbelSample, SharedNoiseCouplesCloseDistributions) {
  const std::vector<float> p = {0.4f, 0.3f, 0.2f, 0.1f};
  const std::vector<float> q = {0.35f, 0.35f, 0.2f, 0.1f};
  int same = 0;
  const int n = 20000;
  for (int g = 0; g < n; ++g)
    same += sdk::gumbel_sample(p.data(), 4, 9, static_cast<uint64_t>(g)) ==
            sdk::gumbel_sample(q.data(), 4, 9, static_cast<uint64_t>(g));
  // Independent draws agree with probability sum p*q = 0.295; the coupling agrees far more often
  // (at most 1 - TV = 0.95).
  EXPECT_GT(same / static_cast<double>(n), 0.85);
  EXPECT_LE(same / static_cast<double>(n), 0.95 + 0.01);
}

TEST(GumbelSample, TheEnginesGumbelSamplerDrawsThisRace) {
  SamplingParams params;
  params.temperature = 1.0f;
  const std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
  std::vector<float> scratch(4), probs(4);
  transform_logits_to_probs(logits, params, {}, probs);
  for (uint64_t step = 0; step < 100; ++step)
    EXPECT_EQ(sample_token(logits, params, {}, 77, step, scratch, Sampler::kGumbel),
              sdk::gumbel_sample(probs.data(), 4, 77, step));
}

}  // namespace
}  // namespace specd::sampling
