#include "cli/bench_decode.hpp"

#include <chrono>

#include "cli/bench_scorers.hpp"
#include "specd/error.hpp"

namespace specd::cli {

using Clock = std::chrono::steady_clock;

namespace {

// after - before, field by field.
StepStats step_delta(const StepStats& before, const StepStats& after) {
  StepStats d;
  d.steps = after.steps - before.steps;
  d.wall = after.wall - before.wall;
  d.forward = after.forward - before.forward;
  d.propose = after.propose - before.propose;
  d.verify = after.verify - before.verify;
  d.commit = after.commit - before.commit;
  d.schedule = after.schedule - before.schedule;
  d.output = after.output - before.output;
  d.in_flight = after.in_flight - before.in_flight;
  d.overlap = after.overlap - before.overlap;
  d.wait = after.wait - before.wait;
  return d;
}

}  // namespace

DecodeResult bench_decode(Engine& engine, int32_t batch, int32_t prompt_tokens, int32_t gen_tokens, uint64_t salt,
                          const std::vector<int32_t>& prompt, const SpeculativeOptions& speculative) {
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = gen_tokens;
  sp.ignore_eos = true;
  const spec::SpecMetrics before = engine.spec_metrics();
  const StepStats timing_before = engine.step_stats();
  for (int32_t b = 0; b < batch; ++b) {
    Request r;
    r.prompt_ids = prompt.empty()
                       ? synthetic_prompt(prompt_tokens, engine.info().vocab_size, salt + static_cast<uint64_t>(b))
                       : prompt;
    r.sampling = sp;
    r.speculative = speculative;
    engine.add_request(static_cast<RequestId>(b + 1), r);
  }
  int32_t started = 0, finished = 0;
  int64_t tokens = 0, steps = 0, full_tokens = 0;
  double full_seconds = 0;
  DecodeResult r;
  Clock::time_point t0;
  while (engine.has_unfinished()) {
    const bool timing = started == batch;
    const bool full = timing && finished == 0;
    const Clock::time_point step_start = Clock::now();
    const auto outs = engine.step();
    int64_t step_tokens = 0;
    for (const RequestOutput& o : outs) {
      if (o.finish_reason == FinishReason::kError)
        throw Error(ErrorCode::kInternal, "bench request failed: " + o.error);
      if (o.finish_reason != FinishReason::kNone) ++finished;
      step_tokens += static_cast<int64_t>(o.new_token_ids.size());
      // The first token always comes alone, from the prompt's last chunk.
      if (!timing && o.num_generated_tokens == 1) ++started;
    }
    if (timing) {
      tokens += step_tokens;
      ++steps;
    }
    if (full) {
      full_tokens += step_tokens;
      full_seconds += std::chrono::duration<double>(Clock::now() - step_start).count();
    }
    if (!timing && started == batch) t0 = Clock::now();
  }
  if (full_seconds > 0) r.full_batch_tokens_per_s = static_cast<double>(full_tokens) / full_seconds;
  r.batch = batch;
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (steps > 0 && s > 0) {
    r.tokens_per_s = static_cast<double>(tokens) / s;
    r.step_ms = s * 1e3 / static_cast<double>(steps);
  }
  r.tokens = tokens;
  r.steps = steps;
  r.spec = engine.spec_metrics().since(before);
  r.timing = step_delta(timing_before, engine.step_stats());
  return r;
}

}  // namespace specd::cli
