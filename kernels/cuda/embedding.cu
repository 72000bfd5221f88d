// Embedding gather on CUDA for tables of every dtype (rows widened as to_f32): one block per id. An id outside the
// table marks *bad (the smallest such index in ids) and leaves its row unwritten.
#include "block_reduce.cuh"
#include "cuda_ops.hpp"
#include "widen.cuh"

namespace specd::kernels::cuda {
namespace {

template <class Widen>
__global__ void embedding_kernel(const void* table, int64_t rows, int64_t dim, const int32_t* ids, float* out,
                                 int32_t* bad, Widen widen) {
  const int32_t id = ids[blockIdx.x];
  if (id < 0 || id >= rows) {
    if (threadIdx.x == 0 && bad != nullptr) atomicMin(reinterpret_cast<unsigned*>(bad), blockIdx.x);
    return;
  }
  float* o = out + blockIdx.x * dim;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) o[i] = widen(table, id * dim + i);
}

template <class Widen>
void launch(const WeightView& table, const int32_t* ids, int64_t n, float* out, int32_t* bad) {
  embedding_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream()>>>(table.data, table.rows, table.cols, ids, out,
                                                                        bad, Widen{});
}

}  // namespace

int64_t embedding(const WeightView& table, const int32_t* ids, int64_t n, float* out, bool check) {
  if (n == 0) return -1;
  int32_t* bad = check ? error_slot_reset() : nullptr;
  with_widen(table.dtype, [&](auto widen) { launch<decltype(widen)>(table, ids, n, out, bad); });
  check_launch("embedding");
  return check ? error_slot_read(bad) : -1;
}

}  // namespace specd::kernels::cuda
