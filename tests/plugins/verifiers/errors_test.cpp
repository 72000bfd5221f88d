// Error texts for bad batches (naming the sequence, position and what is wrong), parameter
// validation with YAML paths, and capabilities.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "plugins/verifiers/verifier_test_util.hpp"

namespace specd::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class BatchErrors : public ::testing::TestWithParam<std::string> {
 protected:
  HostBatch batch() { return random_batch(4, 4, 320, true, 7, false); }
  std::string error(HostBatch& hb) { return verify_error(*make_verifier(GetParam()), hb.view()); }
};

TEST_P(BatchErrors, DraftTokenAboveTheVocabulary) {
  HostBatch hb = batch();
  hb.draft_token(2, 1) = 321;
  EXPECT_THAT(error(hb),
              AllOf(HasSubstr("invalid argument"),
                    HasSubstr("sequence 2, position 1: draft token 321 is outside the vocabulary [0, 320)")));
}

TEST_P(BatchErrors, DraftTokenBelowZero) {
  HostBatch hb = batch();
  hb.draft_token(3, 0) = -1;
  EXPECT_THAT(error(hb), HasSubstr("sequence 3, position 0: draft token -1 is outside the vocabulary [0, 320)"));
}

TEST_P(BatchErrors, NumDraftedOutsideRange) {
  HostBatch hb = batch();
  hb.num_drafted[1] = 5;
  EXPECT_THAT(error(hb), HasSubstr("sequence 1: num_drafted 5 is outside [0, 4]"));
  hb.num_drafted[1] = -2;
  EXPECT_THAT(error(hb), HasSubstr("sequence 1: num_drafted -2 is outside [0, 4]"));
}

TEST_P(BatchErrors, BadShapes) {
  HostBatch hb = batch();
  specd_verify_batch b = hb.view();
  b.k_max = -1;
  EXPECT_THAT(verify_error(*make_verifier(GetParam()), b), HasSubstr("k_max must be >= 0, got -1"));
  b = hb.view();
  b.vocab_size = 0;
  EXPECT_THAT(verify_error(*make_verifier(GetParam()), b), HasSubstr("vocab_size must be > 0, got 0"));
  b = hb.view();
  b.num_seqs = -3;
  EXPECT_THAT(verify_error(*make_verifier(GetParam()), b), HasSubstr("num_seqs must be >= 0, got -3"));
  b = hb.view();
  b.struct_size = 8;
  EXPECT_THAT(verify_error(*make_verifier(GetParam()), b), HasSubstr("struct_size 8 is smaller than"));
  b = hb.view();
  b.device.type = 7;
  EXPECT_THAT(verify_error(*make_verifier(GetParam()), b), HasSubstr("unknown device type 7"));
}

TEST_P(BatchErrors, NullPointers) {
  HostBatch hb = batch();
  specd_verify_batch b = hb.view();
  b.target_probs = nullptr;
  EXPECT_THAT(verify_error(*make_verifier(GetParam()), b), HasSubstr("verify batch: target_probs is null"));
  b = hb.view();
  b.out_tokens = nullptr;
  EXPECT_THAT(verify_error(*make_verifier(GetParam()), b), HasSubstr("verify batch: out_tokens is null"));
  b = hb.view();
  b.draft_tokens = nullptr;
  EXPECT_THAT(verify_error(*make_verifier(GetParam()), b), HasSubstr("verify batch: draft_tokens is null"));
}

TEST_P(BatchErrors, NanNegativeAndUnnormalisedTargetRows) {
  HostBatch hb = batch();
  hb.target_row(3, 2)[17] = std::nanf("");
  EXPECT_THAT(error(hb), HasSubstr("sequence 3, position 2: target probability of token 17 is nan "
                                   "(must be finite and >= 0)"));
  hb = batch();
  hb.target_row(0, 4)[5] = -0.25f;  // position 4 = the bonus row, used when all 4 drafts are accepted
  EXPECT_THAT(error(hb), HasSubstr("sequence 0, position 4: target probability of token 5 is -0.25"));
  hb = batch();
  for (int32_t t = 0; t < 320; ++t) hb.target_row(1, 0)[t] *= 0.5f;
  EXPECT_THAT(error(hb), HasSubstr("sequence 1, position 0: target probabilities sum to 0.5, expected 1 "
                                   "(tolerance 0.001)"));
  hb = batch();
  hb.target_row(2, 1)[0] = INFINITY;
  EXPECT_THAT(error(hb), HasSubstr("sequence 2, position 1: target probability of token 0 is inf"));
}

TEST_P(BatchErrors, EmptyBatchIsFine) {
  HostBatch hb(0, 4, 320, true);
  EXPECT_NO_THROW(hb.run(*make_verifier(GetParam())));
}

// With a GPU this goes to the kernel and fails on host pointers; without one (or without
// CUDA in the plugin) it fails with a message about CUDA. It never touches the pointers.
TEST_P(BatchErrors, CudaBatchOfHostPointersIsRefused) {
  HostBatch hb = batch();
  specd_verify_batch b = hb.view();
  b.device = {SPECD_DEVICE_CUDA, 0};
  auto verifier = make_verifier(GetParam());
  const std::string message = verify_error(*verifier, b);
  if (verifier->capabilities().supports_cuda) {
    EXPECT_THAT(message, ::testing::AnyOf(HasSubstr("host memory, but the batch is on a CUDA device"),
                                          HasSubstr("cannot use CUDA device 0"),
                                          HasSubstr("cannot query the current CUDA device")));
  } else {
    EXPECT_THAT(message, AllOf(HasSubstr("unsupported"), HasSubstr("was built without CUDA")));
  }
}

INSTANTIATE_TEST_SUITE_P(AllVerifiers, BatchErrors, ::testing::Values("rejection", "typical_acceptance", "greedy"),
                         VerifierName());

TEST(BatchErrors, RejectionChecksDraftRowsAndRng) {
  HostBatch hb = random_batch(3, 2, 64, true, 8, false);
  hb.draft_row(2, 1)[63] = -1.0f;
  EXPECT_THAT(verify_error(*make_verifier("rejection"), hb.view()),
              HasSubstr("sequence 2, position 1: draft probability of token 63 is -1"));
  hb = random_batch(3, 2, 64, true, 8, false);
  for (int32_t t = 0; t < 64; ++t) hb.draft_row(0, 0)[t] = 0.0f;
  EXPECT_THAT(verify_error(*make_verifier("rejection"), hb.view()),
              HasSubstr("sequence 0, position 0: draft probabilities sum to 0, expected 1"));
  hb = random_batch(3, 2, 64, true, 8, false);
  specd_verify_batch b = hb.view();
  b.seeds = nullptr;
  EXPECT_THAT(verify_error(*make_verifier("rejection"), b), HasSubstr("verify batch: seeds is null"));
  b = hb.view();
  b.steps = nullptr;
  EXPECT_THAT(verify_error(*make_verifier("typical_acceptance"), b), HasSubstr("verify batch: steps is null"));
}

// Greedy needs no randomness and typical acceptance / greedy ignore draft probabilities.
TEST(BatchErrors, UnusedInputsAreNotChecked) {
  HostBatch hb = random_batch(3, 2, 64, true, 9, false);
  for (float& q : hb.draft) q = std::nanf("");
  specd_verify_batch b = hb.view();
  b.seeds = nullptr;
  b.steps = nullptr;
  EXPECT_NO_THROW(make_verifier("greedy")->verify(b));
  EXPECT_NO_THROW(make_verifier("typical_acceptance")->verify(hb.view()));
}

// ------------------------------------------------------------------------------------------
// Parameters

std::string create_error(const std::string& name, const std::vector<std::pair<std::string, std::string>>& params) {
  try {
    make_verifier(name, params);
  } catch (const specd::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected creating " << name << " to fail";
  return {};
}

TEST(Params, TypicalAcceptanceRejectsUnknownKeys) {
  EXPECT_THAT(create_error("typical_acceptance", {{"posterior_treshold", "0.1"}}),
              HasSubstr("verifiers.yaml:0: speculative.verifier.posterior_treshold: unknown key"));
}

TEST(Params, TypicalAcceptanceRejectsOutOfRangeValues) {
  EXPECT_THAT(create_error("typical_acceptance", {{"posterior_alpha", "1.5"}}),
              HasSubstr("speculative.verifier.posterior_alpha: expected number in [0, 1], got \"1.5\""));
  EXPECT_THAT(create_error("typical_acceptance", {{"posterior_threshold", "-0.01"}}),
              HasSubstr("speculative.verifier.posterior_threshold: expected number in [0, 1], got \"-0.01\""));
  EXPECT_THAT(create_error("typical_acceptance", {{"posterior_threshold", "high"}}),
              HasSubstr("speculative.verifier.posterior_threshold: expected number in [0, 1], got \"high\""));
  // Every mistake at once.
  const std::string all =
      create_error("typical_acceptance", {{"posterior_threshold", "2"}, {"posterior_alpha", "nan"}, {"alpha", "1"}});
  EXPECT_THAT(all, AllOf(HasSubstr("speculative.verifier.posterior_threshold"),
                         HasSubstr("speculative.verifier.posterior_alpha"),
                         HasSubstr("speculative.verifier.alpha: unknown key")));
}

// The way the engine passes them: a YAML subtree, with file and line in every message.
TEST(Params, TypicalAcceptanceFromYaml) {
  const YAML::Node root = YAML::Load(
      "speculative:\n"
      "  verifier:\n"
      "    name: typical_acceptance\n"
      "    posterior_alpha: 1.5\n"
      "    posterior_treshold: 0.1\n");
  const auto params = plugin::Params::from_yaml(root["speculative"]["verifier"], "my.yaml", "speculative.verifier");
  try {
    verifier_registry().create_verifier("typical_acceptance", params);
    ADD_FAILURE() << "expected creation to fail";
  } catch (const specd::Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("my.yaml:4: speculative.verifier.posterior_alpha: expected number in [0, 1], "
                                          "got \"1.5\""),
                                HasSubstr("my.yaml:5: speculative.verifier.posterior_treshold: unknown key")));
  }
  const YAML::Node good = YAML::Load("{name: typical_acceptance, posterior_threshold: 0.2, posterior_alpha: 0.5}");
  EXPECT_NO_THROW(verifier_registry().create_verifier(
      "typical_acceptance", plugin::Params::from_yaml(good, "good.yaml", "speculative.verifier")));
}

TEST(Params, ValidateReportsTheSameErrorsWithoutCreating) {
  const auto params = plugin::Params::from_pairs({{"posterior_alpha", "3"}}, "verifiers.yaml", "speculative.verifier");
  try {
    verifier_registry().validate(plugin::ComponentKind::kVerifier, "typical_acceptance", params);
    ADD_FAILURE() << "expected validation to fail";
  } catch (const specd::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("speculative.verifier.posterior_alpha: expected number in [0, 1], got \"3\""));
  }
  EXPECT_NO_THROW(verifier_registry().validate(
      plugin::ComponentKind::kVerifier, "typical_acceptance",
      plugin::Params::from_pairs({{"posterior_threshold", "0.2"}, {"posterior_alpha", "0"}})));
}

TEST(Params, RejectionAndGreedyTakeNoParameters) {
  for (const char* name : {"rejection", "greedy"})
    EXPECT_THAT(create_error(name, {{"posterior_alpha", "0.3"}}),
                HasSubstr("speculative.verifier.posterior_alpha: unknown key"))
        << name;
}

TEST(Capabilities, AsDocumented) {
#ifdef SPECD_TEST_WITH_CUDA
  const int32_t cuda = 1;
#else
  const int32_t cuda = 0;
#endif
  const auto rejection = make_verifier("rejection")->capabilities();
  EXPECT_EQ(rejection.needs_draft_probs, 1);
  EXPECT_EQ(rejection.lossless, 1);
  EXPECT_EQ(rejection.supports_cuda, cuda);
  const auto typical = make_verifier("typical_acceptance")->capabilities();
  EXPECT_EQ(typical.needs_draft_probs, 0);
  EXPECT_EQ(typical.lossless, 0);
  EXPECT_EQ(typical.supports_cuda, cuda);
  const auto greedy = make_verifier("greedy")->capabilities();
  EXPECT_EQ(greedy.needs_draft_probs, 0);
  EXPECT_EQ(greedy.lossless, 0);
  EXPECT_EQ(greedy.supports_cuda, cuda);
}

}  // namespace
}  // namespace specd::test
