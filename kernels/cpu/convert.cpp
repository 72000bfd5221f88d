#include "specd/kernels/convert.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "cuda_dispatch.hpp"
#include "isa_kernels.hpp"
#include "k_quants.hpp"
#include "specd/error.hpp"
#include "specd/kernels/parallel.hpp"

namespace specd::kernels {
namespace {

// Work is split in units of 256 elements (one K-quant block, eight Q8_0/Q4_0 blocks, or the
// remainder of a shorter conversion), at least kGrain units per range.
constexpr int64_t kUnit = 256;
constexpr int64_t kGrain = 256;

void quantize_q8_0(const float* x, BlockQ8_0* out, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[b * 32 + i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = f32_to_f16(d);
    for (int i = 0; i < 32; ++i) out[b].q[i] = static_cast<int8_t>(std::round(x[b * 32 + i] * id));
  }
}

void quantize_q4_0(const float* x, BlockQ4_0* out, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < 32; ++i) {
      const float v = x[b * 32 + i];
      if (std::fabs(v) > amax) {
        amax = std::fabs(v);
        max = v;
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = f32_to_f16(d);
    for (int i = 0; i < 16; ++i) {
      const auto lo =
          static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x[b * 32 + i] * id + 8.5f))));
      const auto hi =
          static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x[b * 32 + 16 + i] * id + 8.5f))));
      out[b].q[i] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void check_n(DType dt, int64_t n, const char* op) {
  if (n < 0 || n % block_elems(dt) != 0) {
    throw Error(ErrorCode::kInvalidArgument, std::string(op) + ": " + std::to_string(n) + " elements of " +
                                                 std::string(dtype_name(dt)) + " (its data is whole blocks of " +
                                                 std::to_string(block_elems(dt)) + ")");
  }
}

}  // namespace

void to_f32(Device device, DType src_dtype, const void* src, float* dst, int64_t n) {
  check_n(src_dtype, n, "to_f32");
  if constexpr (kWithCuda)
    if (device == Device::kCuda) return cuda::to_f32(src_dtype, src, dst, n);
  detail::require_cpu(device, "to_f32");
  const cpu::ToF32Fn fn = cpu::active_kernels().to_f32[static_cast<int>(src_dtype)];
  const auto* s = static_cast<const uint8_t*>(src);
  parallel_for((n + kUnit - 1) / kUnit, kGrain, [&](int64_t ub, int64_t ue) {
    const int64_t b = ub * kUnit, e = std::min(n, ue * kUnit);
    fn(s + row_bytes(src_dtype, b), dst + b, e - b);
  });
}

void from_f32(Device device, const float* src, DType dst_dtype, void* dst, int64_t n) {
  check_n(dst_dtype, n, "from_f32");
  if constexpr (kWithCuda)
    if (device == Device::kCuda) return cuda::from_f32(src, dst_dtype, dst, n);
  detail::require_cpu(device, "from_f32");
  auto* d = static_cast<uint8_t*>(dst);
  parallel_for((n + kUnit - 1) / kUnit, kGrain, [&](int64_t ub, int64_t ue) {
    const int64_t b = ub * kUnit, e = std::min(n, ue * kUnit);
    uint8_t* out = d + row_bytes(dst_dtype, b);
    switch (dst_dtype) {
      case DType::kF32:
        std::memcpy(out, src + b, static_cast<size_t>(e - b) * sizeof(float));
        break;
      case DType::kF16:
        for (int64_t i = b; i < e; ++i) reinterpret_cast<uint16_t*>(out)[i - b] = f32_to_f16(src[i]);
        break;
      case DType::kBF16:
        for (int64_t i = b; i < e; ++i) reinterpret_cast<uint16_t*>(out)[i - b] = f32_to_bf16(src[i]);
        break;
      case DType::kQ8_0:
        quantize_q8_0(src + b, reinterpret_cast<BlockQ8_0*>(out), (e - b) / kQuantBlock);
        break;
      case DType::kQ4_0:
        quantize_q4_0(src + b, reinterpret_cast<BlockQ4_0*>(out), (e - b) / kQuantBlock);
        break;
      case DType::kQ4_K:
        cpu::quantize_q4_k(src + b, reinterpret_cast<BlockQ4_K*>(out), (e - b) / kSuperBlock);
        break;
      case DType::kQ5_K:
        cpu::quantize_q5_k(src + b, reinterpret_cast<BlockQ5_K*>(out), (e - b) / kSuperBlock);
        break;
      case DType::kQ6_K:
        cpu::quantize_q6_k(src + b, reinterpret_cast<BlockQ6_K*>(out), (e - b) / kSuperBlock);
        break;
      case DType::kQ3_K:
        cpu::quantize_q3_k(src + b, reinterpret_cast<BlockQ3_K*>(out), (e - b) / kSuperBlock);
        break;
      case DType::kQ2_K:
        cpu::quantize_q2_k(src + b, reinterpret_cast<BlockQ2_K*>(out), (e - b) / kSuperBlock);
        break;
    }
  });
}

}  // namespace specd::kernels
