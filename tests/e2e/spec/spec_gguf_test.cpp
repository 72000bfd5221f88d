// Speculative decoding with a GGUF target and a GGUF draft (both written from the fixture by
// tools/gguf): greedy output equals the GGUF target alone token for token, and equals the
// safetensors checkpoint run in the same dtype.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "convert.hpp"
#include "spec_test_util.hpp"

namespace fs = std::filesystem;
using specd::spec_test::Generation;
using specd::spec_test::run_engine;

namespace {

fs::path gguf_of(const fs::path& model, specd::gguf::TensorType type, int64_t layers) {
  const fs::path out = specd::spec_test::work_dir() /
                       ("gguf-" + model.filename().string() + "-" + std::string(specd::gguf::tensor_type_name(type)) +
                        "-l" + std::to_string(layers) + ".gguf");
  specd::gguf::ConvertOptions o;
  o.type = type;
  o.layers = layers;
  specd::gguf::convert_checkpoint(model, out, o);
  return out;
}

struct Case {
  std::string target_type;  // f32 | q8_0
  std::string draft_type;   // f32 | q8_0 | q4_0
  std::string verifier;
  int batch;
};

class SpecGgufGreedyEquality : public testing::TestWithParam<Case> {};

TEST_P(SpecGgufGreedyEquality, GgufTargetAndDraftGiveTheTargetsTokens) {
  const Case& c = GetParam();
  const fs::path dir = specd::spec_test::target_fixture();
  const fs::path target = gguf_of(dir, specd::gguf::parse_tensor_type(c.target_type), 0);
  const fs::path draft = gguf_of(dir, specd::gguf::parse_tensor_type(c.draft_type), 1);
  const auto requests = specd::spec_test::mixed_requests(c.batch, /*seed=*/5000 + c.batch);

  const std::vector<Generation> plain = run_engine(specd::config::for_model_dir(target.string()), requests);
  specd::spec::SpecMetrics metrics;
  const std::vector<Generation> spec =
      run_engine(specd::spec_test::spec_config(target, "draft_model", c.verifier, 3,
                                               {{"speculative.proposer.model", draft.string()}}),
                 requests, &metrics);
  EXPECT_GT(metrics.draft_tokens, 0u);
  EXPECT_GT(metrics.accepted_tokens, 0u);
  if (c.batch > 1) {  // rejected drafts too
    EXPECT_LT(metrics.accepted_tokens, metrics.draft_tokens);
  }
  // The safetensors checkpoint in the GGUF target's dtype emits the same tokens.
  const std::vector<Generation> safetensors =
      run_engine(specd::config::for_model_dir(dir.string(), {{"model.dtype", c.target_type}}), requests);
  ASSERT_EQ(plain.size(), spec.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_TRUE(spec[i].error.empty()) << spec[i].error;
    EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "request " << i;
    EXPECT_EQ(spec[i].finish_reason, plain[i].finish_reason) << "request " << i;
    EXPECT_EQ(safetensors[i].tokens, plain[i].tokens) << "request " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(GgufFiles, SpecGgufGreedyEquality,
                         testing::Values(Case{"f32", "f32", "greedy", 1}, Case{"f32", "f32", "rejection", 6},
                                         Case{"q8_0", "q8_0", "greedy", 6}, Case{"q8_0", "q4_0", "greedy", 1},
                                         Case{"q8_0", "q4_0", "rejection", 6}),
                         [](const testing::TestParamInfo<Case>& i) {
                           const Case& c = i.param;
                           return c.target_type + "_" + c.draft_type + "_" + c.verifier + "_b" +
                                  std::to_string(c.batch);
                         });

}  // namespace
