// The engine with model.device cuda (docs/cuda.md "Model runtime"). Everywhere: what cannot run
// is refused when the engine is built, with the reason. On a CUDA device (CUDA builds; skipped
// with the reason elsewhere): greedy output on the GPU with each proposer (which runs on the
// CPU beside it) equals the GPU's plain output token for token, and plain output on the GPU
// equals the CPU's on these fixtures.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "spec_test_util.hpp"
#include "specd/error.hpp"
#include "specd/kernels/device_memory.hpp"

namespace specd::spec_test {
namespace {

std::string engine_error(const config::EngineConfig& cfg) {
  try {
    Engine e(cfg);
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kUnsupported) << err.what();
    return err.what();
  }
  return {};
}

TEST(SpecCuda, WhatCannotRunIsRefusedWithTheReason) {
  const fs::path target = target_fixture();
  const std::string other = engine_error(config::for_model_dir(target.string(), {{"model.device", "cuda:1"}}));
  EXPECT_NE(other.find("only the first CUDA device"), std::string::npos) << other;
  if (!kernels::device_available(kernels::Device::kCuda)) {
    const std::string none = engine_error(config::for_model_dir(target.string(), {{"model.device", "cuda"}}));
    EXPECT_NE(none.find("model.device: \"cuda\": no CUDA device can be used here"), std::string::npos) << none;
  }
}

#ifdef SPECD_WITH_CUDA
class SpecCuda : public testing::TestWithParam<std::string> {};

TEST_P(SpecCuda, GreedyOnTheGpuEqualsItsPlainOutputAndTheCpus) {
  if (!kernels::device_available(kernels::Device::kCuda))
    GTEST_SKIP() << "CUDA: " << kernels::device_description(kernels::Device::kCuda);
  const fs::path target = target_fixture(true);
  const auto requests = mixed_requests(4, 7100);
  const config::Overrides gpu = {{"model.device", "cuda"}};
  const std::vector<Generation> cpu_plain = run_engine(config::for_model_dir(target.string()), requests);
  const std::vector<Generation> plain = run_engine(config::for_model_dir(target.string(), gpu), requests);
  expect_same_generations(cpu_plain, plain, "gpu plain against cpu plain");
  spec::SpecMetrics metrics;
  const std::vector<Generation> spec = run_engine(spec_config(target, GetParam(), "greedy", 3, gpu), requests, &metrics);
  EXPECT_GT(metrics.draft_tokens, 0u) << metrics.summary();
  expect_same_generations(plain, spec, GetParam() + " on the gpu");
}

INSTANTIATE_TEST_SUITE_P(Proposers, SpecCuda, testing::Values("ngram", "draft_model", "mtp"));
#endif

}  // namespace
}  // namespace specd::spec_test
