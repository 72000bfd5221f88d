// Engine::Impl: what an Engine owns, shared by engine.cpp (loading, requests, scoring prompts)
// and step.cpp (the step). Members are declared in dependency order: each is destroyed before
// what it refers to (the model worker first, then the scorer and scheduler before the
// speculator's plugins and model host, the output processor before the tokenizer).
//
// Who touches what (docs/scheduling.md "Ownership"): `execute` (the model side of a step) runs
// on the model worker with async scheduling; it uses the batch, the sequences of its rows, the
// KV caches, the speculator, the scorer and `exec`. Everything else is the engine thread's, and
// the engine thread touches the model side only while no step is in flight.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.hpp"
#include "dist/tensor_parallel.hpp"
#include "engine/model_worker.hpp"
#include "engine/request_validator.hpp"
#include "kv/kv_cache.hpp"
#include "model/checkpoint.hpp"
#include "model/llama.hpp"
#include "output/choices.hpp"
#include "output/output_processor.hpp"
#include "sched/scheduler.hpp"
#include "sched/step_batch.hpp"
#include "specd/engine.hpp"
#include "specd/log.hpp"
#include "speculative/ab_log.hpp"
#include "speculative/scorer.hpp"
#include "speculative/speculator.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd {

using SteadyClock = std::chrono::steady_clock;

// What the output processor needs of one row of an executed step, copied out of the StepBatch
// when the step is collected (the batch, its sequences and the speculator's buffers then go back
// to the scheduler and the next step).
struct StepResult {
  sched::SeqId id = 0;
  uint32_t first = 0;  // the tokens appended this step: StepOutbox::tokens[first, first + count)
  uint32_t count = 0;
  FinishReason finish = FinishReason::kNone;  // the scheduler's token-level verdict
  bool committed = false;                     // false: the row failed before its tokens were appended
  bool speculated = false;                    // proposed this step (k > 0)
  output::SpecStep spec;
  int64_t logits_at = -1;  // logprobs: the tokens' raw target logits start at StepOutbox::logits[logits_at]
  std::string error;  // the row failed (before commit, or in the proposer's on_accept after it)
  // A/B (verified rows): Σ log p of the tokens the serving verifier emitted, and the shadow
  // arms' outcomes StepOutbox::shadows[first_shadow, first_shadow + num_shadows) (one per arm).
  float emitted_logprob = 0;
  uint32_t first_shadow = 0;
  uint32_t num_shadows = 0;
};

// The model side's timing of one step (written by execute, read when the step is collected).
struct ExecTimes {
  double propose = 0, forward = 0, verify = 0, commit = 0, total = 0;
  bool verified = false;  // some row was verified: a speculative step
};

// Results of the last collected step, waiting for the output processor.
struct StepOutbox {
  std::vector<StepResult> rows;
  std::vector<int32_t> tokens;
  // [tokens, vocab] logits rows of the rows whose requests ask for logprobs (copied: the scorer's
  // buffer belongs to the next step by the time the outputs are processed).
  std::vector<float> logits;
  std::vector<sched::ShadowOutcome> shadows;
  double row_s = 0;  // a row's share of the step's propose + forward + verify seconds (A/B log)
  ExecTimes times;
  bool pending = false;  // holds a step that has not been processed
};

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
  std::optional<RequestValidator> validator;  // once the tokenizer and the context length are known
  // speculative.ab_log: one line per finished request of an A/B arm (null when off).
  std::unique_ptr<speculative::AbRecorder> ab;
  std::vector<int32_t> eos_ids;
  int64_t max_model_len = 0;
  std::vector<RequestOutput> pending;  // failures and aborts reported by the next step
  output::Choices choices;  // requests, their sequences, and choices waiting for choice 0's prompt
  uint64_t num_preemptions = 0;
  spec::SpecMetrics spec_metrics;      // engine-wide, recorded with the outputs
  std::vector<spec::ArmMetrics> arm_metrics;  // per A/B arm (speculative/arm_verifiers.hpp), likewise
  log::Logger& log = log::get("engine");

  // Requests added since the last prepare (they enter the scheduler there), and requests that
  // finished or were aborted while a step that may hold them was in flight (removed when it is
  // collected; its rows for them are discarded).
  std::vector<std::unique_ptr<sched::Sequence>> arrivals;
  std::vector<sched::SeqId> discard;

  // The step: prepared and collected on the engine thread, executed by `execute`.
  sched::StepBatch batch;
  std::vector<int32_t> sampled;  // [rows] the token a row without drafts sampled
  std::vector<float> probs;      // [vocab] sampling scratch
  ExecTimes exec;
  StepOutbox outbox;

  // Step timing (StepStats) and the view of the KV cache other threads' callers get while a step
  // is in flight.
  StepStats stats;
  std::optional<SteadyClock::time_point> busy_since;  // the engine has had work since then
  SteadyClock::time_point launched;                   // the step in flight was handed over
  int32_t kv_free_at_launch = 0;

  std::unique_ptr<ModelWorker> worker;  // async_scheduling; last: stopped before the rest goes

  explicit Impl(const config::EngineConfig& c);
  // The target's weights (this rank's shard), loaded on every rank under tensor parallelism.
  std::shared_ptr<const model::LlamaWeights> load_target();
  void size_kv_cache(const kv::KvCacheShape& shape);
  void describe();

  // The stages of step() (step.cpp). Engine thread: finish_flight (collect), admit, prepare,
  // launch, process. Model side: execute.
  double finish_flight(SteadyClock::time_point now);
  void collect();
  void admit();
  void prepare(std::vector<RequestOutput>& outputs);
  void launch();
  void execute(sched::StepBatch& b);
  void process(std::vector<RequestOutput>& outputs);
  void sample(sched::StepBatch& b);
  void commit(sched::StepRow& row);
  // A request ended: out of the scheduler and the proposer now, or (a step in flight may hold
  // it) once that step is collected.
  void retire(sched::SeqId id);
  void fail(sched::SeqId id, const std::string& message, std::vector<RequestOutput>& outputs);
  void remove(sched::SeqId id);
  bool in_flight() const { return worker && worker->busy(); }

  // n > 1 (engine.cpp): the other choices start from choice 0's prefilled prompt; outputs say
  // whether the whole request ended; a failed or aborted choice 0 takes the waiting ones along.
  void fork_choices(const sched::Sequence& first);
  void report(RequestOutput out, std::vector<RequestOutput>& outputs);
  void end_waiting_choices(RequestId request, const std::string& error, std::vector<RequestOutput>& outputs);
  // The sequences of a valid request: choice 0 and the choices waiting for its prompt.
  std::unique_ptr<sched::Sequence> first_choice(RequestId id, const Request& request, std::vector<int32_t> prompt);
  std::vector<std::unique_ptr<sched::Sequence>> other_choices(const sched::Sequence& first, const Request& request);
  // Request setup for speculative decoding: the A/B arm and k. Returns "" or why it fails.
  std::string assign_arm(RequestId id, const Request& request, sched::Sequence& seq);
};

}  // namespace specd
