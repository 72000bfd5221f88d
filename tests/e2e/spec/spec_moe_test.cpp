// Speculative decoding on mixture-of-experts targets (Mixtral, Qwen3-MoE): the k+1 scored rows
// of a step route to different experts and each expert runs once over all rows that chose it,
// yet greedy output equals the target-only output token for token, in every dtype, batch size
// and proposer here (a row's result does not depend on which rows share its experts).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "spec_test_util.hpp"

namespace fs = std::filesystem;
using specd::spec_test::Generation;
using specd::spec_test::run_engine;

namespace {

fs::path moe_target(const std::string& preset, double layer_std) {
  specd::fixture::Options o;
  o.preset = preset;
  o.seed = 17;
  o.embed_std = 0.5;
  o.layer_std = layer_std;
  return specd::fixture::write(o, specd::spec_test::work_dir() / (preset + (layer_std < 0.01 ? "-markov" : "")));
}

struct Case {
  std::string preset;    // tiny-mixtral | tiny-qwen3-moe
  std::string dtype;     // f32 | q8_0 | q4_0
  std::string proposer;  // ngram | draft_model
  std::string verifier;  // greedy | rejection
  int batch;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const char* d : {"f32", "q8_0", "q4_0"})
    for (const char* p : {"ngram", "draft_model"})
      for (int b : {1, 6}) cases.push_back({"tiny-mixtral", d, p, "greedy", b});
  cases.push_back({"tiny-mixtral", "q8_0", "draft_model", "rejection", 6});
  cases.push_back({"tiny-qwen3-moe", "f32", "draft_model", "greedy", 4});
  cases.push_back({"tiny-qwen3-moe", "q4_0", "ngram", "greedy", 4});
  return cases;
}

class SpecMoeGreedyEquality : public testing::TestWithParam<Case> {};

TEST_P(SpecMoeGreedyEquality, SameTokensAsTargetAlone) {
  const Case& c = GetParam();
  const bool ngram = c.proposer == "ngram";
  const fs::path target = moe_target(c.preset, ngram ? 0.004 : 0.02);
  auto requests = specd::spec_test::mixed_requests(c.batch, /*seed=*/5000 + c.batch);
  if (ngram) specd::spec_test::plant_continuations(requests, target, 6000 + c.batch);
  const specd::config::Overrides dtype = {{"model.dtype", c.dtype}};

  const std::vector<Generation> plain = run_engine(specd::config::for_model_dir(target.string(), dtype), requests);
  specd::spec::SpecMetrics metrics;
  const std::vector<Generation> spec =
      run_engine(specd::spec_test::spec_config(target, c.proposer, c.verifier, 3, dtype), requests, &metrics);
  EXPECT_GT(metrics.draft_tokens, 0u);
  EXPECT_GT(metrics.accepted_tokens, 0u);
  ASSERT_EQ(plain.size(), spec.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_TRUE(spec[i].error.empty()) << spec[i].error;
    EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "request " << i;
    EXPECT_EQ(spec[i].finish_reason, plain[i].finish_reason) << "request " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(MoeTargets, SpecMoeGreedyEquality, testing::ValuesIn(all_cases()),
                         [](const testing::TestParamInfo<Case>& i) {
                           const Case& c = i.param;
                           std::string n = c.preset + "_" + c.dtype + "_" + c.proposer + "_" + c.verifier + "_b" +
                                           std::to_string(c.batch);
                           for (char& ch : n) ch = ch == '-' ? '_' : ch;
                           return n;
                         });

}  // namespace
