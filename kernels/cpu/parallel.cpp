#include "specd/kernels/parallel.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SPECD_CPU_RELAX() _mm_pause()
#else
#define SPECD_CPU_RELAX() std::this_thread::yield()
#endif

namespace specd::kernels {
namespace {

// How long a worker spins for the next job before it sleeps. Steps of a model run their ops
// back to back (gaps of microseconds); between steps the engine does its bookkeeping (tens of
// microseconds to a millisecond); a longer gap means the engine is idle.
constexpr auto kSpin = std::chrono::microseconds(300);
// Chunks per thread: enough to rebalance when a core is slow, few enough to keep the atomic
// counter cheap.
constexpr int64_t kChunksPerThread = 8;

// ctrl_ packs the job generation (high 32 bits), an "open" flag (bit 31) and the number of
// workers inside the job (low 31 bits). Workers join an open job with a CAS; the caller closes
// it once every chunk is taken and waits until the count is back to zero, so no worker ever
// touches a finished job.
constexpr uint64_t kOpen = uint64_t{1} << 31;
constexpr uint64_t kCountMask = kOpen - 1;
constexpr uint64_t generation(uint64_t c) {
  return c >> 32;
}

thread_local bool t_inside = false;  // this thread is running a chunk (nested calls run inline)

class ThreadPool {
 public:
  ~ThreadPool() { resize(1); }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void resize(int n) {
    n = std::max(1, n);
    std::lock_guard lock(mu_);
    if (n == size()) return;
    stop_.store(true);
    ctrl_.fetch_add(uint64_t{1} << 32);  // a new generation wakes everyone up to see stop_
    wake_.fetch_add(1);
    wake_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
    stop_.store(false);
    for (int i = 1; i < n; ++i) {
      workers_.emplace_back([this] { worker_loop(); });
      pthread_setname_np(workers_.back().native_handle(), "specd-kernels");
    }
  }

  // Returns false when the pool is busy (the caller then runs the work inline).
  bool run(int64_t n, int64_t grain, detail::RangeBody body) {
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    const int64_t threads = size();
    const int64_t chunk = std::max(grain, (n + threads * kChunksPerThread - 1) / (threads * kChunksPerThread));
    body_ = body;
    n_ = n;
    chunk_ = chunk;
    num_chunks_ = (n + chunk - 1) / chunk;
    next_.store(0, std::memory_order_relaxed);
    failed_.store(false, std::memory_order_relaxed);
    error_ = nullptr;
    const uint64_t gen = generation(ctrl_.load()) + 1;
    ctrl_.store(gen << 32 | kOpen);  // seq_cst: pairs with the sleepers_ check in worker_loop
    if (sleepers_.load() > 0) {
      wake_.fetch_add(1);
      wake_.notify_all();
    }

    work();
    // Close the job, then wait for the workers inside it.
    uint64_t c = ctrl_.load();
    while (!ctrl_.compare_exchange_weak(c, c & ~kOpen)) {
    }
    while ((ctrl_.load(std::memory_order_acquire) & kCountMask) != 0) SPECD_CPU_RELAX();
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  void work() {
    t_inside = true;
    for (;;) {
      const int64_t i = next_.fetch_add(1, std::memory_order_relaxed);
      if (i >= num_chunks_ || failed_.load(std::memory_order_relaxed)) break;
      const int64_t b = i * chunk_;
      try {
        body_.call(body_.ctx, b, std::min(n_, b + chunk_));
      } catch (...) {
        std::lock_guard g(error_mu_);
        if (!error_) error_ = std::current_exception();
        failed_.store(true, std::memory_order_relaxed);
      }
    }
    t_inside = false;
  }

  void worker_loop() {
    uint64_t seen = generation(ctrl_.load());
    for (;;) {
      uint64_t c = wait_for_new_generation(seen);
      if (stop_.load()) return;
      seen = generation(c);
      // Join the job if it is still open.
      while ((c & kOpen) != 0 && generation(c) == seen) {
        if (ctrl_.compare_exchange_weak(c, c + 1, std::memory_order_acquire)) {
          work();
          ctrl_.fetch_sub(1, std::memory_order_release);
          break;
        }
      }
    }
  }

  uint64_t wait_for_new_generation(uint64_t seen) {
    const auto deadline = std::chrono::steady_clock::now() + kSpin;
    for (int spins = 0;; ++spins) {
      const uint64_t c = ctrl_.load(std::memory_order_acquire);
      if (generation(c) != seen || stop_.load(std::memory_order_relaxed)) return c;
      SPECD_CPU_RELAX();
      if ((spins & 255) == 255 && std::chrono::steady_clock::now() > deadline) break;
    }
    for (;;) {
      const uint32_t epoch = wake_.load();
      sleepers_.fetch_add(1);  // seq_cst: pairs with the publish in run()
      const uint64_t c = ctrl_.load();
      if (generation(c) != seen || stop_.load()) {
        sleepers_.fetch_sub(1);
        return c;
      }
      wake_.wait(epoch);  // a futex on a 32-bit word: sleeps until run() bumps it
      sleepers_.fetch_sub(1);
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mu_;  // one job at a time
  std::atomic<uint64_t> ctrl_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<uint32_t> wake_{0};  // bumped to wake sleeping workers
  std::atomic<bool> stop_{false};
  detail::RangeBody body_{};
  int64_t n_ = 0, chunk_ = 1, num_chunks_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<bool> failed_{false};
  std::mutex error_mu_;
  std::exception_ptr error_;
};

std::mutex g_config_mu;

ThreadPool& pool() {
  static ThreadPool* p = [] {
    auto* tp = new ThreadPool();  // leaked on purpose: workers must outlive static dtors
    tp->resize(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
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

int num_threads() {
  return pool().size();
}

namespace detail {
void parallel_for(int64_t n, int64_t grain, RangeBody body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (n <= grain || t_inside || pool().size() == 1 || !pool().run(n, grain, body)) {
    const bool outer = !t_inside;
    t_inside = true;
    try {
      body.call(body.ctx, 0, n);
    } catch (...) {
      if (outer) t_inside = false;
      throw;
    }
    if (outer) t_inside = false;
  }
}
}  // namespace detail

}  // namespace specd::kernels
