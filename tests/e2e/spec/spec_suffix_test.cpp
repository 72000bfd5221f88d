// Suffix decoding through the engine: a request that repeats an earlier request's output drafts
// it from the global cache (finished outputs), with output equal to the target alone's; with
// share_across_requests: false only requests of the same tenant do.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "spec_test_util.hpp"
#include "specd/engine.hpp"

namespace fs = std::filesystem;
using specd::Request;
using specd::spec_test::Generation;

namespace {

// Runs one request to completion on `engine`.
Generation run_one(specd::Engine& engine, const Request& r) {
  specd::spec_test::add_request(engine, r);
  Generation g;
  while (engine.has_unfinished())
    for (const specd::RequestOutput& o : engine.step()) {
      g.tokens.insert(g.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finished) g.error = o.error;
    }
  return g;
}

uint64_t observed(const specd::Engine& engine, const std::string& name) {
  for (const auto& s : engine.spec_metrics().proposer_series)
    if (s.name == name) return s.count;
  return 0;
}

Request request(std::vector<int32_t> prompt, const std::string& tenant) {
  Request r = specd::spec_test::greedy_request(std::move(prompt), 24);
  r.speculative.tenant = tenant;
  return r;
}

class SuffixE2E : public testing::Test {
 protected:
  void SetUp() override {
    target_ = specd::spec_test::target_fixture(false, 0.004);
    // The first request's output, then a second prompt that leads into it from elsewhere.
    const Generation first = specd::spec_test::run_engine(specd::config::for_model_dir(target_.string()),
                                                          {request({1, 450, 3000, 12}, "")})[0];
    ASSERT_EQ(first.tokens.size(), 24u);
    output_ = first.tokens;
    follow_ = {1, 9, 77, output_[0], output_[1], output_[2]};
    want_ = specd::spec_test::run_engine(specd::config::for_model_dir(target_.string()), {request(follow_, "")})[0];
  }
  specd::config::EngineConfig config(bool share) const {
    return specd::spec_test::spec_config(target_, "suffix", "rejection", 6,
                                         {{"speculative.proposer.share_across_requests", share ? "true" : "false"},
                                          {"speculative.proposer.max_spec_factor", "4"}});
  }
  fs::path target_;
  std::vector<int32_t> output_, follow_;
  Generation want_;
};

TEST_F(SuffixE2E, FinishedOutputsDraftForLaterRequestsLosslessly) {
  specd::Engine engine(config(true));
  EXPECT_EQ(run_one(engine, request({1, 450, 3000, 12}, "")).tokens, output_);
  EXPECT_EQ(observed(engine, "global_hits"), 0u);
  const Generation g = run_one(engine, request(follow_, ""));
  EXPECT_EQ(g.tokens, want_.tokens);
  EXPECT_TRUE(g.error.empty()) << g.error;
  EXPECT_GT(observed(engine, "global_hits"), 0u) << engine.spec_metrics().summary();
  EXPECT_GT(engine.spec_metrics().accepted_tokens, 0u);
}

TEST_F(SuffixE2E, TenantsDoNotDraftFromEachOther) {
  specd::Engine engine(config(false));
  EXPECT_EQ(run_one(engine, request({1, 450, 3000, 12}, "key:1/user:alice")).tokens, output_);
  // Another tenant, and a request with no tenant, whose text leads into alice's output.
  EXPECT_EQ(run_one(engine, request(follow_, "key:1/user:bob")).tokens, want_.tokens);
  EXPECT_EQ(run_one(engine, request(follow_, "")).tokens, want_.tokens);
  EXPECT_EQ(observed(engine, "global_hits"), 0u) << "another tenant's output was drafted";
  EXPECT_EQ(run_one(engine, request(follow_, "key:1/user:alice")).tokens, want_.tokens);
  EXPECT_GT(observed(engine, "global_hits"), 0u) << "the same tenant shares";
}

}  // namespace
