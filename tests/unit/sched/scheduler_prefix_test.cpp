// The scheduler's side of prefix caching: a sequence admitted behind another with the same
// prompt starts its prefill past the blocks the first one published, always runs at least one
// token of its own, reports what it found (num_cached, the hit statistics), and a request that
// asked for prompt logprobs computes its whole prompt.
#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <vector>

#include "kv/kv_cache.hpp"
#include "sched/scheduler.hpp"

namespace specd::sched {
namespace {

constexpr int32_t kBlock = 4;

std::unique_ptr<Sequence> seq(SeqId id, std::vector<int32_t> prompt, int32_t max_tokens = 3) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->tokens = std::move(prompt);
  s->num_prompt = static_cast<int32_t>(s->tokens.size());
  s->params.max_tokens = max_tokens;
  return s;
}

std::vector<int32_t> prompt(int32_t n, int32_t first = 100) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

struct Fixture {
  kv::KvCache kv{{1, 1, 4, kBlock}, 32};
  Scheduler s{SchedulerLimits{8, 64, true, 1000}, kv};
  std::vector<int32_t> token{7};
  Fixture() { kv.set_prefix_caching(true); }

  // One step: the fake forward writes the scheduled tokens, sampling rows get token 7, and the
  // scheduler commits (publishing full blocks). Returns the rows' (id, start, n).
  std::vector<std::array<int32_t, 3>> step() {
    StepBatch b;
    s.schedule(b);
    std::vector<std::array<int32_t, 3>> rows;
    for (StepRow& r : b.rows) {
      rows.push_back({static_cast<int32_t>(r.seq->id), r.start, r.n});
      kv.commit(static_cast<kv::SeqId>(r.seq->id), r.n);
      if (r.sample) r.emitted = token;
      s.commit(r);
      if (r.finish != FinishReason::kNone) s.remove(r.seq->id);
    }
    return rows;
  }
  void run_to_end() {
    while (!s.empty()) step();
  }
};

using Rows = std::vector<std::array<int32_t, 3>>;

TEST(SchedulerPrefixCache, ALaterRequestWithTheSamePromptStartsPastTheCachedBlocks) {
  Fixture f;
  f.s.add(seq(1, prompt(10)));
  f.run_to_end();
  auto second = seq(2, prompt(13));
  Sequence* s2 = second.get();
  f.s.add(std::move(second));
  EXPECT_EQ(f.step(), (Rows{{2, 8, 5}})) << "positions 0..7 came from the cache";
  EXPECT_EQ(s2->num_cached, 8);
  const Scheduler::PrefixCacheStats st = f.s.prefix_cache_stats();
  EXPECT_EQ(st.queries, 10u + 13u);
  EXPECT_EQ(st.hits, 8u);
  f.run_to_end();
  EXPECT_EQ(f.kv.num_free_blocks(), f.kv.num_blocks());
}

TEST(SchedulerPrefixCache, TheLastPromptTokenIsAlwaysComputed) {
  Fixture f;
  f.s.add(seq(1, prompt(8)));
  f.run_to_end();
  f.s.add(seq(2, prompt(8)));
  EXPECT_EQ(f.step(), (Rows{{2, 4, 4}})) << "a whole-prompt hit still runs the last block for its logits";
}

TEST(SchedulerPrefixCache, PromptLogprobsComputeTheWholePrompt) {
  Fixture f;
  f.s.add(seq(1, prompt(10)));
  f.run_to_end();
  auto scoring = seq(2, prompt(10));
  scoring->params.prompt_logprobs = 0;
  f.s.add(std::move(scoring));
  EXPECT_EQ(f.step(), (Rows{{2, 0, 10}}));
}

TEST(SchedulerPrefixCache, GeneratedTokensArePublishedForTheNextTurn) {
  Fixture f;
  f.s.add(seq(1, prompt(6), 6));  // 6 + 6 tokens: blocks 0..2 of [prompt, 7 x 6]
  f.run_to_end();
  std::vector<int32_t> next = prompt(6);
  next.insert(next.end(), 6, 7);  // the conversation so far, then a new user turn
  next.push_back(300);
  f.s.add(seq(2, next));
  EXPECT_EQ(f.step(), (Rows{{2, 8, 5}})) << "the last generated token has no K/V: 11 computed, 2 blocks";
}

TEST(SchedulerPrefixCache, AResumedSequenceFindsItsOwnBlocks) {
  kv::KvCache kv{{1, 1, 4, kBlock}, 6};
  kv.set_prefix_caching(true);
  Scheduler s{SchedulerLimits{8, 64, true, 1000}, kv};
  s.add(seq(1, prompt(9), 6));
  s.add(seq(2, prompt(9, 500), 8));
  std::vector<int32_t> token{7};
  int32_t preempted = 0;
  bool resumed_past_zero = false;
  for (int i = 0; i < 40 && !s.empty(); ++i) {
    StepBatch b;
    s.schedule(b);
    preempted += b.num_preempted;
    for (StepRow& r : b.rows) {
      if (preempted > 0 && r.seq->id == 2 && r.n > 1 && r.start > 0) resumed_past_zero = true;
      kv.commit(static_cast<kv::SeqId>(r.seq->id), r.n);
      if (r.sample) r.emitted = token;
      s.commit(r);
      if (r.finish != FinishReason::kNone) s.remove(r.seq->id);
    }
  }
  EXPECT_GT(preempted, 0) << "6 blocks cannot hold both";
  EXPECT_TRUE(resumed_past_zero) << "the preempted sequence's re-prefill starts after its published blocks";
}

}  // namespace
}  // namespace specd::sched
