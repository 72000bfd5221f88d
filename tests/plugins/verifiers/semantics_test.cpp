// Exact semantics on crafted inputs: greedy argmax rules, the typical-acceptance entropy rule,
// one-hot q for rejection, and the documented RNG keying and inverse-CDF order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "plugins/verifiers/verifier_test_util.hpp"

namespace specd::test {
namespace {

// A row whose argmax is `top` (probability `mass`), the rest spread evenly.
void peaked(float* row, int64_t vocab, int64_t top, float mass = 0.6f) {
  for (int64_t i = 0; i < vocab; ++i) row[i] = (1.0f - mass) / static_cast<float>(vocab - 1);
  row[top] = mass;
}

// ------------------------------------------------------------------------------------------
// Greedy

TEST(Greedy, PerfectMatchEmitsBonusArgmax) {
  HostBatch hb(1, 4, 50, false);
  const std::vector<int32_t> argmaxes = {7, 3, 49, 0, 21};
  for (int32_t pos = 0; pos <= 4; ++pos) peaked(hb.target_row(0, pos), 50, argmaxes[static_cast<size_t>(pos)]);
  for (int32_t pos = 0; pos < 4; ++pos) hb.draft_token(0, pos) = argmaxes[static_cast<size_t>(pos)];
  hb.run(*make_verifier("greedy"));
  EXPECT_EQ(hb.accepted[0], 4);
  EXPECT_EQ(hb.out_row(0), (std::vector<int32_t>{7, 3, 49, 0, 21}));
}

TEST(Greedy, EarlyMismatchEmitsArgmaxThenPadding) {
  HostBatch hb(1, 4, 50, false);
  const std::vector<int32_t> argmaxes = {7, 3, 49, 0, 21};
  for (int32_t pos = 0; pos <= 4; ++pos) peaked(hb.target_row(0, pos), 50, argmaxes[static_cast<size_t>(pos)]);
  hb.draft_token(0, 0) = 7;
  hb.draft_token(0, 1) = 4;  // mismatch: the target wants 3
  hb.draft_token(0, 2) = 49;
  hb.draft_token(0, 3) = 0;
  hb.run(*make_verifier("greedy"));
  EXPECT_EQ(hb.accepted[0], 1);
  EXPECT_EQ(hb.out_row(0), (std::vector<int32_t>{7, 3, -1, -1, -1}));
}

TEST(Greedy, MultipleSequencesAndEmptyProposal) {
  HostBatch hb(4, 3, 20, true);
  // Draft probabilities are present but ignored by greedy (NaN to prove it).
  for (float& q : hb.draft) q = std::nanf("");
  const int32_t argmaxes[4][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}, {13, 14, 15, 16}};
  for (int32_t i = 0; i < 4; ++i)
    for (int32_t pos = 0; pos <= 3; ++pos) peaked(hb.target_row(i, pos), 20, argmaxes[i][pos]);
  // 0: all match; 1: first mismatches; 2: no proposal; 3: two match then one proposed more.
  hb.num_drafted = {3, 3, 0, 2};
  const int32_t drafts[4][3] = {{1, 2, 3}, {0, 6, 7}, {-1, -1, -1}, {13, 14, 0}};
  for (int32_t i = 0; i < 4; ++i)
    for (int32_t pos = 0; pos < 3; ++pos) hb.draft_token(i, pos) = drafts[i][pos];
  hb.run(*make_verifier("greedy"));
  EXPECT_EQ(hb.accepted, (std::vector<int32_t>{3, 0, 0, 2}));
  EXPECT_EQ(hb.out_row(0), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(hb.out_row(1), (std::vector<int32_t>{5, -1, -1, -1}));
  EXPECT_EQ(hb.out_row(2), (std::vector<int32_t>{9, -1, -1, -1}));
  EXPECT_EQ(hb.out_row(3), (std::vector<int32_t>{13, 14, 15, -1}));
}

TEST(Greedy, TiesGoToTheLowestTokenId) {
  HostBatch hb(1, 1, 10, false);
  float* p0 = hb.target_row(0, 0);
  for (int i = 0; i < 10; ++i) p0[i] = 0.05f;
  p0[3] = p0[8] = 0.3f;              // tie between 3 and 8
  uniform(hb.target_row(0, 1), 10);  // all tied: argmax 0
  hb.draft_token(0, 0) = 8;
  hb.run(*make_verifier("greedy"));
  EXPECT_EQ(hb.accepted[0], 0);
  EXPECT_EQ(hb.out_row(0), (std::vector<int32_t>{3, -1}));
  hb.draft_token(0, 0) = 3;
  hb.run(*make_verifier("greedy"));
  EXPECT_EQ(hb.accepted[0], 1);
  EXPECT_EQ(hb.out_row(0), (std::vector<int32_t>{3, 0}));
}

// ------------------------------------------------------------------------------------------
// Typical acceptance

TEST(TypicalAcceptance, NearUniformTargetAcceptsEveryDraft) {
  HostBatch hb = random_batch(8, 5, 1000, false, 51, false);
  std::mt19937_64 rng(5);
  // p within ±1% of uniform: p(x) ≈ 1/V > 0.3·exp(-H) ≈ 0.3/V.
  for (int32_t i = 0; i < 8; ++i)
    for (int32_t pos = 0; pos <= 5; ++pos) random_distribution(hb.target_row(i, pos), 1000, rng, 0.01);
  hb.run(*make_verifier("typical_acceptance"));
  expect_well_formed(hb);
  for (int32_t i = 0; i < 8; ++i) EXPECT_EQ(hb.accepted[static_cast<size_t>(i)], 5);
}

TEST(TypicalAcceptance, OneHotTargetRejectsMissesAndEmitsItsArgmax) {
  HostBatch hb = random_batch(8, 5, 1000, false, 52, false);
  for (int32_t i = 0; i < 8; ++i) {
    const int32_t top = (hb.draft_token(i, 0) + 1 + i) % 1000;
    for (int32_t pos = 0; pos <= 5; ++pos) one_hot(hb.target_row(i, pos), 1000, top);
  }
  hb.run(*make_verifier("typical_acceptance"));
  for (int32_t i = 0; i < 8; ++i) {
    const int32_t top = (hb.draft_token(i, 0) + 1 + i) % 1000;
    EXPECT_EQ(hb.accepted[static_cast<size_t>(i)], 0);
    EXPECT_EQ(hb.out_row(i), (std::vector<int32_t>{top, -1, -1, -1, -1, -1}));
  }
}

TEST(TypicalAcceptance, ZeroThresholdAndAlphaAcceptEveryDraft) {
  HostBatch hb = random_batch(16, 4, 2000, false, 53, false);  // strongly varying random p, all > 0
  std::mt19937_64 rng(6);
  for (int32_t i = 0; i < 16; ++i)
    for (int32_t pos = 0; pos <= 4; ++pos) random_distribution(hb.target_row(i, pos), 2000, rng, 3.0);
  hb.run(*make_verifier("typical_acceptance", {{"posterior_threshold", "0"}, {"posterior_alpha", "0"}}));
  for (int32_t i = 0; i < 16; ++i) EXPECT_EQ(hb.accepted[static_cast<size_t>(i)], 4);
  // With the defaults, such peaked rows reject most random drafts.
  hb.run(*make_verifier("typical_acceptance"));
  int32_t total = 0;
  for (int32_t a : hb.accepted) total += a;
  EXPECT_LT(total, 16 * 4 / 2);
}

TEST(TypicalAcceptance, PartialAcceptanceKeepsTheRightPrefix) {
  HostBatch hb(3, 4, 100, false);
  // Sequence i: positions < i+1 uniform (accepted), position i+1 one-hot at 42 (draft misses).
  for (int32_t i = 0; i < 3; ++i) {
    for (int32_t pos = 0; pos <= 4; ++pos) uniform(hb.target_row(i, pos), 100);
    one_hot(hb.target_row(i, i + 1), 100, 42);
    for (int32_t pos = 0; pos < 4; ++pos) hb.draft_token(i, pos) = 10 + pos;
  }
  hb.run(*make_verifier("typical_acceptance"));
  EXPECT_EQ(hb.accepted, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(hb.out_row(0), (std::vector<int32_t>{10, 42, -1, -1, -1}));
  EXPECT_EQ(hb.out_row(1), (std::vector<int32_t>{10, 11, 42, -1, -1}));
  EXPECT_EQ(hb.out_row(2), (std::vector<int32_t>{10, 11, 12, 42, -1}));
}

// The acceptance rule against p(x) > min(threshold, alpha·exp(-H)) computed in double, on
// random distributions and parameters where each side of the min binds. Decisions within a
// relative 1e-4 of the criterion are skipped (float rounding may go either way there).
TEST(TypicalAcceptance, EntropyRuleMatchesTheFormula) {
  std::mt19937_64 rng(77);
  const int32_t V = 12;
  int checked = 0, accepted = 0, entropy_bound = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const double threshold = std::uniform_real_distribution<double>(0.0, 0.4)(rng);
    const double alpha = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    HostBatch hb(V, 1, V, false);
    std::vector<float> p(V);
    random_distribution(p.data(), V, rng, 1.5);
    double entropy = 0.0;
    for (float v : p) entropy -= v > 0 ? static_cast<double>(v) * std::log(static_cast<double>(v)) : 0.0;
    for (int32_t i = 0; i < V; ++i) {  // sequence i drafts token i
      std::copy(p.begin(), p.end(), hb.target_row(i, 0));
      uniform(hb.target_row(i, 1), V);
      hb.draft_token(i, 0) = i;
    }
    hb.run(*make_verifier("typical_acceptance", {{"posterior_threshold", std::to_string(threshold)},
                                                 {"posterior_alpha", std::to_string(alpha)}}));
    // std::to_string rounds to 6 decimals: use the values the plugin parsed.
    const double t = std::stod(std::to_string(threshold)), a = std::stod(std::to_string(alpha));
    const double crit = std::min(t, a * std::exp(-entropy));
    for (int32_t i = 0; i < V; ++i) {
      const double pi = p[static_cast<size_t>(i)];
      if (std::fabs(pi - crit) <= 1e-4 * crit) continue;
      const bool expect = pi > crit;
      EXPECT_EQ(hb.accepted[static_cast<size_t>(i)] == 1, expect)
          << "p=" << pi << " threshold=" << t << " alpha=" << a << " H=" << entropy << " crit=" << crit;
      ++checked;
      accepted += expect;
      entropy_bound += a * std::exp(-entropy) < t;
    }
  }
  // The sample covers both outcomes and both sides of the min.
  EXPECT_GT(checked, 500);
  EXPECT_GT(accepted, 50);
  EXPECT_LT(accepted, checked - 50);
  EXPECT_GT(entropy_bound, 100);
  EXPECT_LT(entropy_bound, checked - 100);
}

TEST(TypicalAcceptance, HandCheckedEntropyExample) {
  // p = [0.5, 0.3, 0.15, 0.05]: H = 1.14218 nats, exp(-H) = 0.31910.
  // threshold 1, alpha 0.5 → criterion 0.15955: tokens 0, 1 accepted; 2, 3 rejected.
  // threshold 0.1, alpha 0.5 → criterion 0.1: tokens 0, 1, 2 accepted.
  const float p[4] = {0.5f, 0.3f, 0.15f, 0.05f};
  for (const auto& [threshold, expected] :
       std::vector<std::pair<std::string, std::vector<int32_t>>>{{"1", {1, 1, 0, 0}}, {"0.1", {1, 1, 1, 0}}}) {
    HostBatch hb(4, 1, 4, false);
    for (int32_t i = 0; i < 4; ++i) {
      std::copy(p, p + 4, hb.target_row(i, 0));
      uniform(hb.target_row(i, 1), 4);
      hb.draft_token(i, 0) = i;
    }
    hb.run(*make_verifier("typical_acceptance", {{"posterior_threshold", threshold}, {"posterior_alpha", "0.5"}}));
    EXPECT_EQ(hb.accepted, expected) << "threshold " << threshold;
    for (int32_t i = 0; i < 4; ++i) {
      if (expected[static_cast<size_t>(i)] == 0) {
        EXPECT_EQ(hb.out_row(i)[0], 0) << "argmax of p is token 0";
      }
    }
  }
}

// ------------------------------------------------------------------------------------------
// Rejection specifics and RNG keying

// Without draft probabilities q is one-hot at the draft: accept iff p(x) >= u_accept, and the
// recovered token is never the rejected draft.
TEST(Rejection, OneHotDraftUsesTheAcceptLaneUniform) {
  const int32_t B = 400, V = 6;
  HostBatch hb(B, 1, V, false);
  const float p[6] = {0.1f, 0.5f, 0.05f, 0.15f, 0.2f, 0.0f};
  int rejections = 0;
  for (int32_t i = 0; i < B; ++i) {
    std::copy(p, p + V, hb.target_row(i, 0));
    std::copy(p, p + V, hb.target_row(i, 1));
    hb.draft_token(i, 0) = i % V;
    hb.seeds[static_cast<size_t>(i)] = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1);
    hb.steps[static_cast<size_t>(i)] = static_cast<uint64_t>(i) * 7;
  }
  hb.run(*make_verifier("rejection"));
  for (int32_t i = 0; i < B; ++i) {
    const float px = p[i % V];
    const float u =
        sdk::philox_uniform(hb.seeds[static_cast<size_t>(i)], hb.steps[static_cast<size_t>(i)], 0, sdk::kLaneAccept);
    const bool expect = px > 0.0f && px >= u;
    ASSERT_EQ(hb.accepted[static_cast<size_t>(i)] == 1, expect) << "sequence " << i << " p=" << px << " u=" << u;
    if (!expect) {
      ++rejections;
      EXPECT_NE(hb.out_row(i)[0], i % V);
      EXPECT_NE(hb.out_row(i)[0], 5) << "token 5 has p = 0";
    }
  }
  EXPECT_GT(rejections, B / 4);
}

// The token emitted with no proposal (and every bonus token) is the documented inverse CDF of
// p with u = philox_uniform(seed, step, position, kLaneSample), for every verifier that samples.
class DocumentedSampling : public ::testing::TestWithParam<std::tuple<std::string, int32_t>> {};

TEST_P(DocumentedSampling, BonusTokenFollowsTheDocumentedRule) {
  const auto [name, vocab] = GetParam();
  HostBatch hb = random_batch(64, 2, vocab, false, 61, false);
  std::mt19937_64 rng(62);
  for (int32_t i = 0; i < 64; ++i) {
    hb.num_drafted[static_cast<size_t>(i)] = i % 2 == 0 ? 0 : 2;
    // Odd sequences accept both drafts (they are the rows' only tokens), then draw at position 2.
    if (i % 2 == 1)
      for (int32_t pos = 0; pos < 2; ++pos) one_hot(hb.target_row(i, pos), vocab, hb.draft_token(i, pos));
  }
  hb.run(*make_verifier(name));
  for (int32_t i = 0; i < 64; ++i) {
    const int32_t pos = hb.num_drafted[static_cast<size_t>(i)];
    ASSERT_EQ(hb.accepted[static_cast<size_t>(i)], pos);
    const float u = sdk::philox_uniform(hb.seeds[static_cast<size_t>(i)], hb.steps[static_cast<size_t>(i)],
                                        static_cast<uint32_t>(pos), sdk::kLaneSample);
    EXPECT_EQ(hb.out_row(i)[static_cast<size_t>(pos)], documented_inverse_cdf(hb.target_row(i, pos), vocab, u))
        << "sequence " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Verifiers, DocumentedSampling,
                         ::testing::Combine(::testing::Values("rejection", "typical_acceptance"),
                                            ::testing::Values(7, 256, 1000, 32000)),
                         [](const auto& info) {
                           std::ostringstream name;
                           name << std::get<0>(info.param) << "_V" << std::get<1>(info.param);
                           return name.str();
                         });

// The recovered token is drawn from normalize(max(0, p - q)) with the sample lane at the
// rejected position.
TEST(Rejection, RecoveredTokenFollowsTheDocumentedResidual) {
  const int32_t V = 700;
  HostBatch hb = random_batch(64, 3, V, true, 71, false);
  for (int32_t i = 0; i < 64; ++i) {
    // Reject at position 0 for sure: p(x) = 0 < u·q(x).
    float* p = hb.target_row(i, 0);
    const int32_t x = hb.draft_token(i, 0);
    p[x] = 0.0f;
    double total = 0.0;
    for (int32_t t = 0; t < V; ++t) total += p[t];
    for (int32_t t = 0; t < V; ++t) p[t] = static_cast<float>(p[t] / total);
  }
  hb.run(*make_verifier("rejection"));
  for (int32_t i = 0; i < 64; ++i) {
    ASSERT_EQ(hb.accepted[static_cast<size_t>(i)], 0);
    std::vector<float> residual(V);
    for (int32_t t = 0; t < V; ++t)
      residual[static_cast<size_t>(t)] = std::max(0.0f, hb.target_row(i, 0)[t] - hb.draft_row(i, 0)[t]);
    const float u =
        sdk::philox_uniform(hb.seeds[static_cast<size_t>(i)], hb.steps[static_cast<size_t>(i)], 0, sdk::kLaneSample);
    EXPECT_EQ(hb.out_row(i)[0], documented_inverse_cdf(residual.data(), V, u)) << "sequence " << i;
  }
}

}  // namespace
}  // namespace specd::test
