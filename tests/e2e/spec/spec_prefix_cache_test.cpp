// Automatic prefix caching end to end (docs/scheduling.md "Prefix caching"): a multi-turn
// conversation whose every turn resends the history, and concurrent requests sharing a system
// prompt, give the same greedy tokens with kv_cache.prefix_caching on and off, with and without
// speculation, in sync and async multi-step scheduling, and under memory pressure (eviction and
// preemption). With caching on, later turns report the history as cached tokens; every block is
// free at the end.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "spec_test_util.hpp"

namespace specd {
namespace {

namespace fs = std::filesystem;
using spec_test::add_request;
using spec_test::greedy_request;

struct Conversation {
  std::vector<std::vector<int32_t>> turns;       // each turn's generated tokens
  std::vector<int32_t> cached;                   // each turn's num_cached_tokens
  std::vector<std::vector<int32_t>> concurrent;  // the concurrent requests' tokens
  EngineStats stats;
  bool prefix_caching = false;
};

std::vector<int32_t> random_tokens(std::mt19937_64& rng, int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(3 + static_cast<int32_t>(rng() % 31990));
  return t;
}

// Runs the requests to completion together; their tokens in order, and choice 0's cached count.
std::vector<std::vector<int32_t>> run_together(Engine& engine, const std::vector<Request>& requests,
                                               std::vector<int32_t>* cached = nullptr) {
  std::map<RequestId, size_t> index;
  for (size_t i = 0; i < requests.size(); ++i) index[add_request(engine, requests[i])] = i;
  std::vector<std::vector<int32_t>> out(requests.size());
  if (cached != nullptr) cached->assign(requests.size(), -1);
  while (engine.has_unfinished()) {
    for (const RequestOutput& o : engine.step()) {
      const size_t i = index.at(o.id);
      out[i].insert(out[i].end(), o.new_token_ids.begin(), o.new_token_ids.end());
      EXPECT_TRUE(o.error.empty()) << o.error;
      if (o.finished && cached != nullptr) (*cached)[i] = o.num_cached_tokens;
    }
  }
  return out;
}

// Four turns on a 40-token system prompt, each prompt the whole history plus a new user
// message; then `concurrent` requests on the same system prompt, each with its own question.
Conversation converse(const config::EngineConfig& cfg, int concurrent = 6, int32_t concurrent_tokens = 10) {
  Engine engine(cfg);
  std::mt19937_64 rng(5);
  std::vector<int32_t> system = random_tokens(rng, 40);
  system[0] = 1;  // BOS
  Conversation c;
  c.prefix_caching = engine.info().prefix_caching;
  std::vector<int32_t> history = system;
  for (int turn = 0; turn < 4; ++turn) {
    const std::vector<int32_t> user = random_tokens(rng, 5 + turn);
    history.insert(history.end(), user.begin(), user.end());
    std::vector<int32_t> cached;
    c.turns.push_back(run_together(engine, {greedy_request(history, 12)}, &cached)[0]);
    c.cached.push_back(cached[0]);
    history.insert(history.end(), c.turns.back().begin(), c.turns.back().end());
  }
  std::vector<Request> requests;
  for (int i = 0; i < concurrent; ++i) {
    std::vector<int32_t> p = system;
    const std::vector<int32_t> q = random_tokens(rng, 3 + i % 7);
    p.insert(p.end(), q.begin(), q.end());
    requests.push_back(greedy_request(p, concurrent_tokens));
  }
  c.concurrent = run_together(engine, requests);
  c.stats = engine.stats();
  return c;
}

void expect_same_tokens(const Conversation& on, const Conversation& off, const std::string& what) {
  EXPECT_EQ(on.turns, off.turns) << what;
  EXPECT_EQ(on.concurrent, off.concurrent) << what;
  for (const Conversation* c : {&on, &off})
    EXPECT_EQ(c->stats.kv_blocks_free, c->stats.kv_blocks_total) << what << ": every block is free at the end";
}

config::EngineConfig with_caching(config::EngineConfig cfg, bool on) {
  cfg.kv_cache.prefix_caching = on;
  return cfg;
}

// The proposers that do not need the target's hidden states, in each scheduling mode.
TEST(PrefixCacheE2E, SameGreedyTokensWithCachingOnAndOffForEveryProposerAndMode) {
  const fs::path target = spec_test::target_fixture();
  struct Case {
    std::string proposer;  // "" = no speculation
    spec_test::Mode mode;
  };
  const Case cases[] = {{"", {false, 1}},
                        {"", {true, 4}},
                        {"ngram", {false, 1}},
                        {"ngram", {true, 4}},
                        {"draft_model", {false, 1}},
                        {"draft_model", {true, 1}},
                        {"draft_model", {false, 4}}};
  for (const Case& k : cases) {
    const std::string what = (k.proposer.empty() ? "plain" : k.proposer) + " " + spec_test::mode_name(k.mode);
    const config::Overrides o = spec_test::scheduling(k.mode, {{"scheduler.max_num_batched_tokens", "32"}});
    const config::EngineConfig cfg = k.proposer.empty() ? config::for_model_dir(target.string(), o)
                                                        : spec_test::spec_config(target, k.proposer, "rejection", 3, o);
    const Conversation on = converse(with_caching(cfg, true));
    const Conversation off = converse(with_caching(cfg, false));
    ASSERT_TRUE(on.prefix_caching) << what;
    ASSERT_FALSE(off.prefix_caching) << what;
    expect_same_tokens(on, off, what);
    // Turn t resends the history: its full blocks up to the last token of the previous answer.
    EXPECT_EQ(on.cached[0], 0) << what;
    for (size_t t = 1; t < on.cached.size(); ++t) {
      EXPECT_GE(on.cached[t], 48) << what << " turn " << t;
      EXPECT_EQ(on.cached[t] % 16, 0) << what << " turn " << t << ": whole blocks";
      EXPECT_EQ(off.cached[t], 0) << what << " turn " << t;
    }
    EXPECT_GT(on.stats.prefix_cache_hits, 0u) << what;
    EXPECT_GT(on.stats.prefix_cache_queries, on.stats.prefix_cache_hits) << what;
    EXPECT_EQ(off.stats.prefix_cache_hits, 0u) << what;
    EXPECT_GT(on.stats.kv_blocks_cached, 0) << what << ": the conversation stays cached";
  }
}

// A cache too small for the concurrent requests: blocks are evicted and sequences preempted
// (their re-prefill finds their own published blocks when they are still there).
TEST(PrefixCacheE2E, UnderMemoryPressureEvictionAndPreemptionKeepTheTokens) {
  const fs::path target = spec_test::target_fixture();
  for (const std::string proposer : {"", "draft_model"}) {
    const config::Overrides o = {{"kv_cache.memory_mib", "1"}, {"scheduler.max_num_batched_tokens", "64"}};
    config::EngineConfig cfg = proposer.empty() ? config::for_model_dir(target.string(), o)
                                                : spec_test::spec_config(target, proposer, "rejection", 3, o);
    const Conversation on = converse(with_caching(cfg, true), 30, 60);
    const Conversation off = converse(with_caching(cfg, false), 30, 60);
    expect_same_tokens(on, off, proposer);
    EXPECT_GT(on.stats.num_preemptions, 0u) << proposer << ": the case is meant to preempt";
    EXPECT_GT(on.stats.prefix_cache_hits, 0u) << proposer;
  }
}

// MTP needs the target's hidden states of every prompt position: caching stays off for it, and
// its output is what it is without caching.
TEST(PrefixCacheE2E, ProposersThatNeedTheTargetsHiddenStatesRunWithoutIt) {
  const fs::path target = spec_test::target_fixture(/*with_mtp=*/true);
  const config::EngineConfig cfg = spec_test::spec_config(target, "mtp", "rejection", 2);
  const Conversation on = converse(with_caching(cfg, true), 3);
  const Conversation off = converse(with_caching(cfg, false), 3);
  EXPECT_FALSE(on.prefix_caching);
  expect_same_tokens(on, off, "mtp");
  EXPECT_EQ(on.stats.prefix_cache_queries, 0u);
}

}  // namespace
}  // namespace specd
