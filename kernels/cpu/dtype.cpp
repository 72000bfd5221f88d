#include "specd/kernels/dtype.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <string>

#include "specd/error.hpp"

namespace specd::kernels {

std::string_view dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kQ8_0:
      return "q8_0";
    case DType::kQ4_0:
      return "q4_0";
    case DType::kQ4_K:
      return "q4_k";
    case DType::kQ5_K:
      return "q5_k";
    case DType::kQ6_K:
      return "q6_k";
    case DType::kQ3_K:
      return "q3_k";
    case DType::kQ2_K:
      return "q2_k";
  }
  return "unknown";
}

DType parse_dtype(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "f32" || lower == "float32") return DType::kF32;
  if (lower == "f16" || lower == "float16") return DType::kF16;
  if (lower == "bf16" || lower == "bfloat16") return DType::kBF16;
  if (lower == "q8_0") return DType::kQ8_0;
  if (lower == "q4_0") return DType::kQ4_0;
  if (lower == "q4_k") return DType::kQ4_K;
  if (lower == "q5_k") return DType::kQ5_K;
  if (lower == "q6_k") return DType::kQ6_K;
  if (lower == "q3_k") return DType::kQ3_K;
  if (lower == "q2_k") return DType::kQ2_K;
  throw Error(ErrorCode::kInvalidArgument,
              "unknown dtype '" + std::string(text) +
                  "' (expected f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k, q3_k or q2_k)");
}

size_t row_bytes_checked(DType d, int64_t cols, std::string_view what) {
  if (cols < 0 || cols % block_elems(d) != 0) {
    throw Error(ErrorCode::kInvalidArgument, std::string(what) + ": a row of " + std::to_string(cols) +
                                                 " elements cannot be stored as " + std::string(dtype_name(d)) +
                                                 " (its rows hold whole blocks of " + std::to_string(block_elems(d)) +
                                                 ")");
  }
  return row_bytes(d, cols);
}

float f16_to_f32(uint16_t bits) noexcept {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in F32.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return std::bit_cast<float>(std::bit_cast<uint32_t>(magnitude) | sign);
  }
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

float bf16_to_f32(uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

uint16_t f32_to_f16(float value) noexcept {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // infinity or NaN (keep NaN quiet and non-zero)
    return static_cast<uint16_t>(sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u : 0u));
  }
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 -> inf
  const uint32_t exponent = magnitude >> 23;
  if (exponent < 113) {                                      // below 2^-14: F16 subnormal (units of 2^-24) or zero
    if (exponent < 102) return static_cast<uint16_t>(sign);  // below 2^-25: rounds to zero
    const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14..24
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = ((exponent - 112) << 10) | ((magnitude >> 13) & 0x3ffu);
  const uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // carry may bump the exponent
  return static_cast<uint16_t>(sign | half);
}

uint16_t f32_to_bf16(float value) noexcept {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

}  // namespace specd::kernels
