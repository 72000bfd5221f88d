// Engine::Impl: what an Engine owns, shared by engine.cpp (loading, requests, scoring prompts)
// and step.cpp (the step). Members are declared in dependency order: each is destroyed before
// what it refers to (the scorer and scheduler before the speculator's plugins and model host,
// the output processor before the tokenizer).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.hpp"
#include "kv/kv_cache.hpp"
#include "model/checkpoint.hpp"
#include "model/llama.hpp"
#include "output/output_processor.hpp"
#include "sched/scheduler.hpp"
#include "sched/step_batch.hpp"
#include "specd/engine.hpp"
#include "specd/log.hpp"
#include "speculative/scorer.hpp"
#include "speculative/speculator.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd {

struct Engine::Impl {
  config::EngineConfig cfg;
  EngineInfo info;
  std::shared_ptr<const model::Checkpoint> checkpoint;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::unique_ptr<model::LlamaModel> model;
  // Speculative decoding (null without a `speculative` section or with enabled: false).
  std::unique_ptr<speculative::Speculator> spec;
  std::unique_ptr<kv::KvCache> kv;
  std::unique_ptr<sched::Scheduler> scheduler;
  std::unique_ptr<speculative::Scorer> scorer;
  std::unique_ptr<output::OutputProcessor> output;
  std::vector<int32_t> eos_ids;
  int64_t max_model_len = 0;
  std::vector<RequestOutput> pending;  // failures and aborts reported by the next step
  // Requests with n > 1 choices: choice 0 runs under the request's id; the other choices wait
  // here (`forks`) until choice 0 has prefilled the prompt, then share its KV blocks under ids
  // from kFirstChoiceId on. `open` counts the choices not finished yet.
  struct Choices {
    int32_t open = 0;
    std::vector<std::unique_ptr<sched::Sequence>> forks;
    std::vector<RequestId> forked;  // sequence ids of choices 1.. in the scheduler
  };
  std::unordered_map<RequestId, Choices> choices;
  RequestId next_choice_id = 0;
  uint64_t num_preemptions = 0;
  log::Logger& log = log::get("engine");
  // Per-step buffers, reused so that a decode step does not allocate.
  sched::StepBatch batch;
  std::vector<int32_t> sampled;  // [rows] the token a row without drafts sampled
  std::vector<float> probs;      // [vocab] sampling scratch

  explicit Impl(const config::EngineConfig& c);
  void size_kv_cache(const kv::KvCacheShape& shape);
  void describe();

  // The stages of step() that live in the engine (step.cpp).
  void retire_unscheduled(std::vector<RequestOutput>& outputs);
  void sample();
  void commit(sched::StepRow& row, std::vector<RequestOutput>& outputs);
  void finish(RequestId id);

  // n > 1 (engine.cpp): the other choices start from choice 0's prefilled prompt; outputs say
  // whether the whole request ended; a failed or aborted choice 0 takes the waiting ones along.
  void fork_choices(const sched::Sequence& first);
  void report(RequestOutput out, std::vector<RequestOutput>& outputs);
  void end_waiting_choices(RequestId request, const std::string& error, std::vector<RequestOutput>& outputs);
};

}  // namespace specd
