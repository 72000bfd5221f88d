// The model worker of async scheduling (docs/scheduling.md): a thread that executes one engine
// step at a time on behalf of the engine thread, so that the engine thread can process the
// outputs of the previous step and take in requests meanwhile.
//
// Hand-off. start(batch) gives the worker the StepBatch and, until wait() returns, everything
// the step's execution touches: the sequences of the batch's rows, the KV caches, the
// speculator (proposer, verifier, hosted models), the scorer and the sampling buffers. wait()
// gives them back. Each direction is one atomic store (release) that the other side loads
// (acquire), so whatever one side wrote before handing over is visible to the other; no lock
// is taken, and nothing is shared between hand-offs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <thread>

#include "sched/step_batch.hpp"

namespace specd {

class ModelWorker {
 public:
  // execute runs on the worker thread, once per start().
  explicit ModelWorker(std::function<void(sched::StepBatch&)> execute);
  // Waits for the step in flight (its exception is dropped), then stops the thread.
  ~ModelWorker();
  ModelWorker(const ModelWorker&) = delete;
  ModelWorker& operator=(const ModelWorker&) = delete;

  // Engine thread: hands `batch` to the worker. Requires !busy().
  void start(sched::StepBatch& batch);
  // Engine thread: blocks until the step given to start() is done and rethrows what execute
  // threw. Returns the seconds it blocked. Requires busy().
  double wait();
  // A step was started and not yet waited for (the worker owns the model side).
  bool busy() const { return busy_; }

 private:
  enum State : uint32_t { kIdle, kRun, kDone, kExit };
  // How long either side yields before it sleeps on the futex: a step of a small model.
  static constexpr std::chrono::microseconds kSpin{2000};
  uint32_t await(uint32_t want, std::chrono::steady_clock::time_point deadline);
  void loop();

  std::function<void(sched::StepBatch&)> execute_;
  sched::StepBatch* batch_ = nullptr;  // written before kRun, read by the worker after it
  std::exception_ptr error_;           // written by the worker before kDone
  std::atomic<uint32_t> state_{kIdle};
  bool busy_ = false;  // engine thread only
  std::thread thread_;
};

}  // namespace specd
