// The dynamic speculation policy after an unlucky start: a batch of the same prompt meets the
// same hard token at once, so its first drafting step can reject every row's drafts (the demo
// prompt on llama-160m: every proposer's first draft there is wrong, then 0.93 are right). The
// proposer-wide prior takes that step as one observation, not one per row, and the proposer's
// first call (which pays one-off costs) does not price the later ones; so the next step drafts
// again and the policy finds the drafts that pay. Counted row by row with the first call fitted,
// dynamic k stayed plain for whole requests at batch 8 (0.56x static k = 4). Nor do a batch's
// per-sequence costs or a long-idle row's catch-up price its drafts out for good.
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

// 16 rows whose plain steps run 1.66x the one-sequence calibration (per-sequence costs:
// llama-160m with an EAGLE-3 head, 21.4 ms against 12.9 at T = 16). Their first drafts (T = 32)
// cost what the plain step costs plus the calibration's 16 extra tokens (about 30 ms, 27 seen),
// not 1.66x the calibration's T = 32 (36 ms): at 0.75 acceptance they pay, and the policy drafts.
// Charged as a factor, it stayed plain for whole requests (0.77x static k = 4). Steps that also
// finish a prompt (800 tokens), learned as well, do not change that: a size leans on the nearest
// learned size below it.
TEST(SpeculationPolicy, ABatchsPerSequenceCostsDoNotPriceItsDraftsOut) {
  SpeculationPolicy p(4, 1024, true);
  std::vector<TargetSample> target;  // one sequence: 3.9 ms + 0.56 ms per token
  for (int32_t t = 1; t <= 1024; t *= 2) target.push_back({t, t, 0.0039 + 0.00056 * t});
  target.push_back({1024, 1, 0.0039 + 0.00056 * 1024});
  p.cost().set_target_prior(target);
  for (int i = 0; i < 20; ++i) {
    p.cost().observe_target(16, 16, 0.0214);
    if (i % 4 == 0) p.cost().observe_target(800, 17, 0.0039 + 0.00056 * 800);  // steps with a prompt
  }
  for (int i = 0; i < 20; ++i) p.cost().observe_propose(1 + i % 4, 16 * (1 + i % 4), 0.002 + 0.0015 * (i % 4));
  EXPECT_LT(p.cost().target_seconds(32, 32), 0.0214 + 16 * 0.00056 + 0.001);
  StepBase base;
  base.tokens = base.logit_rows = base.emitted = 16;
  const std::vector<double> accept(4, 0.75);
  const std::vector<PlanRow> rows(16, PlanRow{4, accept});
  std::vector<int32_t> k(16);
  p.choose_k(base, rows, k);
  for (size_t i = 0; i < k.size(); ++i) EXPECT_GT(k[i], 0) << "row " << i;
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
