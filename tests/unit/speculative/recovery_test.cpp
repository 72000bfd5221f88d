// The dynamic speculation policy after an unlucky start: a batch of the same prompt meets the
// same hard token at once, so its first drafting step can reject every row's drafts (the demo
// prompt on llama-160m: every proposer's first draft there is wrong, then 0.93 are right). The
// proposer-wide prior takes that step as one observation, not one per row, and the proposer's
// first call (which pays one-off costs) does not price the later ones; so the next step drafts
// again and the policy finds the drafts that pay. Counted row by row with the first call fitted,
// dynamic k stayed plain for whole requests at batch 8 (0.56x static k = 4). Nor does a
// long-idle row's catch-up price its drafts out for good.
#include <gtest/gtest.h>

#include <vector>

#include "decoding_batch.hpp"
#include "speculative/acceptance_model.hpp"
#include "speculative/policy.hpp"

namespace specd::speculative {
namespace {

TEST(AcceptanceModel, AStepsRowsAreOneObservationOfThePrior) {
  AcceptanceModel stepwise(4), rowwise(4);
  const std::vector<double> rejected = {0.0};
  for (RequestId id = 1; id <= 8; ++id) {
    stepwise.observe_in_step(id, rejected);
    rowwise.observe(id, rejected);  // each row a step of its own
  }
  EXPECT_NEAR(stepwise.prior(0), 2.0 / 3.0, 1e-12) << "the rows wait for end_step";
  stepwise.end_step();
  // Position 0: the chain's 0.5 twice, one optimistic "accepted", and the step's mean 0.
  EXPECT_NEAR(stepwise.prior(0), (0 + 2 * 0.5 + 1) / (1 + 2 + 1), 1e-6);
  EXPECT_LT(rowwise.prior(0), 0.2) << "eight rows, eight observations";
  // Each sequence still has its own rejection in its estimate.
  std::vector<double> a(4);
  stepwise.predict(3, a);
  EXPECT_NEAR(a[0], (0 + 2 * stepwise.prior(0)) / (1 + 2), 1e-6);
  // Rows that reach a position contribute their mean there; positions no row reached only age.
  stepwise.observe_in_step(1, std::vector<double>{1.0, 1.0});
  stepwise.observe_in_step(2, std::vector<double>{1.0, 0.0});
  stepwise.observe_in_step(3, std::vector<double>{0.0});
  const double before2 = stepwise.prior(2);
  stepwise.end_step();
  EXPECT_GT(stepwise.prior(0), 0.5) << "mean 2/3 at position 0";
  EXPECT_NEAR(stepwise.prior(1), (0.5 + 2 * stepwise.prior(0) + 1) / (1 + 2 + 1), 1e-6);
  EXPECT_NE(stepwise.prior(2), before2) << "position 2 leans on position 1";
}

// A batch of 8 rows whose first drafts all fail, on a memory-bound target where drafts at
// 0.9 acceptance pay: the next plan drafts again.
TEST(SpeculationPolicy, ABatchWhoseFirstDraftsAllFailDraftsAgain) {
  SpeculationPolicy p(4, 1024, true);
  std::vector<TargetSample> target;  // 10 ms a step, 0.1 ms per extra token
  for (int32_t t = 1; t <= 1024; t *= 2) target.push_back({t, t, 0.010 + 0.0001 * t});
  target.push_back({1024, 1, 0.010 + 0.0001 * 1024});
  p.cost().set_target_prior(target);
  testing::DecodingBatch d(8, 4);
  const std::vector<int32_t> drafts = {7, 7, 7, 7};
  spec::PolicyMetrics m;
  auto step = [&](double propose_s, double evidence) {
    d.fill();
    p.plan(d.batch, m);
    int32_t planned = 0;
    for (sched::StepRow& row : d.batch.rows) {
      planned += row.lookahead;
      row.drafts = std::span<const int32_t>(drafts).first(static_cast<size_t>(row.lookahead));
      row.num_accepted = evidence > 0.5 ? row.lookahead : 0;
      if (row.drafted()) {
        const std::vector<double> e(static_cast<size_t>(row.num_accepted + (evidence > 0.5 ? 0 : 1)), evidence);
        p.observe_verified(row, e, m);
      }
    }
    p.observe_step(d.batch, propose_s, 0.012, m);
    return planned;
  };
  EXPECT_GT(step(0.050, 0.0), 0) << "unseen: the prior and free drafts";
  // The first call took 50 ms (one-off costs): it is not fitted, nor is every row's rejection
  // eight observations of the prior.
  EXPECT_EQ(p.cost().propose_seconds(4, 32), 0.0);
  EXPECT_GT(step(0.002, 0.9), 0) << "one bad step does not end drafting";
  EXPECT_GT(p.cost().propose_seconds(4, 32), 0.0) << "the second call is fitted";
  EXPECT_LT(p.cost().propose_seconds(4, 32), 0.010);
  for (int i = 0; i < 5; ++i) EXPECT_GT(step(0.002, 0.9), 0) << "step " << i;
}

// A row that went plain for 60 tokens resumes by feeding them to the proposer first: work
// deferred, not added, and paid once for the rest of its request. Charged whole to the step
// that resumes (30 ms here, against drafts worth 3.4 tokens), resuming never paid and, as the
// catch-up grew, paid less every step: 16 rows of llama-160m stayed plain for whole requests.
// Spread over the steps it buys (at most 16), the row drafts again.
TEST(SpeculationPolicy, AnIdleRowResumesWhenItsDraftsPayOverItsRequest) {
  SpeculationPolicy p(4, 1024, true);
  std::vector<TargetSample> target;  // 10 ms a step, 0.1 ms per extra token: memory-bound
  for (int32_t t = 1; t <= 1024; t *= 2) target.push_back({t, t, 0.010 + 0.0001 * t});
  target.push_back({1024, 1, 0.010 + 0.0001 * 1024});
  p.cost().set_target_prior(target);
  // Propose: 0.5 ms a call, 1 ms a draft step, 0.5 ms a token through the draft (catch-up too).
  for (int i = 0; i < 40; ++i) {
    const int32_t steps = 1 + i % 4, catch_up = (i % 5) * 10;
    p.cost().observe_propose(steps, steps, 0.0005 + 0.001 * steps + 0.0005 * (steps + catch_up), catch_up);
  }
  testing::DecodingBatch d(1, 4);
  d.seqs[0]->params.max_tokens = 200;
  const std::vector<int32_t> drafts = {7, 7, 7, 7};
  spec::PolicyMetrics m;
  d.fill();
  p.plan(d.batch, m);
  sched::StepRow& first = d.batch.rows[0];
  ASSERT_GT(first.lookahead, 0);
  first.drafts = std::span<const int32_t>(drafts).first(static_cast<size_t>(first.lookahead));
  first.num_accepted = first.lookahead;
  p.observe_verified(first, std::vector<double>(static_cast<size_t>(first.lookahead), 0.9), m);
  p.observe_step(d.batch, 0.004, 0.011, m);
  // 60 plain tokens later:
  d.seqs[0]->tokens.resize(d.seqs[0]->tokens.size() + static_cast<size_t>(first.num_accepted) + 1 + 60, 5);
  d.fill();
  p.plan(d.batch, m);
  EXPECT_GT(d.batch.rows[0].lookahead, 0) << "charged 60 / 16 catch-up tokens, drafting pays";
  d.seqs[0]->params.max_tokens = d.seqs[0]->num_generated() + 2;
  d.fill();
  p.plan(d.batch, m);
  EXPECT_EQ(d.batch.rows[0].lookahead, 0) << "two tokens left: the catch-up is charged whole";
}

}  // namespace
}  // namespace specd::speculative
