// Speculative decoding in every compute dtype: greedy output equals the target-only output of
// the same dtype token for token (the kernels give a row the same result whatever the batch),
// and a draft's own `dtype` is honoured (a q4_0 draft under a bf16 target).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "spec_test_util.hpp"

namespace fs = std::filesystem;
using specd::spec_test::Generation;
using specd::spec_test::run_engine;

namespace {

struct Case {
  std::string dtype;     // bf16 | f16 | q8_0 | q4_0
  std::string proposer;  // ngram | draft_model | mtp
  std::string verifier;  // greedy | rejection
  int batch;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const char* d : {"bf16", "f16", "q8_0", "q4_0"})
    for (const char* p : {"ngram", "draft_model", "mtp"})
      for (const char* v : {"greedy", "rejection"})
        for (int b : {1, 6}) cases.push_back({d, p, v, b});
  return cases;
}

class SpecDtypeGreedyEquality : public testing::TestWithParam<Case> {};

TEST_P(SpecDtypeGreedyEquality, SameTokensAsTargetAloneInTheSameDtype) {
  const Case& c = GetParam();
  const bool ngram = c.proposer == "ngram";
  const fs::path target = specd::spec_test::target_fixture(c.proposer == "mtp", ngram ? 0.004 : 0.02);
  auto requests = specd::spec_test::mixed_requests(c.batch, /*seed=*/3000 + c.batch);
  if (ngram) specd::spec_test::plant_continuations(requests, target, 4000 + c.batch);
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

INSTANTIATE_TEST_SUITE_P(AllDtypes, SpecDtypeGreedyEquality, testing::ValuesIn(all_cases()),
                         [](const testing::TestParamInfo<Case>& i) {
                           const Case& c = i.param;
                           return c.dtype + "_" + c.proposer + "_" + c.verifier + "_b" + std::to_string(c.batch);
                         });

// A draft that is the target's own checkpoint: loaded as bf16 like the target its drafts are always
// accepted (same kernels, same logits); quantized to q4_0 (`dtype: q4_0`) it disagrees at
// times, which shows the option is honoured, and the output is still the target's.
TEST(SpecDraftDtype, Q4DraftUnderBf16TargetIsHonouredAndLossless) {
  // llama-68m's shape with per-layer std 0.02: the layers, not only the f16 embeddings and LM
  // head, decide the next token, so 4-bit layers change some greedy choices.
  specd::fixture::Options fo;
  fo.preset = "llama-68m";
  fo.seed = 5;
  fo.layer_std = 0.02;
  const fs::path target = specd::fixture::write(fo, specd::spec_test::work_dir() / "llama-68m-0.02");
  const auto requests = specd::spec_test::mixed_requests(6, 91);
  const specd::config::Overrides bf16 = {{"model.dtype", "bf16"}};
  const auto plain = run_engine(specd::config::for_model_dir(target.string(), bf16), requests);
  for (const char* draft_dtype : {"bf16", "q4_0"}) {
    specd::config::Overrides o = bf16;
    o.push_back({"speculative.proposer.model", target.string()});
    o.push_back({"speculative.proposer.dtype", draft_dtype});
    specd::spec::SpecMetrics m;
    const auto spec = run_engine(specd::spec_test::spec_config(target, "draft_model", "greedy", 4, o), requests, &m);
    for (size_t i = 0; i < plain.size(); ++i) {
      EXPECT_TRUE(spec[i].error.empty()) << spec[i].error;
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << draft_dtype << " request " << i;
    }
    ASSERT_GT(m.draft_tokens, 0u);
    if (std::string(draft_dtype) == "bf16") {
      EXPECT_EQ(m.accepted_tokens, m.draft_tokens) << "a bf16 copy of the target must always be accepted";
    } else {
      EXPECT_LT(m.accepted_tokens, m.draft_tokens) << "a q4_0 draft cannot agree with the bf16 target everywhere";
      EXPECT_GT(m.acceptance_rate(), 0.5);
    }
  }
}

// The K-quants (rows of whole 256-element blocks: llama-68m's shape, the first layer of which
// agrees with the whole model at per-layer std 0.004): greedy speculative output equals the
// target's own in q4_k, q6_k, q3_k, q2_k and the q4_k_m mix, with a self-draft in the same dtype and with n-gram
// lookup, and a Q4_K draft under a bf16 target is honoured (it disagrees at times) and lossless.
TEST(SpecKQuants, GreedyOutputEqualsTargetAloneAndAQ4KDraftIsHonoured) {
  specd::fixture::Options fo;
  fo.preset = "llama-68m";
  fo.seed = 6;
  fo.layer_std = 0.004;
  const fs::path target = specd::fixture::write(fo, specd::spec_test::work_dir() / "llama-68m-0.004");
  auto requests = specd::spec_test::mixed_requests(4, 93);
  for (auto& r : requests) r.sampling.max_tokens = 12;
  for (const char* dtype : {"q4_k", "q6_k", "q3_k", "q2_k", "q4_k_m"}) {
    const specd::config::Overrides o = {{"model.dtype", dtype}};
    const auto plain = run_engine(specd::config::for_model_dir(target.string(), o), requests);
    for (const char* proposer : {"draft_model", "ngram"}) {
      specd::spec::SpecMetrics m;
      const auto spec = run_engine(specd::spec_test::spec_config(target, proposer, "greedy", 3, o), requests, &m);
      for (size_t i = 0; i < plain.size(); ++i) {
        EXPECT_TRUE(spec[i].error.empty()) << spec[i].error;
        EXPECT_EQ(spec[i].tokens, plain[i].tokens) << dtype << " " << proposer << " request " << i;
      }
      if (std::string(proposer) == "draft_model") {
        EXPECT_GT(m.draft_tokens, 0u) << dtype;
        EXPECT_GT(m.accepted_tokens, 0u) << dtype;
      }
    }
  }
  const specd::config::Overrides bf16 = {{"model.dtype", "bf16"}};
  const auto plain = run_engine(specd::config::for_model_dir(target.string(), bf16), requests);
  specd::config::Overrides o = bf16;
  o.push_back({"speculative.proposer.model", target.string()});
  o.push_back({"speculative.proposer.dtype", "q4_k"});
  specd::spec::SpecMetrics m;
  const auto spec = run_engine(specd::spec_test::spec_config(target, "draft_model", "greedy", 4, o), requests, &m);
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "request " << i;
  ASSERT_GT(m.draft_tokens, 0u);
  EXPECT_GT(m.accepted_tokens, 0u);
}

}  // namespace
