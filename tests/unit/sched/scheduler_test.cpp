// Scheduling decisions without a model: a fake runner stands in for the forward (it commits the
// scheduled tokens to the KV cache and appends a token to sequences that sample). Budgets,
// chunked prefill, preemption and resume, cancellation, FCFS fairness, lookahead slots.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "kv/kv_cache.hpp"
#include "sched/scheduler.hpp"

namespace specd::sched {
namespace {

constexpr int32_t kBlock = 4;

kv::KvCacheShape shape() { return {1, 1, 4, kBlock}; }

std::unique_ptr<Sequence> seq(RequestId id, int32_t prompt_len, int32_t max_tokens = 100) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  for (int32_t i = 0; i < prompt_len; ++i) s->tokens.push_back(100 + i);
  s->num_prompt = prompt_len;
  s->params.max_tokens = max_tokens;
  return s;
}

// Plays the model: what the forward and the sampler would do with a plan.
void run(kv::KvCache& kv, const SchedulePlan& plan) {
  for (const ScheduledChunk& c : plan.chunks) {
    kv.commit(static_cast<kv::SeqId>(c.seq->id), c.n);
    c.seq->num_computed += c.n;
    if (c.sample) c.seq->tokens.push_back(7);
  }
}

std::vector<std::pair<RequestId, int32_t>> shape_of(const SchedulePlan& plan) {
  std::vector<std::pair<RequestId, int32_t>> out;
  for (const auto& c : plan.chunks) out.emplace_back(c.seq->id, c.n);
  return out;
}

TEST(Scheduler, TokenBudgetAndChunkedPrefill) {
  kv::KvCache kv(shape(), 64);
  Scheduler s({8, 16, true}, kv);
  s.add(seq(1, 10));
  s.add(seq(2, 10));
  s.add(seq(3, 10));
  SchedulePlan p = s.schedule();
  // 10 + the first 6 of the second prompt fill the budget of 16; the third waits.
  EXPECT_EQ(shape_of(p), (std::vector<std::pair<RequestId, int32_t>>{{1, 10}, {2, 6}}));
  EXPECT_TRUE(p.chunks[0].sample);
  EXPECT_FALSE(p.chunks[1].sample) << "a partial prefill chunk does not sample";
  EXPECT_EQ(s.num_waiting(), 1u);
  run(kv, p);
  p = s.schedule();
  // Running first (decode of 1, rest of 2), then the waiting one with what budget is left.
  EXPECT_EQ(shape_of(p), (std::vector<std::pair<RequestId, int32_t>>{{1, 1}, {2, 4}, {3, 10}}));
}

TEST(Scheduler, WithoutChunkedPrefillLongPromptsWaitOrFail) {
  kv::KvCache kv(shape(), 64);
  Scheduler s({8, 16, false}, kv);
  s.add(seq(1, 12));
  s.add(seq(2, 12));
  s.add(seq(3, 40));
  SchedulePlan p = s.schedule();
  EXPECT_EQ(shape_of(p), (std::vector<std::pair<RequestId, int32_t>>{{1, 12}})) << "12 + 12 > 16: FCFS, no skipping";
  run(kv, p);
  p = s.schedule();
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
  const SchedulePlan p = s.schedule();
  EXPECT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(s.num_running(), 2u);
  EXPECT_EQ(s.num_waiting(), 2u);
}

TEST(Scheduler, PreemptsNewestWhenBlocksRunOutAndResumesItFirst) {
  kv::KvCache kv(shape(), 4);  // 16 token slots
  Scheduler s({8, 100, true}, kv);
  s.add(seq(1, 7));
  s.add(seq(2, 7));
  SchedulePlan p = s.schedule();  // 2 blocks each: the cache is full
  EXPECT_EQ(kv.num_free_blocks(), 0);
  run(kv, p);
  p = s.schedule();  // the 8th tokens still fit in two blocks each
  EXPECT_EQ(p.num_preempted, 0);
  run(kv, p);
  // Sequence 1 now needs a third block for its 9th token: the newest (2) gives way.
  p = s.schedule();
  EXPECT_EQ(p.num_preempted, 1);
  EXPECT_EQ(p.preempted, (std::vector<RequestId>{2}));
  EXPECT_EQ(shape_of(p), (std::vector<std::pair<RequestId, int32_t>>{{1, 1}}));
  Sequence* two = s.find(2);
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->num_computed, 0) << "recompute: its KV was dropped";
  EXPECT_EQ(two->tokens.size(), 9u) << "its generated tokens are kept and will be re-prefilled";
  run(kv, p);
  // Finishing 1 frees its blocks; 2 resumes with all 9 tokens, ahead of newer arrivals.
  s.add(seq(3, 2));
  s.remove(1);
  p = s.schedule();
  ASSERT_GE(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq->id, 2u);
  EXPECT_EQ(p.chunks[0].n, 9);
  EXPECT_TRUE(p.chunks[0].sample);
}

TEST(Scheduler, RequestThatCanNeverFitFails) {
  kv::KvCache kv(shape(), 2);  // 8 token slots
  Scheduler s({8, 100, true}, kv);
  s.add(seq(1, 20));
  const SchedulePlan p = s.schedule();
  ASSERT_EQ(p.failed.size(), 1u);
  EXPECT_NE(p.failed[0].second.find("KV cache out of blocks"), std::string::npos) << p.failed[0].second;
  EXPECT_TRUE(s.empty());
}

TEST(Scheduler, CancellationFreesBlocks) {
  kv::KvCache kv(shape(), 16);
  Scheduler s({8, 100, true}, kv);
  s.add(seq(1, 9));
  s.add(seq(2, 5));
  run(kv, s.schedule());
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
    const SchedulePlan p = s.schedule();
    for (const auto& c : p.chunks)
      if (c.start == 0 && std::find(first_scheduled.begin(), first_scheduled.end(), c.seq->id) == first_scheduled.end())
        first_scheduled.push_back(c.seq->id);
    run(kv, p);
  }
  EXPECT_EQ(first_scheduled, (std::vector<RequestId>{1, 2, 3}));
}

TEST(Scheduler, LookaheadSlotsAreReservedAndBudgetedButNeverPreempt) {
  kv::KvCache kv(shape(), 64);
  Scheduler s({8, 100, true}, kv);
  s.set_lookahead([](const Sequence&, size_t) { return 4; });
  s.add(seq(1, 3));
  run(kv, s.schedule());  // prefill: no lookahead
  SchedulePlan p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].n, 1);
  EXPECT_EQ(p.chunks[0].lookahead, 4);
  EXPECT_GE(kv.capacity(1), kv.num_tokens(1) + 5) << "1 + k slots reserved";

  // Budget: 1 + 4 does not fit in 3 tokens; the lookahead shrinks to what is left.
  kv::KvCache kv2(shape(), 64);
  Scheduler s2({8, 3, true}, kv2);
  s2.set_lookahead([](const Sequence&, size_t) { return 4; });
  s2.add(seq(1, 3));
  run(kv2, s2.schedule());
  p = s2.schedule();
  EXPECT_EQ(p.chunks[0].lookahead, 2);

  // KV: with no block to spare, the sequence decodes plainly and nobody is preempted.
  kv::KvCache kv3(shape(), 2);
  Scheduler s3({8, 100, true}, kv3);
  s3.set_lookahead([](const Sequence&, size_t) { return 4; });
  s3.add(seq(1, 3));
  s3.add(seq(2, 3));
  run(kv3, s3.schedule());
  p = s3.schedule();
  EXPECT_EQ(p.num_preempted, 0);
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].lookahead, 0);
  EXPECT_EQ(p.chunks[1].lookahead, 0);
}

}  // namespace
}  // namespace specd::sched
