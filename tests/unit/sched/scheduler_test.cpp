// Scheduling decisions without a model: a fake runner stands in for the forward (it commits the
// scheduled tokens to the KV cache and appends a token to sequences that sample). Budgets,
// chunked prefill, preemption and resume, cancellation, FCFS fairness, lookahead slots, and
// Scheduler::commit (appending a verified run, stop conditions, KV rollback in the target and
// the hosted models).
#include "sched/scheduler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "kv/kv_cache.hpp"

namespace specd::sched {
namespace {

constexpr int32_t kBlock = 4;

kv::KvCacheShape shape() {
  return {1, 1, 4, kBlock};
}

std::unique_ptr<Sequence> seq(RequestId id, int32_t prompt_len, int32_t max_tokens = 100) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  for (int32_t i = 0; i < prompt_len; ++i) s->tokens.push_back(100 + i);
  s->num_prompt = prompt_len;
  s->params.max_tokens = max_tokens;
  return s;
}

std::unique_ptr<Sequence> speculating(std::unique_ptr<Sequence> s, int32_t k) {
  s->spec_k = k;
  return s;
}

StepBatch schedule(Scheduler& s) {
  StepBatch b;
  s.schedule(b);
  return b;
}

// Plays the model: what the forward and the sampler would do with a plan.
void run(kv::KvCache& kv, const StepBatch& plan) {
  for (const StepRow& c : plan.rows) {
    kv.commit(static_cast<kv::SeqId>(c.seq->id), c.n);
    c.seq->num_computed += c.n;
    if (c.sample) c.seq->tokens.push_back(7);
  }
}

std::vector<std::pair<RequestId, int32_t>> shape_of(const StepBatch& plan) {
  std::vector<std::pair<RequestId, int32_t>> out;
  for (const auto& c : plan.rows) out.emplace_back(c.seq->id, c.n);
  return out;
}

TEST(Scheduler, TokenBudgetAndChunkedPrefill) {
  kv::KvCache kv(shape(), 64);
  Scheduler s({8, 16, true}, kv);
  s.add(seq(1, 10));
  s.add(seq(2, 10));
  s.add(seq(3, 10));
  StepBatch p = schedule(s);
  // 10 + the first 6 of the second prompt fill the budget of 16; the third waits.
  EXPECT_EQ(shape_of(p), (std::vector<std::pair<RequestId, int32_t>>{{1, 10}, {2, 6}}));
  EXPECT_TRUE(p.rows[0].sample);
  EXPECT_FALSE(p.rows[1].sample) << "a partial prefill chunk does not sample";
  EXPECT_EQ(s.num_waiting(), 1u);
  run(kv, p);
  p = schedule(s);
  // Running first (decode of 1, rest of 2), then the waiting one with what budget is left.
  EXPECT_EQ(shape_of(p), (std::vector<std::pair<RequestId, int32_t>>{{1, 1}, {2, 4}, {3, 10}}));
}

TEST(Scheduler, WithoutChunkedPrefillLongPromptsWaitOrFail) {
  kv::KvCache kv(shape(), 64);
  Scheduler s({8, 16, false}, kv);
  s.add(seq(1, 12));
  s.add(seq(2, 12));
  s.add(seq(3, 40));
  StepBatch p = schedule(s);
  EXPECT_EQ(shape_of(p), (std::vector<std::pair<RequestId, int32_t>>{{1, 12}})) << "12 + 12 > 16: FCFS, no skipping";
  run(kv, p);
  p = schedule(s);
  EXPECT_EQ(shape_of(p), (std::vector<std::pair<RequestId, int32_t>>{{1, 1}, {2, 12}}));
  // The 40-token prompt can never be scheduled whole: it fails when its turn comes.
  ASSERT_EQ(p.failed.size(), 1u);
  EXPECT_EQ(p.failed[0].first, 3u);
  EXPECT_NE(p.failed[0].second.find("exceeds scheduler.max_num_batched_tokens = 16"), std::string::npos)
      << p.failed[0].second;
}

TEST(Scheduler, MaxNumSeqs) {
  kv::KvCache kv(shape(), 64);
  Scheduler s({2, 100, true}, kv);
  for (RequestId id = 1; id <= 4; ++id) s.add(seq(id, 3));
  const StepBatch p = schedule(s);
  EXPECT_EQ(p.rows.size(), 2u);
  EXPECT_EQ(s.num_running(), 2u);
  EXPECT_EQ(s.num_waiting(), 2u);
}

TEST(Scheduler, PreemptsNewestWhenBlocksRunOutAndResumesItFirst) {
  kv::KvCache kv(shape(), 4);  // 16 token slots
  Scheduler s({8, 100, true}, kv);
  s.add(seq(1, 7));
  auto seq2 = seq(2, 7);
  Sequence* two = seq2.get();
  s.add(std::move(seq2));
  StepBatch p = schedule(s);  // 2 blocks each: the cache is full
  EXPECT_EQ(kv.num_free_blocks(), 0);
  run(kv, p);
  p = schedule(s);  // the 8th tokens still fit in two blocks each
  EXPECT_EQ(p.num_preempted, 0);
  run(kv, p);
  // Sequence 1 now needs a third block for its 9th token: the newest (2) gives way.
  p = schedule(s);
  EXPECT_EQ(p.num_preempted, 1);
  EXPECT_EQ(p.preempted, (std::vector<RequestId>{2}));
  EXPECT_EQ(shape_of(p), (std::vector<std::pair<RequestId, int32_t>>{{1, 1}}));
  EXPECT_EQ(two->num_computed, 0) << "recompute: its KV was dropped";
  EXPECT_EQ(two->tokens.size(), 9u) << "its generated tokens are kept and will be re-prefilled";
  run(kv, p);
  // Finishing 1 frees its blocks; 2 resumes ahead of newer arrivals. It had generated a token,
  // so it re-prefills all but its last token and the next step decodes that one, as it would
  // have without the preemption.
  s.add(seq(3, 2));
  s.remove(1);
  p = schedule(s);
  ASSERT_GE(p.rows.size(), 1u);
  EXPECT_EQ(p.rows[0].seq->id, 2u);
  EXPECT_EQ(p.rows[0].n, 8);
  EXPECT_FALSE(p.rows[0].sample);
  run(kv, p);
  p = schedule(s);
  ASSERT_GE(p.rows.size(), 1u);
  EXPECT_EQ(p.rows[0].seq->id, 2u);
  EXPECT_EQ(p.rows[0].start, 8);
  EXPECT_EQ(p.rows[0].n, 1);
  EXPECT_TRUE(p.rows[0].sample);
}

TEST(Scheduler, ResumedSequenceSpeculatesAgainRightAfterItsRePrefill) {
  kv::KvCache kv(shape(), 4);  // 16 slots
  Scheduler s({8, 100, true, 1000, 0, 0}, kv);
  s.add(speculating(seq(1, 7), 2));
  auto second = speculating(seq(2, 6), 2);
  Sequence* two = second.get();
  s.add(std::move(second));
  run(kv, schedule(s));  // prefills: 8 and 7 tokens
  StepBatch p = schedule(s);
  ASSERT_EQ(p.rows.size(), 2u);
  EXPECT_EQ(p.rows[1].lookahead, 0) << "no room for 2's lookahead: it decodes plainly";
  run(kv, p);
  p = schedule(s);  // 1 needs a third block: 2 is preempted
  ASSERT_EQ(p.preempted, (std::vector<RequestId>{2}));
  run(kv, p);
  s.remove(1);
  p = schedule(s);
  ASSERT_EQ(p.rows.size(), 1u);
  EXPECT_EQ(p.rows[0].n, 7) << "8 tokens, all but the last re-prefilled";
  EXPECT_FALSE(p.rows[0].sample);
  run(kv, p);
  p = schedule(s);
  ASSERT_EQ(p.rows.size(), 1u);
  EXPECT_EQ(p.rows[0].seq, two);
  EXPECT_EQ(p.rows[0].n, 1);
  EXPECT_TRUE(p.rows[0].sample);
  EXPECT_EQ(p.rows[0].lookahead, 2) << "the decode it would have run, with its drafts";
}

TEST(Scheduler, RequestThatCanNeverFitFails) {
  kv::KvCache kv(shape(), 2);  // 8 token slots
  Scheduler s({8, 100, true}, kv);
  s.add(seq(1, 20));
  const StepBatch p = schedule(s);
  ASSERT_EQ(p.failed.size(), 1u);
  EXPECT_NE(p.failed[0].second.find("KV cache out of blocks"), std::string::npos) << p.failed[0].second;
  EXPECT_TRUE(s.empty());
}

TEST(Scheduler, CancellationFreesBlocks) {
  kv::KvCache kv(shape(), 16);
  Scheduler s({8, 100, true}, kv);
  s.add(seq(1, 9));
  s.add(seq(2, 5));
  run(kv, schedule(s));
  EXPECT_EQ(kv.num_free_blocks(), 16 - 3 - 2);
  EXPECT_NE(s.remove(1), nullptr);
  EXPECT_EQ(kv.num_free_blocks(), 16 - 2);
  EXPECT_EQ(s.remove(1), nullptr) << "unknown ids are ignored";
  s.add(seq(3, 4));
  EXPECT_NE(s.remove(3), nullptr) << "waiting requests can be cancelled too";
  EXPECT_EQ(s.num_waiting(), 0u);
}

TEST(Scheduler, FcfsAdmission) {
  kv::KvCache kv(shape(), 64);
  Scheduler s({8, 6, true}, kv);
  for (RequestId id = 1; id <= 3; ++id) s.add(seq(id, 6));
  std::vector<RequestId> first_scheduled;
  for (int step = 0; step < 6 && first_scheduled.size() < 3; ++step) {
    const StepBatch p = schedule(s);
    for (const auto& c : p.rows)
      if (c.start == 0 && std::find(first_scheduled.begin(), first_scheduled.end(), c.seq->id) == first_scheduled.end())
        first_scheduled.push_back(c.seq->id);
    run(kv, p);
  }
  EXPECT_EQ(first_scheduled, (std::vector<RequestId>{1, 2, 3}));
}

TEST(Scheduler, LookaheadSlotsAreReservedAndBudgetedButNeverPreempt) {
  kv::KvCache kv(shape(), 64);
  Scheduler s({8, 100, true}, kv);
  s.add(speculating(seq(1, 3), 4));
  run(kv, schedule(s));  // prefill: no lookahead
  StepBatch p = schedule(s);
  ASSERT_EQ(p.rows.size(), 1u);
  EXPECT_EQ(p.rows[0].n, 1);
  EXPECT_EQ(p.rows[0].lookahead, 4);
  EXPECT_GE(kv.capacity(1), kv.num_tokens(1) + 5) << "1 + k slots reserved";

  // Budget: 1 + 4 does not fit in 3 tokens; the lookahead shrinks to what is left.
  kv::KvCache kv2(shape(), 64);
  Scheduler s2({8, 3, true}, kv2);
  s2.add(speculating(seq(1, 3), 4));
  run(kv2, schedule(s2));
  p = schedule(s2);
  EXPECT_EQ(p.rows[0].lookahead, 2);

  // KV: with no block to spare, the sequence decodes plainly and nobody is preempted.
  kv::KvCache kv3(shape(), 2);
  Scheduler s3({8, 100, true}, kv3);
  s3.add(speculating(seq(1, 3), 4));
  s3.add(speculating(seq(2, 3), 4));
  run(kv3, schedule(s3));
  p = schedule(s3);
  EXPECT_EQ(p.num_preempted, 0);
  ASSERT_EQ(p.rows.size(), 2u);
  EXPECT_EQ(p.rows[0].lookahead, 0);
  EXPECT_EQ(p.rows[1].lookahead, 0);
}

// ---- multi-step scheduling --------------------------------------------------------------------

SchedulerLimits multi_step(int32_t n, int32_t max_num_batched_tokens = 100) {
  SchedulerLimits l{8, max_num_batched_tokens, true, 1000};
  l.num_scheduler_steps = n;
  return l;
}

TEST(MultiStep, ReservesForEverySubStepUpFrontAndAdmitsOnlyBetweenMultiSteps) {
  kv::KvCache kv(shape(), 64);
  Scheduler s(multi_step(4), kv);
  s.add(speculating(seq(1, 3), 2));
  s.add(seq(2, 5));
  run(kv, schedule(s));  // prefill chunks: a single step
  EXPECT_EQ(s.substeps_left(), 0);
  StepBatch p = schedule(s);  // decodes only: the first of 4 sub-steps
  ASSERT_EQ(p.rows.size(), 2u);
  EXPECT_EQ(s.substeps_left(), 3);
  EXPECT_GE(kv.capacity(1), 3 + 4 * (2 + 1)) << "n x (k + 1) past its computed tokens";
  EXPECT_GE(kv.capacity(2), 5 + 4 * 1);
  const int32_t free_during = kv.num_free_blocks();
  run(kv, p);
  s.add(seq(3, 2));  // arrives mid-run: waits for the next full schedule
  for (int sub = 2; sub <= 4; ++sub) {
    p = schedule(s);
    EXPECT_EQ(shape_of(p), (std::vector<std::pair<RequestId, int32_t>>{{1, 1}, {2, 1}})) << "sub-step " << sub;
    EXPECT_EQ(p.rows[0].lookahead, 2);
    EXPECT_EQ(p.rows[0].start, p.rows[0].seq->num_computed);
    EXPECT_EQ(kv.num_free_blocks(), free_during) << "sub-steps reserve nothing";
    run(kv, p);
  }
  EXPECT_EQ(s.substeps_left(), 0);
  p = schedule(s);  // the multi-step is over: unused KV back, the arrival admitted
  ASSERT_EQ(p.rows.size(), 3u);
  EXPECT_EQ(p.rows[2].seq->id, 3u);
  EXPECT_EQ(s.substeps_left(), 0) << "a prefill chunk in the batch: a single step";
  EXPECT_EQ(kv.capacity(2), 12) << "9 computed + this step's token: 3 blocks, the rest given back";
}

TEST(MultiStep, ReservationIsCappedByWhatTheSequenceCanStillGenerate) {
  kv::KvCache kv(shape(), 64);
  Scheduler s(multi_step(8), kv);
  s.add(seq(1, 4, /*max_tokens=*/3));
  run(kv, schedule(s));
  schedule(s);
  EXPECT_EQ(kv.capacity(1), 8) << "2 more tokens to generate: 4 + 2 slots, not 4 + 8";
}

TEST(MultiStep, DoesNotStartWhenThePoolCannotHoldItAndNeverPreempts) {
  kv::KvCache kv(shape(), 5);  // 20 slots
  Scheduler s(multi_step(4), kv);
  s.add(seq(1, 7));
  s.add(seq(2, 7));
  run(kv, schedule(s));
  const StepBatch p = schedule(s);
  EXPECT_EQ(p.num_preempted, 0);
  EXPECT_EQ(p.rows.size(), 2u);
  EXPECT_EQ(s.substeps_left(), 0) << "n x 1 more slots for both do not fit: a single step";
  EXPECT_EQ(kv.num_free_blocks(), 1) << "the extension taken for the first sequence was given back";
}

TEST(MultiStep, FinishedSequencesLeaveAndTheLastOneEndsIt) {
  kv::KvCache kv(shape(), 64);
  Scheduler s(multi_step(4), kv);
  s.add(seq(1, 3));
  s.add(seq(2, 3));
  run(kv, schedule(s));
  run(kv, schedule(s));  // sub-step 1
  const int32_t free_before = kv.num_free_blocks();
  s.remove(2);  // finished (or aborted) in sub-step 1: its blocks are free at once
  EXPECT_GT(kv.num_free_blocks(), free_before);
  StepBatch p = schedule(s);
  EXPECT_EQ(shape_of(p), (std::vector<std::pair<RequestId, int32_t>>{{1, 1}}));
  run(kv, p);
  s.remove(1);
  s.add(seq(3, 2));
  p = schedule(s);  // nobody left in the multi-step: a full schedule right away
  EXPECT_EQ(shape_of(p), (std::vector<std::pair<RequestId, int32_t>>{{3, 2}}));
}

TEST(MultiStep, RollbackOfRejectedDraftsKeepsTheReservation) {
  kv::KvCache kv(shape(), 64);
  Scheduler s(multi_step(4), kv);
  s.add(speculating(seq(1, 5), 3));
  run(kv, schedule(s));
  StepBatch p = schedule(s);
  ASSERT_EQ(s.substeps_left(), 3);
  const int32_t capacity = kv.capacity(1);
  EXPECT_GE(capacity, 5 + 4 * 4);
  StepRow& row = p.rows[0];
  std::vector<int32_t> drafts = {11, 12, 13}, emitted = {99};
  row.drafts = drafts;
  kv.commit(1, 4);  // the last token and three drafts went through the target
  row.num_accepted = 0;
  row.emitted = emitted;
  s.commit(row);
  EXPECT_EQ(kv.num_tokens(1), 6) << "the rejected drafts are rolled back";
  EXPECT_EQ(kv.capacity(1), capacity) << "but the blocks of the later sub-steps stay reserved";
}

// ---- Scheduler::commit ------------------------------------------------------------------------

// A hosted model's KV (a draft model): its cached length per sequence.
struct FakeHosted final : HostedKv {
  std::map<kv::SeqId, int32_t> len;
  std::vector<kv::SeqId> dropped;
  void truncate(kv::SeqId seq, int32_t max_len) override {
    if (auto it = len.find(seq); it != len.end()) it->second = std::min(it->second, max_len);
  }
  void drop(kv::SeqId seq) override {
    len.erase(seq);
    dropped.push_back(seq);
  }
  void match_prefix(kv::SeqId, std::span<const int32_t>, int32_t) override {}  // these tests cache nothing
  void publish(kv::SeqId, std::span<const int32_t>) override {}
};

// A decoding sequence with `prompt` tokens and one generated token, scheduled with lookahead k.
struct Decoding {
  kv::KvCache kv{shape(), 64};
  FakeHosted hosted;
  Scheduler s;
  Sequence* decoding = nullptr;
  StepBatch batch;

  explicit Decoding(int32_t k, int32_t max_tokens = 100, std::vector<int32_t> stop_ids = {})
      : s(SchedulerLimits{8, 100, true, 1000}, kv, &hosted) {
    auto q = speculating(seq(1, 5, max_tokens), k);
    q->stop_ids = std::move(stop_ids);
    decoding = q.get();
    s.add(std::move(q));
    run(kv, schedule(s));  // prefill, then its first token
    s.schedule(batch);
  }
  StepRow& row() { return batch.rows.at(0); }
  // What the proposer and the scorer leave: drafts, and K/V of the last token and every draft
  // in the target; the draft model holds the context plus all but the last draft.
  void score(std::vector<int32_t>& drafts) {
    row().drafts = drafts;
    kv.commit(1, 1 + static_cast<int32_t>(drafts.size()));
    hosted.len[1] = static_cast<int32_t>(decoding->tokens.size()) + static_cast<int32_t>(drafts.size()) - 1;
  }
  void verify(int32_t accepted, std::vector<int32_t>& emitted) {
    row().num_accepted = accepted;
    row().emitted = emitted;
  }
};

TEST(SchedulerCommit, PartialAcceptanceKeepsTheAcceptedDraftsAndTheCorrection) {
  Decoding d(4);
  ASSERT_EQ(d.row().lookahead, 4);
  ASSERT_EQ(d.decoding->tokens.size(), 6u);
  std::vector<int32_t> drafts = {11, 12, 13, 14}, emitted = {11, 12, 99};
  d.score(drafts);
  d.verify(2, emitted);
  d.s.commit(d.row());
  EXPECT_EQ(d.row().num_appended, 3);
  EXPECT_EQ(d.row().finish, FinishReason::kNone);
  EXPECT_EQ(std::vector<int32_t>(d.decoding->tokens.begin() + 6, d.decoding->tokens.end()), emitted);
  // The last token and the 2 accepted drafts stay; the correction 99 has no K/V yet.
  EXPECT_EQ(d.kv.num_tokens(1), 6 + 2);
  EXPECT_EQ(d.decoding->num_computed, 8);
  EXPECT_EQ(d.decoding->num_uncomputed(), 1);
  EXPECT_EQ(d.hosted.len[1], 8) << "the draft model is rolled back to the target's length";
}

TEST(SchedulerCommit, AllAcceptedAppendsTheBonusToken) {
  Decoding d(3);
  std::vector<int32_t> drafts = {11, 12, 13}, emitted = {11, 12, 13, 50};
  d.score(drafts);
  d.verify(3, emitted);
  d.s.commit(d.row());
  EXPECT_EQ(d.row().num_appended, 4);
  EXPECT_EQ(d.decoding->tokens.size(), 10u);
  EXPECT_EQ(d.decoding->tokens.back(), 50);
  EXPECT_EQ(d.kv.num_tokens(1), 9) << "every draft was accepted: nothing rolled back";
  EXPECT_EQ(d.decoding->num_computed, 9);
  EXPECT_EQ(d.hosted.len[1], 8) << "the draft never saw d2; nothing to cut";
}

TEST(SchedulerCommit, StopTokenInsideTheAcceptedRunEndsTheSequenceThere) {
  Decoding d(4, 100, {2});
  std::vector<int32_t> drafts = {11, 2, 13, 14}, emitted = {11, 2, 13, 14, 15};
  d.score(drafts);
  d.verify(4, emitted);
  d.s.commit(d.row());
  EXPECT_EQ(d.row().finish, FinishReason::kStop);
  EXPECT_EQ(d.row().num_appended, 2) << "tokens after the stop token are not appended";
  EXPECT_EQ(d.decoding->tokens.back(), 2);

  // max_tokens inside the run: 1 generated + 2 more reach max_tokens = 3.
  Decoding l(4, 3);
  EXPECT_EQ(l.row().lookahead, 1) << "k is capped by what max_tokens leaves";
  std::vector<int32_t> one = {11}, two = {11, 12};
  l.score(one);
  l.verify(1, two);
  l.s.commit(l.row());
  EXPECT_EQ(l.row().finish, FinishReason::kLength);
  EXPECT_EQ(l.row().num_appended, 2);
  EXPECT_EQ(l.decoding->num_generated(), 3);
}

TEST(SchedulerCommit, PreemptedSequenceDropsHostedKvAndResumesWithItsTokens) {
  kv::KvCache kv(shape(), 4);  // 16 slots
  FakeHosted hosted;
  Scheduler s({8, 100, true}, kv, &hosted);
  s.add(seq(1, 7));
  auto second = seq(2, 7);
  Sequence* two = second.get();
  s.add(std::move(second));
  run(kv, schedule(s));
  run(kv, schedule(s));
  hosted.len[2] = 8;
  StepBatch p = schedule(s);  // 1 needs a third block: 2 is preempted
  ASSERT_EQ(p.preempted, (std::vector<RequestId>{2}));
  EXPECT_EQ(hosted.dropped, (std::vector<kv::SeqId>{2})) << "a preempted sequence leaves the hosted caches too";
  EXPECT_FALSE(hosted.len.contains(2));
  run(kv, p);
  s.remove(1);
  // Resumed: 8 of its 9 tokens re-prefill, then the 9th decodes; commit appends after it.
  p = schedule(s);
  ASSERT_EQ(p.rows.size(), 1u);
  EXPECT_EQ(p.rows[0].seq, two);
  EXPECT_EQ(p.rows[0].n, 8);
  kv.commit(2, p.rows[0].n);
  s.commit(p.rows[0]);
  EXPECT_EQ(two->num_computed, 8);
  p = schedule(s);
  ASSERT_EQ(p.rows.size(), 1u);
  StepRow& row = p.rows[0];
  EXPECT_EQ(row.n, 1);
  kv.commit(2, row.n);
  std::vector<int32_t> token = {42};
  row.emitted = token;
  s.commit(row);
  EXPECT_EQ(two->num_computed, 9);
  EXPECT_EQ(two->tokens.size(), 10u);
  EXPECT_EQ(two->tokens.back(), 42);
  EXPECT_EQ(kv.num_tokens(2), 9);
}

TEST(SchedulerCommit, FailedRowsAreNotCommitted) {
  Decoding d(2);
  std::vector<int32_t> drafts = {11, 12}, emitted = {11, 12, 13};
  d.score(drafts);
  d.verify(2, emitted);
  d.row().fail("verifier failed");
  d.s.commit(d.row());
  EXPECT_EQ(d.decoding->tokens.size(), 6u);
  EXPECT_EQ(d.row().num_appended, 0);
}

}  // namespace
}  // namespace specd::sched
