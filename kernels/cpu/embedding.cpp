#include "specd/kernels/embedding.hpp"

#include <string>

#include "isa_kernels.hpp"
#include "specd/error.hpp"

namespace specd::kernels {

void embedding(Device device, const WeightView& table, const int32_t* ids, int64_t n, float* out) {
  detail::require_cpu(device, "embedding");
  const size_t stride = row_bytes_checked(table.dtype, table.cols, "embedding");
  const cpu::ToF32Fn widen = cpu::active_kernels().to_f32[static_cast<int>(table.dtype)];
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids[i];
    if (id < 0 || id >= table.rows) {
      throw Error(ErrorCode::kInvalidArgument, "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                                   std::to_string(table.rows) + ")");
    }
    widen(static_cast<const uint8_t*>(table.data) + static_cast<size_t>(id) * stride, out + i * table.cols, table.cols);
  }
}

}  // namespace specd::kernels
