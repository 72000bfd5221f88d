// What the client receives under A/B testing: shadow arms change nothing (token for token the
// same as an engine without arms or shadows, for a lossless and a lossy serving arm), and a
// lossless arm sharing an engine with a lossy one still samples from the target distribution.
#include <gtest/gtest.h>

#include <map>
#include <utility>

#include "ab_test_util.hpp"
#include "e2e/spec/chi_square.hpp"

namespace {

using specd::Request;
using specd::ab_test::ab_config;
using specd::ab_test::run_ab;
using specd::ab_test::sampled_requests;
using specd::ab_test::work_dir;
namespace fs = std::filesystem;

const std::string kArms = "[{name: rejection, verifier: rejection}, {name: typical, verifier: typical_acceptance}]";

// One verifier, no arms, no shadows, no A/B log: what the engine did before A/B testing (static
// k, as ab_config).
specd::config::EngineConfig single_verifier(const std::string& verifier) {
  return specd::config::for_model_dir(specd::spec_test::target_fixture(false, 0.02).string(),
                                      {{"speculative.num_speculative_tokens", "3"},
                                       {"speculative.dynamic", "false"},
                                       {"speculative.proposer.name", "draft_model"},
                                       {"speculative.proposer.layers", "1"},
                                       {"speculative.verifier.name", verifier},
                                       {"kv_cache.memory_mib", "64"},
                                       {"model.num_threads", "1"}});
}

std::vector<std::vector<int32_t>> tokens_of(const specd::config::EngineConfig& cfg, const std::vector<Request>& reqs) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& g : specd::spec_test::run_engine(cfg, reqs)) {
    EXPECT_TRUE(g.error.empty()) << g.error;
    out.push_back(g.tokens);
  }
  return out;
}

// Every request served by `arm` in an engine with both arms, with and without shadows, gets
// exactly the tokens an engine with only that arm's verifier gives it (same seeds).
TEST(AbLossless, ShadowsDoNotChangeWhatTheClientReceives) {
  const std::vector<Request> plain = sampled_requests(12, 0.8f, 24, 900);
  for (const auto& [arm, verifier] : {std::pair{"rejection", "rejection"}, {"typical", "typical_acceptance"}}) {
    std::vector<Request> reqs = plain;
    for (Request& r : reqs) r.speculative.arm = arm;
    const auto alone = tokens_of(single_verifier(verifier), plain);
    const auto shadowed = run_ab(ab_config(kArms, "all", work_dir() / "lossless-shadowed.jsonl"), reqs);
    const auto unshadowed = run_ab(ab_config(kArms, "", work_dir() / "lossless-unshadowed.jsonl"), reqs);
    size_t shadow_steps = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(alone[i].size(), 24u) << arm << " request " << i;
      EXPECT_EQ(shadowed.tokens[i], alone[i]) << arm << " request " << i << ": a shadow arm changed the output";
      EXPECT_EQ(unshadowed.tokens[i], alone[i]) << arm << " request " << i << ": the arms changed the output";
      const auto& rec = shadowed.records[shadowed.record_of.at(i)];
      ASSERT_EQ(rec.shadows.size(), 1u);
      shadow_steps += rec.shadows[0].accepted.size();
    }
    EXPECT_GT(shadow_steps, 40u) << arm << ": the other arm must have shadowed its steps";
  }
}

// Joint distribution of generated tokens 2 and 3 (token 1 comes from the prefill step; tokens 2
// to 4 from one verified step) of the given requests.
std::map<std::pair<int, int>, int> pairs_2_3(const std::vector<std::vector<int32_t>>& tokens) {
  std::map<std::pair<int, int>, int> counts;
  for (const auto& t : tokens)
    if (t.size() == 4) ++counts[{t[1], t[2]}];
  return counts;
}

std::vector<Request> top6_requests(int n, uint64_t seed0) {
  std::vector<Request> reqs = sampled_requests(n, 1.0f, 4, seed0);
  for (Request& r : reqs) {
    r.prompt_ids = {1, 450, 4996, 17354, 1701, 432, 29871, 13};
    r.sampling.top_k = 6;  // few enough (t2, t3) pairs to test exactly
  }
  return reqs;
}

// Rejection sampling serving half the traffic by the seeded draw, with typical acceptance
// serving the other half and both shadowing each other: the rejection arm's output follows
// the target distribution (chi-square homogeneity against plain sampling).
TEST(AbLossless, LosslessArmFollowsTheTargetDistribution) {
  const int n = 4000;
  // The draft samples at temperature 1 and returns its q, so rejections take the residual path.
  const auto ab = run_ab(
      ab_config(kArms, "all", work_dir() / "lossless-dist.jsonl", 3, {{"speculative.proposer.temperature", "1.0"}}),
      top6_requests(n, 1));
  std::vector<std::vector<int32_t>> by_rejection;
  uint64_t drafted = 0, accepted = 0;
  for (size_t i = 0; i < ab.tokens.size(); ++i) {
    ASSERT_EQ(ab.tokens[i].size(), 4u) << ab.finals[i].error;
    if (ab.finals[i].arm != 0) continue;
    by_rejection.push_back(ab.tokens[i]);
    drafted += static_cast<uint64_t>(ab.finals[i].num_draft_tokens);
    accepted += static_cast<uint64_t>(ab.finals[i].num_accepted_tokens);
  }
  ASSERT_GT(by_rejection.size(), static_cast<size_t>(n) * 4 / 10) << "the draw splits traffic about evenly";
  ASSERT_LT(by_rejection.size(), static_cast<size_t>(n) * 6 / 10);
  EXPECT_GT(accepted, 0u);
  EXPECT_LT(accepted, drafted) << "rejections (the residual path) must happen";
  const auto plain = tokens_of(specd::config::for_model_dir(specd::spec_test::target_fixture(false, 0.02).string()),
                               top6_requests(static_cast<int>(by_rejection.size()), 100001));
  const double p = specd::spec_test::homogeneity_p_value(pairs_2_3(plain), pairs_2_3(by_rejection));
  RecordProperty("p_value", std::to_string(p));
  EXPECT_GT(p, 1e-3) << "the rejection arm does not sample from the target distribution";
}

}  // namespace
