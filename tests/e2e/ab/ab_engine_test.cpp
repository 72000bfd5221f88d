// A/B arms in a real engine: assignment (explicit, sticky user, unknown name), shadow arms that
// see the same drafts, probabilities and uniforms as the serving arm, and the per-arm metrics.
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "ab_test_util.hpp"
#include "specd/error.hpp"

namespace {

using specd::Request;
using specd::RequestOutput;
using specd::ab_test::ab_config;
using specd::ab_test::run_ab;
using specd::ab_test::sampled_requests;
using specd::ab_test::work_dir;

TEST(AbEngine, ExplicitArmStickyUserAndUnknownArm) {
  const auto cfg = ab_config("[{name: a, verifier: rejection}, {name: b, verifier: rejection, weight: 3}]", "",
                             work_dir() / "assign.jsonl");
  std::vector<Request> reqs = sampled_requests(24, 0.0f, 4, 1);
  for (size_t i = 0; i < 8; ++i) reqs[i].speculative.arm = "a";        // explicit, against the 1:3 split
  for (size_t i = 8; i < 16; ++i) reqs[i].speculative.user = "alice";  // sticky
  reqs[16].speculative.arm = "nope";                                   // unknown
  reqs[17].speculative.arm = "bad name!";                              // malformed
  const auto run = run_ab(cfg, reqs);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(run.finals[i].arm, 0) << i;
  std::set<int32_t> alice;
  for (size_t i = 8; i < 16; ++i) alice.insert(run.finals[i].arm);
  EXPECT_EQ(alice.size(), 1u) << "every request of one user on one arm";
  EXPECT_EQ(run.finals[16].finish_reason, specd::FinishReason::kError);
  EXPECT_EQ(run.finals[16].error, "unknown A/B arm 'nope' (arms: a, b)");
  EXPECT_EQ(run.finals[17].error, "speculative.arm is not a valid arm name");
  // The log has one line per finished request an arm served, with how it was assigned.
  ASSERT_EQ(run.records.size(), 22u);
  EXPECT_EQ(run.records[run.record_of.at(0)].assigned, "explicit");
  EXPECT_EQ(run.records[run.record_of.at(8)].assigned, "user");
  EXPECT_EQ(run.records[run.record_of.at(20)].assigned, "random");
  EXPECT_EQ(run.info.arms.size(), 2u);
  EXPECT_EQ(run.info.verifier, "rejection,rejection");
}

TEST(AbEngine, ArmOwnKAndPerArmMetrics) {
  const auto cfg = ab_config(
      "[{name: short, verifier: rejection, num_speculative_tokens: 1}, "
      "{name: long, verifier: rejection, num_speculative_tokens: 4}]",
      "", work_dir() / "k.jsonl");
  std::vector<Request> reqs = sampled_requests(6, 0.0f, 12, 5);
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].speculative.arm = i % 2 ? "long" : "short";
  auto engine = std::make_unique<specd::Engine>(cfg);
  for (size_t i = 0; i < reqs.size(); ++i) engine->add_request(i + 1, reqs[i]);
  while (engine->has_unfinished()) (void)engine->step();
  const auto& arms = engine->arm_metrics();
  ASSERT_EQ(arms.size(), 2u);
  EXPECT_EQ(arms[0].num_requests, 3u);
  EXPECT_EQ(arms[1].num_requests, 3u);
  EXPECT_EQ(arms[0].serving.drafted_at.size(), 1u) << "arm `short` drafts one token";
  EXPECT_EQ(arms[1].serving.drafted_at.size(), 4u);
  EXPECT_EQ(arms[0].serving.draft_tokens + arms[1].serving.draft_tokens, engine->spec_metrics().draft_tokens);
}

// Greedy and rejection at temperature 0 decide the same way, so a shadow arm's counterfactual
// accepted lengths must equal what that arm accepts when it serves the same requests: for chains,
// and for draft trees (both verify the same tree; rejection at temperature 0 accepts the first
// sibling that is the target's argmax, as greedy does).
void expect_shadows_equal_serving(int k, const specd::config::Overrides& extra, const std::string& tag) {
  const std::string arms = "[{name: greedy, verifier: greedy}, {name: rejection, verifier: rejection}]";
  std::vector<Request> reqs = sampled_requests(9, 0.0f, 20, 3);
  auto on = [&](const std::string& arm) {
    std::vector<Request> r = reqs;
    for (Request& x : r) x.speculative.arm = arm;
    return run_ab(ab_config(arms, "all", work_dir() / ("fidelity-" + tag + "-" + arm + ".jsonl"), k, extra), r);
  };
  const auto by_greedy = on("greedy");
  const auto by_rejection = on("rejection");
  ASSERT_EQ(by_greedy.records.size(), reqs.size());
  ASSERT_EQ(by_rejection.records.size(), reqs.size());
  size_t steps = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto& g = by_greedy.records[by_greedy.record_of.at(i)];
    const auto& r = by_rejection.records[by_rejection.record_of.at(i)];
    ASSERT_EQ(g.shadows.size(), 1u);
    ASSERT_EQ(r.shadows.size(), 1u);
    EXPECT_EQ(g.shadows[0].arm, "rejection");
    EXPECT_EQ(g.shadows[0].accepted, r.accepted) << "request " << i << ": rejection as a shadow vs serving";
    EXPECT_EQ(r.shadows[0].accepted, g.accepted) << "request " << i << ": greedy as a shadow vs serving";
    EXPECT_EQ(g.shadows[0].differing_tokens, 0);
    steps += g.accepted.size();
  }
  EXPECT_GT(steps, 30u);
}

TEST(AbEngine, ShadowOfDeterministicVerifiersEqualsServing) {
  expect_shadows_equal_serving(3, {}, "chain");
}

TEST(AbEngine, ShadowOfDeterministicVerifiersEqualsServingOnTrees) {
  expect_shadows_equal_serving(6, {{"speculative.proposer.tree.depth", "3"}, {"speculative.proposer.tree.top_k", "2"}},
                               "tree");
}

// Two arms with the same verifier: as shadows of each other they see the same drafts, target
// probabilities and uniforms, so every counterfactual equals what the serving arm did.
TEST(AbEngine, SameVerifierShadowUsesTheSameUniforms) {
  const auto run = run_ab(ab_config("[{name: a, verifier: rejection}, {name: b, verifier: rejection}]", "all",
                                    work_dir() / "same-uniforms.jsonl"),
                          sampled_requests(12, 1.0f, 16, 40));
  ASSERT_EQ(run.records.size(), 12u);
  for (const auto& r : run.records) {
    ASSERT_EQ(r.shadows.size(), 1u);
    EXPECT_NE(r.shadows[0].arm, r.arm);
    EXPECT_EQ(r.shadows[0].accepted, r.accepted);
    EXPECT_EQ(r.shadows[0].differing_tokens, 0);
    EXPECT_DOUBLE_EQ(r.shadows[0].logprob_sum, r.logprob_sum);
  }
}

// Arms with shadows under async scheduling and multi-step (docs/scheduling.md): verification
// moves to the model worker and steps regroup, but every request gets the same tokens, the same
// per-step accepted lengths from its arm and its shadows, and the arms' per-row counters match
// the synchronous single-step run.
TEST(AbEngine, ArmsAndShadowsInEverySchedulingMode) {
  const std::string arms = "[{name: r, verifier: rejection}, {name: t, verifier: typical_acceptance}]";
  const std::vector<Request> reqs = sampled_requests(8, 1.0f, 14, 70);
  auto mode = [&](bool async, int steps) {
    const specd::config::Overrides extra = {{"scheduler.async_scheduling", async ? "true" : "false"},
                                            {"scheduler.num_scheduler_steps", std::to_string(steps)}};
    const std::string log = "modes-" + std::to_string(async) + "-" + std::to_string(steps) + ".jsonl";
    return run_ab(ab_config(arms, "all", work_dir() / log, 3, extra), reqs);
  };
  const auto ref = mode(false, 1);
  ASSERT_EQ(ref.records.size(), reqs.size());
  for (const auto& [async, steps] : {std::pair{true, 1}, std::pair{false, 4}, std::pair{true, 4}}) {
    SCOPED_TRACE(std::string(async ? "async" : "sync") + ", num_scheduler_steps " + std::to_string(steps));
    const auto run = mode(async, steps);
    EXPECT_EQ(run.tokens, ref.tokens);
    ASSERT_EQ(run.records.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      const auto& a = run.records[run.record_of.at(i)];
      const auto& b = ref.records[ref.record_of.at(i)];
      EXPECT_EQ(a.arm, b.arm) << i;
      EXPECT_EQ(a.accepted, b.accepted) << i;
      ASSERT_EQ(a.shadows.size(), 1u);
      EXPECT_EQ(a.shadows[0].accepted, b.shadows[0].accepted) << i;
      EXPECT_EQ(a.shadows[0].differing_tokens, b.shadows[0].differing_tokens) << i;
    }
    ASSERT_EQ(run.arms.size(), 2u);
    for (size_t arm = 0; arm < 2; ++arm) {
      EXPECT_EQ(run.arms[arm].num_requests, ref.arms[arm].num_requests);
      EXPECT_EQ(run.arms[arm].serving.draft_tokens, ref.arms[arm].serving.draft_tokens);
      EXPECT_EQ(run.arms[arm].serving.accepted_tokens, ref.arms[arm].serving.accepted_tokens);
      EXPECT_EQ(run.arms[arm].serving.emitted_tokens, ref.arms[arm].serving.emitted_tokens);
      const auto& s = run.arms[arm].shadow[1 - arm];
      EXPECT_EQ(s.counterfactual.draft_tokens, ref.arms[arm].shadow[1 - arm].counterfactual.draft_tokens);
      EXPECT_EQ(s.counterfactual.accepted_tokens, ref.arms[arm].shadow[1 - arm].counterfactual.accepted_tokens);
      EXPECT_EQ(s.compared_tokens, ref.arms[arm].shadow[1 - arm].compared_tokens);
      // A shadow verified every row its serving arm served.
      EXPECT_EQ(s.counterfactual.draft_tokens, run.arms[1 - arm].serving.draft_tokens);
      EXPECT_GT(s.counterfactual.num_steps, 0u);
    }
    EXPECT_EQ(run.arms[0].serving.draft_tokens + run.arms[1].serving.draft_tokens, run.spec.draft_tokens);
  }
}

// Aborted requests end their A/B log line too, also when the step that reports the abort has
// nothing else to run.
TEST(AbEngine, AbortedRequestsAreLogged) {
  const auto cfg =
      ab_config("[{name: a, verifier: rejection}, {name: b, verifier: rejection}]", "all", work_dir() / "abort.jsonl");
  std::filesystem::remove(cfg.speculative.ab_log);
  {
    specd::Engine engine(cfg);
    const std::vector<Request> reqs = sampled_requests(2, 1.0f, 64, 7);
    engine.add_request(1, reqs[0]);
    engine.add_request(2, reqs[1]);
    for (int i = 0; i < 3; ++i) (void)engine.step();
    engine.abort(1);
    engine.abort(2);
    size_t aborted = 0;
    for (const RequestOutput& out : engine.step()) aborted += out.finish_reason == specd::FinishReason::kAbort;
    EXPECT_EQ(aborted, 2u);
    EXPECT_FALSE(engine.has_unfinished());
  }
  const auto records = specd::ab::read_ab_logs({cfg.speculative.ab_log});
  ASSERT_EQ(records.size(), 2u);
  for (const auto& r : records) {
    EXPECT_EQ(r.finish, "abort");
    EXPECT_GT(r.generated_tokens, 0);
  }
}

TEST(AbEngine, ConfigErrorsNameTheField) {
  auto error_of = [](const std::string& yaml) {
    try {
      specd::config::load_string("model: {path: x}\nspeculative:\n  proposer: ngram\n" + yaml, "ab.yaml");
    } catch (const specd::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of("  verifier: rejection\n  arms: [{name: a, verifier: rejection}]\n")
                .find("speculative.verifier: give either speculative.verifier or speculative.arms"),
            std::string::npos);
  EXPECT_NE(error_of("  arms: [{name: a, verifier: rejection}, {name: a, verifier: greedy}]\n")
                .find("speculative.arms[1].name: duplicate arm \"a\""),
            std::string::npos);
  EXPECT_NE(
      error_of("  arms: [{name: \"a b\", verifier: rejection}]\n").find("speculative.arms[0].name: expected 1 to 64"),
      std::string::npos);
  EXPECT_NE(error_of("  arms: [{name: a}]\n").find("speculative.arms[0].verifier: required key is missing"),
            std::string::npos);
  EXPECT_NE(error_of("  arms: [{name: a, verifier: rejection, weight: 0}]\n").find("at least one arm needs a weight"),
            std::string::npos);
  EXPECT_NE(error_of("  arms: [{name: a, verifier: rejection}]\n  shadow: [b]\n")
                .find("speculative.shadow[0]: no arm is named \"b\""),
            std::string::npos);
  EXPECT_NE(error_of("  shadow: all\n").find("speculative.shadow: needs speculative.arms"), std::string::npos);
  EXPECT_NE(error_of("  arms: [{name: a, verifier: rejection, colour: red}]\n")
                .find("speculative.arms[0].colour: unknown key"),
            std::string::npos);
  const auto ok = specd::config::load_string(
      "model: {path: x}\nspeculative:\n  proposer: ngram\n  arms:\n    - {name: a, verifier: rejection}\n"
      "    - {name: b, verifier: {name: typical_acceptance, posterior_alpha: 0.2}, num_speculative_tokens: 2, weight: "
      "0.5}\n"
      "  shadow: all\n  ab_log: ab.jsonl\n",
      "ab.yaml");
  ASSERT_EQ(ok.speculative.arms.size(), 2u);
  EXPECT_EQ(ok.speculative.arms[1].verifier.name, "typical_acceptance");
  EXPECT_EQ(ok.speculative.arms[1].num_speculative_tokens, 2);
  EXPECT_DOUBLE_EQ(ok.speculative.arms[1].weight, 0.5);
  EXPECT_EQ(ok.speculative.shadow, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ok.speculative.ab_log, "ab.jsonl");
}

TEST(AbEngine, UnknownVerifierOfAnArmNamesTheArm) {
  try {
    specd::Engine engine(ab_config("[{name: a, verifier: rejection}, {name: b, verifier: no_such_verifier}]", "",
                                   work_dir() / "unknown-verifier.jsonl"));
    FAIL() << "expected an error";
  } catch (const specd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("speculative.arms: arm 'b':"), std::string::npos) << e.what();
  }
}

}  // namespace
