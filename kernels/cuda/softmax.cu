// softmax, log_softmax and argmax on CUDA: one block per row. Sums in double, as the CPU's
// log_softmax (its softmax sums in float through a vector exp; both are within the suites'
// bounds of the double reference).
#include <math_constants.h>

#include "block_reduce.cuh"
#include "cuda_ops.hpp"

namespace specd::kernels::cuda {
namespace {

// The row's maximum; marks the row in *bad (the smallest such row) where every entry is -inf.
__device__ float row_max(const float* xr, int64_t cols, float* scratch, int32_t* bad) {
  float m = -CUDART_INF_F;
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) m = xr[i] > m ? xr[i] : m;
  m = block_max(m, scratch);
  if (m == -CUDART_INF_F && threadIdx.x == 0) atomicMin(reinterpret_cast<unsigned*>(bad), blockIdx.x);
  return m;
}

// softmax (kLog false: exp((x - max) / T) / sum) or log_softmax (x - max - log sum, in double).
template <bool kLog>
__global__ void softmax_kernel(const float* x, float* out, int64_t cols, float inv_t, int32_t* bad) {
  __shared__ float fscratch[kThreads / 32];
  __shared__ double dscratch[kThreads / 32];
  const float* xr = x + blockIdx.x * cols;
  float* o = out + blockIdx.x * cols;
  const float m = row_max(xr, cols, fscratch, bad);
  if (m == -CUDART_INF_F) return;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
    if constexpr (kLog) {
      sum += exp(static_cast<double>(xr[i]) - m);
    } else {
      const float e = expf((xr[i] - m) * inv_t);
      o[i] = e;
      sum += e;
    }
  }
  sum = block_sum(sum, dscratch);
  if constexpr (kLog) {
    const double lse = m + log(sum);
    for (int64_t i = threadIdx.x; i < cols; i += kThreads) o[i] = static_cast<float>(xr[i] - lse);
  } else {
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = threadIdx.x; i < cols; i += kThreads) o[i] *= inv;
  }
}

// First maximum, NaN skipped; 0 for a row of NaN only (the CPU's rule).
__global__ void argmax_kernel(const float* x, int64_t cols, int32_t* out) {
  __shared__ float vals[kThreads];
  __shared__ int64_t idx[kThreads];
  const float* xr = x + blockIdx.x * cols;
  float best = 0.0f;
  int64_t at = -1;
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
    const float v = xr[i];
    if (isnan(v)) continue;
    if (at < 0 || v > best) {
      best = v;
      at = i;
    }
  }
  vals[threadIdx.x] = best;
  idx[threadIdx.x] = at;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) {
      const int64_t j = idx[threadIdx.x + stride];
      const float v = vals[threadIdx.x + stride];
      const int64_t i = idx[threadIdx.x];
      // Larger value wins; on a tie the smaller index (the first maximum).
      if (j >= 0 && (i < 0 || v > vals[threadIdx.x] || (v == vals[threadIdx.x] && j < i))) {
        vals[threadIdx.x] = v;
        idx[threadIdx.x] = j;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<int32_t>(idx[0] < 0 ? 0 : idx[0]);
}

}  // namespace

int64_t softmax(const float* x, float* out, int64_t rows, int64_t cols, float temperature) {
  if (rows == 0) return -1;
  int32_t* bad = error_slot_reset();
  softmax_kernel<false><<<static_cast<unsigned>(rows), kThreads, 0, stream()>>>(x, out, cols, 1.0f / temperature, bad);
  check_launch("softmax");
  return error_slot_read(bad);
}

int64_t log_softmax(const float* x, float* out, int64_t rows, int64_t cols) {
  if (rows == 0) return -1;
  int32_t* bad = error_slot_reset();
  softmax_kernel<true><<<static_cast<unsigned>(rows), kThreads, 0, stream()>>>(x, out, cols, 1.0f, bad);
  check_launch("log_softmax");
  return error_slot_read(bad);
}

void argmax(const float* x, int64_t rows, int64_t cols, int32_t* out) {
  if (rows == 0) return;
  argmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream()>>>(x, cols, out);
  check_launch("argmax");
}

}  // namespace specd::kernels::cuda
