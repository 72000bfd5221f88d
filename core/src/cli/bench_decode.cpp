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

DecodeRun::DecodeRun(Engine& engine, int32_t batch, int32_t prompt_tokens, int32_t gen_tokens, uint64_t salt,
                     const std::vector<int32_t>& prompt, const SpeculativeOptions& speculative)
    : engine_(engine), batch_(batch), spec_before_(engine.spec_metrics()), timing_before_(engine.step_stats()) {
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = gen_tokens;
  sp.ignore_eos = true;
  for (int32_t b = 0; b < batch; ++b) {
    Request r;
    r.prompt_ids = prompt.empty()
                       ? synthetic_prompt(prompt_tokens, engine.info().vocab_size, salt + static_cast<uint64_t>(b))
                       : prompt;
    r.sampling = sp;
    r.speculative = speculative;
    engine.add_request(static_cast<RequestId>(b) + 1, r);
  }
}

void DecodeRun::step() {
  const bool timing = started_ == batch_;
  const bool full = timing && finished_ == 0;
  const Clock::time_point step_start = Clock::now();
  const auto outs = engine_.step();
  const double seconds = std::chrono::duration<double>(Clock::now() - step_start).count();
  int64_t step_tokens = 0;
  for (const RequestOutput& o : outs) {
    if (o.finish_reason == FinishReason::kError) throw Error(ErrorCode::kInternal, "bench request failed: " + o.error);
    if (o.finish_reason != FinishReason::kNone) ++finished_;
    step_tokens += static_cast<int64_t>(o.new_token_ids.size());
    // The first token always comes alone, from the prompt's last chunk.
    if (!timing && o.num_generated_tokens == 1) ++started_;
  }
  if (timing) {
    tokens_ += step_tokens;
    seconds_ += seconds;
    ++steps_;
  }
  if (full) {
    full_tokens_ += step_tokens;
    full_seconds_ += seconds;
  }
}

DecodeResult DecodeRun::result() const {
  DecodeResult r;
  r.batch = batch_;
  if (full_seconds_ > 0) r.full_batch_tokens_per_s = static_cast<double>(full_tokens_) / full_seconds_;
  if (steps_ > 0 && seconds_ > 0) {
    r.tokens_per_s = static_cast<double>(tokens_) / seconds_;
    r.step_ms = seconds_ * 1e3 / static_cast<double>(steps_);
  }
  r.tokens = tokens_;
  r.steps = steps_;
  r.spec = engine_.spec_metrics().since(spec_before_);
  r.timing = step_delta(timing_before_, engine_.step_stats());
  return r;
}

DecodeResult bench_decode(Engine& engine, int32_t batch, int32_t prompt_tokens, int32_t gen_tokens, uint64_t salt,
                          const std::vector<int32_t>& prompt, const SpeculativeOptions& speculative) {
  DecodeRun run(engine, batch, prompt_tokens, gen_tokens, salt, prompt, speculative);
  while (!run.done()) run.step();
  return run.result();
}

}  // namespace specd::cli
