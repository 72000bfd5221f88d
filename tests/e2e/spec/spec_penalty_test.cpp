// Sampling controls inside speculative scoring: with presence/frequency/repetition penalties,
// logit_bias and min_tokens at temperature 0, the speculative engine emits exactly the tokens and
// the logprobs (to float rounding) the target alone emits (position i of a speculative step sees drafts 0..i-1 as
// already generated), for a draft-model and an n-gram proposer, greedy and rejection verifiers.
// The controls really change the output (the same requests without them differ), so equality is
// not the trivial one.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "spec_test_util.hpp"
#include "specd/engine.hpp"

namespace {

namespace fs = std::filesystem;
using specd::Engine;
using specd::FinishReason;
using specd::Request;
using specd::RequestId;
using specd::RequestOutput;

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<int32_t>> top_ids;
  FinishReason finish = FinishReason::kNone;
  std::string error;
};

std::vector<Outcome> run(const specd::config::EngineConfig& cfg, const std::vector<Request>& requests,
                         specd::spec::SpecMetrics* metrics = nullptr) {
  Engine engine(cfg);
  std::map<RequestId, size_t> index;
  for (size_t i = 0; i < requests.size(); ++i) index[specd::spec_test::add_request(engine, requests[i])] = i;
  std::vector<Outcome> out(requests.size());
  while (engine.has_unfinished()) {
    for (const RequestOutput& o : engine.step()) {
      Outcome& r = out[index.at(o.id)];
      r.tokens.insert(r.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      for (const auto& lp : o.logprobs) {
        r.logprobs.push_back(lp.logprob);
        std::vector<int32_t> top;
        for (const auto& t : lp.top) top.push_back(t.token);
        r.top_ids.push_back(std::move(top));
      }
      if (o.finished) {
        r.finish = o.finish_reason;
        r.error = o.error;
      }
    }
  }
  if (metrics != nullptr) *metrics = engine.spec_metrics();
  return out;
}

// Mixed requests, each with a different combination of the controls; EOS not ignored in the
// min_tokens ones so that the mask matters.
// `first[i]`: request i's first greedy token without controls.
std::vector<Request> controlled(const std::vector<Request>& base, const std::vector<int32_t>& first) {
  std::vector<Request> out = base;
  for (size_t i = 0; i < out.size(); ++i) {
    specd::SamplingParams& s = out[i].sampling;
    s.logprobs = 3;
    // The first greedy token pushed up, so that it repeats: the penalties then decide when it
    // stops winning, counting the drafts before each position.
    s.logit_bias = {{first[i], 10.0f}};
    switch (i % 4) {
      case 0:
        s.frequency_penalty = 1.5f;
        s.presence_penalty = 0.5f;
        break;
      case 1:
        s.repetition_penalty = 1.8f;
        break;
      case 2:
        s.presence_penalty = 2.0f;
        s.logit_bias.push_back({base[i].prompt_ids.back(), 5.0f});
        break;
      default:
        s.frequency_penalty = -0.5f;
        s.repetition_penalty = 0.7f;
        // EOS (id 2) wins as soon as min_tokens allows it: the position that allows it must count
        // the drafts before it in its speculative step.
        s.min_tokens = 3 + static_cast<int32_t>(i % 8);
        s.max_tokens = 40;
        s.ignore_eos = false;
        s.logit_bias.push_back({2, 100.0f});
        break;
    }
  }
  return out;
}

struct Case {
  std::string proposer;
  std::string verifier;
};

class SpecPenalties : public testing::TestWithParam<Case> {};

TEST_P(SpecPenalties, SameTokensAndLogprobsAsTargetAlone) {
  const Case& c = GetParam();
  const bool ngram = c.proposer == "ngram";
  const fs::path target = specd::spec_test::target_fixture(false, ngram ? 0.004 : 0.02);
  auto base = specd::spec_test::mixed_requests(16, /*seed=*/77);
  if (ngram) specd::spec_test::plant_continuations(base, target, 78);
  const auto plain_cfg = specd::config::for_model_dir(target.string());
  const std::vector<Outcome> uncontrolled = run(plain_cfg, base);
  std::vector<int32_t> first;
  for (const Outcome& o : uncontrolled) first.push_back(o.tokens.at(0));
  const std::vector<Request> requests = controlled(base, first);
  const std::vector<Outcome> plain = run(plain_cfg, requests);
  specd::spec::SpecMetrics metrics;
  const std::vector<Outcome> spec =
      run(specd::spec_test::spec_config(target, c.proposer, c.verifier, 3), requests, &metrics);
  EXPECT_GT(metrics.draft_tokens, 0u);
  EXPECT_GT(metrics.accepted_tokens, 0u);

  size_t changed = 0;
  ASSERT_EQ(plain.size(), spec.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    ASSERT_TRUE(plain[i].error.empty()) << plain[i].error;
    EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "request " << i;
    EXPECT_EQ(spec[i].finish, plain[i].finish) << "request " << i;
    ASSERT_EQ(plain[i].logprobs.size(), plain[i].tokens.size()) << "request " << i;
    ASSERT_EQ(spec[i].logprobs.size(), plain[i].logprobs.size()) << "request " << i;
    for (size_t t = 0; t < plain[i].logprobs.size(); ++t) {
      // The verify pass scores k+1 positions at once; its logits equal single-token decoding's to
      // float rounding (the tokens above are exact), so the logprobs agree to 1e-5.
      EXPECT_NEAR(spec[i].logprobs[t], plain[i].logprobs[t], 1e-5) << "request " << i << " token " << t;
      EXPECT_EQ(spec[i].top_ids[t], plain[i].top_ids[t]) << "request " << i << " token " << t;
      EXPECT_EQ(plain[i].top_ids[t].size(), 3u);
    }
    changed += plain[i].tokens != uncontrolled[i].tokens ? 1 : 0;
    if (requests[i].sampling.min_tokens > 0) {
      EXPECT_EQ(plain[i].tokens.size(), static_cast<size_t>(requests[i].sampling.min_tokens) + 1) << "request " << i;
      EXPECT_EQ(plain[i].finish, FinishReason::kStop) << "request " << i;
    }
  }
  // The controls steer most requests away from their uncontrolled greedy output.
  EXPECT_GE(changed, plain.size() / 2) << "penalties and biases had no effect";
}

INSTANTIATE_TEST_SUITE_P(Proposers, SpecPenalties,
                         testing::Values(Case{"draft_model", "greedy"}, Case{"draft_model", "rejection"},
                                         Case{"ngram", "greedy"}, Case{"ngram", "rejection"}),
                         [](const testing::TestParamInfo<Case>& i) {
                           return i.param.proposer + "_" + i.param.verifier;
                         });

}  // namespace
