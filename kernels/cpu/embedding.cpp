#include "specd/kernels/embedding.hpp"

#include <cstring>
#include <string>

#include "specd/error.hpp"

namespace specd::kernels {

void embedding(Device device, const float* table, int64_t vocab, int64_t dim, const int32_t* ids,
               int64_t n, float* out) {
  detail::require_cpu(device, "embedding");
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids[i];
    if (id < 0 || id >= vocab) {
      throw Error(ErrorCode::kInvalidArgument, "token id " + std::to_string(id) +
                                                   " is outside the vocabulary [0, " +
                                                   std::to_string(vocab) + ")");
    }
    std::memcpy(out + i * dim, table + id * dim, static_cast<size_t>(dim) * sizeof(float));
  }
}

}  // namespace specd::kernels
