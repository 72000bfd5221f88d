#include "engine/model_worker.hpp"

#include <pthread.h>

#include <chrono>
#include <utility>

#include "specd/error.hpp"

namespace specd {

ModelWorker::ModelWorker(std::function<void(sched::StepBatch&)> execute) : execute_(std::move(execute)) {
  thread_ = std::thread([this] { loop(); });
  pthread_setname_np(thread_.native_handle(), "specd-worker");
}

ModelWorker::~ModelWorker() {
  if (busy_) {
    try {
      wait();
    } catch (...) {  // nobody is left to hear about it
    }
  }
  state_.store(kExit, std::memory_order_release);
  state_.notify_all();
  thread_.join();
}

void ModelWorker::start(sched::StepBatch& batch) {
  SPECD_CHECK(!busy_, ErrorCode::kInternal, "model worker: a step is already in flight");
  batch_ = &batch;
  error_ = nullptr;
  busy_ = true;
  state_.store(kRun, std::memory_order_release);
  state_.notify_all();
}

double ModelWorker::wait() {
  SPECD_CHECK(busy_, ErrorCode::kInternal, "model worker: no step in flight");
  const auto t0 = std::chrono::steady_clock::now();
  await(kDone, t0 + kSpin);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  state_.store(kIdle, std::memory_order_relaxed);
  busy_ = false;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return waited;
}

// Yields the core while spinning until `deadline`, then sleeps on the futex. A sleeping thread
// that is woken waits for the OS scheduler, which on a busy machine costs milliseconds per
// hand-off; a yielding one is back as soon as its core is free.
uint32_t ModelWorker::await(uint32_t want, std::chrono::steady_clock::time_point deadline) {
  auto done = [&](uint32_t s) { return s == want || s == kExit; };
  uint32_t s = state_.load(std::memory_order_acquire);
  for (int spins = 0; !done(s); ++spins) {
    if ((spins & 15) == 15 && std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::yield();
    s = state_.load(std::memory_order_acquire);
  }
  while (!done(s)) {
    state_.wait(s, std::memory_order_acquire);
    s = state_.load(std::memory_order_acquire);
  }
  return s;
}

void ModelWorker::loop() {
  for (;;) {
    const uint32_t s = await(kRun, std::chrono::steady_clock::now() + kSpin);
    if (s == kExit) return;
    try {
      execute_(*batch_);
    } catch (...) {
      error_ = std::current_exception();
    }
    state_.store(kDone, std::memory_order_release);
    state_.notify_all();
  }
}

}  // namespace specd
