// top_k_top_p and top_k_indices on CUDA: one block per row, no sort. Entries rank by value
// (descending), ties by lower index, through an order-preserving 32-bit key; the k-th ranked
// entry is found by a binary search on the key (32 block-wide counts) and then on the index
// among the entries at that key (at most 31 more). Top-p's boundary is found the same way on
// the mass ranked before an entry, summed in double as on the CPU; the kept set is the CPU's
// except where the two summation orders round a boundary differently.
#include <cstdint>

#include "block_reduce.cuh"
#include "cuda_ops.hpp"

namespace specd::kernels::cuda {
namespace {

// Larger floats give larger keys (negative numbers below positive ones). -0 and +0 are one
// value (they tie, the lower index first, as on the CPU), so both take +0's key.
__device__ __forceinline__ uint32_t order_key(float x) {
  const uint32_t b = x == 0.0f ? 0u : __float_as_uint(x);
  return (b & 0x80000000u) != 0 ? ~b : b | 0x80000000u;
}

// The rank cut of a row: entry i is ranked before the cut iff key > kc or (key == kc and i < ic).
struct Cut {
  uint32_t key;
  int64_t index;
};

// #{i : key_i > t}, and #{i : key_i == t, i < before}.
__device__ int64_t count_above(const float* x, int64_t cols, uint32_t t, int64_t* scratch) {
  int64_t n = 0;
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) n += order_key(x[i]) > t ? 1 : 0;
  return block_sum(n, scratch);
}
__device__ int64_t count_at(const float* x, int64_t cols, uint32_t t, int64_t before, int64_t* scratch) {
  int64_t n = 0;
  for (int64_t i = threadIdx.x; i < before && i < cols; i += kThreads) n += order_key(x[i]) == t ? 1 : 0;
  return block_sum(n, scratch);
}

// The cut that keeps the k best entries (1 <= k <= cols).
__device__ Cut top_k_cut(const float* x, int64_t cols, int64_t k, int64_t* scratch) {
  // The smallest t with #{key > t} < k: the k-th best key.
  uint32_t lo = 0, hi = 0xffffffffu;  // answer in [lo, hi]
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (count_above(x, cols, mid, scratch) < k) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  const uint32_t t = lo;
  const int64_t need = k - count_above(x, cols, t, scratch);  // entries at t to keep, lowest indices
  int64_t a = 1, b = cols;                                    // smallest bound with `need` entries below it
  while (a < b) {
    const int64_t mid = a + (b - a) / 2;
    if (count_at(x, cols, t, mid, scratch) >= need) {
      b = mid;
    } else {
      a = mid + 1;
    }
  }
  return {t, a};
}

__device__ __forceinline__ bool before_cut(float v, int64_t i, Cut c) {
  const uint32_t key = order_key(v);
  return key > c.key || (key == c.key && i < c.index);
}

// Mass of the kept entries (before `kept`) ranked before (t, bound).
__device__ double mass_before(const float* p, int64_t cols, Cut kept, uint32_t t, int64_t bound, double* scratch) {
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
    if (!before_cut(p[i], i, kept)) continue;
    const uint32_t key = order_key(p[i]);
    if (key > t || (key == t && i < bound)) s += p[i];
  }
  return block_sum(s, scratch);
}

__global__ void top_k_top_p_kernel(float* probs, int64_t cols, int32_t top_k, float top_p) {
  __shared__ int64_t iscratch[kThreads / 32];
  __shared__ double dscratch[kThreads / 32];
  float* p = probs + blockIdx.x * cols;
  Cut kept{0, cols};  // everything: key > 0 or (key == 0 and i < cols) for every non-negative value
  if (top_k > 0 && top_k < cols) kept = top_k_cut(p, cols, top_k, iscratch);
  if (top_p < 1.0f) {
    const double target = static_cast<double>(top_p) * mass_before(p, cols, kept, 0u, cols, dscratch);
    // The lowest key t at which the mass ranked above the whole level is below the target.
    uint32_t lo = 0, hi = 0xffffffffu;
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      if (mass_before(p, cols, kept, mid, 0, dscratch) < target) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    // Within level lo: entries stay while the mass before them is below the target.
    int64_t a = 0, b = cols;  // the largest bound whose mass before is below the target, plus one
    while (a < b) {
      const int64_t mid = a + (b - a + 1) / 2;
      if (mass_before(p, cols, kept, lo, mid, dscratch) < target) {
        a = mid;
      } else {
        b = mid - 1;
      }
    }
    Cut nucleus{lo, a + 1};
    // The first ranked entry always stays (the best key, lowest index: the top-1 cut).
    const Cut first = top_k_cut(p, cols, 1, iscratch);
    if (!before_cut(p[first.index - 1], first.index - 1, nucleus)) nucleus = first;
    for (int64_t i = threadIdx.x; i < cols; i += kThreads)
      if (!before_cut(p[i], i, kept) || !before_cut(p[i], i, nucleus)) p[i] = 0.0f;
    return;
  }
  for (int64_t i = threadIdx.x; i < cols; i += kThreads)
    if (!before_cut(p[i], i, kept)) p[i] = 0.0f;
}

// The k best of one row, best first: the cut, then the kept ids ranked by one thread.
__global__ void top_k_indices_kernel(const float* x, int64_t cols, int32_t k, int32_t* out) {
  __shared__ int64_t iscratch[kThreads / 32];
  __shared__ int32_t filled;
  const Cut cut = top_k_cut(x, cols, k, iscratch);
  if (threadIdx.x == 0) filled = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < cols; i += kThreads)
    if (before_cut(x[i], i, cut)) out[atomicAdd(&filled, 1)] = static_cast<int32_t>(i);
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int32_t a = 1; a < k; ++a) {  // insertion sort by rank
    const int32_t id = out[a];
    int32_t b = a;
    for (; b > 0 && before_cut(x[id], id, Cut{order_key(x[out[b - 1]]), out[b - 1]}); --b) out[b] = out[b - 1];
    out[b] = id;
  }
}

}  // namespace

void top_k_top_p(float* probs, int64_t rows, int64_t cols, int32_t top_k, float top_p) {
  if (rows == 0 || cols == 0) return;
  top_k_top_p_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream()>>>(probs, cols, top_k, top_p);
  check_launch("top_k_top_p");
}

void top_k_indices(const float* x, int64_t cols, int32_t k, int32_t* out) {
  top_k_indices_kernel<<<1, kThreads, 0, stream()>>>(x, cols, k, out);
  check_launch("top_k_indices");
}

}  // namespace specd::kernels::cuda
