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

void scale_min_k4(int s, const std::byte* scales, int* sc, int* mn) {
  if (s < 4) {
    *sc = u8(scales + s) & 63;
    *mn = u8(scales + s + 4) & 63;
  } else {
    *sc = (u8(scales + s + 4) & 15) | ((u8(scales + s - 4) >> 6) << 4);
    *mn = (u8(scales + s + 4) >> 4) | ((u8(scales + s) >> 6) << 4);
  }
}

// Q4_K / Q5_K: 256 elements in 8 sub-blocks of 32 with 6-bit scales and mins.
void dequantize_k45(const std::byte* b, float* y, bool five_bit) {
  const float d = f16_to_f32(u16(b));
  const float dmin = f16_to_f32(u16(b + 2));
  const std::byte* scales = b + 4;
  const std::byte* qh = b + 16;
  const std::byte* qs = five_bit ? b + 48 : b + 16;
  for (int pair = 0; pair < 4; ++pair) {
    for (int half = 0; half < 2; ++half) {
      const int s = 2 * pair + half;
      int sc = 0, mn = 0;
      scale_min_k4(s, scales, &sc, &mn);
      const float scale = d * static_cast<float>(sc), min = dmin * static_cast<float>(mn);
      for (int l = 0; l < 32; ++l) {
        const uint8_t byte = u8(qs + static_cast<ptrdiff_t>(32 * pair + l));
        int q = half == 0 ? byte & 15 : byte >> 4;
        if (five_bit && ((u8(qh + l) >> s) & 1)) q += 16;
        y[32 * s + l] = scale * static_cast<float>(q) - min;
      }
    }
  }
}

void dequantize_q6_k(const std::byte* b, float* y) {
  const float d = f16_to_f32(u16(b + 208));
  for (int half = 0; half < 2; ++half) {
    const std::byte* ql = b + static_cast<ptrdiff_t>(64 * half);
    const std::byte* qh = b + static_cast<ptrdiff_t>(128 + 32 * half);
    const std::byte* sc = b + static_cast<ptrdiff_t>(192 + 8 * half);
    float* out = y + static_cast<ptrdiff_t>(128 * half);
    for (int l = 0; l < 32; ++l) {
      const int h = u8(qh + l);
      const int q[4] = {(u8(ql + l) & 15) | ((h >> 0) & 3) << 4, (u8(ql + l + 32) & 15) | ((h >> 2) & 3) << 4,
                        (u8(ql + l) >> 4) | ((h >> 4) & 3) << 4, (u8(ql + l + 32) >> 4) | ((h >> 6) & 3) << 4};
      for (int k = 0; k < 4; ++k) {
        const auto scale = static_cast<int8_t>(u8(sc + static_cast<ptrdiff_t>(l / 16 + 2 * k)));
        out[l + 32 * k] = d * static_cast<float>(scale) * static_cast<float>(q[k] - 32);
      }
    }
  }
}

void dequantize_q8_k(const std::byte* b, float* y) {
  float d;
  std::memcpy(&d, b, 4);
  for (int j = 0; j < 256; ++j) y[j] = d * static_cast<float>(static_cast<int8_t>(u8(b + 4 + j)));
}

}  // namespace

bool is_converted_type(uint32_t t) noexcept {
  return t == kTypeQ4_1 || t == kTypeQ5_0 || t == kTypeQ5_1 || t == kTypeQ4_K || t == kTypeQ5_K || t == kTypeQ6_K ||
         t == kTypeQ8_K;
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
      case kTypeQ4_K:
        dequantize_k45(b, y, false);
        break;
      case kTypeQ5_K:
        dequantize_k45(b, y, true);
        break;
      case kTypeQ6_K:
        dequantize_q6_k(b, y);
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
