// The dynamic speculation policy on synthetic cost and acceptance models: all-accept drafts get
// k_max, never-accepted ones 0, a compute-bound batch a smaller k than a memory-bound one, and the
// chosen k is the best under the objective (brute force over every choice). Plus the cost and
// acceptance models it is built from, and plan() on a real StepBatch.
#include "speculative/policy.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "decoding_batch.hpp"
#include "sched/scheduler.hpp"
#include "speculative/acceptance_model.hpp"
#include "speculative/cost_model.hpp"

namespace specd::speculative {
namespace {

// A target that costs fixed + per_token * T seconds (R = T), measured at T = 1, 2, 4, ..., 1024.
std::vector<TargetSample> linear_target(double fixed, double per_token, double per_logit_row = 0) {
  std::vector<TargetSample> s;
  for (int32_t t = 1; t <= 1024; t *= 2) s.push_back({t, t, fixed + (per_token + per_logit_row) * t});
  s.push_back({1024, 1, fixed + per_token * 1024 + per_logit_row});
  return s;
}

// Teaches the propose fit seconds = a + b * L + c * S from varied calls.
void teach_propose(SpeculationPolicy& p, double a, double b, double c) {
  for (int i = 0; i < 60; ++i) {
    const int32_t steps = 1 + i % 8, drafts = steps * (1 + (i * 7) % 5);
    p.cost().observe_propose(steps, drafts, a + b * steps + c * drafts);
  }
}

struct Instance {
  StepBase base;
  std::vector<int32_t> caps;
  std::vector<std::vector<double>> accept;
  std::vector<PlanRow> rows;  // spans into accept, rebuilt by add()
  void add(int32_t cap, std::vector<double> a) {
    caps.push_back(cap);
    accept.push_back(std::move(a));
    rows.clear();
    for (size_t i = 0; i < caps.size(); ++i) rows.push_back({caps[i], accept[i]});
  }
};

Instance uniform(int batch, int32_t cap, double accept) {
  Instance in;
  in.base.tokens = batch;
  in.base.logit_rows = batch;
  in.base.emitted = batch;
  for (int i = 0; i < batch; ++i) in.add(cap, std::vector<double>(static_cast<size_t>(cap), accept));
  return in;
}

std::vector<int32_t> choose(SpeculationPolicy& p, const Instance& in) {
  std::vector<int32_t> k(in.rows.size());
  p.choose_k(in.base, in.rows, k);
  return k;
}

TEST(SpeculationPolicy, AllAcceptedDraftsGetKMax) {
  SpeculationPolicy p(8, 1024, true);
  p.cost().set_target_prior(linear_target(0.050, 0.0001));  // memory-bound: T barely matters
  teach_propose(p, 0.0005, 0.001, 0.00001);
  for (int batch : {1, 4}) {
    for (int32_t k : choose(p, uniform(batch, 8, 1.0))) EXPECT_EQ(k, 8) << "batch " << batch;
  }
}

TEST(SpeculationPolicy, NeverAcceptedDraftsGetZero) {
  SpeculationPolicy p(8, 1024, true);
  p.cost().set_target_prior(linear_target(0.050, 0.0001));
  teach_propose(p, 0.0005, 0.001, 0.00001);
  for (int batch : {1, 8}) {
    for (int32_t k : choose(p, uniform(batch, 8, 0.0))) EXPECT_EQ(k, 0) << "batch " << batch;
  }
  // Even with free proposals and a free target: drafts that are never accepted buy nothing.
  SpeculationPolicy free(8, 1024, true);
  free.cost().set_target_prior(linear_target(0.010, 0.0));
  for (int32_t k : choose(free, uniform(4, 8, 0.0))) EXPECT_EQ(k, 0);
}

TEST(SpeculationPolicy, ComputeBoundBatchGetsSmallerK) {
  SpeculationPolicy p(8, 1024, true);
  // 10 ms to read the weights plus 1 ms of compute per token: one sequence is memory-bound, 32
  // are compute-bound.
  p.cost().set_target_prior(linear_target(0.010, 0.001));
  const std::vector<int32_t> alone = choose(p, uniform(1, 8, 0.8));
  const std::vector<int32_t> crowd = choose(p, uniform(32, 8, 0.8));
  EXPECT_GE(alone[0], 4) << "memory-bound: speculation is nearly free";
  for (int32_t k : crowd) EXPECT_LT(k, alone[0]);
  for (int32_t k : crowd) EXPECT_LE(k, 1);
  // Fully compute-bound (no fixed cost): every draft costs a whole token, so none pays.
  SpeculationPolicy c(8, 1024, true);
  c.cost().set_target_prior(linear_target(0.0, 0.001));
  for (int32_t k : choose(c, uniform(8, 8, 0.9))) EXPECT_EQ(k, 0);
}

// A step that also finishes a long prompt: the chunk's time is not the decoding rows' cost, so
// drafts that lose to plain decoding per token stay off (charged to the whole step, 2 extra
// tokens for 4 ms would look like a gain next to 4 tokens in 505 ms).
TEST(SpeculationPolicy, PrefillChunksDoNotMakeDraftsLookCheap) {
  SpeculationPolicy p(4, 1024, true);
  p.cost().set_target_prior(linear_target(0.001, 0.001));  // compute-bound: 1 ms per token
  teach_propose(p, 0.0, 0.0, 0.0001);
  Instance in = uniform(4, 4, 0.5);
  for (int32_t k : choose(p, in)) EXPECT_EQ(k, 0) << "decode alone";
  in.base.tokens += 500;
  in.base.logit_rows += 1;
  in.base.prefill_tokens = 500;
  in.base.prefill_rows = 1;
  for (int32_t k : choose(p, in)) EXPECT_EQ(k, 0) << "decode beside a 500-token prompt end";
  const std::vector<int32_t> one(4, 1), none(4, 0);
  const Plan plain = evaluate(in.base, in.rows, none, p.cost(), true);
  EXPECT_NEAR(plain.seconds, 0.001 + 0.004, 1e-6) << "the decoding part's own time";
  EXPECT_NEAR(evaluate(in.base, in.rows, one, p.cost(), true).seconds, 0.005 + 0.004 + 0.0004, 1e-6);
}

// One row, one draft accepted half the time, a 10 ms step: drafting pays 1.5 tokens for 10 ms
// plus the propose call. 4.7 ms of proposing leaves a 2% gain under the model, inside the
// margin: plain. 4 ms leaves 7%: the draft.
TEST(SpeculationPolicy, DraftsOnlyWhenClearlyBetterThanPlain) {
  for (const auto& [propose_s, drafts] : {std::pair{0.0047, 0}, std::pair{0.0040, 1}}) {
    SpeculationPolicy p(1, 1024, true);
    p.cost().set_target_prior(linear_target(0.010, 0.0));
    teach_propose(p, propose_s, 0.0, 0.0);
    const Instance in = uniform(1, 1, 0.5);
    EXPECT_EQ(choose(p, in), std::vector<int32_t>{drafts}) << "propose " << propose_s * 1e3 << " ms";
  }
}

// Catch-up: two rows with the same acceptance; the first drafted last step, the second has 60
// tokens the draft has not seen. One draft for the first pays (1.9 tokens for 10 + 1.2 ms);
// resuming the second would pay 60 catch-up tokens for the same gain, so it stays plain. With
// the catch-up left out (as before) both would draft.
TEST(SpeculationPolicy, CatchUpIsChargedToTheRowThatResumes) {
  SpeculationPolicy p(1, 1024, true);
  p.cost().set_target_prior(linear_target(0.010, 0.0));
  teach_propose(p, 0.001, 0.0, 0.0002);
  Instance in = uniform(2, 1, 0.9);
  in.rows[1].catch_up = 60;
  EXPECT_EQ(choose(p, in), (std::vector<int32_t>{1, 0}));
  const std::vector<int32_t> both = {1, 1};
  EXPECT_NEAR(evaluate(in.base, in.rows, both, p.cost(), true).seconds, 0.010 + 0.001 + 0.0002 * (2 + 60), 2e-5);
  in.rows[1].catch_up = 0;
  EXPECT_EQ(choose(p, in), (std::vector<int32_t>{1, 1}));
}

TEST(SpeculationPolicy, ObjectiveMatchesHandComputation) {
  SpeculationPolicy p(4, 1024, true);
  p.cost().set_target_prior(linear_target(0.010, 0.001));
  teach_propose(p, 0.002, 0.001, 0.0);
  Instance in = uniform(1, 4, 0.5);
  const std::vector<int32_t> k = {2};
  const Plan plan = evaluate(in.base, in.rows, k, p.cost(), true);
  EXPECT_NEAR(plan.tokens, 1 + 0.5 + 0.25, 1e-12);
  EXPECT_NEAR(plan.seconds, (0.002 + 0.001 * 2) + (0.010 + 0.001 * 3), 1e-6);
  EXPECT_NEAR(expected_tokens(in.accept[0], 4), 1 + 0.5 + 0.25 + 0.125 + 0.0625, 1e-12);
}

// Every choice k in [0, cap_i] per row, by recursion.
void for_each_choice(const std::vector<int32_t>& caps, std::vector<int32_t>& k, size_t i,
                     const std::function<void()>& fn) {
  if (i == caps.size()) {
    fn();
    return;
  }
  for (k[i] = 0; k[i] <= caps[i]; ++k[i]) for_each_choice(caps, k, i + 1, fn);
}

TEST(SpeculationPolicy, ChosenKMaximisesTheObjectiveAgainstBruteForce) {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 300; ++trial) {
    const bool variable_k = trial % 4 != 3;
    SpeculationPolicy p(6, 1024, variable_k);
    // A target with a random convex-then-linear shape and a random propose cost.
    std::vector<TargetSample> s;
    double t = 0.002 + 0.02 * u(rng);
    for (int32_t tokens = 1; tokens <= 64; tokens *= 2) {
      s.push_back({tokens, tokens, t});
      t += tokens * 0.001 * u(rng) * u(rng);
    }
    s.push_back({64, 1, s.back().seconds * (0.7 + 0.3 * u(rng))});
    p.cost().set_target_prior(s);
    if (trial % 5 != 0) teach_propose(p, 0.002 * u(rng), 0.003 * u(rng), 0.0005 * u(rng));
    Instance in;
    const int batch = 1 + static_cast<int>(rng() % 4);
    in.base.prefill_tokens = static_cast<double>(rng() % 20);  // prefill chunks ride along
    in.base.tokens = batch + in.base.prefill_tokens;
    in.base.logit_rows = batch;
    in.base.emitted = batch + static_cast<double>(rng() % 3);
    if (trial % 3 == 0) {  // a static row drafting 2
      in.base.draft_steps = 2;
      in.base.draft_tokens = 2;
      in.base.tokens += 3;
      in.base.logit_rows += 3;
    }
    for (int i = 0; i < batch; ++i) {
      std::vector<double> a(6);
      for (double& x : a) x = trial % 7 == 0 ? 1.0 : u(rng);  // sometimes ties everywhere
      in.add(static_cast<int32_t>(rng() % 6), a);
    }
    std::vector<int32_t> k(in.rows.size());
    const Plan chosen = p.choose_k(in.base, in.rows, k);
    const Plan again = evaluate(in.base, in.rows, k, p.cost(), variable_k);
    EXPECT_NEAR(chosen.goodput(), again.goodput(), 1e-9 * again.goodput()) << "trial " << trial;
    double best = 0;
    std::vector<int32_t> any(in.rows.size());
    for_each_choice(in.caps, any, 0,
                    [&] { best = std::max(best, evaluate(in.base, in.rows, any, p.cost(), variable_k).goodput()); });
    const std::vector<int32_t> none(in.rows.size(), 0);
    const double plain = evaluate(in.base, in.rows, none, p.cost(), variable_k).goodput();
    if (best >= (1 + SpeculationPolicy::kPlainMargin) * plain * (1 + 1e-9)) {
      EXPECT_GE(again.goodput(), best * (1 - 1e-12)) << "trial " << trial;
    } else {  // within the margin: plain
      EXPECT_EQ(k, none) << "trial " << trial;
    }
    for (size_t i = 0; i < k.size(); ++i) EXPECT_LE(k[i], in.caps[i]);
  }
}

// Exploring upward: on a flat top (k = 5 best, k = 6 within 0.4% under the model) the policy
// takes one draft more so that the cost model learns that shape; where one more is clearly
// worse, or where the best plan does not draft at all (even with k = 1 inside the band), the
// choice stays.
TEST(SpeculationPolicy, ExploresOneDraftMoreOnlyOnAFlatTop) {
  auto one_row = [](double accept, std::vector<int32_t>& chosen, std::vector<int32_t>& explored) {
    SpeculationPolicy p(8, 1024, true);
    p.cost().set_target_prior(linear_target(0.010, 0.0005));
    teach_propose(p, 0.0, 0.006, 0.0);
    Instance in;
    in.base = {1, 1, 1, 0, 0};
    in.add(8, std::vector<double>(8, accept));
    chosen.assign(1, 0);
    const Plan best = p.choose_k(in.base, in.rows, chosen);
    explored = chosen;
    const Plan after = p.explore_up(in.base, in.rows, explored, best);
    EXPECT_GE(after.goodput(), (1 - SpeculationPolicy::kExploreBand) * best.goodput());
    return std::make_pair(best, after);
  };
  std::vector<int32_t> chosen, explored;
  one_row(0.965, chosen, explored);
  EXPECT_EQ(chosen[0], 5);
  EXPECT_EQ(explored[0], 6);
  one_row(0.7, chosen, explored);  // a steep top: k = 2 is 7% below k = 1
  EXPECT_EQ(chosen[0], 1);
  EXPECT_EQ(explored[0], 1);
  // Plain decoding is best and k = 1 is within the band (1.2% below): never pushed into drafting.
  one_row(0.6, chosen, explored);
  EXPECT_EQ(chosen[0], 0);
  EXPECT_EQ(explored[0], 0);
}

// On random instances (those of the brute-force test) exploring never leaves the band, never
// lowers a row, never passes a cap and leaves a plan without drafts alone.
TEST(SpeculationPolicy, ExploringStaysWithinTheBand) {
  std::mt19937_64 rng(29);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int explored_trials = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const bool variable_k = trial % 4 != 3;
    SpeculationPolicy p(6, 1024, variable_k);
    p.cost().set_target_prior(linear_target(0.002 + 0.02 * u(rng), 0.001 * u(rng)));
    teach_propose(p, 0.002 * u(rng), 0.003 * u(rng), 0.0005 * u(rng));
    Instance in;
    const int batch = 1 + static_cast<int>(rng() % 4);
    in.base = {static_cast<double>(batch), static_cast<double>(batch), static_cast<double>(batch), 0, 0};
    for (int i = 0; i < batch; ++i) {
      std::vector<double> a(6);
      for (double& x : a) x = u(rng);
      in.add(static_cast<int32_t>(rng() % 7), a);
    }
    std::vector<int32_t> k(in.rows.size());
    const Plan best = p.choose_k(in.base, in.rows, k);
    const std::vector<int32_t> chosen = k;
    const Plan after = p.explore_up(in.base, in.rows, k, best);
    EXPECT_NEAR(after.goodput(), evaluate(in.base, in.rows, k, p.cost(), variable_k).goodput(), 1e-9) << trial;
    EXPECT_GE(after.goodput(), (1 - SpeculationPolicy::kExploreBand) * best.goodput() - 1e-12) << trial;
    const bool drafting = std::any_of(chosen.begin(), chosen.end(), [](int32_t x) { return x > 0; });
    for (size_t i = 0; i < k.size(); ++i) {
      EXPECT_GE(k[i], chosen[i]) << trial;
      EXPECT_LE(k[i], in.caps[i]) << trial;
      if (!drafting) {
        EXPECT_EQ(k[i], 0) << trial;
      }
    }
    explored_trials += k != chosen ? 1 : 0;
  }
  EXPECT_GT(explored_trials, 0);  // the band is reached on some instances
}

TEST(CostModel, PriorInterpolatesAndExtrapolates) {
  CostModel c(2048);
  c.set_target_prior(std::vector<TargetSample>{{1, 1, 0.010}, {4, 4, 0.010}, {16, 16, 0.022}, {16, 1, 0.019}});
  EXPECT_NEAR(c.logit_row_seconds(), 0.003 / 15, 1e-12);
  EXPECT_NEAR(c.target_seconds(1, 1), 0.010, 1e-12);
  EXPECT_NEAR(c.target_seconds(16, 16), 0.022, 1e-12);
  EXPECT_NEAR(c.target_seconds(10, 10), 0.016, 1e-12);                     // halfway between 4 and 16
  EXPECT_NEAR(c.target_seconds(64, 64), 0.022 + 48 * 0.001, 1e-12);        // the last slope goes on
  EXPECT_NEAR(c.target_seconds(16, 1), 0.022 - 15 * (0.003 / 15), 1e-12);  // fewer logit rows
}

TEST(CostModel, LearnsFromObservedStepsAndSpreadsTheLevel) {
  CostModel c(2048);
  c.set_target_prior(linear_target(0.010, 0.0005));
  const double prior_32 = c.target_seconds(32, 32), prior_512 = c.target_seconds(512, 512);
  for (int i = 0; i < 100; ++i) c.observe_target(32, 32, 2 * prior_32);
  EXPECT_NEAR(c.target_seconds(32, 32), 2 * prior_32, 0.02 * prior_32);
  // Never observed: follows the machine-wide level part of the way.
  EXPECT_GT(c.target_seconds(512, 512), 1.3 * prior_512);
  // One 10x outlier moves the estimate by a bounded amount.
  c.observe_target(32, 32, 20 * prior_32);
  EXPECT_LT(c.target_seconds(32, 32), 2.2 * prior_32);
}

// The policy tries a step shape it never ran (the first drafts at a batch size): a few steps
// there must teach the model, or it goes on under- or over-predicting it for ~20 steps.
TEST(CostModel, ANewStepShapeIsLearnedWithinAFewSteps) {
  CostModel c(2048);
  c.set_target_prior(linear_target(0.010, 0.0005));
  for (int i = 0; i < 100; ++i) c.observe_target(32, 32, c.target_seconds(32, 32));  // the prior was right at 32
  const double truth = 2.5 * (0.010 + 0.0005 * 288);              // but 288 tokens cost 2.5x what it says
  for (int i = 0; i < 4; ++i) c.observe_target(288, 288, truth);  // the first is not learned (below)
  EXPECT_NEAR(c.target_seconds(288, 288), truth, 0.25 * truth);
}

// The first step at a new shape pays its one-off costs (llama-160m, batch 8: 29-36 ms for the
// first T = 24, 15-17 ms afterwards): it teaches nothing, the second does.
TEST(CostModel, AShapesFirstStepIsNotLearned) {
  CostModel c(2048);
  c.set_target_prior(linear_target(0.010, 0.0005));
  for (int i = 0; i < 20; ++i) c.observe_target(8, 8, c.target_seconds(8, 8));
  const double prior_24 = c.target_seconds(24, 24);
  c.observe_target(24, 24, 2 * prior_24);
  EXPECT_DOUBLE_EQ(c.target_seconds(24, 24), prior_24);
  c.observe_target(24, 24, 2 * prior_24);
  EXPECT_GT(c.target_seconds(24, 24), 1.3 * prior_24);
}

// A batch of many short sequences can cost several times what the single-sequence calibration
// measured. Learned at T = 8 only, the cost at T = 13 (between knots nobody observed) must not
// fall below it: the policy would take the extra tokens for free.
TEST(CostModel, MoreTokensNeverCostLessThanALearnedSmallerStep) {
  CostModel c(2048);
  c.set_target_prior(linear_target(0.010, 0.0005));
  for (int i = 0; i < 100; ++i) c.observe_target(8, 8, 3 * (0.010 + 0.0005 * 8));
  for (int i = 0; i < 100; ++i) c.observe_target(512, 512, 1.0 * (0.010 + 0.0005 * 512));
  const double at8 = c.target_seconds(8, 8);
  for (double t : {9.0, 12.0, 13.0, 16.0, 24.0, 100.0}) EXPECT_GE(c.target_seconds(t, t), at8) << "T = " << t;
}

TEST(CostModel, ProposeFitIsNonNegativeLeastSquares) {
  CostModel c;
  EXPECT_EQ(c.propose_seconds(4, 4), 0.0) << "nothing measured yet";
  for (int i = 0; i < 50; ++i) {
    const int32_t steps = 1 + i % 8, drafts = steps * (1 + i % 3);
    c.observe_propose(steps, drafts, 0.001 + 0.002 * steps + 0.0001 * drafts);
  }
  EXPECT_NEAR(c.propose_seconds(6, 30), 0.001 + 0.012 + 0.003, 1e-5);
  EXPECT_EQ(c.propose_seconds(0, 0), 0.0);
  CostModel d;
  // Time that falls with S would need a negative coefficient: clamped to 0, the rest refitted.
  for (int i = 0; i < 50; ++i) {
    const int32_t steps = 1 + i % 8, drafts = steps * (1 + i % 3);
    d.observe_propose(steps, drafts, std::max(0.0, 0.004 * steps - 0.0001 * drafts));
  }
  for (int32_t s = 1; s <= 8; ++s) EXPECT_GE(d.propose_seconds(s, 8 * s), 0.0);
}

// A draft model feeds the tokens a row appended while it did not draft before it drafts again
// (a probe after many plain steps): without the catch-up term that one expensive call is
// charged to the per-step and per-draft coefficients, every later call is predicted too dear
// and the policy keeps k = 0.
TEST(CostModel, CatchUpTokensAreChargedAsTokensThroughTheDraft) {
  CostModel c;
  auto truth = [](int32_t steps, int32_t drafts, int32_t catch_up) {
    return 0.001 + 0.002 * steps + 0.0004 * (drafts + catch_up);
  };
  for (int i = 0; i < 60; ++i) {
    const int32_t steps = 1 + i % 8, drafts = steps * (1 + i % 3);
    const int32_t catch_up = i % 10 == 9 ? 64 : 0;  // a probe now and then
    c.observe_propose(steps, drafts, truth(steps, drafts, catch_up), catch_up);
  }
  EXPECT_NEAR(c.propose_seconds(4, 32), truth(4, 32, 0), 1e-5) << "steady drafting, no catch-up";
  EXPECT_NEAR(c.propose_seconds(1, 1, 64), truth(1, 1, 64), 1e-5) << "a probe after 64 plain steps";
}

// At batch 1 without catch-up every call drafts as many tokens as it takes steps (S = L): the
// time is charged to the steps (a draft forward), not to tokens, so a probe that first feeds 60
// idle tokens through the draft in one forward is priced near one forward, not at 60 of them.
TEST(CostModel, ASingleRowsForwardIsChargedToTheStepNotToItsTokens) {
  CostModel c;
  for (int i = 0; i < 40; ++i) {
    const int32_t k = 1 + i % 4;
    c.observe_propose(k, k, 0.003 * k);
  }
  EXPECT_NEAR(c.propose_seconds(4, 4), 0.012, 1e-4);
  EXPECT_LT(c.propose_seconds(1, 1, 60), 0.003 * 3) << "one forward of 61 tokens, not 61 forwards";
}

TEST(AcceptanceModel, SequencesLearnAroundAProposerWidePrior) {
  AcceptanceModel m(6);
  std::vector<double> a(6);
  m.predict(1, a);
  EXPECT_NEAR(a[0], (2 * 0.5 + 1) / 3, 1e-12) << "no evidence: the chain's 0.5 and one optimistic pseudo-observation";
  for (size_t j = 1; j < a.size(); ++j) EXPECT_GT(a[j], a[j - 1]) << "an untried depth looks a little better";
  const std::vector<double> yes = {1, 1, 1, 1};
  for (int i = 0; i < 40; ++i) {
    m.age(1);
    m.observe(1, yes);
  }
  m.predict(1, a);
  for (int j = 0; j < 4; ++j) EXPECT_GT(a[static_cast<size_t>(j)], 0.9);
  EXPECT_GT(a[5], 0.8) << "an unmeasured position leans on the one before it";
  const std::vector<double> no = {0};
  for (int i = 0; i < 40; ++i) {
    m.age(2);
    m.observe(2, no);
  }
  m.predict(2, a);
  EXPECT_LT(a[0], 0.25);
  EXPECT_GT(m.prior(0), 0.3);
  EXPECT_LT(m.prior(0), 0.7);
  // A sequence that stops drafting drifts back to the prior.
  for (int i = 0; i < 100; ++i) m.age(2);
  m.predict(2, a);
  EXPECT_NEAR(a[0], m.prior(0), 1e-3);
}

// Evidence at a depth the policy stopped drafting fades with every later verified draft, so a few
// early rejections at position 2 do not keep k below 3 for the rest of the run: the estimate
// there goes back to leaning on position 1 (and on the optimistic pseudo-observation), and
// where evidence is plentiful that pseudo-observation is negligible.
TEST(AcceptanceModel, EvidenceAtADepthNoLongerDraftedFades) {
  AcceptanceModel m(4);
  for (int i = 0; i < 5; ++i) m.observe(1, std::vector<double>{1, 1, 0});  // k = 3; the third rejected
  EXPECT_LT(m.prior(2), 0.6) << "fresh: the rejection dominates";
  for (int i = 0; i < 1000; ++i) m.observe(1, std::vector<double>{1, 0.8});  // k = 2 from then on
  EXPECT_NEAR(m.prior(1), 0.8, 0.01);
  EXPECT_GT(m.prior(2), m.prior(1)) << "old evidence gone: position 1's estimate plus optimism";
  EXPECT_LT(m.prior(2), 0.95);
  for (int i = 0; i < 1000; ++i) m.observe(1, std::vector<double>{1, 0.8, 0.3});  // k = 3 measured
  EXPECT_NEAR(m.prior(2), 0.3, 0.02) << "measured: optimism is negligible";
}

// plan() on a StepBatch: dynamic rows get the policy's k, static rows and prefill chunks keep
// theirs, and a long run without drafts probes one row with k = 1.
TEST(SpeculationPolicy, PlanLowersOnlyDynamicRowsAndProbes) {
  SpeculationPolicy p(4, 1024, true);
  p.cost().set_target_prior(linear_target(0.010, 0.0));
  testing::DecodingBatch d(3, 4);  // the decode of token 2 with 4 draft slots reserved
  d.seqs[1]->dynamic_k = false;
  auto& seqs = d.seqs;
  auto& batch = d.batch;
  auto fill = [&] { d.fill(); };
  spec::PolicyMetrics m;
  fill();
  p.plan(batch, m);
  EXPECT_EQ(batch.rows[0].lookahead, 4) << "unseen: prior 0.5 and free drafts";
  EXPECT_EQ(batch.rows[1].lookahead, 4) << "a static row keeps its k";
  EXPECT_EQ(m.steps, 1u);
  ASSERT_EQ(m.chosen_k.size(), 5u);
  EXPECT_EQ(m.chosen_k[4], 2u);
  // Rows 0 and 2 never get a draft accepted, row 1 goes plain: planned steps without any draft
  // probe one row with k = 1 after 8, then 16, 32, 64, 64 more steps (the interval doubles up to
  // kMaxProbeInterval and starts again at kMinProbeInterval once a step drafts).
  seqs[1]->dynamic_k = true;
  p.cost().set_target_prior(linear_target(0.010, 0.001));  // drafts now cost 10% of a step each
  for (int i = 0; i < 200; ++i) {
    for (auto& s : seqs) {
      p.acceptance().age(s->id);
      p.acceptance().observe(s->id, std::vector<double>{0.0});
    }
  }
  spec::PolicyMetrics idle;
  std::vector<int> probe_steps;
  for (int step = 1; step <= 8 + 16 + 32 + 64 + 64; ++step) {
    fill();
    p.plan(batch, idle);
    int drafts = 0;
    for (const auto& row : batch.rows) drafts += row.lookahead;
    if (drafts > 0) probe_steps.push_back(step);
    EXPECT_LE(drafts, 1) << "step " << step;
  }
  // Counted from the last step that drafted (the first plan above).
  EXPECT_EQ(probe_steps, (std::vector<int>{8, 24, 56, 120, 184}));
  EXPECT_EQ(idle.probes, 5u);
}

// Where a proposer call is dear beside a step (a 0.2 ms step, a 2 ms propose), probes wait until
// the idle steps cost 20 times the probe: 200 steps, past the doubling's 64, not 8.
// The idle steps a row waits for its first probe after its estimate went to 0.
int first_probe_after(const std::vector<TargetSample>& target, double propose_s) {
  SpeculationPolicy p(4, 1024, true);
  p.cost().set_target_prior(target);
  for (int i = 0; i < 20; ++i) p.cost().observe_propose(1, 1, propose_s, 0);
  sched::Sequence s;
  s.id = 1;
  s.tokens = {1, 2, 3};
  s.num_prompt = 2;
  s.spec_k = 4;
  s.dynamic_k = true;
  for (int i = 0; i < 200; ++i) {
    p.acceptance().age(s.id);
    p.acceptance().observe(s.id, std::vector<double>{0.0});
  }
  spec::PolicyMetrics m;
  for (int step = 1; step <= 400; ++step) {
    sched::StepBatch batch;
    sched::StepRow row;
    row.seq = &s;
    row.start = 2;
    row.n = 1;
    row.sample = true;
    row.lookahead = 4;
    batch.rows.push_back(row);
    p.plan(batch, m);
    if (batch.rows[0].lookahead > 0) return step;
  }
  return 0;
}

// A probe (its propose, and the row it adds to the target's forward) costs at most kProbeBudget
// of the plain steps before it: it waits for cost / (kProbeBudget · step) idle steps where that
// is more than the probe interval's 8.
TEST(SpeculationPolicy, ProbesThinOutWhereAProposeIsDear) {
  auto floor_of = [](double probe_s, double step_s) {
    return static_cast<int>(std::ceil(probe_s / (SpeculationPolicy::kProbeBudget * step_s) - 1e-9));
  };
  // Memory-bound: a step costs 0.201 ms and its extra row 1 us.
  const std::vector<TargetSample> memory_bound = linear_target(0.0002, 0.000001);
  EXPECT_EQ(first_probe_after(memory_bound, 0.0), 8) << "a free propose: the probe interval";
  EXPECT_EQ(first_probe_after(memory_bound, 0.0008), floor_of(0.000801, 0.000201));
  EXPECT_EQ(floor_of(0.000801, 0.000201), 200);
  // Compute-bound: a step of 1 token costs 0.11 ms, one of 2 tokens 0.21 ms. A free propose still
  // waits for the extra row's cost.
  const std::vector<TargetSample> compute_bound = linear_target(0.00001, 0.0001);
  EXPECT_EQ(first_probe_after(compute_bound, 0.0), floor_of(0.0001, 0.00011));
  EXPECT_EQ(floor_of(0.0001, 0.00011), 46);
}

}  // namespace
}  // namespace specd::speculative
