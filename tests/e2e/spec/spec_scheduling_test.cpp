// Async and multi-step scheduling (docs/scheduling.md) change when the engine's work happens,
// never what it computes. For every proposer × {greedy, rejection sampling at temperature 1 with
// fixed seeds} × batch {1, 8}: sync, async, multi-step 4 and async + multi-step 4 emit the same
// tokens, the same finish reasons and the same drafted / accepted counts (engine-wide per
// position, and per request), and under greedy the target alone emits the same tokens. The same
// holds under forced preemption and with aborts mid-run; stop strings cut the output at the
// same place; every KV block is free at the end. With n = 4 and plain decoding, tokens stream
// one per step, a stop token in the first sub-step ends the stream, and a request that arrives
// during a multi-step gets its first token within n steps (n + 1 with async).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "spec_test_util.hpp"

namespace fs = std::filesystem;
using specd::Engine;
using specd::FinishReason;
using specd::Request;
using specd::RequestId;
using specd::RequestOutput;
using specd::spec_test::add_request;
using specd::spec_test::greedy_request;
using specd::spec_test::kModes;
using specd::spec_test::Mode;
using specd::spec_test::mode_name;
using specd::spec_test::scheduling;

namespace {

// What a client sees of one request, plus the engine's counters.
struct Stream {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason finish = FinishReason::kNone;
  std::string error;
  int32_t drafted = 0, accepted = 0, spec_steps = 0;
  int events = 0;  // outputs received, the final one included
};

struct Outcome {
  std::vector<Stream> streams;
  specd::spec::SpecMetrics metrics;
  uint64_t preemptions = 0;
  int32_t kv_free = 0, kv_total = 0;  // after the last step
  // step() calls made after every request had its final output: work on requests nobody waits
  // for (async scheduling needs one to collect the step in flight).
  int idle_steps = 0;
};

// Runs the requests to completion; `abort_at` (step index → request index) aborts mid-run.
Outcome run_requests(const specd::config::EngineConfig& cfg, const std::vector<Request>& requests,
                     const std::map<int, size_t>& abort_at = {}) {
  Engine engine(cfg);
  std::vector<RequestId> ids;
  std::map<RequestId, size_t> index;
  for (size_t i = 0; i < requests.size(); ++i) {
    ids.push_back(add_request(engine, requests[i]));
    index[ids.back()] = i;
  }
  Outcome r;
  r.streams.resize(requests.size());
  size_t finished = 0;
  for (int step = 0; engine.has_unfinished(); ++step) {
    if (finished == requests.size()) ++r.idle_steps;
    if (auto a = abort_at.find(step); a != abort_at.end()) engine.abort(ids[a->second]);
    for (const RequestOutput& o : engine.step()) {
      Stream& s = r.streams[index.at(o.id)];
      EXPECT_EQ(s.finish, FinishReason::kNone) << "an output after the request finished";
      ++s.events;
      s.tokens.insert(s.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      s.text += o.text_delta;
      s.drafted = o.num_draft_tokens;
      s.accepted = o.num_accepted_tokens;
      s.spec_steps = o.num_spec_steps;
      if (o.finished) {
        s.finish = o.finish_reason;
        s.error = o.error;
        ++finished;
      }
    }
  }
  r.metrics = engine.spec_metrics();
  r.preemptions = engine.stats().num_preemptions;
  r.kv_free = engine.stats().kv_blocks_free;
  r.kv_total = engine.stats().kv_blocks_total;
  return r;
}

void expect_same(const Outcome& a, const Outcome& b, const std::string& what, bool counts = true) {
  ASSERT_EQ(a.streams.size(), b.streams.size());
  for (size_t i = 0; i < a.streams.size(); ++i) {
    const Stream &x = a.streams[i], &y = b.streams[i];
    EXPECT_EQ(y.tokens, x.tokens) << what << ", request " << i;
    EXPECT_EQ(y.text, x.text) << what << ", request " << i;
    EXPECT_EQ(y.finish, x.finish) << what << ", request " << i << ": " << y.error;
    if (!counts) continue;
    EXPECT_EQ(y.drafted, x.drafted) << what << ", request " << i;
    EXPECT_EQ(y.accepted, x.accepted) << what << ", request " << i;
    EXPECT_EQ(y.spec_steps, x.spec_steps) << what << ", request " << i;
  }
  if (!counts) return;
  EXPECT_EQ(b.metrics.draft_tokens, a.metrics.draft_tokens) << what;
  EXPECT_EQ(b.metrics.accepted_tokens, a.metrics.accepted_tokens) << what;
  EXPECT_EQ(b.metrics.num_drafts, a.metrics.num_drafts) << what;
  EXPECT_EQ(b.metrics.emitted_tokens, a.metrics.emitted_tokens) << what;
  EXPECT_EQ(b.metrics.drafted_at, a.metrics.drafted_at) << what;
  EXPECT_EQ(b.metrics.accepted_at, a.metrics.accepted_at) << what;
}

struct Case {
  std::string proposer;  // ngram | draft_model | mtp
  std::string verifier;  // greedy (temperature 0) | rejection (temperature 1, seeded)
  int batch;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return info.param.proposer + "_" + info.param.verifier + "_b" + std::to_string(info.param.batch);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const char* p : {"ngram", "draft_model", "mtp"})
    for (const char* v : {"greedy", "rejection"})
      for (int b : {1, 8}) cases.push_back({p, v, b});
  return cases;
}

class SchedulingParity : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    const bool ngram = c.proposer == "ngram";
    target_ = specd::spec_test::target_fixture(c.proposer == "mtp", ngram ? 0.004 : 0.02);
    requests_ = specd::spec_test::mixed_requests(c.batch, 3000 + c.batch);
    if (ngram) specd::spec_test::plant_continuations(requests_, target_, 4000 + c.batch);
    for (size_t i = 0; i < requests_.size(); ++i) {
      Request& r = requests_[i];
      if (c.verifier == "rejection") {
        r.sampling.temperature = 1.0f;
        r.sampling.seed = 500 + i;
      }
      if (i % 8 == 5) r.speculative.num_speculative_tokens = 1;  // per-request overrides
      if (i % 8 == 6) r.speculative.enabled = false;
    }
  }
  specd::config::EngineConfig config(Mode m, specd::config::Overrides extra = {}) const {
    const Case& c = GetParam();
    return specd::spec_test::spec_config(target_, c.proposer, c.verifier, 3, scheduling(m, std::move(extra)));
  }
  fs::path target_;
  std::vector<Request> requests_;
};

TEST_P(SchedulingParity, SameTokensAndAcceptanceInEveryMode) {
  const Outcome base = run_requests(config(kModes[0]), requests_);
  const Case& c = GetParam();
  // Sampled text at temperature 1 rarely repeats itself: one request gives prompt lookup nothing.
  if (!(c.proposer == "ngram" && c.verifier == "rejection" && c.batch == 1)) {
    EXPECT_GT(base.metrics.draft_tokens, 0u) << "speculation must happen";
  }
  if (GetParam().verifier == "greedy") {
    Outcome plain = run_requests(specd::config::for_model_dir(target_.string()), requests_);
    expect_same(plain, base, "target alone vs speculative", /*counts=*/false);
  }
  for (const Mode m : kModes) {
    const Outcome r = run_requests(config(m), requests_);
    expect_same(base, r, mode_name(m));
    EXPECT_EQ(r.kv_free, r.kv_total) << mode_name(m) << ": KV blocks leaked";
  }
}

TEST_P(SchedulingParity, SameUnderPreemption) {
  if (GetParam().batch == 1) GTEST_SKIP() << "preemption needs more than one sequence";
  // 1 MiB holds 2048 tokens of the tiny model (fewer with a draft's cache): eight 300-token
  // prompts and their output do not fit, so sequences are preempted and re-prefilled.
  for (Request& r : requests_) {
    const std::vector<int32_t> p = r.prompt_ids;
    while (r.prompt_ids.size() < 300) r.prompt_ids.insert(r.prompt_ids.end(), p.begin() + 1, p.end());
    r.prompt_ids.resize(300);
    r.sampling.max_tokens = 80;
  }
  const specd::config::Overrides tight = {{"kv_cache.memory_mib", "1"}};
  // Async scheduling makes the same scheduling decisions, so under the same KV pressure it
  // matches sync exactly. A multi-step's up-front reservation changes what else fits (how many
  // drafts a tight step can afford), so multi-step runs are compared with each other, and under
  // greedy decoding every run emits the target's tokens.
  const Outcome sync1 = run_requests(config(kModes[0], tight), requests_);
  const Outcome sync4 = run_requests(config(kModes[2], tight), requests_);
  const Outcome roomy = run_requests(config(kModes[0]), requests_);
  const bool greedy = GetParam().verifier == "greedy";
  for (const Mode m : kModes) {
    const Outcome r = run_requests(config(m, tight), requests_);
    EXPECT_GT(r.preemptions, 0u) << mode_name(m) << ": the KV budget must force preemption";
    expect_same(m.steps == 1 ? sync1 : sync4, r, mode_name(m) + " under preemption");
    if (greedy) expect_same(roomy, r, mode_name(m) + " under preemption vs no pressure", /*counts=*/false);
    EXPECT_EQ(r.kv_free, r.kv_total) << mode_name(m);
  }
}

TEST_P(SchedulingParity, AbortsMidRunLeaveTheOthersUnchanged) {
  const Outcome full = run_requests(config(kModes[0]), requests_);
  // Request 0 is aborted before the third step() call; with a batch, request 1 before the second
  // (with async scheduling its first step is then in flight).
  std::map<int, size_t> aborts = {{2, 0}};
  if (requests_.size() > 1) aborts[1] = 1;
  for (const Mode m : kModes) {
    const Outcome r = run_requests(config(m), requests_, aborts);
    int aborted = 0;
    for (size_t i = 0; i < r.streams.size(); ++i) {
      const Stream& s = r.streams[i];
      const std::vector<int32_t>& want = full.streams[i].tokens;
      const std::string what = mode_name(m) + ", request " + std::to_string(i);
      if (s.finish == FinishReason::kAbort) {
        ++aborted;
        EXPECT_LT(i, aborts.size()) << what << ": only the aborted requests end so";
        ASSERT_LE(s.tokens.size(), want.size()) << what;
        EXPECT_EQ(s.tokens, std::vector<int32_t>(want.begin(), want.begin() + static_cast<long>(s.tokens.size())))
            << what << ": an aborted stream is a prefix of the full one";
      } else {  // not aborted, or finished before its abort
        EXPECT_EQ(s.tokens, want) << what;
        EXPECT_EQ(s.finish, full.streams[i].finish) << what;
      }
    }
    EXPECT_GT(aborted, 0) << mode_name(m) << ": no abort happened mid-run";
    EXPECT_LE(r.idle_steps, 1) << mode_name(m) << ": an aborted sequence kept running";
    EXPECT_EQ(r.kv_free, r.kv_total) << mode_name(m) << ": KV blocks leaked";
  }
}

TEST_P(SchedulingParity, StopStringsCutTheOutputAtTheSamePlace) {
  const Outcome full = run_requests(config(kModes[0]), requests_);
  // Each request stops at a string taken from the middle of its own text.
  std::vector<Request> requests = requests_;
  int armed = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string& text = full.streams[i].text;
    if (text.size() < 8) continue;
    requests[i].sampling.stop = {text.substr(text.size() / 2, 3)};
    ++armed;
  }
  ASSERT_GT(armed, 0) << "the fixture generated too little text";
  requests_ = requests;
  const Outcome base = run_requests(config(kModes[0]), requests_);
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].sampling.stop.empty()) continue;
    EXPECT_EQ(base.streams[i].finish, FinishReason::kStop) << i;
    EXPECT_LT(base.streams[i].text.size(), full.streams[i].text.size()) << i;
  }
  for (const Mode m : kModes) {
    const Outcome r = run_requests(config(m), requests_);
    expect_same(base, r, mode_name(m) + " with stop strings");
    EXPECT_EQ(r.kv_free, r.kv_total) << mode_name(m) << ": the tokens run past a stop string were not rolled back";
    EXPECT_LE(r.idle_steps, 1) << mode_name(m) << ": a sequence stopped by a stop string kept running";
  }
}

INSTANTIATE_TEST_SUITE_P(AllProposers, SchedulingParity, testing::ValuesIn(all_cases()), case_name);

// ---- streaming with multi-step, plain decoding --------------------------------------------------

TEST(MultiStepStreaming, OneEventPerStepNotBursts) {
  const fs::path target = specd::spec_test::target_fixture();
  for (const Mode m : {Mode{false, 4}, Mode{true, 4}}) {
    Engine engine(specd::config::for_model_dir(target.string(), scheduling(m)));
    const RequestId id = add_request(engine, greedy_request({1, 450, 4996, 17354, 1701}, 13));
    int steps = 0, events = 0;
    size_t tokens = 0;
    while (engine.has_unfinished()) {
      ++steps;
      for (const RequestOutput& o : engine.step()) {
        ASSERT_EQ(o.id, id);
        ++events;
        EXPECT_EQ(o.new_token_ids.size(), 1u) << mode_name(m) << ", step " << steps << ": one token per step";
        tokens += o.new_token_ids.size();
      }
    }
    EXPECT_EQ(tokens, 13u) << mode_name(m);
    EXPECT_EQ(events, 13) << mode_name(m);
    EXPECT_EQ(steps, m.async ? 14 : 13) << mode_name(m) << ": outputs trail by one step with async";
  }
}

TEST(MultiStepStreaming, StopTokenInTheFirstSubStepEndsTheStream) {
  const fs::path target = specd::spec_test::target_fixture();
  const std::vector<int32_t> prompt = {1, 450, 4996, 17354, 1701};
  const Outcome plain = run_requests(specd::config::for_model_dir(target.string()), {greedy_request(prompt, 12)});
  const std::vector<int32_t>& full = plain.streams[0].tokens;
  ASSERT_EQ(full.size(), 12u);
  ASSERT_NE(full[0], full[1]) << "pick a prompt whose first two tokens differ";
  // Token 1 comes from the prefill step; token 2 from the first sub-step of the first multi-step.
  Request r = greedy_request(prompt, 12);
  r.sampling.stop_token_ids = {full[1]};
  const Request other = greedy_request({1, 29871, 13, 450}, 20);  // keeps the multi-step going
  for (const Mode m : {Mode{false, 4}, Mode{true, 4}}) {
    // Free KV blocks after every step, with and without the request that stops.
    Engine alone(specd::config::for_model_dir(target.string(), scheduling(m)));
    add_request(alone, other);
    std::vector<int32_t> free_alone;
    while (alone.has_unfinished()) {
      alone.step();
      free_alone.push_back(alone.stats().kv_blocks_free);
    }
    Engine engine(specd::config::for_model_dir(target.string(), scheduling(m)));
    const RequestId id = add_request(engine, r);
    add_request(engine, other);
    std::vector<int32_t> got;
    bool finished = false;
    for (size_t step = 0; engine.has_unfinished(); ++step) {
      const bool was_finished = finished;
      for (const RequestOutput& o : engine.step()) {
        if (o.id != id) continue;
        EXPECT_FALSE(finished) << mode_name(m) << ": an event after the stop";
        got.insert(got.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        finished = o.finished;
        if (finished) {
          EXPECT_EQ(o.finish_reason, FinishReason::kStop);
        }
      }
      if (was_finished && step < free_alone.size()) {
        EXPECT_EQ(engine.stats().kv_blocks_free, free_alone[step])
            << mode_name(m) << ", step " << step << ": the stopped request's KV blocks are not all free";
      }
    }
    EXPECT_EQ(got, std::vector<int32_t>(full.begin(), full.begin() + 2)) << mode_name(m) << ": nothing after the stop";
    EXPECT_EQ(engine.stats().kv_blocks_free, engine.stats().kv_blocks_total) << mode_name(m);
  }
}

// Bound (docs/scheduling.md): a request added while a multi-step of n sub-steps runs has its
// first token after at most n step() calls, n + 1 with async scheduling.
TEST(MultiStepStreaming, ArrivalDuringAMultiStepWaitsAtMostNSteps) {
  const fs::path target = specd::spec_test::target_fixture();
  for (const Mode m : {Mode{false, 4}, Mode{true, 4}}) {
    int worst = 0;
    for (int arrive_after = 1; arrive_after <= 6; ++arrive_after) {
      Engine engine(specd::config::for_model_dir(target.string(), scheduling(m)));
      add_request(engine, greedy_request({1, 29871, 13, 450}, 30));
      for (int i = 0; i < arrive_after; ++i) engine.step();
      const RequestId late = add_request(engine, greedy_request({1, 450, 4996}, 3));
      int calls = 0;
      bool got = false;
      while (!got && engine.has_unfinished()) {
        ++calls;
        for (const RequestOutput& o : engine.step()) got = got || (o.id == late && !o.new_token_ids.empty());
      }
      ASSERT_TRUE(got);
      EXPECT_LE(calls, m.steps + (m.async ? 1 : 0)) << mode_name(m) << ", arriving after step " << arrive_after;
      worst = std::max(worst, calls);
    }
    EXPECT_GT(worst, m.async ? 2 : 1) << mode_name(m) << ": some arrival must have waited for a multi-step";
  }
}

}  // namespace
