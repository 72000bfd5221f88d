// Engine::step: one engine step, top to bottom (docs/architecture.md "One engine step").
//
//   Scheduler::schedule   → StepBatch rows: prefill chunks and decodes, lookahead reserved
//   Speculator::propose   → row.drafts                      (rows that speculate)
//   Scorer::score         → row.logits, row.hidden          (one target forward)
//   Speculator::observe   → prefill chunks and plain decodes reach the proposer
//   Impl::sample          → row.emitted                     (rows without drafts)
//   Speculator::verify    → row.num_accepted, row.emitted   (rows with drafts)
//   per row: Scheduler::commit → OutputProcessor::process → Speculator::accept → finish
#include <chrono>

#include "engine/engine_impl.hpp"
#include "sampling/sampling.hpp"
#include "specd/error.hpp"

namespace specd {
namespace {

using Clock = std::chrono::steady_clock;

template <class Fn>
double timed(Fn&& fn) {
  const auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

std::vector<RequestOutput> Engine::step() {
  Impl& m = *impl_;
  std::vector<RequestOutput> outputs = std::move(m.pending);
  m.pending.clear();
  sched::StepBatch& batch = m.batch;
  m.scheduler->schedule(batch);
  m.retire_unscheduled(outputs);
  if (batch.rows.empty()) return outputs;

  const double propose_s = m.spec ? timed([&] { m.spec->propose(batch); }) : 0.0;
  const double score_s = timed([&] { m.scorer->score(batch, m.spec && m.spec->wants_hidden()); });
  if (m.spec) m.spec->observe(batch);
  m.sample();
  bool verified = false;
  const double verify_s = m.spec ? timed([&] { verified = m.spec->verify(batch); }) : 0.0;
  if (verified) m.spec->metrics().add_times(propose_s, score_s, verify_s);

  for (sched::StepRow& row : batch.rows) m.commit(row, outputs);
  return outputs;
}

// Sequences the scheduler failed (they can never fit) or preempted (their KV is gone; the
// proposer re-prefills with the target later).
void Engine::Impl::retire_unscheduled(std::vector<RequestOutput>& outputs) {
  num_preemptions += static_cast<uint64_t>(batch.num_preempted);
  for (auto& [id, message] : batch.failed) {
    if (spec) spec->release(id);
    report(output->fail(id, message), outputs);
    end_waiting_choices(id, message, outputs);
  }
  if (spec) {
    for (RequestId id : batch.preempted) spec->release(id);
  }
}

// Rows that end their known tokens without drafts draw the next token from their one logit row.
void Engine::Impl::sample() {
  sampled.resize(batch.rows.size());
  for (size_t i = 0; i < batch.rows.size(); ++i) {
    sched::StepRow& row = batch.rows[i];
    if (!row.sample || row.failed() || row.drafted() || row.seq->params.max_tokens == 0) continue;
    const sched::Sequence& seq = *row.seq;
    try {
      sampled[i] = sampling::sample_token({row.logits, static_cast<size_t>(info.vocab_size)}, seq.params,
                                          seq.history(), seq.seed, seq.step(), probs);
      row.emitted = {&sampled[i], 1};
    } catch (const Error& e) {
      row.fail(std::string("sampling failed: ") + e.what());
    }
  }
}

// Commit → output → proposer bookkeeping for one row; a failed or finished request leaves.
void Engine::Impl::commit(sched::StepRow& row, std::vector<RequestOutput>& outputs) {
  const RequestId id = row.seq->id;
  if (!row.failed()) {
    scheduler->commit(row);
    if (row.chunk_logits != nullptr) output->prompt_chunk(id, row.seq->tokens, row.start, row.n, row.chunk_logits);
    if (!row.sample) return;  // a prefill chunk that is not the prompt's last
    if (!choices.empty() && row.seq->index == 0) fork_choices(*row.seq);
    const output::SpecStep step{row.lookahead, static_cast<int32_t>(row.drafts.size()), row.num_accepted};
    RequestOutput out = output->process(id, {row.emitted.first(static_cast<size_t>(row.num_appended)), row.finish,
                                             row.speculates() ? &step : nullptr, row.logits});
    if (row.drafted())
      spec->metrics().record(step.k, step.drafted, step.accepted, static_cast<int32_t>(out.new_token_ids.size()));
    const bool ended = out.finish_reason != FinishReason::kNone;
    if (!ended && spec) spec->accept(row);
    if (!row.failed()) {
      if (ended) finish(id);
      report(std::move(out), outputs);
      return;
    }
  }
  report(output->fail(id, row.error), outputs);
  end_waiting_choices(id, row.error, outputs);
  finish(id);
}

void Engine::Impl::finish(RequestId id) {
  scheduler->remove(id);
  if (spec) spec->release(id);
}

}  // namespace specd
