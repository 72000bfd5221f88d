// Element types of weights and KV caches, and the quantized block layouts.
//
// Q8_0 and Q4_0 are GGUF's block formats byte for byte, so GGUF tensors map without
// conversion. A row of `cols` elements (cols a multiple of 32) is cols / 32 blocks:
//   Q8_0: { fp16 d; int8 q[32]; }   (34 bytes)   value j = q[j] * d
//   Q4_0: { fp16 d; uint8 q[16]; }  (18 bytes)   value j      = ((q[j] & 15) - 8) * d
//                                                  value j + 16 = ((q[j] >> 4) - 8) * d
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace specd::kernels {

enum class DType : uint8_t { kF32, kF16, kBF16, kQ8_0, kQ4_0 };
inline constexpr int kNumDTypes = 5;

inline constexpr int64_t kQuantBlock = 32;  // elements per Q8_0 / Q4_0 block

struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t q[kQuantBlock];
};
struct BlockQ4_0 {
  uint16_t d;  // fp16 scale
  uint8_t q[kQuantBlock / 2];
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18, "GGUF block layouts");

// "f32", "f16", "bf16", "q8_0", "q4_0".
std::string_view dtype_name(DType dtype) noexcept;
// The inverse of dtype_name (also accepts "float32", "float16", "bfloat16"); throws
// specd::Error(kInvalidArgument) naming the text otherwise.
DType parse_dtype(std::string_view text);

constexpr bool is_quantized(DType d) {
  return d == DType::kQ8_0 || d == DType::kQ4_0;
}

// Bytes of one row of `cols` elements. Quantized types need cols % 32 == 0 (checked by
// row_bytes_checked, which throws specd::Error(kInvalidArgument) naming `what`).
constexpr size_t row_bytes(DType d, int64_t cols) {
  const auto n = static_cast<size_t>(cols);
  switch (d) {
    case DType::kF32:
      return n * 4;
    case DType::kF16:
    case DType::kBF16:
      return n * 2;
    case DType::kQ8_0:
      return n / kQuantBlock * sizeof(BlockQ8_0);
    case DType::kQ4_0:
      return n / kQuantBlock * sizeof(BlockQ4_0);
  }
  return 0;
}
size_t row_bytes_checked(DType d, int64_t cols, std::string_view what);

// Bit-level conversions between F32 and the 16-bit formats. Widening is exact; narrowing
// rounds to nearest even (F16: subnormals kept, overflow to infinity; NaN stays NaN).
float f16_to_f32(uint16_t bits) noexcept;
float bf16_to_f32(uint16_t bits) noexcept;
uint16_t f32_to_f16(float value) noexcept;
uint16_t f32_to_bf16(float value) noexcept;

}  // namespace specd::kernels
