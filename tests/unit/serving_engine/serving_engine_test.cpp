// ServingEngine on the tiny fixture: concurrent submits from several threads produce what
// each request produces alone, cancel ends a running or queued request with kAbort, a full
// queue refuses, stop() drains or aborts.
#include "specd/serving_engine.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config/config.hpp"
#include "fixture.hpp"
#include "specd/engine.hpp"

namespace specd {
namespace {

using namespace std::chrono_literals;

std::filesystem::path tiny_dir() {
  fixture::Options opts;
  opts.preset = "tiny";
  static const std::filesystem::path dir =
      fixture::write(opts, std::filesystem::path(SPECD_TEST_WORK_DIR) / "serving_engine" / "tiny");
  return dir;
}

std::unique_ptr<Engine> make_engine(int max_num_seqs = 8) {
  config::EngineConfig cfg =
      config::for_model_dir(tiny_dir().string(), {{"kv_cache.memory_mib", "16"},
                                                  {"model.num_threads", "1"},
                                                  {"scheduler.max_num_seqs", std::to_string(max_num_seqs)}});
  return std::make_unique<Engine>(cfg);
}

Request greedy(const std::string& prompt, int32_t max_tokens) {
  Request r;
  r.prompt = prompt;
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  return r;
}

struct Collected {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason reason = FinishReason::kNone;
  int finished_outputs = 0;
};

// Reads a stream to its end (bounded: fails the test after 60 s).
Collected collect(RequestStream& stream) {
  Collected c;
  const auto deadline = Clock::now() + 60s;
  while (c.finished_outputs == 0) {
    auto out = stream.next(deadline);
    if (!out) {
      ADD_FAILURE() << "stream did not finish within 60 s";
      return c;
    }
    c.tokens.insert(c.tokens.end(), out->new_token_ids.begin(), out->new_token_ids.end());
    c.text += out->text_delta;
    if (out->finished) {
      ++c.finished_outputs;
      c.reason = out->finish_reason;
    }
  }
  EXPECT_TRUE(stream.drain().empty()) << "outputs after the finished one";
  return c;
}

ServingEngineOptions options(size_t max_queue, size_t max_running) {
  ServingEngineOptions o;
  o.max_queue = max_queue;
  o.max_running = max_running;
  return o;
}

std::string prompt_for(int i) {
  return "Request number " + std::to_string(i) + " says hello to";
}

TEST(ServingEngine, ConcurrentSubmitsMatchRequestsRunAlone) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 4;
  constexpr int kTokens = 12;
  std::vector<Collected> alone(kThreads * kPerThread);
  {
    ServingEngine engine(make_engine(), {});
    for (int i = 0; i < kThreads * kPerThread; ++i) {
      Submission s = engine.submit(greedy(prompt_for(i), kTokens));
      ASSERT_EQ(s.status, SubmitStatus::kOk);
      alone[static_cast<size_t>(i)] = collect(*s.stream);
    }
    engine.stop(10s);
  }
  std::vector<Collected> together(kThreads * kPerThread);
  std::atomic<size_t> traces{0};
  ServingEngineOptions opts;
  opts.on_finished = [&](const RequestTrace& t) {
    EXPECT_EQ(t.finish_reason, FinishReason::kLength);
    EXPECT_TRUE(t.first_token.has_value());
    ++traces;
  };
  ServingEngine engine(make_engine(), opts);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<Submission> subs;
      for (int k = 0; k < kPerThread; ++k)
        subs.push_back(engine.submit(greedy(prompt_for(t * kPerThread + k), kTokens)));
      for (int k = 0; k < kPerThread; ++k) {
        ASSERT_EQ(subs[static_cast<size_t>(k)].status, SubmitStatus::kOk);
        together[static_cast<size_t>(t * kPerThread + k)] = collect(*subs[static_cast<size_t>(k)].stream);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < together.size(); ++i) {
    EXPECT_EQ(together[i].finished_outputs, 1) << i;
    EXPECT_EQ(together[i].reason, FinishReason::kLength) << i;
    EXPECT_EQ(together[i].tokens.size(), static_cast<size_t>(kTokens)) << i;
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(together[i].text, alone[i].text) << "request " << i;
  }
  engine.stop(10s);
  EXPECT_EQ(traces.load(), together.size());
}

TEST(ServingEngine, CancelMidGenerationAborts) {
  ServingEngine engine(make_engine(), {});
  Submission s = engine.submit(greedy("Once upon a time", 1500));
  ASSERT_EQ(s.status, SubmitStatus::kOk);
  int seen = 0;
  while (seen < 3) {
    auto out = s.stream->next(Clock::now() + 30s);
    ASSERT_TRUE(out.has_value());
    ASSERT_FALSE(out->finished);
    EXPECT_EQ(out->id, s.id);
    seen += static_cast<int>(out->new_token_ids.size());
  }
  engine.cancel(s.id);
  Collected rest = collect(*s.stream);
  EXPECT_EQ(rest.reason, FinishReason::kAbort);
  EXPECT_LT(seen + static_cast<int>(rest.tokens.size()), 1500);
  const auto deadline = Clock::now() + 10s;
  while (engine.stats().num_running != 0 && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(engine.stats().num_running, 0u);
  // The engine keeps serving.
  Submission next = engine.submit(greedy("Another request", 4));
  ASSERT_EQ(next.status, SubmitStatus::kOk);
  EXPECT_EQ(collect(*next.stream).reason, FinishReason::kLength);
  engine.cancel(9999);  // unknown ids are ignored
}

TEST(ServingEngine, FullQueueRefusesAndCancelledQueuedRequestAborts) {
  ServingEngine engine(make_engine(1), options(2, 1));
  Submission running = engine.submit(greedy("The long one", 1500));
  ASSERT_EQ(running.status, SubmitStatus::kOk);
  ASSERT_TRUE(running.stream->next(Clock::now() + 30s).has_value());  // it is in the engine now
  Submission q1 = engine.submit(greedy("queued one", 4));
  Submission q2 = engine.submit(greedy("queued two", 4));
  Submission refused = engine.submit(greedy("no room", 4));
  EXPECT_EQ(q1.status, SubmitStatus::kOk);
  EXPECT_EQ(q2.status, SubmitStatus::kOk);
  EXPECT_EQ(refused.status, SubmitStatus::kQueueFull);
  EXPECT_EQ(refused.stream, nullptr);
  EXPECT_EQ(engine.stats().num_waiting, 2u);

  engine.cancel(q1.id);
  Collected c1 = collect(*q1.stream);
  EXPECT_EQ(c1.reason, FinishReason::kAbort);
  EXPECT_TRUE(c1.tokens.empty());
  engine.cancel(running.id);
  EXPECT_EQ(collect(*running.stream).reason, FinishReason::kAbort);
  Collected c2 = collect(*q2.stream);
  EXPECT_EQ(c2.reason, FinishReason::kLength);
  EXPECT_EQ(c2.tokens.size(), 4u);
  engine.stop(10s);
}

TEST(ServingEngine, StopDrainsInFlightThenRefuses) {
  ServingEngine engine(make_engine(2), options(16, 2));
  std::vector<Submission> subs;
  for (int i = 0; i < 5; ++i) subs.push_back(engine.submit(greedy(prompt_for(i), 6)));
  engine.stop(60s);
  for (auto& s : subs) {
    ASSERT_EQ(s.status, SubmitStatus::kOk);
    ASSERT_TRUE(s.stream->finished());
    Collected c = collect(*s.stream);
    EXPECT_EQ(c.reason, FinishReason::kLength);
    EXPECT_EQ(c.tokens.size(), 6u);
  }
  EXPECT_EQ(engine.submit(greedy("late", 4)).status, SubmitStatus::kStopped);
  EXPECT_FALSE(engine.stats().accepting);
}

TEST(ServingEngine, StopAfterTimeoutAbortsTheRest) {
  ServingEngine engine(make_engine(1), options(16, 1));
  Submission running = engine.submit(greedy("long", 1800));
  Submission queued = engine.submit(greedy("queued", 1800));
  ASSERT_TRUE(running.stream->next(Clock::now() + 30s).has_value());
  const auto t0 = Clock::now();
  engine.stop(200ms);
  EXPECT_LT(Clock::now() - t0, 20s);
  EXPECT_EQ(collect(*running.stream).reason, FinishReason::kAbort);
  EXPECT_EQ(collect(*queued.stream).reason, FinishReason::kAbort);
}

}  // namespace
}  // namespace specd
