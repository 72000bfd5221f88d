// ServingEngine: one specd::Engine driven by its own thread (the engine thread), fed and
// cancelled from any thread: what the OpenAI server runs on.
//
//   ServingEngine serving(std::make_unique<Engine>(cfg), {.max_queue = 1024, .max_running = 64});
//   auto sub = serving.submit(request);          // from any thread
//   if (sub.status == SubmitStatus::kOk)
//     while (auto out = sub.stream->next(deadline)) { ...; if (out->finished) break; }
//   serving.stop(std::chrono::seconds(30));      // drain, then abort what is left
//
// Not to be confused with async scheduling (scheduler.async_scheduling): inside the Engine, a
// model worker thread executes step N while the engine thread processes step N-1's outputs.
//
// Admission: at most `max_running` requests are inside the Engine at once (the Engine's own
// scheduler batches them); the rest wait here, in arrival order, in a queue bounded by
// `max_queue`. A submit that finds the queue full is refused with kQueueFull and never reaches
// the Engine, so a burst cannot grow memory without bound.
//
// Every request gets a RequestStream: a thread-safe queue of RequestOutput that ends with
// exactly one output with finished == true (stop, length, error or abort). The ServingEngine is
// the Engine's caller and owns the request ids: submit() picks the id, the Engine and every
// output carry it.
//
// Threading: submit, cancel, stats, info and stop may be called from any thread. The Engine
// itself is only touched by the loop thread (and by the constructor/destructor).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "specd/engine.hpp"
#include "specd/request.hpp"

namespace specd {

using Clock = std::chrono::steady_clock;

// The output channel of one request. Producers: the loop thread. Consumer: any one thread.
class RequestStream {
 public:
  // Blocks until an output is available or `deadline` passes (then returns nullopt).
  std::optional<RequestOutput> next(Clock::time_point deadline);
  // Everything available now, without blocking (possibly empty).
  std::vector<RequestOutput> drain();
  // True once the finished output has been pushed (it may not have been consumed yet).
  bool finished() const;

  void push(RequestOutput out);  // loop thread only

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> outputs_;
  bool finished_ = false;
};

enum class SubmitStatus {
  kOk,
  kQueueFull,  // max_queue requests already wait; retry later (HTTP 429)
  kStopped,    // stop() was called; no new requests are accepted (HTTP 503)
};

struct Submission {
  SubmitStatus status = SubmitStatus::kOk;
  RequestId id = 0;                       // the request's id; valid when status == kOk
  std::shared_ptr<RequestStream> stream;  // null unless status == kOk
};

// What happened to one finished request, handed to the observer (for metrics and logs).
struct RequestTrace {
  RequestId id = 0;
  Clock::time_point submitted;
  Clock::time_point started;  // admitted into the Engine (== submitted + queue wait)
  std::optional<Clock::time_point> first_token;
  Clock::time_point finished;
  FinishReason finish_reason = FinishReason::kNone;
  int32_t num_prompt_tokens = 0;
  int32_t num_generated_tokens = 0;
};

struct ServingEngineStats {
  size_t num_waiting = 0;  // queued here, not yet in the Engine
  size_t num_running = 0;  // inside the Engine (prefilling or decoding)
  uint64_t num_steps = 0;  // Engine::step() calls so far
  bool accepting = true;
  EngineStats engine;                  // KV usage and scheduler counters, as of the last step
  spec::SpecMetrics spec;              // speculative counters, as of the last step
  StepStats steps;                     // where step time went, as of the last step
  std::vector<spec::ArmMetrics> arms;  // per A/B arm, as of the last step
};

struct ServingEngineOptions {
  size_t max_queue = 1024;  // scheduler.max_queue
  size_t max_running = 64;  // scheduler.max_num_seqs
  // Called on the loop thread, after a request's finished output was pushed. Must not call
  // back into the ServingEngine's submit/stop. Exceptions are caught and logged.
  std::function<void(const RequestTrace&)> on_finished;
  // Called on the loop thread after every Engine::step() with the tokens it produced.
  std::function<void(size_t num_new_tokens)> on_step;
};

class ServingEngine {
 public:
  // Takes ownership of the engine and starts the loop thread.
  ServingEngine(std::unique_ptr<Engine> engine, ServingEngineOptions options);
  // stop(0) if stop() was not called: every request still open is aborted.
  ~ServingEngine();
  ServingEngine(const ServingEngine&) = delete;
  ServingEngine& operator=(const ServingEngine&) = delete;

  Submission submit(Request request);
  // Aborts a request wherever it is (queued or running); its stream then ends with
  // FinishReason::kAbort. Unknown or finished ids are ignored.
  void cancel(RequestId id);

  // Stops accepting, lets queued and running requests finish until `timeout` has passed,
  // aborts the rest, and joins the loop thread. Every stream has ended when it returns.
  // Idempotent; safe to call from any thread but the loop thread.
  void stop(std::chrono::milliseconds timeout);

  ServingEngineStats stats() const;
  // Copied at construction; the Engine never changes it afterwards.
  const EngineInfo& info() const { return info_; }

 private:
  struct Pending {
    RequestId id = 0;
    Request request;
    std::shared_ptr<RequestStream> stream;
    Clock::time_point submitted;
  };
  struct Running {
    std::shared_ptr<RequestStream> stream;
    RequestTrace trace;
  };

  // What one turn of the loop takes from the shared state (under the lock).
  struct Intake {
    std::vector<Pending> admit;
    std::vector<Pending> aborted;  // queued requests cancelled or cut by the drain deadline
    std::vector<RequestId> cancel_running;
    bool deadline_passed = false;
    bool exit = false;  // stopping and nothing left
  };

  void loop();
  Intake take_work();
  void apply(Intake& in);
  size_t step_engine();
  void fail_running(const std::exception& e);
  void finish_running(Running& r, RequestOutput out);
  void notify_finished(const RequestTrace& trace);

  std::unique_ptr<Engine> engine_;
  ServingEngineOptions options_;
  EngineInfo info_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  std::vector<RequestId> cancels_;
  bool accepting_ = true;
  bool stopping_ = false;
  bool loop_exited_ = false;
  std::optional<Clock::time_point> drain_deadline_;
  RequestId next_id_ = 1;
  size_t num_running_ = 0;  // mirror of running_.size() for stats()
  uint64_t num_steps_ = 0;
  EngineStats engine_stats_;  // snapshots taken on the loop thread (guarded by mu_)
  spec::SpecMetrics spec_metrics_;
  StepStats step_stats_;
  std::vector<spec::ArmMetrics> arm_metrics_;  // copy-assigned: no allocation once sized

  // Loop-thread state: the requests inside the Engine, by id.
  std::unordered_map<RequestId, Running> running_;

  std::mutex stop_mu_;  // serializes stop() callers
  std::thread thread_;
};

}  // namespace specd
