// Issue 19's per-request features under async and multi-step scheduling (docs/scheduling.md):
// n > 1 choices forked off choice 0's prompt, logprobs of generated tokens, prompt logprobs
// (echo, max_tokens 0 for scoring), penalties and logit_bias, with speculation on. The results
// travel from the model worker to the output processor through the step outbox; in every mode
// each choice gets the same tokens, logprobs and prompt logprobs as in sync single-step mode,
// each request reports every choice and finishes exactly once, on its last output, and every KV
// block is free at the end.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "spec_test_util.hpp"

namespace fs = std::filesystem;
using specd::Engine;
using specd::FinishReason;
using specd::Request;
using specd::RequestId;
using specd::RequestOutput;
using specd::TokenLogprobs;
using specd::spec_test::kModes;
using specd::spec_test::Mode;
using specd::spec_test::mode_name;
using specd::spec_test::scheduling;

namespace {

struct Choice {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;
  FinishReason finish = FinishReason::kNone;
  std::string error;
};

struct Result {
  std::map<int32_t, Choice> choices;  // by index
  std::vector<TokenLogprobs> prompt_logprobs;
  int prompt_logprob_events = 0;  // outputs that carried prompt logprobs
  int finished_events = 0;        // outputs with finished = true
  bool output_after_finish = false;
};

struct Outcome {
  std::vector<Result> results;
  int32_t kv_free = 0, kv_total = 0;
};

Outcome run(const specd::config::EngineConfig& cfg, const std::vector<Request>& requests) {
  Engine engine(cfg);
  std::map<RequestId, size_t> index;
  for (size_t i = 0; i < requests.size(); ++i) index[specd::spec_test::add_request(engine, requests[i])] = i;
  Outcome out;
  out.results.resize(requests.size());
  while (engine.has_unfinished()) {
    for (const RequestOutput& o : engine.step()) {
      Result& r = out.results[index.at(o.id)];
      if (r.finished_events > 0) r.output_after_finish = true;
      Choice& c = r.choices[o.index];
      c.tokens.insert(c.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      c.logprobs.insert(c.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
      if (!o.prompt_logprobs.empty()) {
        ++r.prompt_logprob_events;
        r.prompt_logprobs.insert(r.prompt_logprobs.end(), o.prompt_logprobs.begin(), o.prompt_logprobs.end());
      }
      if (o.finish_reason != FinishReason::kNone) {
        c.finish = o.finish_reason;
        c.error = o.error;
      }
      if (o.finished) ++r.finished_events;
    }
  }
  out.kv_free = engine.stats().kv_blocks_free;
  out.kv_total = engine.stats().kv_blocks_total;
  return out;
}

void expect_same_logprobs(const std::vector<TokenLogprobs>& want, const std::vector<TokenLogprobs>& got,
                          const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t t = 0; t < want.size(); ++t) {
    EXPECT_EQ(got[t].token, want[t].token) << what << ", position " << t;
    EXPECT_NEAR(got[t].logprob, want[t].logprob, 1e-5) << what << ", position " << t;
    ASSERT_EQ(got[t].top.size(), want[t].top.size()) << what << ", position " << t;
    for (size_t j = 0; j < want[t].top.size(); ++j) {
      EXPECT_EQ(got[t].top[j].token, want[t].top[j].token) << what << ", position " << t;
      EXPECT_NEAR(got[t].top[j].logprob, want[t].top[j].logprob, 1e-5) << what << ", position " << t;
    }
  }
}

// Requests mixing the features; the rest of the batch decodes plainly so that multi-steps form.
std::vector<Request> feature_requests(bool sampled) {
  std::vector<Request> rs = specd::spec_test::mixed_requests(6, 1900);
  for (size_t i = 0; i < rs.size(); ++i) {
    specd::SamplingParams& s = rs[i].sampling;
    if (sampled) {
      s.temperature = 1.0f;
      s.seed = 70 + i;
    }
    s.max_tokens = 12;
  }
  rs[0].n = 3;  // choices with their own seed streams, penalties and logprobs
  rs[0].sampling.logprobs = 2;
  rs[0].sampling.frequency_penalty = 0.5f;
  rs[1].sampling.prompt_logprobs = 2;  // scoring: echo + logprobs + max_tokens 0
  rs[1].sampling.max_tokens = 0;
  rs[2].sampling.prompt_logprobs = 1;  // echo with generation
  rs[2].sampling.logprobs = 1;
  rs[2].sampling.presence_penalty = 1.0f;
  rs[2].sampling.logit_bias = {{rs[2].prompt_ids.back(), 4.0f}};
  rs[3].n = 2;  // prompt logprobs reported once, with choice 0
  rs[3].sampling.prompt_logprobs = 0;
  rs[3].sampling.logprobs = 0;
  rs[3].sampling.repetition_penalty = 1.3f;
  rs[4].n = 2;  // choice 0 ends with its first token: the fork must happen before it leaves the KV cache
  rs[4].sampling.max_tokens = 1;
  rs[4].sampling.logprobs = 1;
  return rs;
}

struct Case {
  std::string proposer;
  std::string verifier;  // greedy: temperature 0; rejection: temperature 1, seeded
};

class RequestFeaturesInEveryMode : public testing::TestWithParam<Case> {};

TEST_P(RequestFeaturesInEveryMode, SameChoicesLogprobsAndPromptLogprobs) {
  const Case& c = GetParam();
  const bool ngram = c.proposer == "ngram";
  const fs::path target = specd::spec_test::target_fixture(false, ngram ? 0.004 : 0.02);
  const std::vector<Request> requests = feature_requests(c.verifier == "rejection");
  auto config = [&](Mode m) { return specd::spec_test::spec_config(target, c.proposer, c.verifier, 3, scheduling(m)); };
  const Outcome base = run(config(kModes[0]), requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    const Result& r = base.results[i];
    ASSERT_EQ(r.choices.size(), static_cast<size_t>(requests[i].n)) << "request " << i;
    for (const auto& [index, choice] : r.choices) {
      ASSERT_TRUE(choice.error.empty()) << choice.error;
      if (requests[i].sampling.logprobs >= 0) {
        EXPECT_EQ(choice.logprobs.size(), choice.tokens.size()) << "request " << i << " choice " << index;
      }
    }
    if (requests[i].sampling.prompt_logprobs >= 0) {
      EXPECT_EQ(r.prompt_logprobs.size(), requests[i].prompt_ids.size() - 1) << "request " << i;
    }
  }
  EXPECT_TRUE(base.results[1].choices.at(0).tokens.empty()) << "max_tokens 0 scores the prompt only";
  if (c.verifier == "rejection") {
    EXPECT_NE(base.results[0].choices.at(0).tokens, base.results[0].choices.at(1).tokens)
        << "sampled choices draw from their own seed streams";
  } else {
    for (const auto& [index, choice] : base.results[0].choices)
      EXPECT_EQ(choice.tokens, base.results[0].choices.at(0).tokens) << "greedy choice " << index;
  }

  for (const Mode m : kModes) {
    const Outcome got = run(config(m), requests);
    for (size_t i = 0; i < requests.size(); ++i) {
      const std::string what = mode_name(m) + ", request " + std::to_string(i);
      const Result &want = base.results[i], &r = got.results[i];
      EXPECT_EQ(r.finished_events, 1) << what << ": a request finishes exactly once";
      EXPECT_FALSE(r.output_after_finish) << what;
      EXPECT_LE(r.prompt_logprob_events, 1) << what << ": prompt logprobs are reported once";
      ASSERT_EQ(r.choices.size(), want.choices.size()) << what;
      for (const auto& [index, choice] : want.choices) {
        const Choice& g = r.choices.at(index);
        const std::string which = what + " choice " + std::to_string(index);
        EXPECT_EQ(g.tokens, choice.tokens) << which;
        EXPECT_EQ(g.finish, choice.finish) << which << ": " << g.error;
        expect_same_logprobs(choice.logprobs, g.logprobs, which + " logprobs");
      }
      expect_same_logprobs(want.prompt_logprobs, r.prompt_logprobs, what + " prompt logprobs");
    }
    EXPECT_EQ(got.kv_free, got.kv_total) << mode_name(m) << ": KV blocks leaked (shared prompt blocks?)";
  }
}

INSTANTIATE_TEST_SUITE_P(Proposers, RequestFeaturesInEveryMode,
                         testing::Values(Case{"draft_model", "rejection"}, Case{"ngram", "greedy"}),
                         [](const testing::TestParamInfo<Case>& i) {
                           return i.param.proposer + "_" + i.param.verifier;
                         });

}  // namespace
