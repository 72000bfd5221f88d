// Draft trees (ABI 1.3, specd_verify_batch.draft_parents): a chain sent as a tree verifies exactly
// as the chain, greedy and typical acceptance pick the deepest passing path, and multi-candidate
// rejection sampling keeps the target distribution (chi-square, with a negative control whose
// drafts break the contract).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "e2e/spec/chi_square.hpp"
#include "plugins/verifiers/verifier_test_util.hpp"

namespace specd::test {
namespace {

// A HostBatch plus the tree columns.
struct TreeBatch {
  HostBatch hb;
  std::vector<int32_t> parents, nodes;
  TreeBatch(HostBatch b) : hb(std::move(b)) {
    parents.assign(hb.drafts.size(), -1);
    nodes.assign(hb.drafts.size(), -7);
    for (int32_t i = 0; i < hb.num_seqs; ++i)
      for (int32_t j = 0; j < hb.k_max; ++j) parents[static_cast<size_t>(i) * hb.k_max + j] = j - 1;
  }
  int32_t& parent(int32_t i, int32_t j) { return parents[static_cast<size_t>(i) * hb.k_max + j]; }
  void run(plugin::VerifierInstance& v) {
    specd_verify_batch b = hb.view();
    b.draft_parents = parents.data();
    b.out_nodes = nodes.data();
    v.verify(b);
  }
};

class TreeAsChain : public ::testing::TestWithParam<std::string> {};

TEST_P(TreeAsChain, AChainSentAsATreeVerifiesExactlyAsTheChain) {
  ASSERT_TRUE(make_verifier(GetParam())->capabilities().supports_trees);
  for (const bool probs : {false, true}) {
    HostBatch chain = random_batch(64, 5, 300, probs, 77);
    // Make acceptance likely: every draft is its row's argmax half of the time.
    for (int32_t i = 0; i < chain.num_seqs; ++i)
      for (int32_t j = 0; j < chain.k_max; ++j)
        if ((i + j) % 2 == 0) {
          const float* row = chain.target_row(i, j);
          chain.draft_token(i, j) = static_cast<int32_t>(std::max_element(row, row + chain.vocab) - row);
        }
    TreeBatch tree(chain);
    chain.run(*make_verifier(GetParam()));
    tree.run(*make_verifier(GetParam()));
    EXPECT_EQ(tree.hb.out, chain.out);
    EXPECT_EQ(tree.hb.accepted, chain.accepted);
    for (int32_t i = 0; i < chain.num_seqs; ++i)
      for (int32_t d = 0; d < chain.k_max; ++d)
        EXPECT_EQ(tree.nodes[static_cast<size_t>(i) * chain.k_max + d], d < chain.accepted[i] ? d : -1);
  }
}

INSTANTIATE_TEST_SUITE_P(AllVerifiers, TreeAsChain, ::testing::Values("rejection", "typical_acceptance", "greedy"),
                         VerifierName());

// Nodes: 0 and 1 are roots; 2 and 3 children of 1; 4 a child of 3. Greedy follows the argmax:
// root 1, then 3 (2 misses), then 4, and emits the argmax of node 4's row.
TEST(TreeGreedy, FollowsTheArgmaxThroughSiblingsAndEmitsTheLeafsArgmax) {
  TreeBatch t(HostBatch(1, 5, 8, false));
  const int32_t argmax_of_row[6] = {1, 0, 5, 0, 6, 7};  // row r = after node r - 1 (row 0: root)
  for (int32_t r = 0; r < 6; ++r) one_hot(t.hb.target_row(0, r), 8, argmax_of_row[r]);
  const int32_t tokens[5] = {2, 1, 4, 5, 6};
  const int32_t parents[5] = {-1, -1, 1, 1, 3};
  for (int32_t j = 0; j < 5; ++j) {
    t.hb.draft_token(0, j) = tokens[j];
    t.parent(0, j) = parents[j];
  }
  t.run(*make_verifier("greedy"));
  EXPECT_EQ(t.hb.accepted[0], 3);
  EXPECT_EQ(t.hb.out_row(0), (std::vector<int32_t>{1, 5, 6, 7, -1, -1}));
  EXPECT_EQ(t.nodes, (std::vector<int32_t>{1, 3, 4, -1, -1}));
  // A mismatch everywhere: nothing accepted, the root row's argmax emitted.
  t.hb.draft_token(0, 1) = 3;
  t.run(*make_verifier("greedy"));
  EXPECT_EQ(t.hb.accepted[0], 0);
  EXPECT_EQ(t.hb.out_row(0)[0], 1);
}

// Typical acceptance: every node that passes counts, and the deepest passing path wins even
// when an earlier sibling passes too.
TEST(TreeTypical, TakesTheDeepestPassingPath) {
  TreeBatch t(HostBatch(1, 4, 8, false));
  for (int32_t r = 0; r < 5; ++r) uniform(t.hb.target_row(0, r), 8);  // every draft passes
  const int32_t parents[4] = {-1, -1, 1, 2};
  for (int32_t j = 0; j < 4; ++j) {
    t.hb.draft_token(0, j) = j;
    t.parent(0, j) = parents[j];
  }
  t.run(*make_verifier("typical_acceptance"));
  EXPECT_EQ(t.hb.accepted[0], 3);
  EXPECT_EQ(t.nodes, (std::vector<int32_t>{1, 2, 3, -1}));
  const std::vector<int32_t> out = t.hb.out_row(0);
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 3), (std::vector<int32_t>{1, 2, 3}));
}

TEST(TreeErrors, AParentThatIsNotEarlierIsRefusedNamingTheNode) {
  TreeBatch t(random_batch(2, 3, 16, false, 5, false));
  t.parent(1, 2) = 2;
  try {
    t.run(*make_verifier("rejection"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 1: tree node 2 has parent 2"), std::string::npos) << e.what();
  }
}

// ---- lossless multi-candidate rejection ------------------------------------------------------

constexpr int32_t kV = 6;
constexpr int32_t kRoots = 3, kKids = 2;  // 3 roots, each with 2 children: 9 nodes

enum class Siblings { kIndependentDraws, kTopKOneHot, kWithoutReplacementDeclaredIid };

struct Distributions {
  std::vector<float> p, q;                 // after the last committed token
  std::vector<std::vector<float>> p2, q2;  // after token a
  std::vector<float> p3;                   // after any two tokens
};

Distributions make_distributions(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Distributions d;
  auto draw = [&](double spread) {
    std::vector<float> r(kV);
    random_distribution(r.data(), kV, rng, spread);
    return r;
  };
  d.p = draw(1.0);
  d.q = draw(1.5);
  for (int32_t a = 0; a < kV; ++a) {
    d.p2.push_back(draw(1.0));
    d.q2.push_back(draw(1.5));
  }
  d.p3 = draw(1.0);
  return d;
}

// Children of one node: drawn from q by the rule under test.
std::vector<int32_t> children(const std::vector<float>& q, int32_t n, Siblings how, std::mt19937_64& rng) {
  std::vector<int32_t> out;
  std::vector<float> w = q;
  for (int32_t i = 0; i < n; ++i) {
    if (how == Siblings::kTopKOneHot) {
      const auto best = static_cast<int32_t>(std::max_element(w.begin(), w.end()) - w.begin());
      out.push_back(best);
      w[static_cast<size_t>(best)] = -1.0f;
      continue;
    }
    std::discrete_distribution<int32_t> pick(w.begin(), w.end());
    out.push_back(pick(rng));
    if (how == Siblings::kWithoutReplacementDeclaredIid) w[static_cast<size_t>(out.back())] = 0.0f;
  }
  return out;
}

// Counts of the first emitted token, and of (first, second) when the first was an accepted draft.
struct TreeCounts {
  std::vector<int64_t> first = std::vector<int64_t>(kV);
  std::vector<std::vector<int64_t>> second = std::vector<std::vector<int64_t>>(kV, std::vector<int64_t>(kV));
};

TreeCounts run_tree_rejection(const Distributions& d, Siblings how, int32_t n, uint64_t seed) {
  const int32_t k = kRoots * (1 + kKids);
  TreeBatch t(HostBatch(n, k, kV, how != Siblings::kTopKOneHot));
  std::mt19937_64 rng(seed);
  for (int32_t i = 0; i < n; ++i) {
    std::copy(d.p.begin(), d.p.end(), t.hb.target_row(i, 0));
    const std::vector<int32_t> roots = children(d.q, kRoots, how, rng);
    for (int32_t r = 0; r < kRoots; ++r) {
      const int32_t node = r * (1 + kKids), a = roots[static_cast<size_t>(r)];
      t.hb.draft_token(i, node) = a;
      t.parent(i, node) = -1;
      if (!t.hb.draft.empty()) std::copy(d.q.begin(), d.q.end(), t.hb.draft_row(i, node));
      std::copy(d.p2[a].begin(), d.p2[a].end(), t.hb.target_row(i, node + 1));
      const std::vector<int32_t> kids = children(d.q2[a], kKids, how, rng);
      for (int32_t c = 0; c < kKids; ++c) {
        const int32_t kid = node + 1 + c;
        t.hb.draft_token(i, kid) = kids[static_cast<size_t>(c)];
        t.parent(i, kid) = node;
        if (!t.hb.draft.empty()) std::copy(d.q2[a].begin(), d.q2[a].end(), t.hb.draft_row(i, kid));
        std::copy(d.p3.begin(), d.p3.end(), t.hb.target_row(i, kid + 1));
      }
    }
    t.hb.seeds[static_cast<size_t>(i)] = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i);
    t.hb.steps[static_cast<size_t>(i)] = rng() % 1000;
  }
  t.run(*make_verifier("rejection"));
  TreeCounts c;
  for (int32_t i = 0; i < n; ++i) {
    const auto row = t.hb.out_row(i);
    ++c.first[static_cast<size_t>(row[0])];
    if (t.hb.accepted[static_cast<size_t>(i)] >= 1)
      ++c.second[static_cast<size_t>(row[0])][static_cast<size_t>(row[1])];
  }
  return c;
}

// Goodness of fit of counts to probabilities (cells with an expected count below 5 pooled).
double fit_p_value(const std::vector<std::vector<int64_t>>& counts, const std::vector<std::vector<float>>& probs) {
  double chi2 = 0, pooled_obs = 0, pooled_exp = 0;
  int cells = 0, groups = 0;
  for (size_t g = 0; g < counts.size(); ++g) {
    const double n = static_cast<double>(std::accumulate(counts[g].begin(), counts[g].end(), int64_t{0}));
    if (n == 0) continue;
    ++groups;
    for (size_t v = 0; v < counts[g].size(); ++v) {
      const double e = n * probs[g][v], o = static_cast<double>(counts[g][v]);
      if (e < 5) {
        pooled_obs += o;
        pooled_exp += e;
        continue;
      }
      chi2 += (o - e) * (o - e) / e;
      ++cells;
    }
  }
  if (pooled_exp > 0) {
    chi2 += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / pooled_exp;
    ++cells;
  }
  return spec_test::chi2_sf(chi2, std::max(1, cells - groups));
}

class TreeLossless : public ::testing::TestWithParam<Siblings> {};

TEST_P(TreeLossless, EmittedTokensFollowTheTarget) {
  const Distributions d = make_distributions(4242);
  const TreeCounts c = run_tree_rejection(d, GetParam(), 60000, 99);
  const double first = fit_p_value({c.first}, {d.p});
  const double second = fit_p_value(c.second, d.p2);
  RecordProperty("p_first", std::to_string(first));
  RecordProperty("p_second", std::to_string(second));
  EXPECT_GT(first, 1e-4) << "first token";
  EXPECT_GT(second, 1e-4) << "second token given the first";
  // The tree is used: some sequences accepted a root other than the first.
  EXPECT_GT(std::accumulate(c.second.begin(), c.second.end(), int64_t{0},
                            [](int64_t s, const std::vector<int64_t>& r) {
                              return s + std::accumulate(r.begin(), r.end(), int64_t{0});
                            }),
            60000 / 4);
}

INSTANTIATE_TEST_SUITE_P(Rejection, TreeLossless, ::testing::Values(Siblings::kIndependentDraws, Siblings::kTopKOneHot),
                         [](const ::testing::TestParamInfo<Siblings>& info) {
                           return info.param == Siblings::kIndependentDraws ? std::string("IndependentDraws")
                                                                            : std::string("TopKOneHot");
                         });

// Negative control: siblings drawn without replacement but declared as independent draws from q
// break the contract, and the same test sees it.
TEST(TreeLosslessControl, SiblingsDrawnWithoutReplacementUnderADeclaredQAreDetected) {
  const Distributions d = make_distributions(4242);
  const TreeCounts c = run_tree_rejection(d, Siblings::kWithoutReplacementDeclaredIid, 60000, 99);
  const double first = fit_p_value({c.first}, {d.p});
  RecordProperty("p_first", std::to_string(first));
  EXPECT_LT(first, 1e-6);
}

}  // namespace
}  // namespace specd::test
