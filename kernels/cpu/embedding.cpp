#include "specd/kernels/embedding.hpp"

#include <string>

#include "cuda_dispatch.hpp"
#include "isa_kernels.hpp"
#include "specd/error.hpp"
#include "specd/kernels/device_memory.hpp"

namespace specd::kernels {

namespace {
[[noreturn]] void bad_id(int64_t id, int64_t vocab) {
  throw Error(ErrorCode::kInvalidArgument,
              "token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
}
}  // namespace

void embedding(Device device, const WeightView& table, const int32_t* ids, int64_t n, float* out) {
  const size_t stride = row_bytes_checked(table.dtype, table.cols, "embedding");
  if constexpr (kWithCuda) {
    if (device == Device::kCuda) {
      const int64_t at = cuda::embedding(table, ids, n, out);
      if (at < 0) return;
      int32_t id = 0;
      copy_to_host(device, &id, ids + at, sizeof id);
      bad_id(id, table.rows);
    }
  }
  detail::require_cpu(device, "embedding");
  const cpu::ToF32Fn widen = cpu::active_kernels().to_f32[static_cast<int>(table.dtype)];
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids[i];
    if (id < 0 || id >= table.rows) bad_id(id, table.rows);
    widen(static_cast<const uint8_t*>(table.data) + static_cast<size_t>(id) * stride, out + i * table.cols, table.cols);
  }
}

void embedding_of_checked_ids(Device device, const WeightView& table, const int32_t* ids, int64_t n, float* out) {
  if constexpr (kWithCuda) {
    if (device == Device::kCuda) {
      row_bytes_checked(table.dtype, table.cols, "embedding");
      cuda::embedding(table, ids, n, out, false);
      return;
    }
  }
  embedding(device, table, ids, n, out);
}

}  // namespace specd::kernels
