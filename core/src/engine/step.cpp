// Engine::step: one engine step, top to bottom (docs/architecture.md "One engine step",
// docs/scheduling.md for async and multi-step scheduling).
//
//   engine thread                               model side (StepPipeline; its worker when async)
//   collect   the step in flight is done: copy its results (with the logits rows of logprobs
//             requests and its A/B record), prompt logprobs, n > 1 forks, remove finished requests
//   admit     deferred removals, then arrivals enter the scheduler
//   prepare   Scheduler::schedule → StepBatch rows (a full schedule or the next sub-step)
//   launch ───────────────────────────────────► execute: propose → score → sample → verify →
//                                                        per row commit + accept
//   process   OutputProcessor on the collected step's results → RequestOutputs, with the
//             engine's and the A/B arms' speculative counters
//
// Without async scheduling launch executes the step in place and collects it, so process sees
// this step's results. With it, launch hands the step to the worker and process sees the
// previous step's, while the worker runs.
#include <algorithm>

#include "engine/engine_impl.hpp"
#include "sampling/sampling.hpp"
#include "specd/error.hpp"

namespace specd {
namespace {

double seconds(SteadyClock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

std::vector<RequestOutput> Engine::step() {
  Impl& m = *impl_;
  const SteadyClock::time_point t0 = SteadyClock::now();
  if (m.busy_since) m.stats.wall += seconds(t0 - *m.busy_since);
  std::vector<RequestOutput> outputs = std::move(m.pending);
  m.pending.clear();
  const double waited = m.finish_flight(t0);
  m.admit();
  m.prepare(outputs);
  const SteadyClock::time_point t1 = SteadyClock::now();
  m.stats.schedule += seconds(t1 - t0) - waited;
  if (!m.pipeline->batch().rows.empty()) m.launch();
  const SteadyClock::time_point t2 = SteadyClock::now();
  m.process(outputs);
  const SteadyClock::time_point t3 = SteadyClock::now();
  m.spec->accounting().outputs(outputs, t3);  // the A/B log: first tokens, steps, finished requests
  m.stats.output += seconds(t3 - t2);
  if (has_unfinished()) {
    m.busy_since = t0;
  } else {
    m.stats.wall += seconds(t3 - t0);
    m.busy_since.reset();
  }
  return outputs;
}

// ---- engine thread ----------------------------------------------------------------------------

// The hand-off (async scheduling): waits for the step in flight, if any, and collects it. `now`
// is when the engine thread came back for it. Returns the seconds it waited.
double Engine::Impl::finish_flight(SteadyClock::time_point now) {
  if (!in_flight()) return 0;
  const double away = seconds(now - pipeline->launched_at());
  const double waited = pipeline->wait();  // rethrows what the step threw
  stats.in_flight += away;
  stats.wait += waited;
  stats.overlap += std::min(away, pipeline->times().total);
  collect();
  return waited;
}

// Copies what the output processor needs out of the executed batch and removes the requests
// that finished or failed in it. Rows of requests that ended while the step was in flight are
// dropped (their output is already final). What needs the step's own buffers or KV happens here,
// before the next step takes them: prompt logprobs of prefill chunks, the logits rows of requests
// that asked for logprobs (copied, only theirs), the step's A/B record, and the forks of n > 1
// choices off choice 0's prompt (before a choice 0 that ended with its first token leaves the KV
// cache).
void Engine::Impl::collect() {
  sched::StepBatch& batch = pipeline->batch();
  for (sched::StepRow& row : batch.rows) {
    const sched::SeqId id = row.seq->id;
    if (std::any_of(discard.begin(), discard.end(), [&](const Discard& d) { return d.id == id; })) continue;
    const bool ended = row.failed() || row.finish != FinishReason::kNone;
    if (row.seq->num_cached > 0 && row.start == row.seq->num_cached) output->cached(id, row.seq->num_cached);
    if (row.chunk_logits != nullptr && !row.failed())
      output->prompt_chunk(id, row.seq->tokens, row.start, row.n, row.chunk_logits);
    if (row.sample || row.failed()) collect_row(row);
    if (ended) remove(id, !row.failed());
  }
  const ExecTimes& exec = pipeline->times();
  StepOutbox& outbox = pipeline->outbox();
  spec->collect(outbox.arms, spec_metrics.policy);
  spec_metrics.proposer_series = spec->observations();
  // A/B: each row's share of the step's time, for the log; the verifier calls, for the arms' metrics.
  const double row_s =
      (exec.propose + exec.forward + exec.verify) / static_cast<double>(std::max<size_t>(batch.rows.size(), 1));
  spec->accounting().step(outbox.arms, row_s);
  batch.rows.clear();  // the rows point at sequences that may be gone now
  stats.propose += exec.propose;
  stats.forward += exec.forward;
  stats.verify += exec.verify;
  stats.commit += exec.commit;
  if (exec.verified) spec_metrics.add_times(exec.propose, exec.forward, exec.verify);
}

void Engine::Impl::collect_row(sched::StepRow& row) {
  StepOutbox& outbox = pipeline->outbox();
  StepResult& r = outbox.rows.emplace_back();
  r.id = row.seq->id;
  r.first = static_cast<uint32_t>(outbox.tokens.size());
  r.count = static_cast<uint32_t>(row.num_appended);
  outbox.tokens.insert(outbox.tokens.end(), row.emitted.begin(), row.emitted.begin() + row.num_appended);
  r.finish = row.finish;
  r.grammar_complete = row.grammar_complete;
  r.committed = row.num_appended > 0 || !row.failed();  // max_tokens 0 appends nothing
  r.speculated = row.speculates();
  r.spec = {row.lookahead, static_cast<int32_t>(row.drafts.size()), row.num_accepted};
  if (row.seq->params.logprobs >= 0 && row.num_appended > 0 && row.logits != nullptr) {
    const auto vocab = static_cast<size_t>(info.vocab_size);
    r.logits_at = static_cast<int64_t>(outbox.logits.size());
    outbox.logits.insert(outbox.logits.end(), row.logits, row.logits + static_cast<size_t>(row.num_appended) * vocab);
  }
  r.ab_row = row.ab_row;
  if (row.sample && !row.failed() && row.seq->index == 0 && choices.has_waiting(row.seq->request))
    fork_choices(*row.seq);
  r.error = std::move(row.error);
}

// Removals deferred while a step was in flight, then the requests added since the last prepare.
void Engine::Impl::admit() {
  for (const Discard& d : discard) remove(d.id, d.finished);
  discard.clear();
  for (std::unique_ptr<sched::Sequence>& seq : arrivals) scheduler->add(std::move(seq));
  arrivals.clear();
}

// Scheduler::schedule, and the sequences it failed (they can never fit) or preempted (their KV is
// gone; the proposer re-prefills with the target later).
void Engine::Impl::prepare(std::vector<RequestOutput>& outputs) {
  sched::StepBatch& batch = pipeline->batch();
  scheduler->schedule(batch);
  num_preemptions += static_cast<uint64_t>(batch.num_preempted);
  for (auto& [id, message] : batch.failed) {
    spec->release(id);
    fail(id, message, outputs);
  }
  for (sched::SeqId id : batch.preempted) spec->release(id);
}

void Engine::Impl::launch() {
  ++stats.steps;
  kv_free_at_launch = kv->num_free_blocks();
  kv_cached_at_launch = kv->num_cached_free_blocks();
  moe_at_launch = model->moe_stats();
  pipeline->launch();
  if (!pipeline->in_flight()) collect();
}

// The output processor on the collected results: detokenization, stop strings, finish reasons,
// the request's and the engine's speculative counters.
void Engine::Impl::process(std::vector<RequestOutput>& outputs) {
  StepOutbox& outbox = pipeline->outbox();
  for (StepResult& r : outbox.rows) process_row(r, outputs);
  outbox.clear();
}

void Engine::Impl::process_row(StepResult& r, std::vector<RequestOutput>& outputs) {
  // Aborted after its step was collected (prompt_logprobs collects a step in flight): its output
  // is already final.
  if (!output->contains(r.id)) return;
  if (!r.committed) {
    fail(r.id, r.error, outputs);
    return;
  }
  const StepOutbox& outbox = pipeline->outbox();
  const std::span<const int32_t> appended(outbox.tokens.data() + r.first, r.count);
  const float* logits = r.logits_at >= 0 ? outbox.logits.data() + r.logits_at : nullptr;
  RequestOutput out =
      output->process(r.id, {appended, r.finish, r.speculated ? &r.spec : nullptr, logits, r.grammar_complete});
  if (r.spec.drafted > 0) {
    const auto emitted = static_cast<int32_t>(out.new_token_ids.size());
    spec_metrics.record(r.spec.k, r.spec.drafted, r.spec.accepted, emitted);
    spec->accounting().row(outbox.arms, r.ab_row, out, {r.spec.k, r.spec.drafted, r.spec.accepted, emitted});
  }
  const bool ended = out.finish_reason != FinishReason::kNone;
  if (!ended && !r.error.empty()) {  // the proposer's on_accept failed
    fail(r.id, r.error, outputs);
    return;
  }
  if (ended && r.finish == FinishReason::kNone && r.error.empty()) retire(r.id, true);  // a stop string
  report(std::move(out), outputs);
}

// A sequence failed: its output, and the choices of its request still waiting for its prompt.
void Engine::Impl::fail(sched::SeqId id, const std::string& message, std::vector<RequestOutput>& outputs) {
  if (!output->contains(id)) return;  // its output is final already (aborted)
  RequestOutput out = output->fail(id, message);
  const RequestId request = out.id;
  report(std::move(out), outputs);
  end_waiting_choices(request, message, outputs);
}

void Engine::Impl::retire(sched::SeqId id, bool finished) {
  if (in_flight()) {
    discard.push_back({id, finished});
  } else {
    remove(id, finished);
  }
}

void Engine::Impl::remove(sched::SeqId id, bool finished) {
  const std::unique_ptr<sched::Sequence> seq = scheduler->remove(id);
  if (seq == nullptr) return;
  if (finished) spec->finish(*seq);
  spec->release(id);
}

}  // namespace specd
