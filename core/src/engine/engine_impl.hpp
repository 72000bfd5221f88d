// Engine::Impl: what an Engine owns, shared by engine.cpp (loading, requests, scoring prompts)
// and step.cpp (the step). Members are declared in dependency order: each is destroyed before
// what it refers to (the scorer and scheduler before the speculator's plugins and model host,
// the output processor before the tokenizer).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "dist/tensor_parallel.hpp"
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
  // Tensor parallelism (null at TP 1): drives the other ranks; outlives every model.
  std::unique_ptr<dist::Leader> leader;
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
  uint64_t num_preemptions = 0;
  log::Logger& log = log::get("engine");
  // Per-step buffers, reused so that a decode step does not allocate.
  sched::StepBatch batch;
  std::vector<int32_t> sampled;  // [rows] the token a row without drafts sampled
  std::vector<float> probs;      // [vocab] sampling scratch

  explicit Impl(const config::EngineConfig& c);
  // The target's weights (this rank's shard), loaded on every rank under tensor parallelism.
  std::shared_ptr<const model::LlamaWeights> load_target();
  void size_kv_cache(const kv::KvCacheShape& shape);
  void describe();

  // The stages of step() that live in the engine (step.cpp).
  void retire_unscheduled(std::vector<RequestOutput>& outputs);
  void sample();
  void commit(sched::StepRow& row, std::vector<RequestOutput>& outputs);
  void finish(RequestId id);
};

}  // namespace specd
