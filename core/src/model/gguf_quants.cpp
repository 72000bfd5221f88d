#include "model/gguf_quants.hpp"

#include <cstring>
#include <string>

#include "model/gguf.hpp"
#include "specd/error.hpp"

namespace specd::model::gguf {

namespace {

using kernels::f16_to_f32;

uint16_t u16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t u32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint8_t u8(const std::byte* p) {
  return std::to_integer<uint8_t>(*p);
}

// Q4_1 / Q5_0 / Q5_1: blocks of 32 with a 4-bit low part and optional 5th bits and min.
void dequantize_32(const std::byte* b, float* y, bool has_min, bool five_bit) {
  const float d = f16_to_f32(u16(b));
  const float m = has_min ? f16_to_f32(u16(b + 2)) : 0.0f;
  const std::byte* p = b + (has_min ? 4 : 2);
  const uint32_t qh = five_bit ? u32(p) : 0;
  const std::byte* qs = p + (five_bit ? 4 : 0);
  const int offset = five_bit && !has_min ? 16 : 0;
  for (int j = 0; j < 16; ++j) {
    const int lo = (u8(qs + j) & 15) | static_cast<int>(((qh >> j) & 1u) << 4);
    const int hi = (u8(qs + j) >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    y[j] = static_cast<float>(lo - offset) * d + m;
    y[j + 16] = static_cast<float>(hi - offset) * d + m;
  }
}

void dequantize_q8_k(const std::byte* b, float* y) {
  float d;
  std::memcpy(&d, b, 4);
  for (int j = 0; j < 256; ++j) y[j] = d * static_cast<float>(static_cast<int8_t>(u8(b + 4 + j)));
}

}  // namespace

bool is_converted_type(uint32_t t) noexcept {
  return t == kTypeQ4_1 || t == kTypeQ5_0 || t == kTypeQ5_1 || t == kTypeQ8_K;
}

kernels::DType converted_dtype(uint32_t) noexcept {
  return kernels::DType::kQ8_0;
}

void dequantize(uint32_t ggml_type, const std::byte* src, float* dst, int64_t n) {
  const TypeInfo& info = type_info(ggml_type);
  SPECD_CHECK(is_converted_type(ggml_type) && n >= 0 && n % info.block == 0, ErrorCode::kInternal,
              "gguf::dequantize: " + type_name(ggml_type) + " x " + std::to_string(n));
  const int64_t blocks = n / info.block;
  for (int64_t i = 0; i < blocks; ++i) {
    const std::byte* b = src + i * info.bytes;
    float* y = dst + i * info.block;
    switch (ggml_type) {
      case kTypeQ4_1:
        dequantize_32(b, y, true, false);
        break;
      case kTypeQ5_0:
        dequantize_32(b, y, false, true);
        break;
      case kTypeQ5_1:
        dequantize_32(b, y, true, true);
        break;
      case kTypeQ8_K:
        dequantize_q8_k(b, y);
        break;
      default:
        break;
    }
  }
}

}  // namespace specd::model::gguf
