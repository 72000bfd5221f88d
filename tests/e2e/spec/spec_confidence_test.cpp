// Proposer confidence through the engine (ABI 1.6): with dynamic k the policy asks a proposer that
// reports confidence for each row's whole budget and cuts the drafts by their calibrated
// confidence before scoring. Output stays the target's alone, in every scheduling mode, and the
// cut is counted.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "spec_test_util.hpp"

namespace fs = std::filesystem;

namespace {

specd::config::EngineConfig confidence_config(const fs::path& target, const std::string& pct, bool async) {
  return specd::config::for_model_dir(target.string(),
                                      {{"plugins.paths", std::string("[") + SPECD_BINARY_DIR + "/test-plugins/good]"},
                                       {"speculative.num_speculative_tokens", "6"},
                                       {"speculative.proposer.name", "test_repeat"},
                                       {"speculative.proposer.window", "6"},
                                       {"speculative.proposer.confidence_pct", pct},
                                       {"speculative.verifier.name", "greedy"},
                                       {"speculative.dynamic", "true"},
                                       {"scheduler.async_scheduling", async ? "true" : "false"},
                                       {"kv_cache.memory_mib", "64"}});
}

TEST(SpecConfidence, DraftsAreCutByConfidenceAndOutputStaysTheTargets) {
  const fs::path target = specd::spec_test::target_fixture(false, 0.004);
  const auto requests = specd::spec_test::mixed_requests(4, 77);
  const auto plain = specd::spec_test::run_engine(specd::config::for_model_dir(target.string()), requests);
  for (const bool async : {false, true}) {
    for (const std::string pct : {"[100, 0]", "[90, 50, 10]"}) {
      SCOPED_TRACE(pct + (async ? " async" : ""));
      specd::spec::SpecMetrics m;
      const auto spec = specd::spec_test::run_engine(confidence_config(target, pct, async), requests, &m);
      specd::spec_test::expect_same_generations(plain, spec);
      EXPECT_GT(m.policy.steps, 0u) << m.summary();
      // The proposer drafts 6 every time; drafts of confidence 0 or 0.1 start out worth nothing.
      EXPECT_GT(m.policy.trimmed, 0u) << m.summary();
    }
  }
}

}  // namespace
