// StepPipeline: the model side of an engine step and its hand-off to the engine thread
// (docs/architecture.md "One engine step", docs/scheduling.md).
//
// It owns the step's table (StepBatch), the model worker that executes it with
// scheduler.async_scheduling (ModelWorker: not to be confused with ServingEngine, the thread
// that drives a whole Engine for the server), and the outbox the engine thread fills when it
// collects an executed step. execute() is the model side, top to bottom:
//
//   Speculator::propose  → row.lookahead = k_i (dynamic), row.drafts
//   Scorer::score        → row.logits, row.hidden, row.chunk_logits
//   sample               → row.emitted of rows without drafts
//   Speculator::verify   → row.num_accepted, row.emitted, row.ab_row of drafted rows
//   per row: Scheduler::commit → Speculator::accept
//
// Ownership: between launch() and the end of wait() the model side (the batch, its rows'
// sequences, the KV caches, the speculator's step stages, the scorer) belongs to the worker;
// otherwise to the engine thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model_worker.hpp"
#include "output/output_processor.hpp"
#include "sched/scheduler.hpp"
#include "sched/step_batch.hpp"
#include "speculative/arm_record.hpp"
#include "speculative/scorer.hpp"
#include "speculative/speculator.hpp"

namespace specd {

using SteadyClock = std::chrono::steady_clock;

// The model side's timing of one step (written by execute, read when the step is collected).
struct ExecTimes {
  double propose = 0, forward = 0, verify = 0, commit = 0, total = 0;
  bool verified = false;  // some row was verified: a speculative step
};

// What the output processor needs of one row of an executed step, copied out of the StepBatch
// when the step is collected (the batch, its sequences and the speculator's buffers then go back
// to the scheduler and the next step).
struct StepResult {
  sched::SeqId id = 0;
  uint32_t first = 0;  // the tokens appended this step: StepOutbox::tokens[first, first + count)
  uint32_t count = 0;
  FinishReason finish = FinishReason::kNone;  // the scheduler's token-level verdict
  bool grammar_complete = false;              // finish kStop because the constraint's text is complete
  bool committed = false;                     // false: the row failed before its tokens were appended
  bool speculated = false;                    // proposed this step (k > 0)
  output::SpecStep spec;
  int64_t logits_at = -1;  // logprobs: the tokens' raw target logits start at StepOutbox::logits[logits_at]
  int32_t ab_row = -1;     // the row's index in StepOutbox::arms (verified rows)
  std::string error;       // the row failed (before commit, or in the proposer's on_accept after it)
};

// Results of the last collected step, waiting for the output processor.
struct StepOutbox {
  std::vector<StepResult> rows;
  std::vector<int32_t> tokens;
  // [tokens, vocab] logits rows of the rows whose requests ask for logprobs (copied: the scorer's
  // buffer belongs to the next step by the time the outputs are processed).
  std::vector<float> logits;
  speculative::ArmStepRecord arms;  // the step's A/B record (ab_row indexes it)

  void clear() {
    rows.clear();
    tokens.clear();
    logits.clear();
  }
};

class StepPipeline {
 public:
  // Every reference must outlive the pipeline. async: scheduler.async_scheduling. sampler: how
  // rows without drafts draw their token (model.sampler).
  StepPipeline(sched::Scheduler& scheduler, speculative::Speculator& spec, speculative::Scorer& scorer,
               int64_t vocab_size, bool async, sampling::Sampler sampler);

  sched::StepBatch& batch() { return batch_; }
  StepOutbox& outbox() { return outbox_; }
  // The last executed step's times (read once it is done).
  const ExecTimes& times() const { return exec_; }

  // Executes batch() in place, or hands it to the model worker.
  void launch();
  // A step was handed to the worker and not yet waited for.
  bool in_flight() const { return worker_ && worker_->busy(); }
  // Blocks until the step in flight is done (rethrowing what it threw); returns the seconds it
  // blocked. Requires in_flight().
  double wait() { return worker_->wait(); }
  SteadyClock::time_point launched_at() const { return launched_; }

 private:
  void execute(sched::StepBatch& b);
  void sample(sched::StepBatch& b);
  void commit(sched::StepRow& row);

  sched::Scheduler& scheduler_;
  speculative::Speculator& spec_;
  speculative::Scorer& scorer_;
  int64_t vocab_;
  sampling::Sampler sampler_;
  sched::StepBatch batch_;
  std::vector<int32_t> sampled_;  // [rows] the token a row without drafts sampled
  std::vector<float> probs_;      // [vocab] sampling scratch
  ExecTimes exec_;
  StepOutbox outbox_;
  SteadyClock::time_point launched_;
  std::unique_ptr<ModelWorker> worker_;  // async scheduling; last: stopped before the rest goes
};

}  // namespace specd
