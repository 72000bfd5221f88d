#include "specd/kernels/top_k_top_p.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

#include "cuda_dispatch.hpp"
#include "specd/error.hpp"

namespace specd::kernels {
namespace {

void filter_row(float* probs, int64_t cols, int32_t top_k, float top_p, std::vector<int32_t>& idx) {
  const auto V = static_cast<size_t>(cols);
  idx.resize(V);
  std::iota(idx.begin(), idx.end(), 0);
  auto more_likely = [&](int32_t a, int32_t b) {
    const float pa = probs[a], pb = probs[b];
    return pa > pb || (pa == pb && a < b);
  };
  size_t keep = V;
  if (top_k > 0 && static_cast<size_t>(top_k) < V) {
    keep = static_cast<size_t>(top_k);
    std::nth_element(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(keep), idx.end(), more_likely);
    for (size_t i = keep; i < V; ++i) probs[idx[i]] = 0.0f;
  }
  if (top_p < 1.0f) {
    std::sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(keep), more_likely);
    double total = 0.0;
    for (size_t i = 0; i < keep; ++i) total += probs[idx[i]];
    double before = 0.0;
    for (size_t i = 0; i < keep; ++i) {
      float& p = probs[idx[i]];
      if (i > 0 && before >= static_cast<double>(top_p) * total) {
        p = 0.0f;
      } else {
        before += p;
      }
    }
  }
}

}  // namespace

void top_k_top_p(Device device, float* probs, int64_t rows, int64_t cols, int32_t top_k, float top_p) {
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    throw Error(ErrorCode::kInvalidArgument, "top_k_top_p: top_p must be in (0, 1]");
  }
  const bool use_top_k = top_k > 0 && top_k < cols;
  if (!use_top_k && top_p >= 1.0f) return;
  if constexpr (kWithCuda)
    if (device == Device::kCuda) return cuda::top_k_top_p(probs, rows, cols, top_k, top_p);
  detail::require_cpu(device, "top_k_top_p");
  thread_local std::vector<int32_t> idx;  // allocation-free after the first call on a thread
  for (int64_t r = 0; r < rows; ++r) filter_row(probs + r * cols, cols, top_k, top_p, idx);
}

void top_k_indices(Device device, const float* x, int64_t cols, int32_t k, int32_t* out) {
  if (k < 1 || k > cols) throw Error(ErrorCode::kInvalidArgument, "top_k_indices: k must be in [1, cols]");
  if constexpr (kWithCuda)
    if (device == Device::kCuda) return cuda::top_k_indices(x, cols, k, out);
  detail::require_cpu(device, "top_k_indices");
  // A min-heap of the k best seen so far: one pass over the row, O(cols log k).
  auto better = [&](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
  std::vector<int32_t> heap;
  heap.reserve(static_cast<size_t>(k));
  for (int32_t i = 0; i < static_cast<int32_t>(cols); ++i) {
    if (static_cast<int32_t>(heap.size()) < k) {
      heap.push_back(i);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (better(i, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = i;
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  std::sort_heap(heap.begin(), heap.end(), better);
  std::copy(heap.begin(), heap.end(), out);
}

}  // namespace specd::kernels
