// Statistical and robustness properties: rejection sampling reproduces the target
// distribution (the convergence-ratio test of vLLM's rejection sampler suite, plus a per-position
// bound), seeded determinism independent of batch composition, and no failure across shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "plugins/verifiers/verifier_test_util.hpp"

namespace specd::test {
namespace {

double l2(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(s);
}

std::vector<double> normalized(const std::vector<int64_t>& counts) {
  const double n = static_cast<double>(std::accumulate(counts.begin(), counts.end(), int64_t{0}));
  std::vector<double> out(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) out[i] = n > 0 ? static_cast<double>(counts[i]) / n : 0.0;
  return out;
}

enum class Draft { kEqualToTarget, kDifferent, kOneHot };

std::string draft_name(Draft d) {
  switch (d) {
    case Draft::kEqualToTarget:
      return "QEqualsP";
    case Draft::kDifferent:
      return "QDiffers";
    default:
      return "OneHotQ";
  }
}

// Emitted-token counts of N sequences that all see target p and draft q at every position, so
// the emitted token at every position is distributed as p. Draft tokens are drawn from q
// (kOneHot: drawn from q, but the verifier gets no draft probabilities). Seeds are distinct per
// sequence and per N.
struct Emitted {
  std::vector<int64_t> pooled;                    // [V] over all positions
  std::vector<std::vector<int64_t>> by_position;  // [k+1][V]
};

Emitted run_rejection(int32_t n, int32_t k, const std::vector<float>& p, const std::vector<float>& q, Draft draft,
                      uint64_t seed) {
  const int32_t V = static_cast<int32_t>(p.size());
  HostBatch hb(n, k, V, draft != Draft::kOneHot);
  std::mt19937_64 rng(seed);
  std::discrete_distribution<int32_t> sample_q(q.begin(), q.end());
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t pos = 0; pos <= k; ++pos) std::copy(p.begin(), p.end(), hb.target_row(i, pos));
    for (int32_t pos = 0; pos < k; ++pos) {
      if (draft != Draft::kOneHot) std::copy(q.begin(), q.end(), hb.draft_row(i, pos));
      hb.draft_token(i, pos) = sample_q(rng);
    }
    hb.seeds[static_cast<size_t>(i)] = seed * 0x100000001b3ull + static_cast<uint64_t>(i);
    hb.steps[static_cast<size_t>(i)] = rng() % 1000;
  }
  hb.run(*make_verifier("rejection"));
  Emitted e{
      std::vector<int64_t>(static_cast<size_t>(V)),
      std::vector<std::vector<int64_t>>(static_cast<size_t>(k + 1), std::vector<int64_t>(static_cast<size_t>(V)))};
  for (int32_t i = 0; i < n; ++i) {
    const auto row = hb.out_row(i);
    for (int32_t pos = 0; pos <= hb.accepted[static_cast<size_t>(i)]; ++pos) {
      const int32_t t = row[static_cast<size_t>(pos)];
      ++e.pooled[static_cast<size_t>(t)];
      ++e.by_position[static_cast<size_t>(pos)][static_cast<size_t>(t)];
    }
  }
  return e;
}

class Lossless : public ::testing::TestWithParam<std::tuple<int32_t, Draft, int>> {};

TEST_P(Lossless, EmittedTokensConvergeToTheTarget) {
  const auto [k, draft, trial] = GetParam();
  const int32_t V = 10;
  std::mt19937_64 rng(1234 + static_cast<uint64_t>(trial) * 17 + static_cast<uint64_t>(k));
  std::vector<float> p(V), q(V);
  random_distribution(p.data(), V, rng);
  random_distribution(q.data(), V, rng);
  if (draft == Draft::kEqualToTarget) q = p;
  std::vector<double> target(p.begin(), p.end());
  // Distances to unrelated random distributions calibrate how much a distance shrinks by chance.
  std::vector<std::vector<double>> references(100, std::vector<double>(V));
  for (auto& r : references) {
    std::vector<float> f(V);
    random_distribution(f.data(), V, rng);
    r.assign(f.begin(), f.end());
  }

  const std::vector<int32_t> sizes = {10, 100, 1000, 10000, 100000};
  std::vector<double> to_target, to_reference;
  Emitted last;
  for (int32_t n : sizes) {
    last = run_rejection(n, k, p, q, draft, (static_cast<uint64_t>(trial) << 40) + static_cast<uint64_t>(n) * 7919 + k);
    const std::vector<double> emp = normalized(last.pooled);
    to_target.push_back(l2(emp, target));
    double ref = 0.0;
    for (const auto& r : references) ref += l2(emp, r);
    to_reference.push_back(ref / static_cast<double>(references.size()));
  }
  const double target_ratio = to_target.front() / to_target.back();
  const double reference_ratio = to_reference.front() / to_reference.back();
  RecordProperty("target_ratio", std::to_string(target_ratio));
  RecordProperty("reference_ratio", std::to_string(reference_ratio));
  EXPECT_GT(target_ratio, 20.0 * reference_ratio)
      << "distance to p: " << to_target.front() << " (N=10) → " << to_target.back()
      << " (N=100000); to references: " << to_reference.front() << " → " << to_reference.back();

  // Every position on its own, at N = 100000: within 4× the expected sampling error
  // sqrt((1 - Σp²)/n) of p.
  double sum_sq = 0.0;
  for (double x : target) sum_sq += x * x;
  for (int32_t pos = 0; pos <= k; ++pos) {
    const auto& counts = last.by_position[static_cast<size_t>(pos)];
    const int64_t n = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    if (n < 1000) continue;
    const double bound = 4.0 * std::sqrt((1.0 - sum_sq) / static_cast<double>(n));
    EXPECT_LE(l2(normalized(counts), target), bound) << "position " << pos << " with " << n << " samples";
  }
  // Position 0 always emits; the bonus position k is reached with probability (Σ min(p, q))^k.
  EXPECT_EQ(std::accumulate(last.by_position[0].begin(), last.by_position[0].end(), int64_t{0}), 100000);
}

INSTANTIATE_TEST_SUITE_P(Rejection, Lossless,
                         ::testing::Combine(::testing::Values(1, 3),
                                            ::testing::Values(Draft::kEqualToTarget, Draft::kDifferent, Draft::kOneHot),
                                            ::testing::Range(0, 3)),
                         [](const auto& info) {
                           std::ostringstream name;  // (not operator+: GCC 12 -Wrestrict false positive at -O3)
                           name << "k" << std::get<0>(info.param) << "_" << draft_name(std::get<1>(info.param))
                                << "_trial" << std::get<2>(info.param);
                           return name.str();
                         });

// ------------------------------------------------------------------------------------------
// Determinism

// A new batch made of the given (batch, sequence) pairs, in that order: rows, drafts, seeds, steps.
HostBatch gather(const std::vector<std::pair<HostBatch*, int32_t>>& picks) {
  HostBatch& first = *picks.front().first;
  HostBatch out(static_cast<int32_t>(picks.size()), first.k_max, first.vocab, !first.draft.empty());
  for (size_t j = 0; j < picks.size(); ++j) {
    HostBatch& src = *picks[j].first;
    const int32_t i = picks[j].second, o = static_cast<int32_t>(j);
    std::copy(src.target_row(i, 0), src.target_row(i, 0) + static_cast<size_t>(src.k_max + 1) * src.vocab,
              out.target_row(o, 0));
    if (!src.draft.empty())
      std::copy(src.draft_row(i, 0), src.draft_row(i, 0) + static_cast<size_t>(src.k_max) * src.vocab,
                out.draft_row(o, 0));
    for (int32_t pos = 0; pos < src.k_max; ++pos) out.draft_token(o, pos) = src.draft_token(i, pos);
    out.num_drafted[j] = src.num_drafted[static_cast<size_t>(i)];
    out.seeds[j] = src.seeds[static_cast<size_t>(i)];
    out.steps[j] = src.steps[static_cast<size_t>(i)];
  }
  return out;
}

// Drafts that a verifier accepts often enough for the outputs to depend on the randomness:
// q is a sharpened copy of p and the drafts are p's likeliest tokens.
HostBatch plausible_batch(int32_t b, int32_t k, int32_t v, uint64_t seed) {
  HostBatch hb = random_batch(b, k, v, true, seed);
  std::mt19937_64 rng(seed);
  for (int32_t i = 0; i < b; ++i)
    for (int32_t pos = 0; pos < k; ++pos) {
      const float* p = hb.target_row(i, pos);
      std::vector<int32_t> order(static_cast<size_t>(v));
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + 4, order.end(),
                        [&](int32_t a, int32_t c) { return p[a] > p[c]; });
      hb.draft_token(i, pos) = order[rng() % 4];
      float* q = hb.draft_row(i, pos);
      double total = 0.0;
      for (int32_t t = 0; t < v; ++t) total += (q[t] = p[t] * p[t]);
      for (int32_t t = 0; t < v; ++t) q[t] = static_cast<float>(q[t] / total);
    }
  return hb;
}

class Determinism : public ::testing::TestWithParam<std::string> {};

TEST_P(Determinism, SameSeedsGiveIdenticalOutputOver100Repeats) {
  HostBatch hb = plausible_batch(16, 4, 32000, 91);
  auto verifier = make_verifier(GetParam());
  hb.run(*verifier);
  expect_well_formed(hb);
  const std::vector<int32_t> out = hb.out, accepted = hb.accepted;
  for (int repeat = 0; repeat < 100; ++repeat) {
    std::fill(hb.out.begin(), hb.out.end(), -7);
    hb.run(*verifier);
    ASSERT_EQ(hb.out, out) << "repeat " << repeat;
    ASSERT_EQ(hb.accepted, accepted) << "repeat " << repeat;
  }
}

TEST_P(Determinism, ResultDoesNotDependOnNeighbours) {
  HostBatch hb = plausible_batch(24, 4, 2000, 92);
  auto verifier = make_verifier(GetParam());
  hb.run(*verifier);
  // Each sequence alone.
  for (int32_t i = 0; i < 24; ++i) {
    HostBatch one = gather({{&hb, i}});
    one.run(*verifier);
    EXPECT_EQ(one.out_row(0), hb.out_row(i)) << "sequence " << i << " alone";
    EXPECT_EQ(one.accepted[0], hb.accepted[static_cast<size_t>(i)]);
  }
  // Reversed and interleaved with the sequences of another batch.
  HostBatch other = plausible_batch(24, 4, 2000, 93);
  std::vector<std::pair<HostBatch*, int32_t>> picks;
  for (int32_t i = 23; i >= 0; --i) {
    picks.push_back({&hb, i});
    picks.push_back({&other, i});
  }
  HostBatch mixed = gather(picks);
  mixed.run(*verifier);
  for (int32_t j = 0; j < 24; ++j)
    EXPECT_EQ(mixed.out_row(2 * j), hb.out_row(23 - j)) << "sequence " << 23 - j << " at position " << 2 * j;
}

INSTANTIATE_TEST_SUITE_P(AllVerifiers, Determinism, ::testing::Values("rejection", "typical_acceptance", "greedy"),
                         VerifierName());

// The seed matters: other seeds give other tokens somewhere (sampling verifiers only).
TEST(Determinism, DifferentSeedsGiveDifferentTokens) {
  for (const char* name : {"rejection", "typical_acceptance"}) {
    HostBatch hb = plausible_batch(32, 4, 2000, 94);
    auto verifier = make_verifier(name);
    hb.run(*verifier);
    const std::vector<int32_t> first = hb.out;
    for (auto& s : hb.seeds) s += 1;
    hb.run(*verifier);
    EXPECT_NE(hb.out, first) << name;
  }
}

// ------------------------------------------------------------------------------------------
// No failure across shapes: k 1..8, vocab 32 / 32000 / 152064, batch 1..64 (sampled, not the
// full product at the large vocabularies).

struct Shape {
  int32_t k, vocab, batch;
};

std::vector<Shape> shapes() {
  std::vector<Shape> s;
  const int32_t batches[] = {1, 5, 16, 33, 64};
  for (int32_t k = 1; k <= 8; ++k) {
    for (int32_t b : batches) s.push_back({k, 32, b});
    s.push_back({k, 32000, batches[k % 5]});
  }
  for (int32_t k : {1, 4, 8}) s.push_back({k, 152064, k == 8 ? 1 : 3});
  return s;
}

TEST(NoCrash, VaryingShapes) {
  auto rejection = make_verifier("rejection");
  auto typical = make_verifier("typical_acceptance");
  auto greedy = make_verifier("greedy");
  uint64_t seed = 100;
  for (const Shape& sh : shapes()) {
    SCOPED_TRACE(::testing::Message() << "k=" << sh.k << " vocab=" << sh.vocab << " batch=" << sh.batch);
    HostBatch hb = random_batch(sh.batch, sh.k, sh.vocab, true, ++seed);
    for (auto* v : {rejection.get(), typical.get(), greedy.get()}) {
      hb.run(*v);
      expect_well_formed(hb);
    }
    hb.draft.clear();  // one-hot q
    hb.run(*rejection);
    expect_well_formed(hb);
  }
}

}  // namespace
}  // namespace specd::test
