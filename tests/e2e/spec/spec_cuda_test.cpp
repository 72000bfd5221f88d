// The engine with the target on the model's device runtime (docs/cuda.md "Model runtime"):
// model.device staged (the runtime on the CPU, everywhere) and cuda (CUDA builds; skipped with
// the reason where no device exists). Greedy output equals the CPU engine's, plainly and with
// each proposer (draft models, self-drafts, MTP modules and EAGLE-3 heads follow the target onto
// the runtime);
// staged, the device runtime computes the CPU path's bits, so this is exact; on a GPU the
// fixtures' margins keep the argmax. What cannot run is refused when the engine is built.
#include <gtest/gtest.h>

#include <ostream>
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

TEST(SpecDevice, WhatCannotRunIsRefusedWithTheReason) {
  const fs::path target = target_fixture();
  const std::string other = engine_error(config::for_model_dir(target.string(), {{"model.device", "cuda:1"}}));
  EXPECT_NE(other.find("only the first CUDA device"), std::string::npos) << other;
  if (!kernels::device_available(kernels::Device::kCuda)) {
    const std::string none = engine_error(config::for_model_dir(target.string(), {{"model.device", "cuda"}}));
    EXPECT_NE(none.find("model.device: \"cuda\": no CUDA device can be used here"), std::string::npos) << none;
  }
}

struct DeviceCase {
  std::string device;  // model.device
  std::string proposer;
};

void PrintTo(const DeviceCase& c, std::ostream* os) {
  *os << c.device << " " << c.proposer;
}

class SpecDevice : public testing::TestWithParam<DeviceCase> {};

TEST_P(SpecDevice, GreedyOutputEqualsTheCpuEngines) {
  const DeviceCase& c = GetParam();
  if (c.device == "cuda" && !kernels::device_available(kernels::Device::kCuda))
    GTEST_SKIP() << "CUDA: " << kernels::device_description(kernels::Device::kCuda);
  // n-gram lookup needs repeats: the near-Markov target with continuations planted in the prompts.
  const bool ngram = c.proposer == "ngram";
  const fs::path target = ngram ? target_fixture(false, 0.004) : target_fixture(true);
  auto requests = mixed_requests(4, 7100);
  if (ngram) plant_continuations(requests, target, 7101);
  const config::Overrides on = {{"model.device", c.device}};
  const std::vector<Generation> cpu = run_engine(config::for_model_dir(target.string()), requests);
  if (c.proposer.empty()) {
    expect_same_generations(cpu, run_engine(config::for_model_dir(target.string(), on), requests), c.device);
    return;
  }
  config::Overrides extra = on;
  if (c.proposer == "eagle3") {  // a random head (it drafts; acceptance is beside the point here)
    fixture::Eagle3Options o;
    o.seed = 3;
    o.draft_vocab = 2000;
    o.layer_std = 0.1;
    o.aux_layers = {0, 0, 1};
    extra.push_back(
        {"speculative.proposer.model", fixture::write_eagle3_head(target, o, work_dir() / "eagle3-device").string()});
  }
  spec::SpecMetrics metrics;
  const std::vector<Generation> spec =
      run_engine(spec_config(target, c.proposer, "greedy", 3, extra), requests, &metrics);
  EXPECT_GT(metrics.draft_tokens, 0u) << metrics.summary();
  expect_same_generations(cpu, spec, c.proposer + " on " + c.device);
}

std::vector<DeviceCase> device_cases() {
  std::vector<DeviceCase> cases;
  std::vector<std::string> devices = {"staged"};
#ifdef SPECD_WITH_CUDA
  devices.push_back("cuda");
#endif
  for (const std::string& d : devices)
    for (const char* p : {"", "ngram", "draft_model", "mtp", "eagle3"}) cases.push_back({d, p});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Targets, SpecDevice, testing::ValuesIn(device_cases()),
                         [](const testing::TestParamInfo<DeviceCase>& info) {
                           return info.param.device + "_" +
                                  (info.param.proposer.empty() ? std::string("plain") : info.param.proposer);
                         });

}  // namespace
}  // namespace specd::spec_test
