// Engine::Impl: what an Engine owns, shared by engine.cpp (loading, requests, scoring prompts)
// and step.cpp (the engine thread's side of a step; the model side is StepPipeline's). Members
// are declared in dependency order: each is destroyed before what it refers to (the pipeline and
// its model worker first, then the scorer and scheduler before the speculator's plugins and
// model host, the output processor before the tokenizer).
//
// Who touches what (docs/scheduling.md "Ownership"): the pipeline's execute runs on the model
// worker with async scheduling; it uses the batch, the sequences of its rows, the KV caches, the
// speculator's step stages and the scorer. Everything else is the engine thread's, and the
// engine thread touches the model side only while no step is in flight.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.hpp"
#include "constrain/constraint.hpp"
#include "engine/request_validator.hpp"
#include "engine/step_pipeline.hpp"
#include "kv/kv_cache.hpp"
#include "model/checkpoint.hpp"
#include "model/llama.hpp"
#include "output/choices.hpp"
#include "output/output_processor.hpp"
#include "sched/scheduler.hpp"
#include "sched/step_batch.hpp"
#include "specd/engine.hpp"
#include "specd/log.hpp"
#include "speculative/scorer.hpp"
#include "speculative/speculator.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tp/model_factory.hpp"

namespace specd {

struct Engine::Impl {
  config::EngineConfig cfg;
  EngineInfo info;
  model::Placement placement;  // model.device: where the target (and the hosted models that can) and its KV cache live
  std::shared_ptr<const model::Checkpoint> checkpoint;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  // Where models are built and run: this process, or (tensor parallelism) every rank of the MPI
  // job, driven from here. Outlives every model.
  std::unique_ptr<tp::ModelFactory> models;
  std::unique_ptr<model::LlamaModel> model;
  // Speculative decoding; without a `speculative` section (or with enabled: false) a speculator
  // that proposes nothing.
  std::unique_ptr<speculative::Speculator> spec;
  std::unique_ptr<kv::KvCache> kv;
  std::unique_ptr<sched::Scheduler> scheduler;
  std::unique_ptr<speculative::Scorer> scorer;
  std::unique_ptr<output::OutputProcessor> output;
  std::optional<RequestValidator> validator;  // once the tokenizer and the context length are known
  // Structured output: built with the first constrained request (its vocabulary trie reads every
  // token's bytes once).
  std::unique_ptr<constrain::ConstraintCompiler> constraints;
  uint64_t structured_requests = 0;
  std::vector<int32_t> eos_ids;
  int64_t max_model_len = 0;
  std::vector<RequestOutput> pending;  // failures and aborts reported by the next step
  output::Choices choices;             // requests, their sequences, and choices waiting for choice 0's prompt
  uint64_t num_preemptions = 0;
  spec::SpecMetrics spec_metrics;  // engine-wide, recorded with the outputs
  log::Logger& log = log::get("engine");

  // Requests added since the last prepare (they enter the scheduler there), and requests that
  // finished or were aborted while a step that may hold them was in flight (removed when it is
  // collected; its rows for them are discarded).
  std::vector<std::unique_ptr<sched::Sequence>> arrivals;
  struct Discard {
    sched::SeqId id;
    bool finished;  // the proposer sees it finish (on_finish) when it is removed
  };
  std::vector<Discard> discard;

  std::vector<float> probs;  // [vocab] prompt scoring scratch

  // Step timing (StepStats) and the view of the KV cache other threads' callers get while a step
  // is in flight.
  StepStats stats;
  std::optional<SteadyClock::time_point> busy_since;  // the engine has had work since then
  int32_t kv_free_at_launch = 0;
  int32_t kv_cached_at_launch = 0;
  model::LlamaModel::MoeStats moe_at_launch;

  // The step: prepared and collected on the engine thread, executed by the pipeline (on its
  // model worker with async scheduling). Last: its worker stops before the rest goes.
  std::unique_ptr<StepPipeline> pipeline;

  explicit Impl(const config::EngineConfig& c);
  // The target's weights (this rank's shard), loaded on every rank under tensor parallelism.
  std::shared_ptr<const model::LlamaWeights> load_target();
  void size_kv_cache(const kv::KvCacheShape& shape);
  void describe();

  // The engine thread's stages of step() (step.cpp): finish_flight (collect), admit, prepare,
  // launch, process. The model side is the pipeline's.
  double finish_flight(SteadyClock::time_point now);
  void collect();
  void collect_row(sched::StepRow& row);
  void admit();
  void prepare(std::vector<RequestOutput>& outputs);
  void launch();
  void process(std::vector<RequestOutput>& outputs);
  void process_row(StepResult& r, std::vector<RequestOutput>& outputs);
  // A request ended: out of the scheduler and the proposer now, or (a step in flight may hold
  // it) once that step is collected.
  void retire(sched::SeqId id, bool finished = false);
  void fail(sched::SeqId id, const std::string& message, std::vector<RequestOutput>& outputs);
  // finished: it ended with a stop or the length limit (not a failure or an abort), so the
  // proposer is shown its text first (Speculator::finish).
  void remove(sched::SeqId id, bool finished = false);
  bool in_flight() const { return pipeline->in_flight(); }

  // n > 1 (engine.cpp): the other choices start from choice 0's prefilled prompt; outputs say
  // whether the whole request ended; a failed or aborted choice 0 takes the waiting ones along.
  void fork_choices(const sched::Sequence& first);
  void report(RequestOutput out, std::vector<RequestOutput>& outputs);
  void end_waiting_choices(RequestId request, const std::string& error, std::vector<RequestOutput>& outputs);
  // The sequences of a valid request: choice 0 and the choices waiting for its prompt.
  std::unique_ptr<sched::Sequence> first_choice(RequestId id, const Request& request, std::vector<int32_t> prompt);
  // The request's compiled structured-output constraint; "" or the message it fails with.
  std::string attach_constraint(const Request& request, sched::Sequence& seq);
  std::vector<std::unique_ptr<sched::Sequence>> other_choices(const sched::Sequence& first, const Request& request);
};

}  // namespace specd
