// Speculative decoding beyond greedy equality: sampled output is lossless, a draft identical
// to the target is always accepted, per-request overrides and engine-wide switches work, and
// a failing plugin fails only the requests it touched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "chi_square.hpp"
#include "spec_test_util.hpp"

namespace fs = std::filesystem;
using specd::FinishReason;
using specd::Request;
using specd::spec_test::add_request;
using specd::spec_test::Generation;
using specd::spec_test::homogeneity_p_value;
using specd::spec_test::run_engine;

namespace {

// Joint distribution of generated tokens 2 and 3. Token 1 comes from the prefill step; with
// max_tokens 4 the next step speculates k = 2 and emits tokens 2..4 through the verifier.
// `controls` adds sampling controls to every request.
const std::vector<int32_t> kPrompt = {1, 450, 4996, 17354, 1701, 432, 29871, 13};

std::map<std::pair<int, int>, int> tokens_2_and_3(const specd::config::EngineConfig& cfg, int n, uint64_t seed0,
                                                  specd::spec::SpecMetrics* metrics = nullptr,
                                                  const std::function<void(specd::SamplingParams&)>& controls = {},
                                                  const std::vector<int32_t>& prompt = kPrompt,
                                                  std::optional<bool> dynamic = std::nullopt) {
  std::vector<Request> reqs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    Request& r = reqs[static_cast<size_t>(i)];
    r.prompt_ids = prompt;
    r.sampling.temperature = 1.0f;
    r.sampling.top_k = 6;  // p is the top-6 distribution: few enough pairs to test exactly
    r.sampling.max_tokens = 4;
    r.sampling.ignore_eos = true;
    r.sampling.seed = seed0 + static_cast<uint64_t>(i);
    r.speculative.dynamic = dynamic;
    if (controls) controls(r.sampling);
  }
  std::map<std::pair<int, int>, int> counts;
  for (const Generation& g : run_engine(cfg, reqs, metrics)) {
    EXPECT_EQ(g.tokens.size(), 4u) << g.error;
    if (g.tokens.size() == 4) ++counts[{g.tokens[1], g.tokens[2]}];
  }
  return counts;
}

TEST(SpecSampling, RejectionWithDraftModelIsLossless) {
  const fs::path target = specd::spec_test::target_fixture(false, 0.02);
  const int n = 3000;
  const auto plain = tokens_2_and_3(specd::config::for_model_dir(target.string()), n, 1);
  // The draft samples at temperature 1 over the whole vocabulary and returns its q: a draft
  // that differs from p (no top-k) exercises the residual max(0, p - q) path.
  const auto cfg = specd::spec_test::spec_config(target, "draft_model", "rejection", 2,
                                                 {{"speculative.proposer.temperature", "1.0"}});
  specd::spec::SpecMetrics m;
  const auto spec = tokens_2_and_3(cfg, n, 100001, &m);
  ASSERT_GE(m.draft_tokens, static_cast<uint64_t>(2 * n)) << "every request must speculate: " << m.summary();
  EXPECT_GT(m.accepted_tokens, 0u);
  EXPECT_LT(m.accepted_tokens, m.draft_tokens) << "rejections (the residual path) must happen";
  const double p = homogeneity_p_value(plain, spec);
  RecordProperty("p_value", std::to_string(p));
  EXPECT_GT(p, 1e-3) << "speculative sampling does not match the target's distribution";

  // Negative control: the greedy verifier at temperature 1 is not lossless, and the test sees it.
  const auto greedy = tokens_2_and_3(specd::spec_test::spec_config(target, "draft_model", "greedy", 2), n, 200001);
  EXPECT_LT(homogeneity_p_value(plain, greedy), 1e-6);
}

// Dynamic speculation only chooses how many drafts each step verifies, so sampled output still
// follows the target's distribution, for every proposer that drafts at temperature 1 (n-gram
// drafts are one-hot). For n-gram the prompt holds, after its last token's first occurrence,
// that token's greedy continuation: prompt lookup drafts it, and the target accepts it often.
TEST(SpecSampling, DynamicSpeculationIsLossless) {
  const int n = 1500;
  for (const std::string proposer : {"ngram", "suffix", "draft_model", "mtp"}) {
    SCOPED_TRACE(proposer);
    const fs::path target = specd::spec_test::target_fixture(proposer == "mtp", 0.02);
    const bool from_text = proposer == "ngram" || proposer == "suffix";  // one-hot drafts from the text
    std::vector<int32_t> prompt = kPrompt;
    if (from_text) {
      Request probe;
      probe.prompt_ids = {1, 450};
      probe.sampling.temperature = 0.0f;
      probe.sampling.max_tokens = 3;
      probe.sampling.ignore_eos = true;
      const auto chain = run_engine(specd::config::for_model_dir(target.string()), {probe})[0].tokens;
      ASSERT_EQ(chain.size(), 3u);
      prompt = {1, 450, chain[0], chain[1], chain[2], 1701, 432, 450};
    }
    const auto plain = tokens_2_and_3(specd::config::for_model_dir(target.string()), n, 1, nullptr, {}, prompt);
    specd::config::Overrides extra{{"speculative.dynamic", "true"}};
    if (!from_text) extra.push_back({"speculative.proposer.temperature", "1.0"});
    specd::spec::SpecMetrics m;
    // Seeded requests draft a fixed k unless they ask for dynamic k: these ask.
    const auto spec = tokens_2_and_3(specd::spec_test::spec_config(target, proposer, "rejection", 2, extra), n, 300001,
                                     &m, {}, prompt, true);
    EXPECT_GT(m.policy.steps, 0u) << m.summary();
    // It really speculated: a policy that decodes plainly throughout would pass trivially.
    EXPECT_GT(m.draft_tokens, 0u) << m.summary();
    EXPECT_GT(m.accepted_tokens, 0u) << m.summary();
    const double p = homogeneity_p_value(plain, spec);
    RecordProperty("p_value_" + proposer, std::to_string(p));
    EXPECT_GT(p, 1e-3) << "dynamic speculative sampling does not match the target's distribution: " << m.summary();
  }
}

// draft_p_min only shortens drafts: greedy output is unchanged and fewer tokens are drafted.
TEST(SpecControls, DraftConfidenceCutOffShortensDraftsLosslessly) {
  for (const std::string proposer : {"draft_model", "mtp"}) {
    SCOPED_TRACE(proposer);
    const fs::path target = specd::spec_test::target_fixture(proposer == "mtp", 0.02);
    const auto reqs = specd::spec_test::mixed_requests(6, 55);
    const auto plain = run_engine(specd::config::for_model_dir(target.string()), reqs);
    specd::spec::SpecMetrics full, cut;
    const auto a = run_engine(specd::spec_test::spec_config(target, proposer, "greedy", 4), reqs, &full);
    const auto b = run_engine(
        specd::spec_test::spec_config(target, proposer, "greedy", 4, {{"speculative.proposer.draft_p_min", "0.9"}}),
        reqs, &cut);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(a[i].tokens, plain[i].tokens) << "request " << i;
      EXPECT_EQ(b[i].tokens, plain[i].tokens) << "request " << i;
      EXPECT_TRUE(b[i].error.empty()) << b[i].error;
    }
    const auto per_draft = [](const specd::spec::SpecMetrics& m) {
      return m.num_drafts == 0 ? 0.0 : static_cast<double>(m.draft_tokens) / static_cast<double>(m.num_drafts);
    };
    EXPECT_GT(full.draft_tokens, 0u);
    EXPECT_LT(per_draft(cut), per_draft(full)) << full.summary() << "\n" << cut.summary();
  }
}

// With presence/frequency/repetition penalties and logit_bias, speculative sampling follows the
// penalised target distribution (the verifier's p at draft position i counts drafts 0..i-1 as
// generated). The bias goes to the most frequent second token `a`; the penalties stop it
// repeating. (On this fixture the penalised and plain distributions of tokens 2 and 3 differ
// little at position 1, so a p that forgot the drafts is caught by the greedy equality test,
// spec_penalty_test.cpp, not by this one.)
TEST(SpecSampling, RejectionWithPenaltiesAndLogitBiasIsLossless) {
  const fs::path target = specd::spec_test::target_fixture(false, 0.02);
  const auto plain_cfg = specd::config::for_model_dir(target.string());
  std::map<int, int> second;
  for (const auto& [pair, count] : tokens_2_and_3(plain_cfg, 200, 300001)) second[pair.first] += count;
  const int a =
      std::max_element(second.begin(), second.end(), [](auto& x, auto& y) { return x.second < y.second; })->first;
  auto controls = [a](specd::SamplingParams& s) {
    s.logit_bias = {{a, 4.0f}};
    s.presence_penalty = 2.0f;
    s.frequency_penalty = 2.0f;
    s.repetition_penalty = 1.3f;
  };
  const int n = 3000;
  const auto plain = tokens_2_and_3(plain_cfg, n, 1, nullptr, controls);
  int a_second = 0;
  for (const auto& [pair, count] : plain) a_second += pair.first == a ? count : 0;
  EXPECT_GT(a_second, n / 10) << "token " << a << " must stay likely";
  EXPECT_EQ(plain.count({a, a}), 0u) << "the penalties must stop token " << a << " repeating";
  const auto cfg = specd::spec_test::spec_config(target, "draft_model", "rejection", 2,
                                                 {{"speculative.proposer.temperature", "1.0"}});
  specd::spec::SpecMetrics m;
  const auto spec = tokens_2_and_3(cfg, n, 100001, &m, controls);
  ASSERT_GE(m.draft_tokens, static_cast<uint64_t>(2 * n)) << "every request must speculate: " << m.summary();
  EXPECT_GT(m.accepted_tokens, m.draft_tokens / 10) << m.summary();
  EXPECT_LT(m.accepted_tokens, m.draft_tokens) << "rejections (the residual path) must happen";
  const double p = homogeneity_p_value(plain, spec);
  RecordProperty("p_value", std::to_string(p));
  EXPECT_GT(p, 1e-3) << "speculative sampling with penalties does not match the penalised target distribution";
}

TEST(SpecAcceptance, DraftIdenticalToTargetIsAlwaysAccepted) {
  const fs::path target = specd::spec_test::target_fixture(false, 0.02);
  const auto requests = specd::spec_test::mixed_requests(6, 77);
  specd::spec::SpecMetrics m;
  const auto cfg = specd::spec_test::spec_config(target, "draft_model", "greedy", 4,
                                                 {{"speculative.proposer.model", target.string()}});
  const auto out = run_engine(cfg, requests, &m);
  for (const auto& g : out) EXPECT_TRUE(g.error.empty()) << g.error;
  EXPECT_GT(m.draft_tokens, 0u);
  EXPECT_EQ(m.accepted_tokens, m.draft_tokens);
  EXPECT_DOUBLE_EQ(m.acceptance_rate(), 1.0);
}

TEST(SpecAcceptance, SelfSpeculationReportsAcceptance) {
  // The ARCHITECTURE.md dial: per-layer std 0.004 makes a 1-layer self-draft agree closely.
  const fs::path target = specd::spec_test::target_fixture(false, 0.004);
  specd::spec::SpecMetrics m;
  run_engine(specd::spec_test::spec_config(target, "draft_model", "greedy", 4), specd::spec_test::mixed_requests(8, 5),
             &m);
  RecordProperty("acceptance_rate", std::to_string(m.acceptance_rate()));
  RecordProperty("mean_acceptance_length", std::to_string(m.mean_acceptance_length()));
  EXPECT_GT(m.acceptance_rate(), 0.5) << m.summary();
  EXPECT_GT(m.mean_acceptance_length(), 2.0) << m.summary();
  EXPECT_NE(m.summary().find("per position ["), std::string::npos);
}

// A seeded sampled request is reproducible: it drafts its k every step (dynamic k would follow
// the machine's timings) unless it asks for dynamic k; an unseeded or greedy one is planned.
TEST(SpecControls, SeededSampledRequestsDraftAFixedK) {
  const fs::path target = specd::spec_test::target_fixture(false, 0.004);
  auto run = [&](std::optional<uint64_t> seed, float temperature, std::optional<bool> dynamic) {
    Request r;
    r.prompt_ids = kPrompt;
    r.sampling.temperature = temperature;
    r.sampling.max_tokens = 12;
    r.sampling.ignore_eos = true;
    r.sampling.seed = seed;
    r.speculative.dynamic = dynamic;
    specd::spec::SpecMetrics m;
    // The engine default is dynamic k (as shipped): seeded sampled requests are the exception.
    const auto out = run_engine(
        specd::spec_test::spec_config(target, "draft_model", "rejection", 3, {{"speculative.dynamic", "true"}}), {r},
        &m);
    EXPECT_TRUE(out[0].error.empty()) << out[0].error;
    return std::pair{out[0].tokens, m};
  };
  const auto [a, ma] = run(7, 1.0f, std::nullopt);
  EXPECT_EQ(ma.policy.steps, 0u) << "a seeded sampled request was planned: " << ma.summary();
  EXPECT_GT(ma.draft_tokens, 0u);
  EXPECT_EQ(run(7, 1.0f, std::nullopt).first, a) << "same seed, same output";
  EXPECT_GT(run(7, 1.0f, true).second.policy.steps, 0u) << "asked for dynamic k";
  EXPECT_GT(run(std::nullopt, 1.0f, std::nullopt).second.policy.steps, 0u) << "unseeded";
  EXPECT_GT(run(7, 0.0f, std::nullopt).second.policy.steps, 0u) << "greedy";
}

TEST(SpecControls, PerRequestOverrides) {
  const fs::path target = specd::spec_test::target_fixture(false, 0.004);
  auto reqs = specd::spec_test::mixed_requests(3, 9);
  for (auto& r : reqs) r.sampling.max_tokens = 24;
  reqs[0].speculative.enabled = false;
  reqs[1].speculative.num_speculative_tokens = 1;
  reqs[2].speculative.num_speculative_tokens = 4;
  specd::Engine e(specd::spec_test::spec_config(target, "draft_model", "greedy", 3));
  std::map<specd::RequestId, specd::RequestOutput> last;
  std::map<specd::RequestId, size_t> index;
  for (size_t i = 0; i < reqs.size(); ++i) index[add_request(e, reqs[i])] = i;
  std::vector<size_t> max_step_tokens(reqs.size(), 0);
  while (e.has_unfinished())
    for (const auto& o : e.step()) {
      last[o.id] = o;
      max_step_tokens[index[o.id]] = std::max(max_step_tokens[index[o.id]], o.new_token_ids.size());
    }
  for (const auto& [id, o] : last) {
    const size_t i = index[id];
    EXPECT_TRUE(o.error.empty()) << o.error;
    if (i == 0) {
      EXPECT_EQ(o.num_draft_tokens, 0);
    } else if (i == 1) {
      EXPECT_LE(o.num_draft_tokens, o.num_spec_steps);
      EXPECT_LE(max_step_tokens[i], 2u);
    } else {
      EXPECT_GT(max_step_tokens[i], 4u) << "k = 4 should emit up to 5 tokens in a step";
    }
    EXPECT_GT(o.num_generated_tokens, 0);
  }
  // Out-of-range k fails that request only.
  Request bad = reqs[0];
  bad.speculative.num_speculative_tokens = 40;
  const auto id = add_request(e, bad);
  bool failed = false;
  while (e.has_unfinished())
    for (const auto& o : e.step())
      if (o.id == id && o.finished) {
        failed = o.finish_reason == FinishReason::kError &&
                 o.error.find("num_speculative_tokens must be in [0, 32], got 40") != std::string::npos;
      }
  EXPECT_TRUE(failed);
}

TEST(SpecControls, DisableByBatchSize) {
  const fs::path target = specd::spec_test::target_fixture(false, 0.004);
  auto reqs = specd::spec_test::mixed_requests(4, 21);
  for (auto& r : reqs) r.sampling.max_tokens = 12;
  specd::spec::SpecMetrics off, on;
  const auto a = run_engine(
      specd::spec_test::spec_config(target, "draft_model", "greedy", 3, {{"speculative.disable_by_batch_size", "2"}}),
      reqs, &off);
  const auto b = run_engine(
      specd::spec_test::spec_config(target, "draft_model", "greedy", 3, {{"speculative.disable_by_batch_size", "4"}}),
      reqs, &on);
  EXPECT_EQ(off.draft_tokens, 0u) << "4 running sequences > 2: no speculation";
  EXPECT_GT(on.draft_tokens, 0u);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(a[i].tokens, b[i].tokens);
}

TEST(SpecControls, ContextLimitFallsBackToPlainDecoding) {
  const fs::path target = specd::spec_test::target_fixture(false, 0.004);
  auto reqs = specd::spec_test::mixed_requests(4, 33);
  for (auto& r : reqs) {
    r.prompt_ids.resize(std::min<size_t>(r.prompt_ids.size(), 20));
    r.sampling.max_tokens = 200;  // the context (48) ends generation first
  }
  const auto plain = run_engine(specd::config::for_model_dir(target.string(), {{"model.max_model_len", "48"}}), reqs);
  specd::spec::SpecMetrics m;
  const auto spec = run_engine(
      specd::spec_test::spec_config(target, "draft_model", "greedy", 5, {{"model.max_model_len", "48"}}), reqs, &m);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(spec[i].tokens, plain[i].tokens);
    EXPECT_EQ(spec[i].finish_reason, FinishReason::kLength);
    EXPECT_EQ(reqs[i].prompt_ids.size() + spec[i].tokens.size(), 48u);
    EXPECT_TRUE(spec[i].error.empty()) << spec[i].error;
  }
  EXPECT_GT(m.draft_tokens, 0u);
}

TEST(SpecControls, FailingProposerFailsItsRequestsAndTheEngineCarriesOn) {
  const fs::path target = specd::spec_test::target_fixture(false, 0.02);
  auto cfg = specd::config::for_model_dir(
      target.string(), {{"plugins.paths", std::string("[") + SPECD_BINARY_DIR + "/test-plugins/good]"},
                        {"speculative.proposer.name", "test_repeat"},
                        {"speculative.proposer.fail_on_propose", "true"},
                        {"speculative.verifier.name", "greedy"},
                        {"speculative.dynamic", "false"}});  // every step calls the proposer
  specd::Engine e(cfg);
  auto reqs = specd::spec_test::mixed_requests(3, 4);
  reqs[2].speculative.enabled = false;  // never reaches the proposer
  std::vector<specd::RequestId> ids;
  for (const auto& r : reqs) ids.push_back(add_request(e, r));
  std::map<specd::RequestId, specd::RequestOutput> done;
  while (e.has_unfinished())
    for (const auto& o : e.step()) {
      if (o.finished) done[o.id] = o;
    }
  ASSERT_EQ(done.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(done[ids[i]].finish_reason, FinishReason::kError);
    EXPECT_NE(done[ids[i]].error.find("proposer 'test_repeat' propose failed (invalid argument): told to fail"),
              std::string::npos)
        << done[ids[i]].error;
  }
  EXPECT_EQ(done[ids[2]].finish_reason, FinishReason::kLength) << done[ids[2]].error;
  // Later requests are served.
  Request later = reqs[0];
  later.speculative.enabled = false;
  const auto id = add_request(e, later);
  bool served = false;
  while (e.has_unfinished())
    for (const auto& o : e.step())
      if (o.id == id && o.finished) served = o.finish_reason == FinishReason::kLength;
  EXPECT_TRUE(served);
}

// Runs requests 101, 102, 103 through the test_repeat proposer, which fails on_accept for 102.
std::map<specd::RequestId, Generation> run_failing_on_accept(const fs::path& target, const std::vector<Request>& reqs,
                                                             bool keeps_state) {
  const auto cfg = specd::config::for_model_dir(
      target.string(), {{"plugins.paths", std::string("[") + SPECD_BINARY_DIR + "/test-plugins/good]"},
                        {"speculative.proposer.name", "test_repeat"},
                        // Plugins see the engine's sequence ids, numbered from 0 in the order
                        // requests are added: request 102 is sequence 1.
                        {"speculative.proposer.fail_on_accept_seq", "1"},
                        {"speculative.proposer.keeps_state", keeps_state ? "true" : "false"},
                        {"speculative.verifier.name", "greedy"},
                        {"speculative.dynamic", "false"}});
  specd::Engine e(cfg);
  for (specd::RequestId id = 101; id <= 103; ++id) e.add_request(id, reqs[id - 101]);
  std::map<specd::RequestId, Generation> done;
  while (e.has_unfinished())
    for (const auto& o : e.step()) {
      Generation& g = done[o.id];
      g.tokens.insert(g.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finished) {
        g.finish_reason = o.finish_reason;
        g.error = o.error;
      }
    }
  return done;
}

// on_accept runs after the step committed a request's tokens; a proposer that fails there fails
// that request alone (before, one throwing on_accept failed every running request).
TEST(SpecControls, FailingOnAcceptFailsOnlyItsRequest) {
  const fs::path target = specd::spec_test::target_fixture(false, 0.02);
  auto reqs = specd::spec_test::mixed_requests(3, 12);
  for (auto& r : reqs) r.sampling.max_tokens = 12;
  auto done = run_failing_on_accept(target, reqs, /*keeps_state=*/true);
  EXPECT_EQ(done[102].finish_reason, FinishReason::kError);
  EXPECT_NE(done[102].error.find("proposer 'test_repeat' on_accept failed (invalid argument): told to fail on_accept"),
            std::string::npos)
      << done[102].error;
  const auto plain = run_engine(specd::config::for_model_dir(target.string()), {reqs[0], reqs[2]});
  EXPECT_EQ(done[101].finish_reason, FinishReason::kLength) << done[101].error;
  EXPECT_EQ(done[103].finish_reason, FinishReason::kLength) << done[103].error;
  EXPECT_EQ(done[101].tokens, plain[0].tokens);
  EXPECT_EQ(done[103].tokens, plain[1].tokens);

  // A proposer that keeps no state is never called back: the same plugin serves all three.
  done = run_failing_on_accept(target, reqs, /*keeps_state=*/false);
  for (specd::RequestId id = 101; id <= 103; ++id)
    EXPECT_EQ(done[id].finish_reason, FinishReason::kLength) << id << ": " << done[id].error;
}

// A proposer that declares supports_variable_k = 0 gets one k per propose call (the step's
// smallest); the test proposer fails the call when it sees two.
TEST(SpecControls, ProposerWithoutVariableKGetsOneKPerCall) {
  const fs::path target = specd::spec_test::target_fixture(false, 0.02);
  auto reqs = specd::spec_test::mixed_requests(4, 31);
  reqs[0].speculative.num_speculative_tokens = 1;
  reqs[1].speculative.num_speculative_tokens = 3;
  reqs[2].speculative.num_speculative_tokens = 2;
  const auto cfg = specd::config::for_model_dir(
      target.string(), {{"plugins.paths", std::string("[") + SPECD_BINARY_DIR + "/test-plugins/good]"},
                        {"speculative.proposer.name", "test_repeat"},
                        {"speculative.proposer.uniform_k", "true"},
                        {"speculative.verifier.name", "greedy"}});
  specd::spec::SpecMetrics m;
  const auto spec = run_engine(cfg, reqs, &m);
  const auto plain = run_engine(specd::config::for_model_dir(target.string()), reqs);
  EXPECT_GT(m.draft_tokens, 0u);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_TRUE(spec[i].error.empty()) << spec[i].error;
    EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "request " << i;
  }
}

// EngineInfo names the speculative components and reports the verifier's lossless capability.
TEST(SpecControls, EngineInfoReportsTheComponents) {
  const fs::path target = specd::spec_test::target_fixture(false, 0.02);
  const specd::Engine lossless(specd::spec_test::spec_config(target, "ngram", "rejection", 2));
  EXPECT_EQ(lossless.info().proposer, "ngram");
  EXPECT_EQ(lossless.info().verifier, "rejection");
  EXPECT_TRUE(lossless.info().verifier_lossless);
  EXPECT_EQ(lossless.info().scorer, "mqa");
  const specd::Engine lossy(specd::spec_test::spec_config(target, "ngram", "typical_acceptance", 2,
                                                          {{"speculative.scorer", "batch_expansion"}}));
  EXPECT_FALSE(lossy.info().verifier_lossless);
  EXPECT_EQ(lossy.info().scorer, "batch_expansion");
}

}  // namespace
