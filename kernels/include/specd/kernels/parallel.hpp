// A small persistent thread pool for the CPU kernels: the one threading system of the CPU
// backend. matmul splits output features over it and runs single-threaded OpenBLAS per slice;
// attention, norms and activations split their rows.
//
// Threading contract: parallel_for may be called from one thread at a time (the engine's step
// thread); nested calls from inside a body run inline on the calling worker.
#pragma once

#include <cstdint>
#include <functional>

namespace specd::kernels {

// Sets the number of threads used by parallel_for (OpenBLAS itself stays single-threaded).
// n <= 0 = all hardware threads. Cheap to call with the current value.
void set_num_threads(int n);
int num_threads();

// Calls body(begin, end) over disjoint ranges covering [0, n); ranges are at least `grain`
// long (except the last). Runs inline when n <= grain or one thread is configured. Exceptions
// thrown by a body are rethrown on the calling thread.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

}  // namespace specd::kernels
