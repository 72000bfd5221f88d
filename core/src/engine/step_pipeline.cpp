#include "engine/step_pipeline.hpp"

#include "sampling/sampling.hpp"
#include "specd/error.hpp"

namespace specd {
namespace {

double seconds(SteadyClock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

StepPipeline::StepPipeline(sched::Scheduler& scheduler, speculative::Speculator& spec, speculative::Scorer& scorer,
                           int64_t vocab_size, bool async, sampling::Sampler sampler)
    : scheduler_(scheduler), spec_(spec), scorer_(scorer), vocab_(vocab_size), sampler_(sampler) {
  probs_.resize(static_cast<size_t>(vocab_size));
  if (async) worker_ = std::make_unique<ModelWorker>([this](sched::StepBatch& b) { execute(b); });
}

void StepPipeline::launch() {
  if (worker_) {
    launched_ = SteadyClock::now();
    worker_->start(batch_);
  } else {
    execute(batch_);
  }
}

void StepPipeline::execute(sched::StepBatch& b) {
  const SteadyClock::time_point t0 = SteadyClock::now();
  spec_.propose(b);
  const SteadyClock::time_point t1 = SteadyClock::now();
  scorer_.score(b, spec_.wants_hidden());
  const SteadyClock::time_point t2 = SteadyClock::now();
  sample(b);
  exec_.verified = spec_.verify(b);
  const SteadyClock::time_point t3 = SteadyClock::now();
  for (sched::StepRow& row : b.rows) commit(row);
  const SteadyClock::time_point t4 = SteadyClock::now();
  exec_.propose = seconds(t1 - t0);
  exec_.forward = seconds(t2 - t1);
  exec_.verify = seconds(t3 - t2);
  exec_.commit = seconds(t4 - t3);
  exec_.total = seconds(t4 - t0);
}

// Rows that end their known tokens without drafts draw the next token from their one logit row.
void StepPipeline::sample(sched::StepBatch& b) {
  sampled_.resize(b.rows.size());
  for (size_t i = 0; i < b.rows.size(); ++i) {
    sched::StepRow& row = b.rows[i];
    if (!row.sample || row.failed() || row.drafted() || row.seq->params.max_tokens == 0) continue;
    const sched::Sequence& seq = *row.seq;
    try {
      sampled_[i] = sampling::sample_token({row.logits, static_cast<size_t>(vocab_)}, seq.params, seq.history(),
                                           seq.seed, seq.step(), probs_, sampler_);
      row.emitted = {&sampled_[i], 1};
    } catch (const Error& e) {
      row.fail(std::string("sampling failed: ") + e.what());
    }
  }
}

// Appends the row's tokens and rolls its KV back; a sequence that goes on tells the proposer
// what was accepted. A failed on_accept fails the row after its tokens were appended.
void StepPipeline::commit(sched::StepRow& row) {
  if (row.failed()) return;
  scheduler_.commit(row);
  if (row.sample && row.finish == FinishReason::kNone) spec_.accept(row);
}

}  // namespace specd
