// The CPU kernels' thread pool: the one threading system of the CPU backend.
//
// Workers spin on an atomic for a short while after each job (so the next op of a step
// starts within a microsecond or so), then sleep on a futex: an idle engine burns no CPU.
// Work is handed out in chunks taken from an atomic counter, so a core slowed down by another
// process does not hold the others back.
//
// Worker threads are named "specd-kernels" (ps, top, /proc/<pid>/task/*/comm).
//
// Threading contract: one parallel_for runs at a time; a call made while another is running
// (from another thread, or nested inside a body) runs inline on the calling thread.
#pragma once

#include <cstdint>
#include <type_traits>

namespace specd::kernels {

// Sets the number of threads used by parallel_for, the calling thread included. n <= 0 = all
// hardware threads. Cheap when n is the current value.
void set_num_threads(int n);
int num_threads();

namespace detail {
struct RangeBody {
  void* ctx;
  void (*call)(void* ctx, int64_t begin, int64_t end);
};
void parallel_for(int64_t n, int64_t grain, RangeBody body);
}  // namespace detail

// Calls body(begin, end) over disjoint ranges covering [0, n), each at least `grain` long
// except possibly the last; a range may be given to any thread, and one thread may get
// several. Runs inline when n <= grain or one thread is configured. The first exception
// thrown by a body is rethrown on the calling thread (the remaining ranges are skipped).
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& body) {
  using Body = std::remove_reference_t<F>;
  detail::parallel_for(n, grain,
                       {const_cast<void*>(static_cast<const void*>(&body)),
                        [](void* c, int64_t b, int64_t e) { (*static_cast<Body*>(c))(b, e); }});
}

}  // namespace specd::kernels
