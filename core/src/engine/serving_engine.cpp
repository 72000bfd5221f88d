#include "specd/serving_engine.hpp"

#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include "specd/error.hpp"
#include "specd/log.hpp"

namespace specd {

// ---- RequestStream ----------------------------------------------------------------------------

std::optional<RequestOutput> RequestStream::next(Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_until(lock, deadline, [&] { return !outputs_.empty(); })) return std::nullopt;
  RequestOutput out = std::move(outputs_.front());
  outputs_.pop_front();
  return out;
}

std::vector<RequestOutput> RequestStream::drain() {
  std::lock_guard lock(mu_);
  std::vector<RequestOutput> out(std::make_move_iterator(outputs_.begin()), std::make_move_iterator(outputs_.end()));
  outputs_.clear();
  return out;
}

bool RequestStream::finished() const {
  std::lock_guard lock(mu_);
  return finished_;
}

void RequestStream::push(RequestOutput out) {
  {
    std::lock_guard lock(mu_);
    if (finished_) return;  // a stream ends exactly once
    finished_ = out.finished;
    outputs_.push_back(std::move(out));
  }
  cv_.notify_all();
}

// ---- ServingEngine ------------------------------------------------------------------------------

namespace {

RequestOutput aborted_output(RequestId id) {
  RequestOutput out;
  out.id = id;
  out.finished = true;
  out.finish_reason = FinishReason::kAbort;
  return out;
}

}  // namespace

ServingEngine::ServingEngine(std::unique_ptr<Engine> engine, ServingEngineOptions options)
    : engine_(std::move(engine)), options_(std::move(options)) {
  SPECD_CHECK(engine_ != nullptr, ErrorCode::kInvalidArgument, "ServingEngine needs an engine");
  options_.max_running = std::max<size_t>(options_.max_running, 1);
  info_ = engine_->info();
  engine_stats_ = engine_->stats();
  thread_ = std::thread([this] { loop(); });
}

ServingEngine::~ServingEngine() {
  stop(std::chrono::milliseconds(0));
}

Submission ServingEngine::submit(Request request) {
  Submission result;
  {
    std::lock_guard lock(mu_);
    if (!accepting_) {
      result.status = SubmitStatus::kStopped;
      return result;
    }
    // Requests that a free running slot will take at once do not count as waiting.
    const size_t free_slots = options_.max_running - std::min(num_running_, options_.max_running);
    if (queue_.size() >= options_.max_queue + free_slots) {
      result.status = SubmitStatus::kQueueFull;
      return result;
    }
    result.id = next_id_++;
    result.stream = std::make_shared<RequestStream>();
    queue_.push_back(Pending{result.id, std::move(request), result.stream, Clock::now()});
  }
  cv_.notify_all();
  return result;
}

void ServingEngine::cancel(RequestId id) {
  {
    std::lock_guard lock(mu_);
    if (loop_exited_) return;
    cancels_.push_back(id);
  }
  cv_.notify_all();
}

void ServingEngine::stop(std::chrono::milliseconds timeout) {
  std::lock_guard stop_lock(stop_mu_);
  {
    std::lock_guard lock(mu_);
    accepting_ = false;
    const Clock::time_point deadline = Clock::now() + timeout;
    if (!drain_deadline_ || deadline < *drain_deadline_) drain_deadline_ = deadline;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

ServingEngineStats ServingEngine::stats() const {
  std::lock_guard lock(mu_);
  return ServingEngineStats{queue_.size(), num_running_,  num_steps_,  accepting_,
                            engine_stats_, spec_metrics_, step_stats_, arm_metrics_};
}

void ServingEngine::notify_finished(const RequestTrace& trace) {
  if (!options_.on_finished) return;
  try {
    options_.on_finished(trace);
  } catch (const std::exception& e) {
    log::get("engine").error("request observer failed: {}", e.what());
  }
}

void ServingEngine::finish_running(Running& r, RequestOutput out) {
  const Clock::time_point now = Clock::now();
  r.trace.finished = now;
  r.trace.finish_reason = out.finish_reason;
  r.trace.num_prompt_tokens = out.num_prompt_tokens;
  r.trace.num_generated_tokens = out.num_generated_tokens;
  r.stream->push(std::move(out));
  notify_finished(r.trace);
}

// Waits for work and takes it from the shared state: cancellations, the drain deadline, and
// the queued requests that free running slots admit.
ServingEngine::Intake ServingEngine::take_work() {
  Intake in;
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] {
    return stopping_ || !cancels_.empty() || !running_.empty() ||
           (!queue_.empty() && running_.size() < options_.max_running);
  });
  for (RequestId id : cancels_) {
    auto it = std::find_if(queue_.begin(), queue_.end(), [&](const Pending& p) { return p.id == id; });
    if (it != queue_.end()) {
      in.aborted.push_back(std::move(*it));
      queue_.erase(it);
    } else {
      in.cancel_running.push_back(id);
    }
  }
  cancels_.clear();
  if (stopping_ && drain_deadline_ && Clock::now() >= *drain_deadline_) {
    in.deadline_passed = true;
    for (Pending& p : queue_) in.aborted.push_back(std::move(p));
    queue_.clear();
  }
  while (!queue_.empty() && running_.size() + in.admit.size() < options_.max_running) {
    in.admit.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  // Admitted requests hold their running slots from now on (submit() counts free slots).
  num_running_ = running_.size() + in.admit.size();
  in.exit = stopping_ && queue_.empty() && in.admit.empty() && running_.empty() && in.aborted.empty();
  return in;
}

// Hands the intake to the Engine (loop thread).
void ServingEngine::apply(Intake& in) {
  for (Pending& p : in.aborted) {
    const Clock::time_point now = Clock::now();
    p.stream->push(aborted_output(p.id));
    notify_finished(RequestTrace{p.id, p.submitted, now, std::nullopt, now, FinishReason::kAbort, 0, 0});
  }
  for (Pending& p : in.admit) {
    engine_->add_request(p.id, p.request);
    Running r;
    r.stream = std::move(p.stream);
    r.trace.id = p.id;
    r.trace.submitted = p.submitted;
    r.trace.started = Clock::now();
    running_.emplace(p.id, std::move(r));
  }
  for (RequestId id : in.cancel_running) {
    if (running_.contains(id)) engine_->abort(id);
  }
  if (in.deadline_passed) {
    for (const auto& [id, r] : running_) engine_->abort(id);
  }
}

// One Engine::step; its outputs go to the requests' streams. Returns the tokens it produced.
size_t ServingEngine::step_engine() {
  std::vector<RequestOutput> outputs;
  try {
    // Every request the Engine accepted must end with a finished output; anything else is a bug.
    if (!engine_->has_unfinished())
      throw Error(ErrorCode::kInternal, "the engine lost " + std::to_string(running_.size()) + " requests");
    outputs = engine_->step();
  } catch (const std::exception& e) {
    fail_running(e);
    return 0;
  }
  size_t num_new_tokens = 0;
  const Clock::time_point now = Clock::now();
  for (RequestOutput& out : outputs) {
    auto it = running_.find(out.id);
    if (it == running_.end()) continue;
    Running& r = it->second;
    num_new_tokens += out.new_token_ids.size();
    if (!r.trace.first_token && !out.new_token_ids.empty()) r.trace.first_token = now;
    if (out.finished) {
      finish_running(r, std::move(out));
      running_.erase(it);
    } else {
      r.stream->push(std::move(out));
    }
  }
  return num_new_tokens;
}

// A step threw (Engine::step never does for a request's sake): every running request fails.
void ServingEngine::fail_running(const std::exception& e) {
  log::Logger& log = log::get("engine");
  log.error("engine step failed; failing {} running requests: {}", running_.size(), e.what());
  for (auto& [id, r] : running_) {
    engine_->abort(id);
    RequestOutput out;
    out.finished = true;
    out.finish_reason = FinishReason::kError;
    out.error = std::string("engine step failed: ") + e.what();
    finish_running(r, std::move(out));
  }
  running_.clear();
  // Drop the abort outputs of the requests failed above.
  try {
    while (engine_->has_unfinished()) (void)engine_->step();
  } catch (const std::exception& e2) {
    log.error("engine cannot recover from a failed step: {}", e2.what());
  }
}

void ServingEngine::loop() {
  for (;;) {
    Intake in = take_work();
    if (in.exit) break;
    apply(in);
    const bool stepping = !running_.empty();
    if (stepping) {
      const size_t num_new_tokens = step_engine();
      if (options_.on_step) {
        try {
          options_.on_step(num_new_tokens);
        } catch (const std::exception& e) {
          log::get("engine").error("step observer failed: {}", e.what());
        }
      }
    }
    // The Engine belongs to this thread: snapshot what other threads may read.
    EngineStats engine_stats = engine_->stats();
    spec::SpecMetrics spec_metrics = engine_->spec_metrics();
    const StepStats step_stats = engine_->step_stats();
    std::lock_guard lock(mu_);
    num_running_ = running_.size();
    if (stepping) ++num_steps_;
    engine_stats_ = engine_stats;
    spec_metrics_ = std::move(spec_metrics);
    arm_metrics_ = engine_->arm_metrics();
    step_stats_ = step_stats;
  }
  std::lock_guard lock(mu_);
  num_running_ = 0;
  loop_exited_ = true;
}

}  // namespace specd
