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
  for (uint32_t s = state_.load(std::memory_order_acquire); s != kDone; s = state_.load(std::memory_order_acquire))
    state_.wait(s, std::memory_order_acquire);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  state_.store(kIdle, std::memory_order_relaxed);
  busy_ = false;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return waited;
}

void ModelWorker::loop() {
  for (;;) {
    uint32_t s = state_.load(std::memory_order_acquire);
    while (s != kRun && s != kExit) {
      state_.wait(s, std::memory_order_acquire);
      s = state_.load(std::memory_order_acquire);
    }
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
