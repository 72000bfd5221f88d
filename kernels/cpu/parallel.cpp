#include "specd/kernels/parallel.hpp"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace specd::kernels {
namespace {

// Workers sleep on a condition variable between jobs; the calling thread takes chunk 0 and
// waits for the others. One job at a time (see the header's threading contract).
class ThreadPool {
 public:
  ~ThreadPool() { resize(1); }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void resize(int n) {
    n = std::max(1, n);
    if (n == size()) return;
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      ++generation_;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
    stop_ = false;
    // Workers start from the current generation: a job published before a new worker first
    // takes the lock must still count as new for it.
    const uint64_t start = generation_;
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, i, start] { worker_loop(i, start); });
  }

  void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
    const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
    const int chunks = static_cast<int>(std::min<int64_t>(size(), max_chunks));
    if (chunks <= 1 || in_worker_) {
      body(0, n);
      return;
    }
    {
      std::lock_guard lock(mu_);
      body_ = &body;
      n_ = n;
      chunks_ = chunks;
      pending_ = chunks - 1;
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    std::exception_ptr mine;
    try {
      run_chunk(0);
    } catch (...) {
      mine = std::current_exception();
    }
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    body_ = nullptr;
    if (mine) std::rethrow_exception(mine);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void run_chunk(int c) {
    const int64_t begin = n_ * c / chunks_;
    const int64_t end = n_ * (c + 1) / chunks_;
    if (begin < end) (*body_)(begin, end);
  }

  void worker_loop(int index, uint64_t seen) {
    in_worker_ = true;
    for (;;) {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (stop_) return;
      if (index >= chunks_) continue;
      lock.unlock();
      std::exception_ptr err;
      try {
        run_chunk(index);
      } catch (...) {
        err = std::current_exception();
      }
      lock.lock();
      if (err && !error_) error_ = err;
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  const std::function<void(int64_t, int64_t)>* body_ = nullptr;
  int64_t n_ = 0;
  int chunks_ = 0;
  int pending_ = 0;
  std::exception_ptr error_;
  static thread_local bool in_worker_;
};

thread_local bool ThreadPool::in_worker_ = false;

std::mutex g_config_mu;

ThreadPool& pool() {
  static ThreadPool* p = [] {
    auto* tp = new ThreadPool();  // leaked on purpose: workers must outlive static dtors
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    tp->resize(hw);
    openblas_set_num_threads(1);  // matmul splits its work over this pool instead
    return tp;
  }();
  return *p;
}

}  // namespace

void set_num_threads(int n) {
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::lock_guard lock(g_config_mu);
  if (pool().size() == n) return;
  pool().resize(n);
}

int num_threads() { return pool().size(); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  pool().run(n, grain, body);
}

}  // namespace specd::kernels
